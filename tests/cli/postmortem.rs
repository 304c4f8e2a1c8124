//! `llm-doctor postmortem` and `diff` on recorded incidents: episodes, incidents, onset order,
//! the fleet view, the reports, and what bad input gets.

use serde_json::Value;

use crate::support::{outcome, root, run};

fn postmortem_json(args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["postmortem", "--format", "json", "-q"];
    all.extend_from_slice(args);
    let (code, out, err) = outcome(&run(&all));
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    (code, v, err)
}

fn target<'a>(pm: &'a Value, pod_or_instance: &str) -> &'a Value {
    pm["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            t["target"]["labels"]["pod"] == pod_or_instance
                || t["target"]["labels"]["instance"] == pod_or_instance
        })
        .unwrap_or_else(|| panic!("no target {pod_or_instance}"))
}

#[test]
fn a_healthy_recording_has_no_episode_and_exits_zero() {
    let (code, pm, err) = postmortem_json(&["fixtures/healthy_busy.om.gz"]);
    assert_eq!(code, 0, "{err}");
    let t = &pm["targets"][0];
    assert_eq!(t["incidents"].as_array().unwrap().len(), 0, "{t}");
    assert_eq!(t["episodes"].as_array().unwrap().len(), 0, "{t}");
    assert!(t["steps"]["healthy"].as_u64().unwrap() > 15, "{t}");
    assert!(pm["fleet"]["scope"]
        .as_str()
        .unwrap()
        .starts_with("no target was hit"));
}

#[test]
fn a_kv_exhaustion_recording_blames_the_kv_cache_for_the_whole_incident() {
    let (code, pm, err) = postmortem_json(&["fixtures/kv_cache_exhaustion.om.gz"]);
    assert_eq!(code, 1, "an incident was found: {err}");
    let incidents = pm["targets"][0]["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 1);
    let causes = incidents[0]["causes"].as_array().unwrap();
    assert_eq!(causes[0]["id"], "kv_cache_exhaustion");
    assert!(causes[0]["held_share"].as_f64().unwrap() > 0.9);
    assert!(
        !causes[0]["finding"]["remediations"]
            .as_array()
            .unwrap()
            .is_empty(),
        "the verdict carries its fixes"
    );
    // The recording starts inside the incident: nothing is known about before it.
    assert_eq!(incidents[0]["before"], "not_seen");
    let symptoms: Vec<&str> = incidents[0]["symptoms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert!(symptoms.contains(&"high_ttft"), "{symptoms:?}");
}

#[test]
fn the_last_step_agrees_with_diagnose_at_the_same_instant() {
    for fixture in [
        "fixtures/queue_backlog.om.gz",
        "fixtures/gpu_throttling.om.gz",
    ] {
        let (_, pm, _) = postmortem_json(&[fixture]);
        let runs = pm["targets"][0]["status_runs"].as_array().unwrap();
        let last = runs.last().unwrap();
        let at = (last["to_ms"].as_i64().unwrap() / 1000).to_string();
        let (_, out, err) = outcome(&run(&[
            "diagnose", fixture, "--at", &at, "--format", "json",
        ]));
        let d: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
        assert_eq!(d["targets"][0]["status"], last["status"], "{fixture}");
    }
}

#[test]
fn a_fleet_says_which_replicas_were_hit_and_that_their_causes_differ() {
    let (code, pm, err) = postmortem_json(&["fixtures/fleet_mixed.om.gz"]);
    assert_eq!(code, 1, "{err}");
    let hit: Vec<(&str, &str)> = pm["fleet"]["hit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["target"].as_str().unwrap(), h["cause"].as_str().unwrap()))
        .collect();
    assert_eq!(hit.len(), 2, "{hit:?}");
    assert!(hit
        .iter()
        .any(|(t, c)| t.contains("vllm-2") && *c == "kv_cache_exhaustion"));
    assert!(hit
        .iter()
        .any(|(t, c)| t.contains("vllm-3") && *c == "small_batch_limit"));
    assert!(pm["fleet"]["shared_cause"].is_null());
    assert_eq!(
        target(&pm, "vllm-0")["incidents"].as_array().unwrap().len(),
        0,
        "a healthy replica of the fleet has no incident"
    );
}

#[test]
fn a_selector_narrows_the_fleet_to_one_replica() {
    let (_, pm, err) = postmortem_json(&[
        "fixtures/fleet_mixed.om.gz",
        "--selector",
        r#"pod="vllm-3""#,
    ]);
    assert_eq!(pm["targets"].as_array().unwrap().len(), 1, "{err}");
    assert_eq!(pm["fleet"]["hit"][0]["cause"], "small_batch_limit");
}

#[test]
fn the_table_names_the_incident_its_cause_fix_and_timeline() {
    let (code, out, err) = outcome(&run(&[
        "postmortem",
        "fixtures/kv_cache_exhaustion.om.gz",
        "--format",
        "table",
    ]));
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("Incident 1:"), "{out}");
    assert!(out.contains("(kv_cache_exhaustion)"), "{out}");
    assert!(out.contains("fix: "), "{out}");
    assert!(out.contains("timeline: [#"), "{out}");
    assert!(err.is_empty(), "no progress bar off a terminal: {err}");
}

#[test]
fn markdown_with_an_output_file_writes_charts_beside_it_the_same_each_time() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("incident.md");
    let args = [
        "postmortem",
        "fixtures/kv_cache_exhaustion.om.gz",
        "-o",
        report.to_str().unwrap(),
    ];
    let (code, out, err) = outcome(&run(&args));
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    let md = std::fs::read_to_string(&report).unwrap();
    let charts: Vec<&str> = md
        .lines()
        .filter_map(|l| l.strip_prefix("![").and_then(|l| l.split_once("](")))
        .map(|(_, path)| path.trim_end_matches(')'))
        .collect();
    assert!(charts.len() >= 4, "{md}");
    assert!(charts.iter().any(|c| c.contains("kv_cache_usage_ratio")));
    let first: Vec<String> = charts
        .iter()
        .map(|c| std::fs::read_to_string(dir.path().join(c)).unwrap())
        .collect();
    for svg in &first {
        assert!(
            svg.starts_with("<svg") && svg.contains("<polyline"),
            "{svg}"
        );
    }
    // Deterministic: the same input draws the same charts.
    run(&args);
    for (c, svg) in charts.iter().zip(&first) {
        assert_eq!(&std::fs::read_to_string(dir.path().join(c)).unwrap(), svg);
    }
}

#[test]
fn the_html_report_renders_in_headless_chromium() {
    let chromium = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| {
            std::process::Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("chromium is needed for this test: run scripts/install-test-servers.sh");
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let (code, _, err) = outcome(&run(&[
        "postmortem",
        "fixtures/fleet_mixed.om.gz",
        "-o",
        page.to_str().unwrap(),
    ]));
    assert_eq!(code, 1, "{err}");
    let url = format!("file://{}", page.display());
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--window-size=1000,1600",
    ];
    let profile = format!("--user-data-dir={}", dir.path().join("profile").display());
    let dom = std::process::Command::new(chromium)
        .args(common)
        .arg(&profile)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&dom.stdout);
    // What the browser built, not what was written: a page it could not parse loses these.
    assert!(dom.contains("<h1>Postmortem</h1>"), "{dom}");
    assert!(dom.contains("id=\"fleet\""), "{dom}");
    assert_eq!(dom.matches("<section class=\"target\">").count(), 4);
    assert!(dom.matches("<svg").count() >= 10, "charts and strips");
    assert!(dom.contains("kv_cache_exhaustion") && dom.contains("small_batch_limit"));
    assert!(dom.trim_end().ends_with("</html>"));

    let shot = dir.path().join("shot.png");
    let status = std::process::Command::new(chromium)
        .args(common)
        .arg(&profile)
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .expect("chromium runs");
    let png = std::fs::read(&shot).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}): {}",
            String::from_utf8_lossy(&status.stderr)
        )
    });
    assert_eq!(&png[1..4], b"PNG");
    // A blank page compresses to a few kilobytes; charts and text do not.
    assert!(png.len() > 50_000, "{} bytes", png.len());
}

#[test]
fn diff_ranks_what_moved_between_a_healthy_and_a_kv_exhausted_replica() {
    let (code, out, err) = outcome(&run(&[
        "diff",
        "fixtures/healthy_busy.om.gz",
        "fixtures/kv_cache_exhaustion.om.gz",
        "--format",
        "json",
    ]));
    assert_eq!(code, 0, "{err}");
    let d: Value = serde_json::from_str(&out).unwrap();
    let moves = d["moves"].as_array().unwrap();
    let top: Vec<&str> = moves[..5]
        .iter()
        .map(|m| m["signal"].as_str().unwrap())
        .collect();
    assert!(
        top.iter().any(|s| [
            "kv_cache_usage_ratio",
            "queue_depth",
            "preemptions_per_second"
        ]
        .contains(s)),
        "{top:?}"
    );
    assert!(d["new_causes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "kv_cache_exhaustion"));
    let kv = moves
        .iter()
        .find(|m| m["signal"] == "kv_cache_usage_ratio")
        .unwrap();
    assert!(kv["score"].as_f64().unwrap() > 3.0, "{kv}");
    assert!(kv["supports"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "kv_cache_exhaustion"));
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.prom");
    std::fs::write(
        &page,
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n",
    )
    .unwrap();
    let cases: [(Vec<&str>, &str); 5] = [
        (vec![page.to_str().unwrap()], "no timestamps"),
        (
            vec![
                "fixtures/healthy_busy.om.gz",
                "--from",
                "2030-01-01T00:00:00Z",
            ],
            "holds no sample",
        ),
        (
            vec!["--prometheus", "http://127.0.0.1:9"],
            "needs --from and --to",
        ),
        (
            vec!["fixtures/healthy_busy.om.gz", "--step", "0s"],
            "--step",
        ),
        (
            vec!["fixtures/healthy_busy.om.gz", "--window", "15s"],
            "scraped every 15s",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["postmortem"];
        all.extend(args.iter().copied());
        let (code, out, err) = outcome(&run(&all));
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let (code, _, err) = outcome(&run(&["diff", "fixtures/healthy_busy.om.gz"]));
    assert_eq!(code, 2);
    assert!(err.contains("--good-at"), "{err}");
    let (code, _, err) = outcome(&run(&["diff", "-", "-"]));
    assert_eq!(code, 2);
    assert!(err.contains("can be given once"), "{err}");
    // A gateway's request log holds no metrics over a range.
    let log = dir.path().join("access.log");
    std::fs::write(
        &log,
        "{\"msec\":\"1796570000.250\",\"status\":\"200\",\"request_time\":\"0.5\"}\n",
    )
    .unwrap();
    let (code, _, err) = outcome(&run(&["postmortem", log.to_str().unwrap()]));
    assert_eq!(code, 2);
    assert!(err.contains("request records alone have no range"), "{err}");
}

/// 2026-12-01T00:00:00Z, where the recordings of `tests/data/postmortem/` start.
const T0_MS: i64 = 1_796_083_200_000;

/// A ground-truth instant of a recording (seconds from its start, from the simulator's trace),
/// in Unix ms.
fn truth_ms(case: &str, key: &str) -> i64 {
    let path = root().join(format!("tests/data/postmortem/{case}.yaml"));
    let v: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let s = v["onsets"][key]
        .as_f64()
        .or_else(|| v["recovery"][key].as_f64())
        .or_else(|| v[key].as_f64())
        .unwrap_or_else(|| panic!("{case}: no {key}"));
    T0_MS + (s * 1000.0) as i64
}

fn onset_ms(incident: &Value, signal: &str, op: &str, threshold: f64) -> Option<i64> {
    incident["onsets"].as_array().unwrap().iter().find_map(|o| {
        (o["signal"] == signal
            && o["op"] == op
            && (o["threshold"].as_f64().unwrap() - threshold).abs() < 1e-9)
            .then(|| o["at_ms"].as_i64().unwrap())
    })
}

#[test]
fn the_kv_cache_fills_and_preempts_before_the_queue_grows_as_the_simulator_says() {
    let (code, pm, err) = postmortem_json(&["tests/data/postmortem/pm-kv-onset.om.gz"]);
    assert_eq!(code, 1, "{err}");
    let incidents = pm["targets"][0]["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    let i = &incidents[0];
    assert_eq!(i["before"], "healthy", "the run starts healthy");
    assert_eq!(i["causes"][0]["id"], "kv_cache_exhaustion");
    let kv = onset_ms(i, "kv_cache_usage_ratio", ">", 0.95).expect("a KV onset");
    let preempt = onset_ms(i, "preemptions_per_second", ">", 0.0).expect("a preemption onset");
    // The first scrapes that show each, by the simulator's trace.
    assert_eq!(kv, truth_ms("pm-kv-onset", "kv_ge_0_95_first_scrape_s"));
    assert_eq!(
        preempt,
        truth_ms("pm-kv-onset", "preemption_first_scrape_s")
    );
    let queue = i["onsets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["signal"] == "queue_depth" && o["threshold"].as_f64().unwrap() >= 5.0)
        .map(|o| o["at_ms"].as_i64().unwrap())
        .min()
        .expect("a queue onset");
    assert!(
        kv < queue && preempt < queue,
        "kv {kv}, preemption {preempt}, queue {queue}"
    );
    assert!(queue <= truth_ms("pm-kv-onset", "waiting_gt_10_first_scrape_s"));
    // The report lists them oldest first.
    let times: Vec<i64> = i["onsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["at_ms"].as_i64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

#[test]
fn an_incident_that_ended_before_the_recording_did_is_still_found() {
    let (code, pm, err) =
        postmortem_json(&["tests/data/postmortem/pm-drain.om.gz", "--window", "2m"]);
    assert_eq!(code, 1, "{err}");
    let t = &pm["targets"][0];
    let incidents = t["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    let i = &incidents[0];
    assert_eq!(i["causes"][0]["id"], "kv_cache_exhaustion");
    assert_eq!(
        (&i["before"], &i["after"]),
        (&"healthy".into(), &"healthy".into())
    );
    let recovered = truth_ms("pm-drain", "recovered_from_scrape_s");
    let end = i["end_ms"].as_i64().unwrap();
    // Judged over trailing windows, the verdict clears at most a window and a half after the
    // system did.
    assert!(
        end >= recovered - 60_000 && end <= recovered + 180_000,
        "ended {end}, recovered {recovered}"
    );
    assert!(
        end < pm["to_ms"].as_i64().unwrap() - 180_000,
        "well before the recording ends"
    );
    let last = t["status_runs"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["status"], "healthy");
    assert_eq!(
        onset_ms(i, "preemptions_per_second", ">", 0.0),
        Some(truth_ms("pm-drain", "preemption_first_scrape_s"))
    );
}

#[test]
fn a_simulated_healthy_run_has_no_incident() {
    let (code, pm, err) = postmortem_json(&["tests/data/postmortem/pm-healthy.om.gz"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(pm["targets"][0]["episodes"].as_array().unwrap().len(), 0);
    assert_eq!(pm["targets"][0]["steps"]["healthy"].as_u64().unwrap(), 41);
}

/// Runs `llm-doctor ARGS` under a pseudo-terminal (util-linux `script`), returning everything
/// it wrote there.
fn on_a_terminal(args: &str) -> String {
    let bin = env!("CARGO_BIN_EXE_llm-doctor");
    let out = std::process::Command::new("script")
        .args(["-qec", &format!("{bin} {args}"), "/dev/null"])
        .current_dir(root())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("util-linux `script` runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_progress_bar_shows_on_a_terminal_only_and_not_with_quiet() {
    let shown = on_a_terminal("postmortem fixtures/kv_cache_exhaustion.om.gz --format json");
    assert!(shown.contains("judging"), "{shown}");
    let quiet = on_a_terminal("postmortem fixtures/kv_cache_exhaustion.om.gz --format json -q");
    assert!(!quiet.contains("judging"), "{quiet}");
    // Off a terminal (the other tests) stderr stays empty: see the table test.
}

/// Real llama-server runs of the corpus (1 s scrapes, a few minutes each, judged over 30 s
/// windows): each incident's leading cause is the run's label, from its own ground truth.
#[test]
fn real_llama_server_runs_get_their_labelled_cause_and_a_quiet_control() {
    let cases = [
        ("llamacpp-cpu-contention", Some("cpu_bottleneck")),
        ("llamacpp-overload-np4", Some("queue_backlog")),
        ("llamacpp-cpu-control", None),
    ];
    for (case, cause) in cases {
        let path = format!("corpus/llamacpp/{case}.om.gz");
        let (_, pm, err) = postmortem_json(&[&path, "--window", "30s"]);
        let incidents = pm["targets"][0]["incidents"].as_array().unwrap();
        match cause {
            None => assert!(incidents.is_empty(), "{case}: {incidents:?}"),
            Some(c) => {
                assert_eq!(incidents.len(), 1, "{case}: {err}");
                assert_eq!(incidents[0]["causes"][0]["id"], c, "{case}");
            }
        }
    }
    // The neighbour started 7 s into the recording, inside the first 30 s window: tasks waited
    // for a CPU most of that window, so the incident holds from the first judged step (nothing
    // judged before it), and it stopped before the recording ended.
    let (_, pm, _) = postmortem_json(&[
        "corpus/llamacpp/llamacpp-cpu-contention.om.gz",
        "--window",
        "30s",
    ]);
    let i = &pm["targets"][0]["incidents"][0];
    assert_eq!(
        (&i["before"], &i["after"]),
        (&"not_seen".into(), &"healthy".into())
    );
    assert_eq!(i["start_ms"], pm["from_ms"]);
    assert!(i["end_ms"].as_i64() < pm["to_ms"].as_i64());
}

/// A real vLLM's recording beside its nginx access log and its own request spans: the
/// postmortem lists the slowest requests with their split, charts every request, and the
/// JSON carries the same; the records alone are refused.
#[test]
fn request_records_beside_a_recording_show_which_requests_were_slow() {
    let id = "vllm-max-num-seqs-4-heavy";
    let rec = format!("corpus/vllm/{id}.om.gz");
    let log = format!("corpus/vllm/requests/{id}.jsonl.gz");
    let spans = format!("corpus/vllm/traces/{id}.jsonl.gz");
    let (_, pm, err) = postmortem_json(&[&rec, &log, &spans]);
    let r = &pm["requests"];
    assert!(r["gateway_records"].as_u64().unwrap() >= 100, "{r}\n{err}");
    assert_eq!(r["gateway_records"], r["engine_records"], "{r}");
    assert_eq!(r["slowest"]["slow"], 5, "{r}");
    assert!(r["slowest"]["listed"][0]["queue_seconds"].as_f64().unwrap() > 0.0);

    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let (_, _, err) = outcome(&run(&[
        "postmortem",
        &rec,
        &log,
        &spans,
        "-o",
        page.to_str().unwrap(),
    ]));
    let html = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{e}: {err}"));
    let section = &html[html.find("id=\"requests\"").expect("a requests section")..];
    assert!(
        section.contains("each request&apos;s time by part (104 requests)"),
        "{section}"
    );
    assert!(section.contains("<table class=\"slowest\">"));

    let md = dir.path().join("report.md");
    outcome(&run(&[
        "postmortem",
        &rec,
        &log,
        "-o",
        md.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(text.contains("## Requests"), "{text}");
    assert!(
        text.contains("![requests.svg](report-charts/requests.svg)"),
        "{text}"
    );
    assert!(dir.path().join("report-charts/requests.svg").exists());

    let (code, _, err) = outcome(&run(&["postmortem", &log, "-q"]));
    assert_eq!(code, 2);
    assert!(err.contains("request records alone have no range"), "{err}");
}
