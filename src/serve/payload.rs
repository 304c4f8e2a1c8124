//! Alertmanager's webhook payload, version 4. The payload is kept as JSON as received, so the
//! generic webhook sink hands on every field (including ones a later Alertmanager adds); the
//! typed view here reads only what the receiver needs.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The fields of a notification the receiver reads.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    /// Payload version; only "4" is accepted.
    pub version: String,
    /// Identifies the group across redeliveries.
    #[serde(default)]
    pub group_key: String,
    /// The alerts.
    pub alerts: Vec<Alert>,
}

impl Notification {
    /// Its identity: the group key and each alert's fingerprint, start and status, sorted.
    /// Delivery records are keyed by it, and peers choose its owner by it.
    pub fn identity(&self) -> String {
        let mut alerts: Vec<String> = self
            .alerts
            .iter()
            .map(|a| format!("{}|{}|{}", a.fingerprint, a.starts_at, a.status))
            .collect();
        alerts.sort();
        format!("{}\n{}", self.group_key, alerts.join("\n"))
    }
}

/// One alert.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Alert {
    /// `firing` or `resolved`.
    pub status: String,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// RFC 3339.
    pub starts_at: String,
    /// RFC 3339 (`0001-01-01T00:00:00Z` while firing).
    #[serde(default)]
    pub ends_at: String,
    /// Link to the expression.
    #[serde(default, rename = "generatorURL")]
    pub generator_url: String,
    /// Alertmanager's id of the label set.
    #[serde(default)]
    pub fingerprint: String,
}

impl Alert {
    /// Whether the alert is firing (anything else, `resolved` included, is passed through).
    pub fn is_firing(&self) -> bool {
        self.status == "firing"
    }

    /// The dedupe identity of this alert occurrence.
    pub fn key(&self) -> (String, String) {
        (self.fingerprint.clone(), self.starts_at.clone())
    }
}

/// Why a body is not a notification, in words fit for a 400 answer.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// Not JSON.
    #[error("malformed JSON: {0}")]
    Json(serde_json::Error),
    /// JSON, not an object.
    #[error("malformed payload: expected a JSON object")]
    NotAnObject,
    /// An object without the webhook's fields.
    #[error("not an Alertmanager webhook payload: {0}")]
    NotWebhook(serde_json::Error),
    /// A version this receiver does not read.
    #[error("unsupported payload version `{0}` (expected \"4\")")]
    Version(String),
}

/// Parses a body: the raw JSON (kept for the webhook sink) and the typed view.
pub fn parse(body: &[u8]) -> Result<(Value, Notification), PayloadError> {
    let raw: Value = serde_json::from_slice(body).map_err(PayloadError::Json)?;
    if !raw.is_object() {
        return Err(PayloadError::NotAnObject);
    }
    let n: Notification = serde_json::from_value(raw.clone()).map_err(PayloadError::NotWebhook)?;
    if n.version != "4" {
        return Err(PayloadError::Version(n.version));
    }
    Ok((raw, n))
}
