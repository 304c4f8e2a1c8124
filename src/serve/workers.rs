//! `receiver.ack: on_receipt`: the workers that triage and deliver what is queued.

use super::alerts::{bodies_to_send, diagnose_group};
use super::app::App;
use super::{config, queue, sinks};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Delivery workers for `ack: on_receipt`, as many as `max_in_flight`: each takes a queued
/// notification, triages it (on the bounded triage pool, [`TRIAGE_SLOTS`] at once) and
/// delivers it until every sink accepted.
pub(super) fn start_workers(app: &Arc<App>) {
    for _ in 0..app.settings.max_in_flight {
        let app = app.clone();
        tokio::spawn(async move {
            loop {
                let item = app.queue.pop().await;
                deliver_queued(&app, &item).await;
                app.queue.done(&item);
            }
        });
    }
}

/// Triages and delivers one queued notification, retrying each failing sink with backoff
/// until it accepts; the delivery record is kept in the dedupe store, so a resend that comes
/// later is answered 200 and not delivered again.
pub(super) async fn deliver_queued(app: &Arc<App>, item: &queue::Item) {
    let group = &item.group;
    let digest = app.deliveries.digest(group);
    let _claim = app.deliveries.claim(digest).await;
    let mut record = app.deliveries.get(digest);
    if record.all_accepted(app.settings.sinks.len()) {
        return;
    }
    let outcomes = diagnose_group(app, group).await;
    let mut tasks = tokio::task::JoinSet::new();
    let bodies = bodies_to_send(app, &item.raw, group, &outcomes, &mut record);
    app.deliveries.put(digest, record);
    for (i, sink, body) in bodies {
        let app = app.clone();
        tasks.spawn(async move {
            let attempts = deliver_until_accepted(&app, &sink, &body).await;
            (i, sink.name, attempts)
        });
    }
    let fingerprints: Vec<&str> = group
        .alerts
        .iter()
        .map(|a| a.fingerprint.as_str())
        .collect();
    while let Some(joined) = tasks.join_next().await {
        let Ok((i, name, attempts)) = joined else {
            continue;
        };
        record.accept(i);
        app.deliveries.put(digest, record);
        tracing::info!(
            group_key = ?group.group_key,
            fingerprints = ?fingerprints,
            sink = %name,
            attempts,
            queued_ms = item.accepted.elapsed().as_millis() as u64,
            "delivered"
        );
    }
}

/// No request waits on a queued delivery, so its rounds need not fit `retry.deadline`: an
/// attempt cut short while the sink is still answering may have been accepted, and sending it
/// again would deliver it twice.
pub(super) const QUEUED_ROUND: Duration = Duration::from_secs(30);

/// Rounds of [`sinks::deliver`] (each within `retry.deadline` or [`QUEUED_ROUND`], the longer)
/// until `sink` accepts, waiting between rounds from `retry.initial_backoff` doubling to 30 s.
/// Returns the attempts made.
pub(super) async fn deliver_until_accepted(
    app: &App,
    sink: &config::Sink,
    body: &serde_json::Value,
) -> u32 {
    let mut backoff = app.settings.initial_backoff;
    let mut total = 0;
    loop {
        let deadline = Instant::now() + app.settings.retry_deadline.max(QUEUED_ROUND);
        let retried = || app.metrics.inc("llm_doctor_sink_retries_total", &sink.name);
        match sinks::deliver(
            &app.client,
            sink,
            body,
            app.settings.initial_backoff,
            deadline,
            None,
            retried,
        )
        .await
        {
            Ok(attempts) => return total + attempts,
            Err(gave_up) => {
                total += gave_up.attempts;
                app.metrics
                    .inc("llm_doctor_sink_failures_total", &sink.name);
                tracing::warn!(
                    sink = %sink.name,
                    attempts = total,
                    error = ?gave_up.last_error,
                    retry_in_ms = backoff.as_millis() as u64,
                    "sink did not accept a queued notification; retrying until it does"
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
}
