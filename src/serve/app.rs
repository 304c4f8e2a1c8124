//! The server's shared state: settings, the triage, HTTP clients, memories and the queue.

use super::bounded::AgedMap;
use super::config::Settings;
use super::deliveries::Deliveries;
use super::metrics::Metrics;
use super::triage::{Triage, TriageOutcome};
use super::{bounded, peers, queue, sink_health, triage};
use crate::http::Trust;
use crate::rules::Rules;
use crate::source::live::prometheus::LiveOptions;
use anyhow::Result;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// Triages running at once (each sends up to [`crate::source::live::prometheus::DEFAULT_CONCURRENCY`] queries).
pub const TRIAGE_SLOTS: usize = 8;

/// The server's shared state.
pub struct App {
    pub(super) settings: Settings,
    pub(super) triage: Arc<Triage>,
    pub(super) client: reqwest::Client,
    pub(super) prom_client: reqwest::Client,
    pub(super) metrics: Metrics,
    pub(super) in_flight: Arc<Semaphore>,
    /// Bytes of the bodies waiting for an `in_flight` slot.
    pub(super) queue_bytes: Semaphore,
    pub(super) triage_slots: Arc<Semaphore>,
    /// (fingerprint, startsAt) → diagnosis.
    pub(super) diagnoses: Mutex<AgedMap<(String, String), Arc<TriageOutcome>>>,
    /// Which sinks accepted each group, and who is delivering one now.
    pub(super) deliveries: Deliveries,
    /// Which sinks are failing (answers after delivery do not wait on them).
    pub(super) sink_health: sink_health::SinkHealth,
    /// Notifications answered 202 and not yet delivered (`ack: on_receipt`).
    pub(super) queue: queue::Queue,
    /// Whether the delivery workers run (started with the first router, inside a runtime).
    pub(super) workers_started: AtomicBool,
    /// The receivers side by side, when several.
    pub(super) peers: Option<peers::Peers>,
}

impl App {
    /// The state for `settings`, diagnosing with `rules`.
    pub fn new(settings: Settings, rules: Arc<Rules>) -> Result<Arc<App>> {
        let slos = rules.playbook.slo_values(&Default::default())?;
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
        let settings_peers = settings.peers.clone();
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
            peers: settings_peers.map(peers::Peers::new),
        }))
    }

    /// The configuration it runs on.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}
