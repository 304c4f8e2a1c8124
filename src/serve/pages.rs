//! `GET /metrics` and `GET /readyz`.

use super::app::App;
use super::metrics;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn metrics_page(State(app): State<Arc<App>>) -> Response {
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
pub(super) async fn readyz(State(app): State<Arc<App>>) -> Response {
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
