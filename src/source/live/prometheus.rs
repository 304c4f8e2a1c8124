//! Live triage from Prometheus (`diagnose --prometheus URL`): the same snapshots the file reader
//! builds, computed by Prometheus (or Thanos, Mimir, VictoriaMetrics) over its own data.
//!
//! Every signal comes from its one definition in `rules/signals/*.yaml`, compiled to PromQL by
//! [`crate::signal::promql::compile`]; nothing here knows a metric name. The number of queries is fixed by
//! the adapters, never by the size of the fleet: each query aggregates `by` the labels that
//! identify a target, so one answer serves every replica at once, and its series are mapped
//! back to targets afterwards.
//!
//! One triage is:
//!
//! 1. **Discovery**, one instant query per adapter at the evaluation time:
//!    `count by (instance, pod, …) ({__name__=~"vllm:.*"})` says which replicas exist and their
//!    identity labels; exporters (dcgm, node) likewise by their join labels. Alongside, one query
//!    for the version-revealing metric names and one per info metric (`vllm:cache_config_info`).
//! 2. **Signals**: as soon as an adapter's discovery says it is present, every signal it defines
//!    is queried, plus its gauge facts. A gauge's last value and window mean, maximum and
//!    minimum are four compiled expressions sent as one query (see [`STAT_LABEL`]). Engines'
//!    queries aggregate `by (pod, instance)`, exporters' by their join labels (`pod`,
//!    `Hostname`, `hostname`, `instance`). Constants need no query.
//!
//!    `--selector` is matched, as for files, against each replica's identity labels, which
//!    needs all of a replica's series: a matcher pushed into the discovery query would drop
//!    series that lack its label (`vllm:cache_config_info` has no `model_name`) and change what
//!    a negative matcher selects. So discovery is fleet-wide, and the selected replicas' engine
//!    queries are then restricted to their `instance`s; exporters' queries stay fleet-wide.
//! 3. **Assembly**: replicas become targets and exporter groups are joined to them with the file
//!    reader's own rules (`crate::target::join`: pod, host label, host part of `instance`, a
//!    single replica by elimination, ambiguity noted); signals, hints and facts go through the
//!    file reader's code (`fill_missing_hints`, `pipeline::add_facts`), so precedence and hints
//!    cannot drift apart.
//!
//! All queries run concurrently on a current-thread tokio runtime (at most
//! [`LiveOptions::concurrency`] in flight), each with its own timeout, at an explicit `time`
//! (old data stays visible). A query that fails (HTTP 400 or 422, a timeout) costs only its
//! signals: they become unknown and the failure is listed in [`LiveResult::errors`]. A
//! Prometheus that cannot be reached at all (refused, DNS, timeout of the discovery) is an
//! error naming the address.
//!
//! Semantics match the file reader except at the edges: Prometheus 2.x range selectors include
//! a sample exactly on the window's left edge where the file reader's are left-open, and
//! VictoriaMetrics extrapolates `rate()` differently; discovery sees series with a sample in the
//! last 5 minutes before the evaluation time (the instant-query lookback), and `bit_share`'s
//! subquery assumes a 15 s scrape interval. When several groups of one adapter's series are
//! joined to one target (a pod exporting on two ports, say), values are combined where the
//! expression allows it (sums, maxima, minima) and otherwise left unknown with a hint.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use llm_doctor_engine::condition::WindowStats;
use llm_doctor_engine::{SignalValue, Snapshot, Target, Window};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;

use crate::pipeline::{self, FactSource, Prepared, UserInputs};
use crate::rules::Rules;
use crate::signal::adapter::eval::{reads_gauge, Stat};
use crate::signal::adapter::spec::{Expr, Selector as SeriesSelector};
use crate::signal::adapter::{absent_hint, fill_missing_hints, AdapterKind, AdapterSpec, Adapters};
use crate::signal::promql;
use crate::target::{self, Join, IDENTITY_LABELS, JOIN_LABELS};

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
/// facts) comes in [`pipeline::Options`], as for files.
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

/// What a live triage produced.
#[derive(Debug, Clone)]
pub struct LiveResult {
    /// One snapshot per target, in the file reader's order (engines by adapter and replica,
    /// else exporter hosts).
    pub prepared: Vec<Prepared>,
    /// Queries that failed, in words: their signals are unknown, the rest was diagnosed.
    pub errors: Vec<String>,
    /// How many queries were sent.
    pub queries: usize,
    /// The longest time one query took (sending to the end of its answer).
    pub slowest_query: Duration,
}

/// Labels engine queries aggregate by: the replica is the pod, else the instance.
const ENGINE_BY: &[&str] = &["pod", "instance"];

/// Diagnosis inputs for every target Prometheus knows at `opts.at_ms` (default: now), or those
/// `opts.selector` picks, over a window of `opts.window_ms`. Facts and signals from
/// `opts.engine_args`, `opts.facts` and `opts.signals` apply as for files; `opts.engine`
/// restricts the engines looked for.
///
/// Errors when Prometheus cannot be reached or answers no discovery query, when it knows no
/// target, or when the options are wrong; a query that fails later is listed in
/// [`LiveResult::errors`] and costs only its signals.
pub fn prepare_from_prometheus(
    rules: &Rules,
    live: &LiveOptions,
    opts: &pipeline::Options,
) -> Result<LiveResult> {
    let command_line = pipeline::parse_engine_args(opts, rules)?;
    let adapters = match &opts.engine {
        Some(e) => pipeline::restrict_to_engine(&rules.adapters, e)?,
        None => rules.adapters.clone(),
    };
    if opts.window_ms <= 0 {
        bail!("--window must be positive");
    }
    let at_ms = opts.at_ms.unwrap_or_else(now_ms);
    let endpoint = query_endpoint(&live.url)?;
    let client = client(live)?;
    let headers = header_map(&live.auth.headers)?;
    if tokio::runtime::Handle::try_current().is_ok() {
        bail!("internal error: prepare_from_prometheus called from inside an async runtime");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the HTTP runtime")?;

    let plan = Plan {
        adapters: &adapters,
        window: prom_duration(opts.window_ms),
        selector: opts.selector.as_ref(),
        facts: &opts.facts,
    };
    let http = Http {
        client,
        endpoint,
        headers,
        auth: live.auth.clone(),
        timeout: live.timeout,
        time: format!("{}.{:03}", at_ms.div_euclid(1000), at_ms.rem_euclid(1000)),
    };
    let answers = runtime.block_on(run(&plan, &http, live.concurrency.max(1), &live.url))?;

    let user = UserInputs {
        command_line: command_line.as_ref(),
        facts: &opts.facts,
        signals: &opts.signals,
    };
    let frame = Window {
        end_ms: Some(at_ms),
        length_ms: Some(opts.window_ms),
        lifetime: false,
    };
    assemble(rules, &plan, answers, frame, &user, opts)
}

// ---------------------------------------------------------------------------------------------
// Queries

/// Why a query was sent; how its answer is used.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Purpose {
    /// Which targets of adapter `.0` (an index into the adapters) exist.
    Discover(usize),
    /// Which version-revealing metric names exist, per target.
    Versions,
    /// An info metric's series (their labels are facts).
    Info(String),
    /// Signal `.1` of adapter `.0`; for gauges, all window statistics in one query (see
    /// [`STAT_LABEL`]).
    Signal(usize, String),
    /// Gauge fact `.1` of engine adapter `.0`.
    GaugeFact(usize, String),
}

#[derive(Debug, Clone)]
struct Query {
    purpose: Purpose,
    promql: String,
    /// The PromQL shown as the values' provenance: for gauges, the last value's query alone.
    shown: String,
}

impl Query {
    fn new(purpose: Purpose, promql: String) -> Query {
        Query {
            purpose,
            shown: promql.clone(),
            promql,
        }
    }
}

/// One series of an answer: labels and value (non-finite values are kept here, and dropped
/// when mapped to targets).
type Sample = (BTreeMap<String, String>, f64);

/// A successful answer.
#[derive(Debug, Clone, Default)]
struct Answer {
    samples: Vec<Sample>,
    /// `warnings`, `infos` and `isPartial`, in words.
    notes: Vec<String>,
}

/// A failed query.
#[derive(Debug, Clone)]
struct Failure {
    /// The server could not be reached or did not answer in time (as opposed to an error
    /// answer).
    unreachable: bool,
    message: String,
}

/// Answers by purpose, with the PromQL that was sent and the one to show.
struct Answers {
    by_purpose: BTreeMap<Purpose, (Query, Result<Answer, Failure>)>,
    queries: usize,
    slowest: Duration,
}

/// The statistics of a gauge, with the value of [`STAT_LABEL`] that marks each.
const STATS: [(Stat, &str); 4] = [
    (Stat::Last, "last"),
    (Stat::Mean, "mean"),
    (Stat::Max, "max"),
    (Stat::Min, "min"),
];

/// The label that tells a gauge's window statistics apart in their shared answer: the four
/// compiled expressions are joined with `or`, each marked by `label_replace`. They read the
/// same series, so they fail or succeed together anyway, and one query instead of four cuts
/// Prometheus' per-query work by almost half of a triage.
const STAT_LABEL: &str = "llm_doctor_stat";

/// The statistic an answer's series holds (unmarked: the last value).
fn stat_of(labels: &BTreeMap<String, String>) -> usize {
    let mark = label(labels, STAT_LABEL);
    STATS.iter().position(|(_, m)| *m == mark).unwrap_or(0)
}

/// The index of `stat` in [`STATS`].
fn stat_index(stat: Stat) -> usize {
    STATS.iter().position(|(s, _)| *s == stat).unwrap_or(0)
}

/// What to ask, given the adapters and the options.
struct Plan<'a> {
    adapters: &'a Adapters,
    /// The window as a PromQL duration.
    window: String,
    selector: Option<&'a crate::signal::selector::Selector>,
    /// `--fact`: may name the value of an adapter's pick, which then needs no `topk`.
    facts: &'a [(String, String)],
}

impl Plan<'_> {
    /// The queries that need no answer first: discovery, versions, info metrics.
    fn initial(&self) -> Vec<Query> {
        let mut out = Vec::new();
        for (i, a) in self.adapters.list.iter().enumerate() {
            out.push(Query::new(Purpose::Discover(i), discovery_query(a)));
        }
        let names: BTreeSet<&str> = self
            .adapters
            .list
            .iter()
            .flat_map(|a| a.versions.iter().map(|v| v.metric.as_str()))
            .collect();
        if !names.is_empty() {
            let alternatives: Vec<String> = names.iter().map(|n| regex_quote(n)).collect();
            let mut by = vec!["__name__"];
            by.extend(JOIN_LABELS);
            out.push(Query::new(
                Purpose::Versions,
                format!(
                    "count by ({}) ({{__name__=~\"{}\"}})",
                    by.join(", "),
                    escape(&alternatives.join("|"))
                ),
            ));
        }
        let infos: BTreeSet<&str> = self
            .adapters
            .engines()
            .flat_map(|a| a.info_facts.iter().map(|i| i.metric.as_str()))
            .collect();
        for metric in infos {
            out.push(Query::new(
                Purpose::Info(metric.to_string()),
                format!("{{__name__=\"{}\"}}", escape(metric)),
            ));
        }
        out
    }

    /// The queries for adapter `i` once its discovery answered `groups`: none when it is absent
    /// (or, with a selector, when none of its replicas is selected).
    fn follow_up(&self, i: usize, groups: &[BTreeMap<String, String>]) -> Vec<Query> {
        let a = &self.adapters.list[i];
        if groups.is_empty() {
            return Vec::new();
        }
        let engine = a.kind == AdapterKind::Engine;
        let mut matchers = String::new();
        if engine {
            if let Some(sel) = self.selector {
                let replicas = engine_replicas(groups);
                let instances: BTreeSet<&str> = replicas
                    .values()
                    .filter(|r| sel.matches(&r.labels))
                    .flat_map(|r| r.pairs.iter().map(|(_, instance)| instance.as_str()))
                    .collect();
                if instances.is_empty() {
                    return Vec::new();
                }
                // Every Prometheus series has an instance; without one, no restriction.
                if !instances.contains("") {
                    let alternatives: Vec<String> =
                        instances.iter().map(|i| regex_quote(i)).collect();
                    matchers = format!("instance=~\"{}\"", escape(&alternatives.join("|")));
                }
            }
        }
        let by: &[&str] = if engine { ENGINE_BY } else { JOIN_LABELS };
        let options = |stat| promql::Options {
            window: &self.window,
            by,
            matchers: &matchers,
            stat,
            picks: &a.picks,
            ..promql::Options::default()
        };
        // Picks a fact names become plain matchers; the others are chosen by the query itself.
        let named: BTreeMap<String, Result<(String, String), String>> = a
            .picks
            .iter()
            .filter_map(|(name, p)| {
                let fact = p.fact.as_ref()?;
                let (_, v) = self.facts.iter().rev().find(|(k, _)| k == fact)?;
                Some((name.clone(), Ok((p.label.clone(), v.clone()))))
            })
            .collect();
        let mut out = Vec::new();
        for (name, written) in &a.signals {
            if matches!(written, Expr::Const(_)) {
                continue;
            }
            let Ok(expr) = written.with_picks(&named) else {
                continue;
            };
            let expr = &expr;
            let shown = promql::compile(expr, &options(Stat::Last));
            let promql = if reads_gauge(expr) {
                STATS
                    .iter()
                    .map(|(stat, mark)| {
                        format!(
                            "label_replace({}, \"{STAT_LABEL}\", \"{mark}\", \"\", \"\")",
                            promql::compile(expr, &options(*stat))
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(" or ")
            } else {
                shown.clone()
            };
            out.push(Query {
                purpose: Purpose::Signal(i, name.clone()),
                promql,
                shown,
            });
        }
        if engine {
            for (fact, selector) in &a.gauge_facts {
                out.push(Query::new(
                    Purpose::GaugeFact(i, fact.clone()),
                    promql::compile(&gauge_fact_expr(selector), &options(Stat::Last)),
                ));
            }
        }
        out
    }
}

/// How a gauge fact is read: the maximum of the gauge's last values (as the file reader).
fn gauge_fact_expr(selector: &SeriesSelector) -> Expr {
    Expr::Max(Box::new(Expr::Gauge(selector.clone())))
}

/// The labels an adapter's discovery groups by.
fn discovery_labels(a: &AdapterSpec) -> Vec<&str> {
    let mut labels: Vec<&str> = JOIN_LABELS.to_vec();
    if a.kind == AdapterKind::Engine {
        labels.extend(IDENTITY_LABELS);
        labels.extend(a.label_facts.keys().map(String::as_str));
    }
    labels.sort_unstable();
    labels.dedup();
    labels
}

fn discovery_query(a: &AdapterSpec) -> String {
    let names: Vec<String> = a
        .detect
        .iter()
        .map(|p| format!("{}.*", regex_quote(p)))
        .collect();
    format!(
        "count by ({}) ({{__name__=~\"{}\"}})",
        discovery_labels(a).join(", "),
        escape(&names.join("|"))
    )
}

/// Sends every query: the initial ones at once, each adapter's signals as soon as its
/// discovery answers. Errors when the server is unreachable or answers no discovery query.
async fn run(plan: &Plan<'_>, http: &Http, limit: usize, url: &str) -> Result<Answers> {
    let mut queue: VecDeque<Query> = plan.initial().into();
    let discoveries = queue
        .iter()
        .filter(|q| matches!(q.purpose, Purpose::Discover(_)))
        .count();
    let mut discovered = 0usize;
    let mut discovery_failures: Vec<String> = Vec::new();
    let mut answers = Answers {
        by_purpose: BTreeMap::new(),
        queries: 0,
        slowest: Duration::ZERO,
    };
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        while tasks.len() < limit {
            let Some(q) = queue.pop_front() else { break };
            answers.queries += 1;
            let http = http.clone();
            tasks.spawn(async move {
                let started = Instant::now();
                let outcome = http.query(&q.promql).await;
                (q, outcome, started.elapsed())
            });
        }
        let Some(joined) = tasks.join_next().await else {
            break;
        };
        let (q, outcome, elapsed) = joined.context("internal error in a query task")?;
        answers.slowest = answers.slowest.max(elapsed);
        if let Purpose::Discover(i) = q.purpose {
            discovered += 1;
            match &outcome {
                Ok(answer) => {
                    let groups: Vec<BTreeMap<String, String>> =
                        answer.samples.iter().map(|(l, _)| l.clone()).collect();
                    queue.extend(plan.follow_up(i, &groups));
                }
                Err(f) if f.unreachable => {
                    tasks.abort_all();
                    bail!("Prometheus at {url} is unreachable: {}", f.message);
                }
                Err(f) => discovery_failures.push(f.message.clone()),
            }
            if discovered == discoveries && discovery_failures.len() == discoveries {
                tasks.abort_all();
                bail!(
                    "Prometheus at {url} answered no discovery query: {}",
                    discovery_failures[0]
                );
            }
        }
        answers.by_purpose.insert(q.purpose.clone(), (q, outcome));
    }
    Ok(answers)
}

// ---------------------------------------------------------------------------------------------
// HTTP

/// Everything one query needs; cheap to clone (the client is shared).
#[derive(Clone)]
struct Http {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    headers: HeaderMap,
    auth: PromAuth,
    timeout: Duration,
    /// The evaluation time, Unix seconds with milliseconds.
    time: String,
}

impl Http {
    async fn query(&self, promql: &str) -> Result<Answer, Failure> {
        match tokio::time::timeout(self.timeout, self.send(promql)).await {
            Ok(r) => r,
            Err(_) => Err(Failure {
                unreachable: true,
                message: format!("no answer within {}", human(self.timeout)),
            }),
        }
    }

    async fn send(&self, promql: &str) -> Result<Answer, Failure> {
        let mut form = reqwest::Url::parse("http://form.invalid/").expect("a valid URL");
        form.query_pairs_mut()
            .append_pair("query", promql)
            .append_pair("time", &self.time)
            .append_pair("timeout", &format!("{}ms", self.timeout.as_millis()));
        let body = form.query().unwrap_or_default().to_string();
        let mut request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body);
        if let Some(token) = &self.auth.bearer {
            request = request.bearer_auth(token);
        }
        if let Some((user, password)) = &self.auth.basic {
            request = request.basic_auth(user, Some(password));
        }
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
        let body = response.bytes().await.map_err(|e| Failure {
            unreachable: true,
            message: format!("reading the answer: {}", error_chain(&e)),
        })?;
        parse_answer(status.as_u16(), &content_type, &body)
    }
}

type Envelope = crate::source::file::api_json::Envelope<Data>;

#[derive(Debug, Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: serde_json::Value,
}

#[derive(Debug, Deserialize)]
struct VectorSample {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    value: (serde::de::IgnoredAny, String),
}

/// Reads an answer: a vector or a scalar (VictoriaMetrics answers `scalar()` with a vector);
/// error answers (HTTP 400 from Prometheus, 422 from VictoriaMetrics) become failures quoting
/// the server's message.
fn parse_answer(status: u16, content_type: &str, body: &[u8]) -> Result<Answer, Failure> {
    let fail = |message: String| Failure {
        unreachable: false,
        message,
    };
    let envelope: Envelope = match serde_json::from_slice(body) {
        Ok(e) => e,
        Err(e) => {
            let text = String::from_utf8_lossy(body);
            let start: String = text.trim().chars().take(120).collect();
            let what = if content_type.is_empty() {
                String::new()
            } else {
                format!(", Content-Type {content_type}")
            };
            return Err(fail(format!(
                "HTTP {status}{what}: not a Prometheus API answer ({e}): {start:?}"
            )));
        }
    };
    if envelope.status != "success" {
        return Err(fail(format!(
            "HTTP {status} {}: {}",
            envelope.error_type.as_deref().unwrap_or("error"),
            envelope.error.as_deref().unwrap_or("(no message)")
        )));
    }
    let mut notes: Vec<String> = envelope
        .warnings
        .iter()
        .map(|w| format!("Prometheus warning: {w}"))
        .chain(
            envelope
                .infos
                .iter()
                .map(|i| format!("Prometheus info: {i}")),
        )
        .collect();
    if envelope.is_partial {
        notes.push(
            "the server answered with partial data (isPartial): some values may be incomplete"
                .to_string(),
        );
    }
    let data = envelope
        .data
        .ok_or_else(|| fail(format!("HTTP {status}: a success answer without `data`")))?;
    let number = |text: &str| -> Result<f64, Failure> {
        match text {
            "NaN" => Ok(f64::NAN),
            "+Inf" | "Inf" => Ok(f64::INFINITY),
            "-Inf" => Ok(f64::NEG_INFINITY),
            t => t
                .parse()
                .map_err(|_| fail(format!("value {t:?} is not a number"))),
        }
    };
    let samples = match data.result_type.as_str() {
        "vector" => {
            let v: Vec<VectorSample> = serde_json::from_value(data.result)
                .map_err(|e| fail(format!("malformed vector answer: {e}")))?;
            v.into_iter()
                .map(|s| Ok((s.metric, number(&s.value.1)?)))
                .collect::<Result<Vec<_>, Failure>>()?
        }
        "scalar" => {
            let (_, v): (serde::de::IgnoredAny, String) = serde_json::from_value(data.result)
                .map_err(|e| fail(format!("malformed scalar answer: {e}")))?;
            vec![(BTreeMap::new(), number(&v)?)]
        }
        other => {
            return Err(fail(format!(
                "expected a vector or scalar answer, got `{other}`"
            )))
        }
    };
    Ok(Answer { samples, notes })
}

/// `URL/api/v1/query`, keeping a path prefix.
fn query_endpoint(url: &str) -> Result<reqwest::Url> {
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

/// The HTTP client: HTTP/1.1 over rustls on ring, no proxy from the environment (as
/// `crate::source::live::scrape`), trusting the CA file's certificates alone when one is given, the
/// system's for other https URLs.
fn client(live: &LiveOptions) -> Result<reqwest::Client> {
    // Another part of the process may have installed a provider already; either is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = reqwest::Client::builder()
        .no_proxy()
        .user_agent(concat!("llm-doctor/", env!("CARGO_PKG_VERSION")));
    let builder = match &live.auth.ca_file {
        Some(path) => {
            let pem = std::fs::read(path)
                .with_context(|| format!("reading the CA file `{}`", path.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                anyhow::anyhow!(
                    "the CA file `{}` holds no usable PEM certificate: {}",
                    path.display(),
                    error_chain(&e)
                )
            })?;
            if certs.is_empty() {
                bail!(
                    "the CA file `{}` holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)",
                    path.display()
                );
            }
            builder.tls_certs_only(certs)
        }
        // The platform verifier costs time and fails on hosts without CA certificates; plain
        // HTTP needs none.
        None if !live.url.trim_start().starts_with("https:") => builder.tls_certs_only([]),
        None => builder,
    };
    builder
        .build()
        .map_err(|e| anyhow::anyhow!("cannot set up the HTTP client: {}", error_chain(&e)))
}

fn header_map(headers: &[(String, String)]) -> Result<HeaderMap> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let n = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| anyhow::anyhow!("invalid header name {name:?}"))?;
        let v = HeaderValue::from_str(value.trim())
            .map_err(|_| anyhow::anyhow!("invalid value for header `{name}`"))?;
        map.append(n, v);
    }
    Ok(map)
}

fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 || !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else {
        format!("{}s", ms / 1000)
    }
}

/// A window in milliseconds as a PromQL duration, in the largest exact unit.
fn prom_duration(ms: i64) -> String {
    for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1000)] {
        if ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

use crate::signal::promql::{escape, regex_quote};
use crate::source::live::scrape::error_chain;

// ---------------------------------------------------------------------------------------------
// Targets

/// One engine replica as discovery saw it.
#[derive(Debug, Clone, Default)]
struct Replica {
    /// Identity labels (the file reader's `IDENTITY_LABELS`), from the replica's groups.
    labels: BTreeMap<String, String>,
    /// The (pod, instance) pairs of its groups.
    pairs: BTreeSet<(String, String)>,
    /// Its discovery groups (for label facts).
    groups: Vec<BTreeMap<String, String>>,
}

/// Discovery groups of one engine adapter by replica: the pod, else the instance.
fn engine_replicas(groups: &[BTreeMap<String, String>]) -> BTreeMap<String, Replica> {
    let mut out: BTreeMap<String, Replica> = BTreeMap::new();
    for g in groups {
        let key = replica_key(g);
        let r = out.entry(key).or_default();
        r.pairs.insert(pair(g));
        r.groups.push(g.clone());
    }
    for r in out.values_mut() {
        r.groups.sort();
        for l in IDENTITY_LABELS {
            // The smallest value where groups disagree, so the choice does not depend on order.
            if let Some(v) = r
                .groups
                .iter()
                .filter_map(|g| g.get(*l))
                .filter(|v| !v.is_empty())
                .min()
            {
                r.labels.insert(l.to_string(), v.clone());
            }
        }
    }
    out
}

fn label<'a>(labels: &'a BTreeMap<String, String>, name: &str) -> &'a str {
    labels.get(name).map(String::as_str).unwrap_or("")
}

fn replica_key(labels: &BTreeMap<String, String>) -> String {
    match label(labels, "pod") {
        "" => label(labels, "instance").to_string(),
        pod => pod.to_string(),
    }
}

fn pair(labels: &BTreeMap<String, String>) -> (String, String) {
    (
        label(labels, "pod").to_string(),
        label(labels, "instance").to_string(),
    )
}

/// The join labels' values: series that agree on them join alike.
fn join_tuple(labels: &BTreeMap<String, String>) -> Vec<String> {
    JOIN_LABELS
        .iter()
        .map(|l| label(labels, l).to_string())
        .collect()
}

fn join_keys(labels: &BTreeMap<String, String>) -> Vec<String> {
    target::join_keys_of(|l| labels.get(l).map(String::as_str).filter(|v| !v.is_empty()))
}

/// A target being assembled.
struct LiveTarget {
    target: Target,
    /// Engine adapter index, when the target is a replica.
    engine: Option<usize>,
    /// Adapters joined to it (engine first), by index.
    adapters: Vec<usize>,
    /// Engine discovery groups (label facts read them).
    groups: Vec<BTreeMap<String, String>>,
    notes: Vec<String>,
}

/// Where answer series go.
struct Routes {
    /// (engine adapter, pod, instance) → target.
    engine_pairs: BTreeMap<(usize, String, String), usize>,
    /// (engine adapter, instance label of the target) → target: series from the engine's own
    /// endpoint that are not the engine's (`process_cpu_seconds_total`), as the file reader
    /// joins them.
    engine_instances: BTreeMap<(usize, String), usize>,
    /// (exporter adapter, join tuple) → target.
    exporter_groups: BTreeMap<(usize, Vec<String>), usize>,
}

impl Routes {
    fn target_of(
        &self,
        adapter: usize,
        kind: AdapterKind,
        labels: &BTreeMap<String, String>,
    ) -> Option<usize> {
        if kind == AdapterKind::Engine {
            let (pod, instance) = pair(labels);
            self.engine_pairs
                .get(&(adapter, pod, instance.clone()))
                .or_else(|| self.engine_instances.get(&(adapter, instance)))
                .copied()
        } else {
            self.exporter_groups
                .get(&(adapter, join_tuple(labels)))
                .copied()
        }
    }
}

/// Builds targets from the discovery answers, with the file reader's rules; returns them with
/// the routes that map answer series onto them.
fn build_targets(adapters: &Adapters, answers: &Answers) -> (Vec<LiveTarget>, Routes) {
    let groups_of = |i: usize| -> Vec<BTreeMap<String, String>> {
        match answers.by_purpose.get(&Purpose::Discover(i)) {
            Some((_, Ok(a))) => a.samples.iter().map(|(l, _)| l.clone()).collect(),
            _ => Vec::new(),
        }
    };
    let mut routes = Routes {
        engine_pairs: BTreeMap::new(),
        engine_instances: BTreeMap::new(),
        exporter_groups: BTreeMap::new(),
    };
    // 1. Engine replicas, ordered by adapter name then replica, as the file reader's map.
    let mut engines: Vec<(usize, &AdapterSpec)> = adapters
        .list
        .iter()
        .enumerate()
        .filter(|(_, a)| a.kind == AdapterKind::Engine)
        .collect();
    engines.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    let mut targets: Vec<LiveTarget> = Vec::new();
    for (i, a) in engines {
        for (_, replica) in engine_replicas(&groups_of(i)) {
            let t = targets.len();
            for (pod, instance) in &replica.pairs {
                routes
                    .engine_pairs
                    .insert((i, pod.clone(), instance.clone()), t);
            }
            if let Some(instance) = replica.labels.get("instance") {
                routes
                    .engine_instances
                    .entry((i, instance.clone()))
                    .or_insert(t);
            }
            targets.push(LiveTarget {
                target: Target {
                    engine: Some(a.engine_name().to_string()),
                    labels: replica.labels,
                },
                engine: Some(i),
                adapters: vec![i],
                groups: replica.groups,
                notes: Vec::new(),
            });
        }
    }

    // 2. Exporter groups joined by host; by elimination when there is one replica.
    let target_keys: Vec<Vec<String>> = targets
        .iter()
        .map(|t| {
            let mut k: Vec<String> = t.groups.iter().flat_map(join_keys).collect();
            k.sort();
            k.dedup();
            k
        })
        .collect();
    let mut orphans: BTreeMap<String, Vec<(usize, Vec<String>)>> = BTreeMap::new();
    let mut ambiguous: BTreeSet<String> = BTreeSet::new();
    for (i, a) in adapters.list.iter().enumerate() {
        if a.kind == AdapterKind::Engine {
            continue;
        }
        let tuples: BTreeSet<Vec<String>> = groups_of(i).iter().map(join_tuple).collect();
        for tuple in tuples {
            let labels: BTreeMap<String, String> = JOIN_LABELS
                .iter()
                .zip(&tuple)
                .map(|(l, v)| (l.to_string(), v.clone()))
                .collect();
            let keys = join_keys(&labels);
            let to = match target::join(&keys, &target_keys) {
                Join::Matched(t) => t,
                Join::Elimination => {
                    let note = target::elimination_note(&a.name);
                    if !targets[0].notes.contains(&note) {
                        targets[0].notes.push(note);
                    }
                    0
                }
                Join::Orphan => {
                    let key = keys.first().cloned().unwrap_or_default();
                    orphans.entry(key).or_default().push((i, tuple));
                    continue;
                }
                Join::Ambiguous => {
                    ambiguous.insert(target::ambiguous_note(&a.name, &keys));
                    continue;
                }
            };
            attach(&mut targets[to], i);
            routes.exporter_groups.insert((i, tuple), to);
        }
    }
    for t in &mut targets {
        t.notes.extend(ambiguous.iter().cloned());
    }

    // 3. No engine at all: each exporter host is a target of its own.
    if targets.is_empty() {
        for (key, members) in orphans {
            let t = targets.len();
            let mut target = LiveTarget {
                target: Target {
                    engine: None,
                    labels: BTreeMap::from([("host".to_string(), target::host_label(&key))]),
                },
                engine: None,
                adapters: Vec::new(),
                groups: Vec::new(),
                notes: vec![target::NO_ENGINE_NOTE.to_string()],
            };
            for (i, tuple) in members {
                attach(&mut target, i);
                routes.exporter_groups.insert((i, tuple), t);
            }
            targets.push(target);
        }
    }
    (targets, routes)
}

fn attach(t: &mut LiveTarget, adapter: usize) {
    if !t.adapters.contains(&adapter) {
        t.adapters.push(adapter);
    }
}

// ---------------------------------------------------------------------------------------------
// Assembly

/// How per-group values of one target combine into the file reader's one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Combine {
    Sum,
    Max,
    Min,
}

/// Whether an expression aggregates series (by the target labels, once compiled).
fn aggregates(e: &Expr) -> bool {
    match e {
        Expr::Sum(_)
        | Expr::Max(_)
        | Expr::Min(_)
        | Expr::Avg(_)
        | Expr::Count(_)
        | Expr::Quantile(_)
        | Expr::HistMean(_) => true,
        Expr::Gauge(_) | Expr::Rate(_) | Expr::Increase(_) | Expr::BitShare(_) | Expr::Const(_) => {
            false
        }
        Expr::Scale(e, _) | Expr::PercentToRatio(e) => aggregates(e),
        Expr::Div(a, b) | Expr::Sub(a, b) | Expr::ZeroWhenAbsent(a, b) => {
            aggregates(a) || aggregates(b)
        }
        Expr::Add(v) | Expr::First(v) => v.iter().any(aggregates),
    }
}

/// How the values an answer gives one target combine: a vector that is not aggregated is
/// summed (as the file reader sums what remains of a vector); aggregations by the target labels
/// give one value per group of series, which combine exactly only for sums, counts, maxima and
/// minima. None: they cannot be combined (means, quantiles, ratios).
fn combine_rule(e: &Expr) -> Option<Combine> {
    if !aggregates(e) {
        return Some(Combine::Sum);
    }
    match e {
        Expr::Sum(_) | Expr::Count(_) => Some(Combine::Sum),
        Expr::Max(_) => Some(Combine::Max),
        Expr::Min(_) => Some(Combine::Min),
        Expr::Scale(inner, k) => combine_rule(inner).map(|c| match (c, *k < 0.0) {
            (Combine::Max, true) => Combine::Min,
            (Combine::Min, true) => Combine::Max,
            (c, _) => c,
        }),
        Expr::PercentToRatio(inner) => combine_rule(inner),
        // A sum, or zero (which adds nothing).
        Expr::ZeroWhenAbsent(a, _) => combine_rule(a),
        Expr::First(alternatives) => {
            // Each group answers with one alternative or another: exact only when all combine
            // alike.
            let mut rules = alternatives.iter().map(combine_rule);
            let first = rules.next().flatten()?;
            rules.all(|r| r == Some(first)).then_some(first)
        }
        _ => None,
    }
}

/// One signal's value for one target, or why there is none.
enum Value {
    Known(f64),
    Missing(String),
}

/// Per (target, statistic): the finite values an answer gives it.
type Mapped = BTreeMap<(usize, usize), Vec<f64>>;

fn map_answer(answer: &Answer, adapter: usize, kind: AdapterKind, routes: &Routes) -> Mapped {
    let mut out: Mapped = BTreeMap::new();
    for (labels, v) in &answer.samples {
        if !v.is_finite() {
            continue;
        }
        if let Some(t) = routes.target_of(adapter, kind, labels) {
            out.entry((t, stat_of(labels))).or_default().push(*v);
        }
    }
    out
}

fn combine(values: &[f64], rule: Option<Combine>) -> Option<f64> {
    match (values, rule) {
        ([], _) => None,
        ([v], _) => Some(*v),
        (_, Some(Combine::Sum)) => Some(values.iter().sum()),
        (_, Some(Combine::Max)) => values.iter().copied().reduce(f64::max),
        (_, Some(Combine::Min)) => values.iter().copied().reduce(f64::min),
        (_, None) => None,
    }
}

fn assemble(
    rules: &Rules,
    plan: &Plan<'_>,
    answers: Answers,
    window: Window,
    user: &UserInputs<'_>,
    opts: &pipeline::Options,
) -> Result<LiveResult> {
    let adapters = plan.adapters;
    let (targets, routes) = build_targets(adapters, &answers);
    let known = targets.len();
    if targets.is_empty() {
        let prefixes: Vec<String> = adapters
            .list
            .iter()
            .flat_map(|a| a.detect.iter().map(|p| format!("`{p}`")))
            .collect();
        bail!(
            "Prometheus has no serving-engine, GPU or host series at {} (recognised prefixes: {}); is --at inside its retention, and are the exporters scraped?",
            crate::time::format_time(window.end_ms.unwrap_or(0)),
            prefixes.join(", ")
        );
    }
    if let Some(e) = &opts.engine {
        if !targets.iter().any(|t| t.engine.is_some()) {
            bail!("--engine {e}: Prometheus has no {e} series at the evaluation time");
        }
    }
    let mut order: Vec<usize> = (0..targets.len()).collect();
    if let Some(sel) = &opts.selector {
        order.retain(|&t| sel.matches(&targets[t].target.labels));
        if order.is_empty() {
            bail!("--selector matches none of the {known} targets Prometheus knows");
        }
    }

    // Errors and server notes, once each.
    let mut errors: Vec<String> = Vec::new();
    let mut server_notes: BTreeSet<String> = BTreeSet::new();
    for (purpose, (query, outcome)) in &answers.by_purpose {
        match outcome {
            Ok(a) => server_notes.extend(a.notes.iter().cloned()),
            Err(f) => errors.push(format!(
                "{}: {} (query: {})",
                describe_purpose(adapters, purpose),
                f.message,
                query.promql
            )),
        }
    }

    // Answers mapped to targets.
    let mut mapped: BTreeMap<&Purpose, Mapped> = BTreeMap::new();
    let mut versions: BTreeSet<(usize, String)> = BTreeSet::new();
    let mut infos: BTreeMap<(usize, String), BTreeMap<String, String>> = BTreeMap::new();
    for (purpose, (_, outcome)) in &answers.by_purpose {
        let Ok(answer) = outcome else { continue };
        match purpose {
            Purpose::Signal(i, ..) | Purpose::GaugeFact(i, _) => {
                let kind = adapters.list[*i].kind;
                mapped.insert(purpose, map_answer(answer, *i, kind, &routes));
            }
            Purpose::Versions => {
                for (labels, _) in &answer.samples {
                    let name = label(labels, "__name__");
                    let Some(i) = adapters
                        .list
                        .iter()
                        .position(|a| a.detect.iter().any(|p| name.starts_with(p.as_str())))
                    else {
                        continue;
                    };
                    if let Some(t) = routes.target_of(i, adapters.list[i].kind, labels) {
                        versions.insert((t, name.to_string()));
                    }
                }
            }
            Purpose::Info(metric) => {
                let owner = adapters
                    .engines()
                    .filter(|a| a.info_facts.iter().any(|f| &f.metric == metric))
                    .filter_map(|a| adapters.list.iter().position(|x| x.name == a.name))
                    .collect::<Vec<_>>();
                let mut samples: Vec<&Sample> = answer.samples.iter().collect();
                samples.sort_by(|a, b| a.0.cmp(&b.0));
                for (labels, _) in samples {
                    for &i in &owner {
                        if let Some(t) = routes.target_of(i, AdapterKind::Engine, labels) {
                            // The first series wins, as in the file reader.
                            infos
                                .entry((t, metric.clone()))
                                .or_insert_with(|| labels.clone());
                        }
                    }
                }
            }
            Purpose::Discover(_) => {}
        }
    }

    let lookup = Lookup {
        answers: &answers,
        mapped: &mapped,
    };
    let catalog = &rules.catalog;
    let mut prepared = Vec::new();
    for t in order {
        let lt = &targets[t];
        let mut snapshot = Snapshot::new(catalog, lt.target.clone());
        snapshot.window = window.clone();
        let mut notes = lt.notes.clone();
        let names: Vec<String> = lt
            .adapters
            .iter()
            .map(|&i| adapters.list[i].name.clone())
            .collect();
        let present = rules.adapters.present(&names);
        let mut provided: BTreeSet<&str> = BTreeSet::new();
        for a in &present {
            let Some(i) = adapters.list.iter().position(|x| x.name == a.name) else {
                continue;
            };
            for (name, expr) in &a.signals {
                if provided.contains(name.as_str()) {
                    continue;
                }
                let value = |stat| lookup.signal(a, i, name, expr, t, stat);
                match value(Stat::Last) {
                    (Value::Known(v), promql) => {
                        // A statistic that is missing falls back to the value, as in the file
                        // reader.
                        let stats = reads_gauge(expr).then(|| {
                            let get = |s| match value(s).0 {
                                Value::Known(x) => x,
                                Value::Missing(_) => v,
                            };
                            WindowStats {
                                min: get(Stat::Min),
                                mean: get(Stat::Mean),
                                max: get(Stat::Max),
                                last: v,
                            }
                        });
                        let sv = SignalValue {
                            value: v,
                            stats,
                            source: format!("{}: {promql}", a.name),
                        };
                        // Names were validated against the catalog at load.
                        let _ = snapshot.set_signal(catalog, name, sv);
                        provided.insert(name);
                    }
                    (Value::Missing(hint), _) => {
                        let _ = snapshot.set_hint(catalog, name, hint);
                    }
                }
            }
        }
        let engine = lt.engine.map(|i| &adapters.list[i]);
        fill_missing_hints(
            &mut snapshot,
            catalog,
            &rules.adapters,
            &present,
            engine.map(|e| e.name.as_str()),
            &provided,
        );
        let source = LiveFacts {
            target: t,
            groups: &lt.groups,
            versions: &versions,
            infos: &infos,
            gauge_facts: match (lt.engine, engine) {
                (Some(i), Some(e)) => lookup.gauge_facts(e, i, t),
                _ => BTreeMap::new(),
            },
        };
        pipeline::add_facts(
            &mut snapshot,
            &mut notes,
            rules,
            (&names, engine.and_then(|e| rules.adapters.get(&e.name))),
            &source,
            user,
        )?;
        notes.extend(server_notes.iter().cloned());
        prepared.push(Prepared { snapshot, notes });
    }
    Ok(LiveResult {
        prepared,
        errors,
        queries: answers.queries,
        slowest_query: answers.slowest,
    })
}

/// Reads values out of the mapped answers.
struct Lookup<'a> {
    answers: &'a Answers,
    mapped: &'a BTreeMap<&'a Purpose, Mapped>,
}

impl Lookup<'_> {
    /// Signal `name` (expression `expr`) of adapter `a` (index `i`) for target `t`: its value
    /// or a hint, and the PromQL to show as its source.
    fn signal(
        &self,
        a: &AdapterSpec,
        i: usize,
        name: &str,
        expr: &Expr,
        t: usize,
        stat: Stat,
    ) -> (Value, String) {
        if let Expr::Const(c) = expr {
            return (Value::Known(*c), promql::compile(expr, &Default::default()));
        }
        let purpose = Purpose::Signal(i, name.to_string());
        let Some((query, outcome)) = self.answers.by_purpose.get(&purpose) else {
            return (
                Value::Missing(format!("{}: not queried", a.name)),
                String::new(),
            );
        };
        let v = match outcome {
            Err(f) => Value::Missing(format!(
                "{}: the query failed: {}",
                a.name,
                first_line(&f.message)
            )),
            Ok(_) => {
                let values = self
                    .mapped
                    .get(&purpose)
                    .and_then(|m| m.get(&(t, stat_index(stat))))
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                match combine(values, combine_rule(expr)) {
                    Some(v) => Value::Known(v),
                    None if values.is_empty() => Value::Missing(absent_hint(
                        a,
                        name,
                        "no series for this target in Prometheus in the window",
                    )),
                    None => Value::Missing(format!(
                        "{}: {} groups of series are joined to this target and their values cannot be combined",
                        a.name,
                        values.len()
                    )),
                }
            }
        };
        (v, query.shown.clone())
    }

    /// Engine `e`'s (index `i`) gauge facts for target `t`.
    fn gauge_facts(&self, e: &AdapterSpec, i: usize, t: usize) -> BTreeMap<String, f64> {
        e.gauge_facts
            .keys()
            .filter_map(|f| {
                let values = self
                    .mapped
                    .get(&Purpose::GaugeFact(i, f.clone()))?
                    .get(&(t, 0))?;
                Some((f.clone(), combine(values, Some(Combine::Max))?))
            })
            .collect()
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

fn describe_purpose(adapters: &Adapters, p: &Purpose) -> String {
    let name = |i: usize| adapters.list.get(i).map_or("?", |a| a.name.as_str());
    match p {
        Purpose::Discover(i) => format!("discovery of {} targets", name(*i)),
        Purpose::Versions => "version detection".to_string(),
        Purpose::Info(metric) => format!("info metric {metric}"),
        Purpose::Signal(i, signal) => format!("{} signal {signal}", name(*i)),
        Purpose::GaugeFact(i, fact) => format!("{} fact {fact}", name(*i)),
    }
}

/// [`FactSource`] over Prometheus' answers for one target.
struct LiveFacts<'a> {
    target: usize,
    groups: &'a [BTreeMap<String, String>],
    versions: &'a BTreeSet<(usize, String)>,
    infos: &'a BTreeMap<(usize, String), BTreeMap<String, String>>,
    gauge_facts: BTreeMap<String, f64>,
}

impl FactSource for LiveFacts<'_> {
    fn has_metric(&self, name: &str) -> bool {
        self.versions.contains(&(self.target, name.to_string()))
    }

    fn info_labels(&self, metric: &str) -> Option<BTreeMap<String, String>> {
        self.infos.get(&(self.target, metric.to_string())).cloned()
    }

    fn gauge_fact(&self, fact: &str, _selector: &SeriesSelector) -> Option<f64> {
        self.gauge_facts.get(fact).copied()
    }

    fn engine_label(&self, _engine: &AdapterSpec, label: &str) -> Option<String> {
        self.groups
            .iter()
            .filter_map(|g| g.get(label))
            .filter(|v| !v.is_empty())
            .min()
            .cloned()
    }
}

/// Records the raw series a later `diagnose FILE.om` needs, from Prometheus, between `from_ms`
/// and `to_ms` at `step_ms`: one range query per adapter (its metric-name prefixes), the
/// selector applied to replicas as `diagnose --prometheus` applies it, and each replica's joined
/// GPU and host series kept with it. Returns OpenMetrics text (timestamps in seconds, `# EOF`)
/// and notes (server warnings, partial answers).
pub fn record_from_prometheus(
    rules: &Rules,
    live: &LiveOptions,
    selector: Option<&crate::signal::selector::Selector>,
    from_ms: i64,
    to_ms: i64,
    step_ms: i64,
) -> Result<(String, Vec<String>)> {
    if to_ms <= from_ms {
        bail!("--to must be after --from");
    }
    if step_ms <= 0 {
        bail!("--step must be positive");
    }
    let points = (to_ms - from_ms) / step_ms + 1;
    if points > 11_000 {
        bail!("{points} points per series: Prometheus answers at most 11,000; raise --step or shorten the range");
    }
    let query = query_endpoint(&live.url)?;
    let endpoint = reqwest::Url::parse(&format!("{}_range", query.as_str()))
        .map_err(|e| anyhow::anyhow!("--prometheus: {e}"))?;
    let client = client(live)?;
    let headers = header_map(&live.auth.headers)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the HTTP runtime")?;
    let seconds = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
    let mut set: Option<crate::signal::series::SeriesSet> = None;
    let mut notes = Vec::new();
    for a in &rules.adapters.list {
        let mut names: Vec<String> = a
            .detect
            .iter()
            .map(|p| format!("{}.+", regex_quote(p)))
            .collect();
        // Metrics an adapter reads beyond its prefixes (vLLM's `process_cpu_seconds_total`).
        for name in a.signals.values().flat_map(|e| e.metric_names()) {
            let quoted = regex_quote(name);
            if !a.detect.iter().any(|p| name.starts_with(p.as_str())) && !names.contains(&quoted) {
                names.push(quoted);
            }
        }
        let promql = format!("{{__name__=~\"{}\"}}", escape(&names.join("|")));
        let mut form = reqwest::Url::parse("http://form.invalid/").expect("a valid URL");
        form.query_pairs_mut()
            .append_pair("query", &promql)
            .append_pair("start", &seconds(from_ms))
            .append_pair("end", &seconds(to_ms))
            .append_pair("step", &format!("{}ms", step_ms))
            .append_pair("timeout", &format!("{}ms", live.timeout.as_millis()));
        let body = form.query().unwrap_or_default().to_string();
        let mut request = client
            .post(endpoint.clone())
            .headers(headers.clone())
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(live.timeout)
            .body(body);
        if let Some(token) = &live.auth.bearer {
            request = request.bearer_auth(token);
        }
        if let Some((user, password)) = &live.auth.basic {
            request = request.basic_auth(user, Some(password));
        }
        let answer = runtime.block_on(async {
            let response = request.send().await?;
            let status = response.status();
            Ok::<_, reqwest::Error>((status, response.bytes().await?))
        });
        let (status, bytes) =
            answer.map_err(|e| anyhow::anyhow!("{}: {}", live.url, error_chain(&e)))?;
        let text = String::from_utf8_lossy(&bytes);
        if !status.is_success() {
            bail!(
                "{} answered HTTP {status} for {promql}: {}",
                live.url,
                first_line(&text)
            );
        }
        // An empty answer just means this engine or exporter is not there.
        if text.contains("\"result\":[]") {
            continue;
        }
        let parsed = crate::source::file::api_json::parse_with_warnings(
            &text,
            &format!("{} ({})", live.url, a.name),
        )
        .map_err(anyhow::Error::new)?;
        notes.extend(parsed.warnings);
        match &mut set {
            Some(all) => all.merge(parsed.set),
            None => set = Some(parsed.set),
        }
    }
    let mut set = set.with_context(|| {
        format!(
            "{} has no engine, GPU or host series between the two times",
            live.url
        )
    })?;
    if let Some(sel) = selector {
        let keep: std::collections::BTreeSet<(String, String)> =
            target::split(&set, &rules.adapters)
                .iter()
                .filter(|t| sel.matches(&t.target.labels))
                .flat_map(|t| {
                    t.series
                        .iter()
                        .map(|s| (s.name.clone(), s.labels.to_string()))
                })
                .collect();
        if keep.is_empty() {
            bail!("--selector matches no replica between the two times");
        }
        set.series
            .retain(|s| keep.contains(&(s.name.clone(), s.labels.to_string())));
    }
    Ok((crate::source::file::openmetrics::write(&set), notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(yaml: &str) -> Expr {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn answers_prometheus_and_victoriametrics() {
        let ok = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"pod":"a"},"value":[1796083807.000,"0.5"]},
            {"metric":{"pod":"b"},"value":[1796083807,"NaN"]}]},"warnings":["w"],"infos":["i"]}"#;
        let a = parse_answer(200, "application/json", ok).unwrap();
        assert_eq!(a.samples.len(), 2);
        assert_eq!(a.samples[0].1, 0.5);
        assert!(a.samples[1].1.is_nan());
        assert_eq!(a.notes, ["Prometheus warning: w", "Prometheus info: i"]);

        let scalar = br#"{"status":"success","data":{"resultType":"scalar","result":[1,"+Inf"]}}"#;
        let s = parse_answer(200, "", scalar).unwrap();
        assert_eq!(s.samples, vec![(BTreeMap::new(), f64::INFINITY)]);

        let partial =
            br#"{"status":"success","isPartial":true,"data":{"resultType":"vector","result":[]}}"#;
        assert!(parse_answer(200, "", partial).unwrap().notes[0].contains("isPartial"));

        let bad = br#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#;
        let f = parse_answer(400, "application/json", bad).unwrap_err();
        assert!(!f.unreachable);
        assert_eq!(f.message, "HTTP 400 bad_data: parse error at char 3");
        let vm = br#"{"status":"error","errorType":"422","error":"cannot parse"}"#;
        assert_eq!(
            parse_answer(422, "", vm).unwrap_err().message,
            "HTTP 422 422: cannot parse"
        );

        let html = parse_answer(502, "text/html", b"<html>Bad gateway</html>").unwrap_err();
        assert!(
            html.message
                .starts_with("HTTP 502, Content-Type text/html: not a Prometheus API answer"),
            "{}",
            html.message
        );
        let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert!(parse_answer(200, "", matrix).is_err());
    }

    #[test]
    fn combining_groups() {
        let r = |y| combine_rule(&expr(y));
        assert_eq!(r(r#"{sum: {rate: {metric: m}}}"#), Some(Combine::Sum));
        assert_eq!(r(r#"{count: {gauge: {metric: m}}}"#), Some(Combine::Sum));
        assert_eq!(r(r#"{gauge: {metric: m}}"#), Some(Combine::Sum));
        assert_eq!(
            r(r#"{div: [{gauge: {metric: a}}, {gauge: {metric: b}}]}"#),
            Some(Combine::Sum)
        );
        assert_eq!(r(r#"{max: {gauge: {metric: m}}}"#), Some(Combine::Max));
        assert_eq!(
            r(r#"{scale: [{max: {gauge: {metric: m}}}, -1]}"#),
            Some(Combine::Min)
        );
        assert_eq!(
            r(r#"{first: [{max: {gauge: {metric: a}}}, {max: {rate: {metric: b}}}]}"#),
            Some(Combine::Max)
        );
        assert_eq!(r(r#"{avg: {gauge: {metric: m}}}"#), None);
        assert_eq!(r(r#"{quantile: {metric: m, q: 0.9}}"#), None);
        assert_eq!(
            r(r#"{div: [{sum: {rate: {metric: a}}}, {sum: {rate: {metric: b}}}]}"#),
            None
        );
        assert_eq!(combine(&[1.0, 2.0], Some(Combine::Sum)), Some(3.0));
        assert_eq!(combine(&[1.0, 2.0], None), None);
        assert_eq!(combine(&[2.0], None), Some(2.0));
    }

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

    #[test]
    fn discovery_groups_by_identity_and_join_labels() {
        let rules = crate::rules::RuleFiles::shipped().load().unwrap();
        let vllm = rules.adapters.get("vllm").unwrap();
        assert_eq!(
            discovery_query(vllm),
            r#"count by (Hostname, hostname, instance, job, model, model_name, namespace, pod) ({__name__=~"vllm:.*"})"#
        );
        let dcgm = rules.adapters.get("dcgm").unwrap();
        assert_eq!(
            discovery_query(dcgm),
            r#"count by (Hostname, hostname, instance, pod) ({__name__=~"DCGM_.*"})"#
        );
    }
}
