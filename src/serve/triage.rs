//! One firing alert → one diagnosis: the alert's target labels become a selector, Prometheus is
//! triaged at the alert's `startsAt` (the window ending there) with [`crate::source::live::prometheus`], and the
//! worst matching target's diagnosis is kept, as `render::json` writes a target, plus a short
//! [`Summary`] for the chat and Alertmanager sinks. Blocking: call it off the async runtime.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llm_doctor_engine::playbook::spec::CauseSeverity;
use llm_doctor_engine::report::Diagnosis;
use serde_json::{json, Value};

use super::bounded::{AgedMap, MAX_TRIAGES};
use super::config::SYMPTOM_LABEL;
use super::payload::Alert;
use crate::report::{evidence_line, TargetReport};
use crate::rules::Rules;
use crate::signal::selector::Selector;
use crate::source::live::prometheus::LiveOptions;

/// What the triage needs, shared by every request.
#[derive(Debug)]
pub struct Triage {
    /// The rules.
    pub rules: Arc<Rules>,
    /// Default SLO values.
    pub slos: Vec<f64>,
    /// Where Prometheus is.
    pub live: LiveOptions,
    /// Window length, ms.
    pub window_ms: i64,
    /// The triage time is the alert's startsAt rounded down onto a grid of this step, ms.
    /// Prometheus' data changes once per scrape interval, so alerts on one target that start
    /// within one step see the same data; rounding lets them share one triage instead of
    /// costing one each (at 200 alerts a second with startsAt to the millisecond, every alert
    /// was a triage of its own, and requests queued until the server answered 503).
    pub step_ms: i64,
    /// Alert labels forming the selector.
    pub target_labels: Vec<String>,
    /// alertname → symptom.
    pub symptoms: std::collections::BTreeMap<String, String>,
    /// Triage results by (selector, triage time): alerts of one target at one moment (a group
    /// of ten, a burst of resends, alerts within one step) share one set of queries.
    pub results: TriageCache,
}

/// What one triage produced: every matching target's report and the failed queries.
pub type TriageResult = Result<(Vec<TargetReport>, Vec<String>), String>;

/// A triage shared by the alerts that need it.
pub type Cell = Arc<Shared>;

/// One triage: its result, filled once by whoever runs it (others wait for it), and the
/// diagnoses made from it, one per symptom asked about. The alerts of a target within one step
/// (30 of them at 100 alerts a second over 50 targets) share one diagnosis instead of holding a
/// copy each: those copies, many small blocks living for seconds amid the traffic, were the
/// larger part of serve's heap.
#[derive(Debug, Default)]
pub struct Shared {
    /// The result.
    pub result: tokio::sync::OnceCell<TriageResult>,
    outcomes: Mutex<Vec<(Option<String>, Arc<TriageOutcome>)>>,
}

/// Diagnoses kept per triage, one per symptom: alerts name a few, but a label may name any.
pub const OUTCOMES_PER_TRIAGE: usize = 8;

/// What a triage is keyed by: the selector's text and the triage time, ms.
pub type Key = (String, i64);

/// Single-flight cache of triage results, kept for `ttl`; failures are not kept. Callers wait
/// for a result in progress asynchronously: only the one that runs a triage needs a triage
/// slot (and a thread), so a burst of alerts on a few targets takes a few slots, not one each
/// blocked behind the same result.
#[derive(Debug)]
pub struct TriageCache {
    entries: Mutex<AgedMap<Key, Cell>>,
}

impl TriageCache {
    /// A cache keeping results for `ttl`.
    pub fn new(ttl: Duration) -> TriageCache {
        TriageCache {
            entries: Mutex::new(AgedMap::new(MAX_TRIAGES, ttl)),
        }
    }

    /// The cell of `key`: filled, being filled, or new.
    pub fn cell(&self, key: &Key) -> Cell {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        // A result still being computed when it is pushed out (the oldest of MAX_TRIAGES)
        // reaches those already waiting for it; later alerts start a triage of their own.
        map.get_or_insert_with(key.clone(), Instant::now(), Arc::default)
            .clone()
    }

    /// Forgets `key`'s failed result, so a later alert may find Prometheus back.
    pub fn forget(&self, key: &Key, cell: &Cell) {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if map
            .get(key, Instant::now())
            .is_some_and(|c| Arc::ptr_eq(c, cell))
        {
            map.remove(key);
        }
    }
}

/// Why an alert cannot be triaged; the message goes into the enrichment it leaves with.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// `startsAt` is not a time.
    #[error("startsAt `{0}` is not a time")]
    StartsAt(String),
    /// The alert's labels make no valid selector.
    #[error("selector from the alert's labels: {0}")]
    Selector(#[from] crate::signal::selector::SelectorError),
}

/// What an alert asks to triage: the key and the selector it was made from.
pub struct TriagePlan {
    /// The cache key.
    pub key: Key,
    selector: Option<Selector>,
    starts_at: String,
}

/// A diagnosis as the sinks use it.
#[derive(Debug, Clone)]
pub struct TriageOutcome {
    /// The `diagnosis` object of the webhook sink.
    pub json: Value,
    /// For short messages; None when the diagnosis is unavailable.
    pub summary: Option<Summary>,
    /// Why the diagnosis is unavailable (None when it is available).
    pub unavailable: Option<String>,
}

/// The gist of a diagnosis, one line each.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The alert's symptom, when known.
    pub symptom: Option<String>,
    /// Overall status.
    pub status: String,
    /// The target heading.
    pub target: String,
    /// Top causes (id, title, evidence in one line), best first, at most three.
    pub causes: Vec<(String, String, String)>,
    /// The first fix of the top cause, in one line.
    pub fix: Option<String>,
}

impl TriageOutcome {
    /// An unavailable diagnosis.
    pub fn unavailable(reason: impl Into<String>) -> TriageOutcome {
        let reason = reason.into();
        TriageOutcome {
            json: json!({"status": "unavailable", "reason": reason}),
            summary: None,
            unavailable: Some(reason),
        }
    }

    /// The `llm_doctor_diagnoses_total` outcome label.
    pub fn metric_outcome(&self) -> &'static str {
        if self.unavailable.is_some() {
            "unavailable"
        } else {
            "diagnosed"
        }
    }
}

impl Triage {
    /// The symptom an alert is about: its `llm_doctor_symptom` label, else the mapping of its
    /// `alertname`.
    pub fn symptom_of(&self, alert: &Alert) -> Option<String> {
        alert.labels.get(SYMPTOM_LABEL).cloned().or_else(|| {
            alert
                .labels
                .get("alertname")
                .and_then(|a| self.symptoms.get(a))
                .cloned()
        })
    }

    /// The selector made of the alert's target labels (only those it has); None when it has
    /// none of them.
    pub fn selector_text(&self, alert: &Alert) -> Option<String> {
        let parts: Vec<String> = self
            .target_labels
            .iter()
            .filter_map(|l| {
                let v = alert.labels.get(l)?;
                let escaped = v
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                Some(format!("{l}=\"{escaped}\""))
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(","))
    }

    /// `starts_ms` rounded down onto the target's grid of `step_ms`. Each target's grid is
    /// offset by a hash of its selector, so a fleet whose alerts keep arriving does not need a
    /// new triage for every target at the same moment (a burst that queued requests until
    /// they were refused), but about one target's every `step_ms / targets`.
    fn triage_time(&self, starts_ms: i64, selector: &str) -> i64 {
        let step = self.step_ms.max(1);
        // FNV-1a: stable across runs and builds, unlike std's hasher.
        let hash = selector.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let offset = (hash % step as u64) as i64;
        starts_ms - (starts_ms - offset).rem_euclid(step)
    }

    /// What `alert` asks to triage, or why it cannot be diagnosed.
    pub fn plan(&self, alert: &Alert) -> Result<TriagePlan, PlanError> {
        let Ok(starts_ms) = crate::time::parse_time(&alert.starts_at) else {
            return Err(PlanError::StartsAt(alert.starts_at.clone()));
        };
        let selector_text = self.selector_text(alert);
        let at_ms = self.triage_time(starts_ms, selector_text.as_deref().unwrap_or(""));
        let selector = match selector_text.as_deref().map(Selector::parse).transpose() {
            Ok(s) => s,
            Err(e) => return Err(PlanError::Selector(e)),
        };
        Ok(TriagePlan {
            key: (selector_text.unwrap_or_default(), at_ms),
            selector,
            starts_at: alert.starts_at.clone(),
        })
    }

    /// Queries Prometheus for `plan` and diagnoses every matching target. Blocking.
    pub fn run(&self, plan: TriagePlan) -> TriageResult {
        let (selector_text, at_ms) = plan.key;
        let opts = crate::prepared::Options {
            at_ms: Some(at_ms),
            window_ms: self.window_ms,
            selector: plan.selector,
            ..Default::default()
        };
        let result = crate::source::live::prometheus::prepare_from_prometheus(
            &self.rules,
            &self.live,
            &opts,
        )
        .map_err(|e| format!("querying Prometheus at {}: {e:#}", self.live.url))?;
        if result.prepared.is_empty() {
            return Err(format!(
                "Prometheus at {} knows no target matching {{{selector_text}}} at {}",
                self.live.url, plan.starts_at
            ));
        }
        let reports = result
            .prepared
            .into_iter()
            .map(|p| crate::verdict::judge(&self.rules.playbook, p, &self.slos, &[]))
            .collect();
        Ok((reports, result.errors))
    }

    /// `alert`'s diagnosis from the triage `shared` (once its result is in), made once per
    /// symptom and shared.
    pub fn outcome(&self, alert: &Alert, shared: &Shared) -> Arc<TriageOutcome> {
        let Some(result) = shared.result.get() else {
            return Arc::new(TriageOutcome::unavailable("the triage has no result yet"));
        };
        let symptom = self.symptom_of(alert);
        let mut made = shared.outcomes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, o)) = made.iter().find(|(s, _)| *s == symptom) {
            return o.clone();
        }
        let outcome = Arc::new(self.diagnosis(symptom.clone(), result));
        if made.len() < OUTCOMES_PER_TRIAGE {
            made.push((symptom, outcome.clone()));
        }
        outcome
    }

    /// The diagnosis for `symptom` from a triage's result: the worst matching target's.
    fn diagnosis(&self, symptom: Option<String>, result: &TriageResult) -> TriageOutcome {
        let (mut reports, errors) = match result.clone() {
            Ok(r) => r,
            Err(reason) => return TriageOutcome::unavailable(reason),
        };
        // Worst first; among equals, the one where the alert's symptom fired; then by labels
        // so the choice is deterministic.
        reports.sort_by(|a, b| {
            b.diagnosis
                .status
                .cmp(&a.diagnosis.status)
                .then_with(|| fired(&b.diagnosis, &symptom).cmp(&fired(&a.diagnosis, &symptom)))
                .then_with(|| a.diagnosis.target.labels.cmp(&b.diagnosis.target.labels))
        });
        let others: Vec<String> = reports[1..]
            .iter()
            .map(|r| target_id(&r.diagnosis))
            .collect();
        let chosen = &reports[0];
        let mut json = serde_json::to_value(chosen)
            .unwrap_or_else(|e| json!({"status": "unavailable", "reason": e.to_string()}));
        if let Value::Object(map) = &mut json {
            if let Some(s) = &symptom {
                map.insert("symptom".to_string(), json!(s));
            }
            if !others.is_empty() {
                map.insert("other_targets".to_string(), json!(others));
            }
            if !errors.is_empty() {
                map.insert("errors".to_string(), json!(errors));
            }
        }
        TriageOutcome {
            json,
            summary: Some(summarize(&chosen.diagnosis, symptom)),
            unavailable: None,
        }
    }
}

fn fired(d: &Diagnosis, symptom: &Option<String>) -> bool {
    symptom
        .as_ref()
        .is_some_and(|s| d.symptoms.iter().any(|f| &f.id == s))
}

/// A target's short name: its pod, else instance, else its labels.
pub fn target_id(d: &Diagnosis) -> String {
    let l = &d.target.labels;
    l.get("pod")
        .or_else(|| l.get("instance"))
        .cloned()
        .unwrap_or_else(|| {
            l.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
}

/// The gist: causes that lead to the alert's symptom first (when it names one), faults before
/// informational causes.
fn summarize(d: &Diagnosis, symptom: Option<String>) -> Summary {
    let mut causes: Vec<_> = d.causes.iter().collect();
    causes.sort_by_key(|c| {
        let leads = symptom
            .as_ref()
            .is_some_and(|s| c.chain.iter().any(|x| x == s));
        (!leads, c.severity == CauseSeverity::Info, c.rank)
    });
    // With the values that put it first, when the measurements show its mechanism.
    let fix = causes.first().and_then(|c| {
        c.remediations.first().map(|r| {
            let measured = (r.fits.as_ref())
                .map(|f| format!("; measured: {}", evidence_line(f)))
                .unwrap_or_default();
            match &r.action {
                Some(a) => format!("{}: {} ({}{measured})", r.title, a, r.tradeoff),
                None => format!("{} ({}{measured})", r.title, r.tradeoff),
            }
        })
    });
    Summary {
        symptom,
        status: d.status.as_str().to_string(),
        target: crate::report::heading(d),
        causes: causes
            .iter()
            .take(3)
            .map(|c| {
                let evidence = c
                    .evidence
                    .iter()
                    .map(evidence_line)
                    .collect::<Vec<_>>()
                    .join("; ");
                (c.id.clone(), c.title.clone(), evidence)
            })
            .collect(),
        fix,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn triage(step_ms: i64) -> Triage {
        let rules = Arc::new(crate::rules::load_rules(None).unwrap());
        Triage {
            slos: Vec::new(),
            live: LiveOptions::new("http://127.0.0.1:9"),
            window_ms: 300_000,
            step_ms,
            target_labels: Vec::new(),
            symptoms: Default::default(),
            results: TriageCache::new(Duration::from_secs(60)),
            rules,
        }
    }

    fn alert(symptom: &str) -> Alert {
        serde_json::from_value(
            json!({"status": "firing", "startsAt": "2026-12-01T00:00:00Z",
            "labels": {SYMPTOM_LABEL: symptom}}),
        )
        .unwrap()
    }

    /// Alerts asking about one symptom share one diagnosis; the symptoms kept per triage are
    /// bounded, since any label value can name one.
    #[test]
    fn diagnoses_are_shared_per_symptom_and_bounded() {
        let t = triage(15_000);
        let shared = Shared::default();
        shared
            .result
            .set(Err("Prometheus is down".to_string()))
            .unwrap();
        let a = t.outcome(&alert("kv_cache_exhaustion"), &shared);
        let b = t.outcome(&alert("kv_cache_exhaustion"), &shared);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.unavailable.as_deref(), Some("Prometheus is down"));
        for i in 0..100 {
            t.outcome(&alert(&format!("made_up_{i}")), &shared);
        }
        assert_eq!(shared.outcomes.lock().unwrap().len(), OUTCOMES_PER_TRIAGE);
        let c = t.outcome(&alert("kv_cache_exhaustion"), &shared);
        assert!(Arc::ptr_eq(&a, &c), "the first symptoms stay shared");
    }

    /// Alerts of one target within one step share a triage time, never after their startsAt
    /// nor a step before it; targets' grids are offset from each other.
    #[test]
    fn triage_times_lie_on_a_grid_per_target() {
        let t = triage(15_000);
        let base = 1_796_083_800_000;
        let a = t.triage_time(base, "pod=\"a\"");
        for ms in (0..15_000).step_by(250) {
            let at = t.triage_time(base + ms, "pod=\"a\"");
            assert!(at <= base + ms && at > base + ms - 15_000);
            assert!(at == a || at == a + 15_000, "{at} {a}");
        }
        let offsets: std::collections::BTreeSet<i64> = (0..50)
            .map(|i| {
                t.triage_time(base, &format!("pod=\"vllm-{i}\""))
                    .rem_euclid(15_000)
            })
            .collect();
        assert!(offsets.len() > 40, "{offsets:?}");
    }

    /// The fix an alert carries says what measurement put it first.
    #[test]
    fn the_fix_annotation_says_what_was_measured() {
        let rules = crate::rules::load_rules(None).unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("corpus/llamacpp/llamacpp-fresh21-pinned-contention-np2-30pct-1w.om.gz");
        let text = crate::source::file::read_text(&path).unwrap();
        let set = crate::source::file::parse_inputs(&[("f".into(), text)]).unwrap();
        let opts = crate::prepared::Options {
            window_ms: 300_000,
            ..Default::default()
        };
        let prepared = crate::pipeline::prepare(&set, &rules, &opts).unwrap();
        let slos = rules.playbook.slo_values(&Default::default()).unwrap();
        let d = llm_doctor_engine::diagnose(&rules.playbook, &prepared[0].snapshot, &slos);
        let fix = summarize(&d, None).fix.unwrap();
        assert!(fix.starts_with("Stop other work"), "{fix}");
        assert!(fix.contains("; measured: "), "{fix}");
        assert!(fix.contains("replica_cpu_wait_ratio 101 %"), "{fix}");
    }
}
