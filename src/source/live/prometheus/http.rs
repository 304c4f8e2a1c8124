//! Talking to the API: where it is, how to authenticate, the HTTP client, and one instant
//! query sent with its own timeout.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use reqwest::header::HeaderMap;

use super::answer::{parse_answer, Answer, Failure};
use crate::http::{error_chain, Trust};

/// How to authenticate to Prometheus.
#[derive(Debug, Clone, Default)]
pub struct PromAuth {
    /// `Authorization: Bearer TOKEN`.
    pub bearer: Option<String>,
    /// HTTP basic authentication: user and password.
    pub basic: Option<(String, String)>,
    /// Extra headers sent with every query (`X-Scope-OrgID` for Mimir, say).
    pub headers: Vec<(String, String)>,
    /// A PEM file of CA certificates to trust instead of the system's (a private CA).
    pub ca_file: Option<PathBuf>,
}

/// Where Prometheus is and how to talk to it. What to diagnose (window, time, selector, engine,
/// facts) comes in [`crate::prepared::Options`], as for files.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// Base URL of the Prometheus-compatible API (`http://prom:9090`, or with a path prefix such
    /// as `http://mimir/prometheus`); `/api/v1/query` is appended.
    pub url: String,
    /// Credentials and extra headers.
    pub auth: PromAuth,
    /// Limit for one query, sent to the server as its `timeout` too.
    pub timeout: Duration,
    /// Most queries in flight at once.
    pub concurrency: usize,
}

impl LiveOptions {
    /// `url` with no authentication, a 10 s timeout and 16 queries in flight.
    pub fn new(url: impl Into<String>) -> LiveOptions {
        LiveOptions {
            url: url.into(),
            auth: PromAuth::default(),
            timeout: Duration::from_secs(10),
            concurrency: DEFAULT_CONCURRENCY,
        }
    }
}

/// Queries in flight at once by default: enough to hide latency, few enough not to queue
/// behind Prometheus' own `--query.max-concurrency` (20 by default).
pub const DEFAULT_CONCURRENCY: usize = 16;

/// An instant as the API takes it: Unix seconds with milliseconds (`1796083807.000`).
pub(super) fn api_seconds(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// Everything one query needs; cheap to clone (the client is shared).
#[derive(Clone)]
pub(super) struct Http {
    pub(super) client: reqwest::Client,
    pub(super) endpoint: reqwest::Url,
    pub(super) headers: HeaderMap,
    pub(super) auth: PromAuth,
    pub(super) timeout: Duration,
    /// The evaluation time, Unix seconds with milliseconds.
    pub(super) time: String,
}

impl Http {
    /// `as_series`: a vector answer's rows as series (see [`parse_answer`]).
    pub(super) async fn query(&self, promql: &str, as_series: bool) -> Result<Answer, Failure> {
        match tokio::time::timeout(self.timeout, self.send(promql, as_series)).await {
            Ok(r) => r,
            Err(_) => Err(Failure {
                unreachable: true,
                message: format!("no answer within {}", human(self.timeout)),
            }),
        }
    }

    pub(super) async fn send(&self, promql: &str, as_series: bool) -> Result<Answer, Failure> {
        let timeout = format!("{}ms", self.timeout.as_millis());
        let request = form_post(
            &self.client,
            &self.endpoint,
            &self.headers,
            &self.auth,
            &[
                ("query", promql),
                ("time", &self.time),
                ("timeout", &timeout),
            ],
        );
        let response = request.send().await.map_err(|e| Failure {
            unreachable: true,
            message: error_chain(&e),
        })?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = read_capped(response).await.map_err(|message| Failure {
            unreachable: false,
            message,
        })?;
        parse_answer(status.as_u16(), &content_type, &body, as_series)
    }
}

/// A form-encoded POST to the query API with the extra headers and the credentials; `pairs`
/// are the form's fields, in order.
pub(super) fn form_post(
    client: &reqwest::Client,
    endpoint: &reqwest::Url,
    headers: &HeaderMap,
    auth: &PromAuth,
    pairs: &[(&str, &str)],
) -> reqwest::RequestBuilder {
    let mut form = reqwest::Url::parse("http://form.invalid/").expect("a valid URL");
    form.query_pairs_mut().extend_pairs(pairs);
    let body = form.query().unwrap_or_default().to_string();
    let mut request = client
        .post(endpoint.clone())
        .headers(headers.clone())
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body);
    if let Some(token) = &auth.bearer {
        request = request.bearer_auth(token);
    }
    if let Some((user, password)) = &auth.basic {
        request = request.basic_auth(user, Some(password));
    }
    request
}

/// `URL/api/v1/query`, keeping a path prefix.
pub(super) fn query_endpoint(url: &str) -> Result<reqwest::Url> {
    let parsed = reqwest::Url::parse(url.trim()).map_err(|e| {
        anyhow::anyhow!(
            "--prometheus: invalid URL {url:?}: {e} (expected e.g. http://prometheus:9090)"
        )
    })?;
    if parsed.scheme() != "http" && parsed.scheme() != "https" {
        bail!(
            "--prometheus: unsupported URL scheme `{}` in {url:?}: use http:// or https://",
            parsed.scheme()
        );
    }
    let base = parsed.as_str().trim_end_matches('/');
    let base = base.split(['?', '#']).next().unwrap_or(base);
    reqwest::Url::parse(&format!("{base}/api/v1/query"))
        .map_err(|e| anyhow::anyhow!("--prometheus: invalid URL {url:?}: {e}"))
}

/// The HTTP client ([`crate::http::client`]), trusting the CA file's certificates alone when
/// one is given, the system's for other https URLs.
pub(super) fn client(live: &LiveOptions) -> Result<reqwest::Client> {
    let trust = match &live.auth.ca_file {
        Some(path) => Trust::CaFile(path),
        None => Trust::for_https(live.url.trim_start().starts_with("https:")),
    };
    Ok(crate::http::client(trust)?)
}

fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 || !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else {
        format!("{}s", ms / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::promql::{escape, regex_quote};
    use crate::source::live::prometheus::prepare::prom_duration;

    #[test]
    fn urls_durations_and_quoting() {
        assert_eq!(
            query_endpoint("http://prom:9090/").unwrap().as_str(),
            "http://prom:9090/api/v1/query"
        );
        assert_eq!(
            query_endpoint("https://mimir.example/prometheus")
                .unwrap()
                .as_str(),
            "https://mimir.example/prometheus/api/v1/query"
        );
        assert!(query_endpoint("ftp://x").is_err());
        assert!(query_endpoint("not a url").is_err());
        assert_eq!(prom_duration(300_000), "5m");
        assert_eq!(prom_duration(3_600_000), "1h");
        assert_eq!(prom_duration(90_000), "90s");
        assert_eq!(prom_duration(1500), "1500ms");
        assert_eq!(regex_quote("a.b:c"), "a\\.b:c");
        assert_eq!(escape("a\\.b\"c"), "a\\\\.b\\\"c");
    }
}

/// `url` without the user and password it may carry (`https://user:pw@prom/`), and them,
/// percent-decoded. Credentials never stay in a URL: URLs are printed in logs, errors and
/// `/readyz`, credentials must not be.
pub fn split_credentials(url: &str) -> (String, Option<(String, String)>) {
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        return (url.to_string(), None);
    };
    if parsed.username().is_empty() && parsed.password().is_none() {
        return (url.to_string(), None);
    }
    let user = percent_decode(parsed.username());
    let pass = percent_decode(parsed.password().unwrap_or(""));
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    let mut clean = parsed.to_string();
    // Url adds a `/` to a bare host; keep the caller's form.
    if !url.ends_with('/') && clean.ends_with('/') && parsed.path() == "/" {
        clean.pop();
    }
    (clean, Some((user, pass)))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod credential_tests {
    use super::split_credentials;

    #[test]
    fn credentials_leave_the_url() {
        assert_eq!(
            split_credentials("https://al%40ice:p%3Aw@prom.example:9090/prefix"),
            (
                "https://prom.example:9090/prefix".to_string(),
                Some(("al@ice".to_string(), "p:w".to_string()))
            )
        );
        assert_eq!(
            split_credentials("http://prom:9090"),
            ("http://prom:9090".to_string(), None)
        );
        assert_eq!(
            split_credentials("http://u:p@prom:9090").0,
            "http://prom:9090"
        );
    }
}

/// The largest answer read from a Prometheus API: `LLM_DOCTOR_MAX_ANSWER_MB` MiB, else 1024.
/// A larger answer is an error, not a process killed for memory. Returns bytes and MiB.
pub fn max_answer() -> (usize, f64) {
    let (bytes, mib) = crate::source::file::limit::mib_from_env("LLM_DOCTOR_MAX_ANSWER_MB", 1024.0);
    (usize::try_from(bytes).unwrap_or(usize::MAX), mib)
}

/// The start of [`read_capped`]'s error for an answer over the limit.
const OVER_CAP: &str = "the answer is larger than ";

/// Whether `message` is [`read_capped`]'s error for an answer over the limit.
pub(super) fn over_cap(message: &str) -> bool {
    message.starts_with(OVER_CAP)
}

/// An answer's body, read in chunks up to [`max_answer`].
pub(super) async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let (max, mib) = max_answer();
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return Err(format!(
                        "{OVER_CAP}{mib} MiB (LLM_DOCTOR_MAX_ANSWER_MB raises the limit; a narrower --selector or a shorter range makes it smaller)"
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(format!("reading the answer: {}", error_chain(&e))),
        }
    }
}
