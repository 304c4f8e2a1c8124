//! `diagnose`: outputs, exit codes and clear errors for bad input.

use crate::support::{cause_ids, golden, outcome, run, temp_file};

const FIXTURE: &str = "fixtures/kv_cache_exhaustion.om.gz";
const ARGS: &str = "vllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 256";

#[test]
fn a_fault_exits_1_with_the_table_view() {
    let (code, out, err) = outcome(&run(&[
        "diagnose",
        FIXTURE,
        "--engine-args",
        ARGS,
        "--format",
        "table",
    ]));
    assert_eq!(code, 1, "{err}");
    golden("diagnose_kv_cache_exhaustion.txt", &out);
}

#[test]
fn json_follows_the_output_contract() {
    let (code, out, err) = outcome(&run(&[
        "diagnose",
        FIXTURE,
        "--engine-args",
        ARGS,
        "--format",
        "json",
    ]));
    assert_eq!(code, 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let t = &v["targets"][0];
    assert_eq!(t["target"]["engine"], "vllm");
    assert_eq!(
        t["target"]["labels"]["model_name"],
        "Qwen/Qwen2.5-7B-Instruct"
    );
    assert_eq!(t["status"], "critical");
    assert_eq!(t["causes"][0]["id"], "kv_cache_exhaustion");
    assert_eq!(t["causes"][0]["rank"], 1);
    assert_eq!(t["causes"][0]["chain"][0], "kv_cache_exhaustion");
    assert!(t["causes"][0]["score"].as_f64().unwrap() > 0.5);
    assert_eq!(
        t["causes"][0]["remediations"][0]["action"],
        "--kv-cache-dtype fp8"
    );
    assert!(t["causes"][0]["evidence"][0]["condition"].is_string());
    assert!(t["symptoms"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["id"] == "high_ttft"));
    assert!(t["unchecked"].is_array());
    assert!(v["errors"].as_array().unwrap().is_empty());
    golden("diagnose_kv_cache_exhaustion.json", &out);
}

#[test]
fn markdown_output() {
    let (code, out, _) = outcome(&run(&["diagnose", FIXTURE, "--format", "markdown"]));
    assert_eq!(code, 1);
    assert!(
        out.starts_with("## vllm · Qwen/Qwen2.5-7B-Instruct"),
        "{out}"
    );
    assert!(out.contains("| 1 | `kv_cache_exhaustion` |"), "{out}");
}

#[test]
fn a_healthy_replica_exits_0() {
    let (code, out, err) = outcome(&run(&[
        "diagnose",
        "fixtures/healthy_busy.om.gz",
        "--format",
        "json",
    ]));
    assert_eq!(code, 0, "{err}\n{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["targets"][0]["status"], "healthy");
    assert!(v["targets"][0]["symptoms"].as_array().unwrap().is_empty());
}

#[test]
fn at_and_window_select_the_time_frame() {
    // Early in the recording the KV cache had not filled yet.
    let early = outcome(&run(&[
        "diagnose",
        FIXTURE,
        "--at",
        "2026-12-01T00:03:00Z",
        "--window",
        "2m",
        "--format",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&early.1).unwrap();
    assert_eq!(v["targets"][0]["window"]["length_ms"], 120_000);
    assert_eq!(v["targets"][0]["window"]["end_ms"], 1_796_083_380_000_i64);
    let unix = outcome(&run(&[
        "diagnose",
        FIXTURE,
        "--at",
        "1796083380",
        "--window",
        "2m",
        "--format",
        "json",
    ]));
    assert_eq!(early.1, unix.1);
}

#[test]
fn engine_args_facts_and_slos_apply() {
    let dir = tempfile::tempdir().unwrap();
    let args = temp_file(dir.path(), "args.txt", "VLLM_TRACE_FUNCTION=1 vllm serve Qwen/Qwen2.5-7B-Instruct \\\n  --max-num-seqs=128 --enforce-eager --no-enable-prefix-caching --kv-cache-dtype fp8\n");
    let at = format!("@{}", args.display());
    let (_, out, err) = outcome(&run(&[
        "diagnose",
        FIXTURE,
        "--engine-args",
        &at,
        "--fact",
        "streaming=true",
        "--slo",
        "ttft_p99_seconds=100",
        "--format",
        "json",
    ]));
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    let facts = &v["targets"][0]["facts"];
    assert_eq!(facts["max_num_seqs"], 128.0);
    assert_eq!(facts["enforce_eager"], true);
    assert_eq!(facts["enable_prefix_caching"], false);
    assert_eq!(facts["kv_cache_dtype"], "fp8");
    assert_eq!(facts["trace_function"], true);
    assert_eq!(facts["streaming"], true);
    assert_eq!(facts["model"], "Qwen/Qwen2.5-7B-Instruct");
    // A 100 s TTFT objective: high_ttft is no longer a symptom.
    assert!(!v["targets"][0]["symptoms"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["id"] == "high_ttft"));
}

#[test]
fn lifetime_averages_without_timestamps() {
    // A single saved /metrics page: strip timestamps and keep the last scrape of each series.
    let text = llm_doctor::source::file::read_text(&crate::support::root().join(FIXTURE)).unwrap();
    let mut last: std::collections::BTreeMap<String, String> = Default::default();
    let mut order = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let (series, rest) = line.rsplit_once(' ').unwrap();
        let _ = rest;
        let (key, value) = series.rsplit_once(' ').unwrap();
        if !last.contains_key(key) {
            order.push(key.to_string());
        }
        last.insert(key.to_string(), value.to_string());
    }
    let page: String = order.iter().map(|k| format!("{k} {}\n", last[k])).collect();
    let dir = tempfile::tempdir().unwrap();
    let f = temp_file(dir.path(), "metrics.txt", &page);
    let (code, out, err) = outcome(&run(&["diagnose", f.to_str().unwrap(), "--format", "json"]));
    assert_eq!(code, 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let t = &v["targets"][0];
    assert_eq!(t["window"]["lifetime"], true);
    assert!(t["notes"][0].as_str().unwrap().contains("no timestamps"));
    // Rates are unknown without timestamps, and listed as such.
    assert!(t["unchecked"]
        .as_array()
        .unwrap()
        .iter()
        .any(|u| u["missing"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "preemptions_per_second")));
}

#[test]
fn bad_input_gets_a_clear_error_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str, text: &str| temp_file(dir.path(), name, text).display().to_string();
    let bad_value = p("bad.om", "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 12a 1796083200\n# EOF\n");
    let empty = p("empty.om", "");
    let unknown = p("unknown.prom", "some_metric 1\n");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![bad_value.clone()], "bad.om:2:"),
        (vec![empty], "no samples"),
        (vec![unknown], "no serving-engine, GPU or host metrics"),
        (
            vec!["fixtures/does-not-exist.om".into()],
            "reading `fixtures/does-not-exist.om`",
        ),
        (
            vec![FIXTURE.into(), "--fact".into(), "max_num_seq=4".into()],
            "did you mean `max_num_seqs`?",
        ),
        (
            vec![FIXTURE.into(), "--fact".into(), "max_num_seqs=four".into()],
            "must be a number",
        ),
        (
            vec![FIXTURE.into(), "--slo".into(), "ttft=2".into()],
            "unknown SLO `ttft`",
        ),
        (
            vec![FIXTURE.into(), "--at".into(), "yesterday".into()],
            "--at",
        ),
        (
            vec![FIXTURE.into(), "--window".into(), "5 minutes".into()],
            "--window",
        ),
        // Two files that disagree about the same series: refused, in either order.
        (
            vec![FIXTURE.into(), "fixtures/healthy_idle.om.gz".into()],
            "disagree on 9439 sample(s)",
        ),
        (
            vec!["fixtures/healthy_idle.om.gz".into(), FIXTURE.into()],
            "disagree on 9439 sample(s)",
        ),
        // Files that are not metrics are named for what they are.
        (
            vec!["examples/doctor.yaml".into()],
            "looks like YAML (`listen: 127.0.0.1:9095`)",
        ),
        (
            vec![p("a.json", "{\"a\": 1}")],
            "is JSON but not a Prometheus API answer",
        ),
        // One sample per window cannot make a rate; the step is said.
        (
            vec![FIXTURE.into(), "--window".into(), "10s".into()],
            "scraped every 15s; use at least 30s",
        ),
        // A window after the recording holds nothing.
        (
            vec![FIXTURE.into(), "--at".into(), "2026-12-01T01:00:00Z".into()],
            "after the last sample",
        ),
        (
            vec![
                FIXTURE.into(),
                "--engine-args".into(),
                "python app.py".into(),
            ],
            "no serving command found",
        ),
        (
            vec![FIXTURE.into(), "--at".into(), "2020-01-01T00:00:00Z".into()],
            "before the first sample",
        ),
        // Milliseconds by mistake used to give a window in the year 58885.
        (
            vec![FIXTURE.into(), "--at".into(), "1796083807000".into()],
            "it looks like milliseconds; Unix seconds are expected (`1796083807`)",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["diagnose".to_string()];
        all.extend(args.clone());
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let (code, out, err) = outcome(&run(&refs));
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            err.contains(expected),
            "{args:?}: expected `{expected}` in: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let (_, _, err) = outcome(&run(&["diagnose", &bad_value]));
    let err = err.replace(dir.path().to_str().unwrap(), "DIR");
    golden("diagnose_parse_error.txt", &err);
}

/// A healthy verdict says what it rests on: a vLLM-only recording (no GPU exporter, no error
/// counter) cannot check oom or high_error_rate, and the status line and the JSON say so.
#[test]
fn healthy_says_which_checks_ran() {
    let file = "corpus/vidur/vidur-llama3-8b-a100-healthy-conv.om.gz";
    let (code, table, err) = outcome(&run(&[
        "diagnose", file, "--window", "12m", "--format", "table",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(
        table.contains("status: HEALTHY (5 of 7 checks ran; not checked: oom, high_error_rate)"),
        "{table}"
    );
    let (_, json, _) = outcome(&run(&[
        "diagnose", file, "--window", "12m", "--format", "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let c = &v["targets"][0]["coverage"];
    assert_eq!(c["checked"], 5, "{c}");
    assert_eq!(c["total"], 7, "{c}");
    assert_eq!(
        c["not_checked"],
        serde_json::json!(["oom", "high_error_rate"])
    );
}

/// The remediations of the first cause, by id: (action, already).
fn fixes_of(args: &[&str]) -> std::collections::BTreeMap<String, (String, Option<String>)> {
    let mut all = vec![
        "diagnose",
        "fixtures/kv_cache_exhaustion.om.gz",
        "--format",
        "json",
    ];
    all.extend_from_slice(args);
    let (_, out, err) = crate::support::outcome(&crate::support::run(&all));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
    let cause = &v["targets"][0]["causes"][0];
    assert_eq!(cause["id"], "kv_cache_exhaustion");
    cause["remediations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                (
                    r["action"].as_str().unwrap_or("").to_string(),
                    r["already"].as_str().map(str::to_string),
                ),
            )
        })
        .collect()
}

/// Per cause of the first target: whether each remediation is already in effect, in order.
fn already_in_order(args: &[&str]) -> Vec<(String, Vec<bool>)> {
    let (_, out, err) = crate::support::outcome(&crate::support::run(args));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
    v["targets"][0]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let already = c["remediations"].as_array().unwrap().iter();
            let already = already.map(|r| !r["already"].is_null()).collect();
            (c["id"].as_str().unwrap().to_string(), already)
        })
        .collect()
}

#[test]
fn fixes_to_do_come_before_fixes_already_in_effect() {
    // A full KV cache on a replica that already quantizes its cache and uses 0.95 of the GPU.
    let kv = already_in_order(&[
        "diagnose",
        "fixtures/kv_cache_exhaustion.om.gz",
        "--format",
        "json",
        "--engine-args",
        "vllm serve Qwen/Qwen2.5-7B-Instruct --kv-cache-dtype fp8 --gpu-memory-utilization 0.95",
    ]);
    // A neighbour pinned to llama-server's core (no debug tracing to turn off).
    let cpu = already_in_order(&[
        "diagnose",
        "corpus/llamacpp/llamacpp-fresh26-pinned-contention-np2-45pct-1w.om.gz",
        "--format",
        "json",
    ]);
    for (case, causes) in [("kv", &kv), ("cpu", &cpu)] {
        let (id, already) = &causes[0];
        assert!(
            already.contains(&true),
            "{case}: {id} has nothing in effect"
        );
        assert!(!already[0], "{case}: {id}'s first fix is already in effect");
        for (id, already) in causes {
            assert!(
                already.windows(2).all(|w| w[0] <= w[1]),
                "{case}: {id} puts a fix in effect before one to do: {already:?}"
            );
        }
    }
    assert_eq!(cpu[0].0, "cpu_bottleneck");
}

/// The first cause of `file` diagnosed with `extra` arguments, and its fixes in order: (id,
/// the values that show its mechanism, as `name = value`).
fn fits_in_order(file: &str, extra: &[&str]) -> (String, Vec<(String, Option<String>)>) {
    let mut args = vec!["diagnose", file, "--format", "json"];
    args.extend_from_slice(extra);
    let (_, out, err) = crate::support::outcome(&crate::support::run(&args));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
    let cause = &v["targets"][0]["causes"][0];
    let fixes = cause["remediations"].as_array().unwrap().iter();
    let fixes = fixes.map(|r| {
        let fits = r["fits"]["values"].as_object().map(|values| {
            let values = values.iter().map(|(name, v)| match v.as_f64() {
                Some(n) => format!("{name} = {}", llm_doctor::report::number(n)),
                None => format!("{name} = {v}"),
            });
            values.collect::<Vec<_>>().join(", ")
        });
        (r["id"].as_str().unwrap().to_string(), fits)
    });
    (cause["id"].as_str().unwrap().to_string(), fixes.collect())
}

#[test]
fn the_first_fix_is_the_one_for_the_mechanism_measured() {
    let tracing_on = [
        "--engine-args",
        "VLLM_TRACE_FUNCTION=1 vllm serve Qwen/Qwen2.5-7B-Instruct",
    ];
    // As the case's file gives them.
    let small_kv = [
        "--window",
        "12m",
        "--engine-args",
        "vllm serve meta-llama/Meta-Llama-3-8B --max-num-seqs 128 --max-model-len 4096 --enable-chunked-prefill --max-num-batched-tokens 2048 --num-gpu-blocks-override 1500",
    ];
    let cases: [(&str, &[&str], &str, &str, &str); 4] = [
        // SGLang's tokenizer process pegs a core: more CPU for it.
        (
            "fixtures/sglang_cpu_bottleneck.om.gz",
            &[],
            "cpu_bottleneck",
            "add_frontend_cpu",
            "frontend_cpu_cores = 1",
        ),
        // A neighbour pinned to llama-server's core: the replica's own tasks wait for a CPU
        // as long as they run (cAdvisor), so the fix keeps the neighbour off its cores.
        (
            "corpus/llamacpp/llamacpp-fresh21-pinned-contention-np2-30pct-1w.om.gz",
            &[],
            "cpu_bottleneck",
            "reduce_host_contention",
            "replica_cpu_wait_ratio = ",
        ),
        // Debug tracing left on: turn it off, before anything else.
        (
            "fixtures/cpu_bottleneck.om.gz",
            &tracing_on,
            "cpu_bottleneck",
            "disable_debug_tracing",
            "fact.trace_function = true",
        ),
        // Bursts (arrivals at CV 6) overflow a small cache: cap concurrency at what it holds,
        // before more room for the average load.
        (
            "corpus/vidur/vidur-fresh11-llama3-8b-a100-burst-cv6-small-kv.om.gz",
            &small_kv,
            "kv_cache_exhaustion",
            "limit_concurrency",
            "arrival_dispersion_index = ",
        ),
    ];
    for (file, extra, cause, first, shown) in cases {
        let (id, fixes) = fits_in_order(file, extra);
        assert_eq!(id, cause, "{file}");
        assert_eq!(fixes[0].0, first, "{file}: {fixes:?}");
        let fits = fixes[0].1.as_deref().unwrap_or_default();
        assert!(fits.contains(shown), "{file}: {fixes:?}");
        // Tracing pegs the API server, which more CPU would also relieve: both fit, in the
        // playbook's order. Elsewhere only the fix that fits says so.
        let fitting = fixes.iter().filter(|(_, f)| f.is_some()).count();
        let expected = if first == "disable_debug_tracing" {
            2
        } else {
            1
        };
        assert_eq!(fitting, expected, "{file}: {fixes:?}");
    }
}

#[test]
fn a_replica_that_already_chunks_its_prefills_is_told_the_next_step() {
    // Decodes stalled by prefills (a Vidur run), told as if the replica chunked them at the
    // budget the fix would set: chunking is then in effect, and not the first thing to do.
    let engine_args = |chunking: &str| {
        format!("vllm serve meta-llama/Meta-Llama-3-8B --max-num-seqs 128 --max-model-len 4096 {chunking}")
    };
    let fixes = |chunking: &str| {
        let args = engine_args(chunking);
        let (_, out, err) = crate::support::outcome(&crate::support::run(&[
            "diagnose",
            "corpus/vidur/vidur-llama3-8b-a100-no-chunk-arxiv.om.gz",
            "--window",
            "12m",
            "--engine-args",
            &args,
            "--format",
            "json",
        ]));
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
        let cause = &v["targets"][0]["causes"][0];
        assert_eq!(cause["id"], "prefill_decode_interference", "{chunking}");
        cause["remediations"].as_array().unwrap().clone()
    };
    let off = fixes("--no-enable-chunked-prefill --max-num-batched-tokens 2048");
    assert_eq!(off[0]["id"], "enable_chunked_prefill");
    assert!(off[0]["already"].is_null());
    let on = fixes("--enable-chunked-prefill --max-num-batched-tokens 2048");
    assert_eq!(on[0]["id"], "disaggregate_prefill");
    assert_eq!(on[1]["id"], "enable_chunked_prefill");
    assert!(on[1]["already"]
        .as_str()
        .unwrap()
        .contains("max_num_batched_tokens = 2048"));
    assert!(on[1]["action"]
        .as_str()
        .unwrap()
        .contains("already chunked at 2048 tokens"));
    // A larger budget is still worth lowering.
    let large = fixes("--enable-chunked-prefill --max-num-batched-tokens 16384");
    assert_eq!(large[0]["id"], "enable_chunked_prefill");
    assert!(large[0]["already"].is_null());
}

#[test]
fn fixes_already_in_effect_are_not_advised_and_flag_values_show_the_current_one() {
    let set = fixes_of(&[
        "--engine-args",
        "vllm serve Qwen/Qwen2.5-7B-Instruct --kv-cache-dtype fp8 --gpu-memory-utilization 0.95 --enable-prefix-caching",
    ]);
    for id in [
        "quantize_kv_cache",
        "raise_gpu_memory_utilization",
        "enable_prefix_caching",
    ] {
        let (action, already) = &set[id];
        assert!(already.is_some(), "{id}: {action}");
        assert!(
            !action.starts_with("--"),
            "{id} advises a flag again: {action}"
        );
    }
    assert_eq!(
        set["quantize_kv_cache"].1.as_deref(),
        Some("kv_cache_dtype = fp8")
    );
    assert!(set["raise_gpu_memory_utilization"].0.contains("above 0.95"));

    let unset = fixes_of(&[
        "--engine-args",
        "vllm serve Qwen/Qwen2.5-7B-Instruct --no-enable-prefix-caching",
    ]);
    assert_eq!(
        unset["quantize_kv_cache"],
        ("--kv-cache-dtype fp8".to_string(), None)
    );
    assert_eq!(
        unset["raise_gpu_memory_utilization"].0,
        "--gpu-memory-utilization 0.95 (now 0.9)"
    );
    assert_eq!(
        unset["enable_prefix_caching"],
        ("--enable-prefix-caching".to_string(), None)
    );
}

#[test]
fn each_cause_says_why_it_ranks_where_it_does() {
    let (_, out, err) = crate::support::outcome(&crate::support::run(&[
        "diagnose", FIXTURE, "--format", "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
    let causes = v["targets"][0]["causes"].as_array().unwrap();
    let why = |id: &str| {
        causes
            .iter()
            .find(|c| c["id"] == id)
            .and_then(|c| c["ranked_by"].as_str())
            .unwrap_or_else(|| panic!("no {id}"))
            .to_string()
    };
    let first = why("kv_cache_exhaustion");
    assert!(
        first.starts_with("root cause of a symptom that fired"),
        "{first}"
    );
    assert!(first.contains("(critical)"), "{first}");
    // queue_backlog follows from the full cache: it ranks below whatever its score.
    assert!(why("queue_backlog").starts_with("downstream of another fired cause"));
    let (_, table, _) = crate::support::outcome(&crate::support::run(&[
        "diagnose", FIXTURE, "--format", "table",
    ]));
    assert!(
        table.contains("(root cause of a symptom that fired"),
        "{table}"
    );
    let (_, md, _) = crate::support::outcome(&crate::support::run(&[
        "diagnose", FIXTURE, "--format", "markdown",
    ]));
    assert!(md.contains("| ranked by |"), "{md}");
}

#[test]
fn a_dash_reads_the_recording_from_standard_input() {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_llm-doctor"))
        .args(["diagnose", "-", "--format", "json"])
        .current_dir(crate::support::root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The gzip file as it is: standard input gets the same sniffing as a file.
    let bytes = std::fs::read(crate::support::root().join(FIXTURE)).unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["targets"][0]["causes"][0]["id"], "kv_cache_exhaustion");
    // Errors name standard input, not a temporary file.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_llm-doctor"))
        .args(["diagnose", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"garbage line\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("<stdin>:1:9: invalid value `line`"), "{err}");
}

fn table(args: &[&str]) -> String {
    let mut all = vec!["diagnose", "--format", "table"];
    all.extend_from_slice(args);
    let (_, out, err) = crate::support::outcome(&crate::support::run(&all));
    assert!(!out.is_empty(), "{err}");
    out
}

#[test]
fn the_table_fits_the_width_it_is_given() {
    for width in ["80", "100"] {
        let out = table(&[FIXTURE, "--width", width]);
        let widest = out.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(
            widest <= width.parse().unwrap(),
            "{widest} > {width}:\n{out}"
        );
    }
    // Off a terminal, 150 columns as before; no line runs on for hundreds.
    let out = table(&[FIXTURE]);
    assert!(out.lines().all(|l| l.chars().count() <= 150), "{out}");
}

#[test]
fn a_fleet_shows_troubled_replicas_in_full_and_healthy_ones_in_a_line() {
    let fleet = "fixtures/fleet_mixed.om.gz";
    let out = table(&[fleet]);
    assert!(
        out.contains("2 healthy (--all shows them in full):"),
        "{out}"
    );
    let one_liners = out.lines().filter(|l| l.ends_with("· healthy")).count();
    assert_eq!(one_liners, 2, "{out}");
    let narrow = table(&[fleet, "--width", "100"]);
    assert!(narrow.lines().all(|l| l.chars().count() <= 100), "{narrow}");
    assert!(
        !out.contains("No problem found."),
        "healthy replicas are not shown in full: {out}"
    );
    let all = table(&[fleet, "--all"]);
    assert_eq!(all.matches("No problem found.").count(), 2, "{all}");
    let problems = table(&[fleet, "--problems-only"]);
    assert!(!problems.contains("healthy (--all"), "{problems}");
    assert!(problems.contains("small_batch_limit") && problems.contains("kv_cache_exhaustion"));
}

#[test]
fn colour_follows_the_color_flag() {
    let always = table(&[FIXTURE, "--color", "always"]);
    assert!(always.contains("\x1b[1;31mCRITICAL"), "{always}");
    // support::run sets NO_COLOR and stdout is a pipe: auto and never colour nothing.
    for choice in ["auto", "never"] {
        assert!(
            !table(&[FIXTURE, "--color", choice]).contains('\x1b'),
            "{choice}"
        );
    }
}

#[test]
fn json_output_follows_the_published_schema() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(crate::support::root().join("schema/diagnose.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let fixtures: Vec<String> = std::fs::read_dir(crate::support::root().join("fixtures"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".om.gz"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(fixtures.len() > 40);
    let mut outputs = Vec::new();
    for f in fixtures.iter().map(String::as_str).chain([
        "corpus/llamacpp/llamacpp-cpu-contention.om.gz",
        "tests/data/postmortem/pm-drain.om.gz",
    ]) {
        let (_, out, err) =
            crate::support::outcome(&crate::support::run(&["diagnose", f, "--format", "json"]));
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{f}: {e}: {err}"));
        crate::inputs::validate(&schema, &v).unwrap_or_else(|e| panic!("{f}: {e}"));
        outputs.push(v);
    }
    // Beside request records (a real nginx log, a real vLLM's spans) the slowest requests come
    // too, each with its split, in the same schema.
    let id = "vllm-max-num-seqs-4-heavy";
    let (_, out, err) = crate::support::outcome(&crate::support::run(&[
        "diagnose",
        &format!("corpus/vllm/{id}.om.gz"),
        &format!("corpus/vllm/requests/{id}.jsonl.gz"),
        &format!("corpus/vllm/traces/{id}.jsonl.gz"),
        "--format",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
    crate::inputs::validate(&schema, &v).unwrap_or_else(|e| panic!("{id}: {e}"));
    let slowest = &v["slowest_requests"];
    assert_eq!(slowest["slow"], 5, "{slowest}");
    let first = &slowest["listed"][0];
    assert!(first["queue_seconds"].as_f64().unwrap() > 0.0, "{first}");
    assert!(first["outside_engine_seconds"].is_number(), "{first}");
    let mut doctored = v.clone();
    doctored["slowest_requests"]["listed"][0]["surprise"] = serde_json::json!(1);
    assert!(crate::inputs::validate(&schema, &doctored).is_err());
    // The schema has teeth: a field it does not know, or a status it does not list, fails.
    let mut doctored = outputs[0].clone();
    doctored["targets"][0]["surprise"] = serde_json::json!(1);
    assert!(crate::inputs::validate(&schema, &doctored).is_err());
    let mut doctored = outputs[0].clone();
    doctored["targets"][0]["status"] = serde_json::json!("fine");
    assert!(crate::inputs::validate(&schema, &doctored).is_err());
}

#[test]
fn an_unreadable_api_answer_says_why_once() {
    let dir = tempfile::tempdir().unwrap();
    let f = temp_file(
        dir.path(),
        "q.json",
        r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"x"},"values":[[1,"a"]]}]}}"#,
    );
    let (code, _, err) =
        crate::support::outcome(&crate::support::run(&["diagnose", f.to_str().unwrap()]));
    assert_eq!(code, 2);
    assert_eq!(err.matches("invalid sample value `a`").count(), 1, "{err}");
}

/// A vLLM replica scraped every 15 s for five minutes whose process start time changes at the
/// given scrapes (each change a restart); its counters start over at each restart.
fn restarting_replica(restart_at: &[usize]) -> String {
    let mut out = String::new();
    let mut start = 1_796_000_000.0_f64;
    let mut done = 0.0_f64;
    let mut lines: Vec<(String, Vec<String>)> = vec![
        ("process_start_time_seconds gauge".into(), vec![]),
        ("vllm:request_success counter".into(), vec![]),
        ("vllm:num_requests_running gauge".into(), vec![]),
        ("vllm:num_requests_waiting gauge".into(), vec![]),
    ];
    for i in 0..21 {
        let t = 1_796_000_300.0 + 15.0 * i as f64;
        if restart_at.contains(&i) {
            start = t - 5.0;
            done = 0.0;
        }
        done += 12.0;
        let l = "{instance=\"gpu-node-1:8000\",job=\"vllm\",model_name=\"m\"}";
        lines[0].1.push(format!(
            "process_start_time_seconds{{instance=\"gpu-node-1:8000\",job=\"vllm\"}} {start} {t}"
        ));
        lines[1]
            .1
            .push(format!("vllm:request_success_total{l} {done} {t}"));
        lines[2]
            .1
            .push(format!("vllm:num_requests_running{l} 4 {t}"));
        lines[3]
            .1
            .push(format!("vllm:num_requests_waiting{l} 0 {t}"));
    }
    for (ty, samples) in lines {
        out.push_str(&format!("# TYPE {ty}\n"));
        for s in samples {
            out.push_str(&s);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

#[test]
fn a_process_that_restarts_twice_in_the_window_is_a_crash_loop() {
    let dir = tempfile::tempdir().unwrap();
    let causes = |restarts: &[usize]| {
        let f = temp_file(dir.path(), "r.om", &restarting_replica(restarts));
        let (_, out, err) = outcome(&run(&["diagnose", f.to_str().unwrap(), "--format", "json"]));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{err}"));
        let t = v["targets"][0].clone();
        (cause_ids(&t), t)
    };
    let (ids, t) = causes(&[6, 14]);
    assert_eq!(ids.first().map(String::as_str), Some("crash_loop"), "{t}");
    assert_ne!(t["status"], "healthy", "{t}");
    // One restart without server errors is a deploy, not a loop.
    let (ids, _) = causes(&[10]);
    assert!(!ids.contains(&"crash_loop".to_string()), "{ids:?}");
}

/// `diagnose --format json` of a snapshot written to `dir/name`.
fn diagnose_snapshot(dir: &std::path::Path, name: &str, text: &str) -> serde_json::Value {
    let path = temp_file(dir, name, text);
    let (_, out, err) = outcome(&run(&[
        "diagnose",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"))
}

/// Which limit binds: a replica at its batch cap with requests queued is `small_batch_limit`
/// (a fault) where the KV cache is measured to have room, advice where nothing says whether
/// anything has room (llama.cpp on a CPU: no KV gauge, no GPU), and not the cap at all where the
/// KV cache is measured nearly full (the cache binds).
#[test]
fn a_batch_cap_is_blamed_only_where_something_is_measured_to_have_room() {
    let dir = tempfile::tempdir().unwrap();
    let judge = |engine: &str, kv: Option<f64>| {
        let kv = kv.map_or(String::new(), |v| {
            format!("      kv_cache_usage_ratio: {{value: {v}, min: {v}, mean: {v}, max: {v}}}\n")
        });
        let text = format!(
            "llm_doctor: snapshot/v1\ntargets:\n  - target: {{engine: {engine}, labels: {{instance: a}}}}\n    window: {{end: \"2026-12-01T00:10:00Z\", length: 5m}}\n    signals:\n      queue_depth: {{value: 12, min: 8, mean: 10, max: 14}}\n      running_requests: {{value: 4, min: 4, mean: 4, max: 4}}\n{kv}    facts:\n      max_num_seqs: 4\n"
        );
        let v = diagnose_snapshot(dir.path(), &format!("{engine}-{}.yaml", kv.len()), &text);
        v["targets"][0]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "small_batch_limit")
            .map(|c| c["severity"].as_str().unwrap().to_string())
    };
    assert_eq!(judge("vllm", Some(0.3)).as_deref(), Some("fault"));
    assert_eq!(judge("llamacpp", None).as_deref(), Some("info"));
    assert_eq!(judge("vllm", Some(0.85)), None);
}

/// A backlog without queue times (llama.cpp): by Little's law mean queued over mean running is
/// mean wait over mean service time, so a queue under one request is a backlog where requests
/// waited at least 30 % as long as they were served, and not where they waited a sixth as long.
/// Where queue times are exported they decide instead.
#[test]
fn a_short_queue_is_a_backlog_when_requests_wait_a_third_of_their_service() {
    let dir = tempfile::tempdir().unwrap();
    let judge = |engine: &str, queue_mean: f64, extra: &str| {
        let text = format!(
            "llm_doctor: snapshot/v1\ntargets:\n  - target: {{engine: {engine}, labels: {{instance: a}}}}\n    window: {{end: \"2026-12-01T00:10:00Z\", length: 5m}}\n    signals:\n      queue_depth: {{value: 0, min: 0, mean: {queue_mean}, max: 4}}\n      running_requests: {{value: 2, min: 0, mean: 2.1, max: 3}}\n{extra}    facts:\n      max_num_seqs: 3\n"
        );
        let v = diagnose_snapshot(dir.path(), &format!("{engine}-{queue_mean}.yaml"), &text);
        cause_ids(&v["targets"][0])
    };
    // 0.83 queued beside 2.1 running: requests wait ~40 % of their service time.
    let ids = judge("llamacpp", 0.83, "");
    assert_eq!(
        ids.first().map(String::as_str),
        Some("queue_backlog"),
        "{ids:?}"
    );
    // 0.3 beside 2.1: a seventh of it, ordinary queueing.
    let ids = judge("llamacpp", 0.3, "");
    assert!(!ids.contains(&"queue_backlog".to_string()), "{ids:?}");
    // A measured queue time of 20 ms settles it: no backlog however the gauges compare.
    let ids = judge(
        "vllm",
        0.83,
        "      queue_time_mean_seconds: {value: 0.02, min: 0.02, mean: 0.02, max: 0.02}\n",
    );
    assert!(!ids.contains(&"queue_backlog".to_string()), "{ids:?}");
}

/// A burst leaves capacity fine on average, and the KV cache is a capacity too: the same spike
/// of arrivals on a replica whose cache was mostly full all window (80 % or more on average) is
/// load above what its blocks hold, and the cache, not the burst, comes first.
#[test]
fn a_spike_on_a_mostly_full_kv_cache_is_not_a_burst() {
    let dir = tempfile::tempdir().unwrap();
    let judge = |kv_mean: f64| {
        let text = format!(
            "llm_doctor: snapshot/v1\ntargets:\n  - target: {{engine: vllm, labels: {{instance: a}}}}\n    window: {{end: \"2026-12-01T00:10:00Z\", length: 5m}}\n    signals:\n      queue_depth: {{value: 2, min: 0, mean: 3, max: 40}}\n      running_requests: {{value: 10, min: 2, mean: 10, max: 40}}\n      queued_share_ratio: {{value: 0.3}}\n      kv_cache_usage_ratio: {{value: 0.5, min: 0.1, mean: {kv_mean}, max: 0.99}}\n      preemptions_per_second: {{value: 0.2}}\n    facts:\n      max_num_seqs: 256\n"
        );
        let v = diagnose_snapshot(dir.path(), &format!("kv-{kv_mean}.yaml"), &text);
        cause_ids(&v["targets"][0])
    };
    // The cache filled only with the spike (a fifth full on average): a burst.
    let ids = judge(0.2);
    assert_eq!(
        ids.first().map(String::as_str),
        Some("concurrency_burst"),
        "{ids:?}"
    );
    // Nine tenths full on average: the cache binds.
    let ids = judge(0.9);
    assert_eq!(
        ids.first().map(String::as_str),
        Some("kv_cache_exhaustion"),
        "{ids:?}"
    );
}

/// A CPU-only replica (llama.cpp: no GPU to watch idle) on a contended host: the host's busy
/// cores and CPU pressure say contention, and harm needs requests waiting for the slots it
/// slows. By Little's law mean queued over mean running is mean wait over mean service, so
/// requests waiting a fifth as long as they are served make the contention a fault; the same
/// host with nothing waiting (the replica keeps up) is not one.
#[test]
fn host_contention_without_a_gpu_is_a_cause_only_where_requests_wait() {
    let dir = tempfile::tempdir().unwrap();
    let judge = |queue_mean: f64, running_mean: f64| {
        // A gauge whose mean is 0 was 0 all window.
        let max = |mean: f64| if mean > 0.0 { 2 } else { 0 };
        let (queue_max, running_max) = (max(queue_mean), max(running_mean));
        let text = format!(
            "llm_doctor: snapshot/v1\ntargets:\n  - target: {{engine: llamacpp, labels: {{instance: a}}}}\n    window: {{end: \"2026-12-01T00:10:00Z\", length: 5m}}\n    signals:\n      queue_depth: {{value: 0, min: 0, mean: {queue_mean}, max: {queue_max}}}\n      running_requests: {{value: 0, min: 0, mean: {running_mean}, max: {running_max}}}\n      host_cpu_utilization_ratio: {{value: 0.93}}\n      host_cpu_busiest_core_ratio: {{value: 0.94}}\n      host_cpu_pressure_ratio: {{value: 0.6}}\n    facts:\n      max_num_seqs: 2\n"
        );
        let name = format!("host-{queue_mean}-{running_mean}.yaml");
        cause_ids(&diagnose_snapshot(dir.path(), &name, &text)["targets"][0])
    };
    // 0.14 queued beside 0.7 running: requests wait a fifth of their service time.
    let ids = judge(0.14, 0.7);
    assert_eq!(
        ids.first().map(String::as_str),
        Some("cpu_bottleneck"),
        "{ids:?}"
    );
    // Nothing waits: the contended host costs users nothing measurable, busy or idle.
    for running_mean in [0.7, 0.0] {
        let ids = judge(0.0, running_mean);
        assert!(!ids.contains(&"cpu_bottleneck".to_string()), "{ids:?}");
    }
}

/// A vLLM replica's TTFT histogram (V0's bounds around a second) over five one-minute scrapes:
/// per minute 90 requests under 0.5 s, 8 under 1 s and 2 in the bucket ending at `slow_le`.
fn ttft_histogram(slow_le: f64) -> String {
    let bounds = [0.5, 1.0, 2.5, 5.0];
    let mut out = String::from("# TYPE vllm:time_to_first_token_seconds histogram\n");
    for k in 0..=5u32 {
        let t = 1_764_547_200 + 60 * k;
        let n = f64::from(k);
        for le in bounds {
            let below = match le {
                0.5 => 90.0,
                1.0 => 98.0,
                _ if le >= slow_le => 100.0,
                _ => 98.0,
            };
            out.push_str(&format!(
                "vllm:time_to_first_token_seconds_bucket{{le=\"{le}\"}} {} {t}\n",
                below * n
            ));
        }
        out.push_str(&format!(
            "vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {} {t}\n",
            100.0 * n
        ));
        out.push_str(&format!(
            "vllm:time_to_first_token_seconds_count {} {t}\n",
            100.0 * n
        ));
        out.push_str(&format!(
            "vllm:time_to_first_token_seconds_sum {} {t}\n",
            40.0 * n
        ));
    }
    out.push_str("# EOF\n");
    out
}

/// A histogram places a quantile only within its bucket: the TTFT objective is missed when the
/// bucket holding the p99 lies at or above it, not where the interpolated estimate passes it.
/// A p99 estimated at 1.75 s in (1, 2.5] proves nothing against a 1.5 s objective; the same
/// estimate proves a 1 s objective missed (the bucket starts there); a p99 in (2.5, 5] proves
/// the 1.5 s one missed.
#[test]
fn a_latency_objective_is_missed_only_where_the_bucket_proves_it() {
    let dir = tempfile::tempdir().unwrap();
    let high_ttft = |slow_le: f64, objective: &str| {
        let f = temp_file(
            dir.path(),
            &format!("ttft-{slow_le}.om"),
            &ttft_histogram(slow_le),
        );
        let (_, out, err) = outcome(&run(&[
            "diagnose",
            f.to_str().unwrap(),
            "--slo",
            &format!("ttft_p99_seconds={objective}"),
            "--format",
            "json",
        ]));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{err}"));
        let symptom = v["targets"][0]["symptoms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "high_ttft")
            .cloned();
        symptom.map(|s| s["evidence"][0]["values"].clone())
    };
    assert_eq!(high_ttft(2.5, "1.5"), None);
    let values = high_ttft(2.5, "1").expect("a 1 s objective is missed");
    assert!((values["ttft_p99_seconds"].as_f64().unwrap() - 1.75).abs() < 1e-9);
    assert_eq!(values["ttft_p99_floor_seconds"].as_f64(), Some(1.0));
    let values = high_ttft(5.0, "1.5").expect("a p99 above 2.5 s misses 1.5 s");
    assert_eq!(values["ttft_p99_floor_seconds"].as_f64(), Some(2.5));
}

/// A llama.cpp replica in pod `llama-0` on node `node-a`, scraped every 15 s for five minutes
/// beside node_exporter and the kubelet's cAdvisor, which also reports a neighbour's pod
/// (`batch-0`) on the same node. The host is contended (both cores 95 % busy, CPU pressure
/// 60 %) and requests wait a third of their service time. The replica uses half a core and the
/// neighbour one and a half; per second of wall time the replica's tasks waited
/// `replica_wait` s for a CPU, the neighbour's `neighbour_wait` s. Without `cadvisor`, the
/// kubelet was not scraped.
fn contended_pod(replica_wait: f64, neighbour_wait: f64, cadvisor: bool) -> String {
    let engine = "instance=\"node-a:8080\",job=\"llamacpp\",namespace=\"serving\",pod=\"llama-0\"";
    let node = "instance=\"node-a:9100\",job=\"node\"";
    let pod = |name: &str, ns: &str| {
        format!("container=\"c\",instance=\"node-a:10250\",job=\"kubelet\",namespace=\"{ns}\",pod=\"{name}\"")
    };
    let mut families: Vec<(&str, Vec<String>)> = vec![
        ("llamacpp:requests_deferred gauge", vec![]),
        ("llamacpp:requests_processing gauge", vec![]),
        ("node_cpu_seconds counter", vec![]),
        ("node_pressure_cpu_waiting_seconds counter", vec![]),
    ];
    if cadvisor {
        families.push(("container_pressure_cpu_waiting_seconds counter", vec![]));
        families.push(("container_cpu_usage_seconds counter", vec![]));
    }
    for i in 0..21u32 {
        let dt = 15.0 * f64::from(i);
        let t = 1_796_000_300.0 + dt;
        // Queued 1 of every 3 scrapes beside 1 running: mean 1/3 over mean 1.
        let queued = u32::from(i % 3 == 0);
        families[0].1.push(format!(
            "llamacpp:requests_deferred{{{engine}}} {queued} {t}"
        ));
        families[1]
            .1
            .push(format!("llamacpp:requests_processing{{{engine}}} 1 {t}"));
        for cpu in 0..2 {
            for (mode, share) in [("idle", 0.05), ("user", 0.95)] {
                families[2].1.push(format!(
                    "node_cpu_seconds_total{{cpu=\"{cpu}\",{node},mode=\"{mode}\"}} {} {t}",
                    share * dt
                ));
            }
        }
        families[3].1.push(format!(
            "node_pressure_cpu_waiting_seconds_total{{{node}}} {} {t}",
            0.6 * dt
        ));
        if cadvisor {
            for (name, ns, wait, cores) in [
                ("llama-0", "serving", replica_wait, 0.5),
                ("batch-0", "batch", neighbour_wait, 1.5),
            ] {
                families[4].1.push(format!(
                    "container_pressure_cpu_waiting_seconds_total{{{}}} {} {t}",
                    pod(name, ns),
                    wait * dt
                ));
                families[5].1.push(format!(
                    "container_cpu_usage_seconds_total{{{}}} {} {t}",
                    pod(name, ns),
                    cores * dt
                ));
            }
        }
    }
    let mut out = String::new();
    for (ty, samples) in families {
        out.push_str(&format!("# TYPE {ty}\n"));
        for s in samples {
            out.push_str(&s);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

/// The host's pressure cannot say whose tasks waited; the replica's own cgroup pressure can.
/// A replica whose tasks wait 0.4 s per second, while they use half a core, is slowed by
/// contention (its work takes almost twice as long); on the same contended host, a replica
/// whose tasks seldom wait is not, although its neighbour's stall is severe: the neighbour's
/// pod, on the same node, must not join the replica (joined by host, the pod's worst wait over
/// both pods' use, 0.6 over 2 cores, would read as the replica's). Without cAdvisor the host
/// stands in, as before.
#[test]
fn a_replica_is_cpu_bound_by_contention_where_its_own_tasks_wait_for_a_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let judge = |replica: f64, neighbour: f64, cadvisor: bool| {
        let name = format!("pod-{replica}-{neighbour}-{cadvisor}.om");
        let f = temp_file(
            dir.path(),
            &name,
            &contended_pod(replica, neighbour, cadvisor),
        );
        let (_, out, err) = outcome(&run(&["diagnose", f.to_str().unwrap(), "--format", "json"]));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{err}"));
        assert_eq!(v["targets"].as_array().unwrap().len(), 1, "{v}");
        cause_ids(&v["targets"][0])
    };
    let ids = judge(0.4, 0.0, true);
    assert_eq!(
        ids.first().map(String::as_str),
        Some("cpu_bottleneck"),
        "{ids:?}"
    );
    let ids = judge(0.01, 0.6, true);
    assert!(!ids.contains(&"cpu_bottleneck".to_string()), "{ids:?}");
    // The host's view alone, on the same recording less the kubelet's series.
    let ids = judge(0.01, 0.6, false);
    assert!(ids.contains(&"cpu_bottleneck".to_string()), "{ids:?}");
}

/// `--why RULE` answers "why not X?": how a rule judged each target whether it fired or not,
/// in every format, the JSON within the published schema; on a fleet a healthy target asked
/// about is shown in full; a rule that does not exist is refused with a suggestion.
#[test]
fn why_shows_how_a_rule_judged_each_target_fired_or_not() {
    let fixture = "fixtures/batching_delay.om.gz";
    let out = table(&[
        fixture,
        "--why",
        "kv_cache_exhaustion",
        "--why",
        "high_ttft",
        "--why",
        "queue_backlog",
    ]);
    for part in [
        "why kv_cache_exhaustion (cause): not fired; gate does not hold",
        "read: kv_cache_usage_ratio 30 %",
        "for (weight 4, does not hold): preemptions_per_second > 0",
        "why high_ttft (symptom): fired; gate holds",
        "critical when: ",
        "explains high_itl when (",
    ] {
        assert!(out.contains(part), "no `{part}` in:\n{out}");
    }
    let (_, md, _) = crate::support::outcome(&crate::support::run(&[
        "diagnose",
        fixture,
        "--format",
        "markdown",
        "--why",
        "kv_cache_exhaustion",
    ]));
    assert!(
        md.contains(
            "### Why\n\n```text\nwhy kv_cache_exhaustion (cause): not fired; gate does not hold"
        ),
        "{md}"
    );

    let (_, out, err) = crate::support::outcome(&crate::support::run(&[
        "diagnose",
        FIXTURE,
        "--format",
        "json",
        "--why",
        "batching_delay",
        "--why",
        "kv_cache_exhaustion",
        "--why",
        "queue_backlog",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(crate::support::root().join("schema/diagnose.schema.json"))
            .unwrap(),
    )
    .unwrap();
    crate::inputs::validate(&schema, &v).unwrap();
    let t = &v["targets"][0];
    let checks = t["checks"].as_array().unwrap();
    assert_eq!(checks[0]["rule"], "batching_delay");
    assert_eq!(checks[0]["gate"]["result"], false);
    assert_eq!(checks[0]["outcome"], "not fired");
    assert_eq!(checks[1]["outcome"], "fired");
    // A conditional explanation is shown with its symptom and whether its condition held.
    let when = &checks[2]["explains_when"][0];
    assert_eq!(when["note"], "high_itl", "{}", checks[2]);
    assert!(
        when["condition"]
            .as_str()
            .unwrap()
            .starts_with("batch_scaling_efficiency_ratio < 50%"),
        "{when}"
    );
    // The streams keep their pace here (ITL p99 0.12 s against 0.2 s), so the condition does
    // not hold although the batch's scaling could not be read.
    assert_eq!(when["result"], false, "{when}");
    assert_eq!(
        when["missing"][0], "batch_scaling_efficiency_ratio",
        "{when}"
    );
    // The cause that fired: its gate holds, and the check lists the evidence the diagnosis used.
    let fired = t["causes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "kv_cache_exhaustion")
        .unwrap();
    assert_eq!(checks[1]["gate"]["result"], true);
    let held: Vec<&serde_json::Value> = checks[1]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["result"] == true)
        .map(|e| &e["condition"])
        .collect();
    let used: Vec<&serde_json::Value> = fired["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|e| &e["condition"])
        .collect();
    assert_eq!(held, used);
    // Without --why, no checks field.
    let (_, plain, _) = crate::support::outcome(&crate::support::run(&[
        "diagnose", fixture, "--format", "json",
    ]));
    assert!(!plain.contains("\"checks\""));

    // Asked twice, shown once; every fleet member in full, unless --problems-only.
    let fleet = table(&["fixtures/fleet_mixed.om.gz", "--why", "oom", "--why", "oom"]);
    assert!(
        !fleet.contains("healthy (--all shows them in full)"),
        "{fleet}"
    );
    assert_eq!(fleet.matches("why oom (symptom)").count(), 4, "{fleet}");
    let troubled = table(&[
        "fixtures/fleet_mixed.om.gz",
        "--why",
        "oom",
        "--problems-only",
    ]);
    assert_eq!(
        troubled.matches("why oom (symptom)").count(),
        2,
        "{troubled}"
    );
    // The checks fit the table's width.
    let narrow = table(&[fixture, "--why", "kv_cache_exhaustion", "--width", "80"]);
    assert!(narrow.contains("why kv_cache_exhaustion"));
    assert!(narrow.lines().all(|l| l.chars().count() <= 80), "{narrow}");

    let (code, _, err) = crate::support::outcome(&crate::support::run(&[
        "diagnose", fixture, "--why", "kv_cache",
    ]));
    assert_eq!(code, 2);
    assert!(err.contains("did you mean `kv_cache_exhaustion`"), "{err}");
}
