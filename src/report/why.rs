//! How named rules judged a target, fired or not (`diagnose --why RULE`, `eval --case ID --why
//! RULE`): the gate, each item for and against, and every value they read. A diagnosis lists
//! only what fired; this answers "why was this cause not found?".

use anyhow::{bail, Result};
use llm_doctor_engine::report::{EvidenceItem, RuleCheck};
use llm_doctor_engine::Playbook;

use super::{evidence_line, number, wrap};

/// Refuses an id that names no symptom or cause of `playbook`, suggesting the nearest.
pub fn check_ids(playbook: &Playbook, ids: &[String]) -> Result<()> {
    let known = playbook
        .symptoms
        .iter()
        .map(|s| s.id.as_str())
        .chain(playbook.causes.iter().map(|c| c.id.as_str()));
    for id in ids {
        if !known.clone().any(|k| k == id) {
            let hint = llm_doctor_engine::suggest::hint(id, known.clone());
            bail!("`--why {id}`: no symptom or cause of that id{hint}");
        }
    }
    Ok(())
}

/// The checks as plain text, one block each, lines wrapped at `width` columns when given.
pub fn render(checks: &[RuleCheck], width: Option<usize>) -> String {
    let width = width.unwrap_or(usize::MAX);
    checks.iter().map(|c| render_check(c, width)).collect()
}

fn render_check(c: &RuleCheck, width: usize) -> String {
    let mut out = format!("\nwhy {} ({}): {}", c.rule, c.kind, c.outcome);
    if !c.applies {
        out.push('\n');
        return out;
    }
    out.push_str(&format!("; gate {}\n", held(c.gate.result)));
    out.push_str(&item_lines("when", &c.gate, width));
    if let Some(also) = &c.also {
        out.push_str(&item_lines(
            also.note.as_deref().unwrap_or("also"),
            also,
            width,
        ));
    }
    for (word, list) in [("for", &c.evidence), ("against", &c.against)] {
        for e in list {
            let label = format!(
                "{word} (weight {}, {})",
                e.weight.map_or_else(|| "-".into(), number),
                held(e.result)
            );
            out.push_str(&item_lines(&label, e, width));
        }
    }
    for e in &c.explains_when {
        let symptom = e.note.as_deref().unwrap_or("?");
        let label = format!("explains {symptom} when ({})", held(e.result));
        out.push_str(&item_lines(&label, e, width));
    }
    out
}

/// A condition, what it read, and the names it could not read.
fn item_lines(label: &str, e: &EvidenceItem, width: usize) -> String {
    let line = |lead: &str, text: &str, indent: usize| wrap(lead, text, width, indent) + "\n";
    let mut out = line("  ", &format!("{label}: {}", e.condition), 6);
    let read = evidence_line(&EvidenceItem {
        note: None,
        ..e.clone()
    });
    if read != e.condition {
        out.push_str(&line("    read: ", &read, 10));
    }
    if !e.missing.is_empty() {
        out.push_str(&line("    absent: ", &e.missing.join(", "), 10));
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
