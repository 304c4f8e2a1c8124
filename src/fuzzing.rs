//! The entry points fuzzing drives: each takes arbitrary bytes and must return without
//! panicking or hanging, whatever they are. `fuzz/` (cargo-fuzz, nightly) calls them with
//! generated inputs; `tests/fuzz_replay.rs` (stable, in CI) calls them with every file of the
//! seed corpus and every input that once failed, so what fuzzing found stays fixed.

use std::sync::OnceLock;

use crate::rules::{RuleFiles, Rules};

/// A fuzz target: arbitrary bytes in, nothing out, never a panic.
pub type FuzzTarget = fn(&[u8]);

/// Every target, by the name of its corpus folder.
pub const TARGETS: &[(&str, FuzzTarget)] = &[
    ("exposition", exposition),
    ("api_json", api_json),
    ("snapshot", snapshot),
    ("payload", payload),
    ("selector", selector),
    ("serve_config", serve_config),
    ("engine_args", engine_args),
    ("playbook", playbook),
    ("adapter", adapter),
];

fn text(data: &[u8]) -> &str {
    std::str::from_utf8(data).unwrap_or("")
}

fn rules() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(|| RuleFiles::shipped().load().expect("the shipped rules load"))
}

/// Prometheus text and OpenMetrics.
pub fn exposition(data: &[u8]) {
    let _ = crate::source::file::exposition::parse(text(data), "fuzz");
}

/// Saved Prometheus API answers.
pub fn api_json(data: &[u8]) {
    let _ = crate::source::file::api_json::parse_with_warnings(text(data), "fuzz");
    crate::source::file::api_json::check_pieces_agree(text(data));
}

/// llm-doctor snapshot and timeline files.
pub fn snapshot(data: &[u8]) {
    let _ = crate::source::file::snapshot::parse(text(data), "fuzz", &rules().catalog, None);
}

/// Alertmanager webhook bodies.
pub fn payload(data: &[u8]) {
    let _ = crate::serve::payload::parse(data);
}

/// `--selector` matchers.
pub fn selector(data: &[u8]) {
    let _ = crate::signal::selector::Selector::parse(text(data));
}

/// `serve` configuration files.
pub fn serve_config(data: &[u8]) {
    let ids = rules().playbook.symptom_ids();
    let _ = crate::serve::config::parse(text(data), "fuzz.yaml", &ids);
}

/// `--engine-args` command lines and model configuration files.
pub fn engine_args(data: &[u8]) {
    let r = rules();
    let _ = crate::signal::engine_args::parse(text(data), &r.adapters, &r.catalog);
}

/// A user playbook beside the shipped rules (conditions, graph, references).
pub fn playbook(data: &[u8]) {
    // The catalog is parsed once: re-reading it (and the adapters, which a playbook cannot
    // reach) for every input made this target run at a dozen inputs a second.
    let catalog = &rules().catalog;
    let files = RuleFiles::shipped();
    let mut sources: Vec<llm_doctor_engine::Source<'_>> = files
        .playbooks
        .iter()
        .map(|(name, text)| llm_doctor_engine::Source { name, text })
        .collect();
    sources.push(llm_doctor_engine::Source {
        name: "fuzz.yaml",
        text: text(data),
    });
    let _ = llm_doctor_engine::load(&sources, catalog);
}

/// A user's signals file (`rules/signals/*.yaml`), and the PromQL of each signal that loads,
/// every statistic, as live triage compiles it. Alone: beside the shipped files each input
/// cost a dozen parses.
pub fn adapter(data: &[u8]) {
    use crate::signal::adapter::eval::Stat;
    let files = [("fuzz.yaml".to_string(), text(data).to_string())];
    let Ok(adapters) = crate::signal::adapter::Adapters::load(&files, &rules().catalog) else {
        return;
    };
    for a in &adapters.list {
        for expr in a.signals.values() {
            for stat in [Stat::Last, Stat::Min, Stat::Mean, Stat::Max] {
                let opts = crate::signal::promql::QueryOptions {
                    stat,
                    picks: &a.picks,
                    ..Default::default()
                };
                let _ = crate::signal::promql::compile(expr, &opts);
            }
        }
    }
}
