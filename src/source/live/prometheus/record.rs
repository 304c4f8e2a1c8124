//! `record --prometheus`: the raw series a later `diagnose FILE.om` needs, as range queries.

use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::answer::{Answer, Failure};
use super::assemble::first_line;
use super::http::{api_seconds, client, form_post, query_endpoint, Http, LiveOptions};
use crate::http::error_chain;
use crate::http::header_map;
use crate::rules::Rules;
use crate::signal::adapter::{AdapterKind, AdapterSpec};
use crate::signal::promql::{escape, regex_quote};
use crate::signal::series::SeriesSet;
use crate::target::{self};

/// The raw series of a range, as [`range_from_prometheus`] read them, with how long its
/// queries took.
pub struct RangeSet {
    /// Every series of the present adapters (those the selector keeps, with their GPUs and
    /// hosts).
    pub set: SeriesSet,
    /// Server warnings, partial answers.
    pub notes: Vec<String>,
    /// Range queries sent.
    pub queries: usize,
    /// The slowest of them.
    pub slowest_query: Duration,
}

/// Records the raw series a later `diagnose FILE.om` needs, from Prometheus, between `from_ms`
/// and `to_ms` at `step_ms` (see [`range_from_prometheus`]), as OpenMetrics text (timestamps in
/// seconds, `# EOF`) streamed into `sink`. Returns the bytes written and notes (server
/// warnings, partial answers).
pub fn record_from_prometheus(
    rules: &Rules,
    live: &LiveOptions,
    selector: Option<&crate::signal::selector::Selector>,
    (from_ms, to_ms, step_ms): (i64, i64, i64),
    sink: &mut impl std::io::Write,
) -> Result<(u64, Vec<String>)> {
    let got = range_from_prometheus(rules, live, selector, from_ms, to_ms, step_ms)?;
    let bytes = crate::source::file::openmetrics::write_to(&got.set, sink)
        .context("writing the recording")?;
    Ok((bytes, got.notes))
}

/// The raw series of every adapter between `from_ms` and `to_ms` at `step_ms`: range queries
/// of each adapter's metric-name prefixes, the range cut into pieces where one answer would be
/// too large (see [`max_answer_points`]), the selector applied to replicas as
/// `diagnose --prometheus` applies it, and each replica's joined GPU and host series kept
/// with it.
pub fn range_from_prometheus(
    rules: &Rules,
    live: &LiveOptions,
    selector: Option<&crate::signal::selector::Selector>,
    from_ms: i64,
    to_ms: i64,
    step_ms: i64,
) -> Result<RangeSet> {
    if to_ms <= from_ms {
        bail!("--to must be after --from");
    }
    if step_ms <= 0 {
        bail!("--step must be positive");
    }
    let steps = (to_ms - from_ms) / step_ms + 1;
    if steps > MAX_RANGE_STEPS {
        bail!("{steps} steps between --from and --to: at most {MAX_RANGE_STEPS}; raise --step or shorten the range");
    }
    let promqls: Vec<String> = rules.adapters.list.iter().map(adapter_selector).collect();
    let (mut set, notes, queries, slowest_query) =
        fetch(rules, live, &promqls, (from_ms, to_ms, step_ms))?;
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
    Ok(RangeSet {
        set,
        notes,
        queries,
        slowest_query,
    })
}

/// Adapter `i`'s series as `promqls[i]` selects them, over the range: asked in pieces, parsed
/// as they arrive and merged; with the server's notes, the queries sent and the slowest.
fn fetch(
    rules: &Rules,
    live: &LiveOptions,
    promqls: &[String],
    (from_ms, to_ms, step_ms): (i64, i64, i64),
) -> Result<(SeriesSet, Vec<String>, usize, Duration)> {
    let range = RangeQueries::new(live, from_ms, to_ms, step_ms)?;
    let sources: Vec<String> = (rules.adapters.list.iter())
        .map(|a| format!("{} ({})", live.url, a.name))
        .collect();
    let chunks = range.chunks(promqls, max_answer_points())?;
    // Each answer is parsed as it arrives, beside the queries still in flight, and merged at
    // once: a day of a fleet comes in dozens of pieces, and holding them all until the last
    // arrived held the series twice while they were merged. A merge gives the same set in
    // any order (series by key, samples by time; pieces share no step).
    let merged: std::sync::Arc<std::sync::Mutex<Option<SeriesSet>>> = Default::default();
    let into = merged.clone();
    let answers = range.query_all(promqls, chunks, move |i, text| {
        // An empty answer just means this engine or exporter is not there.
        if text.contains("\"result\":[]") {
            return Ok(Vec::new());
        }
        let parsed = crate::source::file::api_json::parse_with_warnings(&text, &sources[i])
            .map_err(anyhow::Error::new)?;
        drop(text);
        let mut all = into.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *all {
            Some(all) => all.merge(parsed.set),
            None => *all = Some(parsed.set),
        }
        Ok(parsed.warnings)
    });
    let queries = answers.len();
    let slowest_query = answers.iter().map(|(_, d)| *d).max().unwrap_or_default();
    let mut notes = Vec::new();
    // In the order asked; chunks the server refused for their size (asked again in halves)
    // carry no answer.
    for (answer, _) in answers {
        for note in answer.transpose()?.unwrap_or_default() {
            // A partial answer says so in every piece of the range: once is enough.
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }
    let set = merged.lock().unwrap_or_else(|e| e.into_inner()).take();
    let set = set.with_context(|| {
        format!(
            "{} has no engine, GPU or host series between the two times",
            live.url
        )
    })?;
    Ok((set, notes, queries, slowest_query))
}

/// A replica to drill down into: its engine's series by `instance`, and the GPU and host
/// series of its host (the host part of the instance, as the reader joins them) or of its pod.
pub struct ReplicaKey<'a> {
    /// The engine's `instance` label.
    pub instance: &'a str,
    /// Its `pod` label, when it has one.
    pub pod: Option<&'a str>,
}

/// The raw series of one replica (see [`ReplicaKey`]) between `from_ms` and `to_ms` at `step_ms`,
/// as [`range_from_prometheus`] reads a fleet's: the restriction is in the queries, so the
/// store sends nothing of the other replicas.
pub fn range_of_replica(
    rules: &Rules,
    live: &LiveOptions,
    replica: &ReplicaKey<'_>,
    (from_ms, to_ms, step_ms): (i64, i64, i64),
) -> Result<RangeSet> {
    let host = match replica.instance.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => replica.instance,
    };
    let promqls: Vec<String> = (rules.adapters.list.iter())
        .map(|a| {
            let all = adapter_selector(a);
            let inner = all.trim_end_matches('}');
            if a.kind == AdapterKind::Engine {
                return format!("{inner}, instance=\"{}\"}}", escape(replica.instance));
            }
            let by_host = format!(
                "{inner}, instance=~\"{}(:[0-9]+)?\"}}",
                escape(&regex_quote(host))
            );
            match replica.pod {
                Some(pod) => format!("{by_host} or {inner}, pod=\"{}\"}}", escape(pod)),
                None => by_host,
            }
        })
        .collect();
    let (set, notes, queries, slowest_query) =
        fetch(rules, live, &promqls, (from_ms, to_ms, step_ms))?;
    Ok(RangeSet {
        set,
        notes,
        queries,
        slowest_query,
    })
}

/// The points (series x steps) reading every adapter's raw series over the range would
/// fetch: series counted at both ends, as the raw plan counts them to cut its pieces.
pub fn raw_points(
    rules: &Rules,
    live: &LiveOptions,
    (from_ms, to_ms, step_ms): (i64, i64, i64),
) -> Result<u64> {
    let range = RangeQueries::new(live, from_ms, to_ms, step_ms)?;
    let promqls: Vec<String> = rules.adapters.list.iter().map(adapter_selector).collect();
    let steps = u64::try_from((to_ms - from_ms) / step_ms.max(1) + 1).unwrap_or(0);
    let counts = range.counts(&promqls)?;
    Ok(counts.iter().map(|n| n.saturating_mul(steps)).sum())
}

/// One series of a coarse answer: its labels and its points.
pub type CoarseSeries = crate::source::file::api_json::Row;

/// Each of `queries` as a range query over the range (a coarse step: the answers are small),
/// its series with their points; with the server's notes (warnings, partial answers).
pub fn coarse_range(
    live: &LiveOptions,
    queries: &[String],
    (from_ms, to_ms, step_ms): (i64, i64, i64),
) -> Result<(Vec<Vec<CoarseSeries>>, Vec<String>)> {
    let range = RangeQueries::new(live, from_ms, to_ms, step_ms)?;
    let chunks: Vec<Chunk> = (0..queries.len())
        .flat_map(|i| split_range(i, 1, (from_ms, to_ms, step_ms), MAX_STEPS))
        .collect();
    let url = live.url.clone();
    let answers = range.query_all(queries, chunks, move |i, text| {
        let (series, warnings) = crate::source::file::api_json::rows(&text, &url)?;
        Ok((i, series, warnings))
    });
    let mut out: Vec<Vec<CoarseSeries>> = vec![Vec::new(); queries.len()];
    let mut index: std::collections::HashMap<
        (usize, std::collections::BTreeMap<String, String>),
        usize,
    > = std::collections::HashMap::new();
    let mut notes = Vec::new();
    // In the order asked; a piece refused for its size (asked again in halves) has no answer.
    for (answer, _) in answers {
        let Some(answer) = answer else { continue };
        let (i, series, warnings) = answer?;
        for w in warnings {
            if !notes.contains(&w) {
                notes.push(w);
            }
        }
        for (labels, points) in series {
            // A query's pieces answer the same series: each found by its labels, not by a scan.
            match index.get(&(i, labels.clone())) {
                Some(&k) => out[i][k].1.extend(points),
                None => {
                    index.insert((i, labels.clone()), out[i].len());
                    out[i].push((labels, points));
                }
            }
        }
    }
    Ok((out, notes))
}

/// Every series adapter `a` reads: its metric-name prefixes and the metrics it reads beyond
/// them, as one selector.
fn adapter_selector(a: &AdapterSpec) -> String {
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
    format!("{{__name__=~\"{}\"}}", escape(&names.join("|")))
}

/// Points (series x steps) one range answer may hold: `LLM_DOCTOR_MAX_ANSWER_POINTS`, else
/// five million, about 110 MB of JSON. Prometheus refuses a query over 50 million by default
/// (`--query.max-samples`), and a day of a 64-replica fleet at 15 s is 74 million for vLLM's
/// series alone, so a long range is asked in pieces.
fn max_answer_points() -> u64 {
    std::env::var("LLM_DOCTOR_MAX_ANSWER_POINTS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&v| v > 0)
        .unwrap_or(5_000_000)
}

/// The value of a `count(...)` answer; 0 when it failed or is empty (the range query then
/// says what is wrong, or finds nothing).
fn series_count(answer: Result<Answer, Failure>) -> u64 {
    answer
        .ok()
        .and_then(|a| a.samples.first().map(|(_, v)| *v))
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map_or(0, |v| v as u64)
}

/// Steps one range may have (a year at 3 s): each is a sample of every series, and every
/// step of a postmortem is judged.
const MAX_RANGE_STEPS: i64 = 10_000_000;

/// Prometheus answers at most this many steps of a range query.
const MAX_STEPS: u64 = 11_000;

/// Range queries in flight at once: the answers held before they are parsed stay bounded
/// (at most this many times [`max_answer_points`]), and a few large queries already keep a
/// Prometheus busy. Over a day of 64 replicas (27 pieces) three took 27.3-27.9 s and 1.85 GB,
/// six 27.1-27.3 s and 2.0 GB.
const IN_FLIGHT: usize = 3;

/// One range query: an adapter's series over consecutive steps, both ends included.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Chunk {
    adapter: usize,
    from_ms: i64,
    to_ms: i64,
    /// Asked again once already, after it timed out.
    retried: bool,
}

impl Chunk {
    /// The chunk's steps in two runs, the first at least as long (it has two steps or more).
    fn halves(self, step_ms: i64) -> (Chunk, Chunk) {
        let steps = (self.to_ms - self.from_ms) / step_ms + 1;
        let split = self.from_ms + (steps + 1) / 2 * step_ms;
        (
            Chunk {
                to_ms: split - step_ms,
                ..self
            },
            Chunk {
                from_ms: split,
                ..self
            },
        )
    }
}

/// Adapter `adapter`'s range (`from`, `to`, `step`, in ms: the steps `from + k * step` up to
/// `to`) cut into consecutive chunks of at most `budget / series` steps (at least one, at most
/// [`MAX_STEPS`]). Chunks end at multiples of their length since the epoch, as the query
/// frontends of Thanos and Mimir split a range by interval: the same piece of another range
/// (a postmortem of an overlapping range) is the same query, which they cache and shard.
fn split_range(
    adapter: usize,
    series: u64,
    (from, to, step): (i64, i64, i64),
    budget: u64,
) -> Vec<Chunk> {
    let steps = (to - from) / step + 1;
    let per_chunk = (budget / series.max(1)).clamp(1, MAX_STEPS) as i64;
    let length = per_chunk * step;
    let mut out = Vec::new();
    let mut first = 0;
    while first < steps {
        let start = from + first * step;
        let boundary = (start.div_euclid(length) + 1) * length;
        let last = ((boundary - 1 - from).div_euclid(step)).clamp(first, steps - 1);
        out.push(Chunk {
            adapter,
            from_ms: start,
            to_ms: from + last * step,
            retried: false,
        });
        first = last + 1;
    }
    out
}

/// How a chunk ended: its answer (parsed, or the error), refused for its size, or timed out
/// (asked again once).
enum Done<T> {
    Answer(Chunk, Result<T>, Duration),
    Split(Chunk, Duration),
    Retry(Chunk, Duration),
}

/// Whether an error answer says the query ran out of time on the server (Prometheus' 503
/// `timeout`, a proxy's 504): the same query may pass when the server is less busy.
fn timed_out(status: u16, body: &str) -> bool {
    status == 504 || (status == 503 && body.contains("timeout"))
}

/// Whether an error answer refuses the query for the samples it would load (Prometheus'
/// `--query.max-samples`, VictoriaMetrics' `-search.maxSamplesPerQuery`) or the points a
/// subquery would make over the whole range (VictoriaMetrics evaluates a subquery's steps
/// across the range at once: `-search.maxPointsPerTimeseries`), which a shorter range may pass.
fn too_many_samples(status: u16, body: &str) -> bool {
    (400..500).contains(&status)
        && (body.contains("too many samples")
            || body.contains("maxSamplesPerQuery")
            || body.contains("maxPointsPerTimeseries"))
}

/// Range queries over one time range, sent together on a current-thread runtime.
struct RangeQueries<'a> {
    live: &'a LiveOptions,
    endpoint: reqwest::Url,
    /// The instant-query endpoint, for counting series.
    instant: reqwest::Url,
    client: reqwest::Client,
    headers: reqwest::header::HeaderMap,
    runtime: tokio::runtime::Runtime,
    from_ms: i64,
    to_ms: i64,
    step_ms: i64,
}

impl<'a> RangeQueries<'a> {
    fn new(live: &'a LiveOptions, from_ms: i64, to_ms: i64, step_ms: i64) -> Result<Self> {
        let instant = query_endpoint(&live.url)?;
        let endpoint = reqwest::Url::parse(&format!("{}_range", instant.as_str()))
            .map_err(|e| anyhow::anyhow!("--prometheus: {e}"))?;
        let client = client(live)?;
        let headers = header_map(&live.auth.headers)?;
        let runtime = crate::http::client_runtime()?;
        Ok(RangeQueries {
            live,
            endpoint,
            instant,
            client,
            headers,
            runtime,
            from_ms,
            to_ms,
            step_ms,
        })
    }

    /// The pieces to ask for: each adapter's range cut into consecutive runs of steps, so
    /// that no answer holds more than `budget` points (series x steps; at most 11,000 steps,
    /// Prometheus' limit per series). Series are counted at both ends of the range by instant
    /// queries (cheap: the index, one sample a series); an adapter counted at neither is asked
    /// in pieces of 11,000 steps (one for most ranges), which costs nothing where it is absent
    /// and still finds one that came and went in between. An error when the server cannot be
    /// reached at all.
    fn chunks(&self, promqls: &[String], budget: u64) -> Result<Vec<Chunk>> {
        let counts = self.counts(promqls)?;
        // The adapters with the most series first: their queries take longest, so they start
        // before the small ones take the slots.
        let mut by_size: Vec<(usize, u64)> = counts.into_iter().enumerate().collect();
        by_size.sort_by_key(|&(adapter, n)| (std::cmp::Reverse(n), adapter));
        Ok((by_size.into_iter())
            .flat_map(|(adapter, n)| {
                let steps = (self.from_ms, self.to_ms, self.step_ms);
                split_range(adapter, n, steps, budget)
            })
            .collect())
    }

    /// Each selector's series, counted at both ends of the range (the larger count).
    fn counts(&self, promqls: &[String]) -> Result<Vec<u64>> {
        let http = |ms: i64| Http {
            client: self.client.clone(),
            endpoint: self.instant.clone(),
            headers: self.headers.clone(),
            auth: self.live.auth.clone(),
            timeout: self.live.timeout,
            time: api_seconds(ms),
        };
        let (first, last) = (http(self.from_ms), http(self.to_ms));
        let (counts, unreachable) = self.runtime.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            for (i, promql) in promqls.iter().enumerate() {
                let count = format!("count({promql})");
                let (first, last) = (first.clone(), last.clone());
                set.spawn(async move {
                    let (a, b) =
                        tokio::join!(first.query(&count, false), last.query(&count, false));
                    let lost = |r: &Result<Answer, Failure>| match r {
                        Err(f) if f.unreachable => Some(f.message.clone()),
                        _ => None,
                    };
                    let why = lost(&a).and(lost(&b));
                    (i, series_count(a).max(series_count(b)), why)
                });
            }
            let mut counts = vec![0; promqls.len()];
            let mut unreachable = Vec::new();
            while let Some(done) = set.join_next().await {
                if let Ok((i, n, why)) = done {
                    counts[i] = n;
                    unreachable.extend(why);
                }
            }
            (counts, unreachable)
        });
        // Not one count answered: the range queries would only wait out their timeouts too.
        if !promqls.is_empty() && unreachable.len() == promqls.len() {
            bail!("{}: {}", self.live.url, unreachable[0]);
        }
        Ok(counts)
    }

    /// Every chunk's answer, handed to `parse` as soon as it arrives (on a blocking thread, so
    /// that parsing overlaps the queries still in flight), with how long the query itself
    /// took; at most [`IN_FLIGHT`] at once. A chunk the server refuses for holding too many
    /// samples (its own limit, lower than ours), or whose answer is larger than we read
    /// (a series count the two ends missed), is asked again as two halves, down to one step.
    /// An error when the server cannot be reached or does not answer 2xx, or when `parse`
    /// fails: nothing more is sent after the first.
    fn query_all<T: Send + 'static>(
        &self,
        promqls: &[String],
        chunks: Vec<Chunk>,
        parse: impl Fn(usize, String) -> Result<T> + Send + Sync + 'static,
    ) -> Vec<(Option<Result<T>>, Duration)> {
        let live = self.live;
        let timeout = format!("{}ms", live.timeout.as_millis());
        let step = format!("{}ms", self.step_ms);
        let request = |c: &Chunk| {
            form_post(
                &self.client,
                &self.endpoint,
                &self.headers,
                &live.auth,
                &[
                    ("query", promqls[c.adapter].as_str()),
                    ("start", &api_seconds(c.from_ms)),
                    ("end", &api_seconds(c.to_ms)),
                    ("step", &step),
                    ("timeout", &timeout),
                ],
            )
            .timeout(live.timeout)
        };
        let parse = std::sync::Arc::new(parse);
        // One answer parsed per core at a time: a parse holds several times its answer's
        // size while it works, and more at once would only take turns on the cores.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let parsers = std::sync::Arc::new(tokio::sync::Semaphore::new(cores));
        let url = live.url.clone();
        let step_ms = self.step_ms;
        self.runtime.block_on(async {
            let mut pending: std::collections::VecDeque<Chunk> = chunks.into();
            let mut set = tokio::task::JoinSet::new();
            let mut out = Vec::new();
            loop {
                while set.len() < IN_FLIGHT {
                    let Some(chunk) = pending.pop_front() else {
                        break;
                    };
                    let (parse, url) = (parse.clone(), url.clone());
                    let parsers = parsers.clone();
                    let promql = promqls[chunk.adapter].clone();
                    let request = request(&chunk);
                    set.spawn(async move {
                        let started = std::time::Instant::now();
                        let answer = async {
                            let response = (request.send().await)
                                .map_err(|e| (e.is_timeout(), error_chain(&e)))?;
                            let status = response.status();
                            let body = (super::http::read_capped(response).await)
                                .map_err(|e| (false, e))?;
                            Ok::<_, (bool, String)>((status, body))
                        }
                        .await;
                        let took = started.elapsed();
                        let text = match answer {
                            // Larger than we read: a shorter range is a smaller answer.
                            Err((_, e))
                                if super::http::over_cap(&e) && chunk.to_ms > chunk.from_ms =>
                            {
                                return Done::Split(chunk, took);
                            }
                            Err((true, _)) if !chunk.retried => return Done::Retry(chunk, took),
                            Err((_, e)) => Err(anyhow::anyhow!("{url}: {e}")),
                            Ok((status, bytes)) => {
                                let text = String::from_utf8(bytes).unwrap_or_else(|e| {
                                    String::from_utf8_lossy(e.as_bytes()).into_owned()
                                });
                                if status.is_success() {
                                    Ok(text)
                                } else if too_many_samples(status.as_u16(), &text)
                                    && chunk.to_ms > chunk.from_ms
                                {
                                    return Done::Split(chunk, took);
                                } else if timed_out(status.as_u16(), &text) && !chunk.retried {
                                    return Done::Retry(chunk, took);
                                } else {
                                    Err(anyhow::anyhow!(
                                        "{url} answered HTTP {status} for {promql}: {}",
                                        first_line(&text)
                                    ))
                                }
                            }
                        };
                        let i = chunk.adapter;
                        let result = match text {
                            Ok(text) => {
                                // Closed only when the runtime ends, after every task.
                                let _permit = parsers.acquire_owned().await;
                                tokio::task::spawn_blocking(move || parse(i, text))
                                    .await
                                    .unwrap_or_else(|e| {
                                        Err(anyhow::anyhow!("{url}: parsing failed: {e}"))
                                    })
                            }
                            Err(e) => Err(e),
                        };
                        Done::Answer(chunk, result, took)
                    });
                }
                let Some(done) = set.join_next().await else {
                    break;
                };
                match done {
                    Ok(Done::Answer(chunk, result, took)) => {
                        // The range fails with its first error: what is not sent yet is not.
                        if result.is_err() {
                            pending.clear();
                        }
                        out.push((chunk, Some(result), took));
                    }
                    Ok(Done::Retry(chunk, took)) => {
                        pending.push_front(Chunk {
                            retried: true,
                            ..chunk
                        });
                        out.push((chunk, None, took));
                    }
                    Ok(Done::Split(chunk, took)) => {
                        let (a, b) = chunk.halves(step_ms);
                        pending.push_front(b);
                        pending.push_front(a);
                        // The refused chunk's own slot holds no answer (only its time).
                        out.push((chunk, None, took));
                    }
                    Err(e) => {
                        pending.clear();
                        let lost = anyhow::anyhow!("{url}: a query task failed: {e}");
                        out.push((Chunk::default(), Some(Err(lost)), Duration::ZERO));
                    }
                }
            }
            // In the order asked, whatever order they came in: merges, notes and the first
            // error do not depend on timing.
            out.sort_by_key(|(c, _, _)| (c.adapter, c.from_ms, c.to_ms));
            out.into_iter().map(|(_, r, took)| (r, took)).collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The steps of a chunk list, in order.
    fn steps_of(chunks: &[Chunk], step: i64) -> Vec<i64> {
        chunks
            .iter()
            .flat_map(|c| (0..=(c.to_ms - c.from_ms) / step).map(move |k| c.from_ms + k * step))
            .collect()
    }

    /// However a range is cut, its chunks hold every step once, in order, none more than the
    /// budget allows or Prometheus answers; halving keeps the steps too.
    #[test]
    fn chunks_hold_every_step_once_within_the_budget() {
        for (from, to, step) in [(0, 0, 15), (1000, 86_400_000, 15_000), (7, 7 + 99 * 3, 3)] {
            let want: Vec<i64> = (0..=(to - from) / step).map(|k| from + k * step).collect();
            for (series, budget) in [
                (0, 5),
                (1, 1),
                (3, 10),
                (800, 5_000_000),
                (12_800, 5_000_000),
                (5, u64::MAX),
            ] {
                let chunks = split_range(2, series, (from, to, step), budget);
                assert_eq!(
                    steps_of(&chunks, step),
                    want,
                    "{series} series, budget {budget}"
                );
                for c in &chunks {
                    let n = (c.to_ms - c.from_ms) / step + 1;
                    assert!(n as u64 <= MAX_STEPS && c.adapter == 2);
                    assert!(n == 1 || n as u64 * series.max(1) <= budget, "{c:?}");
                }
                for c in chunks.iter().filter(|c| c.to_ms > c.from_ms) {
                    let (a, b) = c.halves(step);
                    assert_eq!(steps_of(&[a, b], step), steps_of(&[*c], step));
                    assert!(a.to_ms >= a.from_ms && b.to_ms >= b.from_ms);
                }
            }
        }
        // A day of 64 replicas' vLLM series at 15 s: 74 million points, in 15 answers.
        assert_eq!(
            split_range(0, 12_800, (0, 86_400_000 - 15_000, 15_000), 5_000_000).len(),
            15
        );
    }

    /// Pieces end on multiples of their length since the epoch, whatever the range's start.
    #[test]
    fn pieces_are_aligned_to_their_length() {
        let step = 60_000;
        let chunks = split_range(0, 1000, (7 * step, 7 * step + 99 * step, step), 30_000);
        // 30 steps a piece: boundaries at multiples of 30 minutes.
        let bounds: Vec<(i64, i64)> = chunks
            .iter()
            .map(|c| (c.from_ms / step, c.to_ms / step))
            .collect();
        assert_eq!(bounds, vec![(7, 29), (30, 59), (60, 89), (90, 106)]);
    }

    #[test]
    fn a_server_timeout_is_asked_again() {
        let prometheus = r#"{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}"#;
        assert!(timed_out(503, prometheus));
        assert!(timed_out(504, "gateway timeout"));
        assert!(!timed_out(
            503,
            r#"{"status":"error","errorType":"unavailable"}"#
        ));
        assert!(!timed_out(422, prometheus));
    }

    #[test]
    fn only_a_refusal_for_its_samples_asks_again_in_halves() {
        let prometheus = r#"{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory in query execution"}"#;
        assert!(too_many_samples(422, prometheus));
        assert!(too_many_samples(
            422,
            "cannot select more than -search.maxSamplesPerQuery=1000 samples"
        ));
        assert!(too_many_samples(
            422,
            "too many points for the given step=1000, start=1 and end=172802: 172802; cannot exceed -search.maxPointsPerTimeseries=30000"
        ));
        assert!(
            !too_many_samples(503, prometheus),
            "a server error is not the query's size"
        );
        assert!(!too_many_samples(400, r#"{"error":"parse error"}"#));
    }
}
