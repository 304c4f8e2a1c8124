//! `serve --config FILE`: the YAML as written ([`ConfigFile`], strict: unknown keys are errors),
//! validated into the [`Settings`] the server runs on (durations parsed, files read, URLs
//! checked, symptom ids resolved against the playbook). Every problem is reported at once, each
//! naming the file and the field.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::source::live::prometheus::PromAuth;

/// The configuration file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Address to listen on, `HOST:PORT`.
    pub listen: String,
    /// The Prometheus-compatible API the triage queries.
    pub prometheus: PrometheusSpec,
    /// How incoming webhooks are accepted.
    #[serde(default)]
    pub receiver: ReceiverSpec,
    /// Diagnosis window ending at the alert's `startsAt` (Prometheus duration).
    #[serde(default)]
    pub window: Option<String>,
    /// `alertname` → symptom id.
    #[serde(default)]
    pub symptoms: BTreeMap<String, String>,
    /// Alert labels that form the selector.
    #[serde(default)]
    pub target_labels: Option<Vec<String>>,
    /// Where diagnosed notifications go.
    pub sinks: Vec<SinkSpec>,
    /// Retrying failing sinks.
    #[serde(default)]
    pub retry: RetrySpec,
    /// How long a delivered (fingerprint, startsAt) is remembered (Prometheus duration).
    #[serde(default)]
    pub dedupe_ttl: Option<String>,
    /// startsAt is rounded down to a multiple of this before the triage (Prometheus duration,
    /// default 15s): alerts on one target within one step share one diagnosis.
    #[serde(default)]
    pub triage_step: Option<String>,
    /// The receivers that run side by side behind one address (see `serve::peers`).
    #[serde(default)]
    pub peers: Option<PeersSpec>,
}

/// `peers:`: every receiver of the group, this one included, as URLs or a DNS name.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeersSpec {
    /// The receivers' base URLs (`http://10.0.0.7:9095`).
    pub urls: Option<Vec<String>>,
    /// Or `HOST:PORT` whose addresses are the receivers (a Kubernetes headless Service),
    /// resolved again every few seconds.
    pub dns: Option<String>,
    /// This receiver's own base URL among them (`serve --advertise` overrides it).
    #[serde(rename = "self")]
    pub self_url: Option<String>,
    /// How long forwarding a notification to its owner may take (default: `receiver.timeout`).
    pub timeout: Option<String>,
}

/// `prometheus:`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrometheusSpec {
    /// Base URL (`http://prom:9090`, or with a path prefix).
    pub url: String,
    /// Bearer token.
    pub bearer_token: Option<String>,
    /// File holding the bearer token.
    pub bearer_token_file: Option<String>,
    /// Basic authentication.
    pub basic_auth: Option<BasicAuthSpec>,
    /// Per-query timeout (Prometheus duration, default 10s).
    pub timeout: Option<String>,
}

/// `basic_auth:` (Prometheus' own shape).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicAuthSpec {
    /// User name.
    pub username: String,
    /// Password.
    pub password: Option<String>,
    /// File holding the password.
    pub password_file: Option<String>,
}

/// `receiver:`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiverSpec {
    /// Required `Authorization: Bearer` token.
    pub bearer_token: Option<String>,
    /// File holding the required bearer token.
    pub bearer_token_file: Option<String>,
    /// Required basic authentication.
    pub basic_auth: Option<BasicAuthSpec>,
    /// Largest accepted body in bytes (default 1 MiB).
    pub max_body_bytes: Option<usize>,
    /// Limit for handling one request (default 30s).
    pub timeout: Option<String>,
    /// Most webhook requests handled at once (default 64); more are answered 503.
    pub max_in_flight: Option<usize>,
    /// How long a shutdown waits for open connections before it exits anyway (default 10s).
    pub shutdown_timeout: Option<String>,
    /// How long a client may take to send a request's headers (default 10s); then the
    /// connection is closed. Also how long an idle kept-alive connection stays open.
    pub header_timeout: Option<String>,
    /// When a webhook is answered: `after_delivery` (default) or `on_receipt`.
    pub ack: Option<AckMode>,
    /// Notifications accepted but not yet delivered, at most (`on_receipt` only; default
    /// 4096); more are answered 503.
    pub queue_capacity: Option<usize>,
}

/// `receiver.ack`: when Alertmanager gets its 2xx.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AckMode {
    /// Once every sink accepted the notification (nothing is lost; slow under a slow sink).
    #[default]
    AfterDelivery,
    /// As soon as the notification is queued in memory (202): fast, but what is queued is lost
    /// if the process dies.
    OnReceipt,
}

/// One sink.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, tag = "type", rename_all = "snake_case")]
pub enum SinkSpec {
    /// The original payload with a `diagnosis` per alert.
    Webhook {
        /// Where to POST.
        url: String,
    },
    /// A Slack-compatible incoming webhook (`{"text": ...}`).
    Slack {
        /// Where to POST.
        url: String,
    },
    /// An Alertmanager: the diagnosed alerts go to its `POST /api/v2/alerts`.
    Alertmanager {
        /// Alertmanager's base URL.
        url: String,
    },
}

/// `retry:`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// Give up on a sink after this long and answer 503 (default 30s).
    pub deadline: Option<String>,
    /// First wait between attempts, doubled each time (default 200ms).
    pub initial_backoff: Option<String>,
}

/// What kind of sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SinkKind {
    /// Generic webhook.
    Webhook,
    /// Slack-compatible.
    Slack,
    /// Alertmanager API.
    Alertmanager,
}

impl SinkKind {
    /// Lowercase name, as in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            SinkKind::Webhook => "webhook",
            SinkKind::Slack => "slack",
            SinkKind::Alertmanager => "alertmanager",
        }
    }
}

/// One validated sink.
#[derive(Debug, Clone)]
pub struct Sink {
    /// Kind.
    pub kind: SinkKind,
    /// Where to POST (for Alertmanager, the full `/api/v2/alerts` URL).
    pub url: String,
    /// `kind[index]`, for logs and metrics.
    pub name: String,
}

/// Receiver credentials.
#[derive(Clone, Default)]
pub struct ReceiverAuth {
    /// The exact `Authorization` header values accepted (`Bearer T`, `Basic B64`).
    pub accepted: Vec<String>,
}

impl std::fmt::Debug for ReceiverAuth {
    // Never print secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReceiverAuth({} credentials)", self.accepted.len())
    }
}

/// The validated configuration the server runs on.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Listen address.
    pub listen: SocketAddr,
    /// Prometheus base URL.
    pub prometheus_url: String,
    /// Prometheus credentials.
    pub prometheus_auth: PromAuth,
    /// Per-query timeout.
    pub prometheus_timeout: Duration,
    /// Receiver credentials (none: open).
    pub auth: ReceiverAuth,
    /// Largest body.
    pub max_body_bytes: usize,
    /// Per-request limit.
    pub request_timeout: Duration,
    /// How long a shutdown waits for open connections.
    pub shutdown_timeout: Duration,
    /// Deadline for a request's headers.
    pub header_timeout: Duration,
    /// Most requests at once.
    pub max_in_flight: usize,
    /// Diagnosis window.
    pub window: Duration,
    /// alertname → symptom id.
    pub symptoms: BTreeMap<String, String>,
    /// Labels forming the selector.
    pub target_labels: Vec<String>,
    /// Sinks, in configuration order.
    pub sinks: Vec<Sink>,
    /// Retry deadline.
    pub retry_deadline: Duration,
    /// First backoff.
    pub initial_backoff: Duration,
    /// Dedupe memory.
    pub dedupe_ttl: Duration,
    /// What a triage's time is rounded down to.
    pub triage_step: Duration,
    /// When a webhook is answered.
    pub ack: AckMode,
    /// Most notifications accepted and not yet delivered (`on_receipt`).
    pub queue_capacity: usize,
    /// The receivers side by side, when several.
    pub peers: Option<PeerSettings>,
}

/// Where the receivers of a group are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerList {
    /// Base URLs, as given.
    Urls(Vec<String>),
    /// A name whose addresses are the receivers, and their port.
    Dns {
        /// Host name.
        host: String,
        /// Port.
        port: u16,
    },
}

/// The validated `peers:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSettings {
    /// The receivers.
    pub list: PeerList,
    /// This receiver's base URL among them.
    pub self_url: String,
    /// Limit for forwarding one notification.
    pub timeout: Duration,
}

/// The label an alert may carry to name its symptom.
pub const SYMPTOM_LABEL: &str = "llm_doctor_symptom";

/// Default selector labels.
pub const DEFAULT_TARGET_LABELS: &[&str] = &["namespace", "pod", "instance", "model_name", "job"];

/// Reads and validates `path`; `symptom_ids` are the playbook's symptoms; `advertise`, when
/// given, is this receiver's URL among its peers (`serve --advertise`, over `peers.self`).
pub fn load(path: &Path, symptom_ids: &[&str], advertise: Option<&str>) -> Result<Settings> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading `{}`", path.display()))?;
    let file = path.display().to_string();
    let mut spec = read(&text, &file)?;
    if let Some(url) = advertise {
        match spec.peers.as_mut() {
            Some(peers) => peers.self_url = Some(url.to_string()),
            None => {
                bail!("--advertise names this receiver among its peers: `{file}` has no `peers:`")
            }
        }
    }
    validate(spec, &file, symptom_ids)
}

/// Parses and validates configuration `text`; `file` names it in errors.
pub fn parse(text: &str, file: &str, symptom_ids: &[&str]) -> Result<Settings> {
    validate(read(text, file)?, file, symptom_ids)
}

/// The configuration as written, or why it does not read.
fn read(text: &str, file: &str) -> Result<ConfigFile> {
    llm_doctor_engine::yaml_guard::check_depth(text).map_err(|e| anyhow::anyhow!("{file}:{e}"))?;
    serde_yaml::from_str(text).map_err(|e| anyhow::anyhow!("{file}: {e}"))
}

// Long on purpose: one section of the configuration after another, each through the same
// Problems collector, so every mistake in a file is reported in one run.
fn validate(spec: ConfigFile, file: &str, symptom_ids: &[&str]) -> Result<Settings> {
    let mut p = Problems {
        file,
        list: Vec::new(),
    };
    let listen = match spec.listen.parse::<SocketAddr>() {
        Ok(a) => a,
        Err(e) => {
            p.add(
                "listen",
                format!("`{}` is not HOST:PORT ({e})", spec.listen),
            );
            SocketAddr::from(([127, 0, 0, 1], 0))
        }
    };
    let prometheus_timeout = p.duration("prometheus.timeout", &spec.prometheus.timeout, 10_000);
    let request_timeout = p.duration("receiver.timeout", &spec.receiver.timeout, 30_000);
    let shutdown_timeout = p.duration(
        "receiver.shutdown_timeout",
        &spec.receiver.shutdown_timeout,
        10_000,
    );
    let header_timeout = p.duration(
        "receiver.header_timeout",
        &spec.receiver.header_timeout,
        10_000,
    );
    let window = p.duration("window", &spec.window, 300_000);
    let retry_deadline = p.duration("retry.deadline", &spec.retry.deadline, 30_000);
    let initial_backoff = p.duration("retry.initial_backoff", &spec.retry.initial_backoff, 200);
    let dedupe_ttl = p.duration("dedupe_ttl", &spec.dedupe_ttl, 3_600_000);
    let triage_step = p.duration("triage_step", &spec.triage_step, 15_000);
    p.url("prometheus.url", &spec.prometheus.url);
    let sinks = sinks(&mut p, &spec.sinks);

    let prom_bearer = p.secret(
        "prometheus.bearer_token",
        &spec.prometheus.bearer_token,
        &spec.prometheus.bearer_token_file,
    );
    let prom_basic = p.basic("prometheus.basic_auth", &spec.prometheus.basic_auth);
    // Credentials in the URL become basic auth, so the URL can be logged and shown.
    let (prometheus_url, url_basic) = crate::source::live::prometheus::split_credentials(
        spec.prometheus.url.trim_end_matches('/'),
    );
    if url_basic.is_some() && prom_basic.is_some() {
        p.add(
            "prometheus.url",
            "carries a user and password and `basic_auth` is set too: keep one".to_string(),
        );
    }
    let prom_basic = prom_basic.or(url_basic);
    let accepted = receiver_credentials(&mut p, &spec.receiver);

    let max_body_bytes = spec.receiver.max_body_bytes.unwrap_or(1 << 20);
    if max_body_bytes == 0 {
        p.add(
            "receiver.max_body_bytes",
            "must be more than zero".to_string(),
        );
    }
    let max_in_flight = spec.receiver.max_in_flight.unwrap_or(64);
    if max_in_flight == 0 {
        p.add(
            "receiver.max_in_flight",
            "must be more than zero".to_string(),
        );
    }
    for (alertname, id) in &spec.symptoms {
        if !symptom_ids.contains(&id.as_str()) {
            let hint = llm_doctor_engine::suggest::hint(id, symptom_ids.iter().copied());
            p.add(
                &format!("symptoms.{alertname}"),
                format!("unknown symptom `{id}`{hint}"),
            );
        }
    }
    let queue_capacity = spec.receiver.queue_capacity.unwrap_or(4096);
    if queue_capacity == 0 {
        p.add(
            "receiver.queue_capacity",
            "must be more than zero".to_string(),
        );
    }
    let target_labels = target_labels(&mut p, spec.target_labels);
    let peers = spec
        .peers
        .as_ref()
        .and_then(|peers| peer_settings(&mut p, peers, request_timeout));
    if !p.list.is_empty() {
        bail!("invalid configuration:\n  {}", p.list.join("\n  "));
    }
    Ok(Settings {
        listen,
        prometheus_url,
        prometheus_auth: PromAuth {
            bearer: prom_bearer,
            basic: prom_basic,
            headers: Vec::new(),
            ca_file: None,
        },
        prometheus_timeout,
        auth: ReceiverAuth { accepted },
        max_body_bytes,
        request_timeout,
        shutdown_timeout,
        header_timeout,
        max_in_flight,
        window,
        symptoms: spec.symptoms,
        target_labels,
        sinks,
        retry_deadline,
        initial_backoff,
        dedupe_ttl,
        triage_step,
        ack: spec.receiver.ack.unwrap_or_default(),
        queue_capacity,
        peers,
    })
}

/// `peers:` checked: URLs or a DNS name (one of them), and this receiver's own URL.
fn peer_settings(
    p: &mut Problems<'_>,
    spec: &PeersSpec,
    request_timeout: Duration,
) -> Option<PeerSettings> {
    let timeout = match &spec.timeout {
        Some(_) => p.duration("peers.timeout", &spec.timeout, 0),
        None => request_timeout,
    };
    let list = match (&spec.urls, &spec.dns) {
        (Some(urls), None) => {
            for (i, u) in urls.iter().enumerate() {
                p.url(&format!("peers.urls[{i}]"), u);
            }
            if urls.is_empty() {
                p.add("peers.urls", "is empty".to_string());
            }
            PeerList::Urls(urls.iter().map(|u| base_url(u)).collect())
        }
        (None, Some(dns)) => match dns
            .rsplit_once(':')
            .map(|(h, port)| (h, port.parse::<u16>()))
        {
            Some((host, Ok(port))) if !host.is_empty() => PeerList::Dns {
                host: host.to_string(),
                port,
            },
            _ => {
                p.add("peers.dns", format!("`{dns}` is not HOST:PORT"));
                return None;
            }
        },
        _ => {
            p.add("peers", "give `urls` or `dns`, one of them".to_string());
            return None;
        }
    };
    let Some(self_url) = &spec.self_url else {
        p.add(
            "peers.self",
            "this receiver's own URL among its peers is needed (or `serve --advertise URL`)"
                .to_string(),
        );
        return None;
    };
    p.url("peers.self", self_url);
    Some(PeerSettings {
        list,
        self_url: base_url(self_url),
        timeout,
    })
}

/// A base URL as peers are compared: without a trailing slash.
pub fn base_url(u: &str) -> String {
    u.trim_end_matches('/').to_string()
}

/// Every problem in a configuration file, in the order found, each naming the file and field.
struct Problems<'a> {
    file: &'a str,
    list: Vec<String>,
}

impl Problems<'_> {
    fn add(&mut self, field: &str, msg: String) {
        self.list.push(format!("{}: `{field}`: {msg}", self.file));
    }

    /// A Prometheus duration longer than zero, or `default_ms` when absent (or wrong).
    fn duration(&mut self, field: &str, v: &Option<String>, default_ms: i64) -> Duration {
        let Some(s) = v else {
            return Duration::from_millis(default_ms as u64);
        };
        match crate::time::parse_duration(s) {
            Ok(ms) if ms > 0 => Duration::from_millis(ms as u64),
            Ok(_) => {
                self.add(field, format!("must be longer than zero, got `{s}`"));
                Duration::from_millis(default_ms as u64)
            }
            Err(e) => {
                self.add(field, e.to_string());
                Duration::from_millis(default_ms as u64)
            }
        }
    }

    /// An http or https URL.
    fn url(&mut self, field: &str, u: &str) {
        match reqwest::Url::parse(u) {
            Ok(p) if matches!(p.scheme(), "http" | "https") => {}
            Ok(p) => self.add(
                field,
                format!("`{u}`: scheme `{}` is not http or https", p.scheme()),
            ),
            Err(e) => self.add(field, format!("`{u}` is not a URL ({e})")),
        }
    }

    /// A secret given inline or as `<field>_file`, not both.
    fn secret(
        &mut self,
        field: &str,
        inline: &Option<String>,
        from_file: &Option<String>,
    ) -> Option<String> {
        match (inline, from_file) {
            (Some(_), Some(_)) => {
                self.add(field, "give the value or the `_file`, not both".to_string());
                None
            }
            (Some(v), None) => Some(v.clone()),
            (None, Some(f)) => match std::fs::read_to_string(f) {
                Ok(s) => Some(s.trim().to_string()),
                Err(e) => {
                    self.add(&format!("{field}_file"), format!("cannot read `{f}`: {e}"));
                    None
                }
            },
            (None, None) => None,
        }
    }

    /// A user and password (the password inline or from a file).
    fn basic(&mut self, field: &str, b: &Option<BasicAuthSpec>) -> Option<(String, String)> {
        let b = b.as_ref()?;
        let pass = self.secret(&format!("{field}.password"), &b.password, &b.password_file);
        match pass {
            Some(p) => Some((b.username.clone(), p)),
            None if b.password.is_none() && b.password_file.is_none() => {
                self.add(field, "needs `password` or `password_file`".to_string());
                None
            }
            None => None,
        }
    }
}

/// The sinks, each URL checked; Alertmanager's gets its API path.
fn sinks(p: &mut Problems<'_>, specs: &[SinkSpec]) -> Vec<Sink> {
    let sinks: Vec<Sink> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (kind, u) = match s {
                SinkSpec::Webhook { url } => (SinkKind::Webhook, url),
                SinkSpec::Slack { url } => (SinkKind::Slack, url),
                SinkSpec::Alertmanager { url } => (SinkKind::Alertmanager, url),
            };
            p.url(&format!("sinks[{i}].url"), u);
            let full = match kind {
                SinkKind::Alertmanager => format!("{}/api/v2/alerts", u.trim_end_matches('/')),
                _ => u.clone(),
            };
            Sink {
                kind,
                url: full,
                name: format!("{}[{i}]", kind.as_str()),
            }
        })
        .collect();
    if sinks.is_empty() {
        p.add("sinks", "at least one sink is needed".to_string());
    }
    // Delivery records keep one bit per sink (they are fixed-size: see `deliveries`).
    if sinks.len() > super::deliveries::MAX_SINKS {
        p.add(
            "sinks",
            format!(
                "{} sinks given, at most {} are supported (one webhook sink can fan out further)",
                sinks.len(),
                super::deliveries::MAX_SINKS
            ),
        );
    }
    sinks
}

/// The `Authorization` values the receiver accepts.
fn receiver_credentials(p: &mut Problems<'_>, receiver: &ReceiverSpec) -> Vec<String> {
    let bearer = p.secret(
        "receiver.bearer_token",
        &receiver.bearer_token,
        &receiver.bearer_token_file,
    );
    let basic = p.basic("receiver.basic_auth", &receiver.basic_auth);
    let mut accepted = Vec::new();
    if let Some(t) = bearer {
        if t.is_empty() {
            p.add("receiver.bearer_token", "is empty".to_string());
        }
        accepted.push(format!("Bearer {t}"));
    }
    if let Some((u, pass)) = basic {
        accepted.push(format!(
            "Basic {}",
            base64(format!("{u}:{pass}").as_bytes())
        ));
    }
    accepted
}

/// `target_labels`, each a label name, or the defaults.
fn target_labels(p: &mut Problems<'_>, labels: Option<Vec<String>>) -> Vec<String> {
    match labels {
        Some(l) if l.is_empty() => {
            p.add("target_labels", "needs at least one label".to_string());
            Vec::new()
        }
        Some(l) => {
            for name in &l {
                let ok = name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !ok {
                    p.add("target_labels", format!("`{name}` is not a label name"));
                }
            }
            l
        }
        None => DEFAULT_TARGET_LABELS
            .iter()
            .map(|s| s.to_string())
            .collect(),
    }
}

/// Standard base64 with padding (for `Authorization: Basic`).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYMPTOMS: &[&str] = &["high_ttft", "high_tpot"];

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"user:pass"), "dXNlcjpwYXNz");
    }

    #[test]
    fn minimal_file_takes_defaults() {
        let s = parse(
            "listen: 127.0.0.1:9095\nprometheus:\n  url: http://127.0.0.1:9090\nsinks:\n  - type: webhook\n    url: http://127.0.0.1:8080/hook\n",
            "doctor.yaml",
            SYMPTOMS,
        )
        .unwrap();
        assert_eq!(s.max_body_bytes, 1 << 20);
        assert_eq!(s.request_timeout, Duration::from_secs(30));
        assert_eq!(s.max_in_flight, 64);
        assert_eq!(s.window, Duration::from_secs(300));
        assert_eq!(s.retry_deadline, Duration::from_secs(30));
        assert_eq!(s.initial_backoff, Duration::from_millis(200));
        assert_eq!(s.dedupe_ttl, Duration::from_secs(3600));
        assert_eq!(s.target_labels, DEFAULT_TARGET_LABELS);
        assert!(s.auth.accepted.is_empty());
        assert_eq!(s.ack, AckMode::AfterDelivery);
        assert_eq!(s.queue_capacity, 4096);
    }

    #[test]
    fn ack_mode_and_queue_capacity_are_read_and_checked() {
        let file = |receiver: &str| {
            format!("listen: 127.0.0.1:9095\nprometheus:\n  url: http://x\nreceiver:\n{receiver}sinks:\n  - type: webhook\n    url: http://y/hook\n")
        };
        let s = parse(
            &file("  ack: on_receipt\n  queue_capacity: 10\n"),
            "doctor.yaml",
            SYMPTOMS,
        )
        .unwrap();
        assert_eq!((s.ack, s.queue_capacity), (AckMode::OnReceipt, 10));
        let e = parse(&file("  ack: never\n"), "doctor.yaml", SYMPTOMS)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `never`"), "{e}");
        assert!(e.contains("on_receipt"), "{e}");
        let e = parse(&file("  queue_capacity: 0\n"), "doctor.yaml", SYMPTOMS)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`receiver.queue_capacity`"), "{e}");
    }

    #[test]
    fn more_sinks_than_a_delivery_record_tracks_are_refused() {
        let sinks = "  - type: webhook\n    url: http://y/hook\n".repeat(33);
        let file = format!("listen: 127.0.0.1:9095\nprometheus:\n  url: http://x\nsinks:\n{sinks}");
        let e = format!("{:#}", parse(&file, "doctor.yaml", SYMPTOMS).unwrap_err());
        assert!(
            e.contains("doctor.yaml: `sinks`: 33 sinks given, at most 32"),
            "{e}"
        );
    }

    #[test]
    fn unknown_field_names_the_file() {
        let e = parse(
            "listen: 127.0.0.1:9095\nprometheus:\n  url: http://x\n  tiemout: 5s\nsinks: []\n",
            "doctor.yaml",
            SYMPTOMS,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("doctor.yaml: "), "{e}");
        assert!(e.contains("unknown field `tiemout`"), "{e}");
    }

    #[test]
    fn every_error_is_reported_with_its_field() {
        let e = format!(
            "{:#}",
            parse(
                "listen: nowhere\nprometheus:\n  url: ftp://x\nwindow: 0s\nsymptoms:\n  HighTTFT: high_ttf\nsinks: []\nretry:\n  deadline: soon\n",
                "doctor.yaml",
                SYMPTOMS,
            )
            .unwrap_err()
        );
        for field in [
            "`listen`",
            "`prometheus.url`",
            "`window`",
            "`symptoms.HighTTFT`",
            "`sinks`",
            "`retry.deadline`",
        ] {
            assert!(
                e.contains(&format!("doctor.yaml: {field}")),
                "{field} missing in {e}"
            );
        }
        assert!(e.contains("did you mean `high_ttft`?"), "{e}");
    }
}
