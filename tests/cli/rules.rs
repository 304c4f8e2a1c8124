//! `rules check|explain|graph` and `signals`.

use crate::support::{golden, outcome, run, temp_file};

#[test]
fn shipped_rules_check_clean() {
    let (code, out, err) = outcome(&run(&["rules", "check"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("ok: 7 symptoms, "), "{out}");
}

#[test]
fn a_broken_rules_directory_fails_with_every_error_located() {
    let dir = tempfile::tempdir().unwrap();
    temp_file(
        dir.path(),
        "extra.yaml",
        "causes:\n  - id: noisy_neighbour\n    title: t\n    why: w\n    when: queue_dept > 1 and fact.enginee == \"vllm\"\n    explains: [high_ttft]\n    remediations: [scale_outt]\n",
    );
    let (code, out, err) = outcome(&run(&["rules", "check", dir.path().to_str().unwrap()]));
    assert_eq!(code, 2);
    assert!(out.is_empty());
    let err = err.replace(dir.path().to_str().unwrap(), "DIR");
    golden("rules_check_broken.txt", &err);
}

/// A signal definition whose leaf lacks the parameter it reads (or carries one it ignores)
/// fails the check at the expression's own line and column, not later as an unknown signal.
#[test]
fn a_signal_missing_its_parameter_fails_the_check_where_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let shipped =
        std::fs::read_to_string(crate::support::root().join("rules/signals/node.yaml")).unwrap();
    let line = 1 + shipped
        .lines()
        .position(|l| l.contains("share_below"))
        .expect("node.yaml defines a share below");
    std::fs::create_dir(dir.path().join("signals")).unwrap();
    for (edit, says) in [
        (", below: 0.05", "share_below needs `below`"),
        (", below: 0.05", "share_below takes no `q`"),
    ] {
        let text = if says.contains("needs") {
            shipped.replace(edit, "")
        } else {
            shipped.replace(edit, ", below: 0.05, q: 0.5")
        };
        temp_file(&dir.path().join("signals"), "node.yaml", &text);
        let (code, out, err) = outcome(&run(&["rules", "check", dir.path().to_str().unwrap()]));
        assert_eq!(code, 2, "{out}{err}");
        assert!(
            err.contains("signals/node.yaml: signals.host_cpu_pegged_core_share_ratio.max: "),
            "{err}"
        );
        assert!(err.contains(says), "{err}");
        // Column 10: the `{share_below: ...}` map inside `max:`, not the signal's own line start.
        assert!(err.contains(&format!("at line {line} column 10")), "{err}");
    }
}

#[test]
fn a_rules_directory_overrides_a_shipped_playbook() {
    let dir = tempfile::tempdir().unwrap();
    let shipped =
        std::fs::read_to_string(crate::support::root().join("rules/playbooks/symptoms.yaml"))
            .unwrap();
    temp_file(
        dir.path(),
        "symptoms.yaml",
        &shipped.replace("    default: 1\n", "    default: 3\n"),
    );
    let (code, out, err) = outcome(&run(&[
        "rules",
        "explain",
        "slo.ttft_p99_seconds",
        "--rules",
        dir.path().to_str().unwrap(),
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("SLO ttft_p99_seconds = 3 "), "{out}");
}

#[test]
fn explain_prints_a_cause_and_suggests_on_typos() {
    let (code, out, _) = outcome(&run(&["rules", "explain", "kv_cache_exhaustion"]));
    assert_eq!(code, 0);
    assert!(
        out.contains("fires when: max_over_time(kv_cache_usage_ratio) > 95%"),
        "{out}"
    );
    assert!(out.contains("quantize_kv_cache"), "{out}");
    let (code, _, err) = outcome(&run(&["rules", "explain", "kv_cache_exhaustio"]));
    assert_eq!(code, 2);
    assert!(err.contains("did you mean `kv_cache_exhaustion`?"), "{err}");
}

#[test]
fn graph_in_dot_and_mermaid() {
    let (code, dot, _) = outcome(&run(&["rules", "graph", "--format", "dot"]));
    assert_eq!(code, 0);
    assert!(dot.starts_with("digraph diagnosis {"));
    assert!(
        dot.contains("\"kv_cache_exhaustion\" -> \"queue_backlog\";"),
        "{dot}"
    );
    let (code, mm, _) = outcome(&run(&["rules", "graph", "--format", "mermaid"]));
    assert_eq!(code, 0);
    assert!(mm.contains("kv_cache_exhaustion --> queue_backlog"), "{mm}");
    // An explanation that holds only under a condition is drawn apart from the others.
    assert!(
        dot.contains("\"queue_backlog\" -> \"high_itl\" [style=dotted, label=\"when\"];"),
        "{dot}"
    );
    assert!(mm.contains("queue_backlog -.->|when| high_itl"), "{mm}");
}

#[test]
fn explain_names_a_conditional_explanation_with_its_condition() {
    let (code, out, _) = outcome(&run(&["rules", "explain", "queue_backlog"]));
    assert_eq!(code, 0);
    assert!(
        out.contains("explains high_itl when: batch_scaling_efficiency_ratio < 50%"),
        "{out}"
    );
    let (code, out, _) = outcome(&run(&["rules", "explain", "high_itl"]));
    assert_eq!(code, 0);
    assert!(out.contains("queue_backlog (when it holds)"), "{out}");
}

#[test]
fn signals_lists_the_catalog() {
    let (code, out, _) = outcome(&run(&["signals"]));
    assert_eq!(code, 0);
    for name in [
        "ttft_p99_seconds",
        "kv_cache_usage_ratio",
        "host_cpu_busiest_core_ratio",
        "max_num_seqs",
    ] {
        assert!(out.contains(name), "{name} missing");
    }
    let (code, json, _) = outcome(&run(&["signals", "--format", "json"]));
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["signals"].as_array().unwrap().len() >= 50);
    // Markdown is Markdown, not the terminal table.
    let (code, md, _) = outcome(&run(&["signals", "--format", "markdown"]));
    assert_eq!(code, 0);
    assert!(md.starts_with("## Signals\n\n| signal | unit |"), "{md}");
    assert!(md.contains("| `kv_cache_usage_ratio` | ratio |"), "{md}");
    assert!(md.contains("## Facts"), "{md}");
    let (_, help, _) = outcome(&run(&["signals", "--help"]));
    assert!(help.contains("table, json or markdown"), "{help}");
}

/// `rules explain --format markdown` writes the page an alert's runbook_url points at.
#[test]
fn explain_publishes_a_runbook_page() {
    let (code, md, err) = outcome(&run(&[
        "rules",
        "explain",
        "high_ttft",
        "--format",
        "markdown",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(
        md.starts_with("# symptom high_ttft: Time to first token is high\n\n"),
        "{md}"
    );
    assert!(md.contains("```text\nfires when: ttft_p99_seconds"), "{md}");
    assert!(md.trim_end().ends_with("```"), "{md}");
    let (_, rules, _) = outcome(&run(&[
        "rules",
        "export",
        "prometheus",
        "--engine",
        "vllm",
        "--runbook-url",
        "https://runbooks.example/{id}",
    ]));
    assert!(
        rules.contains("runbook_url: https://runbooks.example/high_ttft"),
        "{rules}"
    );
}

/// Help says what each command does and only what it accepts.
#[test]
fn help_matches_the_commands() {
    let (_, top, _) = outcome(&run(&["--help"]));
    assert!(
        top.contains("from recorded metrics, live /metrics endpoints"),
        "{top}"
    );
    // `record` has no --at: its help must not send a user there.
    let (_, record, _) = outcome(&run(&["record", "--help"]));
    assert!(!record.contains("--at"), "{record}");
}

#[test]
fn usage_errors_exit_2() {
    let (code, _, err) = outcome(&run(&["diagnose"]));
    assert_eq!(code, 2);
    assert!(err.contains("FILES"), "{err}");
    let (code, _, _) = outcome(&run(&["no-such-command"]));
    assert_eq!(code, 2);
    let (code, out, _) = outcome(&run(&["--help"]));
    assert_eq!(code, 0);
    assert!(out.contains("diagnose"));
    // Debug builds check clap's definitions when a subcommand is parsed.
    for sub in ["diagnose", "record", "signals", "rules"] {
        let (code, out, err) = outcome(&run(&[sub, "--help"]));
        assert_eq!(code, 0, "{sub}: {err}");
        assert!(out.contains("Usage"), "{sub}: {out}");
    }
}
