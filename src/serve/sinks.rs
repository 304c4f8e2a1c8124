//! What each sink receives for one incoming group, and delivering it: a POST that counts as
//! accepted only on 2xx, retried with exponential backoff until a deadline. Sink URLs come
//! from the configuration only, never from a payload.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::config::{Sink, SinkKind};
use super::payload::{Alert, Notification};
use super::sink_health::SinkHealth;
use super::triage::TriageOutcome;

/// The label put on alerts this server re-posts to Alertmanager; alerts carrying it are not
/// diagnosed again nor re-posted (no loop when the same Alertmanager routes them back here).
pub const DIAGNOSED_LABEL: &str = "diagnosed";

/// One alert of the group with its diagnosis (None for resolved or already diagnosed alerts).
pub type Diagnosed<'a> = (&'a Alert, Option<&'a TriageOutcome>);

/// The body for `kind`; None when there is nothing to send (an Alertmanager sink and a group
/// of alerts that are all already diagnosed copies).
pub fn body(
    kind: SinkKind,
    raw: &Value,
    group: &Notification,
    alerts: &[Diagnosed],
) -> Option<Value> {
    match kind {
        SinkKind::Webhook => Some(webhook(raw, alerts)),
        SinkKind::Slack => Some(slack(group, alerts)),
        SinkKind::Alertmanager => alertmanager(alerts),
    }
}

/// The original payload with a `diagnosis` object in each diagnosed alert.
fn webhook(raw: &Value, alerts: &[Diagnosed]) -> Value {
    let mut out = raw.clone();
    if let Some(list) = out.get_mut("alerts").and_then(Value::as_array_mut) {
        for (item, (_, outcome)) in list.iter_mut().zip(alerts) {
            if let (Some(obj), Some(o)) = (item.as_object_mut(), outcome) {
                obj.insert("diagnosis".to_string(), o.json.clone());
            }
        }
    }
    out
}

/// A Slack incoming-webhook message: per alert, the symptom, the top causes with their evidence
/// on one line each, and the fix.
fn slack(group: &Notification, alerts: &[Diagnosed]) -> Value {
    let mut lines = Vec::new();
    for (alert, outcome) in alerts {
        let name = alert
            .labels
            .get("alertname")
            .map_or("alert", String::as_str);
        lines.push(format!("*[{}] {}*", alert.status.to_uppercase(), name));
        match outcome {
            None => {}
            Some(TriageOutcome {
                unavailable: Some(reason),
                ..
            }) => lines.push(format!("diagnosis unavailable: {reason}")),
            Some(TriageOutcome {
                summary: Some(s), ..
            }) => {
                lines.push(format!("{} · status {}", s.target, s.status));
                if let Some(sym) = &s.symptom {
                    lines.push(format!("symptom: {sym}"));
                }
                if s.causes.is_empty() {
                    lines.push("no cause found".to_string());
                }
                for (i, (id, title, evidence)) in s.causes.iter().enumerate() {
                    lines.push(format!("{}. `{id}` {title} — {evidence}", i + 1));
                }
                if let Some(fix) = &s.fix {
                    lines.push(format!("fix: {fix}"));
                }
            }
            Some(_) => {}
        }
    }
    if group.alerts.is_empty() {
        lines.push("(empty group)".to_string());
    }
    json!({"text": lines.join("\n")})
}

/// Alertmanager API v2 alerts: each alert with `diagnosed="true"` and the diagnosis as
/// annotations. Resolved alerts are sent with their `endsAt`, so the diagnosed copy resolves too.
fn alertmanager(alerts: &[Diagnosed]) -> Option<Value> {
    let list: Vec<Value> = alerts
        .iter()
        .filter(|(a, _)| a.labels.get(DIAGNOSED_LABEL).is_none_or(|v| v != "true"))
        .map(|(alert, outcome)| {
            let mut labels = alert.labels.clone();
            labels.insert(DIAGNOSED_LABEL.to_string(), "true".to_string());
            let mut annotations = alert.annotations.clone();
            match outcome {
                Some(TriageOutcome {
                    summary: Some(s), ..
                }) => {
                    let top = s.causes.first();
                    annotations.insert(
                        "llm_doctor_top_cause".to_string(),
                        top.map_or("none".to_string(), |c| c.0.clone()),
                    );
                    annotations.insert(
                        "llm_doctor_summary".to_string(),
                        match top {
                            Some((id, title, evidence)) => {
                                format!("{}: {id} ({title}): {evidence}", s.status)
                            }
                            None => format!("{}: no cause found", s.status),
                        },
                    );
                    annotations.insert(
                        "llm_doctor_fix".to_string(),
                        s.fix.clone().unwrap_or_else(|| "none".to_string()),
                    );
                }
                Some(TriageOutcome {
                    unavailable: Some(reason),
                    ..
                }) => {
                    annotations.insert(
                        "llm_doctor_summary".to_string(),
                        format!("diagnosis unavailable: {reason}"),
                    );
                }
                _ => {}
            }
            let mut v = json!({
                "labels": labels,
                "annotations": annotations,
                "startsAt": alert.starts_at,
            });
            if !alert.is_firing() && !alert.ends_at.is_empty() {
                v["endsAt"] = json!(alert.ends_at);
            }
            if !alert.generator_url.is_empty() {
                v["generatorURL"] = json!(alert.generator_url);
            }
            v
        })
        .collect();
    (!list.is_empty()).then_some(Value::Array(list))
}

/// Why a delivery failed for good.
#[derive(Debug, Clone)]
pub struct GaveUp {
    /// The last error.
    pub last_error: String,
    /// Attempts made.
    pub attempts: u32,
}

/// The breaker a request's delivery asks before each attempt.
pub struct Breaker<'a> {
    /// The breakers of all sinks.
    pub health: &'a SinkHealth,
    /// This sink's index.
    pub sink: usize,
    /// When the request started.
    pub request_start: Instant,
}

/// POSTs `body` to `sink` until it answers 2xx, waiting `initial_backoff`, then twice that,
/// and so on (at most 5 s between attempts), and giving up when the next attempt could not
/// start before `deadline`, or when `breaker` refuses it. `on_retry` is called before each
/// retry.
pub async fn deliver(
    client: &reqwest::Client,
    sink: &Sink,
    body: &Value,
    initial_backoff: Duration,
    deadline: Instant,
    breaker: Option<Breaker<'_>>,
    mut on_retry: impl FnMut(),
) -> Result<u32, GaveUp> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut backoff = initial_backoff;
    let mut attempts = 0;
    loop {
        let permit = match &breaker {
            None => None,
            Some(b) => match b.health.attempt(b.sink, b.request_start, attempts + 1) {
                Ok(permit) => Some(permit),
                Err(refused) => {
                    return Err(GaveUp {
                        last_error: refused.to_string(),
                        attempts,
                    })
                }
            },
        };
        attempts += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt = client
            .post(&sink.url)
            .header("content-type", "application/json")
            .body(bytes.clone())
            .timeout(left.max(Duration::from_millis(1)))
            .send()
            .await;
        let error = match attempt {
            Ok(r) if r.status().is_success() => {
                if let Some(p) = permit {
                    p.succeeded();
                }
                return Ok(attempts);
            }
            Ok(r) => format!("HTTP {}", r.status()),
            // Without the URL: a sink's path is often its secret (a Slack webhook's is).
            Err(e) => crate::http::error_chain(&e.without_url()),
        };
        if let Some(p) = permit {
            p.failed(&error);
        }
        if Instant::now() + backoff >= deadline {
            return Err(GaveUp {
                last_error: error,
                attempts,
            });
        }
        tracing::warn!(
            sink = %sink.name,
            attempt = attempts,
            error = ?error,
            retry_in_ms = backoff.as_millis() as u64,
            "sink refused the notification, retrying"
        );
        on_retry();
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
