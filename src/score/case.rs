//! One case explained (`eval --case ID`): its label and the predicate behind it, how it scored,
//! the diagnosis exactly as `eval` ran it (the case's serve command line, facts, signals and
//! window), and, for each rule named with `--why`, how its conditions judged the case whether
//! it fired or not. The question accuracy work keeps asking is "why was this cause (not) found":
//! a diagnosis lists only what fired.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Serialize;

use super::corpus::{self, CaseResult, CaseSpec};
use crate::report::{self, Report, TargetReport};
use crate::rules::Rules;

/// A case, its score, its diagnosis and the checks asked for.
#[derive(Debug, Serialize)]
pub struct CaseExplained {
    /// How it scored (id, split, expected, causes, top-1, ...).
    pub case: CaseResult,
    /// The predicate on the run's ground truth that justifies the label.
    pub predicate: String,
    /// The objectives the case is judged by, where it names its own (`slos:`).
    pub slos: std::collections::BTreeMap<String, f64>,
    /// The diagnosis, as `diagnose --format json` gives a target (with `checks`, one per
    /// `--why` rule).
    pub diagnosis: TargetReport,
}

/// The case file of `id` under `dir`.
pub fn find(dir: &Path, id: &str) -> Result<PathBuf> {
    let paths = corpus::discover(dir)?;
    let stem = |p: &PathBuf| p.file_stem().and_then(|s| s.to_str()).map(str::to_string);
    if let Some(p) = paths.iter().find(|p| stem(p).as_deref() == Some(id)) {
        return Ok(p.clone());
    }
    let ids: Vec<String> = paths.iter().filter_map(stem).collect();
    let hint = llm_doctor_engine::suggest::hint(id, ids.iter().map(String::as_str));
    bail!("no case `{id}` under `{}`{hint}", dir.display())
}

/// Runs the case at `path`; `why` names symptoms or causes of the playbooks.
pub fn explain(path: &Path, rules: &Rules, why: &[String]) -> Result<CaseExplained> {
    report::why::check_ids(&rules.playbook, why)?;
    let spec: CaseSpec = corpus::load_case(path)?;
    let diagnosis = corpus::diagnose_case_checking(path, &spec, rules, why, true)?;
    let mut case = CaseResult::of(&spec);
    corpus::score_case(&mut case, &spec, &diagnosis);
    Ok(CaseExplained {
        case,
        predicate: spec.label.predicate,
        slos: spec.slos,
        diagnosis,
    })
}

/// The explanation as text: the label, the diagnosis as `diagnose`'s table shows it, the checks.
pub fn render_text(x: &CaseExplained) -> String {
    let c = &x.case;
    let expected = match &c.expected {
        Some(cause) => format!("{} `{cause}`", c.verdict.as_str()),
        None => c.verdict.as_str().to_string(),
    };
    let expected = match &c.untraceable {
        Some(why) => format!("{expected}, untraceable: {why}"),
        None => expected,
    };
    let objectives = if x.slos.is_empty() {
        "the product's defaults".to_string()
    } else {
        let parts: Vec<String> = x.slos.iter().map(|(k, v)| format!("{k}={v}")).collect();
        parts.join(", ")
    };
    let mut out = format!(
        "case {} ({} split, {} family, {} engine)\nexpected: {expected}\nobjectives: {objectives}\npredicate: {}\nresult: {} (first cause: {})\n\n",
        c.id,
        c.split_name(),
        c.family,
        c.engine,
        x.predicate.split_whitespace().collect::<Vec<_>>().join(" "),
        c.outcome(),
        c.predicted(),
    );
    let style = report::table::Style {
        color: false,
        width: 150,
        detail: report::table::Detail::All,
    };
    out.push_str(&report::table::render(
        &Report {
            targets: vec![x.diagnosis.clone()],
            errors: vec![],
            slowest_requests: None,
        },
        style,
    ));
    out
}

/// The explanation as JSON.
pub fn render_json(x: &CaseExplained) -> String {
    serde_json::to_string_pretty(x).expect("a case explanation serializes") + "\n"
}
