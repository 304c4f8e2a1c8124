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
/// Where an incident sits: the incidents beside it and how long a gap still joins a run.
#[derive(Debug, Clone, Copy)]
pub struct Around {
    /// Last step of the incident before, if any.
    pub previous_end: Option<usize>,
    /// First step of the incident after, if any.
    pub next_start: Option<usize>,
    /// Steps a condition may stop holding and still be the same run (a window's worth).
    pub max_gap: usize,
}

pub fn describe(
    timeline: &Timeline,
    span: (usize, usize),
    around: Around,
    episodes: &[Episode],
    playbook: &Playbook,
    diagnose_at: &dyn Fn(usize) -> Option<Diagnosis>,
) -> Incident {
    let (a, b) = span;
    let Around {
        previous_end,
        next_start,
        max_gap,
    } = around;
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
        max_gap,
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
    max_gap: usize,
    symptoms: &[SymptomFinding],
    causes: &[IncidentCause],
    playbook: &Playbook,
) -> Vec<Onset> {
    // (signal, op, threshold bits) -> whose evidence, and what they explain
    let mut conditions: BTreeMap<(String, String, u64), Whose> = BTreeMap::new();
    let mut add = |signal: &str, op: &str, threshold: f64, who: &str, explains: &[String]| {
        let entry = conditions
            .entry((signal.to_string(), op.to_string(), threshold.to_bits()))
            .or_default();
        if !entry.0.iter().any(|w| w == who) {
            entry.0.push(who.to_string());
        }
        for x in explains {
            if !entry.1.contains(x) {
                entry.1.push(x.clone());
            }
        }
    };
    // Held comparisons as the engine reported them (SLO and fact thresholds resolved).
    let held = |e: &llm_doctor_engine::report::EvidenceItem| match (&e.signal, e.op, e.threshold) {
        (Some(s), Some(op), Some(th)) if e.result == Some(true) => Some((s.clone(), op, th)),
        _ => None,
    };
    for s in symptoms {
        for (signal, op, th) in s.evidence.iter().filter_map(held) {
            add(&signal, op, th, &s.id, &[]);
        }
        if let Some(p) = playbook.symptoms.iter().find(|p| p.id == s.id) {
            for (signal, op, th) in literal_comparisons(p.when.source()) {
                add(&signal, op, th, &s.id, &[]);
            }
        }
    }
    for c in causes.iter().take(3) {
        // Its edges, and a conditional one (`explains_when`) where the finding's chain shows
        // that the cause explained that symptom itself.
        let explains: Vec<String> = playbook
            .causes
            .iter()
            .find(|p| p.id == c.id)
            .map(|p| {
                let conditional = p.explains_when.iter().map(|(i, _)| *i).filter(|&i| {
                    c.finding.chain.len() == 2 && c.finding.chain[1] == playbook.symptoms[i].id
                });
                p.explains
                    .iter()
                    .copied()
                    .chain(conditional)
                    .map(|i| playbook.symptoms[i].id.clone())
                    .collect()
            })
            .unwrap_or_default();
        for (signal, op, th) in c.finding.evidence.iter().filter_map(held) {
            add(&signal, op, th, &c.id, &explains);
        }
        if let Some(p) = playbook.causes.iter().find(|p| p.id == c.id) {
            let sources =
                std::iter::once(p.when.source()).chain(p.evidence.iter().map(|e| e.when.source()));
            for (signal, op, th) in sources.flat_map(literal_comparisons) {
                add(&signal, op, th, &c.id, &explains);
            }
        }
    }

    let mut out = Vec::new();
    for ((signal, op, th_bits), (of, explains)) in conditions {
        let threshold = f64::from_bits(th_bits);
        let Some(column) = timeline.signals.get(&signal) else {
            continue;
        };
        if let Some(k) = onset_of(column, (a, b), lookback, max_gap, |v| {
            compare(v, &op, threshold)
        }) {
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
    out.sort_by(|x, y| {
        x.at_ms
            .cmp(&y.at_ms)
            .then_with(|| y.explains.len().cmp(&x.explains.len()))
            .then_with(|| x.signal.cmp(&y.signal))
    });
    out
}

/// Every `signal OP number` in a condition's text, window functions stripped
/// (`max_over_time(kv_cache_usage_ratio) > 95%` gives `kv_cache_usage_ratio > 0.95`): the
/// moment the signal itself crossed is the onset, whatever statistic the rule judges by.
/// Comparisons whose right side goes on (`< 0.25 * fact.max_num_seqs`) are skipped.
fn literal_comparisons(src: &str) -> Vec<(String, &'static str, f64)> {
    static PATTERN: std::sync::OnceLock<regex_lite::Regex> = std::sync::OnceLock::new();
    let re = PATTERN.get_or_init(|| {
        regex_lite::Regex::new(
            r"(?:(?:max|min|avg)_over_time\(\s*)?([a-z][a-z0-9_]*)\s*\)?\s*(>=|<=|>|<)\s*([0-9]+(?:\.[0-9]+)?)\s*(%|ms|s)?(\s*[*/+-])?",
        )
        .expect("a valid pattern")
    });
    re.captures_iter(src)
        .filter(|c| c.get(5).is_none())
        .filter_map(|c| {
            let op = match &c[2] {
                ">=" => ">=",
                "<=" => "<=",
                ">" => ">",
                _ => "<",
            };
            let n: f64 = c[3].parse().ok()?;
            let n = match c.get(4).map(|m| m.as_str()) {
                Some("%") => n / 100.0,
                Some("ms") => n / 1000.0,
                _ => n,
            };
            Some((c[1].to_string(), op, n))
        })
        .collect()
}

/// When a condition started to hold for the incident `(a, b)`: walking back from its start as
/// long as it held, or the first step inside it that holds. None when it never held inside, or
/// when it held through the whole healthy stretch before (then it is how the target always is,
/// not what changed).
fn onset_of(
    column: &[f64],
    (a, b): (usize, usize),
    lookback: usize,
    max_gap: usize,
    holds: impl Fn(f64) -> bool,
) -> Option<usize> {
    let first_inside = (a..=b).find(|&i| holds(column[i]))?;
    // Walk back over the run that led into the incident, across gaps shorter than a window
    // (a cache that fills in bursts has filled).
    let (mut k, mut gap) = (first_inside, 0);
    let mut i = first_inside;
    while i > lookback {
        i -= 1;
        if holds(column[i]) {
            k = i;
            gap = 0;
        } else {
            gap += 1;
            if gap > max_gap {
                break;
            }
        }
    }
    let baseline_known = (lookback..a).any(|i| column[i].is_finite());
    if k == lookback && lookback < a && baseline_known {
        return None;
    }
    Some(k)
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
