//! Running the server: listen, serve until a signal, finish what is in flight, drain the queue.

use super::app::App;
use super::config::AckMode;
use super::routes::router;
use super::{config, listen, trim};
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::Arc;
use tokio::time::Instant;

/// Runs the server of configuration file `config` until SIGTERM or ctrl-c, then finishes the
/// requests in flight. `advertise` is this receiver's URL among its peers, when given.
pub fn run(config: &Path, rules_dir: Option<&Path>, advertise: Option<&str>) -> Result<()> {
    trim::limit_arenas();
    let rules = crate::rules::load_rules(rules_dir)?;
    let ids = rules.playbook.symptom_ids();
    let settings = config::load(config, &ids, advertise)?;
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
pub(super) async fn drain(app: &App, deadline: Instant) {
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
