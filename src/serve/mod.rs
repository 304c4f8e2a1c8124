//! `llm-doctor serve`: an Alertmanager webhook receiver that diagnoses each firing alert against
//! Prometheus at the moment it started and hands the alert on, diagnosis attached, to the
//! configured sinks (a generic webhook, Slack, an Alertmanager).
//!
//! Nothing is lost: the receiver answers 2xx only once every sink accepted the notification,
//! retries a failing sink with backoff until `retry.deadline`, and otherwise answers 503 so
//! Alertmanager resends; once a sink is known to be failing, requests do not each wait out the
//! deadline against it ([`sink_health`]). Resends are deduplicated by (fingerprint, startsAt) for `dedupe_ttl`:
//! an alert is diagnosed once, a group already delivered is answered 200 at once, and a group
//! delivered to some sinks only is retried on the others. Dedupe state lives in memory: a
//! restart forgets it, which at worst repeats a notification.
//!
//! With `receiver.ack: on_receipt` the answer comes before all that: a notification that
//! passes authentication, validation and dedupe is put on a bounded in-memory queue
//! ([`queue`]) and answered 202 (503 when the queue is full); workers triage and deliver it,
//! retrying a failing sink until it accepts, and a shutdown drains the queue within
//! `receiver.shutdown_timeout`. What is still queued when the process dies is lost: Alertmanager
//! already had its 202.
//!
//! The triage itself ([`crate::source::live::prometheus`]) is blocking and builds its own runtime, so it runs on a
//! plain thread of its own, at most [`TRIAGE_SLOTS`] at once; alerts that need a triage already
//! running wait for its result without a slot.

pub mod bounded;
pub mod config;
pub mod deliveries;
pub mod listen;
pub mod log;
pub mod metrics;
pub mod payload;
pub mod queue;
pub mod sink_health;
pub mod sinks;
pub mod triage;
mod trim;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use self::bounded::AgedMap;
use self::config::{AckMode, Settings};
use self::deliveries::{Deliveries, Record};
use self::metrics::Metrics;
use self::payload::{Alert, Notification};
use self::triage::{Triage, TriageOutcome};
use crate::http::Trust;
use crate::rules::Rules;
use crate::source::live::prometheus::LiveOptions;

/// Triages running at once (each sends up to [`crate::source::live::prometheus::DEFAULT_CONCURRENCY`] queries).
pub const TRIAGE_SLOTS: usize = 8;

/// The server's shared state.
pub struct App {
    settings: Settings,
    triage: Arc<Triage>,
    client: reqwest::Client,
    prom_client: reqwest::Client,
    metrics: Metrics,
    in_flight: Arc<Semaphore>,
    /// Bytes of the bodies waiting for an `in_flight` slot.
    queue_bytes: Semaphore,
    triage_slots: Arc<Semaphore>,
    /// (fingerprint, startsAt) → diagnosis.
    diagnoses: Mutex<AgedMap<(String, String), Arc<TriageOutcome>>>,
    /// Which sinks accepted each group, and who is delivering one now.
    deliveries: Deliveries,
    /// Which sinks are failing (answers after delivery do not wait on them).
    sink_health: sink_health::SinkHealth,
    /// Notifications answered 202 and not yet delivered (`ack: on_receipt`).
    queue: queue::Queue,
    /// Whether the delivery workers run (started with the first router, inside a runtime).
    workers_started: AtomicBool,
}

impl App {
    /// The state for `settings`, diagnosing with `rules`.
    pub fn new(settings: Settings, rules: Arc<Rules>) -> Result<Arc<App>> {
        let slos = rules
            .playbook
            .slo_values(&Default::default())
            .map_err(anyhow::Error::msg)?;
        let live = LiveOptions {
            url: settings.prometheus_url.clone(),
            auth: settings.prometheus_auth.clone(),
            timeout: settings.prometheus_timeout,
            concurrency: crate::source::live::prometheus::DEFAULT_CONCURRENCY,
        };
        let triage = Triage {
            rules,
            slos,
            live,
            window_ms: settings.window.as_millis() as i64,
            step_ms: settings.triage_step.as_millis() as i64,
            target_labels: settings.target_labels.clone(),
            symptoms: settings.symptoms.clone(),
            results: triage::TriageCache::new(settings.dedupe_ttl),
        };
        let https = settings.sinks.iter().any(|s| s.url.starts_with("https:"));
        let client = crate::http::client(Trust::for_https(https))?;
        let prom_client = crate::http::client(Trust::for_https(
            settings.prometheus_url.starts_with("https:"),
        ))?;
        let queue_capacity = settings.queue_capacity;
        let dedupe_ttl = settings.dedupe_ttl;
        let sink_health =
            sink_health::SinkHealth::new(settings.sinks.len(), settings.initial_backoff);
        Ok(Arc::new(App {
            in_flight: Arc::new(Semaphore::new(settings.max_in_flight)),
            queue_bytes: Semaphore::new(
                settings
                    .max_in_flight
                    .saturating_mul(settings.max_body_bytes)
                    .min(Semaphore::MAX_PERMITS),
            ),
            triage_slots: Arc::new(Semaphore::new(TRIAGE_SLOTS)),
            settings,
            triage: Arc::new(triage),
            client,
            prom_client,
            metrics: Metrics::default(),
            diagnoses: Mutex::new(AgedMap::new(bounded::MAX_DIAGNOSES, dedupe_ttl)),
            deliveries: Deliveries::new(dedupe_ttl),
            sink_health,
            queue: queue::Queue::new(queue_capacity),
            workers_started: AtomicBool::new(false),
        }))
    }

    /// The configuration it runs on.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}

/// The HTTP routes: `POST /alertmanager`, `GET /healthz`, `GET /readyz`, `GET /metrics`.
///
/// With `ack: on_receipt`, the first call (which must be inside a Tokio runtime) also starts
/// the delivery workers.
pub fn router(app: Arc<App>) -> Router {
    if app.settings.ack == AckMode::OnReceipt && !app.workers_started.swap(true, Ordering::SeqCst) {
        start_workers(&app);
    }
    Router::new()
        .route("/alertmanager", post(webhook))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_page))
        .with_state(app)
}

/// Runs the server of configuration file `config` until SIGTERM or ctrl-c, then finishes the
/// requests in flight.
pub fn run(config: &Path, rules_dir: Option<&Path>) -> Result<()> {
    trim::limit_arenas();
    let rules = crate::rules::load_rules(rules_dir)?;
    let ids = rules.playbook.symptom_ids();
    let settings = config::load(config, &ids)?;
    let listen = settings.listen;
    let app = App::new(settings, Arc::new(rules))?;
    let runtime = crate::http::server_runtime()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        tracing::info!(
            listen = %listener.local_addr().map_or(listen, |a| a),
            prometheus = %app.settings.prometheus_url,
            sinks = app.settings.sinks.len(),
            "llm-doctor serve is listening (ready once Prometheus answers: see /readyz)"
        );
        // A signal starts a graceful shutdown; connections that do not finish within
        // receiver.shutdown_timeout (a client that never completes its request) are dropped.
        let grace = app.settings.shutdown_timeout;
        let header_timeout = app.settings.header_timeout;
        trim::spawn();
        let signalled = Arc::new(tokio::sync::Notify::new());
        let notify = signalled.clone();
        let signalled_at = Arc::new(std::sync::OnceLock::new());
        let at = signalled_at.clone();
        let server = listen::serve(listener, router(app.clone()), header_timeout, async move {
            shutdown_signal().await;
            let _ = at.set(Instant::now());
            notify.notify_one();
        });
        tokio::select! {
            () = server => {
                tracing::info!("llm-doctor serve stopped after finishing the requests in flight");
            }
            () = async {
                signalled.notified().await;
                tokio::time::sleep(grace).await;
            } => {
                tracing::warn!(
                    "llm-doctor serve stopped: connections still open after {} ms were dropped",
                    grace.as_millis()
                );
            }
        }
        if app.settings.ack == AckMode::OnReceipt {
            let since = signalled_at.get().copied().unwrap_or_else(Instant::now);
            drain(&app, since + grace).await;
        }
        Ok(())
    })
}

/// `ack: on_receipt`: waits, until `deadline`, for the workers to deliver what is queued, and
/// says what is left undelivered (lost when the process exits).
async fn drain(app: &App, deadline: Instant) {
    let depth = app.queue.depth().items;
    if depth > 0 {
        tracing::info!(
            queued = depth,
            "delivering the queued notifications before exiting"
        );
    }
    if app.queue.drain(deadline).await {
        tracing::info!(queued = 0, "every queued notification was delivered");
        return;
    }
    let left = app.queue.undelivered();
    tracing::error!(
        undelivered = app.queue.depth().items,
        fingerprints = ?left,
        shutdown_timeout_ms = app.settings.shutdown_timeout.as_millis() as u64,
        "notifications answered 202 were not delivered before the shutdown timeout and are lost"
    );
}

/// Resolves on ctrl-c or SIGTERM.
pub async fn shutdown_signal() {
    crate::http::stop_signal().await;
    tracing::info!("shutting down: finishing the requests in flight");
}

fn answer(code: StatusCode, body: serde_json::Value) -> Response {
    (code, Json(body)).into_response()
}

/// Compares without an early exit, so the time taken does not reveal how much of a secret
/// matched (the length still shows).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn authorized(app: &App, headers: &HeaderMap) -> bool {
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
fn same_credential(given: &[u8], want: &str) -> bool {
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

async fn webhook(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    let started = std::time::Instant::now();
    let response = handle(&app, &headers, body).await;
    app.metrics.inc(
        "llm_doctor_webhook_requests_total",
        response.status().as_str(),
    );
    app.metrics.observe_seconds(started.elapsed().as_secs_f64());
    response
}

async fn handle(app: &Arc<App>, headers: &HeaderMap, body: Body) -> Response {
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
    let Some(_permit) = wait_for_slot(app, bytes.len()).await else {
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": format!("busy: {} requests in flight", app.settings.max_in_flight)}),
        );
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
async fn wait_for_slot(
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

async fn process(app: &Arc<App>, raw: &serde_json::Value, group: &Notification) -> Response {
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

/// What each sink that has not accepted the group yet is to receive: (index, sink, body).
/// Sinks with nothing to send count as done.
fn bodies_to_send(
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

/// `ack: on_receipt`: a group already delivered is answered 200, one already queued 202, a new
/// one is queued and answered 202, or 503 when the queue is full.
fn enqueue(app: &Arc<App>, raw: serde_json::Value, group: Notification) -> Response {
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

/// Delivery workers for `ack: on_receipt`, as many as `max_in_flight`: each takes a queued
/// notification, triages it (on the bounded triage pool, [`TRIAGE_SLOTS`] at once) and
/// delivers it until every sink accepted.
fn start_workers(app: &Arc<App>) {
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
async fn deliver_queued(app: &Arc<App>, item: &queue::Item) {
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
const QUEUED_ROUND: Duration = Duration::from_secs(30);

/// Rounds of [`sinks::deliver`] (each within `retry.deadline` or [`QUEUED_ROUND`], the longer)
/// until `sink` accepts, waiting between rounds from `retry.initial_backoff` doubling to 30 s.
/// Returns the attempts made.
async fn deliver_until_accepted(app: &App, sink: &config::Sink, body: &serde_json::Value) -> u32 {
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

/// A diagnosis per alert: None for resolved alerts and for alerts this server already
/// diagnosed (labelled `diagnosed="true"`); cached by (fingerprint, startsAt).
async fn diagnose_group(app: &Arc<App>, group: &Notification) -> Vec<Option<Arc<TriageOutcome>>> {
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
async fn run_triage(app: &Arc<App>, plan: triage::TriagePlan) -> triage::TriageResult {
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

fn cached(app: &App, alert: &Alert) -> Option<Arc<TriageOutcome>> {
    let mut map = app.diagnoses.lock().unwrap_or_else(|e| e.into_inner());
    map.get(&alert.key(), std::time::Instant::now()).cloned()
}

async fn metrics_page(State(app): State<Arc<App>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        {
            let depth = app.queue.depth();
            let mut page = app.metrics.render();
            metrics::gauge(
                &mut page,
                "llm_doctor_queue_depth",
                "Notifications answered 202 and not yet delivered (receiver.ack: on_receipt).",
                depth.items as f64,
            );
            metrics::gauge(
                &mut page,
                "llm_doctor_queue_oldest_seconds",
                "Age of the oldest notification answered 202 and not yet delivered (0 when none).",
                depth.oldest.as_secs_f64(),
            );
            let failing: Vec<(&str, f64)> = app
                .settings
                .sinks
                .iter()
                .enumerate()
                .map(|(i, sink)| {
                    let secs = app.sink_health.failing_for(i).unwrap_or_default();
                    (sink.name.as_str(), secs.as_secs_f64())
                })
                .collect();
            metrics::labelled_gauge(
                &mut page,
                "llm_doctor_sink_failing_seconds",
                "How long each sink has been refusing deliveries (0 while it accepts them).",
                "sink",
                &failing,
            );
            page
        },
    )
        .into_response()
}

/// 200 when Prometheus answers `/-/ready`, or else an instant query; 503 otherwise.
async fn readyz(State(app): State<Arc<App>>) -> Response {
    let s = &app.settings;
    let timeout = s.prometheus_timeout.min(Duration::from_secs(5));
    let auth = |rb: reqwest::RequestBuilder| {
        let rb = rb.timeout(timeout);
        let rb = match &s.prometheus_auth.bearer {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        };
        match &s.prometheus_auth.basic {
            Some((u, p)) => rb.basic_auth(u, Some(p)),
            None => rb,
        }
    };
    let ready = auth(app.prom_client.get(format!("{}/-/ready", s.prometheus_url)))
        .send()
        .await;
    if ready.as_ref().is_ok_and(|r| r.status().is_success()) {
        return (StatusCode::OK, "ready\n").into_response();
    }
    let query = auth(
        app.prom_client
            .get(format!("{}/api/v1/query?query=1", s.prometheus_url)),
    )
    .send()
    .await;
    match query {
        Ok(r) if r.status().is_success() => (StatusCode::OK, "ready\n").into_response(),
        Ok(r) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Prometheus at {} answered HTTP {}\n",
                s.prometheus_url,
                r.status()
            ),
        )
            .into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Prometheus at {} is unreachable: {e}\n", s.prometheus_url),
        )
            .into_response(),
    }
}
