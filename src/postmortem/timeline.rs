//! The diagnosis slid across a range: one verdict per step per target, kept as numeric tracks
//! (status, every signal's value, each finding's strength) so that a day of a fleet fits in
//! memory. Full findings are recomputed only where a report needs them (an episode's peak).
//!
//! Each step reads the series through the same window functions as `diagnose`; they find the
//! window by binary search, so a step costs the samples inside its window, never the history.

use std::collections::BTreeMap;

use anyhow::Result;
use llm_doctor_engine::report::{Diagnosis, Status};
use llm_doctor_engine::Target;

use crate::pipeline::Split;
use crate::rules::Rules;
use crate::signal::adapter::eval::Frame;

/// The steps a range is judged at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// First window end (ms).
    pub from_ms: i64,
    /// Last window end (ms), inclusive.
    pub to_ms: i64,
    /// Distance between window ends (ms).
    pub step_ms: i64,
    /// Window length (ms).
    pub window_ms: i64,
}

impl Range {
    /// The window ends, oldest first.
    pub fn times(&self) -> Vec<i64> {
        let n = ((self.to_ms - self.from_ms) / self.step_ms.max(1)).max(0) as usize + 1;
        (0..n)
            .map(|i| self.from_ms + i as i64 * self.step_ms)
            .collect()
    }

    /// The frame of the window ending at `t`.
    pub fn frame_at(&self, t: i64) -> Frame {
        Frame {
            end_ms: Some(t),
            window_ms: self.window_ms,
        }
    }
}

/// Whether a track is a symptom or a cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Something users feel.
    Symptom,
    /// Why.
    Cause,
}

/// One symptom or cause through time.
#[derive(Debug, Clone)]
pub struct Track {
    /// Symptom or cause.
    pub kind: Kind,
    /// Its id in the playbook.
    pub id: String,
    /// Its title.
    pub title: String,
    /// The signal a symptom is judged by (its first simple comparison), for its peak value.
    pub signal: Option<String>,
    /// A symptom's comparison on that signal (operator, threshold), when it is a plain one.
    pub comparison: Option<(&'static str, f64)>,
    /// Per step: NaN when it did not fire; else a symptom's signal value (or 1 when it has
    /// none) and a cause's score.
    pub value: Vec<f64>,
    /// Per step: a cause's rank (1 = first), 0 when it did not fire; empty for symptoms.
    pub rank: Vec<u16>,
    /// Per step: how far past its threshold a symptom is (value / threshold, >= 1 when it
    /// fired), NaN otherwise; empty for causes.
    pub severity: Vec<f64>,
}

impl Track {
    /// Whether it fired at step `i`.
    pub fn fired(&self, i: usize) -> bool {
        !self.value[i].is_nan()
    }
}

/// One target's verdicts through the range.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// What was diagnosed.
    pub target: Target,
    /// How its input was assembled (from the last step).
    pub notes: Vec<String>,
    /// Window ends, oldest first.
    pub times: Vec<i64>,
    /// The overall status per step.
    pub status: Vec<Status>,
    /// Every signal that had a value at some step: per step, NaN when unknown.
    pub signals: BTreeMap<String, Vec<f64>>,
    /// Every symptom and cause that fired at some step, keyed by (kind, id).
    pub tracks: BTreeMap<(Kind, String), Track>,
}

/// Slides the diagnosis over `range` for target `i` of `split`. `tick` is called after each
/// step (for progress).
pub fn slide(
    split: &Split<'_>,
    i: usize,
    rules: &Rules,
    slos: &[f64],
    range: &Range,
    tick: &(dyn Fn() + Sync),
) -> Result<Timeline> {
    let times = range.times();
    let n = times.len();
    let catalog = &rules.catalog;
    let mut timeline = Timeline {
        target: Target::default(),
        notes: Vec::new(),
        times: times.clone(),
        status: Vec::with_capacity(n),
        signals: BTreeMap::new(),
        tracks: BTreeMap::new(),
    };
    // Filled by catalog index and finding id while sliding (no name compared or copied per
    // step), keyed by name once at the end.
    let mut columns: Vec<Option<Vec<f64>>> = vec![None; catalog.signals().len()];
    let mut tracks = Tracks::default();
    for (step, &t) in times.iter().enumerate() {
        let prepared = split.values_at(i, range.frame_at(t))?;
        for (k, column) in columns.iter_mut().enumerate() {
            if let Some(v) = prepared.snapshot.signal_at(k) {
                column.get_or_insert_with(|| vec![f64::NAN; n])[step] = v.value;
            }
        }
        let d = llm_doctor_engine::diagnose(&rules.playbook, &prepared.snapshot, slos);
        timeline.status.push(d.status);
        tracks.record(&d, step, n, |name| {
            let k = catalog.signal(name)?;
            columns[k].as_ref().map(|c| c[step])
        });
        if step + 1 == n {
            timeline.target = prepared.snapshot.target.clone();
            timeline.notes = prepared.notes;
        }
        tick();
    }
    for (def, column) in catalog.signals().iter().zip(columns) {
        if let Some(column) = column {
            timeline.signals.insert(def.name.clone(), column);
        }
    }
    for (id, track) in tracks.symptoms {
        timeline.tracks.insert((Kind::Symptom, id), track);
    }
    for (id, track) in tracks.causes {
        timeline.tracks.insert((Kind::Cause, id), track);
    }
    Ok(timeline)
}

/// The tracks of a slide, by finding id: looked up with the id a diagnosis holds, without
/// copying it at every step.
#[derive(Default)]
struct Tracks {
    symptoms: BTreeMap<String, Track>,
    causes: BTreeMap<String, Track>,
}

impl Tracks {
    /// Adds one step's findings; `column` is a signal's value at this step.
    fn record(
        &mut self,
        d: &Diagnosis,
        step: usize,
        n: usize,
        column: impl Fn(&str) -> Option<f64>,
    ) {
        for s in &d.symptoms {
            // The comparison that held (an `or` of several may have others that did not).
            let usable = |e: &&llm_doctor_engine::report::EvidenceItem| {
                e.signal.is_some() && e.value.is_some()
            };
            let first = s
                .evidence
                .iter()
                .filter(usable)
                .find(|e| e.result == Some(true))
                .or_else(|| s.evidence.iter().find(usable));
            let track = track_of(&mut self.symptoms, &s.id, || Track {
                kind: Kind::Symptom,
                id: s.id.clone(),
                title: s.title.clone(),
                signal: first.and_then(|e| e.signal.clone()),
                comparison: first.and_then(|e| Some((e.op?, e.threshold?))),
                value: vec![f64::NAN; n],
                rank: Vec::new(),
                severity: vec![f64::NAN; n],
            });
            // One signal per track: the one it was first judged by, read from its column when
            // another comparison is the one that held now.
            let same = first.filter(|e| e.signal.is_some() && e.signal == track.signal);
            let value = same
                .and_then(|e| e.value)
                .or(track
                    .signal
                    .as_deref()
                    .and_then(&column)
                    .filter(|v| v.is_finite()))
                .unwrap_or(1.0);
            track.value[step] = value;
            // How bad, in the direction of the track's own comparison; a larger value when it
            // has none (every symptom signal grows worse upwards unless its rule says `<`).
            track.severity[step] = match track.comparison {
                Some((op, th)) if th != 0.0 && op.starts_with('<') => (th / value).abs(),
                Some((_, th)) if th != 0.0 => (value / th).abs(),
                _ => value.abs(),
            };
        }
        for c in &d.causes {
            let track = track_of(&mut self.causes, &c.id, || Track {
                kind: Kind::Cause,
                id: c.id.clone(),
                title: c.title.clone(),
                signal: None,
                comparison: None,
                value: vec![f64::NAN; n],
                rank: vec![0; n],
                severity: Vec::new(),
            });
            track.value[step] = c.score;
            track.rank[step] = c.rank.min(u16::MAX as usize) as u16;
        }
    }
}

/// The track of `id`, made by `new` the first time.
fn track_of<'a>(
    tracks: &'a mut BTreeMap<String, Track>,
    id: &str,
    new: impl FnOnce() -> Track,
) -> &'a mut Track {
    if !tracks.contains_key(id) {
        tracks.insert(id.to_string(), new());
    }
    tracks.get_mut(id).expect("inserted above")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::prepare;
    use crate::prepared::Options;

    /// Sliding reuses instant values between windows; every step must still equal a fresh
    /// diagnosis at that instant.
    #[test]
    fn a_slid_window_equals_a_fresh_one_at_every_step() {
        let rules = crate::rules::load_rules(None).unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/gpu_memory_pressure.om.gz");
        let text = crate::source::file::read_text(&path).unwrap();
        let set = crate::source::file::parse_inputs(&[("f".into(), text)]).unwrap();
        let opts = Options {
            window_ms: 120_000,
            ..Options::default()
        };
        let split = Split::new(&set, &rules, &opts).unwrap();
        let newest = set.newest_ms().unwrap();
        let range = Range {
            from_ms: newest - 300_000,
            to_ms: newest,
            step_ms: 15_000,
            window_ms: 120_000,
        };
        for t in range.times() {
            let slid = split.values_at(0, range.frame_at(t)).unwrap();
            let fresh = prepare(
                &set,
                &rules,
                &Options {
                    at_ms: Some(t),
                    ..opts.clone()
                },
            )
            .unwrap()
            .remove(0);
            for k in 0..rules.catalog.signals().len() {
                let value = |p: &crate::prepared::Prepared| {
                    p.snapshot.signal_at(k).map(|v| (v.value, v.stats))
                };
                assert_eq!(
                    value(&slid),
                    value(&fresh),
                    "{} at {t}",
                    rules.catalog.signals()[k].name
                );
            }
        }
    }
}
