//! Every shipped signal definition compiles to PromQL that Prometheus' own parser accepts.

use std::process::Command;

use llm_doctor::signal::adapter::eval::Stat;
use llm_doctor::signal::promql::{compile, QueryOptions};

#[test]
fn every_signal_compiles_to_valid_promql() {
    let rules = llm_doctor::rules::load_rules(None).unwrap();
    let by = ["instance", "pod"];
    let mut yaml = String::from("groups:\n");
    let mut count = 0;
    for a in &rules.adapters.list {
        yaml.push_str(&format!("  - name: {}\n    rules:\n", a.name));
        for (signal, expr) in &a.signals {
            for (stat, suffix) in [(Stat::Last, ""), (Stat::Max, "_max")] {
                let q = compile(
                    expr,
                    &QueryOptions {
                        by: &by,
                        stat,
                        ..QueryOptions::default()
                    },
                );
                yaml.push_str(&format!(
                    "      - record: llm_doctor:{}:{signal}{suffix}\n        expr: {}\n",
                    a.name,
                    serde_json::to_string(&q).unwrap()
                ));
                count += 1;
            }
        }
    }
    assert!(count > 150, "{count}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("signals.rules.yml");
    std::fs::write(&file, &yaml).unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .expect("promtool runs (install Debian's prometheus package: scripts/test.sh does)");
    assert!(
        out.status.success(),
        "promtool rejected generated PromQL:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
