//! Evaluation and ranking: from a snapshot and a compiled playbook to a diagnosis.
//!
//! Symptoms fire on their conditions. A cause fires when its gate (`when`) is true; its score
//! comes from its evidence:
//!
//! ```text
//! strength   = (weight of true evidence − weight of true evidence against) / weight of all evidence
//! confidence = weight of evidence that could be checked / weight of all evidence
//! score      = (0.5 + 0.5 × strength) × (0.6 + 0.4 × confidence), clamped to 0..1
//! ```
//! (a cause with no listed evidence has strength and confidence 1). A cause whose evidence against
//! outweighs its evidence for (strength < 0) does not fire: it was checked and ruled out.
//!
//! Advice: a cause is reported as informational, not as a fault, when only its `advice`
//! condition holds (a costly setting with no measured mechanism), or when every symptom it or its
//! downstream causes explain was checked and is clear (a mechanism that harms no objective),
//! unless it `alarms_alone` (hardware errors).
//! Unknown evidence lowers the confidence, so a cause seen through fewer signals ranks lower.
//!
//! Root causes are fired causes with no fired cause upstream. Ranking (where a cause upstream
//! that is only advice does not count: it is no verdict to follow from): root faults whose chain
//! reaches a fired symptom first, then root faults that explain no fired symptom, then faults
//! that follow from another fired cause, then informational causes. Within each group, top-down
//! as in toplev: causes of the worst symptom first (critical before warning), then causes of the
//! dominant part of a request's time (the fired symptom with the largest `share`, e.g. TTFT
//! against decode), then by `score × (0.8 + 0.2 × impact)` (impact 0.5 when unknown), then by
//! id, so the order is deterministic. A cause reaches the symptoms it explains and those its
//! fired downstream causes explain.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::condition::{Condition, Env, Input, Slot, Value, WindowStats};
use crate::playbook::spec::CauseSeverity;
use crate::playbook::{Cause, Playbook};
use crate::report::{
    CauseFinding, Coverage, Diagnosis, EvidenceItem, RemediationFinding, RuleCheck, Severity,
    ShownValue, Status, SymptomFinding, Unchecked,
};
use crate::snapshot::{FactValue, Snapshot};

/// The values conditions read: a snapshot plus SLO values.
struct SnapshotEnv<'a> {
    snapshot: &'a Snapshot,
    slos: &'a [f64],
}

impl Env for SnapshotEnv<'_> {
    fn get(&self, slot: Slot) -> Option<Input<'_>> {
        match slot {
            Slot::Signal(i) => self.snapshot.signal_at(i).map(|s| Input::Number(s.value)),
            Slot::Fact(i) => self.snapshot.fact_at(i).map(|f| match &f.value {
                FactValue::Number(n) => Input::Number(*n),
                FactValue::Str(s) => Input::Str(s),
                FactValue::Bool(b) => Input::Bool(*b),
            }),
            Slot::Slo(i) => self.slos.get(i).map(|v| Input::Number(*v)),
        }
    }

    fn stats(&self, slot: Slot) -> Option<WindowStats> {
        match slot {
            Slot::Signal(i) => self.snapshot.signal_at(i).and_then(|s| s.stats),
            _ => None,
        }
    }
}

/// Diagnoses one snapshot. `slos` comes from [`Playbook::slo_values`].
pub fn diagnose(playbook: &Playbook, snapshot: &Snapshot, slos: &[f64]) -> Diagnosis {
    let env = SnapshotEnv { snapshot, slos };
    let engine = snapshot.target.engine.as_deref();
    let mut found = check_symptoms(playbook, &env);
    let mut fired = score_causes(playbook, &env, engine, &mut found.unchecked);
    let ranking = Ranking::new(playbook, &env, &fired, &found);
    let reasons = ranking.sort(playbook, &env, &found, &mut fired);
    let causes: Vec<CauseFinding> = fired
        .iter()
        .enumerate()
        .map(|(rank, s)| {
            let mut f = cause_finding(playbook, &env, engine, &ranking, rank, s);
            f.ranked_by = reasons.get(&s.index).cloned().unwrap_or_default();
            f
        })
        .collect();

    // Fired symptoms no fault explains, itself or through its fired downstream causes: the
    // answer says so plainly rather than lead with advice.
    let explained: Vec<usize> = fired
        .iter()
        .filter(|s| ranking.severity(playbook, s.index) == CauseSeverity::Fault)
        .flat_map(|s| {
            reached_symptoms(
                playbook,
                &ranking.explains,
                s.index,
                &ranking.is_fired,
                &found.fired,
            )
        })
        .collect();
    let unexplained: Vec<String> = (playbook.symptoms.iter().enumerate())
        .filter(|(i, _)| found.fired[*i] && !explained.contains(i))
        .map(|(_, s)| s.id.clone())
        .collect();

    let mut symptoms = found.symptoms;
    let mut unchecked = found.unchecked;
    symptoms.sort_by(|a, b| b.severity.cmp(&a.severity).then_with(|| a.id.cmp(&b.id)));
    unchecked.sort_by(|a, b| a.kind.cmp(b.kind).then_with(|| a.rule.cmp(&b.rule)));

    let status = if symptoms.iter().any(|s| s.severity == Severity::Critical) {
        Status::Critical
    } else if !symptoms.is_empty() || causes.iter().any(|c| c.severity == CauseSeverity::Fault) {
        Status::Degraded
    } else if found.checked == 0 {
        Status::Unknown
    } else {
        Status::Healthy
    };

    let facts = playbook
        .fact_names
        .iter()
        .enumerate()
        .filter_map(|(i, name)| snapshot.fact_at(i).map(|f| (name.clone(), f.value.clone())))
        .collect();

    let not_checked: Vec<String> = playbook
        .symptoms
        .iter()
        .zip(&found.fired)
        .filter(|(s, &fired)| !fired && !found.healthy.contains(&s.id))
        .map(|(s, _)| s.id.clone())
        .collect();
    let coverage = Coverage {
        checked: playbook.symptoms.len() - not_checked.len(),
        total: playbook.symptoms.len(),
        not_checked,
    };
    Diagnosis {
        target: snapshot.target.clone(),
        window: snapshot.window.clone(),
        status,
        symptoms,
        causes,
        healthy: found.healthy,
        unexplained,
        unchecked,
        facts,
        coverage,
    }
}

/// How the symptom or cause `id` judged `snapshot`, fired or not, with every value each of its
/// conditions read; None when no rule has that id. Whether a fired cause is a fault or advice,
/// and its rank, depend on the other rules: [`diagnose`] gives those.
pub fn check_rule(
    playbook: &Playbook,
    snapshot: &Snapshot,
    slos: &[f64],
    id: &str,
) -> Option<RuleCheck> {
    let env = SnapshotEnv { snapshot, slos };
    let item = |when: &Condition, weight: Option<f64>, note: Option<String>| {
        evidence_item(playbook, &env, when, when.eval_bool(&env), weight, note)
    };
    let items = |list: &[crate::playbook::Evidence]| {
        list.iter()
            .map(|e| item(&e.when, Some(e.weight), e.note.clone()))
            .collect::<Vec<_>>()
    };
    if let Some(s) = playbook.symptoms.iter().find(|s| s.id == id) {
        let gate = item(&s.when, None, None);
        return Some(RuleCheck {
            rule: s.id.clone(),
            kind: "symptom",
            outcome: match gate.result {
                Some(true) => "fired",
                Some(false) => "clear",
                None => "unchecked",
            },
            applies: true,
            gate,
            also: s
                .critical_when
                .as_ref()
                .map(|c| item(c, None, Some("critical when".into()))),
            evidence: Vec::new(),
            against: Vec::new(),
            explains_when: Vec::new(),
        });
    }
    let c = playbook.causes.iter().find(|c| c.id == id)?;
    let applies = applies(c, snapshot.target.engine.as_deref());
    let gate = item(&c.when, None, None);
    let also = c
        .advice
        .as_ref()
        .map(|a| item(a, None, Some("advice when".into())));
    // The same steps as `score_causes`: a gate (or advice condition) that holds, then the
    // evidence against must not outweigh the evidence for.
    let opened = gate.result == Some(true) || also.as_ref().and_then(|a| a.result) == Some(true);
    let outcome = if !applies {
        "not judged (the cause is for other engines)"
    } else if opened {
        if strength(c, &env).0 < 0.0 {
            "ruled out (the evidence against outweighs the evidence for)"
        } else {
            "fired"
        }
    } else if gate.result == Some(false) {
        "not fired"
    } else {
        "unchecked"
    };
    Some(RuleCheck {
        rule: c.id.clone(),
        kind: "cause",
        outcome,
        applies,
        gate,
        also,
        evidence: items(&c.evidence),
        against: items(&c.against),
        explains_when: c
            .explains_when
            .iter()
            .map(|(s, when)| item(when, None, Some(playbook.symptoms[*s].id.clone())))
            .collect(),
    })
}

/// What the symptom conditions said.
struct Symptoms {
    /// Per symptom: whether it fired, and how badly.
    fired: Vec<bool>,
    severity: Vec<Option<Severity>>,
    /// The fired symptoms, in playbook order.
    symptoms: Vec<SymptomFinding>,
    /// Symptoms checked and clear.
    healthy: Vec<String>,
    /// Rules that could not be checked (symptoms here; causes are added later).
    unchecked: Vec<Unchecked>,
    /// Symptoms that could be checked, fired or not.
    checked: usize,
}

/// Symptoms fire on their conditions; critical when `critical_when` also holds.
fn check_symptoms(playbook: &Playbook, env: &SnapshotEnv<'_>) -> Symptoms {
    let n = playbook.symptoms.len();
    let mut found = Symptoms {
        fired: vec![false; n],
        severity: vec![None; n],
        symptoms: Vec::new(),
        healthy: Vec::new(),
        unchecked: Vec::new(),
        checked: 0,
    };
    for (i, s) in playbook.symptoms.iter().enumerate() {
        match s.when.eval_bool(env) {
            Some(true) => {
                found.checked += 1;
                found.fired[i] = true;
                let critical = s
                    .critical_when
                    .as_ref()
                    .and_then(|c| c.eval_bool(env))
                    .unwrap_or(false);
                let severity = if critical {
                    Severity::Critical
                } else {
                    Severity::Warning
                };
                found.severity[i] = Some(severity);
                found.symptoms.push(SymptomFinding {
                    id: s.id.clone(),
                    title: s.title.clone(),
                    severity,
                    evidence: vec![evidence_item(
                        playbook,
                        env,
                        &s.when,
                        Some(true),
                        None,
                        None,
                    )],
                });
            }
            Some(false) => {
                found.checked += 1;
                found.healthy.push(s.id.clone());
            }
            None => found.unchecked.push(unchecked_rule(
                playbook,
                env.snapshot,
                &s.id,
                "symptom",
                &s.when,
            )),
        }
    }
    found
}

/// A fired cause and its score.
struct Scored {
    index: usize,
    score: f64,
    confidence: f64,
    impact: Option<f64>,
    /// Only its advice condition holds.
    advice: bool,
}

/// Causes: gate, evidence, score. A cause whose gate is unknown goes to `unchecked`.
fn score_causes(
    playbook: &Playbook,
    env: &SnapshotEnv<'_>,
    engine: Option<&str>,
    unchecked: &mut Vec<Unchecked>,
) -> Vec<Scored> {
    let mut fired: Vec<Scored> = Vec::new();
    for (i, c) in playbook.causes.iter().enumerate() {
        if !applies(c, engine) {
            continue;
        }
        let gate = c.when.eval_bool(env);
        let advised = c
            .advice
            .as_ref()
            .is_some_and(|a| a.eval_bool(env) == Some(true));
        match gate {
            Some(true) => {}
            _ if advised => {}
            Some(false) => continue,
            None => {
                unchecked.push(unchecked_rule(
                    playbook,
                    env.snapshot,
                    &c.id,
                    "cause",
                    &c.when,
                ));
                continue;
            }
        }
        // Only the advice condition holds; harmless causes are found once all have fired.
        let advice = gate != Some(true);
        let (strength, confidence) = strength(c, env);
        if strength < 0.0 {
            continue;
        }
        let score = ((0.5 + 0.5 * strength) * (0.6 + 0.4 * confidence)).clamp(0.0, 1.0);
        let impact = c.impact.as_ref().and_then(|x| match x.eval(env) {
            Value::Number(n) => Some(n.clamp(0.0, 1.0)),
            _ => None,
        });
        fired.push(Scored {
            index: i,
            score,
            confidence,
            impact,
            advice,
        });
    }
    fired
}

/// A cause's strength (weight of true evidence less true evidence against, over all evidence)
/// and confidence (the share of its evidence weight that could be checked).
fn strength(c: &Cause, env: &SnapshotEnv<'_>) -> (f64, f64) {
    let (mut total, mut support, mut unknown) = (0.0, 0.0, 0.0);
    for e in &c.evidence {
        total += e.weight;
        match e.when.eval_bool(env) {
            Some(true) => support += e.weight,
            Some(false) => {}
            None => unknown += e.weight,
        }
    }
    let against: f64 = c
        .against
        .iter()
        .filter(|e| e.when.eval_bool(env) == Some(true))
        .map(|e| e.weight)
        .sum();
    if total > 0.0 {
        ((support - against) / total, (total - unknown) / total)
    } else {
        (if against > 0.0 { -1.0 } else { 1.0 }, 1.0)
    }
}

/// Where each fired cause stands: root or downstream, fault or advice, its chain.
struct Ranking<'p> {
    is_fired: Vec<bool>,
    /// What each cause explains in this snapshot (`explanations`).
    explains: Vec<Cow<'p, [usize]>>,
    chains: Vec<Option<Vec<String>>>,
    is_advice: Vec<bool>,
}

impl<'p> Ranking<'p> {
    fn new(
        playbook: &'p Playbook,
        env: &SnapshotEnv<'_>,
        fired: &[Scored],
        found: &Symptoms,
    ) -> Ranking<'p> {
        let mut is_fired = vec![false; playbook.causes.len()];
        for f in fired {
            is_fired[f.index] = true;
        }
        let explains = explanations(playbook, env);
        let chains: Vec<Option<Vec<String>>> = (0..playbook.causes.len())
            .map(|i| is_fired[i].then(|| chain(playbook, &explains, i, &is_fired, &found.fired)))
            .collect();
        // Checked and clear, by symptom index (the report keeps their ids).
        let clear: Vec<bool> = playbook
            .symptoms
            .iter()
            .map(|s| found.healthy.contains(&s.id))
            .collect();
        let mut is_advice = vec![false; playbook.causes.len()];
        for f in fired {
            let c = &playbook.causes[f.index];
            is_advice[f.index] = f.advice
                || (!c.alarms_alone && harmless(playbook, &explains, f.index, &is_fired, &clear));
        }
        Ranking {
            is_fired,
            explains,
            chains,
            is_advice,
        }
    }

    fn is_root(&self, playbook: &Playbook, i: usize) -> bool {
        !playbook.causes[i]
            .ancestors
            .iter()
            .any(|&a| self.is_fired[a])
    }

    /// No fault fired upstream: an upstream cause reported as advice (it harms nothing
    /// checked) does not make the fault below it a consequence when ranking.
    fn no_fault_upstream(&self, playbook: &Playbook, i: usize) -> bool {
        !playbook.causes[i]
            .ancestors
            .iter()
            .any(|&a| self.is_fired[a] && !self.is_advice[a])
    }

    fn severity(&self, playbook: &Playbook, i: usize) -> CauseSeverity {
        if self.is_advice[i] {
            CauseSeverity::Info
        } else {
            playbook.causes[i].severity
        }
    }

    /// Sorts the fired causes as the module docs say: by group, worst symptom, dominant part,
    /// weighted score, then id. Returns, by cause index, why each stands where it does.
    fn sort(
        &self,
        playbook: &Playbook,
        env: &SnapshotEnv<'_>,
        found: &Symptoms,
        fired: &mut [Scored],
    ) -> BTreeMap<usize, String> {
        let explains_fired = |i: usize| {
            self.chains[i]
                .as_ref()
                .and_then(|c| c.last())
                .is_some_and(|last| playbook.symptom(last).is_some())
        };
        let group = |i: usize| match (
            self.severity(playbook, i),
            self.no_fault_upstream(playbook, i),
            explains_fired(i),
        ) {
            (CauseSeverity::Fault, true, true) => 0,
            (CauseSeverity::Fault, true, false) => 1,
            (CauseSeverity::Fault, false, _) => 2,
            (CauseSeverity::Info, _, _) => 3,
        };
        // Only fired causes are sorted, so only theirs are walked.
        let reach: Vec<Vec<usize>> = (0..playbook.causes.len())
            .map(|i| {
                if self.is_fired[i] {
                    reached_symptoms(playbook, &self.explains, i, &self.is_fired, &found.fired)
                } else {
                    Vec::new()
                }
            })
            .collect();
        let worst = |i: usize| reach[i].iter().filter_map(|&s| found.severity[s]).max();
        let dominant = dominant_symptom(playbook, env, &found.fired);
        // Causes of the dominant part first; a cause whose symptoms have no share is not demoted.
        let off_dominant = |i: usize| match dominant {
            Some(d) => {
                !reach[i].contains(&d)
                    && reach[i]
                        .iter()
                        .any(|&s| playbook.symptoms[s].share.is_some())
            }
            None => false,
        };
        let key = |s: &Scored| s.score * (0.8 + 0.2 * s.impact.unwrap_or(0.5));
        fired.sort_by(|a, b| {
            group(a.index)
                .cmp(&group(b.index))
                .then(worst(b.index).cmp(&worst(a.index)))
                .then(off_dominant(a.index).cmp(&off_dominant(b.index)))
                .then(key(b).total_cmp(&key(a)))
                .then_with(|| {
                    playbook.causes[a.index]
                        .id
                        .cmp(&playbook.causes[b.index].id)
                })
        });
        fired
            .iter()
            .map(|f| {
                let i = f.index;
                let mut why = vec![match group(i) {
                    0 => "root cause of a symptom that fired".to_string(),
                    1 => "root cause; no symptom it leads to fired".to_string(),
                    2 => "downstream of another fired cause".to_string(),
                    _ => "advice: harms no objective that was checked".to_string(),
                }];
                let worst_symptom = reach[i]
                    .iter()
                    .filter(|&&s| found.severity[s].is_some())
                    .max_by_key(|&&s| (found.severity[s], std::cmp::Reverse(s)));
                if let Some(&s) = worst_symptom {
                    let sev = match found.severity[s] {
                        Some(crate::report::Severity::Critical) => "critical",
                        _ => "warning",
                    };
                    why.push(format!("worst symptom {} ({sev})", playbook.symptoms[s].id));
                }
                if off_dominant(i) {
                    if let Some(d) = dominant {
                        why.push(format!(
                            "outside the dominant part of request time ({})",
                            playbook.symptoms[d].id
                        ));
                    }
                }
                why.push(format!("weighted score {:.2}", key(f)));
                (i, why.join("; "))
            })
            .collect()
    }
}

/// A fired cause as reported: its gate and evidence, what counts against it, what could not be
/// checked, and its remediations for this engine.
fn cause_finding(
    playbook: &Playbook,
    env: &SnapshotEnv<'_>,
    engine: Option<&str>,
    ranking: &Ranking,
    rank: usize,
    s: &Scored,
) -> CauseFinding {
    let c = &playbook.causes[s.index];
    let mut evidence = vec![evidence_item(
        playbook,
        env,
        &c.when,
        Some(true),
        None,
        None,
    )];
    let mut unknown = Vec::new();
    for e in &c.evidence {
        let r = e.when.eval_bool(env);
        let item = evidence_item(playbook, env, &e.when, r, Some(e.weight), e.note.clone());
        match r {
            Some(true) => evidence.push(item),
            None => unknown.push(item),
            Some(false) => {}
        }
    }
    let against = c
        .against
        .iter()
        .filter(|e| e.when.eval_bool(env) == Some(true))
        .map(|e| {
            evidence_item(
                playbook,
                env,
                &e.when,
                Some(true),
                Some(e.weight),
                e.note.clone(),
            )
        })
        .collect();
    let mut remediations: Vec<RemediationFinding> = c
        .remediations
        .iter()
        .map(|&r| remediation(playbook, env, engine, r))
        .collect();
    // A fix whose mechanism the measurements show comes first; what is already in effect is not
    // the next thing to do and comes last. Each group keeps the playbook's order (an alert's
    // annotation carries only the first).
    remediations.sort_by_key(|r| (r.already.is_some(), r.fits.is_none()));
    CauseFinding {
        id: c.id.clone(),
        title: c.title.clone(),
        rank: rank + 1,
        ranked_by: String::new(),
        score: round3(s.score),
        confidence: round3(s.confidence),
        root: ranking.is_root(playbook, s.index),
        severity: ranking.severity(playbook, s.index),
        chain: ranking.chains[s.index].clone().unwrap_or_default(),
        impact: s.impact.map(round3),
        impact_note: c.impact_note.clone(),
        evidence,
        against,
        unknown,
        remediations,
    }
}

/// Remediation `r` as found: the engine's action, or the next step where it is already in
/// effect; and whether the measurements show the mechanism it addresses.
fn remediation(
    playbook: &Playbook,
    env: &SnapshotEnv<'_>,
    engine: Option<&str>,
    r: usize,
) -> RemediationFinding {
    let r = &playbook.remediations[r];
    let fits = (r.fits_when.as_ref()).filter(|when| when.eval_bool(env) == Some(true));
    let action = engine
        .and_then(|e| r.actions.get(e))
        .or_else(|| r.actions.get("any"))
        .map(|a| with_facts(playbook, env.snapshot, a));
    let already = r
        .in_effect
        .as_ref()
        .filter(|(when, _)| when.eval_bool(env) == Some(true));
    RemediationFinding {
        id: r.id.clone(),
        title: r.title.clone(),
        action: match already {
            Some((_, next)) => Some(with_facts(playbook, env.snapshot, next)),
            None => action,
        },
        favours: r.favours,
        tradeoff: r.tradeoff.clone(),
        already: already.map(|(when, _)| facts_read(playbook, env.snapshot, when)),
        // What is in effect is not put first, whatever it fits.
        fits: fits
            .filter(|_| already.is_none())
            .map(|when| evidence_item(playbook, env, when, Some(true), None, None)),
    }
}

/// `text` with each `{fact.NAME}` replaced by the fact's value (`unknown` when absent).
fn with_facts(playbook: &Playbook, snapshot: &Snapshot, text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{fact.") {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let name = &rest[start + 6..start + len];
        out.push_str(&rest[..start]);
        let value = playbook
            .fact_names
            .iter()
            .position(|f| f == name)
            .and_then(|i| snapshot.fact_at(i))
            .map_or_else(|| "unknown".to_string(), |f| f.value.to_string());
        out.push_str(&value);
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    out
}

/// The facts a condition reads, as `name = value` (what makes a remediation already done).
fn facts_read(playbook: &Playbook, snapshot: &Snapshot, when: &Condition) -> String {
    let parts: Vec<String> = when
        .slots()
        .iter()
        .filter_map(|slot| match slot {
            Slot::Fact(i) => Some(format!(
                "{} = {}",
                playbook.fact_names[*i],
                snapshot
                    .fact_at(*i)
                    .map_or_else(|| "unknown".to_string(), |f| f.value.to_string())
            )),
            _ => None,
        })
        .collect();
    parts.join(", ")
}

fn applies(c: &Cause, engine: Option<&str>) -> bool {
    c.engines.is_empty() || engine.is_none_or(|e| c.engines.iter().any(|x| x == e))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// What each cause explains in this snapshot: its `explains`, and each `explains_when`
/// symptom whose condition holds (unknown does not: an explanation is claimed only when the
/// mechanism behind it was measured). Borrowed where a cause has no conditional edge, since a
/// postmortem asks this at every step.
fn explanations<'p>(playbook: &'p Playbook, env: &SnapshotEnv<'_>) -> Vec<Cow<'p, [usize]>> {
    playbook
        .causes
        .iter()
        .map(|c| {
            if c.explains_when.is_empty() {
                return Cow::Borrowed(c.explains.as_slice());
            }
            let mut v = c.explains.clone();
            v.extend(
                c.explains_when
                    .iter()
                    .filter(|(_, when)| when.eval_bool(env) == Some(true))
                    .map(|&(s, _)| s),
            );
            Cow::Owned(v)
        })
        .collect()
}

/// True when every symptom the cause, or a fired cause downstream of it, explains was checked
/// and is clear: the mechanism is there but harms no objective.
fn harmless(
    playbook: &Playbook,
    explains: &[Cow<'_, [usize]>],
    start: usize,
    cause_fired: &[bool],
    clear: &[bool],
) -> bool {
    let mut seen = vec![false; playbook.causes.len()];
    let mut stack = vec![start];
    let mut any = false;
    while let Some(c) = stack.pop() {
        if std::mem::replace(&mut seen[c], true) {
            continue;
        }
        for &s in explains[c].iter() {
            if !clear[s] {
                return false;
            }
            any = true;
        }
        stack.extend(
            playbook.causes[c]
                .leads_to
                .iter()
                .filter(|&&n| cause_fired[n]),
        );
    }
    any
}

/// The fired symptoms a fired cause explains, itself or through fired downstream causes.
fn reached_symptoms(
    playbook: &Playbook,
    explains: &[Cow<'_, [usize]>],
    start: usize,
    cause_fired: &[bool],
    symptom_fired: &[bool],
) -> Vec<usize> {
    let mut out = Vec::new();
    let mut seen = vec![false; playbook.causes.len()];
    let mut stack = vec![start];
    while let Some(c) = stack.pop() {
        if std::mem::replace(&mut seen[c], true) {
            continue;
        }
        for &s in explains[c].iter() {
            if symptom_fired[s] && !out.contains(&s) {
                out.push(s);
            }
        }
        stack.extend(
            playbook.causes[c]
                .leads_to
                .iter()
                .filter(|&&n| cause_fired[n]),
        );
    }
    out
}

/// The fired symptom whose part of a request's time is largest (its `share`), if any has one.
fn dominant_symptom(
    playbook: &Playbook,
    env: &SnapshotEnv<'_>,
    symptom_fired: &[bool],
) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, s) in playbook.symptoms.iter().enumerate() {
        if !symptom_fired[i] {
            continue;
        }
        let Some(Value::Number(v)) = s.share.as_ref().map(|c| c.eval(env)) else {
            continue;
        };
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}

/// The path from a fired cause through fired downstream causes to a fired symptom (the longest
/// such path, ties broken by playbook order). Without a fired symptom the chain ends at the
/// deepest fired cause.
fn chain(
    playbook: &Playbook,
    explains: &[Cow<'_, [usize]>],
    start: usize,
    cause_fired: &[bool],
    symptom_fired: &[bool],
) -> Vec<String> {
    fn walk(
        pb: &Playbook,
        explains: &[Cow<'_, [usize]>],
        at: usize,
        cause_fired: &[bool],
        symptom_fired: &[bool],
    ) -> (bool, Vec<String>) {
        let c = &pb.causes[at];
        let mut best: (bool, Vec<String>) = (false, vec![c.id.clone()]);
        for &next in &c.leads_to {
            if !cause_fired[next] {
                continue;
            }
            let (reached, mut rest) = walk(pb, explains, next, cause_fired, symptom_fired);
            let mut path = vec![c.id.clone()];
            path.append(&mut rest);
            if (reached, path.len()) > (best.0, best.1.len()) {
                best = (reached, path);
            }
        }
        if !best.0 {
            if let Some(&s) = explains[at].iter().find(|&&s| symptom_fired[s]) {
                best = (true, vec![c.id.clone(), pb.symptoms[s].id.clone()]);
            }
        }
        best
    }
    walk(playbook, explains, start, cause_fired, symptom_fired).1
}

fn evidence_item(
    playbook: &Playbook,
    env: &SnapshotEnv<'_>,
    cond: &Condition,
    result: Option<bool>,
    weight: Option<f64>,
    note: Option<String>,
) -> EvidenceItem {
    let mut values = BTreeMap::new();
    let mut missing = Vec::new();
    let mut window_stats = BTreeMap::new();
    for &slot in cond.slots() {
        let name = playbook.slot_name(slot);
        if let Some(st) = env.stats(slot) {
            window_stats.insert(name.clone(), st);
        }
        let shown = match slot {
            Slot::Signal(i) => env
                .snapshot
                .signal_at(i)
                .map(|s| ShownValue::Number(s.value)),
            Slot::Fact(i) => env
                .snapshot
                .fact_at(i)
                .map(|f| ShownValue::Fact(f.value.clone())),
            Slot::Slo(i) => env.slos.get(i).map(|v| ShownValue::Number(*v)),
        };
        match shown {
            Some(v) => {
                values.insert(name, v);
            }
            None => {
                values.insert(name.clone(), ShownValue::Missing(None));
                missing.push(name);
            }
        }
    }
    let (mut signal, mut value, mut op, mut threshold) = (None, None, None, None);
    if let Some(sc) = cond.simple_comparison() {
        signal = Some(playbook.slot_name(sc.slot));
        value = match env.get(sc.slot) {
            Some(Input::Number(n)) => Some(n),
            _ => None,
        };
        op = Some(sc.op);
        threshold = match sc.threshold {
            crate::condition::Threshold::Number(n) => Some(n),
            crate::condition::Threshold::Slot(s) => match env.get(s) {
                Some(Input::Number(n)) => Some(n),
                _ => None,
            },
        };
    } else if let Some(&first) = cond.slots().first() {
        signal = Some(playbook.slot_name(first));
        value = match env.get(first) {
            Some(Input::Number(n)) => Some(n),
            _ => None,
        };
    }
    EvidenceItem {
        signal,
        value,
        op,
        threshold,
        // Folded YAML keeps line breaks; one line reads better in every output.
        condition: cond
            .source()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        result,
        weight,
        note,
        values,
        missing,
        window_stats,
    }
}

fn unchecked_rule(
    playbook: &Playbook,
    snapshot: &Snapshot,
    id: &str,
    kind: &'static str,
    cond: &Condition,
) -> Unchecked {
    let mut missing = Vec::new();
    let mut hints: Vec<String> = Vec::new();
    for &slot in cond.slots() {
        let absent = match slot {
            Slot::Signal(i) => snapshot.signal_at(i).is_none(),
            Slot::Fact(i) => snapshot.fact_at(i).is_none(),
            Slot::Slo(_) => false,
        };
        if absent {
            missing.push(playbook.slot_name(slot));
            let hint = match slot {
                Slot::Signal(i) => snapshot.hint_at(i).map(str::to_string),
                Slot::Fact(i) => Some(format!(
                    "pass --fact {}=... or the serve command line with --engine-args",
                    playbook.fact_names[i]
                )),
                Slot::Slo(_) => None,
            };
            if let Some(h) = hint {
                if !hints.contains(&h) {
                    hints.push(h);
                }
            }
        }
    }
    Unchecked {
        rule: id.to_string(),
        kind,
        missing,
        hint: (!hints.is_empty()).then(|| hints.join("; ")),
        hints,
    }
}
