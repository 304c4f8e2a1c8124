//! What a postmortem found, as the renderers and the JSON output see it.

use llm_doctor_engine::report::Status;
use llm_doctor_engine::Target;
use serde::Serialize;

use super::episodes::Episode;
use super::incident::Incident;
use super::timeline::Timeline;

/// Everything a postmortem found.
#[derive(Debug, Clone, Serialize)]
pub struct Postmortem {
    /// First judged instant (ms).
    pub from_ms: i64,
    /// Last judged instant (ms).
    pub to_ms: i64,
    /// Distance between judged instants (ms).
    pub step_ms: i64,
    /// Window each instant is judged over (ms).
    pub window_ms: i64,
    /// Per target, hit targets first.
    pub targets: Vec<TargetPostmortem>,
    /// Across targets.
    pub fleet: Fleet,
    /// How the inputs were read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The requests of the range, where gateway logs or engine traces were read beside it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<super::requests::RequestsView>,
}

/// One target through the range.
#[derive(Debug, Clone, Serialize)]
pub struct TargetPostmortem {
    /// What was diagnosed.
    pub target: Target,
    /// Status at each judged instant, summarised: steps per status.
    pub steps: StepCounts,
    /// The status through the range, as runs of equal status, oldest first.
    pub status_runs: Vec<StatusRun>,
    /// Incidents, oldest first.
    pub incidents: Vec<Incident>,
    /// Every symptom and cause episode, oldest first.
    pub episodes: Vec<Episode>,
    /// How the input was assembled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The tracks behind it all (for charts).
    #[serde(skip)]
    pub timeline: Timeline,
    /// Distance between steps (ms).
    #[serde(skip)]
    pub step_ms: i64,
}

impl TargetPostmortem {
    /// The target as `key=value` labels (pod or instance first).
    pub fn name(&self) -> String {
        target_name(&self.target)
    }
}

/// The target as its most telling labels.
pub fn target_name(t: &Target) -> String {
    let pick = ["pod", "instance", "model_name", "model", "Hostname"];
    let parts: Vec<String> = pick
        .iter()
        .filter_map(|k| t.labels.get(*k).map(|v| format!("{k}={v}")))
        .take(2)
        .collect();
    if parts.is_empty() {
        t.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    } else {
        parts.join(",")
    }
}

/// A stretch of steps with one status.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StatusRun {
    /// First step (ms).
    pub from_ms: i64,
    /// Last step (ms).
    pub to_ms: i64,
    /// The status.
    pub status: Status,
}

/// Steps per status.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct StepCounts {
    /// Healthy steps.
    pub healthy: usize,
    /// Degraded steps.
    pub degraded: usize,
    /// Critical steps.
    pub critical: usize,
    /// Steps nothing could be checked at.
    pub unknown: usize,
}

/// The fleet's view of an incident.
#[derive(Debug, Clone, Serialize)]
pub struct Fleet {
    /// Targets analysed.
    pub targets: usize,
    /// Targets with at least one incident, first hit first.
    pub hit: Vec<Hit>,
    /// One line: no replica, one replica, some, or the whole service, and the shared cause.
    pub scope: String,
    /// The cause every hit replica shares first, if they do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_cause: Option<String>,
}

/// One replica that was hit.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    /// The target, as `key=value` labels.
    pub target: String,
    /// Its first incident's start (ms).
    pub first_ms: i64,
    /// Time not healthy, summed over its incidents (ms).
    pub unhealthy_ms: i64,
    /// The leading cause of its longest incident.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
}
