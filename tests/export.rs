//! `rules export prometheus` and the examples/ that pair it with Alertmanager: the committed
//! rules are what the export writes, promtool and amtool accept them, and the exported alert for
//! the kv_cache_exhaustion incident fires in a real Prometheus.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::prom::{end_recording_at, fixture_text, now_ms, Prometheus};
use crate::support::{outcome, root, run};

/// `cmd args` run in the repository: whether it succeeded, and its stdout and stderr.
pub fn tool(cmd: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(cmd)
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("{cmd} runs (run scripts/install-test-servers.sh): {e}"));
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn the_committed_rules_are_the_export_and_promtool_accepts_them() {
    let (code, rules, err) = outcome(&run(&["rules", "export", "prometheus"]));
    assert_eq!(code, 0, "{err}");
    // examples/ is reviewed as a diff when playbooks change.
    let path = root().join("examples/prometheus-rules.yml");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &rules).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        rules,
        "examples/prometheus-rules.yml is stale: run with UPDATE_GOLDEN=1"
    );
    let (ok, out) = tool(
        "promtool",
        &["check", "rules", "examples/prometheus-rules.yml"],
    );
    assert!(ok, "{out}");
    assert!(out.contains("SUCCESS: 62 rules found"), "{out}");
    // Every symptom has an alert for vLLM.
    let (_, vllm, _) = outcome(&run(&["rules", "export", "prometheus", "--engine", "vllm"]));
    for s in [
        "HighTtft",
        "HighLatency",
        "HighItl",
        "LowThroughput",
        "Oom",
        "HighErrorRate",
        "Truncation",
    ] {
        assert!(
            vllm.contains(&format!("alert: LLMDoctor{s}\n")),
            "{s} missing:\n{vllm}"
        );
    }
    // What an engine cannot tell is said, not silently dropped.
    assert!(rules.contains("# not exported: tgi: high_ttft"), "{rules}");
    let (code, _, err) = outcome(&run(&["rules", "export", "prometheus", "--engine", "nope"]));
    assert_eq!(code, 2);
    assert!(err.contains("unknown engine"), "{err}");
}

/// Every window and hold time the flags accept gives rules promtool accepts; a zero window
/// (`rate(x[0])`, which Prometheus refuses) is refused before anything is written.
#[test]
fn every_accepted_window_gives_rules_promtool_accepts() {
    let dir = tempfile::tempdir().unwrap();
    for (window, for_) in [("1m", "0s"), ("90s", "30s"), ("1h", "5m"), ("5m30s", "2m")] {
        let (code, rules, err) = outcome(&run(&[
            "rules",
            "export",
            "prometheus",
            "--window",
            window,
            "--for",
            for_,
        ]));
        assert_eq!(code, 0, "{window}: {err}");
        assert!(rules.contains(&format!("[{window}]")), "{window}");
        assert!(
            !rules.contains("0.9500000000000001"),
            "folding noise in {window}"
        );
        assert!(rules.contains("summary: Time to first token is high ({{ $value | humanize }})"));
        assert!(rules.contains("runbook_url: runbooks/high_ttft.md"));
        let path = dir.path().join("rules.yml");
        std::fs::write(&path, &rules).unwrap();
        let (ok, out) = tool("promtool", &["check", "rules", path.to_str().unwrap()]);
        assert!(ok, "{window}: {out}");
    }
    for bad in ["0", "0s", "five minutes"] {
        let (code, out, err) = outcome(&run(&["rules", "export", "prometheus", "--window", bad]));
        assert_eq!(code, 2, "{bad}: {out}");
        assert!(err.contains("--window"), "{bad}: {err}");
    }
}

#[test]
fn the_alertmanager_example_is_valid() {
    let (ok, out) = tool("amtool", &["check-config", "examples/alertmanager.yml"]);
    assert!(ok, "{out}");
}

#[test]
fn the_exported_ttft_alert_fires_on_the_kv_incident() {
    // Prometheus evaluates rules at its wall clock: shift the recording to end just before now.
    let end_ms = (now_ms() / 1000 - 5) * 1000;
    let (om, _) = end_recording_at(&fixture_text("kv_cache_exhaustion"), end_ms);
    let dir = tempfile::tempdir().unwrap();
    let rule_file = dir.path().join("rules.yml");
    let rules = vllm_rules_firing_at_once();
    std::fs::write(&rule_file, rules).unwrap();
    let config = format!(
        "global:\n  evaluation_interval: 1s\nrule_files:\n- {}\nscrape_configs: []\n",
        rule_file.display()
    );
    let prom = Prometheus::start_with_args(&om, &[], Some(&config));
    let deadline = Instant::now() + Duration::from_secs(20);
    let firing = loop {
        let alerts = prom.api("/api/v1/alerts");
        let names: Vec<String> = alerts["data"]["alerts"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|x| x["state"] == "firing")
                    .map(|x| x["labels"]["alertname"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default();
        // Alerts of one group can turn firing at different evaluations: wait for all expected.
        let expected = ["LLMDoctorHighTtftCritical", "LLMDoctorOom"];
        if expected.iter().all(|e| names.iter().any(|n| n == e)) || Instant::now() > deadline {
            break names;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(
        firing.contains(&"LLMDoctorHighTtft".to_string()),
        "{firing:?}\n{}",
        prom.log()
    );
    assert!(
        firing.contains(&"LLMDoctorHighTtftCritical".to_string()),
        "{firing:?}"
    );
    assert!(
        firing.contains(&"LLMDoctorOom".to_string()),
        "KV 99.5% with preemptions: {firing:?}"
    );
    assert!(
        !firing.contains(&"LLMDoctorTruncation".to_string()),
        "{firing:?}"
    );
}

/// The exported truncation alert keeps the diagnosis' guard: answers that stop at the client's
/// own `max_tokens` (every request sets it and gets it all) are not truncation; without the
/// max-tokens series the guard is unknown and the alert fires as before. promtool's rule unit
/// tests evaluate the exported rule on series written here.
#[test]
fn the_truncation_alert_stays_quiet_when_clients_capped_the_answers() {
    let dir = tempfile::tempdir().unwrap();
    let rules = vllm_rules_firing_at_once();
    std::fs::write(dir.path().join("rules.yml"), &rules).unwrap();
    // promtool compares annotations too: the exported rule's own.
    let doc: serde_yaml::Value = serde_yaml::from_str(&rules).unwrap();
    let rule = doc["groups"][0]["rules"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|r| r["alert"] == "LLMDoctorTruncation")
        .unwrap();
    let mut annotations = serde_yaml::to_string(&rule["annotations"]).unwrap();
    annotations = annotations.replace("{{ $value | humanize }}", "1");
    let annotations: serde_json::Value = serde_yaml::from_str(&annotations).unwrap();
    // 10 requests/s, all finished by length; with and without the client-cap series.
    let base = |pod: &str| {
        format!(
            "      - series: 'vllm:request_success_total{{finished_reason=\"length\",pod=\"{pod}\"}}'\n        values: '0+600x20'\n      - series: 'vllm:request_success_total{{finished_reason=\"stop\",pod=\"{pod}\"}}'\n        values: '0+0x20'\n"
        )
    };
    let capped = "      - series: 'vllm:request_params_max_tokens_count{pod=\"capped\"}'\n        values: '0+600x20'\n      - series: 'vllm:request_generation_tokens_count{pod=\"capped\"}'\n        values: '0+600x20'\n      - series: 'vllm:request_params_max_tokens_sum{pod=\"capped\"}'\n        values: '0+76800x20'\n      - series: 'vllm:request_generation_tokens_sum{pod=\"capped\"}'\n        values: '0+76800x20'\n";
    let test = format!(
        "rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{}{}{}    alert_rule_test:\n      - eval_time: 10m\n        alertname: LLMDoctorTruncation\n        exp_alerts:\n          - exp_labels: {{severity: warning, llm_doctor_symptom: truncation, engine: vllm, llm_doctor_adapter: vllm, pod: uncapped}}\n            exp_annotations: {}\n",
        base("capped"),
        capped,
        base("uncapped"),
        annotations
    );
    std::fs::write(dir.path().join("test.yml"), test).unwrap();
    let (ok, out) = tool(
        "promtool",
        &[
            "test",
            "rules",
            dir.path().join("test.yml").to_str().unwrap(),
        ],
    );
    assert!(ok, "{out}");
}

/// `rules export prometheus --engine vllm --for 0s`: alerts that fire at their first evaluation.
fn vllm_rules_firing_at_once() -> String {
    let (code, rules, err) = outcome(&run(&[
        "rules",
        "export",
        "prometheus",
        "--engine",
        "vllm",
        "--for",
        "0s",
    ]));
    assert_eq!(code, 0, "{err}");
    rules
}
