//! Playbook loading, validation and evaluation, against a small catalog.
//!
//! Error messages are kept as golden files (`tests/diagnostics/playbook_*.txt`); run with
//! `UPDATE_GOLDEN=1` to rewrite them after an intended change, then review the diff.

use std::collections::BTreeMap;
use std::path::PathBuf;

use llm_doctor_engine::condition::WindowStats;
use llm_doctor_engine::playbook::spec::CauseSeverity;
use llm_doctor_engine::playbook::{LoadErrorKind, Source};
use llm_doctor_engine::report::{Severity, ShownValue, Status};
use llm_doctor_engine::{
    diagnose, load, Catalog, FactValue, Playbook, SignalValue, Snapshot, Target,
};

const CATALOG: &str = r#"
signals:
  - {name: ttft_p99_seconds, unit: seconds, group: latency, description: "TTFT p99"}
  - {name: queue_depth, unit: requests, group: load, description: "waiting"}
  - {name: kv_cache_usage_ratio, unit: ratio, group: memory, description: "KV used"}
  - {name: preemptions_per_second, unit: per_second, group: memory, description: "preemptions"}
  - {name: gpu_utilization_ratio, unit: ratio, group: gpu, description: "GPU busy"}
  - {name: gpu_memory_used_ratio, unit: ratio, group: memory, description: "framebuffer used"}
facts:
  - {name: engine, type: string, description: "engine"}
  - {name: kv_cache_dtype, type: string, description: "KV dtype"}
"#;

const GOOD: &str = r#"
slos:
  - {id: ttft_p99_seconds, default: 1, title: TTFT objective, why: interactive}
symptoms:
  - id: high_ttft
    title: TTFT is high
    why: users wait
    when: ttft_p99_seconds > slo.ttft_p99_seconds
    critical_when: ttft_p99_seconds > 4 * slo.ttft_p99_seconds
  - id: oom
    title: memory
    why: crashes
    when: kv_cache_usage_ratio >= 98% and preemptions_per_second > 0
causes:
  - id: queue_backlog
    title: queue
    why: arrivals exceed capacity
    when: avg_over_time(queue_depth) >= 1
    evidence:
      - {when: "max_over_time(queue_depth) >= 10", weight: 1}
      - {when: "gpu_utilization_ratio >= 70%", weight: 1}
    explains: [high_ttft]
    remediations: [scale_out]
  - id: kv_cache_exhaustion
    title: kv full
    why: preemption
    when: kv_cache_usage_ratio > 95%
    evidence:
      - {when: "preemptions_per_second > 0", weight: 4}
      - {when: "fact.kv_cache_dtype == \"auto\"", weight: 1}
    leads_to: [queue_backlog]
    explains: [oom]
    remediations: [quantize_kv_cache, scale_out]
  - id: low_demand
    severity: info
    title: low demand
    why: not a fault
    when: gpu_utilization_ratio < 30% and queue_depth < 1
    explains: [high_ttft]
    remediations: [scale_out]
remediations:
  - {id: scale_out, title: add replicas, why: capacity, favours: both, tradeoff: costs GPUs, actions: {any: "add replicas"}}
  - {id: quantize_kv_cache, title: fp8 kv, why: capacity, favours: latency, tradeoff: accuracy, actions: {vllm: "--kv-cache-dtype fp8"}}
"#;

fn catalog() -> Catalog {
    Catalog::from_yaml(CATALOG, "catalog.yaml").unwrap()
}

fn playbook(text: &str) -> Playbook {
    load(
        &[Source {
            name: "rules/test.yaml",
            text,
        }],
        &catalog(),
    )
    .unwrap()
}

fn errors(text: &str) -> (Vec<LoadErrorKind>, String) {
    match load(
        &[Source {
            name: "rules/test.yaml",
            text,
        }],
        &catalog(),
    ) {
        Ok(_) => panic!("loaded"),
        Err(e) => (e.0.iter().map(|x| x.kind).collect(), e.to_string()),
    }
}

fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/diagnostics/playbook_{name}.txt"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, format!("{actual}\n")).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing golden file {}", path.display()));
    assert_eq!(
        expected.trim_end(),
        actual,
        "golden file {} differs",
        path.display()
    );
}

#[test]
fn a_good_playbook_loads_with_ancestors() {
    let pb = playbook(GOOD);
    let q = pb.cause("queue_backlog").unwrap();
    let kv = pb.cause("kv_cache_exhaustion").unwrap();
    assert_eq!(pb.causes[q].ancestors, vec![kv]);
    assert!(pb.causes[kv].ancestors.is_empty());
}

#[test]
fn unknown_fields_are_rejected_with_line_and_column() {
    let (kinds, msg) = errors("symptoms:\n  - id: x\n    title: t\n    why: w\n    when: queue_depth > 1\n    threshhold: 3\n");
    assert_eq!(kinds, vec![LoadErrorKind::Yaml]);
    assert!(msg.contains("unknown field `threshhold`"), "{msg}");
    golden("unknown_field", &msg);
}

#[test]
fn every_condition_error_is_reported_with_its_location() {
    let text = GOOD
        .replace(
            "avg_over_time(queue_depth) >= 1",
            "avg_over_time(queue_dept) >= 1",
        )
        .replace(
            "preemptions_per_second > 0\", weight: 4",
            "preemptions_per_secnd > 0\", weight: 4",
        )
        .replace(
            "ttft_p99_seconds > slo.ttft_p99_seconds",
            "ttft_p99_seconds > slo.ttft_p99",
        );
    let (kinds, msg) = errors(&text);
    assert_eq!(kinds, vec![LoadErrorKind::Condition; 3], "{msg}");
    assert!(msg.contains("did you mean `queue_depth`?"), "{msg}");
    golden("conditions", &msg);
}

#[test]
fn a_cycle_is_printed_as_a_path() {
    let text = GOOD.replace("explains: [high_ttft]\n    remediations: [scale_out]\n  - id: kv", "leads_to: [kv_cache_exhaustion]\n    explains: [high_ttft]\n    remediations: [scale_out]\n  - id: kv");
    let (kinds, msg) = errors(&text);
    assert_eq!(kinds, vec![LoadErrorKind::Cycle], "{msg}");
    assert!(
        msg.contains("[queue_backlog -> kv_cache_exhaustion -> queue_backlog]")
            || msg.contains("[kv_cache_exhaustion -> queue_backlog -> kv_cache_exhaustion]"),
        "{msg}"
    );
    golden("cycle", &msg);
}

#[test]
fn references_missing_words_and_unreachable_causes_are_all_reported() {
    let text = GOOD
        .replace(
            "remediations: [quantize_kv_cache, scale_out]",
            "remediations: [quantize_kv_cache, scale_outt]",
        )
        .replace("    why: not a fault\n", "")
        .replace("    explains: [oom]\n", "    explains: [omm]\n");
    let (kinds, msg) = errors(&text);
    assert!(kinds.contains(&LoadErrorKind::UnknownReference), "{msg}");
    assert!(kinds.contains(&LoadErrorKind::Incomplete), "{msg}");
    assert!(msg.contains("did you mean `scale_out`?"), "{msg}");
    assert!(msg.contains("did you mean `oom`?"), "{msg}");
    golden("references", &msg);

    let unreachable = GOOD.replace(
        "    explains: [high_ttft]\n    remediations: [scale_out]\nremediations:",
        "    remediations: [scale_out]\nremediations:",
    );
    let (kinds, msg) = errors(&unreachable);
    assert_eq!(kinds, vec![LoadErrorKind::Unreachable], "{msg}");
    assert!(msg.contains("cause `low_demand`"), "{msg}");
}

#[test]
fn duplicate_ids_in_one_file_are_errors_but_later_files_override() {
    let dup = GOOD.replace("  - id: low_demand", "  - id: queue_backlog");
    let (kinds, _) = errors(&dup);
    assert!(kinds.contains(&LoadErrorKind::DuplicateId));

    let over = "causes:\n  - id: low_demand\n    severity: info\n    title: overridden\n    why: w\n    when: gpu_utilization_ratio < 10%\n    explains: [high_ttft]\n    remediations: [scale_out]\n";
    let pb = load(
        &[
            Source {
                name: "a.yaml",
                text: GOOD,
            },
            Source {
                name: "b.yaml",
                text: over,
            },
        ],
        &catalog(),
    )
    .unwrap();
    let i = pb.cause("low_demand").unwrap();
    assert_eq!(pb.causes[i].title, "overridden");
    assert_eq!(pb.causes.len(), 3);
}

fn snapshot(cat: &Catalog, values: &[(&str, f64)], stats: Option<(&str, WindowStats)>) -> Snapshot {
    let mut s = Snapshot::new(
        cat,
        Target {
            engine: Some("vllm".into()),
            labels: BTreeMap::new(),
        },
    );
    for (n, v) in values {
        s.set_signal(
            cat,
            n,
            SignalValue {
                value: *v,
                stats: None,
                source: "test".into(),
            },
        )
        .unwrap();
    }
    if let Some((n, st)) = stats {
        s.set_signal(
            cat,
            n,
            SignalValue {
                value: st.last,
                stats: Some(st),
                source: "test".into(),
            },
        )
        .unwrap();
    }
    s.set_fact(cat, "engine", FactValue::Str("vllm".into()), "test")
        .unwrap();
    s.set_fact(cat, "kv_cache_dtype", FactValue::Str("auto".into()), "test")
        .unwrap();
    s
}

#[test]
fn root_cause_ranks_first_with_its_chain_and_engine_action() {
    let cat = catalog();
    let pb = playbook(GOOD);
    let slos = pb.slo_values(&BTreeMap::new()).unwrap();
    let queue = WindowStats {
        min: 50.0,
        mean: 100.0,
        max: 180.0,
        last: 180.0,
    };
    let snap = snapshot(
        &cat,
        &[
            ("ttft_p99_seconds", 40.0),
            ("kv_cache_usage_ratio", 0.99),
            ("preemptions_per_second", 0.3),
            ("gpu_utilization_ratio", 0.9),
        ],
        Some(("queue_depth", queue)),
    );
    let d = diagnose(&pb, &snap, &slos);
    assert_eq!(d.status, Status::Critical);
    let ids: Vec<&str> = d.causes.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, vec!["kv_cache_exhaustion", "queue_backlog"]);
    assert!(d.causes[0].root && !d.causes[1].root);
    assert_eq!(
        d.causes[0].chain,
        vec!["kv_cache_exhaustion", "queue_backlog", "high_ttft"]
    );
    assert_eq!(
        d.causes[0].remediations[0].action.as_deref(),
        Some("--kv-cache-dtype fp8")
    );
    assert_eq!(
        d.causes[0].remediations[1].action.as_deref(),
        Some("add replicas")
    );
    let sev: Vec<(&str, Severity)> = d
        .symptoms
        .iter()
        .map(|s| (s.id.as_str(), s.severity))
        .collect();
    assert_eq!(
        sev,
        vec![
            ("high_ttft", Severity::Critical),
            ("oom", Severity::Warning)
        ]
    );
    // The evidence carries values and thresholds.
    let e = &d.causes[1].evidence[0];
    assert_eq!(e.condition, "avg_over_time(queue_depth) >= 1");
    assert_eq!(e.result, Some(true));
}

#[test]
fn missing_signals_make_rules_unchecked_not_false_and_lower_confidence() {
    let cat = catalog();
    let pb = playbook(GOOD);
    let slos = pb.slo_values(&BTreeMap::new()).unwrap();
    // No GPU utilization and no TTFT: high_ttft and low_demand cannot be checked.
    let mut snap = snapshot(
        &cat,
        &[
            ("kv_cache_usage_ratio", 0.99),
            ("preemptions_per_second", 0.0),
        ],
        Some((
            "queue_depth",
            WindowStats {
                min: 0.0,
                mean: 5.0,
                max: 9.0,
                last: 0.0,
            },
        )),
    );
    snap.set_hint(&cat, "gpu_utilization_ratio", "scrape dcgm-exporter")
        .unwrap();
    let d = diagnose(&pb, &snap, &slos);
    let unchecked: Vec<&str> = d.unchecked.iter().map(|u| u.rule.as_str()).collect();
    assert_eq!(unchecked, vec!["low_demand", "high_ttft"]);
    let low = d.unchecked.iter().find(|u| u.rule == "low_demand").unwrap();
    assert_eq!(low.missing, vec!["gpu_utilization_ratio"]);
    assert_eq!(low.hint.as_deref(), Some("scrape dcgm-exporter"));
    assert_eq!(d.healthy, vec!["oom"]);
    let q = d.causes.iter().find(|c| c.id == "queue_backlog").unwrap();
    assert!(q.confidence < 1.0 && q.confidence > 0.0, "{}", q.confidence);
    assert_eq!(q.unknown.len(), 1);
}

#[test]
fn nan_and_infinite_signals_are_absent() {
    let cat = catalog();
    let pb = playbook(GOOD);
    let slos = pb.slo_values(&BTreeMap::new()).unwrap();
    let snap = snapshot(
        &cat,
        &[
            ("ttft_p99_seconds", f64::NAN),
            ("kv_cache_usage_ratio", f64::INFINITY),
            ("gpu_utilization_ratio", 0.5),
        ],
        None,
    );
    let d = diagnose(&pb, &snap, &slos);
    assert!(d.symptoms.is_empty());
    assert!(d.unchecked.iter().any(|u| u.rule == "high_ttft"));
    assert!(d.unchecked.iter().any(|u| u.rule == "oom"));
    assert_eq!(d.status, Status::Unknown);
}

/// By index as by name: a non-finite value is absent, an index past the catalog sets nothing.
#[test]
fn signals_set_by_index_are_those_set_by_name() {
    let cat = catalog();
    let value = |v: f64| SignalValue {
        value: v,
        stats: None,
        source: "test".into(),
    };
    let by_name = snapshot(
        &cat,
        &[
            ("ttft_p99_seconds", 2.0),
            ("gpu_utilization_ratio", f64::NAN),
        ],
        None,
    );
    let mut by_index = snapshot(&cat, &[], None);
    by_index.set_signal_at(cat.signal("ttft_p99_seconds").unwrap(), value(2.0));
    by_index.set_signal_at(
        cat.signal("gpu_utilization_ratio").unwrap(),
        value(f64::NAN),
    );
    by_index.set_signal_at(cat.signals().len(), value(1.0));
    for i in 0..cat.signals().len() {
        assert_eq!(
            by_index.signal_at(i).map(|v| v.value),
            by_name.signal_at(i).map(|v| v.value),
            "{}",
            cat.signals()[i].name
        );
    }
    assert!(by_index.signal(&cat, "ttft_p99_seconds").is_some());
    assert!(by_index.signal(&cat, "gpu_utilization_ratio").is_none());
}

#[test]
fn info_causes_leave_a_target_healthy_and_slos_can_be_overridden() {
    let cat = catalog();
    let pb = playbook(GOOD);
    let snap = snapshot(
        &cat,
        &[
            ("ttft_p99_seconds", 1.5),
            ("kv_cache_usage_ratio", 0.1),
            ("preemptions_per_second", 0.0),
            ("gpu_utilization_ratio", 0.05),
            ("queue_depth", 0.0),
        ],
        None,
    );
    let d = diagnose(
        &pb,
        &snap,
        &pb.slo_values(&BTreeMap::from([("ttft_p99_seconds".to_string(), 2.0)]))
            .unwrap(),
    );
    assert_eq!(d.status, Status::Healthy);
    assert_eq!(d.causes.len(), 1);
    assert_eq!(d.causes[0].id, "low_demand");
    let d = diagnose(&pb, &snap, &pb.slo_values(&BTreeMap::new()).unwrap());
    assert_eq!(d.status, Status::Degraded);
    let err = pb
        .slo_values(&BTreeMap::from([("ttft_p99".to_string(), 2.0)]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("did you mean `ttft_p99_seconds`?"), "{err}");
}

/// A fired symptom that no fault explains is named as unexplained: advice under it (low demand
/// "explains" a high TTFT only as information) does not count; a fault that explains it does.
#[test]
fn a_symptom_no_fault_explains_is_unexplained() {
    let cat = catalog();
    let pb = playbook(GOOD);
    let slos = pb.slo_values(&BTreeMap::new()).unwrap();
    let advice_only = snapshot(
        &cat,
        &[
            ("ttft_p99_seconds", 3.0),
            ("gpu_utilization_ratio", 0.05),
            ("queue_depth", 0.0),
        ],
        None,
    );
    let d = diagnose(&pb, &advice_only, &slos);
    assert_eq!(d.symptoms[0].id, "high_ttft");
    assert!(d.causes.iter().all(|c| c.severity == CauseSeverity::Info));
    assert_eq!(d.unexplained, vec!["high_ttft"]);

    let explained = snapshot(
        &cat,
        &[("ttft_p99_seconds", 3.0), ("gpu_utilization_ratio", 0.9)],
        Some((
            "queue_depth",
            WindowStats {
                last: 5.0,
                min: 4.0,
                mean: 5.0,
                max: 6.0,
            },
        )),
    );
    let d = diagnose(&pb, &explained, &slos);
    assert_eq!(d.causes[0].id, "queue_backlog");
    assert!(d.unexplained.is_empty(), "{:?}", d.unexplained);
}

#[test]
fn ranking_is_deterministic() {
    let cat = catalog();
    let pb = playbook(GOOD);
    let slos = pb.slo_values(&BTreeMap::new()).unwrap();
    let snap = snapshot(
        &cat,
        &[
            ("ttft_p99_seconds", 40.0),
            ("kv_cache_usage_ratio", 0.99),
            ("preemptions_per_second", 0.3),
            ("gpu_utilization_ratio", 0.9),
            ("queue_depth", 50.0),
        ],
        None,
    );
    let first = diagnose(&pb, &snap, &slos);
    for _ in 0..20 {
        assert_eq!(diagnose(&pb, &snap, &slos), first);
    }
}

/// The TTFT objective and symptom the ranking and advice tests start from.
const TTFT_ONLY: &str = r#"
slos:
  - {id: ttft_p99_seconds, default: 1, title: TTFT objective, why: interactive}
symptoms:
  - id: high_ttft
    title: TTFT is high
    why: users wait
    when: ttft_p99_seconds > slo.ttft_p99_seconds
"#;

/// The playbook of [`TTFT_ONLY`], then `rest` (more of the symptom, symptoms, causes), then the one
/// remediation its causes name; with the catalog and the objectives' values.
fn ttft_playbook(rest: &str) -> (Catalog, Playbook, Vec<f64>) {
    let pb = playbook(&format!(
        "{TTFT_ONLY}{rest}remediations:\n  - {{id: scale_out, title: add replicas, why: capacity, \
         favours: both, tradeoff: costs GPUs, actions: {{any: \"add replicas\"}}}}\n"
    ));
    let slos = pb.slo_values(&BTreeMap::new()).unwrap();
    (catalog(), pb, slos)
}

/// A snapshot of the five signals the ranking and advice tests vary.
fn five(cat: &Catalog, ttft: f64, kv: f64, queue: f64, gpu: f64) -> Snapshot {
    snapshot(
        cat,
        &[
            ("ttft_p99_seconds", ttft),
            ("kv_cache_usage_ratio", kv),
            ("queue_depth", queue),
            ("gpu_utilization_ratio", gpu),
            ("preemptions_per_second", 0.0),
        ],
        None,
    )
}

/// Two root causes, each explaining one latency part: the one behind the worse symptom ranks
/// first, and between equally bad symptoms the one behind the larger share of a request's time
/// (toplev's top-down order), whatever their scores.
#[test]
fn causes_of_the_worst_and_then_the_dominant_part_rank_first() {
    let (cat, pb, slos) = ttft_playbook(
        r#"    critical_when: ttft_p99_seconds > 4 * slo.ttft_p99_seconds
    share: queue_depth / 100
  - id: oom
    title: memory
    why: crashes
    when: kv_cache_usage_ratio >= 98%
    critical_when: kv_cache_usage_ratio >= 99%
    share: 1 - queue_depth / 100
causes:
  - id: queue_backlog
    title: queue
    why: arrivals exceed capacity
    when: queue_depth >= 1
    evidence:
      - {when: "gpu_utilization_ratio >= 70%", weight: 1}
      - {when: "preemptions_per_second > 100", weight: 3}
    explains: [high_ttft]
    remediations: [scale_out]
  - id: kv_cache_exhaustion
    title: kv full
    why: preemption
    when: kv_cache_usage_ratio > 95%
    explains: [oom]
    remediations: [scale_out]
"#,
    );
    let order = |ttft: f64, kv: f64, queue: f64| {
        let snap = five(&cat, ttft, kv, queue, 0.9);
        diagnose(&pb, &snap, &slos)
            .causes
            .iter()
            .map(|c| c.id.clone())
            .collect::<Vec<_>>()
    };
    // kv_cache_exhaustion scores higher (queue_backlog's strongest evidence is false) ...
    let scores = diagnose(&pb, &five(&cat, 10.0, 0.995, 80.0, 0.9), &slos)
        .causes
        .iter()
        .map(|c| (c.id.clone(), c.score))
        .collect::<BTreeMap<_, _>>();
    assert!(
        scores["kv_cache_exhaustion"] > scores["queue_backlog"],
        "{scores:?}"
    );
    // The worse symptom decides: a critical TTFT against a warning OOM.
    assert_eq!(
        order(10.0, 0.985, 50.0),
        ["queue_backlog", "kv_cache_exhaustion"]
    );
    // Both critical: the larger part of a request's time decides (TTFT 80 % against 20 %) ...
    assert_eq!(
        order(10.0, 0.995, 80.0),
        ["queue_backlog", "kv_cache_exhaustion"]
    );
    // ... and with TTFT the smaller part, the KV cause leads again.
    assert_eq!(
        order(10.0, 0.995, 20.0),
        ["kv_cache_exhaustion", "queue_backlog"]
    );
}

/// A cause is advice, not a fault, when only its `advice` condition holds (a costly setting with
/// no measured mechanism) or when every symptom it explains was checked and is clear; a cause that
/// `alarms_alone` stays a fault.
#[test]
fn settings_and_harmless_mechanisms_are_advice() {
    let (cat, pb, slos) = ttft_playbook(
        r#"causes:
  - id: queue_backlog
    title: queue
    why: arrivals exceed capacity
    when: queue_depth >= 1
    explains: [high_ttft]
    remediations: [scale_out]
  - id: kv_cache_exhaustion
    title: kv full
    why: preemption
    when: kv_cache_usage_ratio > 95% and preemptions_per_second > 0
    advice: fact.kv_cache_dtype == "auto"
    explains: [high_ttft]
    remediations: [scale_out]
  - id: gpu_fault
    title: gpu errors
    why: hardware
    alarms_alone: true
    when: gpu_utilization_ratio < 1%
    explains: [high_ttft]
    remediations: [scale_out]
"#,
    );
    let run = |ttft: f64, queue: f64, gpu: f64| {
        let snap = five(&cat, ttft, 0.5, queue, gpu);
        let d = diagnose(&pb, &snap, &slos);
        let causes: Vec<(String, CauseSeverity)> = d
            .causes
            .iter()
            .map(|c| (c.id.clone(), c.severity))
            .collect();
        (d.status, causes)
    };
    // A queue while TTFT meets its objective: the mechanism harms nothing, so it is advice, and
    // so is the KV cause whose gate failed but whose setting is the costly default.
    let (status, causes) = run(0.5, 3.0, 0.5);
    assert_eq!(status, Status::Healthy);
    assert_eq!(causes.len(), 2, "{causes:?}");
    for id in ["queue_backlog", "kv_cache_exhaustion"] {
        assert!(
            causes.contains(&(id.to_string(), CauseSeverity::Info)),
            "{id}: {causes:?}"
        );
    }
    // The same queue with TTFT past its objective is a fault again.
    let (status, causes) = run(3.0, 3.0, 0.5);
    assert_eq!(status, Status::Degraded);
    assert_eq!(
        causes[0],
        ("queue_backlog".to_string(), CauseSeverity::Fault)
    );
    // A cause that alarms alone stays a fault with every symptom clear.
    let (status, causes) = run(0.5, 0.0, 0.0);
    assert_eq!(status, Status::Degraded);
    assert!(
        causes.contains(&("gpu_fault".to_string(), CauseSeverity::Fault)),
        "{causes:?}"
    );
}

/// A symptom that could not be checked is not clear: a cause that explains one stays a fault
/// although every symptom it explains that was measured is clear (missing metrics are unknown,
/// not false). Reached only through a fired cause downstream, that symptom counts only once the
/// downstream cause fires.
#[test]
fn an_unchecked_symptom_keeps_a_cause_a_fault() {
    let (cat, pb, slos) = ttft_playbook(
        r#"  - id: oom
    title: memory
    why: crashes
    when: gpu_memory_used_ratio > 90%
causes:
  - id: burst_direct
    title: a burst, explaining oom itself
    why: arrivals spike
    when: queue_depth >= 5
    explains: [high_ttft, oom]
    remediations: [scale_out]
  - id: burst_through_cache
    title: a burst, reaching oom through the cache
    why: arrivals spike
    when: queue_depth >= 5
    leads_to: [cache_full]
    explains: [high_ttft]
    remediations: [scale_out]
  - id: cache_full
    title: kv full
    why: preemption
    when: kv_cache_usage_ratio > 95%
    explains: [oom]
    remediations: [scale_out]
"#,
    );
    // TTFT measured and fine; the framebuffer (oom's signal) not exported.
    let severities = |kv: f64| {
        let d = diagnose(&pb, &five(&cat, 0.5, kv, 8.0, 0.5), &slos);
        d.causes
            .iter()
            .map(|c| (c.id.clone(), c.severity))
            .collect::<BTreeMap<_, _>>()
    };
    let roomy = severities(0.3);
    assert_eq!(roomy["burst_direct"], CauseSeverity::Fault, "{roomy:?}");
    assert_eq!(
        roomy["burst_through_cache"],
        CauseSeverity::Info,
        "{roomy:?}"
    );
    assert!(!roomy.contains_key("cache_full"), "{roomy:?}");
    // With the cache full, the path to the unchecked symptom is open: a fault again.
    let full = severities(0.99);
    assert_eq!(
        full["burst_through_cache"],
        CauseSeverity::Fault,
        "{full:?}"
    );
    assert_eq!(full["cache_full"], CauseSeverity::Fault, "{full:?}");
    // Control: with the framebuffer measured and clear, the direct edge harms nothing either.
    let measured = snapshot(
        &cat,
        &[
            ("ttft_p99_seconds", 0.5),
            ("kv_cache_usage_ratio", 0.3),
            ("queue_depth", 8.0),
            ("gpu_utilization_ratio", 0.5),
            ("preemptions_per_second", 0.0),
            ("gpu_memory_used_ratio", 0.5),
        ],
        None,
    );
    let d = diagnose(&pb, &measured, &slos);
    let direct = d.causes.iter().find(|c| c.id == "burst_direct").unwrap();
    assert_eq!(direct.severity, CauseSeverity::Info, "{:?}", d.causes);
}

/// A cause reported as advice upstream of a fault does not make that fault a consequence: the
/// fault ranks among the root faults (by its score here), as it does when nothing fired
/// upstream. A fault upstream still does.
#[test]
fn advice_upstream_does_not_demote_a_fault() {
    let (cat, pb, slos) = ttft_playbook(
        r#"causes:
  - id: small_cache_setting
    title: a costly setting
    why: it may limit the cache
    when: kv_cache_usage_ratio > 95%
    advice: gpu_utilization_ratio >= 0
    leads_to: [queue_backlog]
    explains: [high_ttft]
    remediations: [scale_out]
  - id: queue_backlog
    title: queue
    why: arrivals exceed capacity
    when: queue_depth >= 1
    explains: [high_ttft]
    remediations: [scale_out]
  - id: gpu_contention
    title: contention
    why: a neighbour
    when: gpu_utilization_ratio < 50%
    evidence:
      - {when: "preemptions_per_second > 100", weight: 3}
    explains: [high_ttft]
    remediations: [scale_out]
"#,
    );
    let order = |kv: f64| {
        diagnose(&pb, &five(&cat, 3.0, kv, 3.0, 0.3), &slos)
            .causes
            .iter()
            .map(|c| (c.id.clone(), c.severity))
            .collect::<Vec<_>>()
    };
    let (fault, info) = (CauseSeverity::Fault, CauseSeverity::Info);
    // The setting is advice (its gate failed): the queue, scoring higher, ranks first.
    assert_eq!(
        order(0.5),
        [
            ("queue_backlog".to_string(), fault),
            ("gpu_contention".to_string(), fault),
            ("small_cache_setting".to_string(), info),
        ]
    );
    // The setting's mechanism measured (its gate holds): a fault, and the queue follows from it.
    assert_eq!(
        order(0.99),
        [
            ("small_cache_setting".to_string(), fault),
            ("gpu_contention".to_string(), fault),
            ("queue_backlog".to_string(), fault),
        ]
    );
}

/// A cause's fixes in three groups, each in the playbook's order: those whose mechanism the
/// measurements show, the others (unjudged or not), those in effect.
#[test]
fn fixes_whose_mechanism_is_measured_come_first_and_fixes_in_effect_last() {
    let text = GOOD
        .replace(
            "remediations: [quantize_kv_cache, scale_out]",
            "remediations: [quantize_kv_cache, against, unjudged, scale_out, measured]",
        )
        .replace(
            "remediations:\n  - {id: scale_out",
            r#"remediations:
  - {id: against, title: a, why: w, favours: both, tradeoff: t, fits_when: "gpu_utilization_ratio < 50%"}
  - {id: unjudged, title: u, why: w, favours: both, tradeoff: t, fits_when: "queue_depth > 5"}
  - {id: measured, title: m, why: w, favours: both, tradeoff: t, fits_when: "preemptions_per_second > 0 and fact.engine == \"vllm\""}
  - {id: scale_out"#,
        )
        .replace(
            "tradeoff: accuracy, actions: {vllm: \"--kv-cache-dtype fp8\"}}",
            "tradeoff: accuracy, actions: {vllm: \"--kv-cache-dtype fp8\"}, in_effect: {when: 'fact.kv_cache_dtype != \"auto\"', next: more memory}}",
        );
    let cat = catalog();
    let pb = playbook(&text);
    let slos = pb.slo_values(&BTreeMap::new()).unwrap();
    let values = [
        ("kv_cache_usage_ratio", 0.99),
        ("preemptions_per_second", 0.3),
        ("gpu_utilization_ratio", 0.9),
    ];
    let order = |dtype: &str| {
        let mut snap = snapshot(&cat, &values, None);
        snap.set_fact(&cat, "kv_cache_dtype", FactValue::Str(dtype.into()), "test")
            .unwrap();
        let d = diagnose(&pb, &snap, &slos);
        let c = d
            .causes
            .iter()
            .find(|c| c.id == "kv_cache_exhaustion")
            .unwrap();
        c.remediations
            .iter()
            .map(|r| {
                // The values that show the fit, as `name = value`.
                let fits = r.fits.as_ref().map(|f| {
                    let values = f.values.iter().map(|(name, v)| match v {
                        ShownValue::Number(n) => format!("{name} = {n}"),
                        ShownValue::Fact(fact) => format!("{name} = {fact}"),
                        ShownValue::Missing(_) => format!("{name} unknown"),
                    });
                    values.collect::<Vec<_>>().join(", ")
                });
                (r.id.clone(), fits)
            })
            .collect::<Vec<_>>()
    };
    let fits = Some("fact.engine = vllm, preemptions_per_second = 0.3".to_string());
    assert_eq!(
        order("auto"),
        vec![
            ("measured".to_string(), fits.clone()),
            ("quantize_kv_cache".to_string(), None),
            ("against".to_string(), None),
            ("unjudged".to_string(), None),
            ("scale_out".to_string(), None),
        ]
    );
    assert_eq!(
        order("fp8"),
        vec![
            ("measured".to_string(), fits),
            ("against".to_string(), None),
            ("unjudged".to_string(), None),
            ("scale_out".to_string(), None),
            ("quantize_kv_cache".to_string(), None),
        ]
    );
}

#[test]
fn a_bad_fits_when_is_reported_at_its_line_and_column() {
    let text = GOOD.replace(
        "tradeoff: costs GPUs, actions: {any: \"add replicas\"}}",
        "tradeoff: costs GPUs, actions: {any: \"add replicas\"}, fits_when: \"queue_dept > 1\"}",
    );
    let (kinds, message) = errors(&text);
    assert!(!kinds.is_empty());
    assert!(message.contains("fits_when"), "{message}");
    assert!(message.contains("queue_dept"), "{message}");
    assert!(message.contains("rules/test.yaml:"), "{message}");
}

#[test]
fn a_rule_check_says_why_a_cause_did_not_fire_with_every_value_read() {
    let cat = catalog();
    let pb = playbook(GOOD);
    let slos = pb.slo_values(&BTreeMap::new()).unwrap();
    // KV at 90 %: kv_cache_exhaustion's gate is false, so the diagnosis does not list it.
    let snap = snapshot(
        &cat,
        &[
            ("ttft_p99_seconds", 2.0),
            ("kv_cache_usage_ratio", 0.9),
            ("preemptions_per_second", 0.5),
        ],
        None,
    );
    let d = diagnose(&pb, &snap, &slos);
    assert!(d.causes.iter().all(|c| c.id != "kv_cache_exhaustion"));
    let check = llm_doctor_engine::evaluate::check_rule(&pb, &snap, &slos, "kv_cache_exhaustion")
        .expect("a cause of the playbook");
    assert_eq!(
        (check.kind, check.applies, check.outcome),
        ("cause", true, "not fired")
    );
    assert_eq!(check.gate.result, Some(false));
    assert_eq!(
        check.gate.values.get("kv_cache_usage_ratio"),
        Some(&ShownValue::Number(0.9))
    );
    // Evidence is judged whether or not the gate held: preemptions true, the dtype fact true.
    let held: Vec<Option<bool>> = check.evidence.iter().map(|e| e.result).collect();
    assert_eq!(held, vec![Some(true), Some(true)]);
    assert!(check.against.is_empty() && check.also.is_none());
    // A symptom: its gate and its critical condition; an unknown signal leaves a cause unknown.
    let ttft = llm_doctor_engine::evaluate::check_rule(&pb, &snap, &slos, "high_ttft").unwrap();
    assert_eq!(
        (ttft.kind, ttft.gate.result, ttft.outcome),
        ("symptom", Some(true), "fired")
    );
    assert_eq!(ttft.also.as_ref().and_then(|c| c.result), Some(false));
    let queue =
        llm_doctor_engine::evaluate::check_rule(&pb, &snap, &slos, "queue_backlog").unwrap();
    assert_eq!((queue.gate.result, queue.outcome), (None, "unchecked"));
    assert_eq!(queue.gate.missing, vec!["queue_depth"]);
    assert!(llm_doctor_engine::evaluate::check_rule(&pb, &snap, &slos, "no_such_rule").is_none());
}

#[test]
fn a_rule_check_tells_a_cause_ruled_out_from_one_not_judged() {
    let cat = catalog();
    // queue_backlog's gate holds but an item against it outweighs its evidence; low_demand is
    // for another engine than the snapshot's (vllm).
    let text = GOOD
        .replace(
            "      - {when: \"gpu_utilization_ratio >= 70%\", weight: 1}\n",
            "      - {when: \"gpu_utilization_ratio >= 70%\", weight: 1}\n    against:\n      - {when: \"gpu_utilization_ratio < 10%\", weight: 5}\n",
        )
        .replace("    severity: info\n", "    severity: info\n    engines: [sglang]\n");
    let pb = playbook(&text);
    let slos = pb.slo_values(&BTreeMap::new()).unwrap();
    let queue = WindowStats {
        min: 2.0,
        mean: 3.0,
        max: 4.0,
        last: 3.0,
    };
    let snap = snapshot(
        &cat,
        &[("gpu_utilization_ratio", 0.05)],
        Some(("queue_depth", queue)),
    );
    let d = diagnose(&pb, &snap, &slos);
    assert!(d.causes.iter().all(|c| c.id != "queue_backlog"));
    let check =
        llm_doctor_engine::evaluate::check_rule(&pb, &snap, &slos, "queue_backlog").unwrap();
    assert_eq!(check.gate.result, Some(true));
    assert!(check.outcome.starts_with("ruled out"), "{}", check.outcome);
    assert_eq!(check.against[0].result, Some(true));
    let low = llm_doctor_engine::evaluate::check_rule(&pb, &snap, &slos, "low_demand").unwrap();
    assert!(
        !low.applies && low.outcome.starts_with("not judged"),
        "{}",
        low.outcome
    );
}

/// A cause explains a symptom under `explains_when` only while its condition holds: then it is
/// the fault behind that symptom; otherwise the symptom is not its to explain, so the cause is
/// advice (every symptom it explains is clear) and the symptom is named unexplained. An unknown
/// condition claims nothing.
#[test]
fn a_conditional_explanation_holds_only_while_its_condition_does() {
    let (cat, pb, slos) = ttft_playbook(
        r#"  - id: oom
    title: memory
    why: crashes
    when: kv_cache_usage_ratio >= 98% and preemptions_per_second > 0
causes:
  - id: queue_backlog
    title: queue
    why: arrivals exceed capacity
    when: queue_depth >= 1
    explains: [oom]
    explains_when:
      high_ttft: gpu_utilization_ratio >= 90%
    remediations: [scale_out]
"#,
    );
    let run = |values: &[(&str, f64)]| {
        let d = diagnose(&pb, &snapshot(&cat, values, None), &slos);
        let causes: Vec<(String, CauseSeverity)> = d
            .causes
            .iter()
            .map(|c| (c.id.clone(), c.severity))
            .collect();
        (causes, d.unexplained)
    };
    let busy = [
        ("ttft_p99_seconds", 3.0),
        ("queue_depth", 3.0),
        ("kv_cache_usage_ratio", 0.5),
        ("preemptions_per_second", 0.0),
        ("gpu_utilization_ratio", 0.95),
    ];
    let (causes, unexplained) = run(&busy);
    assert_eq!(
        causes,
        vec![("queue_backlog".to_string(), CauseSeverity::Fault)]
    );
    assert!(unexplained.is_empty(), "{unexplained:?}");

    let mut idle = busy;
    idle[4].1 = 0.2;
    let (causes, unexplained) = run(&idle);
    assert_eq!(
        causes,
        vec![("queue_backlog".to_string(), CauseSeverity::Info)]
    );
    assert_eq!(unexplained, vec!["high_ttft"]);

    let (causes, unexplained) = run(&busy[..4]);
    assert_eq!(
        causes,
        vec![("queue_backlog".to_string(), CauseSeverity::Info)]
    );
    assert_eq!(unexplained, vec!["high_ttft"]);
}

/// A conditional explanation names a known symptom, once, with a condition that compiles.
#[test]
fn conditional_explanations_are_checked_when_loading() {
    let base = |explains: &str, when: &str| {
        format!(
            "{TTFT_ONLY}  - id: oom\n    title: memory\n    why: crashes\n    \
             when: kv_cache_usage_ratio >= 98%\ncauses:\n  - id: queue_backlog\n    title: queue\n    why: arrivals exceed capacity\n    \
             when: queue_depth >= 1\n    explains: [{explains}]\n    explains_when:\n      {when}\n    \
             remediations: [scale_out]\nremediations:\n  - {{id: scale_out, title: add replicas, why: capacity, \
             favours: both, tradeoff: costs GPUs, actions: {{any: \"add replicas\"}}}}\n"
        )
    };
    let (kinds, text) = errors(&base("oom", "high_tft: queue_depth >= 2"));
    assert_eq!(kinds, vec![LoadErrorKind::UnknownReference], "{text}");
    assert!(text.contains("unknown symptom `high_tft`"), "{text}");
    assert!(text.contains("did you mean `high_ttft`?"), "{text}");

    let (kinds, text) = errors(&base("high_ttft", "high_ttft: queue_depth >= 2"));
    assert_eq!(kinds, vec![LoadErrorKind::DuplicateId], "{text}");
    assert!(
        text.contains("in both `explains` and `explains_when`"),
        "{text}"
    );

    let (kinds, text) = errors(&base("oom", "high_ttft: queue_depht >= 2"));
    assert_eq!(kinds, vec![LoadErrorKind::Condition], "{text}");
    assert!(text.contains("explains_when.high_ttft"), "{text}");
}
