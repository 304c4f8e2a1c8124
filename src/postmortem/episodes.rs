//! Runs of steps where a symptom or cause held, with short flaps merged.

use serde::Serialize;

use super::timeline::{Kind, Timeline, Track};

/// One stretch of time a symptom or cause held.
#[derive(Debug, Clone, Serialize)]
pub struct Episode {
    /// Symptom or cause.
    pub kind: Kind,
    /// Its id in the playbook.
    pub id: String,
    /// Its title.
    pub title: String,
    /// First step it held (ms; the end of that step's window).
    pub start_ms: i64,
    /// Last step it held (ms).
    pub end_ms: i64,
    /// Index of the first and last step in the timeline.
    #[serde(skip)]
    pub steps: (usize, usize),
    /// Steps inside the episode at which it held (fewer than the span when flaps were merged).
    pub held_steps: usize,
    /// The signal a symptom is judged by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Its worst value: a symptom's signal value, a cause's score.
    pub peak: f64,
    /// When the peak was reached (ms).
    pub peak_ms: i64,
    /// Index of the peak step.
    #[serde(skip)]
    pub peak_step: usize,
}

impl Episode {
    /// Length from first to last step (ms).
    pub fn duration_ms(&self) -> i64 {
        self.end_ms - self.start_ms
    }
}

/// Every episode of every track of `timeline`, oldest first. Gaps of `merge_gap_ms` or less
/// between two runs join them: a symptom that clears for less than a window did not end.
pub fn episodes(timeline: &Timeline, merge_gap_ms: i64) -> Vec<Episode> {
    let mut out: Vec<Episode> = timeline
        .tracks
        .values()
        .flat_map(|t| track_episodes(t, &timeline.times, merge_gap_ms))
        .collect();
    out.sort_by(|a, b| (a.start_ms, a.kind, &a.id).cmp(&(b.start_ms, b.kind, &b.id)));
    out
}

fn track_episodes(track: &Track, times: &[i64], merge_gap_ms: i64) -> Vec<Episode> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for i in (0..times.len()).filter(|&i| track.fired(i)) {
        match runs.last_mut() {
            Some((_, end)) if times[i] - times[*end] <= merge_gap_ms.max(0) + step_of(times) => {
                *end = i
            }
            _ => runs.push((i, i)),
        }
    }
    runs.into_iter()
        .map(|(a, b)| {
            let peak_step = (a..=b)
                .filter(|&i| track.fired(i))
                .max_by(|&x, &y| strength(track, x).total_cmp(&strength(track, y)))
                .unwrap_or(a);
            Episode {
                kind: track.kind,
                id: track.id.clone(),
                title: track.title.clone(),
                start_ms: times[a],
                end_ms: times[b],
                steps: (a, b),
                held_steps: (a..=b).filter(|&i| track.fired(i)).count(),
                signal: track.signal.clone(),
                peak: track.value[peak_step],
                peak_ms: times[peak_step],
                peak_step,
            }
        })
        .collect()
}

/// What "worst" means for a track at a step: how far past its threshold a symptom is, a
/// cause's score.
fn strength(track: &Track, i: usize) -> f64 {
    match track.kind {
        Kind::Symptom => track.severity[i],
        Kind::Cause => track.value[i],
    }
}

/// The distance between steps (0 for a single step).
fn step_of(times: &[i64]) -> i64 {
    if times.len() < 2 {
        0
    } else {
        times[1] - times[0]
    }
}
