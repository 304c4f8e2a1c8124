//! `record --prometheus`: the raw series a later `diagnose FILE.om` needs, as range queries.

use anyhow::{bail, Context, Result};

use super::assemble::first_line;
use super::http::{client, form_post, header_map, query_endpoint, LiveOptions};
use crate::rules::Rules;
use crate::signal::adapter::AdapterSpec;
use crate::signal::promql::{escape, regex_quote};
use crate::source::live::scrape::error_chain;
use crate::target::{self};

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
    let range = RangeQueries::new(live, from_ms, to_ms, step_ms)?;
    let mut set: Option<crate::signal::series::SeriesSet> = None;
    let mut notes = Vec::new();
    for a in &rules.adapters.list {
        let promql = adapter_selector(a);
        let text = range.query(&promql)?;
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

/// Range queries over one time range, sent one at a time on a current-thread runtime.
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

    /// The answer's text; errors when the server cannot be reached or does not answer 2xx.
    fn query(&self, promql: &str) -> Result<String> {
        let live = self.live;
        let seconds = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
        let (start, end) = (seconds(self.from_ms), seconds(self.to_ms));
        let (step, timeout) = (
            format!("{}ms", self.step_ms),
            format!("{}ms", live.timeout.as_millis()),
        );
        let request = form_post(
            &self.client,
            &self.endpoint,
            &self.headers,
            &live.auth,
            &[
                ("query", promql),
                ("start", &start),
                ("end", &end),
                ("step", &step),
                ("timeout", &timeout),
            ],
        )
        .timeout(live.timeout);
        let answer = self.runtime.block_on(async {
            let response = request.send().await?;
            let status = response.status();
            Ok::<_, reqwest::Error>((status, response.bytes().await?))
        });
        let (status, bytes) =
            answer.map_err(|e| anyhow::anyhow!("{}: {}", live.url, error_chain(&e)))?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if !status.is_success() {
            bail!(
                "{} answered HTTP {status} for {promql}: {}",
                live.url,
                first_line(&text)
            );
        }
        Ok(text)
    }
}
