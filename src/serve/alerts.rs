//! Each firing alert of a group diagnosed (one triage per target and start, shared), and the bodies each sink gets.

use super::app::App;
use super::deliveries::Record;
use super::payload::{Alert, Notification};
use super::triage::TriageOutcome;
use super::{config, sinks, triage};
use std::sync::Arc;

/// A diagnosis per alert: None for resolved alerts and for alerts this server already
/// diagnosed (labelled `diagnosed="true"`); cached by (fingerprint, startsAt).
pub(super) async fn diagnose_group(
    app: &Arc<App>,
    group: &Notification,
) -> Vec<Option<Arc<TriageOutcome>>> {
    let mut pending = tokio::task::JoinSet::new();
    let mut out: Vec<Option<Arc<TriageOutcome>>> = vec![None; group.alerts.len()];
    for (i, alert) in group.alerts.iter().enumerate() {
        if !alert.is_firing()
            || alert
                .labels
                .get(sinks::DIAGNOSED_LABEL)
                .is_some_and(|v| v == "true")
        {
            continue;
        }
        if let Some(o) = cached(app, alert) {
            app.metrics.inc("llm_doctor_diagnoses_total", "cached");
            out[i] = Some(o);
            continue;
        }
        let (app, alert) = (app.clone(), alert.clone());
        let plan = match app.triage.plan(&alert) {
            Ok(p) => p,
            Err(reason) => {
                // Through the same join below, to be counted and logged.
                let reason = reason.to_string();
                pending
                    .spawn(async move { (i, alert, Arc::new(TriageOutcome::unavailable(reason))) });
                continue;
            }
        };
        pending.spawn(async move {
            let key = plan.key.clone();
            let cell = app.triage.results.cell(&key);
            // Only the first caller for a key runs it (with a slot and a thread); the others
            // wait here without either.
            let result = cell.result.get_or_init(|| run_triage(&app, plan)).await;
            let outcome = app.triage.outcome(&alert, &cell);
            if result.is_err() {
                app.triage.results.forget(&key, &cell);
            }
            (i, alert, outcome)
        });
    }
    while let Some(joined) = pending.join_next().await {
        let Ok((i, alert, outcome)) = joined else {
            continue;
        };
        app.metrics
            .inc("llm_doctor_diagnoses_total", outcome.metric_outcome());
        match &outcome.unavailable {
            Some(reason) => tracing::warn!(
                fingerprint = %alert.fingerprint,
                starts_at = %alert.starts_at,
                reason = ?reason,
                "diagnosis unavailable"
            ),
            None => tracing::info!(
                fingerprint = %alert.fingerprint,
                starts_at = %alert.starts_at,
                status = %outcome.json["status"].as_str().unwrap_or("?"),
                "diagnosed"
            ),
        }
        // Unavailable diagnoses are not cached: a resend may find Prometheus back.
        if outcome.unavailable.is_none() {
            let mut map = app.diagnoses.lock().unwrap_or_else(|e| e.into_inner());
            map.insert(alert.key(), outcome.clone(), std::time::Instant::now());
        }
        out[i] = Some(outcome);
    }
    out
}

/// Runs one triage on a thread of its own once a triage slot is free.
pub(super) async fn run_triage(app: &Arc<App>, plan: triage::TriagePlan) -> triage::TriageResult {
    let Ok(slot) = app.triage_slots.clone().acquire_owned().await else {
        return Err("the server is shutting down".to_string());
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let triage = app.triage.clone();
    // live.rs refuses to run inside a runtime (it builds its own), and tokio's blocking pool
    // threads carry the runtime context: a plain thread it is.
    let spawned = std::thread::Builder::new()
        .name("llm-doctor-triage".to_string())
        .spawn(move || {
            // The thread holds its slot: a request that times out drops its task, not the
            // thread, and must not free a slot the thread still uses.
            let _slot = slot;
            let _ = tx.send(triage.run(plan));
        });
    match spawned {
        Ok(_) => rx
            .await
            .unwrap_or_else(|_| Err("the triage thread panicked".to_string())),
        Err(e) => Err(format!("cannot start a triage thread: {e}")),
    }
}

pub(super) fn cached(app: &App, alert: &Alert) -> Option<Arc<TriageOutcome>> {
    let mut map = app.diagnoses.lock().unwrap_or_else(|e| e.into_inner());
    map.get(&alert.key(), std::time::Instant::now()).cloned()
}

/// What each sink that has not accepted the group yet is to receive: (index, sink, body).
/// Sinks with nothing to send count as done.
pub(super) fn bodies_to_send(
    app: &App,
    raw: &serde_json::Value,
    group: &Notification,
    outcomes: &[Option<Arc<TriageOutcome>>],
    record: &mut Record,
) -> Vec<(usize, config::Sink, serde_json::Value)> {
    let alerts: Vec<sinks::Diagnosed> = group
        .alerts
        .iter()
        .zip(outcomes)
        .map(|(a, o)| (a, o.as_deref()))
        .collect();
    let mut out = Vec::new();
    for (i, sink) in app.settings.sinks.iter().enumerate() {
        if record.accepted(i) {
            continue;
        }
        match sinks::body(sink.kind, raw, group, &alerts) {
            Some(body) => out.push((i, sink.clone(), body)),
            None => record.accept(i),
        }
    }
    out
}
