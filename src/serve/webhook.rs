//! `POST /alertmanager`: authenticate, read and validate a notification, then deliver it (`after_delivery`) or queue it (`on_receipt`).

use super::alerts::{bodies_to_send, diagnose_group};
use super::app::App;
use super::config::AckMode;
use super::payload::Notification;
use super::{payload, sinks};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::sync::Arc;
use tokio::time::Instant;

pub(super) fn answer(code: StatusCode, body: serde_json::Value) -> Response {
    (code, Json(body)).into_response()
}

/// Compares without an early exit, so the time taken does not reveal how much of a secret
/// matched (the length still shows).
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(super) fn authorized(app: &App, headers: &HeaderMap) -> bool {
    if app.settings.auth.accepted.is_empty() {
        return true;
    }
    let Some(given) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    // Check every credential, so timing does not say which kind matched.
    app.settings.auth.accepted.iter().fold(false, |ok, want| {
        same_credential(given.as_bytes(), want) | ok
    })
}

/// `given` carries `want`'s credentials under its scheme; schemes are case-insensitive
/// (RFC 9110 §11.1: `bearer T` is `Bearer T`), credentials compared in constant time.
pub(super) fn same_credential(given: &[u8], want: &str) -> bool {
    let Some((scheme, credentials)) = want.split_once(' ') else {
        return constant_time_eq(given, want.as_bytes());
    };
    let Some(space) = given.iter().position(|&b| b == b' ') else {
        return false;
    };
    let (given_scheme, rest) = given.split_at(space);
    let given_credentials = rest.trim_ascii_start();
    given_scheme.eq_ignore_ascii_case(scheme.as_bytes())
        & constant_time_eq(given_credentials, credentials.as_bytes())
}

pub(super) async fn webhook(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = std::time::Instant::now();
    let response = handle(&app, &headers, body).await;
    app.metrics.inc(
        "llm_doctor_webhook_requests_total",
        response.status().as_str(),
    );
    app.metrics.observe_seconds(started.elapsed().as_secs_f64());
    response
}

pub(super) async fn handle(app: &Arc<App>, headers: &HeaderMap, body: Body) -> Response {
    if !authorized(app, headers) {
        let mut r = answer(StatusCode::UNAUTHORIZED, json!({"error": "unauthorized"}));
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer, Basic realm=\"llm-doctor\""),
        );
        return r;
    }
    let limit = app.settings.max_body_bytes;
    let too_large = || {
        answer(
            StatusCode::PAYLOAD_TOO_LARGE,
            json!({"error": format!("body larger than {limit} bytes")}),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large();
    }
    // The body is read before a slot is taken, and within the request's deadline: a client
    // that sends its headers and then trickles (or never sends) the body holds no slot and is
    // answered 408 when the deadline passes.
    let deadline = app.settings.request_timeout;
    let bytes = match tokio::time::timeout(deadline, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(b)) => b,
        // Over the limit (a chunked body has no length to check first), or the client left.
        Ok(Err(_)) => return too_large(),
        Err(_) => {
            return answer(
                StatusCode::REQUEST_TIMEOUT,
                json!({"error": format!("the body did not arrive within {} ms", deadline.as_millis())}),
            )
        }
    };
    let busy = || {
        answer(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": format!("busy: {} requests in flight", app.settings.max_in_flight)}),
        )
    };
    let Some(mut permit) = wait_for_slot(app, bytes.len()).await else {
        return busy();
    };
    let (raw, group) = match payload::parse(&bytes) {
        Ok(p) => p,
        Err(reason) => {
            return answer(
                StatusCode::BAD_REQUEST,
                json!({"error": reason.to_string()}),
            )
        }
    };
    // Several receivers side by side: the one that owns this notification handles it. No slot
    // is held meanwhile: two receivers forwarding to each other must not wait on each other's.
    if let Some(peers) = &app.peers {
        let ahead = peers.ahead(headers, &group).await;
        if !ahead.is_empty() {
            drop(permit);
            if let Some(answered) = peers
                .forward(&app.client, &app.metrics, headers, &bytes, &group, &ahead)
                .await
            {
                return answered;
            }
            // None of them reachable: handled here.
            let Some(again) = wait_for_slot(app, bytes.len()).await else {
                return busy();
            };
            permit = again;
        }
    }
    let _permit = permit;
    for a in &group.alerts {
        app.metrics
            .inc("llm_doctor_alerts_received_total", &a.status);
    }
    let fingerprints: Vec<&str> = group
        .alerts
        .iter()
        .map(|a| a.fingerprint.as_str())
        .collect();
    if app.settings.ack == AckMode::OnReceipt {
        return enqueue(app, raw, group);
    }
    match tokio::time::timeout(app.settings.request_timeout, process(app, &raw, &group)).await {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!(
                group_key = ?group.group_key,
                fingerprints = ?fingerprints,
                "handling took longer than {} ms; answering 503 so Alertmanager resends",
                app.settings.request_timeout.as_millis()
            );
            answer(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": "timed out handling the notification"}),
            )
        }
    }
}

/// A slot among `max_in_flight`. When all are taken the request waits, up to the request's
/// deadline, while the bodies waiting total at most `max_in_flight` bodies of the largest size:
/// a burst (many alerts needing new triages at once) is served late instead of refused, and
/// what waits stays bounded. None: the queue is full or the deadline passed.
pub(super) async fn wait_for_slot(
    app: &Arc<App>,
    body_len: usize,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    if let Ok(p) = app.in_flight.clone().try_acquire_owned() {
        return Some(p);
    }
    // At least 1 KiB each: the request's own state costs memory too.
    let weight = u32::try_from(body_len.max(1024)).unwrap_or(u32::MAX);
    let _queued = app.queue_bytes.try_acquire_many(weight).ok()?;
    let wait = app.in_flight.clone().acquire_owned();
    tokio::time::timeout(app.settings.request_timeout, wait)
        .await
        .ok()?
        .ok()
}

pub(super) async fn process(
    app: &Arc<App>,
    raw: &serde_json::Value,
    group: &Notification,
) -> Response {
    let fingerprints: Vec<&str> = group
        .alerts
        .iter()
        .map(|a| a.fingerprint.as_str())
        .collect();
    let digest = app.deliveries.digest(group);
    // A concurrent resend of the same group waits here, then sees what this one delivered.
    let _claim = app.deliveries.claim(digest).await;
    let mut record = app.deliveries.get(digest);
    if record.all_accepted(app.settings.sinks.len()) {
        tracing::info!(
            group_key = ?group.group_key,
            fingerprints = ?fingerprints,
            "already delivered, answering 200"
        );
        return answer(StatusCode::OK, json!({"status": "duplicate"}));
    }

    let request_start = Instant::now();
    let outcomes = diagnose_group(app, group).await;
    let deadline = Instant::now() + app.settings.retry_deadline;
    let mut tasks = tokio::task::JoinSet::new();
    let bodies = bodies_to_send(app, raw, group, &outcomes, &mut record);
    app.deliveries.put(digest, record);
    for (i, sink, body) in bodies {
        let app = app.clone();
        tasks.spawn(async move {
            let retries = |name: &str| app.metrics.inc("llm_doctor_sink_retries_total", name);
            let r = sinks::deliver(
                &app.client,
                &sink,
                &body,
                app.settings.initial_backoff,
                deadline,
                Some(sinks::Breaker {
                    health: &app.sink_health,
                    sink: i,
                    request_start,
                }),
                || retries(&sink.name),
            )
            .await;
            (i, sink.name, r)
        });
    }
    let mut failed = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let Ok((i, name, result)) = joined else {
            continue;
        };
        match result {
            Ok(attempts) => {
                // Recorded at once: a request cut short by its deadline keeps what it achieved.
                record.accept(i);
                app.deliveries.put(digest, record);
                tracing::info!(
                    group_key = ?group.group_key,
                    fingerprints = ?fingerprints,
                    sink = %name,
                    attempts,
                    "delivered"
                );
            }
            Err(gave_up) => {
                app.metrics.inc("llm_doctor_sink_failures_total", &name);
                tracing::warn!(
                    group_key = ?group.group_key,
                    fingerprints = ?fingerprints,
                    sink = %name,
                    attempts = gave_up.attempts,
                    error = ?gave_up.last_error,
                    "sink did not accept the notification before the deadline; answering 503"
                );
                failed.push(json!({"sink": name, "error": gave_up.last_error}));
            }
        }
    }
    if failed.is_empty() {
        answer(StatusCode::OK, json!({"status": "delivered"}))
    } else {
        answer(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": "some sinks did not accept the notification", "failed": failed}),
        )
    }
}

/// `ack: on_receipt`: a group already delivered is answered 200, one already queued 202, a new
/// one is queued and answered 202, or 503 when the queue is full.
pub(super) fn enqueue(app: &Arc<App>, raw: serde_json::Value, group: Notification) -> Response {
    let digest = app.deliveries.digest(&group);
    // Claimed: a worker is delivering this very group right now.
    let Some(_claim) = app.deliveries.try_claim(digest) else {
        return answer(StatusCode::ACCEPTED, json!({"status": "queued"}));
    };
    let mut record = app.deliveries.get(digest);
    if record.all_accepted(app.settings.sinks.len()) {
        return answer(StatusCode::OK, json!({"status": "duplicate"}));
    }
    if record.queued {
        return answer(StatusCode::ACCEPTED, json!({"status": "queued"}));
    }
    let group_key = group.group_key.clone();
    if !app.queue.push(raw, group) {
        let capacity = app.queue.capacity();
        tracing::warn!(
            group_key = ?group_key,
            capacity,
            "delivery queue full; answering 503 so Alertmanager resends"
        );
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": format!("busy: the delivery queue holds {capacity} notifications not yet delivered")}),
        );
    }
    record.queued = true;
    app.deliveries.put(digest, record);
    answer(StatusCode::ACCEPTED, json!({"status": "queued"}))
}
