//! `rules export grafana`: the dashboards in deploy/grafana are what the export writes, they are
//! valid against the Grafana Foundation SDK's dashboard types, and each panel sends, for the
//! replicas and window selected, the PromQL a live triage of those replicas shows as the source
//! of the value it judged (checked against a real Prometheus and its query log).

use std::collections::{BTreeMap, BTreeSet};

use llm_doctor::prepared::Options;
use llm_doctor::signal::selector::Selector;
use llm_doctor::source::live::prometheus::{prepare_from_prometheus, LiveOptions};
use serde_json::Value;

use crate::prom::{fixture_text, Prometheus};
use crate::support::{outcome, root, run};

/// fleet_mixed's newest sample: four vLLM replicas, gpu-node-1..4:8000.
const T_END_MS: i64 = 1_796_083_807_000;

/// Every panel of a dashboard, rows' nested panels included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        out.push(p);
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner);
        }
    }
    out
}

/// Grafana's Prometheus datasource writing a multi-value variable into a query: each value
/// regex-quoted (`\\` before `$^*{}[]'+?.()|` and a doubled backslash, inside a PromQL string),
/// one value as it is, several as `(a|b)`.
fn grafana_regex(values: &[&str]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| {
            let mut out = String::new();
            for c in v.chars() {
                if c == '\\' {
                    out.push_str("\\\\\\\\");
                } else if "$^*{}[]'+?.()|".contains(c) {
                    out.push_str("\\\\");
                    out.push(c);
                } else {
                    out.push(c);
                }
            }
            out
        })
        .collect();
    match quoted.as_slice() {
        [one] => one.clone(),
        several => format!("({})", several.join("|")),
    }
}

/// Whether `sent` asks for the raw samples (`{__name__=~"a|b"}[5m]`) of a metric `panel` reads.
fn raw_samples_of(sent: &str, panel: &str) -> bool {
    let Some(names) = sent
        .strip_prefix("{__name__=~\"")
        .and_then(|r| r.split('"').next())
    else {
        return false;
    };
    names
        .split('|')
        .map(|n| n.replace("\\\\", ""))
        .any(|n| panel.contains(&format!("{n}[")) || panel.contains(&format!("{n}{{")))
}

/// The value of the dashboard's window variable whose text is `text`.
fn window_value(dashboard: &Value, text: &str) -> String {
    let vars = dashboard["templating"]["list"].as_array().unwrap();
    let window = vars
        .iter()
        .find(|v| v["name"] == "window")
        .expect("window variable");
    window["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["text"] == text)
        .and_then(|o| o["value"].as_str())
        .unwrap_or_else(|| panic!("no window option {text}"))
        .to_string()
}

fn export(engine: &str) -> Value {
    let out = run(&["rules", "export", "grafana", "--engine", engine]);
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn every_panel_sends_what_a_live_triage_shows_for_its_signal() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("queries.log");
    let config = format!(
        "global:\n  scrape_interval: 1m\n  query_log_file: {}\nscrape_configs: []\n",
        log.display()
    );
    let prom = Prometheus::start_with_args(&fixture_text("fleet_mixed"), &[], Some(&config));

    // A triage of two of the four replicas over 5 minutes.
    let rules = llm_doctor::rules::load_rules(None).unwrap();
    let selected = ["gpu-node-1:8000", "gpu-node-3:8000"];
    let opts = Options {
        at_ms: Some(T_END_MS),
        window_ms: 300_000,
        selector: Some(Selector::parse(r#"instance=~"gpu-node-(1|3):8000""#).unwrap()),
        ..Default::default()
    };
    let result = prepare_from_prometheus(&rules, &LiveOptions::new(&prom.url), &opts).unwrap();
    assert!(result.errors.is_empty(), "{:#?}", result.errors);
    assert_eq!(result.prepared.len(), 2);
    // What it showed as each value's source, and what it sent.
    let mut shown: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &result.prepared {
        for (i, def) in rules.catalog.signals().iter().enumerate() {
            if let Some(v) = p.snapshot.signal_at(i) {
                let promql = v.source.split_once(": ").map_or("", |(_, q)| q);
                shown
                    .entry(def.name.clone())
                    .or_default()
                    .insert(promql.to_string());
            }
        }
    }
    let sent: BTreeSet<String> = std::fs::read_to_string(&log)
        .expect("Prometheus wrote its query log")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["params"]["query"].as_str().map(str::to_string))
        .collect();
    assert!(sent.len() > 20, "{} queries logged", sent.len());

    // The vLLM dashboard with those replicas and the 5 minute window selected.
    let dashboard = export("vllm");
    let window = window_value(&dashboard, "5m");
    assert_eq!(window, "299999ms");
    let instances = grafana_regex(&selected);
    let (mut compared, mut verbatim, mut from_buckets, mut from_samples) = (0, 0, 0, 0);
    let mut problems = Vec::new();
    for p in panels(&dashboard) {
        let Some(targets) = p["targets"].as_array() else {
            continue;
        };
        let signal = p["title"].as_str().unwrap();
        let expr = targets[0]["expr"].as_str().unwrap();
        let sends = expr
            .replace("$window", &window)
            .replace("$instance", &instances);
        // The panel charts what the triage judged...
        match shown.get(signal) {
            Some(sources) if sources.contains(&sends) => compared += 1,
            Some(sources) => problems.push(format!(
                "{signal}: the panel sends\n  {sends}\nthe triage showed\n  {sources:?}"
            )),
            // Signals of exporters this fixture lacks, or the triage found no value for.
            None => {}
        }
        // ...sent as it is (a gauge's last value is one arm of its statistics' query), or
        // computed by the triage from the histogram's bucket rates, or the raw samples of its
        // metrics, it sent instead.
        let last_arm = format!("label_replace({sends}, \"llm_doctor_stat\", \"last\", \"\", \"\")");
        if sent.contains(&sends) || sent.iter().any(|q| q.contains(&last_arm)) {
            verbatim += 1;
        } else if sends.starts_with("histogram_quantile(")
            || sends.starts_with("(histogram_quantile(")
        {
            from_buckets += 1;
        } else if sent.iter().any(|q| raw_samples_of(q, &sends)) {
            from_samples += 1;
        } else if shown.contains_key(signal) {
            problems.push(format!(
                "{signal}: the panel's query was never sent:\n  {sends}"
            ));
        }
        // And Prometheus answers it as Grafana asks: a range query over the last hour.
        let answer = prom.query_range(
            &sends,
            (T_END_MS / 1000 - 3600) as f64,
            (T_END_MS / 1000) as f64,
            60.0,
        );
        assert_eq!(answer["status"], "success", "{signal}: {sends}: {answer}");
    }
    eprintln!(
        "{compared} panels equal to the triage's sources; {verbatim} sent verbatim, {from_buckets} quantiles the triage computed from bucket rates it sent, {from_samples} values from raw samples it sent"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(compared >= 30, "only {compared} panels compared");
    assert!(verbatim >= 20, "only {verbatim} panels sent verbatim");
}

#[test]
fn the_shipped_dashboards_are_what_the_export_writes() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "rules",
        "export",
        "grafana",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, 0, "{stderr}");
    let shipped = root().join("deploy/grafana");
    let mut names = Vec::new();
    for line in stdout.lines() {
        let written = std::path::Path::new(line);
        let name = written.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(written).unwrap();
        let path = shipped.join(&name);
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(&shipped).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let kept = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            kept == text,
            "{} is not what `rules export grafana` writes: rerun with UPDATE_GOLDEN=1",
            path.display()
        );
        names.push(name);
    }
    // One per engine adapter.
    for adapter in [
        "vllm",
        "sglang",
        "tgi",
        "triton",
        "trtllm_serve",
        "llamacpp",
    ] {
        assert!(
            names.contains(&format!("llm-doctor-{adapter}.json")),
            "{adapter}: {names:?}"
        );
    }
}

/// `python3 deploy/check/grafana_schema.py FILES`: success and its output.
fn schema_check(files: &[&str]) -> (bool, String) {
    assert!(
        root()
            .join("deploy/check/python/grafana_foundation_sdk")
            .exists(),
        "the Grafana Foundation SDK is missing: run scripts/test.sh"
    );
    let mut args = vec!["deploy/check/grafana_schema.py"];
    args.extend_from_slice(files);
    crate::export::tool("python3", &args)
}

#[test]
fn the_dashboards_are_valid_against_the_grafana_dashboard_types() {
    let files: Vec<String> = std::fs::read_dir(root().join("deploy/grafana"))
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    assert_eq!(files.len(), 6, "{files:?}");
    let names: Vec<&str> = files.iter().map(String::as_str).collect();
    let (ok, out) = schema_check(&names);
    assert!(ok, "{out}");
    assert_eq!(out.matches(": ok").count(), 6, "{out}");
    // The check has teeth: a field the types lack, a wrong type, a value an enum lacks, in the
    // dashboard, a panel plugin's options and a Prometheus query.
    let text = std::fs::read_to_string(root().join("deploy/grafana/llm-doctor-vllm.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (bad, problem) in [
        (
            text.replacen("\"legendFormat\"", "\"legendFormatt\"", 1),
            "legendFormatt: not a field of the dashboard types",
        ),
        (
            text.replacen("\"h\": 8", "\"h\": \"8\"", 1),
            "grid_pos.h: '8' is not <class 'int'>",
        ),
        (
            text.replacen("\"displayMode\": \"list\"", "\"displayMode\": \"lists\"", 1),
            "display_mode: 'lists' is not <enum 'LegendDisplayMode'>",
        ),
        (
            text.replacen("\"editorMode\": \"code\"", "\"editorMode\": \"cod\"", 1),
            "editor_mode: 'cod' is not",
        ),
    ] {
        assert_ne!(bad, text, "{problem}: the mutation applies");
        let path = dir.path().join("bad.json");
        std::fs::write(&path, bad).unwrap();
        let (ok, out) = schema_check(&[path.to_str().unwrap()]);
        assert!(!ok && out.contains(problem), "{problem}: {out}");
    }
}

#[test]
fn one_dashboard_to_stdout_several_need_a_directory() {
    let out = run(&["rules", "export", "grafana", "--engine", "trtllm"]);
    let (code, _, stderr) = outcome(&out);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("2 dashboards (triton, trtllm_serve)") && stderr.contains("--out DIR"),
        "{stderr}"
    );
    let d = export("sglang");
    assert_eq!(d["uid"], "llm-doctor-sglang");
    // SGLang exports its request limit: the running requests are charted against it.
    let running = panels(&d)
        .into_iter()
        .find(|p| {
            p["title"] == "running_requests" && p["targets"].as_array().is_some_and(|t| t.len() > 1)
        })
        .expect("running_requests against the limit");
    assert!(
        running["targets"][1]["expr"]
            .as_str()
            .unwrap()
            .contains("sglang:max_running_requests{instance=~\"$instance\"}"),
        "{running}"
    );
    let out = run(&["rules", "export", "grafana", "--engine", "nope"]);
    assert_ne!(outcome(&out).0, 0);
}

/// `--slo` moves the objective in the rules and in the dashboards' lines alike; an unknown one
/// is refused with its name.
#[test]
fn objectives_given_move_the_rules_and_the_lines() {
    let ttft_line = |d: &Value| -> Vec<f64> {
        panels(d)
            .into_iter()
            .filter(|p| p["title"] == "ttft_p99_seconds")
            .flat_map(|p| {
                p["fieldConfig"]["defaults"]["thresholds"]["steps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|s| s["value"].as_f64())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let default = ttft_line(&export("vllm"));
    assert!(
        default.contains(&1.0) && !default.contains(&2.0),
        "{default:?}"
    );
    let out = run(&[
        "rules",
        "export",
        "grafana",
        "--engine",
        "vllm",
        "--slo",
        "ttft_p99_seconds=2",
    ]);
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, 0, "{stderr}");
    let moved = ttft_line(&serde_json::from_str(&stdout).unwrap());
    assert!(moved.contains(&2.0), "{moved:?}");
    let (_, default_rules, _) =
        outcome(&run(&["rules", "export", "prometheus", "--engine", "vllm"]));
    let (code, rules, stderr) = outcome(&run(&[
        "rules",
        "export",
        "prometheus",
        "--engine",
        "vllm",
        "--slo",
        "ttft_p99_seconds=2",
    ]));
    assert_eq!(code, 0, "{stderr}");
    assert_ne!(rules, default_rules);
    assert!(
        rules.contains("))) > 2.0\n"),
        "the TTFT objective in the rule"
    );
    let (code, _, stderr) = outcome(&run(&[
        "rules",
        "export",
        "grafana",
        "--engine",
        "vllm",
        "--slo",
        "ttft_p99=2",
    ]));
    assert_ne!(code, 0);
    assert!(stderr.contains("ttft_p99"), "{stderr}");
}
