//! "What changed?": a good window against a bad one, signal by signal, each movement measured
//! against the signal's own spread inside the two windows, with the causes it supports.

use llm_doctor_engine::report::Diagnosis;
use serde::Serialize;

use super::timeline::Timeline;

/// One side of a comparison: a target's short-window tracks across its window, and the
/// diagnosis of the whole window.
pub struct Side<'a> {
    /// Per-step signal values across the window.
    pub timeline: &'a Timeline,
    /// The diagnosis over the window.
    pub diagnosis: &'a Diagnosis,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// The good side's target.
    pub good: String,
    /// The bad side's target.
    pub bad: String,
    /// Good window end (ms).
    pub good_at_ms: Option<i64>,
    /// Bad window end (ms).
    pub bad_at_ms: Option<i64>,
    /// Signals, most moved first.
    pub moves: Vec<Move>,
    /// Facts that differ: (name, good, bad).
    pub facts: Vec<FactChange>,
    /// Causes firing on the bad side only.
    pub new_causes: Vec<String>,
    /// Symptoms firing on the bad side only.
    pub new_symptoms: Vec<String>,
}

/// A signal's movement.
#[derive(Debug, Clone, Serialize)]
pub struct Move {
    /// The signal.
    pub signal: String,
    /// Mean over the good window.
    pub good: f64,
    /// Mean over the bad window.
    pub bad: f64,
    /// (bad - good) / spread: how many typical fluctuations it moved.
    pub score: f64,
    /// Causes on the bad side whose evidence reads this signal.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub supports: Vec<String>,
}

/// A fact that differs.
#[derive(Debug, Clone, Serialize)]
pub struct FactChange {
    /// The fact.
    pub fact: String,
    /// Its good-side value (absent: unknown there).
    pub good: Option<String>,
    /// Its bad-side value.
    pub bad: Option<String>,
}

/// Compares two sides; signals known on only one side are left out (they did not move, they
/// are unknown).
pub fn diff(good: Side<'_>, bad: Side<'_>) -> Diff {
    let mut moves: Vec<Move> = Vec::new();
    for (name, g) in &good.timeline.signals {
        let Some(b) = bad.timeline.signals.get(name) else {
            continue;
        };
        let (Some((gm, gv)), Some((bm, bv))) = (mean_var(g), mean_var(b)) else {
            continue;
        };
        // The spread is the pooled standard deviation, floored so a flat signal that steps
        // from one constant to another is measured against 1 % of its size, not against zero.
        let floor = 0.01 * gm.abs().max(bm.abs());
        let spread = ((gv + bv) / 2.0).sqrt().max(floor);
        if spread <= 0.0 || (bm - gm).abs() <= f64::EPSILON * gm.abs().max(1.0) {
            continue;
        }
        let supports = bad
            .diagnosis
            .causes
            .iter()
            .filter(|c| c.evidence.iter().any(|e| e.signal.as_deref() == Some(name)))
            .map(|c| c.id.clone())
            .collect();
        moves.push(Move {
            signal: name.clone(),
            good: gm,
            bad: bm,
            score: (bm - gm) / spread,
            supports,
        });
    }
    // Beyond ten spreads a move is plainly real; among those, the larger change in
    // proportion leads (a signal that appears from zero first).
    moves.sort_by(|x, y| {
        let key = |m: &Move| (m.score.abs().min(CLEARLY_MOVED), log_ratio(m.good, m.bad));
        let (kx, ky) = (key(x), key(y));
        ky.0.total_cmp(&kx.0)
            .then_with(|| ky.1.total_cmp(&kx.1))
            .then_with(|| x.signal.cmp(&y.signal))
    });

    let show = |v: &llm_doctor_engine::FactValue| match v {
        llm_doctor_engine::FactValue::Number(n) => n.to_string(),
        other => serde_json::to_string(other).unwrap_or_default(),
    };
    let mut facts = Vec::new();
    let names: std::collections::BTreeSet<&String> = good
        .diagnosis
        .facts
        .keys()
        .chain(bad.diagnosis.facts.keys())
        .collect();
    for name in names {
        let g = good.diagnosis.facts.get(name).map(show);
        let b = bad.diagnosis.facts.get(name).map(show);
        if g != b {
            facts.push(FactChange {
                fact: name.clone(),
                good: g,
                bad: b,
            });
        }
    }
    let new_causes = bad
        .diagnosis
        .causes
        .iter()
        .filter(|c| !good.diagnosis.causes.iter().any(|g| g.id == c.id))
        .map(|c| c.id.clone())
        .collect();
    let new_symptoms = bad
        .diagnosis
        .symptoms
        .iter()
        .filter(|s| !good.diagnosis.symptoms.iter().any(|g| g.id == s.id))
        .map(|s| s.id.clone())
        .collect();
    Diff {
        good: super::model::target_name(&good.diagnosis.target),
        bad: super::model::target_name(&bad.diagnosis.target),
        good_at_ms: good.diagnosis.window.end_ms,
        bad_at_ms: bad.diagnosis.window.end_ms,
        moves,
        facts,
        new_causes,
        new_symptoms,
    }
}

/// Spreads beyond which a move counts as plainly real.
const CLEARLY_MOVED: f64 = 10.0;

/// How many times larger or smaller, as |ln(bad / good)|, with a floor of 0.1 % of the larger
/// so a move from zero is large but finite.
fn log_ratio(good: f64, bad: f64) -> f64 {
    let eps = 1e-3 * good.abs().max(bad.abs()).max(f64::MIN_POSITIVE);
    ((bad.abs() + eps) / (good.abs() + eps)).ln().abs()
}

/// Mean and population variance of the known values.
fn mean_var(v: &[f64]) -> Option<(f64, f64)> {
    let known: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if known.is_empty() {
        return None;
    }
    let n = known.len() as f64;
    let mean = known.iter().sum::<f64>() / n;
    let var = known.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    Some((mean, var))
}

/// A side computed from a recording: [`window_side`].
pub struct OwnedSide {
    timeline: Timeline,
    diagnosis: Diagnosis,
}

impl OwnedSide {
    /// Borrowed, for [`diff`].
    pub fn side(&self) -> Side<'_> {
        Side {
            timeline: &self.timeline,
            diagnosis: &self.diagnosis,
        }
    }
}

/// One window of one target of `set`, ending at `opts.at_ms` (or the newest sample): its
/// diagnosis, and its signals over short sub-windows at each recorded step inside it, whose
/// spread says how much the signal moves on its own.
pub fn window_side(
    set: &crate::signal::series::SeriesSet,
    rules: &crate::rules::Rules,
    opts: &crate::prepared::Options,
    slos: &[f64],
    window_ms: i64,
) -> anyhow::Result<OwnedSide> {
    let split = crate::pipeline::Split::new(set, rules, opts)?;
    if split.len() != 1 {
        let names: Vec<String> = (0..split.len())
            .map(|i| super::model::target_name(split.target(i)))
            .collect();
        anyhow::bail!(
            "{} targets ({}): pick one with --selector (or --good-selector/--bad-selector)",
            split.len(),
            names.join("; ")
        );
    }
    let at = match opts.at_ms.or(set.newest_ms()) {
        Some(t) => t,
        None => anyhow::bail!("the input has no samples"),
    };
    let step = set.scrape_interval_ms().unwrap_or(15_000);
    let sub = (window_ms / 5).max(2 * step);
    let range = super::Range {
        from_ms: at - window_ms + sub.min(window_ms),
        to_ms: at,
        step_ms: step,
        window_ms: sub,
    };
    let timeline = super::timeline::slide(&split, 0, rules, slos, &range, &|| {})?;
    let prepared = split.prepare_at(
        0,
        crate::signal::adapter::eval::Frame {
            end_ms: Some(at),
            window_ms,
        },
    )?;
    let diagnosis = llm_doctor_engine::diagnose(&rules.playbook, &prepared.snapshot, slos);
    Ok(OwnedSide {
        timeline,
        diagnosis,
    })
}
