//! Live scrapes of `/metrics` endpoints, and recordings of them.
//!
//! `diagnose --scrape URL` and `record --scrape URL` read the engine and its exporters directly
//! instead of a saved file. This module turns URLs into the same [`SeriesSet`] a recording
//! gives: each page is parsed by [`crate::source::file::exposition::parse`], every sample without a
//! timestamp is stamped with the time of its scrape, and series get the `instance` (the URL's
//! `host:port`) and `job="scrape"` labels Prometheus would add, so that target joining works
//! as it does on recordings. Several rounds, `interval` apart, make counter rates computable.
//!
//! The callers stay synchronous: each call builds a current-thread tokio runtime and a
//! `reqwest` client (HTTP/1.1, rustls on ring) and drops them when done. Within a round all
//! endpoints are fetched concurrently; rounds start on a fixed schedule (round `k` at `k ×
//! interval` after the first), like Prometheus' scrape loop, so a slow round does not shift
//! the later ones. As in Prometheus, no proxy from the environment is used.
//!
//! Failures stay with their endpoint (STYLE: a failing source does not abort a diagnosis):
//! connection errors, timeouts, non-2xx answers and pages that do not parse become that
//! endpoint's error, in words that name the address, and the other endpoints are unaffected.

use std::io::Read;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::Url;

use crate::signal::series::{Labels, SeriesSet};
use crate::source::file::exposition;
use crate::source::file::openmetrics;

/// How each request is made.
#[derive(Debug, Clone)]
pub struct ScrapeOptions {
    /// Limit for one request: connecting, sending, and reading the whole body.
    pub timeout: Duration,
    /// Extra request headers (`--header 'Authorization: Bearer ...'`), sent to every endpoint.
    pub headers: Vec<(String, String)>,
}

impl Default for ScrapeOptions {
    /// Prometheus' default scrape timeout (10 s), no extra headers.
    fn default() -> Self {
        ScrapeOptions {
            timeout: Duration::from_secs(10),
            headers: Vec::new(),
        }
    }
}

/// One endpoint's outcome.
#[derive(Debug, Clone)]
pub struct Scraped {
    /// The URL as given.
    pub url: String,
    /// All rounds' samples merged, or why the endpoint failed (in any round).
    pub result: Result<SeriesSet, EndpointFailed>,
}

/// Why an endpoint gave no samples: its first failure (with its round when there were several)
/// and how many more rounds failed, as one sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EndpointFailed(pub String);

/// What Prometheus asks for: OpenMetrics first, then the text format.
const ACCEPT: &str =
    "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1";

/// The `job` label given to scraped series that lack one.
const JOB: &str = "scrape";

/// Larger pages (before or after gzip) are refused rather than exhausting memory; the
/// biggest real `/metrics` pages (dcgm-exporter on 8 GPUs with profiling counters) are a few
/// MiB.
const MAX_BODY_BYTES: usize = 256 << 20;

/// Most failed rounds listed by name in one endpoint's error.
const MAX_LISTED_FAILURES: usize = 3;

/// Scrapes every URL `rounds` times, `interval` apart (the first round at once; within a
/// round all endpoints concurrently), and returns, per endpoint in the order given, the
/// merged samples, each stamped with the time of its scrape (ms since the Unix epoch, from
/// the system clock) unless the page carried its own timestamp, and labelled, where the
/// series lacks them, with `instance` = the URL's `host:port` and `job` = `"scrape"`.
///
/// An endpoint that fails in any round has `result: Err(reason)` (the first failure, and how
/// many rounds failed when more than one did); the others are unaffected. `rounds` of 0 is
/// taken as 1. Never panics; called from inside a tokio runtime, every endpoint fails with a
/// message saying so.
///
/// `progress` receives short lines: `scraped URL (N series)`, `failed URL: reason` and,
/// before each later round, `round 2/3 in 15s`.
pub fn scrape(
    urls: &[String],
    rounds: usize,
    interval: Duration,
    opts: &ScrapeOptions,
    progress: &mut dyn FnMut(&str),
) -> Vec<Scraped> {
    let rounds = rounds.max(1);
    run_rounds(urls, rounds, interval, opts, progress)
        .into_iter()
        .map(|ep| {
            let result = match ep.failures.first() {
                None => Ok(ep.set),
                Some((round, reason)) => {
                    let mut msg = if rounds > 1 && *round != SETUP {
                        format!("round {round}/{rounds}: {reason}")
                    } else {
                        reason.clone()
                    };
                    let more = ep.failures.len() - 1;
                    if more > 0 {
                        let s = if more == 1 { "" } else { "s" };
                        msg.push_str(&format!(" (and {more} more failed round{s})"));
                    }
                    Err(EndpointFailed(msg))
                }
            };
            Scraped {
                url: ep.url,
                result,
            }
        })
        .collect()
}

/// Records `duration` of every endpoint: `duration / interval + 1` rounds (one when
/// `interval` is zero), returned as one OpenMetrics text (timestamps in seconds, `# EOF`)
/// holding every endpoint's samples, plus one error line per endpoint that failed.
///
/// Unlike [`scrape`], a failed round costs only that round: an endpoint that answered in
/// some rounds keeps the samples of those rounds, and its error line says which rounds
/// failed and why. A recording with a gap is still a recording (rate functions handle gaps,
/// and the gap itself is evidence, e.g. of an engine restarting), whereas dropping a
/// half-hour recording for one timed-out scrape would lose the incident. An endpoint that
/// failed every round contributes nothing. When nothing succeeded the text is just `# EOF`.
pub fn record(
    urls: &[String],
    duration: Duration,
    interval: Duration,
    opts: &ScrapeOptions,
    progress: &mut dyn FnMut(&str),
) -> (String, Vec<String>) {
    let r = record_with(urls, duration, interval, opts, progress, None);
    (openmetrics::write(&r.set), r.errors)
}

/// What [`record_with`] recorded.
pub struct Recorded {
    /// Every sample of every round that was scraped.
    pub set: SeriesSet,
    /// One line per endpoint that failed a round.
    pub errors: Vec<String>,
    /// Rounds started, of those planned.
    pub rounds: (usize, usize),
    /// SIGINT or SIGTERM ended the recording early (then `set` holds the rounds so far).
    pub interrupted: bool,
}

/// Called after every round with what that round added and with everything so far.
pub type OnRound<'a> = &'a mut dyn FnMut(&SeriesSet, &SeriesSet);

/// [`record`], calling `after_round` after every round with the round's samples and all the
/// samples so far (so a caller can keep the recording on disk as it goes) and, when given one,
/// stopping early on SIGINT or SIGTERM with what was recorded. Each round's samples are
/// copied onto the series they continue ([`SeriesSet::merge_next`]), so a round costs what it
/// holds, however long the recording already is.
pub fn record_with(
    urls: &[String],
    duration: Duration,
    interval: Duration,
    opts: &ScrapeOptions,
    progress: &mut dyn FnMut(&str),
    mut after_round: Option<OnRound<'_>>,
) -> Recorded {
    let rounds = rounds_for(duration, interval);
    let stops_on_signal = after_round.is_some();
    let mut all = SeriesSet::default();
    let mut take_round = |endpoints: &mut [Endpoint]| {
        let mut round = SeriesSet::default();
        round.merge_all(endpoints.iter_mut().map(|ep| std::mem::take(&mut ep.set)));
        all.merge_next(&round);
        if let Some(f) = after_round.as_mut() {
            f(&round, &all);
        }
    };
    let (endpoints, done) = run_rounds_with(
        urls,
        rounds,
        interval,
        opts,
        progress,
        Some(&mut take_round),
        stops_on_signal,
    );
    let errors = endpoints
        .iter()
        .filter(|ep| !ep.failures.is_empty())
        .map(|ep| describe_failures(ep, rounds))
        .collect();
    Recorded {
        set: all,
        errors,
        rounds: (done, rounds),
        interrupted: done < rounds,
    }
}

/// `duration / interval + 1`, saturating; 1 when `interval` is zero.
fn rounds_for(duration: Duration, interval: Duration) -> usize {
    if interval.is_zero() {
        return 1;
    }
    let n = duration.as_nanos() / interval.as_nanos();
    usize::try_from(n).unwrap_or(usize::MAX).saturating_add(1)
}

/// One error line for a recorded endpoint.
fn describe_failures(ep: &Endpoint, rounds: usize) -> String {
    let (first_round, first_reason) = &ep.failures[0];
    if ep.rounds_ok == 0 {
        if rounds == 1 || *first_round == SETUP {
            return format!("{}: {first_reason}", ep.url);
        }
        let same = ep.failures.iter().all(|(_, r)| r == first_reason);
        let detail = if same {
            first_reason.clone()
        } else {
            format!("round {first_round}: {first_reason}")
        };
        return format!("{}: all {rounds} rounds failed; {detail}", ep.url);
    }
    let failed = ep.failures.len();
    let listed: Vec<String> = ep
        .failures
        .iter()
        .take(MAX_LISTED_FAILURES)
        .map(|(round, reason)| format!("round {round}: {reason}"))
        .collect();
    let more = if failed > MAX_LISTED_FAILURES {
        format!("; and {} more", failed - MAX_LISTED_FAILURES)
    } else {
        String::new()
    };
    format!(
        "{}: {failed} of {rounds} rounds failed (the other {} are kept): {}{more}",
        ep.url,
        ep.rounds_ok,
        listed.join("; ")
    )
}

/// A `--header` argument that is not `Name: value`. No message quotes the value (it is often a
/// secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderArgError {
    /// No `:` (the first 40 characters are quoted).
    #[error("invalid header {0:?}: expected `Name: value`, e.g. `Authorization: Bearer TOKEN`")]
    NoColon(String),
    /// Nothing before the `:`.
    #[error("invalid header: the name before `:` is empty")]
    EmptyName,
    /// A name HTTP does not allow.
    #[error("invalid header name {0:?}: letters, digits and `-` only, e.g. `Authorization`")]
    Name(String),
    /// Control characters in the value.
    #[error("invalid value for header `{0}`: control characters are not allowed")]
    Value(String),
}

/// Parses a `--header 'Name: value'` argument. The name must be a valid HTTP header name;
/// blanks around the value are dropped. Errors never quote the value (it is often a secret).
pub fn parse_header(s: &str) -> Result<(String, String), HeaderArgError> {
    let Some((name, value)) = s.split_once(':') else {
        return Err(HeaderArgError::NoColon(s.chars().take(40).collect()));
    };
    let name = name.trim();
    if name.is_empty() {
        return Err(HeaderArgError::EmptyName);
    }
    if HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(HeaderArgError::Name(name.to_string()));
    }
    let value = value.trim_matches(|c| c == ' ' || c == '\t');
    if HeaderValue::from_str(value).is_err() {
        return Err(HeaderArgError::Value(name.to_string()));
    }
    Ok((name.to_string(), value.to_string()))
}

/// The "round" of a failure found before any request (a bad URL or header, no runtime): the
/// endpoint took part in no round.
const SETUP: usize = 0;

/// Everything the rounds gave for one URL.
struct Endpoint {
    url: String,
    /// Merged samples of the successful rounds.
    set: SeriesSet,
    rounds_ok: usize,
    /// (1-based round, or [`SETUP`], reason), in round order.
    failures: Vec<(usize, String)>,
}

/// A URL checked once, before the first round.
#[derive(Debug, Clone)]
struct ScrapeTarget {
    url: Url,
    /// `host:port`, the `instance` label and the address named in errors.
    instance: String,
}

fn target(raw: &str) -> Result<ScrapeTarget, String> {
    let url = Url::parse(raw.trim()).map_err(|e| {
        format!("invalid URL {raw:?}: {e} (expected e.g. http://127.0.0.1:8000/metrics)")
    })?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(format!(
            "unsupported URL scheme `{}` in {raw:?}: use http:// or https://",
            url.scheme()
        ));
    }
    let host = url
        .host_str()
        .ok_or_else(|| format!("URL {raw:?} has no host"))?;
    let port = url
        .port_or_known_default()
        .ok_or_else(|| format!("URL {raw:?} has no port"))?;
    Ok(ScrapeTarget {
        instance: format!("{host}:{port}"),
        url,
    })
}

/// The shared machinery of [`scrape`] and [`record`]: every round, every endpoint.
fn run_rounds(
    urls: &[String],
    rounds: usize,
    interval: Duration,
    opts: &ScrapeOptions,
    progress: &mut dyn FnMut(&str),
) -> Vec<Endpoint> {
    run_rounds_with(urls, rounds, interval, opts, progress, None, false).0
}

/// Called with every endpoint after each round.
type AfterRound<'a> = &'a mut dyn FnMut(&mut [Endpoint]);

/// [`run_rounds`] with a call after every round and, with `stops_on_signal`, an early end on
/// SIGINT or SIGTERM; also returns how many rounds ran.
fn run_rounds_with(
    urls: &[String],
    rounds: usize,
    interval: Duration,
    opts: &ScrapeOptions,
    progress: &mut dyn FnMut(&str),
    after_round: Option<AfterRound<'_>>,
    stops_on_signal: bool,
) -> (Vec<Endpoint>, usize) {
    let mut endpoints: Vec<Endpoint> = urls
        .iter()
        .map(|url| Endpoint {
            url: url.clone(),
            set: SeriesSet::default(),
            rounds_ok: 0,
            failures: Vec::new(),
        })
        .collect();
    let targets: Vec<Result<ScrapeTarget, String>> = urls.iter().map(|u| target(u)).collect();

    let headers = match header_map(&opts.headers) {
        Ok(h) => h,
        Err(reason) => {
            fail_all(&mut endpoints, &reason, progress);
            return (endpoints, 0);
        }
    };
    // Report bad URLs once, up front; they take part in no round.
    for (ep, t) in endpoints.iter_mut().zip(&targets) {
        if let Err(reason) = t {
            progress(&format!("failed {}: {reason}", ep.url));
            ep.failures.push((SETUP, reason.clone()));
        }
    }
    if targets.iter().all(|t| t.is_err()) {
        return (endpoints, 0);
    }
    if tokio::runtime::Handle::try_current().is_ok() {
        let reason = "internal error: scrape called from inside an async runtime";
        fail_all(&mut endpoints, reason, progress);
        return (endpoints, 0);
    }
    let runtime = match crate::http::client_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            let reason = e.to_string();
            fail_all(&mut endpoints, &reason, progress);
            return (endpoints, 0);
        }
    };
    let any_https = targets
        .iter()
        .any(|t| matches!(t, Ok(t) if t.url.scheme() == "https"));
    let client = match client(any_https) {
        Ok(c) => c,
        Err(reason) => {
            fail_all(&mut endpoints, &reason, progress);
            return (endpoints, 0);
        }
    };
    let plan = Plan {
        client,
        headers,
        timeout: opts.timeout,
        rounds,
        interval,
    };
    let done = runtime.block_on(plan.run(
        &targets,
        &mut endpoints,
        progress,
        after_round,
        stops_on_signal,
    ));
    (endpoints, done)
}

/// Marks every endpoint not failed yet as failed before the first round.
fn fail_all(endpoints: &mut [Endpoint], reason: &str, progress: &mut dyn FnMut(&str)) {
    for ep in endpoints.iter_mut().filter(|ep| ep.failures.is_empty()) {
        progress(&format!("failed {}: {reason}", ep.url));
        ep.failures.push((SETUP, reason.to_string()));
    }
}

/// What every round does, once the client is built.
struct Plan {
    client: reqwest::Client,
    headers: HeaderMap,
    timeout: Duration,
    rounds: usize,
    interval: Duration,
}

impl Plan {
    /// Runs the rounds; returns how many ran (fewer than planned when a signal ended it).
    async fn run(
        &self,
        targets: &[Result<ScrapeTarget, String>],
        endpoints: &mut [Endpoint],
        progress: &mut dyn FnMut(&str),
        mut after_round: Option<AfterRound<'_>>,
        stops_on_signal: bool,
    ) -> usize {
        let start = tokio::time::Instant::now();
        let mut done = 0;
        for round in 1..=self.rounds {
            if round > 1 {
                if stops_on_signal {
                    let stopped = tokio::select! {
                        () = self.wait_for_round(start, round, progress) => false,
                        () = crate::http::stop_signal() => true,
                    };
                    if stopped {
                        progress(&format!(
                            "stopped by a signal after {done} of {} rounds",
                            self.rounds
                        ));
                        return done;
                    }
                } else {
                    self.wait_for_round(start, round, progress).await;
                }
            }
            done = round;
            // Spawned tasks run concurrently on this thread while the handles are awaited.
            let tasks: Vec<_> = targets
                .iter()
                .map(|t| {
                    let t = t.as_ref().ok()?.clone();
                    let (client, headers) = (self.client.clone(), self.headers.clone());
                    Some(tokio::spawn(scrape_one(client, t, headers, self.timeout)))
                })
                .collect();
            for (ep, task) in endpoints.iter_mut().zip(tasks) {
                let Some(task) = task else { continue };
                let outcome = task
                    .await
                    .unwrap_or_else(|e| Err(format!("internal error in the scrape task: {e}")));
                match outcome {
                    Ok(set) => {
                        let n = set.series.len();
                        progress(&format!("scraped {} ({n} series)", ep.url));
                        ep.rounds_ok += 1;
                        if ep.rounds_ok == 1 {
                            ep.set = set;
                        } else {
                            ep.set.merge(set);
                        }
                    }
                    Err(reason) => {
                        // Parse errors carry the offending line and a caret: one line here.
                        let first_line = reason.lines().next().unwrap_or_default();
                        progress(&format!("failed {}: {first_line}", ep.url));
                        ep.failures.push((round, reason));
                    }
                }
            }
            if let Some(f) = after_round.as_mut() {
                f(endpoints);
            }
        }
        done
    }

    /// Sleeps until round `round` is due: `(round - 1) × interval` after `start`.
    async fn wait_for_round(
        &self,
        start: tokio::time::Instant,
        round: usize,
        progress: &mut dyn FnMut(&str),
    ) {
        let rounds = self.rounds;
        let steps = u32::try_from(round - 1).unwrap_or(u32::MAX);
        let Some(due) = start.checked_add(self.interval.saturating_mul(steps)) else {
            // Beyond what the clock can represent: just wait one interval.
            progress(&format!(
                "round {round}/{rounds} in {}",
                human_duration(self.interval)
            ));
            tokio::time::sleep(self.interval).await;
            return;
        };
        let wait = due.saturating_duration_since(tokio::time::Instant::now());
        progress(&format!(
            "round {round}/{rounds} in {}",
            human_duration(wait)
        ));
        // A due time already past would still wait for the timer's next 1 ms tick.
        if !wait.is_zero() {
            tokio::time::sleep_until(due).await;
        }
    }
}

/// `5s`, `250ms`, `1.5s`: for progress lines.
fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// [`crate::http::header_map`], its error as the endpoint's failure text.
fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, String> {
    crate::http::header_map(headers).map_err(|e| e.to_string())
}

/// A client for this call ([`crate::http::client`]): plain-HTTP scrapes trust no certificate,
/// so the system's are loaded only when some URL is https.
fn client(any_https: bool) -> Result<reqwest::Client, String> {
    crate::http::client(crate::http::Trust::for_https(any_https)).map_err(|e| e.to_string())
}

/// One request: fetch, check, decompress, parse, stamp, label.
async fn scrape_one(
    client: reqwest::Client,
    target: ScrapeTarget,
    headers: HeaderMap,
    timeout: Duration,
) -> Result<SeriesSet, String> {
    let t_ms = now_ms();
    let fetched = tokio::time::timeout(timeout, fetch(&client, &target, headers)).await;
    let page = match fetched {
        Ok(r) => r?,
        Err(_) => {
            return Err(format!(
                "timed out after {} waiting for {}",
                human_duration(timeout),
                target.instance
            ))
        }
    };
    let text = String::from_utf8_lossy(&page.body);
    let mut set = exposition::parse(&text, target.url.as_str()).map_err(|e| {
        let hint = match page.content_type.as_deref() {
            Some(ct) if ct.starts_with("text/html") => {
                " (the answer is an HTML page, Content-Type text/html: is this the metrics path?)"
            }
            _ => "",
        };
        format!(
            "the answer from {} is not exposition text{hint}: {}",
            target.instance,
            short_parse_error(e)
        )
    })?;
    stamp(&mut set, t_ms, &target.instance);
    Ok(set)
}

/// A page as received.
struct Page {
    body: Vec<u8>,
    content_type: Option<String>,
}

async fn fetch(
    client: &reqwest::Client,
    target: &ScrapeTarget,
    headers: HeaderMap,
) -> Result<Page, String> {
    let mut response = client
        .get(target.url.clone())
        .header(reqwest::header::ACCEPT, ACCEPT)
        .header(reqwest::header::ACCEPT_ENCODING, "gzip")
        .headers(headers)
        .send()
        .await
        .map_err(|e| request_error(&e, target))?;
    let status = response.status();
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(|v| v.trim().to_ascii_lowercase())
    };
    let gzip = header(reqwest::header::CONTENT_ENCODING).as_deref() == Some("gzip");
    let content_type = header(reqwest::header::CONTENT_TYPE);
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Err(format!(
                        "the answer from {} is larger than {} MiB",
                        target.instance,
                        MAX_BODY_BYTES >> 20
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => return Err(request_error(&e, target)),
        }
    }
    if gzip {
        body = gunzip(&body).map_err(|e| {
            format!(
                "the gzip-compressed answer from {} does not decompress: {e}",
                target.instance
            )
        })?;
    }
    if !status.is_success() {
        return Err(format!(
            "HTTP {status} from {}: {}",
            target.instance,
            body_excerpt(&body)
        ));
    }
    Ok(Page { body, content_type })
}

fn gunzip(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(data)
        .take(MAX_BODY_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() > MAX_BODY_BYTES {
        return Err(format!("more than {} MiB", MAX_BODY_BYTES >> 20));
    }
    Ok(out)
}

/// The first 200 bytes of a body on one line, for error messages.
fn body_excerpt(body: &[u8]) -> String {
    // An HTML error page says what it is in its title; its markup says nothing to a reader.
    let head = String::from_utf8_lossy(&body[..body.len().min(4096)]);
    let lower = head.to_ascii_lowercase();
    if lower.trim_start().starts_with("<!doctype html") || lower.trim_start().starts_with("<html") {
        let title = lower
            .find("<title>")
            .map(|i| i + "<title>".len())
            .and_then(|start| {
                let end = start + lower[start..].find("</title>")?;
                Some(
                    head[start..end]
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                )
            })
            .filter(|t| !t.is_empty());
        return match title {
            Some(t) => format!("an HTML page (\"{t}\"), not metrics"),
            None => "an HTML page, not metrics".to_string(),
        };
    }
    let cut = &body[..body.len().min(200)];
    let text = String::from_utf8_lossy(cut);
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let trimmed = one_line.trim();
    if trimmed.is_empty() {
        "(empty body)".to_string()
    } else if body.len() > 200 {
        format!("{trimmed}…")
    } else {
        trimmed.to_string()
    }
}

/// The parse error with its line shortened: a minified HTML page is one very long line.
fn short_parse_error(mut e: exposition::ParseError) -> String {
    const MAX: usize = 120;
    if e.line_text.chars().count() > MAX {
        if e.column <= MAX {
            e.line_text = e.line_text.chars().take(MAX).collect::<String>() + "…";
        } else {
            return format!("{}:{}:{}: {}", e.file, e.line, e.column, e.message);
        }
    }
    e.to_string()
}

fn request_error(e: &reqwest::Error, target: &ScrapeTarget) -> String {
    if e.is_timeout() {
        return format!("timed out waiting for {}", target.instance);
    }
    let cause = root_cause(e);
    if e.is_connect() {
        format!("cannot connect to {}: {cause}", target.instance)
    } else if e.is_redirect() {
        format!("too many redirects from {}: {cause}", target.instance)
    } else {
        format!("request to {} failed: {cause}", target.instance)
    }
}

/// The innermost error message ("Connection refused (os error 111)"), which is the one a
/// person acts on; reqwest's outer layers repeat the URL and say "error sending request".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = e;
    while let Some(next) = inner.source() {
        inner = next;
    }
    inner.to_string()
}

/// Milliseconds since the Unix epoch by the system clock (0 if it reads before 1970).
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Stamps timestamp-less samples with `t_ms` and adds `instance`/`job` where missing.
fn stamp(set: &mut SeriesSet, t_ms: i64, instance: &str) {
    for s in &mut set.series {
        s.samples.stamp_untimed(t_ms);
        let need_instance = s.labels.get("instance").is_none();
        let need_job = s.labels.get("job").is_none();
        if need_instance || need_job {
            let mut pairs = std::mem::take(&mut s.labels.0);
            if need_instance {
                pairs.push(("instance".to_string(), instance.to_string()));
            }
            if need_job {
                pairs.push(("job".to_string(), JOB.to_string()));
            }
            s.labels = Labels::new(pairs);
        }
    }
    set.normalize();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse() {
        assert_eq!(
            parse_header("Authorization: Bearer x"),
            Ok(("Authorization".to_string(), "Bearer x".to_string()))
        );
        assert_eq!(
            parse_header("  X-Scope-OrgID:tenant-1  "),
            Ok(("X-Scope-OrgID".to_string(), "tenant-1".to_string()))
        );
        assert_eq!(
            parse_header("X-Empty:"),
            Ok(("X-Empty".to_string(), String::new()))
        );
        // Only the first colon splits.
        assert_eq!(
            parse_header("X-Url: http://a:1"),
            Ok(("X-Url".to_string(), "http://a:1".to_string()))
        );
        let refused = |s| parse_header(s).unwrap_err().to_string();
        assert!(refused("Authorization Bearer x").contains("expected `Name: value`"));
        assert!(refused(": v").contains("empty"));
        assert!(refused("Bad Name: v").contains("invalid header name"));
        let e = refused("X: secret\r\nInjected: 1");
        assert!(!e.contains("secret"), "{e}");
    }

    #[test]
    fn targets_and_instances() {
        let t = target("http://127.0.0.1:8000/metrics").unwrap();
        assert_eq!(t.instance, "127.0.0.1:8000");
        assert_eq!(
            target("https://gpu-node-1/metrics").unwrap().instance,
            "gpu-node-1:443"
        );
        assert_eq!(target("http://node/metrics").unwrap().instance, "node:80");
        assert_eq!(
            target("http://[::1]:9400/metrics").unwrap().instance,
            "[::1]:9400"
        );
        assert!(target("ftp://x/metrics").unwrap_err().contains("scheme"));
        assert!(target("127.0.0.1:8000/metrics").is_err());
        assert!(target("not a url").unwrap_err().contains("invalid URL"));
    }

    #[test]
    fn rounds_for_duration() {
        let s = Duration::from_secs;
        assert_eq!(rounds_for(s(60), s(15)), 5);
        assert_eq!(rounds_for(s(1), Duration::from_millis(250)), 5);
        assert_eq!(rounds_for(s(10), s(15)), 1);
        assert_eq!(rounds_for(s(10), Duration::ZERO), 1);
        assert_eq!(
            rounds_for(Duration::MAX, Duration::from_nanos(1)),
            usize::MAX
        );
    }

    #[test]
    fn stamping_keeps_own_timestamps_and_labels() {
        let mut set =
            exposition::parse("x{instance=\"own:1\"} 1\ny{job=\"j\"} 2 5000\nz 3\n", "t").unwrap();
        stamp(&mut set, 9000, "h:80");
        let got: Vec<String> = set
            .series
            .iter()
            .map(|s| format!("{s} {:?}", s.samples.to_vec()[0].t_ms))
            .collect();
        assert_eq!(
            got,
            [
                r#"x{instance="own:1",job="scrape"} Some(9000)"#,
                r#"y{instance="h:80",job="j"} Some(5000)"#,
                r#"z{instance="h:80",job="scrape"} Some(9000)"#,
            ]
        );
        assert!(set.has_timestamps);
    }

    #[test]
    fn excerpts_and_durations() {
        assert_eq!(body_excerpt(b""), "(empty body)");
        assert_eq!(body_excerpt(b"oops\nline 2\n"), "oops line 2");
        // HTML error pages are named by their title, not echoed.
        assert_eq!(
            body_excerpt(b"<!DOCTYPE HTML>\n<html><head><title>Error\n response</title></head><body>x</body></html>"),
            "an HTML page (\"Error response\"), not metrics"
        );
        assert_eq!(
            body_excerpt(b"<html><body>404</body></html>"),
            "an HTML page, not metrics"
        );
        let long = "é".repeat(150);
        let e = body_excerpt(long.as_bytes());
        assert!(e.ends_with('…') && e.chars().count() <= 102, "{e}");
        assert_eq!(human_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(human_duration(Duration::from_secs(15)), "15s");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn bad_input_never_reaches_the_network() {
        let mut lines = Vec::new();
        let out = scrape(
            &["nope://x".to_string()],
            3,
            Duration::from_secs(3600),
            &ScrapeOptions::default(),
            &mut |l| lines.push(l.to_string()),
        );
        assert!(out[0].result.as_ref().unwrap_err().0.contains("scheme"));
        assert_eq!(lines.len(), 1);
        let opts = ScrapeOptions {
            headers: vec![("Bad Name".to_string(), "v".to_string())],
            ..Default::default()
        };
        let out = scrape(
            &["http://127.0.0.1:9/metrics".to_string()],
            1,
            Duration::ZERO,
            &opts,
            &mut |_| {},
        );
        assert!(out[0]
            .result
            .as_ref()
            .unwrap_err()
            .0
            .contains("invalid header name"));
        let (text, errors) = record(
            &["nope://x".to_string()],
            Duration::from_secs(3600),
            Duration::from_secs(1),
            &ScrapeOptions::default(),
            &mut |_| {},
        );
        assert_eq!(text, "# EOF\n");
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with("nope://x: unsupported URL scheme `nope`"),
            "{errors:?}"
        );
        let (text, errors) = record(
            &[],
            Duration::from_secs(1),
            Duration::ZERO,
            &opts,
            &mut |_| {},
        );
        assert_eq!(text, "# EOF\n");
        assert!(errors.is_empty());
    }
}
