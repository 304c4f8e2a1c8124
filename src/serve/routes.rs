//! The HTTP routes.

use super::app::App;
use super::config::AckMode;
use super::pages::{metrics_page, readyz};
use super::webhook::webhook;
use super::workers::start_workers;
use axum::routing::{get, post};
use axum::Router;
use std::sync::atomic::Ordering;
use std::sync::Arc;

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
