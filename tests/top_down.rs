//! `postmortem --prometheus --plan top-down` against a real Prometheus and a real
//! VictoriaMetrics: a fleet of 8 vLLM replicas over 4 hours at 60 s, three of them faulty once
//! each (half an hour, at 20, 50 and 75 % of the range, with different causes: the generator's
//! `--fleet-bench --incidents`). Top down, the store's coarse view finds the three, their raw
//! series alone are read, and the verdict is the raw plan's; the healthy replicas' series are
//! never asked for.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::prom::{Prometheus, VictoriaMetrics};
use crate::support::{outcome, root, run};

/// The generator's first sample (2026-12-01T00:00:00Z).
const T0: i64 = 1_796_083_200;
const HOURS: i64 = 4;
/// The faulty replicas' hosts and when their fault began (seconds into the recording).
const FAULTS: [(&str, i64); 3] = [
    ("gpu-node-002:8000", 2880),
    ("gpu-node-005:8000", 7200),
    ("gpu-node-006:8000", 10800),
];

/// The recording, generated (about 90 MB of OpenMetrics text, two seconds).
fn fleet() -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet.om.gz");
    let out = std::process::Command::new("python3")
        .arg(root().join("scripts/gen_fixtures.py"))
        .args(["--fleet-bench", "8"])
        .arg(&path)
        .args(["--hours", &HOURS.to_string(), "--step", "60", "--incidents"])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    llm_doctor::source::file::read_text(&path).unwrap()
}

/// `postmortem --prometheus URL` over the recording (its first window excluded) with `plan`:
/// the JSON report and standard error.
fn postmortem(url: &str, plan: &str) -> (Value, String) {
    let (from, to) = ((T0 + 300).to_string(), (T0 + HOURS * 3600 - 60).to_string());
    let out = run(&[
        "postmortem",
        "--prometheus",
        url,
        "--from",
        &from,
        "--to",
        &to,
        "--step",
        "60s",
        "--plan",
        plan,
        "--format",
        "json",
    ]);
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, 1, "incidents found: {stderr}");
    (serde_json::from_str(&stdout).unwrap(), stderr)
}

/// Each hit replica's instance with its first incident's start (ms) and leading cause.
fn hits(report: &Value) -> BTreeMap<String, (i64, String)> {
    report["fleet"]["hit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let target = h["target"].as_str().unwrap();
            let instance = target.rsplit("instance=").next().unwrap().to_string();
            (
                instance,
                (
                    h["first_ms"].as_i64().unwrap(),
                    h["cause"].as_str().unwrap_or("").to_string(),
                ),
            )
        })
        .collect()
}

/// The incidents of every target that had one, by target.
fn incidents(report: &Value) -> BTreeMap<String, Value> {
    report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| !t["incidents"].as_array().unwrap().is_empty())
        .map(|t| (t["target"].to_string(), t["incidents"].clone()))
        .collect()
}

/// Every fault found at its replica, its onset within two coarse steps (5 minutes) of when
/// the generator began it, and no other replica.
fn assert_found(report: &Value) {
    let hits = hits(report);
    let instances: Vec<&str> = hits.keys().map(String::as_str).collect();
    let mut want: Vec<&str> = FAULTS.iter().map(|(i, _)| *i).collect();
    want.sort_unstable();
    assert_eq!(instances, want, "{:#}", report["fleet"]);
    for (instance, start_s) in FAULTS {
        let onset = hits[instance].0;
        let began = (T0 + start_s) * 1000;
        assert!(
            (onset - began).abs() <= 2 * 300_000,
            "{instance}: onset {onset}, fault began {began}"
        );
    }
}

#[test]
fn top_down_finds_every_fault_and_reads_only_the_unhealthy_replicas() {
    let om = fleet();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("queries.log");
    let config = format!(
        "global:\n  scrape_interval: 1m\n  query_log_file: {}\nscrape_configs: []\n",
        log.display()
    );
    let prom = Prometheus::start_with_args(&om, &[], Some(&config));

    let (raw, _) = postmortem(&prom.url, "raw");
    assert_found(&raw);
    std::fs::write(&log, "").unwrap();
    let (top, err) = postmortem(&prom.url, "top-down");
    assert_found(&top);
    // The same verdict as the raw plan, incident by incident.
    assert_eq!(hits(&top), hits(&raw));
    assert_eq!(incidents(&top), incidents(&raw));
    assert_eq!(top["fleet"]["targets"], 8);
    let notes: Vec<&str> = top["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(notes[0], "plan: top-down (as asked)");
    assert!(
        notes[1].contains("8 replicas in the store's coarse view")
            && notes[1].contains("3 unhealthy there, read raw over 3 spans")
            && notes[1].contains("5 healthy at every coarse step, not read"),
        "{notes:?}\n{err}"
    );
    // The store was never asked for a healthy replica's series.
    let sent: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["params"]["query"].as_str().map(str::to_string))
        .collect();
    let raw_reads: Vec<&String> = sent.iter().filter(|q| q.contains("instance=")).collect();
    assert!(!raw_reads.is_empty());
    for q in &raw_reads {
        assert!(
            FAULTS
                .iter()
                .any(|(i, _)| q.contains(i) || q.contains(&i.replace(":8000", ""))),
            "a query for a healthy replica: {q}"
        );
    }

    // auto: this range is small, so raw, and says why.
    let (auto, _) = postmortem(&prom.url, "auto");
    assert!(
        auto["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("plan: raw (the raw series are "),
        "{}",
        auto["notes"]
    );
    assert_eq!(hits(&auto), hits(&raw));

    // A selector on the labels of the coarse view picks replicas there; one on another label
    // is refused with the reason, not an empty report.
    let (from, to) = ((T0 + 300).to_string(), (T0 + HOURS * 3600 - 60).to_string());
    let args = |selector: &'static str| {
        vec![
            "postmortem".to_string(),
            "--prometheus".to_string(),
            prom.url.clone(),
            "--from".to_string(),
            from.clone(),
            "--to".to_string(),
            to.clone(),
            "--step".to_string(),
            "60s".to_string(),
            "--plan".to_string(),
            "top-down".to_string(),
            "--selector".to_string(),
            selector.to_string(),
            "--format".to_string(),
            "json".to_string(),
        ]
    };
    let picked = args(r#"pod="vllm-4""#);
    let out = run(&picked.iter().map(String::as_str).collect::<Vec<_>>());
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, 1, "{stderr}");
    let one: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        hits(&one).keys().collect::<Vec<_>>(),
        vec!["gpu-node-005:8000"]
    );
    let refused = args(r#"job="vllm""#);
    let out = run(&refused.iter().map(String::as_str).collect::<Vec<_>>());
    let (code, _, stderr) = outcome(&out);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("`job` is not in the store's coarse view"),
        "{stderr}"
    );
}

#[test]
fn top_down_against_victoria_metrics_finds_every_fault() {
    let vm = VictoriaMetrics::start_with(&fleet());
    let (top, err) = postmortem(&vm.url, "top-down");
    assert_found(&top);
    assert!(
        top["notes"][1]
            .as_str()
            .unwrap()
            .contains("5 healthy at every coarse step, not read"),
        "{}\n{err}",
        top["notes"]
    );
}

/// A piece the server timed out on is asked again, once: a store that times out once answers
/// the second time; one that always times out is an error after two tries.
#[test]
fn a_piece_that_timed_out_is_asked_again_once() {
    use axum::http::StatusCode;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let start = |fail_first: usize| {
        let hits = Arc::new(AtomicUsize::new(0));
        let seen = hits.clone();
        let router = axum::Router::new().fallback(move || {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < fail_first {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        r#"{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}"#,
                    )
                } else {
                    (
                        StatusCode::OK,
                        r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"instance":"a:1"},"values":[[1796083500,"1"]]}]}}"#,
                    )
                }
            }
        });
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        rt.spawn(async move { axum::serve(listener, router).await });
        (url, hits)
    };
    let range = (1_796_083_200_000, 1_796_083_800_000, 300_000);
    let (url, hits) = start(1);
    let live = llm_doctor::source::live::prometheus::LiveOptions::new(&url);
    let (answers, _) =
        llm_doctor::source::live::prometheus::coarse_range(&live, &["up".to_string()], range)
            .unwrap();
    assert_eq!(answers[0].len(), 1);
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    let (url, hits) = start(usize::MAX);
    let live = llm_doctor::source::live::prometheus::LiveOptions::new(&url);
    let e = llm_doctor::source::live::prometheus::coarse_range(&live, &["up".to_string()], range)
        .unwrap_err();
    assert!(format!("{e:#}").contains("503"), "{e:#}");
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}
