//! The compiled playbook: what `compile` produces and the evaluator walks (every name resolved
//! to an index, every condition compiled), and the errors that loading reports. `graph`
//! validates it, `compile` builds it; both depend on these types, not on each other.

use std::collections::BTreeMap;

use crate::condition::{Condition, Slot};

use super::spec::{CauseSeverity, Favours};

/// One playbook source: a file name (for errors) and its text.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// File name as shown in errors, e.g. `rules/playbooks/latency.yaml`.
    pub name: &'a str,
    /// YAML text.
    pub text: &'a str,
}

/// What kind of problem a load error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadErrorKind {
    /// YAML syntax or schema.
    Yaml,
    /// A condition failed to compile.
    Condition,
    /// An id appears twice in one file.
    DuplicateId,
    /// A reference names nothing.
    UnknownReference,
    /// The diagnosis graph has a cycle.
    Cycle,
    /// A cause leads to no symptom.
    Unreachable,
    /// A rule lacks its title, why or remediation.
    Incomplete,
}

/// One problem found while loading playbooks, already rendered with its location.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadError {
    /// Kind.
    pub kind: LoadErrorKind,
    /// Human-readable message with file, line, rule and field.
    pub message: String,
}

/// Every problem found while loading (all of them, not the first).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", render_all(.0))]
pub struct LoadErrors(pub Vec<LoadError>);

fn render_all(errors: &[LoadError]) -> String {
    let mut out = String::new();
    for (i, e) in errors.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&e.message);
    }
    out.push_str(&format!(
        "\n{} error{} in playbooks",
        errors.len(),
        if errors.len() == 1 { "" } else { "s" }
    ));
    out
}

/// A compiled SLO.
#[derive(Debug, Clone)]
pub struct Slo {
    /// Id.
    pub id: String,
    /// Default value.
    pub default: f64,
    /// Title.
    pub title: String,
    /// Why.
    pub why: String,
}

/// A compiled piece of evidence.
#[derive(Debug)]
pub struct Evidence {
    /// The condition.
    pub when: Condition,
    /// Weight.
    pub weight: f64,
    /// Plain words.
    pub note: Option<String>,
}

/// A compiled symptom.
#[derive(Debug)]
pub struct Symptom {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Why.
    pub why: String,
    /// Fires when true.
    pub when: Condition,
    /// Critical when true.
    pub critical_when: Option<Condition>,
    /// Share of a request's time its part takes (a number expression).
    pub share: Option<Condition>,
    /// Where it was defined.
    pub file: String,
}

/// A compiled cause.
#[derive(Debug)]
pub struct Cause {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Why.
    pub why: String,
    /// Fault or info.
    pub severity: CauseSeverity,
    /// Reported as advice when its gate does not hold but this does.
    pub advice: Option<Condition>,
    /// Reported as a fault even when every symptom it explains is clear.
    pub alarms_alone: bool,
    /// Engines it applies to (empty: all).
    pub engines: Vec<String>,
    /// Gate.
    pub when: Condition,
    /// Evidence for.
    pub evidence: Vec<Evidence>,
    /// Evidence against.
    pub against: Vec<Evidence>,
    /// Impact expression.
    pub impact: Option<Condition>,
    /// Impact words.
    pub impact_note: Option<String>,
    /// Downstream causes (indices into `Playbook::causes`).
    pub leads_to: Vec<usize>,
    /// Symptoms explained directly (indices into `Playbook::symptoms`).
    pub explains: Vec<usize>,
    /// Symptoms explained only while the condition holds (unknown counts as not holding).
    pub explains_when: Vec<(usize, Condition)>,
    /// Remediations (indices into `Playbook::remediations`).
    pub remediations: Vec<usize>,
    /// Every cause upstream of this one, transitively.
    pub ancestors: Vec<usize>,
    /// Where it was defined.
    pub file: String,
}

/// A compiled remediation.
#[derive(Debug)]
pub struct Remediation {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Why.
    pub why: String,
    /// What it favours.
    pub favours: Favours,
    /// What it costs.
    pub tradeoff: String,
    /// Engine → concrete change.
    pub actions: BTreeMap<String, String>,
    /// Already in effect when this holds; then the next step instead.
    pub in_effect: Option<(Condition, String)>,
    /// The measurements show the mechanism it addresses when this holds.
    pub fits_when: Option<Condition>,
}

/// An SLO name the playbook does not define (`--slo`, a case's `slos:`), with a suggestion.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown SLO `{name}`{hint}; SLOs: {known}")]
pub struct UnknownSlo {
    /// The name as given.
    pub name: String,
    /// ` (did you mean `x`?)`, or empty.
    pub hint: String,
    /// The SLOs there are, joined.
    pub known: String,
}

/// The validated, compiled diagnosis graph.
#[derive(Debug)]
pub struct Playbook {
    /// SLOs, indexed by `Slot::Slo`.
    pub slos: Vec<Slo>,
    /// Symptoms.
    pub symptoms: Vec<Symptom>,
    /// Causes.
    pub causes: Vec<Cause>,
    /// Remediations.
    pub remediations: Vec<Remediation>,
    /// Signal names by catalog index (for reports).
    pub signal_names: Vec<String>,
    /// Fact names by catalog index (for reports).
    pub fact_names: Vec<String>,
}

impl Playbook {
    /// Every symptom's id, in playbook order (what configurations may name).
    pub fn symptom_ids(&self) -> Vec<&str> {
        self.symptoms.iter().map(|s| s.id.as_str()).collect()
    }

    /// The display name of a slot, as written in conditions.
    pub fn slot_name(&self, slot: Slot) -> String {
        match slot {
            Slot::Signal(i) => self.signal_names[i].clone(),
            Slot::Fact(i) => format!("fact.{}", self.fact_names[i]),
            Slot::Slo(i) => format!("slo.{}", self.slos[i].id),
        }
    }

    /// A symptom's index by id.
    pub fn symptom(&self, id: &str) -> Option<usize> {
        self.symptoms.iter().position(|s| s.id == id)
    }

    /// A cause's index by id.
    pub fn cause(&self, id: &str) -> Option<usize> {
        self.causes.iter().position(|c| c.id == id)
    }

    /// A remediation's index by id.
    pub fn remediation(&self, id: &str) -> Option<usize> {
        self.remediations.iter().position(|r| r.id == id)
    }

    /// SLO values: defaults with `overrides` applied. Unknown SLO names are errors with a suggestion.
    pub fn slo_values(&self, overrides: &BTreeMap<String, f64>) -> Result<Vec<f64>, UnknownSlo> {
        let mut values: Vec<f64> = self.slos.iter().map(|s| s.default).collect();
        for (name, v) in overrides {
            match self.slos.iter().position(|s| &s.id == name) {
                Some(i) => values[i] = *v,
                None => {
                    let ids: Vec<&str> = self.slos.iter().map(|s| s.id.as_str()).collect();
                    let hint = crate::suggest::did_you_mean(name, ids.iter().copied())
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default();
                    return Err(UnknownSlo {
                        name: name.clone(),
                        hint,
                        known: ids.join(", "),
                    });
                }
            }
        }
        Ok(values)
    }
}
