//! `record --prometheus`: the raw series a later `diagnose FILE.om` needs, as range queries.

use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::assemble::first_line;
use super::http::{client, form_post, header_map, query_endpoint, LiveOptions};
use crate::rules::Rules;
use crate::signal::adapter::AdapterSpec;
use crate::signal::promql::{escape, regex_quote};
use crate::source::live::scrape::error_chain;
use crate::target::{self};

/// The raw series of a range, as [`range_from_prometheus`] read them, with how long its
/// queries took.
pub struct RangeSet {
    /// Every series of the present adapters (those the selector keeps, with their GPUs and
    /// hosts).
    pub set: crate::signal::series::SeriesSet,
    /// Server warnings, partial answers.
    pub notes: Vec<String>,
    /// Range queries sent.
    pub queries: usize,
    /// The slowest of them.
    pub slowest_query: Duration,
}

/// Records the raw series a later `diagnose FILE.om` needs, from Prometheus, between `from_ms`
/// and `to_ms` at `step_ms`: see [`range_from_prometheus`]. Returns OpenMetrics text
/// (timestamps in seconds, `# EOF`) and notes (server warnings, partial answers).
pub fn record_from_prometheus(
    rules: &Rules,
    live: &LiveOptions,
    selector: Option<&crate::signal::selector::Selector>,
    from_ms: i64,
    to_ms: i64,
    step_ms: i64,
) -> Result<(String, Vec<String>)> {
    let got = range_from_prometheus(rules, live, selector, from_ms, to_ms, step_ms)?;
    Ok((crate::source::file::openmetrics::write(&got.set), got.notes))
}

/// The raw series of every adapter between `from_ms` and `to_ms` at `step_ms`: one range
/// query per adapter (its metric-name prefixes), all in flight at once, the selector applied to
/// replicas as `diagnose --prometheus` applies it, and each replica's joined GPU and host
/// series kept with it.
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
    let points = (to_ms - from_ms) / step_ms + 1;
    if points > 11_000 {
        bail!("{points} points per series: Prometheus answers at most 11,000; raise --step or shorten the range");
    }
    let range = RangeQueries::new(live, from_ms, to_ms, step_ms)?;
    let promqls: Vec<String> = rules.adapters.list.iter().map(adapter_selector).collect();
    let sources: Vec<String> = (rules.adapters.list.iter())
        .map(|a| format!("{} ({})", live.url, a.name))
        .collect();
    // Each answer is parsed as it arrives, beside the queries still in flight.
    let answers = range.query_all(&promqls, move |i, text| {
        // An empty answer just means this engine or exporter is not there.
        if text.contains("\"result\":[]") {
            return Ok(None);
        }
        let parsed = crate::source::file::api_json::parse_with_warnings(&text, &sources[i])
            .map_err(anyhow::Error::new)?;
        Ok(Some(parsed))
    });
    let queries = answers.len();
    let slowest_query = answers.iter().map(|(_, d)| *d).max().unwrap_or_default();
    let mut set: Option<crate::signal::series::SeriesSet> = None;
    let mut notes = Vec::new();
    for (answer, _) in answers {
        let Some(parsed) = answer? else { continue };
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
    Ok(RangeSet {
        set,
        notes,
        queries,
        slowest_query,
    })
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

/// Range queries over one time range, sent together on a current-thread runtime.
struct RangeQueries<'a> {
    live: &'a LiveOptions,
    endpoint: reqwest::Url,
    client: reqwest::Client,
    headers: reqwest::header::HeaderMap,
    runtime: tokio::runtime::Runtime,
    from_ms: i64,
    to_ms: i64,
    step_ms: i64,
}

impl<'a> RangeQueries<'a> {
    fn new(live: &'a LiveOptions, from_ms: i64, to_ms: i64, step_ms: i64) -> Result<Self> {
        let query = query_endpoint(&live.url)?;
        let endpoint = reqwest::Url::parse(&format!("{}_range", query.as_str()))
            .map_err(|e| anyhow::anyhow!("--prometheus: {e}"))?;
        let client = client(live)?;
        let headers = header_map(&live.auth.headers)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the HTTP runtime")?;
        Ok(RangeQueries {
            live,
            endpoint,
            client,
            headers,
            runtime,
            from_ms,
            to_ms,
            step_ms,
        })
    }

    /// Every query's answer, handed to `parse` as soon as it arrives (on a blocking thread, so
    /// that parsing overlaps the queries still in flight), and how long the query itself took;
    /// in the order given, all in flight at once. An error when the server cannot be reached
    /// or does not answer 2xx, or when `parse` fails.
    fn query_all<T: Send + 'static>(
        &self,
        promqls: &[String],
        parse: impl Fn(usize, String) -> Result<T> + Send + Sync + 'static,
    ) -> Vec<(Result<T>, Duration)> {
        let live = self.live;
        let seconds = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
        let (start, end) = (seconds(self.from_ms), seconds(self.to_ms));
        let (step, timeout) = (
            format!("{}ms", self.step_ms),
            format!("{}ms", live.timeout.as_millis()),
        );
        let requests: Vec<_> = promqls
            .iter()
            .map(|promql| {
                form_post(
                    &self.client,
                    &self.endpoint,
                    &self.headers,
                    &live.auth,
                    &[
                        ("query", promql.as_str()),
                        ("start", &start),
                        ("end", &end),
                        ("step", &step),
                        ("timeout", &timeout),
                    ],
                )
                .timeout(live.timeout)
            })
            .collect();
        let parse = std::sync::Arc::new(parse);
        let url = live.url.clone();
        let timed = self.runtime.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            for (i, request) in requests.into_iter().enumerate() {
                let (parse, url, promql) = (parse.clone(), url.clone(), promqls[i].clone());
                set.spawn(async move {
                    let started = std::time::Instant::now();
                    let answer = async {
                        let response = request.send().await.map_err(|e| error_chain(&e))?;
                        let status = response.status();
                        Ok::<_, String>((status, super::http::read_capped(response).await?))
                    }
                    .await;
                    let took = started.elapsed();
                    let text = answer.map_err(|e| anyhow::anyhow!("{url}: {e}")).and_then(
                        |(status, bytes)| {
                            let text = String::from_utf8(bytes).unwrap_or_else(|e| {
                                String::from_utf8_lossy(e.as_bytes()).into_owned()
                            });
                            if !status.is_success() {
                                bail!(
                                    "{url} answered HTTP {status} for {promql}: {}",
                                    first_line(&text)
                                );
                            }
                            Ok(text)
                        },
                    );
                    let result = match text {
                        Ok(text) => tokio::task::spawn_blocking(move || parse(i, text))
                            .await
                            .unwrap_or_else(|e| Err(anyhow::anyhow!("{url}: parsing failed: {e}"))),
                        Err(e) => Err(e),
                    };
                    (i, result, took)
                });
            }
            let mut out: Vec<Option<_>> = (0..promqls.len()).map(|_| None).collect();
            while let Some(done) = set.join_next().await {
                if let Ok((i, result, took)) = done {
                    out[i] = Some((result, took));
                }
            }
            out
        });
        timed
            .into_iter()
            .enumerate()
            .map(|(i, done)| {
                done.unwrap_or_else(|| {
                    let lost =
                        anyhow::anyhow!("{}: the query for {} was lost", live.url, promqls[i]);
                    (Err(lost), Duration::ZERO)
                })
            })
            .collect()
    }
}
