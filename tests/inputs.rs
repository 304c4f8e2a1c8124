//! Inputs besides exposition files: saved Prometheus API answers (`api_json`) and llm-doctor's
//! own snapshot and timeline files (`snapshot_file`), with the committed JSON Schema.

use std::path::PathBuf;

use llm_doctor::pipeline;
use llm_doctor::prepared::{Options, Prepared};
use llm_doctor::signal::series::{MetricType, SeriesSet};
use llm_doctor::source::file::api_json;
use llm_doctor::source::file::snapshot;
use llm_doctor::time::parse_time;
use llm_doctor_engine::{Catalog, FactValue};
use serde_json::Value;

use crate::support::root;

/// `(file name, text)` of a file under tests/data/inputs (gzip-compressed or plain).
fn data(name: &str) -> (String, String) {
    let path: PathBuf = root().join("tests/data/inputs").join(name);
    let text = llm_doctor::source::file::read_text(&path)
        .unwrap_or_else(|e| panic!("read {}: {e:#}", path.display()));
    (format!("tests/data/inputs/{name}"), text)
}

fn rules() -> llm_doctor::rules::Rules {
    llm_doctor::rules::load_rules(None).unwrap()
}

fn catalog() -> Catalog {
    rules().catalog
}

fn prepare(set: &SeriesSet) -> Vec<Prepared> {
    let opts = Options {
        window_ms: 300_000,
        ..Default::default()
    };
    pipeline::prepare(set, &rules(), &opts).unwrap()
}

/// Series equal in names, labels, timestamps and values (NaN equal to NaN).
fn assert_same_series(a: &SeriesSet, b: &SeriesSet) {
    assert_eq!(a.series.len(), b.series.len());
    for (x, y) in a.series.iter().zip(&b.series) {
        assert_eq!((&x.name, &x.labels), (&y.name, &y.labels));
        assert_eq!(x.samples.len(), y.samples.len(), "{x}");
        for (s, t) in x.samples.iter().zip(&y.samples) {
            assert_eq!(s.t_ms, t.t_ms, "{x}");
            assert!(
                s.value.to_bits() == t.value.to_bits() || (s.value.is_nan() && t.value.is_nan()),
                "{x}: {} vs {}",
                s.value,
                t.value
            );
        }
    }
}

// ----- Prometheus API answers -----

#[test]
fn query_range_matrix_reads_like_the_same_samples_in_openmetrics() {
    let (name, json) = data("vllm_query_range.json");
    assert!(api_json::looks_like(&json));
    let parsed = api_json::parse_with_warnings(&json, &name).unwrap();
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    assert!(!parsed.partial);
    let api = parsed.set;
    // 6 minutes at 15 s, jittered timestamps converted exactly.
    assert!(api.has_timestamps);
    assert!(api.series.iter().all(|s| s.samples.len() == 25));
    let ms_parts: std::collections::BTreeSet<i64> = api
        .series
        .iter()
        .flat_map(|s| s.samples.iter().map(|x| x.t_ms.unwrap() % 1000))
        .collect();
    assert_eq!(
        ms_parts.into_iter().collect::<Vec<_>>(),
        [0, 3, 8, 41, 117, 250, 999]
    );

    let (om_name, om) = data("vllm_query_range.om.gz");
    let exposed = llm_doctor::source::file::exposition::parse(&om, &om_name).unwrap();
    assert_same_series(&api, &exposed);

    // Types inferred from names agree with the ones OpenMetrics declares.
    for s in &api.series {
        assert_eq!(
            api.family_type(&s.name),
            exposed.family_type(&s.name),
            "{}",
            s.name
        );
    }
    use MetricType::*;
    for (metric, want) in [
        ("vllm:num_preemptions_total", Counter),
        ("vllm:generation_tokens_total", Counter),
        ("vllm:request_success_total", Counter),
        ("vllm:time_to_first_token_seconds_bucket", Histogram),
        ("vllm:time_to_first_token_seconds_sum", Histogram),
        ("vllm:time_to_first_token_seconds_count", Histogram),
        ("vllm:kv_cache_usage_perc", Gauge),
        ("DCGM_FI_DEV_FB_USED", Gauge),
    ] {
        assert_eq!(api.family_type(metric), want, "{metric}");
    }

    // The whole pipeline sees the same thing: rates, quantiles and gauge statistics.
    let from_api = prepare(&api);
    let from_om = prepare(&exposed);
    assert_eq!(from_api.len(), from_om.len());
    for (a, b) in from_api.iter().zip(&from_om) {
        assert_eq!(a.snapshot, b.snapshot);
    }
    let c = catalog();
    let s = &from_api[0].snapshot;
    for signal in [
        "preemptions_per_second",
        "ttft_p99_seconds",
        "kv_cache_usage_ratio",
        "queue_depth",
        "output_tokens_per_second",
        "gpu_memory_used_ratio",
    ] {
        assert!(s.signal(&c, signal).is_some(), "{signal} missing");
    }
    assert!(s.signal(&c, "preemptions_per_second").unwrap().value > 0.0);
    assert!(s.signal(&c, "queue_depth").unwrap().stats.is_some());
}

#[test]
fn vector_answer_gives_one_sample_per_series() {
    let (name, json) = data("vllm_query_vector.json");
    let set = api_json::parse(&json, &name).unwrap();
    assert_eq!(set.series.len(), 5);
    assert!(set.series.iter().all(|s| s.samples.len() == 1));
    assert_eq!(set.newest_ms(), Some(1_796_083_800_512));
    assert_eq!(
        set.family_type("vllm:num_preemptions_total"),
        MetricType::Counter
    );
    let draft = set
        .iter_by_name("vllm:spec_decode_num_draft_tokens_total")
        .next()
        .unwrap();
    assert!(draft.samples.to_vec()[0].value.is_nan());
    // One instant: gauges are known, rates are not (one sample is no rate).
    let c = catalog();
    let p = prepare(&set);
    let s = &p[0].snapshot;
    assert_eq!(s.signal(&c, "queue_depth").unwrap().value, 184.0);
    assert!(s.signal(&c, "preemptions_per_second").is_none());
}

#[test]
fn error_answer_quotes_the_server() {
    let (name, json) = data("prometheus_error.json");
    assert!(api_json::looks_like(&json));
    let e = api_json::parse(&json, &name).unwrap_err().to_string();
    assert!(
        e.starts_with("tests/data/inputs/prometheus_error.json: "),
        "{e}"
    );
    assert!(e.contains("(bad_data)"), "{e}");
    assert!(e.contains("unexpected \"}\" in label matching"), "{e}");
}

#[test]
fn answer_without_metric_names_asks_for_raw_series() {
    let (name, json) = data("rate_answer.json");
    let e = api_json::parse(&json, &name).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "tests/data/inputs/rate_answer.json: 2 of the answer's series have no metric name"
        ),
        "{e}"
    );
    assert!(
        e.contains(r#"{instance="gpu-node-1:8000",job="vllm"}"#),
        "{e}"
    );
    assert!(e.contains("llm-doctor needs raw series"), "{e}");
    assert!(
        e.contains(r#"{__name__=~"vllm:.*|DCGM_.*|node_cpu_seconds_total"}[15m]"#),
        "{e}"
    );
}

#[test]
fn malformed_json_names_line_and_column() {
    let text = "{\"status\": \"success\",\n  \"data\": {\"resultType\": \"matrix\",\n    \"result\": [{\"metric\": {}, \"values\": [[1, \"2\"]}]}}\n";
    let e = api_json::parse(text, "broken.json")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("broken.json: "), "{e}");
    assert!(e.contains("line 3 column"), "{e}");
}

#[test]
fn victoriametrics_partial_answer_keeps_data_and_warns() {
    let (name, json) = data("victoriametrics_partial.json");
    assert!(api_json::looks_like(&json));
    let p = api_json::parse_with_warnings(&json, &name).unwrap();
    assert!(p.partial);
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].contains("partial"), "{:?}", p.warnings);
    assert_eq!(p.set.series.len(), 2);
    assert_eq!(p.set.sample_count(), 6);
    assert_eq!(
        p.set.family_type("vllm:num_preemptions_total"),
        MetricType::Counter
    );
}

#[test]
fn prometheus_warnings_and_infos_are_returned() {
    let (name, json) = data("prometheus_warnings.json");
    let p = api_json::parse_with_warnings(&json, &name).unwrap();
    assert!(!p.partial);
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
    assert!(p.warnings[0].contains("server warning: PromQL warning"));
    assert!(p.warnings[1].contains("server info: PromQL info"));
}

#[test]
fn other_inputs_are_not_mistaken_for_api_answers() {
    for file in [
        "vllm_query_range.om.gz",
        "snapshot.yaml",
        "snapshot.json",
        "timeline.yaml",
    ] {
        assert!(!api_json::looks_like(&data(file).1), "{file}");
    }
}

// ----- snapshot and timeline files -----

#[test]
fn example_files_are_detected_and_read() {
    let c = catalog();
    for file in ["snapshot.yaml", "snapshot.json", "timeline.yaml"] {
        let (name, text) = data(file);
        assert!(snapshot::looks_like(&text), "{file}");
        let p = snapshot::parse(&text, &name, &c, None).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(!p.is_empty());
    }
    for file in ["vllm_query_range.om.gz", "vllm_query_range.json"] {
        assert!(!snapshot::looks_like(&data(file).1), "{file}");
    }
    let (name, text) = data("snapshot.json");
    let p = snapshot::parse(&text, &name, &c, None).unwrap();
    assert_eq!(p.len(), 2);
    assert!(p[0].snapshot.window.lifetime);
    let run = p[0].snapshot.signal(&c, "running_requests").unwrap();
    assert_eq!((run.value, run.source.as_str()), (8.0, "gateway"));
    assert_eq!(
        p[0].snapshot.fact(&c, "enforce_eager").unwrap().value,
        FactValue::Bool(true)
    );
    assert_eq!(p[1].snapshot.target.labels["gpu"], "0");
    assert_eq!(p[1].snapshot.target.engine, None);
}

#[test]
fn snapshot_round_trip_keeps_signals_stats_facts_hints_and_window() {
    let c = catalog();
    let (om_name, om) = data("vllm_query_range.om.gz");
    let set = llm_doctor::source::file::exposition::parse(&om, &om_name).unwrap();
    let mut prepared = prepare(&set);
    prepared[0]
        .notes
        .push("a note with \"quotes\": and colons".to_string());
    let s = &prepared[0].snapshot;
    // What the pipeline made has every part the format stores.
    assert!(s.window.end_ms.unwrap() % 1000 != 0, "jittered end");
    assert!(c
        .signals()
        .iter()
        .enumerate()
        .any(|(i, _)| s.signal_at(i).is_some_and(|v| v.stats.is_some())));
    assert!((0..c.signals().len()).any(|i| s.hint_at(i).is_some()));
    assert!((0..c.facts().len()).any(|i| s.fact_at(i).is_some()));
    assert!(s.target.engine.is_some());

    for json in [false, true] {
        let text = snapshot::write(&prepared, &c, json);
        let back =
            snapshot::parse(&text, "written", &c, None).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back.len(), prepared.len());
        for (a, b) in back.iter().zip(&prepared) {
            assert_eq!(a.snapshot, b.snapshot, "json: {json}\n{text}");
            assert_eq!(a.notes, b.notes);
        }
        // The same diagnosis from the file as from the metrics.
        let r = rules();
        let slos = r.playbook.slo_values(&Default::default()).unwrap();
        let d1 = llm_doctor_engine::diagnose(&r.playbook, &back[0].snapshot, &slos);
        let d2 = llm_doctor_engine::diagnose(&r.playbook, &prepared[0].snapshot, &slos);
        assert_eq!(
            serde_json::to_string(&d1).unwrap(),
            serde_json::to_string(&d2).unwrap()
        );
        let as_json: Value = if json {
            serde_json::from_str(&text).unwrap()
        } else {
            serde_yaml::from_str(&text).unwrap()
        };
        validate(&snapshot::json_schema(), &as_json).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn timeline_point_is_chosen_by_at() {
    let c = catalog();
    let (name, text) = data("timeline.yaml");
    let at = |s: &str| Some(parse_time(s).unwrap());
    let pick = |when: Option<i64>| {
        let p = snapshot::parse(&text, &name, &c, when).unwrap();
        assert_eq!(p.len(), 1);
        p.into_iter().next().unwrap()
    };
    let newest = pick(None);
    let s = &newest.snapshot;
    assert_eq!(s.window.end_ms, at("2026-12-01T00:10:00Z"));
    assert_eq!(s.window.length_ms, Some(300_000));
    assert_eq!(s.signal(&c, "queue_depth").unwrap().value, 184.0);
    assert_eq!(
        s.signal(&c, "queue_depth").unwrap().stats.unwrap().max,
        190.0
    );
    assert_eq!(
        s.fact(&c, "max_num_seqs").unwrap().value,
        FactValue::Number(256.0)
    );
    assert_eq!(newest.notes[0], "recorded with llm-doctor record");
    assert!(newest.notes[1].contains("3 of 3"), "{:?}", newest.notes);

    let middle = pick(at("2026-12-01T00:07:30Z"));
    assert_eq!(middle.snapshot.window.end_ms, at("2026-12-01T00:05:00Z"));
    assert_eq!(
        middle.snapshot.signal(&c, "queue_depth").unwrap().value,
        12.0
    );
    // Signals a point lacks are absent there, not carried over from another point.
    assert!(middle
        .snapshot
        .signal(&c, "preemptions_per_second")
        .is_none());
    let exact = pick(at("2026-12-01T00:00:00Z"));
    assert_eq!(exact.snapshot.signal(&c, "queue_depth").unwrap().value, 0.0);

    let e = snapshot::parse(&text, &name, &c, at("2026-11-30T23:59:59Z"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no point at or before --at 2026-11-30T23:59:59Z"),
        "{e}"
    );
}

#[test]
fn unknown_names_are_rejected_with_suggestions() {
    let (name, text) = data("snapshot_typos.yaml");
    let e = snapshot::parse(&text, &name, &catalog(), None)
        .unwrap_err()
        .to_string();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 5, "{e}");
    let prefix = "tests/data/inputs/snapshot_typos.yaml: target 1 (vllm): ";
    assert!(lines.iter().all(|l| l.starts_with(prefix)), "{e}");
    for want in [
        "unknown signal `queue_dept` at line 6 column 7 (did you mean `queue_depth`?)",
        "unknown signal `kv_cache_usage` at line 7 column 7 (did you mean `kv_cache_usage_ratio`?)",
        "unknown fact `max_num_seq` at line 9 column 7 (did you mean `max_num_seqs`?)",
        "fact `enable_chunked_prefill` must be a boolean, got `maybe`",
        "unknown signal `ttft_p99` at line 12 column 7 (did you mean `ttft_p99_seconds`?)",
    ] {
        assert!(e.contains(want), "missing `{want}` in\n{e}");
    }
}

// ----- the JSON Schema -----

#[test]
fn committed_schema_is_current() {
    let path = root().join("schema/snapshot.schema.json");
    let actual = serde_json::to_string_pretty(&snapshot::json_schema()).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == actual,
        "{} is stale: run `UPDATE_GOLDEN=1 cargo test --test integration inputs` and commit it",
        path.display()
    );
}

#[test]
fn example_files_match_the_schema_and_broken_ones_do_not() {
    let schema = snapshot::json_schema();
    for file in [
        "snapshot.yaml",
        "snapshot.json",
        "timeline.yaml",
        "snapshot_typos.yaml",
    ] {
        let text = data(file).1;
        let doc: Value = serde_yaml::from_str(&text).unwrap();
        validate(&schema, &doc).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    let c = catalog();
    for (broken, why) in [
        (
            r#"{"llm_doctor": "snapshot/v2", "targets": [{"target": {}}]}"#,
            "marker",
        ),
        (
            r#"{"llm_doctor": "snapshot/v1", "targets": []}"#,
            "no targets",
        ),
        (
            r#"{"llm_doctor": "snapshot/v1", "targets": [{}]}"#,
            "no target",
        ),
        (
            r#"{"llm_doctor": "snapshot/v1", "targets": [{"target": {}, "extra": 1}]}"#,
            "unknown field",
        ),
        (
            r#"{"llm_doctor": "snapshot/v1", "targets": [{"target": {}, "signals": {"queue_depth": "high"}}]}"#,
            "signal type",
        ),
        (
            r#"{"llm_doctor": "snapshot/v1", "targets": [{"target": {}, "signals": {"queue_depth": {"min": 1}}}]}"#,
            "no value",
        ),
        (
            r#"{"llm_doctor": "snapshot/v1", "targets": [{"target": {}, "window": {"end": 5}}]}"#,
            "time type",
        ),
        (
            r#"{"llm_doctor": "timeline/v1", "targets": [{"target": {}, "points": []}]}"#,
            "no points",
        ),
        (
            r#"{"llm_doctor": "timeline/v1", "targets": [{"target": {}, "signals": {}, "points": [{"at": "1"}]}]}"#,
            "signals outside points",
        ),
        (
            r#"{"llm_doctor": "timeline/v1", "targets": [{"target": {}, "points": [{"signals": {}}]}]}"#,
            "point without at",
        ),
    ] {
        let doc: Value = serde_json::from_str(broken).unwrap();
        assert!(
            validate(&schema, &doc).is_err(),
            "schema accepts {why}: {broken}"
        );
        // The parser is at least as strict as the schema.
        assert!(
            snapshot::parse(broken, "b.json", &c, None).is_err(),
            "parser accepts {why}: {broken}"
        );
    }
}

/// A structural JSON-Schema check covering the keywords the snapshot schema uses; any other
/// keyword is an error, so the schema cannot grow a constraint this test silently ignores.
pub(crate) fn validate(schema: &Value, doc: &Value) -> Result<(), String> {
    check(schema, schema, doc, "$")
}

fn check(root: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let Some(obj) = schema.as_object() else {
        return Err(format!("{at}: schema is not an object"));
    };
    for (key, rule) in obj {
        match key.as_str() {
            "$schema" | "$defs" | "title" | "description" => {}
            "$ref" => {
                let name = rule
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .ok_or_else(|| format!("{at}: unsupported $ref {rule}"))?;
                let target = root["$defs"]
                    .get(name)
                    .ok_or_else(|| format!("{at}: dangling $ref {name}"))?;
                check(root, target, v, at)?;
            }
            "type" => {
                let types: Vec<&str> = match rule {
                    Value::String(s) => vec![s.as_str()],
                    Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                    _ => return Err(format!("{at}: bad type {rule}")),
                };
                let actual = match v {
                    Value::Null => "null",
                    Value::Bool(_) => "boolean",
                    Value::Number(_) => "number",
                    Value::String(_) => "string",
                    Value::Array(_) => "array",
                    Value::Object(_) => "object",
                };
                if !types.contains(&actual) {
                    return Err(format!("{at}: expected {types:?}, got {actual}"));
                }
            }
            "enum" => {
                if !rule.as_array().is_some_and(|options| options.contains(v)) {
                    return Err(format!("{at}: {v} is not one of {rule}"));
                }
            }
            "const" => {
                if v != rule {
                    return Err(format!("{at}: expected {rule}, got {v}"));
                }
            }
            "required" => {
                for name in rule.as_array().into_iter().flatten() {
                    let name = name.as_str().unwrap_or_default();
                    if v.get(name).is_none() {
                        return Err(format!("{at}: missing `{name}`"));
                    }
                }
            }
            "properties" => {
                if let (Some(props), Some(map)) = (rule.as_object(), v.as_object()) {
                    for (name, value) in map {
                        if let Some(s) = props.get(name) {
                            check(root, s, value, &format!("{at}.{name}"))?;
                        }
                    }
                }
            }
            "additionalProperties" => {
                let Some(map) = v.as_object() else { continue };
                let known = obj.get("properties").and_then(Value::as_object);
                for (name, value) in map {
                    if known.is_some_and(|k| k.contains_key(name)) {
                        continue;
                    }
                    match rule {
                        Value::Bool(false) => return Err(format!("{at}: unknown field `{name}`")),
                        Value::Bool(true) => {}
                        s => check(root, s, value, &format!("{at}.{name}"))?,
                    }
                }
            }
            "items" => {
                for (i, item) in v.as_array().into_iter().flatten().enumerate() {
                    check(root, rule, item, &format!("{at}[{i}]"))?;
                }
            }
            "minItems" => {
                let min = rule.as_u64().unwrap_or(0) as usize;
                if v.as_array().is_some_and(|a| a.len() < min) {
                    return Err(format!("{at}: fewer than {min} items"));
                }
            }
            "oneOf" => {
                let options = rule.as_array().cloned().unwrap_or_default();
                let errors: Vec<String> = options
                    .iter()
                    .filter_map(|s| check(root, s, v, at).err())
                    .collect();
                let passed = options.len() - errors.len();
                if passed != 1 {
                    return Err(format!(
                        "{at}: matches {passed} of the oneOf options, not exactly one ({})",
                        errors.join("; ")
                    ));
                }
            }
            other => return Err(format!("{at}: the test validator does not know `{other}`")),
        }
    }
    Ok(())
}
