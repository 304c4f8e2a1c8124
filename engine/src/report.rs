//! The diagnosis report: what renderers print and what the JSON output contract carries.
//!
//! Everything a renderer needs is here, already computed: values, thresholds, chains, ranks and
//! the fix for the target's engine. Renderers format; they never compute.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::condition::WindowStats;
use crate::playbook::spec::{CauseSeverity, Favours};
use crate::snapshot::{FactValue, Target, Window};

/// Overall verdict for a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Checked, nothing wrong.
    Healthy,
    /// Nothing could be checked.
    Unknown,
    /// Problems found.
    Degraded,
    /// A critical symptom fired.
    Critical,
}

impl Status {
    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Healthy => "healthy",
            Status::Unknown => "unknown",
            Status::Degraded => "degraded",
            Status::Critical => "critical",
        }
    }
}

/// How bad a fired symptom is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth investigating.
    Warning,
    /// Far past the objective.
    Critical,
}

/// A value shown as evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ShownValue {
    /// A signal or SLO value.
    Number(f64),
    /// A fact value.
    Fact(FactValue),
    /// Absent.
    Missing(Option<()>),
}

/// One evaluated observation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvidenceItem {
    /// The main signal (or fact) the condition reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Its value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Comparison operator, for a simple `signal OP threshold` condition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<&'static str>,
    /// The threshold crossed, for a simple comparison.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// The condition as written.
    pub condition: String,
    /// true, false, or null when unknown.
    pub result: Option<bool>,
    /// Weight in the score (causes only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// Plain words from the playbook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Every name the condition reads, with its value (null when absent).
    pub values: BTreeMap<String, ShownValue>,
    /// Names that were absent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Window statistics of the gauges the condition reads (min, mean, max, last).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub window_stats: BTreeMap<String, WindowStats>,
}

/// A fired symptom.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SymptomFinding {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Warning or critical.
    pub severity: Severity,
    /// The condition that fired, with values.
    pub evidence: Vec<EvidenceItem>,
}

/// A fix, resolved for the target's engine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RemediationFinding {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// The concrete change for this engine; None when the playbook has none for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// What it favours.
    pub favours: Favours,
    /// What it costs.
    pub tradeoff: String,
    /// Set when the deployment already does this: the facts that say so and the next step
    /// (then `action` is that next step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub already: Option<String>,
    /// Set when the measurements show the mechanism this fix addresses (which puts it first):
    /// its `fits_when`, with the values that show it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fits: Option<EvidenceItem>,
}

/// A fired cause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CauseFinding {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// 1 = most likely.
    pub rank: usize,
    /// Why it ranks there: its group (root cause of a fired symptom, root without one,
    /// downstream, advice), its worst symptom, whether it is off the dominant part of request
    /// time, and the weighted score that orders causes alike in all of these.
    pub ranked_by: String,
    /// Strength of the evidence, 0 to 1, lowered by unknown evidence.
    pub score: f64,
    /// Share of the evidence weight that could be checked, 0 to 1.
    pub confidence: f64,
    /// True when no fired cause is upstream of it.
    pub root: bool,
    /// Fault or info.
    pub severity: CauseSeverity,
    /// How it leads to a symptom, e.g. `kv_cache_exhaustion -> queue_backlog -> high_ttft`.
    pub chain: Vec<String>,
    /// Share of the symptom it explains, when the data allows an estimate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impact: Option<f64>,
    /// What the impact measures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impact_note: Option<String>,
    /// The gate and the evidence that held.
    pub evidence: Vec<EvidenceItem>,
    /// Evidence against that held.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub against: Vec<EvidenceItem>,
    /// Evidence that could not be checked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<EvidenceItem>,
    /// Fixes, best first.
    pub remediations: Vec<RemediationFinding>,
}

/// How one rule judged a snapshot, whether it fired or not: what `eval --case ID --why RULE`
/// shows, to tell why a cause was (not) found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleCheck {
    /// Symptom or cause id.
    pub rule: String,
    /// "symptom" or "cause".
    pub kind: &'static str,
    /// What came of it: a symptom "fired", "clear" or "unchecked"; a cause "fired" (the
    /// diagnosis then lists it, as a fault or as advice), "not fired", "ruled out (...)" when
    /// the evidence against it outweighs the evidence for, "unchecked", or "not judged (...)".
    pub outcome: &'static str,
    /// False for a cause limited to other engines (`engines:`): it was not judged at all.
    pub applies: bool,
    /// The gate (`when`), with every value it read.
    pub gate: EvidenceItem,
    /// A symptom's `critical_when`, a cause's `advice`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub also: Option<EvidenceItem>,
    /// A cause's evidence items, held or not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<EvidenceItem>,
    /// A cause's items against it, held or not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub against: Vec<EvidenceItem>,
    /// A cause's conditional explanations (`explains_when`), each noted with its symptom: held,
    /// the cause explains that symptom here; not held or unknown, it does not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explains_when: Vec<EvidenceItem>,
}

/// A rule that could not be evaluated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unchecked {
    /// Symptom or cause id.
    pub rule: String,
    /// "symptom" or "cause".
    pub kind: &'static str,
    /// Names that were absent.
    pub missing: Vec<String>,
    /// How to get them (the hints below, joined with "; ").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The distinct hints, one per missing source, for renderers that list them.
    #[serde(skip)]
    pub hints: Vec<String>,
}

/// The diagnosis of one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    /// What was diagnosed.
    pub target: Target,
    /// The time frame.
    pub window: Window,
    /// Overall verdict.
    pub status: Status,
    /// Fired symptoms, most severe first.
    pub symptoms: Vec<SymptomFinding>,
    /// Fired causes, by rank.
    pub causes: Vec<CauseFinding>,
    /// Symptoms checked and clear.
    pub healthy: Vec<String>,
    /// Fired symptoms that no fired fault explains (itself or through its downstream causes):
    /// no measured cause explains them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unexplained: Vec<String>,
    /// Rules that could not be checked, with the missing names and a hint.
    pub unchecked: Vec<Unchecked>,
    /// Facts known about the deployment.
    pub facts: BTreeMap<String, FactValue>,
    /// How many symptom checks ran, so a healthy verdict says what it rests on.
    pub coverage: Coverage,
}

/// Which symptom checks ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Coverage {
    /// Symptoms whose condition could be evaluated (fired or clear).
    pub checked: usize,
    /// Symptoms in the playbooks.
    pub total: usize,
    /// Symptoms that could not be checked, in playbook order.
    pub not_checked: Vec<String>,
}

impl Coverage {
    /// "5 of 7 checks ran; not checked: a, b", or None when every check ran.
    pub fn summary(&self) -> Option<String> {
        (self.checked < self.total).then(|| {
            format!(
                "{} of {} checks ran; not checked: {}",
                self.checked,
                self.total,
                self.not_checked.join(", ")
            )
        })
    }
}
