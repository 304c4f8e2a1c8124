//! Incidents: the stretches a target was not healthy, with what moved first, the causes that
//! held longest and strongest, and how the target was before and after.

use std::collections::BTreeMap;

use llm_doctor_engine::report::{CauseFinding, Diagnosis, Status, SymptomFinding};
use llm_doctor_engine::Playbook;
use serde::Serialize;

use super::episodes::Episode;
use super::timeline::{Kind, Timeline};

/// One stretch of time a target was degraded or critical.
#[derive(Debug, Clone, Serialize)]
pub struct Incident {
    /// First step not healthy (ms).
    pub start_ms: i64,
    /// Last step not healthy (ms).
    pub end_ms: i64,
    /// Index of the first and last step.
    #[serde(skip)]
    pub steps: (usize, usize),
    /// The worst status reached.
    pub worst: Status,
    /// How the target was before, and after.
    pub before: Phase,
    /// How the target was after it ended.
    pub after: Phase,
    /// The symptom episodes inside it, oldest first.
    pub symptoms: Vec<Episode>,
    /// The causes, most to blame first.
    pub causes: Vec<IncidentCause>,
    /// What moved first, oldest first.
    pub onsets: Vec<Onset>,
    /// The symptoms at their worst, with their evidence.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub symptom_findings: Vec<SymptomFinding>,
}

/// How a target was around an incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Healthy at every judged step.
    Healthy,
    /// Another incident, or unknown steps.
    Unsettled,
    /// The range starts or ends inside the incident: not seen.
    NotSeen,
}

impl Phase {
    /// In words.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Healthy => "healthy",
            Phase::Unsettled => "not settled",
            Phase::NotSeen => "not seen (the range starts or ends inside the incident)",
        }
    }
}

/// A cause over the whole incident.
#[derive(Debug, Clone, Serialize)]
pub struct IncidentCause {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Share of the incident's steps at which it fired.
    pub held_share: f64,
    /// Steps at which it ranked first.
    pub first_steps: usize,
    /// Its mean score while it fired.
    pub mean_score: f64,
    /// The ranking weight: the sum over steps of score / rank, so a cause that is the step's
    /// verdict for long and strongly leads.
    pub weight: f64,
    /// The finding at its strongest step: evidence, chain and fixes.
    pub finding: CauseFinding,
    /// When it was strongest (ms).
    pub peak_ms: i64,
}

/// When a piece of evidence first held, by the signal itself.
#[derive(Debug, Clone, Serialize)]
pub struct Onset {
    /// When the condition started to hold (ms; the end of that step's window).
    pub at_ms: i64,
    /// The signal.
    pub signal: String,
    /// The comparison, `>` or `<` and the like.
    pub op: String,
    /// The threshold.
    pub threshold: f64,
    /// The signal's value then.
    pub value: f64,
    /// The symptoms and causes whose evidence this is.
    pub of: Vec<String>,
    /// The symptoms those causes explain, by the playbook's edges.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explains: Vec<String>,
}

/// Runs of not-healthy steps, merged across gaps of `merge_gap_ms` or less.
pub fn incident_spans(timeline: &Timeline, merge_gap_ms: i64) -> Vec<(usize, usize)> {
    let bad = |s: Status| matches!(s, Status::Degraded | Status::Critical);
    let times = &timeline.times;
    let step = if times.len() > 1 {
        times[1] - times[0]
    } else {
        0
    };
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for i in (0..times.len()).filter(|&i| bad(timeline.status[i])) {
        match runs.last_mut() {
            Some((_, end)) if times[i] - times[*end] <= merge_gap_ms + step => *end = i,
            _ => runs.push((i, i)),
        }
    }
    runs
}

/// Everything about one incident. `diagnose_at` recomputes the full diagnosis of a step.
pub fn describe(
    timeline: &Timeline,
    span: (usize, usize),
    previous_end: Option<usize>,
    next_start: Option<usize>,
    episodes: &[Episode],
    playbook: &Playbook,
    diagnose_at: &dyn Fn(usize) -> Option<Diagnosis>,
) -> Incident {
    let (a, b) = span;
    let status = &timeline.status;
    let worst = status[a..=b]
        .iter()
        .copied()
        .max()
        .unwrap_or(Status::Degraded);
    let before = if a == 0 {
        Phase::NotSeen
    } else if status[previous_end.map_or(0, |e| e + 1)..a]
        .iter()
        .all(|s| *s == Status::Healthy)
    {
        Phase::Healthy
    } else {
        Phase::Unsettled
    };
    let after = if b + 1 == status.len() {
        Phase::NotSeen
    } else if status[b + 1..next_start.unwrap_or(status.len())]
        .iter()
        .all(|s| *s == Status::Healthy)
    {
        Phase::Healthy
    } else {
        Phase::Unsettled
    };
    let symptoms: Vec<Episode> = episodes
        .iter()
        .filter(|e| e.kind == Kind::Symptom && e.steps.0 <= b && e.steps.1 >= a)
        .cloned()
        .collect();
    let causes = rank_causes(timeline, span, diagnose_at);

    // Findings at their worst: the evidence whose onsets are looked for.
    let mut symptom_findings: Vec<SymptomFinding> = Vec::new();
    for e in &symptoms {
        if let Some(d) = diagnose_at(e.peak_step) {
            if let Some(f) = d.symptoms.into_iter().find(|s| s.id == e.id) {
                symptom_findings.push(f);
            }
        }
    }
    let lookback = previous_end.map_or(0, |e| e + 1);
    let onsets = onsets(
        timeline,
        span,
        lookback,
        &symptom_findings,
        &causes,
        playbook,
    );
    Incident {
        start_ms: timeline.times[a],
        end_ms: timeline.times[b],
        steps: span,
        worst,
        before,
        after,
        symptoms,
        causes,
        onsets,
        symptom_findings,
    }
}

/// The causes that fired inside the span, heaviest first; at most five.
fn rank_causes(
    timeline: &Timeline,
    (a, b): (usize, usize),
    diagnose_at: &dyn Fn(usize) -> Option<Diagnosis>,
) -> Vec<IncidentCause> {
    let steps = (b - a + 1) as f64;
    let mut out: Vec<(f64, IncidentCause)> = Vec::new();
    for track in timeline.tracks.values().filter(|t| t.kind == Kind::Cause) {
        let fired: Vec<usize> = (a..=b).filter(|&i| track.fired(i)).collect();
        if fired.is_empty() {
            continue;
        }
        let weight: f64 = fired
            .iter()
            .map(|&i| track.value[i] / f64::from(track.rank[i].max(1)))
            .sum();
        let peak = *fired
            .iter()
            .max_by(|&&x, &&y| {
                (track.value[x] / f64::from(track.rank[x].max(1)))
                    .total_cmp(&(track.value[y] / f64::from(track.rank[y].max(1))))
            })
            .unwrap_or(&fired[0]);
        let Some(finding) =
            diagnose_at(peak).and_then(|d| d.causes.into_iter().find(|c| c.id == track.id))
        else {
            continue;
        };
        out.push((
            weight,
            IncidentCause {
                id: track.id.clone(),
                title: track.title.clone(),
                held_share: fired.len() as f64 / steps,
                first_steps: fired.iter().filter(|&&i| track.rank[i] == 1).count(),
                mean_score: fired.iter().map(|&i| track.value[i]).sum::<f64>() / fired.len() as f64,
                weight,
                finding,
                peak_ms: timeline.times[peak],
            },
        ));
    }
    out.sort_by(|x, y| y.0.total_cmp(&x.0).then_with(|| x.1.id.cmp(&y.1.id)));
    out.into_iter().take(5).map(|(_, c)| c).collect()
}

/// The findings a piece of evidence belongs to, and the symptoms they explain.
type Whose = (Vec<String>, Vec<String>);

/// For each simple comparison that held in the symptoms' and the leading causes' evidence:
/// when it started to hold, read from the signal itself (walking back from the incident's
/// start as long as it held, never before `lookback`).
fn onsets(
    timeline: &Timeline,
    (a, b): (usize, usize),
    lookback: usize,
    symptoms: &[SymptomFinding],
    causes: &[IncidentCause],
    playbook: &Playbook,
) -> Vec<Onset> {
    // (signal, op, threshold bits) -> whose evidence, and what they explain
    let mut conditions: BTreeMap<(String, String, u64), Whose> = BTreeMap::new();
    let mut departures: BTreeMap<String, Whose> = BTreeMap::new();
    let mut add = |e: &llm_doctor_engine::report::EvidenceItem, who: &str, explains: &[String]| {
        if e.result != Some(true) {
            return;
        }
        if e.op.is_none() {
            for s in e.values.keys().filter(|k| !k.contains('.')) {
                let entry = departures.entry(s.clone()).or_default();
                if !entry.0.iter().any(|w| w == who) {
                    entry.0.push(who.to_string());
                }
                for x in explains {
                    if !entry.1.contains(x) {
                        entry.1.push(x.clone());
                    }
                }
            }
        }
        if let (Some(s), Some(op), Some(th)) = (&e.signal, e.op, e.threshold) {
            let entry = conditions
                .entry((s.clone(), op.to_string(), th.to_bits()))
                .or_default();
            if !entry.0.iter().any(|w| w == who) {
                entry.0.push(who.to_string());
            }
            for x in explains {
                if !entry.1.contains(x) {
                    entry.1.push(x.clone());
                }
            }
        }
    };
    for s in symptoms {
        for e in &s.evidence {
            add(e, &s.id, &[]);
        }
    }
    for c in causes.iter().take(3) {
        let explains: Vec<String> = playbook
            .causes
            .iter()
            .find(|p| p.id == c.id)
            .map(|p| {
                p.explains
                    .iter()
                    .map(|&i| playbook.symptoms[i].id.clone())
                    .collect()
            })
            .unwrap_or_default();
        for e in &c.finding.evidence {
            add(e, &c.id, &explains);
        }
    }

    let mut out = Vec::new();
    let mut covered: Vec<String> = Vec::new();
    for ((signal, op, th_bits), (of, explains)) in conditions {
        let threshold = f64::from_bits(th_bits);
        let Some(column) = timeline.signals.get(&signal) else {
            continue;
        };
        covered.push(signal.clone());
        if let Some(k) = onset_of(column, (a, b), lookback, |v| compare(v, &op, threshold)) {
            out.push(Onset {
                at_ms: timeline.times[k],
                signal,
                op,
                threshold,
                value: column[k],
                of,
                explains,
            });
        }
    }
    // Evidence without a plain threshold (window statistics, several signals): the signal's
    // own departure from the healthy stretch before the incident, halfway to its extreme.
    for (signal, (of, explains)) in departures {
        if covered.contains(&signal) {
            continue;
        }
        let Some(column) = timeline.signals.get(&signal) else {
            continue;
        };
        let Some((op, threshold)) = departure(column, (a, b), lookback) else {
            continue;
        };
        if let Some(k) = onset_of(column, (a, b), lookback, |v| compare(v, op, threshold)) {
            out.push(Onset {
                at_ms: timeline.times[k],
                signal,
                op: op.to_string(),
                threshold,
                value: column[k],
                of,
                explains,
            });
        }
    }
    out.sort_by(|x, y| {
        x.at_ms
            .cmp(&y.at_ms)
            .then_with(|| y.explains.len().cmp(&x.explains.len()))
            .then_with(|| x.signal.cmp(&y.signal))
    });
    out
}

/// When a condition started to hold for the incident `(a, b)`: walking back from its start as
/// long as it held, or the first step inside it that holds. None when it never held inside, or
/// when it held through the whole healthy stretch before (then it is how the target always is,
/// not what changed).
fn onset_of(
    column: &[f64],
    (a, b): (usize, usize),
    lookback: usize,
    holds: impl Fn(f64) -> bool,
) -> Option<usize> {
    let k = if holds(column[a]) {
        let mut k = a;
        while k > lookback && holds(column[k - 1]) {
            k -= 1;
        }
        k
    } else {
        (a..=b).find(|&i| holds(column[i]))?
    };
    let baseline_known = (lookback..a).any(|i| column[i].is_finite());
    if k == lookback && lookback < a && baseline_known {
        return None;
    }
    Some(k)
}

/// For a signal with no threshold: the direction it left its range before the incident
/// (steps `lookback..a`, at least three known) and the halfway mark to its extreme inside.
fn departure(
    column: &[f64],
    (a, b): (usize, usize),
    lookback: usize,
) -> Option<(&'static str, f64)> {
    let before: Vec<f64> = column[lookback..a]
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    if before.len() < 3 {
        return None;
    }
    let inside: Vec<f64> = column[a..=b]
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let (lo, hi) = before
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(*v), h.max(*v))
        });
    let top = inside.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let bottom = inside.iter().copied().fold(f64::INFINITY, f64::min);
    // Moved by more than the baseline's own width (and not by a rounding error).
    let width = (hi - lo).max(1e-9 * hi.abs().max(1.0));
    let (up, down) = (top - hi, lo - bottom);
    if up > width && up >= down {
        return Some((">", hi + up / 2.0));
    }
    if down > width {
        return Some(("<", lo - (lo - bottom) / 2.0));
    }
    None
}

fn compare(v: f64, op: &str, th: f64) -> bool {
    if v.is_nan() {
        return false;
    }
    match op {
        ">" => v > th,
        ">=" => v >= th,
        "<" => v < th,
        "<=" => v <= th,
        "==" => v == th,
        "!=" => v != th,
        _ => false,
    }
}
