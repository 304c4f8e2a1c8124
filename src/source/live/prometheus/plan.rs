//! The queries of one triage: discovery first, then each present adapter's signals and gauge
//! facts (a gauge's statistics in one query), sent concurrently as answers come in.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::answer::{Answer, Failure};
use super::http::Http;
use super::labels::{engine_replicas, label};
use crate::signal::adapter::eval::{reads_gauge, Stat};
use crate::signal::adapter::spec::{Expr, SeriesSelector};
use crate::signal::adapter::{AdapterKind, AdapterSpec, Adapters};
use crate::signal::promql;
use crate::signal::promql::{escape, regex_quote};
use crate::target::{IDENTITY_LABELS, JOIN_LABELS};

/// Labels engine queries aggregate by: the replica is the pod, else the instance.
const ENGINE_BY: &[&str] = &["pod", "instance"];
/// Why a query was sent; how its answer is used.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Purpose {
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
    /// The raw samples in the window of the metrics signal `.1` of adapter `.0` reads, or their
    /// histograms' bucket rates (see [`from_bucket_rates`]), for a signal computed from them as
    /// the file reader computes it (see [`from_samples`]).
    Samples(usize, String),
}

#[derive(Debug, Clone)]
pub(super) struct Query {
    pub(super) purpose: Purpose,
    pub(super) promql: String,
    /// The PromQL shown as the values' provenance: for gauges, the last value's query alone.
    pub(super) shown: String,
    /// Other purposes the same PromQL answers (a histogram's bucket rates serve its p50, p99
    /// and floor), each with the PromQL it shows: sent once, the answer filed under each.
    pub(super) shared_with: Vec<(Purpose, String)>,
}

impl Query {
    pub(super) fn new(purpose: Purpose, promql: String) -> Query {
        Query {
            purpose,
            shown: promql.clone(),
            promql,
            shared_with: Vec::new(),
        }
    }
}

/// Queries with the same PromQL merged into the first: one request, its answer filed under
/// every purpose.
fn merge_identical(queries: Vec<Query>) -> Vec<Query> {
    let mut out: Vec<Query> = Vec::with_capacity(queries.len());
    for q in queries {
        match out.iter_mut().find(|o| o.promql == q.promql) {
            Some(first) => first.shared_with.push((q.purpose, q.shown)),
            None => out.push(q),
        }
    }
    out
}

/// Answers by purpose, with the PromQL that was sent and the one to show.
pub(super) struct Answers {
    pub(super) by_purpose: BTreeMap<Purpose, (Query, Result<Answer, Failure>)>,
    pub(super) queries: usize,
    pub(super) slowest: Duration,
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
pub(super) const STAT_LABEL: &str = "llm_doctor_stat";

/// The statistic an answer's series holds (unmarked: the last value).
pub(super) fn stat_of(labels: &BTreeMap<String, String>) -> usize {
    let mark = label(labels, STAT_LABEL);
    STATS.iter().position(|(_, m)| *m == mark).unwrap_or(0)
}

/// The index of `stat` in [`STATS`].
pub(super) fn stat_index(stat: Stat) -> usize {
    STATS.iter().position(|(s, _)| *s == stat).unwrap_or(0)
}

/// What to ask, given the adapters and the options.
pub(super) struct Plan<'a> {
    pub(super) adapters: &'a Adapters,
    /// The window as a PromQL duration.
    pub(super) window: String,
    pub(super) selector: Option<&'a crate::signal::selector::Selector>,
    /// `--fact`: may name the value of an adapter's pick, which then needs no `topk`.
    pub(super) facts: &'a [(String, String)],
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
                    matchers = instance_matcher(&instances);
                }
            }
        }
        // Picks a fact names become plain matchers; the others are chosen by the query itself.
        let named: crate::signal::adapter::spec::Picks = a
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
            let Some(q) = signal_query(a, written, &named, &self.window, &matchers) else {
                continue;
            };
            let purpose = if q.from_samples {
                Purpose::Samples(i, name.clone())
            } else {
                Purpose::Signal(i, name.clone())
            };
            out.push(Query {
                purpose,
                promql: q.promql,
                shown: q.shown,
                shared_with: Vec::new(),
            });
        }
        if engine {
            for (fact, selector) in &a.gauge_facts {
                out.push(Query::new(
                    Purpose::GaugeFact(i, fact.clone()),
                    gauge_fact_query(a, selector, &self.window, &matchers),
                ));
            }
        }
        merge_identical(out)
    }
}

/// The matcher that restricts engine queries to the selected replicas' instances, written as
/// Grafana writes a multi-value variable into a regex matcher (each value quoted, several in
/// parentheses), so that a dashboard's panel with those replicas selected sends a triage's bytes.
fn instance_matcher(instances: &BTreeSet<&str>) -> String {
    let alternatives: Vec<String> = instances.iter().map(|i| regex_quote(i)).collect();
    let regex = match alternatives.as_slice() {
        [one] => one.clone(),
        several => format!("({})", several.join("|")),
    };
    format!("instance=~\"{}\"", escape(&regex))
}

/// A signal's query in a triage: what is sent, and what is shown as the value's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalQuery {
    /// The PromQL sent.
    pub promql: String,
    /// The PromQL shown as the value's source: the value's own PromQL form where it has one
    /// (a histogram's quantile, a gauge's last value), even when the value is computed here
    /// from the bucket rates or the raw samples `promql` asks for.
    pub shown: String,
    /// Whether the value is computed here from the answer's buckets or samples (see
    /// [`from_samples`]) rather than read from it.
    pub from_samples: bool,
}

/// The labels an adapter's queries keep: the replica for engines, the join labels for exporters.
fn aggregation_labels(a: &AdapterSpec) -> &'static [&'static str] {
    if a.kind == AdapterKind::Engine {
        ENGINE_BY
    } else {
        JOIN_LABELS
    }
}

/// The query a triage sends for signal `written` of adapter `a` over `window` (a PromQL
/// duration), with the picks a fact names already resolved (`named`) and `matchers` added to
/// engine selectors; None for a constant or a pick that cannot be resolved. Shared with the
/// dashboards `rules export grafana` writes, whose panels must show what a triage judged.
pub fn signal_query(
    a: &AdapterSpec,
    written: &Expr,
    named: &crate::signal::adapter::spec::Picks,
    window: &str,
    matchers: &str,
) -> Option<SignalQuery> {
    if matches!(written, Expr::Const(_)) {
        return None;
    }
    let by = aggregation_labels(a);
    let matchers = if a.kind == AdapterKind::Engine {
        matchers
    } else {
        ""
    };
    let options = |stat| promql::QueryOptions {
        window,
        by,
        matchers,
        stat,
        picks: &a.picks,
        ..promql::QueryOptions::default()
    };
    if from_samples(written) {
        let promql = if from_bucket_rates(written) {
            bucket_rates_query(written, matchers, window, by)
        } else {
            raw_samples_query(written, matchers, window)
        };
        // Shown as the quantile (or last value) it is, where PromQL has one.
        let shown = if promql::expressible(written) {
            promql::compile(written, &options(Stat::Last))
        } else {
            promql.clone()
        };
        return Some(SignalQuery {
            promql,
            shown,
            from_samples: true,
        });
    }
    let expr = written.with_picks(named).ok()?;
    let shown = promql::compile(&expr, &options(Stat::Last));
    let promql = if reads_gauge(&expr) {
        STATS
            .iter()
            .map(|(stat, mark)| {
                format!(
                    "label_replace({}, \"{STAT_LABEL}\", \"{mark}\", \"\", \"\")",
                    promql::compile(&expr, &options(*stat))
                )
            })
            .collect::<Vec<_>>()
            .join(" or ")
    } else {
        shown.clone()
    };
    Some(SignalQuery {
        promql,
        shown,
        from_samples: false,
    })
}

/// The query a triage sends for an engine's gauge fact (its largest value in the window's
/// last sample).
pub fn gauge_fact_query(
    a: &AdapterSpec,
    selector: &SeriesSelector,
    window: &str,
    matchers: &str,
) -> String {
    promql::compile(
        &gauge_fact_expr(selector),
        &promql::QueryOptions {
            window,
            by: aggregation_labels(a),
            matchers,
            stat: Stat::Last,
            picks: &a.picks,
            ..promql::QueryOptions::default()
        },
    )
}

/// Whether a signal is computed by the file reader's own evaluation, from its histograms'
/// bucket rates (see [`from_bucket_rates`]) or from its metrics' raw samples in the window:
/// where PromQL has no form for it, and where it is a statistic of
/// the window's samples one by one (the window statistics of a gauge ratio or difference, the
/// share of samples with a bit set), whose per-sample subqueries (a step a second over the
/// window, whatever the scrape interval) were the costliest queries a triage sent.
pub(super) fn from_samples(expr: &Expr) -> bool {
    from_bucket_rates(expr)
        || !promql::expressible(expr)
        || (reads_gauge(expr) && expr.stats_per_instant())
        || expr.any(&|e| matches!(e, Expr::BitShare(_)))
}

/// Whether a signal reads only its histograms' bucket rates over the window (quantiles and
/// their floors, without a pick): then the rates, summed by bound per target, are asked for
/// and evaluated as totals by the reader's code. One query serves a histogram's p50, p99 and
/// floor (the same PromQL, sent once: see [`merge_identical`]), where `histogram_quantile`
/// needed a query each, and histograms were the costliest queries of a triage; a floor has
/// no PromQL form at all (a bucket's bound is a label).
pub(super) fn from_bucket_rates(expr: &Expr) -> bool {
    let (mut buckets, mut others) = (0, 0);
    expr.visit(&mut |e| match e {
        Expr::Quantile(_) | Expr::QuantileFloor(_) => buckets += 1,
        e if e.selector().is_some() => others += 1,
        _ => {}
    });
    buckets > 0 && others == 0 && expr.picks().is_empty()
}

/// Each bucket's rate over the window, summed by bound, by the labels that route a target
/// (`by`) and by those the selector filters on (the answer's size is targets times buckets),
/// then named again (aggregation drops the name) so that the reader's evaluation selects them
/// as it selects a recording's series.
fn bucket_rates_query(expr: &Expr, matchers: &str, window: &str, by: &[&str]) -> String {
    let mut parts: Vec<String> = Vec::new();
    expr.visit(&mut |e| {
        let Some(sel) = e.selector() else { return };
        let mut labels: Vec<&str> = by.to_vec();
        labels.push("le");
        labels.extend(sel.matchers.keys().map(String::as_str));
        labels.extend(sel.where_not.keys().map(String::as_str));
        labels.sort_unstable();
        labels.dedup();
        for n in sel.metric.values() {
            let name = escape(&format!("{n}_bucket"));
            let mut m = vec![format!("__name__=\"{name}\"")];
            if !matchers.is_empty() {
                m.push(matchers.to_string());
            }
            let part = format!(
                "label_replace(sum by ({}) (rate({{{}}}[{window}])), \"__name__\", \"{name}\", \"\", \"\")",
                labels.join(", "),
                m.join(", ")
            );
            if !parts.contains(&part) {
                parts.push(part);
            }
        }
    });
    parts.join(" or ")
}

/// The raw samples in the window of every metric `expr` reads (a range vector), restricted by
/// `matchers`, which the file reader's own evaluation then reads as it reads a recording.
fn raw_samples_query(expr: &Expr, matchers: &str, window: &str) -> String {
    let mut names: Vec<String> = Vec::new();
    // One selector: its label filters narrow the answer too (the idle counters of a host's
    // cores, not every mode of them); several may filter one metric differently.
    let mut selectors = Vec::new();
    expr.visit(&mut |e| selectors.extend(e.selector()));
    let own = match selectors[..] {
        [sel] => {
            let mut m = promql::matcher_list(&sel.matchers, false);
            m.extend(promql::matcher_list(&sel.where_not, true));
            m
        }
        _ => Vec::new(),
    };
    expr.visit(&mut |e| {
        let Some(sel) = e.selector() else { return };
        // A histogram is read from its buckets, a mean from its sum and count.
        let suffixes: &[&str] = match e {
            Expr::Quantile(_) | Expr::QuantileFloor(_) => &["_bucket"],
            Expr::HistMean(_) => &["_sum", "_count"],
            _ => &[""],
        };
        for n in sel.metric.values() {
            for suffix in suffixes {
                let name = regex_quote(&format!("{n}{suffix}"));
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    });
    let mut m = vec![format!("__name__=~\"{}\"", escape(&names.join("|")))];
    m.extend(own);
    if !matchers.is_empty() {
        m.push(matchers.to_string());
    }
    format!("{{{}}}[{window}]", m.join(", "))
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

/// The adapter's discovery: its series grouped by the labels that identify a target. Only the
/// metrics its signals read are counted (a histogram by its `_count`), not every name under its
/// prefix: node_exporter alone exports hundreds of metrics per host that no signal reads, and
/// the discovery query was the slowest of a triage, which every signal query waits for.
fn discovery_query(a: &AdapterSpec) -> String {
    format!(
        "count by ({}) ({})",
        discovery_labels(a).join(", "),
        discovery_selector(a)
    )
}

/// The selector of the metrics an adapter's discovery counts (see [`discovery_query`]).
pub fn discovery_selector(a: &AdapterSpec) -> String {
    // A replica is found by its engine's own metrics: names every job has (`up`, the process
    // collector's) would make a target of each job.
    let own = |n: &str| a.detect.is_empty() || a.detect.iter().any(|p| n.starts_with(p.as_str()));
    let mut names: BTreeSet<String> = BTreeSet::new();
    for expr in a.signals.values() {
        for n in expr.metric_names().into_iter().filter(|n| own(n)) {
            names.insert(regex_quote(n));
            names.insert(regex_quote(&format!("{n}_count")));
        }
    }
    let alternatives: Vec<String> = if names.is_empty() {
        a.detect
            .iter()
            .map(|p| format!("{}.*", regex_quote(p)))
            .collect()
    } else {
        names.into_iter().collect()
    };
    format!("{{__name__=~\"{}\"}}", escape(&alternatives.join("|")))
}

/// Sends every query: the initial ones at once, each adapter's signals as soon as its
/// discovery answers. Errors when the server is unreachable or answers no discovery query.
pub(super) async fn run(plan: &Plan<'_>, http: &Http, limit: usize, url: &str) -> Result<Answers> {
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
                let as_series = matches!(q.purpose, Purpose::Samples(..));
                let outcome = http.query(&q.promql, as_series).await;
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
        for (purpose, shown) in &q.shared_with {
            let also = Query {
                purpose: purpose.clone(),
                promql: q.promql.clone(),
                shown: shown.clone(),
                shared_with: Vec::new(),
            };
            answers
                .by_purpose
                .insert(purpose.clone(), (also, outcome.clone()));
        }
        answers.by_purpose.insert(q.purpose.clone(), (q, outcome));
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Window statistics of a gauge ratio are read from raw samples (as the file reader takes
    /// them), a plain gauge's from its four compiled statistics, a counter rate as PromQL.
    #[test]
    fn ratio_statistics_come_from_raw_samples() {
        let rules = crate::rules::RuleFiles::shipped().load().unwrap();
        let signal =
            |adapter: &str, name: &str| rules.adapters.get(adapter).unwrap().signals[name].clone();
        assert!(from_samples(&signal("dcgm", "gpu_memory_used_ratio")));
        assert!(!from_samples(&signal("vllm", "kv_cache_usage_ratio")));
        assert!(!from_samples(&signal("vllm", "preemptions_per_second")));
        assert!(!from_samples(&signal("llamacpp", "queued_share_ratio")));
        assert!(from_samples(&signal(
            "llamacpp",
            "batch_scaling_efficiency_ratio"
        )));
        assert!(from_samples(&signal("dcgm", "gpu_power_throttle_ratio")));
        // Histogram quantiles from their bucket rates, except where an entry is picked.
        assert!(from_bucket_rates(&signal("vllm", "ttft_p99_seconds")));
        assert!(!from_samples(&signal("triton", "ttft_p99_seconds")));
    }

    /// A quantile's floor is a bucket's bound, which PromQL cannot return as a value: it is
    /// computed from the rates of the histogram's buckets (every metric name it may read),
    /// named again for the reader's selection.
    #[test]
    fn a_quantile_floor_reads_the_bucket_rates() {
        let rules = crate::rules::RuleFiles::shipped().load().unwrap();
        let floor = rules.adapters.get("vllm").unwrap().signals["itl_p99_floor_seconds"].clone();
        assert!(from_samples(&floor) && from_bucket_rates(&floor));
        assert_eq!(
            bucket_rates_query(&floor, r#"instance="a""#, "5m", &["pod", "instance"]),
            concat!(
                r#"label_replace(sum by (instance, le, pod) (rate({__name__="vllm:inter_token_latency_seconds_bucket", instance="a"}[5m])), "__name__", "vllm:inter_token_latency_seconds_bucket", "", "")"#,
                " or ",
                r#"label_replace(sum by (instance, le, pod) (rate({__name__="vllm:time_per_output_token_seconds_bucket", instance="a"}[5m])), "__name__", "vllm:time_per_output_token_seconds_bucket", "", "")"#
            )
        );
        // A batch scaling reads raw samples.
        let scaling = rules.adapters.get("llamacpp").unwrap().signals
            ["batch_scaling_efficiency_ratio"]
            .clone();
        assert!(!from_bucket_rates(&scaling));
    }

    /// Raw samples are read under the names a recording has: a histogram's buckets, a mean's
    /// sum and count, a gauge as it is.
    #[test]
    fn raw_samples_are_asked_for_by_the_names_series_carry() {
        let ratio: Expr = serde_yaml::from_str(
            "{div: [{hist_mean: {metric: d}}, {add: [{gauge: {metric: g}}, {quantile: {metric: h, q: 0.5}}]}]}",
        )
        .unwrap();
        assert!(from_samples(&ratio) && !from_bucket_rates(&ratio));
        assert_eq!(
            raw_samples_query(&ratio, "", "5m"),
            r#"{__name__=~"d_sum|d_count|g|h_bucket"}[5m]"#
        );
        // One selector's own filters narrow the query.
        let idle: Expr = serde_yaml::from_str(
            "{max: {share_below: {metric: c, where: {mode: idle}, where_not: {cpu: x}, below: 0.05}}}",
        )
        .unwrap();
        assert_eq!(
            raw_samples_query(&idle, r#"instance="a""#, "5m"),
            r#"{__name__=~"c", mode="idle", cpu!="x", instance="a"}[5m]"#
        );
    }

    /// Signals read from samples are evaluated per target without the picks a recording's
    /// reader resolves first (Triton's model entry): none may have one.
    #[test]
    fn no_signal_read_from_samples_has_a_pick() {
        let rules = crate::rules::RuleFiles::shipped().load().unwrap();
        for a in &rules.adapters.list {
            for (name, expr) in &a.signals {
                if from_samples(expr) {
                    assert!(expr.picks().is_empty(), "{}: {name}", a.name);
                }
            }
        }
    }

    #[test]
    fn discovery_groups_by_identity_and_join_labels() {
        let rules = crate::rules::RuleFiles::shipped().load().unwrap();
        let vllm = rules.adapters.get("vllm").unwrap();
        let q = discovery_query(vllm);
        assert!(
            q.starts_with(
                r#"count by (Hostname, hostname, instance, job, model, model_name, namespace, pod) ({__name__=~""#
            ),
            "{q}"
        );
        // The metrics signals read, a histogram by its _count; not every name under the prefix.
        assert!(q.contains("vllm:num_requests_running|"), "{q}");
        assert!(q.contains("vllm:time_to_first_token_seconds_count"), "{q}");
        assert!(!q.contains("vllm:.*"), "{q}");
        let node = discovery_query(rules.adapters.get("node").unwrap());
        assert!(
            node.contains("node_cpu_seconds_total") && !node.contains("node_.*"),
            "{node}"
        );
        let dcgm = discovery_query(rules.adapters.get("dcgm").unwrap());
        assert!(
            dcgm.starts_with(r#"count by (Hostname, hostname, instance, pod) ({__name__=~""#),
            "{dcgm}"
        );
    }
}
