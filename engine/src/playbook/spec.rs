//! Playbooks as written: the YAML schema, checked strictly (unknown fields are errors).
//!
//! A playbook file has four optional sections. Several files are merged; an id defined again in a
//! later file replaces the earlier definition, which is how `--rules DIR` overrides shipped rules.
//!
//! ```yaml
//! slos:
//!   - id: ttft_p99_seconds          # referenced in conditions as slo.ttft_p99_seconds
//!     default: 1
//!     title: TTFT p99 objective
//!     why: A first token within a second keeps chat interactive.
//! symptoms:
//!   - id: high_ttft
//!     title: Time to first token is high
//!     why: Users wait before anything appears.
//!     when: ttft_p99_seconds > slo.ttft_p99_seconds
//!     critical_when: ttft_p99_seconds > 4 * slo.ttft_p99_seconds
//! causes:
//!   - id: kv_cache_exhaustion
//!     title: KV cache is full
//!     why: ...
//!     when: kv_cache_usage_ratio > 95% and preemptions_per_second > 0   # gate: must hold to fire
//!     evidence: [{when: "queue_depth > 0", weight: 2}]                   # raises the score
//!     against: [{when: "kv_cache_usage_ratio < 50%", weight: 3}]         # lowers it
//!     impact: queue_time_mean_seconds / ttft_mean_seconds               # share of the symptom explained
//!     leads_to: [queue_backlog]
//!     explains: [high_ttft]
//!     remediations: [quantize_kv_cache]
//! remediations:
//!   - id: quantize_kv_cache
//!     title: Store the KV cache in FP8
//!     why: ...
//!     favours: latency
//!     tradeoff: about 2x KV capacity; small accuracy risk on some models
//!     actions: {vllm: "--kv-cache-dtype fp8", sglang: "--kv-cache-dtype fp8_e5m2"}
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One playbook file as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlaybookFile {
    /// Service-level objectives with defaults.
    #[serde(default)]
    pub slos: Vec<SloSpec>,
    /// Observable problems.
    #[serde(default)]
    pub symptoms: Vec<SymptomSpec>,
    /// Root causes and intermediate causes.
    #[serde(default)]
    pub causes: Vec<CauseSpec>,
    /// Fixes.
    #[serde(default)]
    pub remediations: Vec<RemediationSpec>,
}

/// A service-level objective, overridable with `--slo id=value`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloSpec {
    /// Name, referenced as `slo.<id>`.
    pub id: String,
    /// Value used when not overridden.
    pub default: f64,
    /// Short name.
    #[serde(default)]
    pub title: String,
    /// Why this default.
    #[serde(default)]
    pub why: String,
}

/// An observable problem.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SymptomSpec {
    /// Stable id.
    pub id: String,
    /// One-line description.
    #[serde(default)]
    pub title: String,
    /// Why it matters.
    #[serde(default)]
    pub why: String,
    /// Fires when true.
    pub when: String,
    /// Critical instead of warning when true.
    #[serde(default)]
    pub critical_when: Option<String>,
    /// The share of a request's time this symptom's part takes (a number 0..1, e.g.
    /// `ttft_mean_seconds / e2e_mean_seconds`): causes of the dominant part rank first.
    #[serde(default)]
    pub share: Option<String>,
}

/// Whether a cause is a fault or only worth knowing.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum CauseSeverity {
    /// Something to fix.
    #[default]
    Fault,
    /// Not a fault (e.g. low demand); reported, but the target stays healthy.
    Info,
}

/// One piece of evidence for or against a cause.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceSpec {
    /// The observation.
    pub when: String,
    /// How much it counts.
    #[serde(default = "default_weight")]
    pub weight: f64,
    /// Plain words for the observation, shown beside the values.
    #[serde(default)]
    pub note: Option<String>,
}

fn default_weight() -> f64 {
    1.0
}

/// A cause.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CauseSpec {
    /// Stable id, named after what is observed.
    pub id: String,
    /// One-line description.
    #[serde(default)]
    pub title: String,
    /// How it produces the symptoms.
    #[serde(default)]
    pub why: String,
    /// Fault (default) or info.
    #[serde(default)]
    pub severity: CauseSeverity,
    /// When its gate does not hold but this does, the cause is reported as advice (info): a
    /// setting known to cost performance, with no measured harm (e.g. `fact.enforce_eager ==
    /// true`).
    #[serde(default)]
    pub advice: Option<String>,
    /// A fault worth reporting although no server-side symptom fired: a GPU hardware error, or
    /// time lost outside the server that the cause itself measures. Other causes whose every
    /// symptom was checked and is clear are reported as advice.
    #[serde(default)]
    pub alarms_alone: bool,
    /// Engines the cause applies to; empty means all.
    #[serde(default)]
    pub engines: Vec<String>,
    /// Gate: the cause fires only when this holds.
    pub when: String,
    /// Observations that raise the score.
    #[serde(default)]
    pub evidence: Vec<EvidenceSpec>,
    /// Observations that lower the score.
    #[serde(default)]
    pub against: Vec<EvidenceSpec>,
    /// Share of the symptom this cause explains (a number expression, 0 to 1).
    #[serde(default)]
    pub impact: Option<String>,
    /// Plain words for the impact, e.g. "share of TTFT spent queued".
    #[serde(default)]
    pub impact_note: Option<String>,
    /// Causes this one produces.
    #[serde(default)]
    pub leads_to: Vec<String>,
    /// Symptoms this one explains directly.
    #[serde(default)]
    pub explains: Vec<String>,
    /// Symptoms this one explains only while a condition holds (symptom id → condition): the
    /// mechanism one branch of its gate measured, and not the others.
    #[serde(default)]
    pub explains_when: BTreeMap<String, String>,
    /// Fixes, best first.
    #[serde(default)]
    pub remediations: Vec<String>,
}

/// Which side of the latency/throughput trade a fix favours.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Favours {
    /// Lower latency, possibly less peak throughput.
    Latency,
    /// More throughput, possibly higher latency.
    Throughput,
    /// Helps both.
    Both,
    /// Restores correct operation (hardware, configuration errors).
    Reliability,
    /// Saves money or capacity.
    Cost,
}

/// A fix.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemediationSpec {
    /// Stable id.
    pub id: String,
    /// One-line description.
    #[serde(default)]
    pub title: String,
    /// Why it helps.
    #[serde(default)]
    pub why: String,
    /// What it favours.
    pub favours: Favours,
    /// What it costs.
    #[serde(default)]
    pub tradeoff: String,
    /// The concrete change per engine (`vllm`, `sglang`, `tgi`, `trtllm`, `llamacpp`), or `any`.
    /// `{fact.NAME}` in an action is replaced by the fact's current value (`unknown` when it
    /// is not known), so a flag value is always shown against the one in effect.
    #[serde(default)]
    pub actions: BTreeMap<String, String>,
    /// When the change is already in effect (a condition over facts), and what to do next.
    #[serde(default)]
    pub in_effect: Option<InEffectSpec>,
    /// When the measurements show the mechanism this fix addresses (a condition over signals
    /// and facts): a cause's fixes that fit come first. A cause may have several mechanisms
    /// (a pegged API server, a busy neighbour) whose fixes differ.
    #[serde(default)]
    pub fits_when: Option<String>,
}

/// A remediation that may already be applied.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InEffectSpec {
    /// True when the deployment already does it (`fact.enable_prefix_caching`).
    pub when: String,
    /// The next step instead, in plain words.
    pub next: String,
}
