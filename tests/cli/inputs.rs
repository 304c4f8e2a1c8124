//! `diagnose` on other inputs and options: API JSON, snapshot files, selectors, --engine.

use crate::support::{outcome, run, run_env};

fn json(args: &[&str]) -> (i32, serde_json::Value, String) {
    let (code, out, err) = outcome(&run(args));
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    (code, v, err)
}

fn top_causes(v: &serde_json::Value) -> Vec<String> {
    v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["causes"][0]["id"].as_str().unwrap_or("-").to_string())
        .collect()
}

#[test]
fn a_saved_query_range_answer_diagnoses_like_the_recording() {
    let (code, api, err) = json(&[
        "diagnose",
        "tests/data/inputs/vllm_query_range.json",
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "{err}");
    let (_, om, _) = json(&[
        "diagnose",
        "tests/data/inputs/vllm_query_range.om.gz",
        "--format",
        "json",
    ]);
    assert_eq!(top_causes(&api), vec!["kv_cache_exhaustion"]);
    assert_eq!(api["targets"][0]["causes"], om["targets"][0]["causes"]);
}

#[test]
fn a_saved_snapshot_reads_back_to_the_same_diagnosis() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["snap.yaml", "snap.json"] {
        let path = dir.path().join(name);
        let (_, first, _) = json(&[
            "diagnose",
            "fixtures/small_batch_limit.om.gz",
            "--engine-args",
            "vllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 16",
            "--save-snapshot",
            path.to_str().unwrap(),
            "--format",
            "json",
        ]);
        let (_, again, _) = json(&["diagnose", path.to_str().unwrap(), "--format", "json"]);
        assert_eq!(top_causes(&again), vec!["small_batch_limit"]);
        assert_eq!(
            first["targets"][0]["causes"], again["targets"][0]["causes"],
            "{name}"
        );
        assert_eq!(
            first["targets"][0]["facts"], again["targets"][0]["facts"],
            "{name}"
        );
    }
}

#[test]
fn snapshot_typos_are_all_reported() {
    let (code, _, err) = outcome(&run(&["diagnose", "tests/data/inputs/snapshot_typos.yaml"]));
    assert_eq!(code, 2);
    assert!(err.contains("did you mean `queue_depth`?"), "{err}");
    assert!(err.contains("did you mean `max_num_seqs`?"), "{err}");
}

#[test]
fn a_query_without_metric_names_is_refused_with_a_hint() {
    let (code, _, err) = outcome(&run(&["diagnose", "tests/data/inputs/rate_answer.json"]));
    assert_eq!(code, 2);
    assert!(err.contains("__name__"), "{err}");
}

#[test]
fn engine_override_and_selector() {
    let (code, _, err) = outcome(&run(&[
        "diagnose",
        "fixtures/healthy_busy.om.gz",
        "--engine",
        "tgi",
    ]));
    assert_eq!(code, 2);
    assert!(
        err.contains("no tgi metrics in the input (found vllm)"),
        "{err}"
    );
    let (code, v, _) = json(&[
        "diagnose",
        "fixtures/healthy_busy.om.gz",
        "--engine",
        "vllm",
        "--selector",
        "instance=~\"gpu-node-.*\"",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0);
    assert_eq!(v["targets"].as_array().unwrap().len(), 1);
    let (code, _, err) = outcome(&run(&[
        "diagnose",
        "fixtures/healthy_busy.om.gz",
        "--selector",
        "pod=\"nope\"",
    ]));
    assert_eq!(code, 2);
    assert!(err.contains("matches none of the 1 targets"), "{err}");
    let (code, _, err) = outcome(&run(&[
        "diagnose",
        "fixtures/healthy_busy.om.gz",
        "--selector",
        "pod=nope",
    ]));
    assert_eq!(code, 2);
    assert!(err.contains("expected a quoted value"), "{err}");
}

#[test]
fn one_curl_per_replica_becomes_one_target_per_file() {
    // Pages saved with curl have no instance labels: each file is its own replica.
    let text = llm_doctor::source::file::read_text(
        &crate::support::root().join("fixtures/healthy_busy.om.gz"),
    )
    .unwrap();
    let page: String = text
        .lines()
        .filter(|l| l.starts_with("vllm:") && l.ends_with(" 1796083800"))
        .map(|l| {
            let (series, _ts) = l.rsplit_once(' ').unwrap();
            let name_end = series.find('{').unwrap();
            let (name, rest) = series.split_at(name_end);
            let labels: Vec<&str> = rest
                .trim_start_matches('{')
                .split('}')
                .next()
                .unwrap()
                .split(',')
                .filter(|p| !p.starts_with("instance=") && !p.starts_with("job="))
                .collect();
            let value = rest.rsplit_once(' ').unwrap().1;
            format!("{name}{{{}}} {value}\n", labels.join(","))
        })
        .collect();
    assert!(page.lines().count() > 50, "{page}");
    let dir = tempfile::tempdir().unwrap();
    let a = crate::support::temp_file(dir.path(), "replica-a.prom", &page);
    let b = crate::support::temp_file(dir.path(), "replica-b.prom", &page);
    let (_, v, err) = json(&[
        "diagnose",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let instances: Vec<&str> = v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["target"]["labels"]["instance"].as_str().unwrap())
        .collect();
    assert_eq!(instances.len(), 2, "{err}");
    assert!(
        instances[0].ends_with("replica-a.prom") && instances[1].ends_with("replica-b.prom"),
        "{instances:?}"
    );
}

#[test]
fn a_triton_model_config_gives_facts() {
    let (_, v, err) = json(&[
        "diagnose",
        "fixtures/triton_batching_delay.om.gz",
        "--engine-args",
        "@tests/data/triton/config.pbtxt",
        "--format",
        "json",
    ]);
    let facts = &v["targets"][0]["facts"];
    assert_eq!(facts["max_num_seqs"], 64.0, "{err}");
    assert_eq!(facts["max_queue_delay_seconds"], 0.2);
    assert_eq!(facts["batch_scheduler_policy"], "max_utilization");
    assert_eq!(facts["enable_chunked_prefill"], true);
    assert!(
        facts.get("enable_prefix_caching").is_none()
            || facts["enable_prefix_caching"] != "${enable_kv_cache_reuse}"
    );
    assert_eq!(top_causes(&v), vec!["batching_delay"]);
    let ev = &v["targets"][0]["causes"][0]["evidence"];
    assert!(
        ev.as_array()
            .unwrap()
            .iter()
            .any(|e| e["note"] == "the dynamic batcher may hold requests to fill a batch"),
        "{ev}"
    );
}

/// Two files that disagree about one series at one instant: the later file's sample is kept and
/// the report says so (it used to be a silent, order-dependent choice); files that agree, or
/// repeat a sample exactly, say nothing.
#[test]
fn disagreeing_duplicate_samples_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, waiting: &str| {
        let p = dir.path().join(name);
        let mut text = String::new();
        for (t, r) in [(1_796_083_200_000_i64, 1), (1_796_083_215_000, 2)] {
            text.push_str(&format!(
                "vllm:num_requests_running{{pod=\"a\"}} {r} {t}\nvllm:num_requests_waiting{{pod=\"a\"}} {waiting} {t}\n"
            ));
        }
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (one, two, same) = (
        write("one.prom", "0"),
        write("two.prom", "7"),
        write("same.prom", "0"),
    );
    let notes = |files: &[&str]| {
        let mut args = vec!["diagnose", "--format", "json"];
        args.extend(files);
        let (_, out, err) = outcome(&run(&args));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{err}"));
        v["targets"][0]["notes"].to_string()
    };
    // Across files, disagreement decides the verdict by order: refused, naming the series.
    let (code, _, err) = outcome(&run(&["diagnose", "--format", "json", &one, &two]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("disagree on 2 sample(s)"), "{err}");
    assert!(err.contains("vllm:num_requests_waiting"), "{err}");
    // Within one file, a repeated sample is noted and the later kept.
    let repeated = dir.path().join("repeated.prom");
    std::fs::write(
        &repeated,
        std::fs::read_to_string(&one).unwrap() + &std::fs::read_to_string(&two).unwrap(),
    )
    .unwrap();
    let noted = notes(&[repeated.to_str().unwrap()]);
    assert!(
        noted.contains("2 sample(s) had the same series and instant"),
        "{noted}"
    );
    assert!(noted.contains("vllm:num_requests_waiting"), "{noted}");
    assert!(!notes(&[&one, &same]).contains("same series and instant"));
}

/// Deep nesting is refused before the YAML scanner, which takes minutes on it.
#[test]
fn deeply_nested_yaml_is_refused_at_once_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let deep = "[".repeat(200_000);
    let snapshot = dir.path().join("deep.yaml");
    std::fs::write(&snapshot, format!("llm_doctor: 1\ntargets: {deep}\n")).unwrap();
    let (code, _, err) = outcome(&run(&["diagnose", snapshot.to_str().unwrap()]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("2:74: nested deeper than 64 levels"), "{err}");

    let rules = dir.path().join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(rules.join("deep.yaml"), format!("symptoms: {deep}\n")).unwrap();
    let (code, _, err) = outcome(&run(&["rules", "check", rules.to_str().unwrap()]));
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("deep.yaml:1:75: nested deeper than 64 levels"),
        "{err}"
    );
}

/// More targets than one run diagnoses is an error naming the limit, not a process killed for
/// memory.
#[test]
fn too_many_targets_is_an_error_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("# TYPE vllm:num_requests_running gauge\n");
    for i in 0..50 {
        text.push_str(&format!(
            "vllm:num_requests_running{{pod=\"p{i}\"}} 1 1796083200000\nvllm:num_requests_running{{pod=\"p{i}\"}} 1 1796083215000\n"
        ));
    }
    let path = dir.path().join("many.prom");
    std::fs::write(&path, text).unwrap();
    let run_with = |limit: &str, selector: &[&str]| {
        let mut args = vec!["diagnose", path.to_str().unwrap(), "--format", "json"];
        args.extend(selector);
        let (code, _, err) = outcome(&run_env(&args, ("LLM_DOCTOR_MAX_TARGETS", limit)));
        (code, err)
    };
    // Counted while the file is read: it stops at the 11th.
    let (code, err) = run_with("10", &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("many.prom`: more than 10 targets in the input")
            && err.contains("LLM_DOCTOR_MAX_TARGETS"),
        "{err}"
    );
    // A selector may keep fewer than the file names: counted after the split.
    let (code, err) = run_with("10", &["--selector", "pod=~\"p.*\""]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("50 targets in the input, more than the 10"),
        "{err}"
    );
    let (code, err) = run_with("100", &[]);
    assert_ne!(code, 2, "{err}");
}

/// Gzip bombs (a few kilobytes that expand to many megabytes) stop at LLM_DOCTOR_MAX_INPUT_MB
/// with an error naming the file, whether the file is read whole (an API answer) or streamed
/// (exposition text without a line break).
#[test]
fn gzip_bombs_stop_at_the_input_limit() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let bomb = |name: &str, head: &str, filler: u8| {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(head.as_bytes()).unwrap();
        gz.write_all(&vec![filler; 16 << 20]).unwrap();
        let path = dir.path().join(name);
        let bytes = gz.finish().unwrap();
        assert!(bytes.len() < 100 << 10, "{} bytes", bytes.len());
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let answer = bomb(
        "answer.json.gz",
        r#"{"status":"success","data":{"resultType":"matrix","result":["#,
        b' ',
    );
    let text = bomb("scrape.prom.gz", "# TYPE x gauge\nx ", b'0');
    let run_with = |path: &std::path::Path, limit: &str| {
        let args = ["diagnose", path.to_str().unwrap(), "--format", "json"];
        let (code, _, err) = outcome(&run_env(&args, ("LLM_DOCTOR_MAX_INPUT_MB", limit)));
        (code, err)
    };
    let (code, err) = run_with(&answer, "1");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("answer.json.gz`: decompresses to more than 1 MiB")
            && err.contains("LLM_DOCTOR_MAX_INPUT_MB"),
        "{err}"
    );
    let (code, err) = run_with(&text, "1");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("scrape.prom.gz`: no line break in the 1 MiB")
            && err.contains("LLM_DOCTOR_MAX_INPUT_MB"),
        "{err}"
    );
    // Under a higher limit the same files are read to the end (and refused as malformed).
    let (_, err) = run_with(&answer, "64");
    assert!(!err.contains("MAX_INPUT_MB"), "{err}");
    let (_, err) = run_with(&text, "64");
    assert!(!err.contains("MAX_INPUT_MB"), "{err}");
}
