//! One case explained (`eval --case ID`): its label and the predicate behind it, how it scored,
//! the diagnosis exactly as `eval` ran it (the case's serve command line, facts, signals and
//! window), and, for each rule named with `--why`, how its conditions judged the case whether
//! it fired or not. The question accuracy work keeps asking is "why was this cause (not) found":
//! a diagnosis lists only what fired.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use llm_doctor_engine::report::{EvidenceItem, RuleCheck};
use serde::Serialize;

use super::corpus::{self, CaseResult, CaseSpec};
use crate::report::{self, evidence_line, Report, TargetReport};
use crate::rules::Rules;

/// A case, its score, its diagnosis and the checks asked for.
#[derive(Debug, Serialize)]
pub struct CaseExplained {
    /// How it scored (id, split, expected, causes, top-1, ...).
    pub case: CaseResult,
    /// The predicate on the run's ground truth that justifies the label.
    pub predicate: String,
    /// The diagnosis, as `diagnose --format json` gives a target.
    pub diagnosis: TargetReport,
    /// One per `--why` rule.
    pub checks: Vec<RuleCheck>,
}

/// The case file of `id` under `dir`.
pub fn find(dir: &Path, id: &str) -> Result<PathBuf> {
    let paths = corpus::discover(dir)?;
    let stem = |p: &PathBuf| p.file_stem().and_then(|s| s.to_str()).map(str::to_string);
    if let Some(p) = paths.iter().find(|p| stem(p).as_deref() == Some(id)) {
        return Ok(p.clone());
    }
    let ids: Vec<String> = paths.iter().filter_map(stem).collect();
    let hint = llm_doctor_engine::suggest::did_you_mean(id, ids.iter().map(String::as_str))
        .map(|s| format!(" (did you mean `{s}`?)"))
        .unwrap_or_default();
    bail!("no case `{id}` under `{}`{hint}", dir.display())
}

/// Runs the case at `path`; `why` names symptoms or causes of the playbooks.
pub fn explain(path: &Path, rules: &Rules, why: &[String]) -> Result<CaseExplained> {
    let known = rules
        .playbook
        .symptoms
        .iter()
        .map(|s| s.id.as_str())
        .chain(rules.playbook.causes.iter().map(|c| c.id.as_str()));
    for id in why {
        if !known.clone().any(|k| k == id) {
            let hint = llm_doctor_engine::suggest::did_you_mean(id, known.clone())
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            bail!("`--why {id}`: no symptom or cause of that id{hint}");
        }
    }
    let spec: CaseSpec = corpus::load_case(path)?;
    let (diagnosis, checks) = corpus::diagnose_case_checking(path, &spec, rules, why)?;
    let mut case = CaseResult::of(&spec);
    corpus::score_case(&mut case, &spec, &diagnosis);
    Ok(CaseExplained {
        case,
        predicate: spec.label.predicate,
        diagnosis,
        checks,
    })
}

/// The explanation as text: the label, the diagnosis as `diagnose`'s table shows it, the checks.
pub fn render_text(x: &CaseExplained) -> String {
    let c = &x.case;
    let expected = match &c.expected {
        Some(cause) => format!("{} `{cause}`", c.verdict.as_str()),
        None => c.verdict.as_str().to_string(),
    };
    let mut out = format!(
        "case {} ({} split, {} family, {} engine)\nexpected: {expected}\npredicate: {}\nresult: {} (first cause: {})\n\n",
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
        },
        style,
    ));
    for check in &x.checks {
        out.push_str(&render_check(check));
    }
    out
}

/// The explanation as JSON.
pub fn render_json(x: &CaseExplained) -> String {
    serde_json::to_string_pretty(x).expect("a case explanation serializes") + "\n"
}

fn render_check(c: &RuleCheck) -> String {
    let mut out = format!("\nwhy {} ({}): ", c.rule, c.kind);
    if !c.applies {
        out.push_str("not judged for this engine (`engines:`)\n");
        return out;
    }
    out.push_str(&format!("gate {}\n", held(c.gate.result)));
    out.push_str(&item_lines("when", &c.gate));
    if let Some(also) = &c.also {
        out.push_str(&item_lines(also.note.as_deref().unwrap_or("also"), also));
    }
    for (word, list) in [("for", &c.evidence), ("against", &c.against)] {
        for e in list {
            let label = format!(
                "{word} (weight {}, {})",
                e.weight.map_or_else(|| "-".into(), report::number),
                held(e.result)
            );
            out.push_str(&item_lines(&label, e));
        }
    }
    out
}

/// A condition, what it read, and the names it could not read.
fn item_lines(label: &str, e: &EvidenceItem) -> String {
    let mut out = format!("  {label}: {}\n", e.condition);
    let read = evidence_line(&EvidenceItem {
        note: None,
        ..e.clone()
    });
    if read != e.condition {
        out.push_str(&format!("    read: {read}\n"));
    }
    if !e.missing.is_empty() {
        out.push_str(&format!("    absent: {}\n", e.missing.join(", ")));
    }
    out
}

fn held(r: Option<bool>) -> &'static str {
    match r {
        Some(true) => "holds",
        Some(false) => "does not hold",
        None => "unknown (a name it reads is absent)",
    }
}
