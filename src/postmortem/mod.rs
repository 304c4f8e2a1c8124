//! Postmortem: the diagnosis slid across a range, turned into episodes, incidents (with what
//! moved first and which causes held longest and strongest) and a fleet view.
//!
//! `timeline` slides the window and keeps numeric tracks; `episodes` cuts tracks into runs;
//! `incident` groups not-healthy steps into incidents and explains each; `fleet` compares
//! targets; `diff` compares two windows.

pub mod diff;
pub mod episodes;
pub mod fleet;
pub mod incident;
pub mod model;
pub mod requests;
pub mod timeline;

use anyhow::Result;
use llm_doctor_engine::report::Status;

pub use episodes::Episode;
pub use incident::{Incident, IncidentCause, Onset, Phase};
pub use model::{target_name, Fleet, Hit, Postmortem, StatusRun, StepCounts, TargetPostmortem};
pub use timeline::{Kind, Range, Timeline, Track};

use crate::pipeline::Split;
use crate::prepared::Options;
use crate::rules::Rules;
use crate::signal::series::SeriesSet;

/// Runs of equal status.
fn status_runs(timeline: &Timeline) -> Vec<StatusRun> {
    let mut out: Vec<StatusRun> = Vec::new();
    for (t, s) in timeline.times.iter().zip(&timeline.status) {
        match out.last_mut() {
            Some(run) if run.status == *s => run.to_ms = *t,
            _ => out.push(StatusRun {
                from_ms: *t,
                to_ms: *t,
                status: *s,
            }),
        }
    }
    out
}

/// Told how much a postmortem has to judge, then of each target-step judged (from worker
/// threads): what a progress bar needs. `()` ignores both.
pub trait Progress: Sync {
    /// The number of target-steps, once the targets are known.
    fn start(&self, _total: u64) {}
    /// One target-step judged.
    fn tick(&self) {}
}

impl Progress for () {}

/// Analyses `range` of `set`: every target slid over every step, then cut into episodes and
/// incidents.
pub fn analyse(
    set: &SeriesSet,
    rules: &Rules,
    opts: &Options,
    slos: &[f64],
    range: Range,
    progress: &dyn Progress,
) -> Result<Postmortem> {
    let split = Split::new(set, rules, opts)?;
    progress.start((split.len() * range.times().len()) as u64);
    let timelines = slide_all(&split, rules, slos, &range, &|| progress.tick())?;
    let mut targets: Vec<TargetPostmortem> = timelines
        .into_iter()
        .enumerate()
        .map(|(i, timeline)| {
            let times = timeline.times.clone();
            let diagnose_at = |step: usize| {
                let p = split.prepare_at(i, range.frame_at(times[step])).ok()?;
                Some(llm_doctor_engine::diagnose(
                    &rules.playbook,
                    &p.snapshot,
                    slos,
                ))
            };
            explain(timeline, &range, &rules.playbook, &diagnose_at)
        })
        .collect();
    // Hit targets first, first hit first.
    targets.sort_by_key(|t| {
        (
            t.incidents.is_empty(),
            t.incidents.first().map(|i| i.start_ms),
            t.name(),
        )
    });
    let fleet = fleet::fleet(&targets);
    Ok(Postmortem {
        from_ms: range.from_ms,
        to_ms: range.to_ms,
        step_ms: range.step_ms,
        window_ms: range.window_ms,
        targets,
        fleet,
        notes: Vec::new(),
        requests: None,
    })
}

/// Every target's timeline, on as many threads as the machine has cores.
fn slide_all(
    split: &Split<'_>,
    rules: &Rules,
    slos: &[f64],
    range: &Range,
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<Timeline>> {
    crate::parallel::map_indexed(split.len(), 1, |i| {
        timeline::slide(split, i, rules, slos, range, tick)
    })
    .into_iter()
    .collect()
}

/// Episodes and incidents of one timeline.
fn explain(
    timeline: Timeline,
    range: &Range,
    playbook: &llm_doctor_engine::Playbook,
    diagnose_at: &dyn Fn(usize) -> Option<llm_doctor_engine::report::Diagnosis>,
) -> TargetPostmortem {
    let episodes = episodes::episodes(&timeline, range.window_ms);
    let spans = incident::incident_spans(&timeline, range.window_ms);
    let incidents = spans
        .iter()
        .enumerate()
        .map(|(k, &span)| {
            incident::describe(
                &timeline,
                span,
                incident::Around {
                    previous_end: k.checked_sub(1).map(|p| spans[p].1),
                    next_start: spans.get(k + 1).map(|n| n.0),
                    max_gap: (range.window_ms / range.step_ms.max(1)).max(1) as usize,
                },
                &episodes,
                playbook,
                diagnose_at,
            )
        })
        .collect();
    let mut steps = StepCounts::default();
    for s in &timeline.status {
        match s {
            Status::Healthy => steps.healthy += 1,
            Status::Degraded => steps.degraded += 1,
            Status::Critical => steps.critical += 1,
            Status::Unknown => steps.unknown += 1,
        }
    }
    TargetPostmortem {
        target: timeline.target.clone(),
        steps,
        status_runs: status_runs(&timeline),
        incidents,
        episodes,
        notes: timeline.notes.clone(),
        timeline,
        step_ms: range.step_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::adapter::Adapters;

    fn fixture(name: &str) -> SeriesSet {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name);
        let text = crate::source::file::read_text(&path).unwrap();
        crate::source::file::parse_inputs(&[(name.to_string(), text)]).unwrap()
    }

    /// The postmortem reader drops every series no adapter reads; nothing may change.
    #[test]
    fn dropping_the_series_no_adapter_reads_changes_nothing() {
        let rules = crate::rules::load_rules(None).unwrap();
        let names = rules.adapters.read_names();
        let slos = rules.playbook.slo_values(&Default::default()).unwrap();
        for f in [
            "fleet_mixed.om.gz",
            "llamacpp_cpu_offload.om.gz",
            "triton_kv_cache_exhaustion.om.gz",
            "sglang_kv_cache_exhaustion.om.gz",
            "tgi_queue_backlog.om.gz",
            "gpu_fault.om.gz",
        ] {
            let full = fixture(f);
            let mut kept = full.clone();
            kept.series.retain(|s| Adapters::reads(&names, &s.name));
            assert!(
                kept.series.len() < full.series.len(),
                "{f}: nothing dropped"
            );
            let opts = Options {
                window_ms: 120_000,
                ..Options::default()
            };
            let newest = full.newest_ms().unwrap();
            let range = Range {
                from_ms: newest - 240_000,
                to_ms: newest,
                step_ms: 30_000,
                window_ms: 120_000,
            };
            let json = |set: &SeriesSet| {
                serde_json::to_string(&analyse(set, &rules, &opts, &slos, range, &()).unwrap())
                    .unwrap()
            };
            assert_eq!(json(&kept), json(&full), "{f}");
        }
    }
}
