//! Compiles adapter expressions (`rules/signals/*.yaml`) to PromQL.
//!
//! Live triage against Prometheus (or Thanos, Mimir, VictoriaMetrics) must compute every signal
//! exactly as the file reader does, from the same definition: this module is the second
//! interpreter of the `Expr` tree, emitting the query Prometheus evaluates instead of evaluating
//! samples itself. The mapping keeps the reader's semantics:
//!
//! | expression | PromQL |
//! | --- | --- |
//! | `gauge` | `last_over_time(x[w])` (or `avg_`/`max_`/`min_over_time` for window statistics) |
//! | `rate`, `increase` | `rate(x[w])`, `increase(x[w])` |
//! | `quantile` | `histogram_quantile(q, sum by (le, <target>) (rate(x_bucket[w])))` |
//! | `quantile_floor` | none: a bucket's bound is a label, so live triage fetches the bucket rates |
//! | `hist_mean` | `sum by (<target>) (rate(x_sum[w])) / (sum by (<target>) (rate(x_count[w])) > 0)` |
//! | `bit_share` | share of the window's samples with any mask bit set, via a subquery |
//! | `share_below` | none in one query: live triage fetches the counter's raw samples |
//! | window statistics of a `div` or `sub` | the statistic of the value at each step, via a subquery |
//! | `queued_share` | steps with requests queued over steps busy, via subqueries |
//! | `div` | `a / (b != 0)`: a zero denominator gives no value, never Inf |
//! | alternatives (`metric: [new, old]`, `first`) | `a or b`: the first that has series |
//! | aggregations | `sum by (<target>) (...)` and so on, so one query serves a whole fleet |
//! | `zero_when_absent: [a, b]` | `(a) or (0 * (b))`: a sum of counters with no series is zero where its sibling has series |
//! | `pick: p` on a selector | `(x and on (<target>, label) topk by (<target>) (1, sum by (<target>, label) (rate(largest[w]))))`, or a plain matcher when the pick's fact is given |

use std::collections::BTreeMap;

use crate::signal::adapter::eval::Stat;
use crate::signal::adapter::spec::{Expr, Matchers, PickSpec, SeriesSelector};

/// No picks: for expressions that use none.
static NO_PICKS: BTreeMap<String, PickSpec> = BTreeMap::new();

/// How to compile.
#[derive(Debug, Clone, Copy)]
pub struct QueryOptions<'a> {
    /// Range of rates, window functions and subqueries, a Prometheus duration (`5m`). Live
    /// triage passes its window one millisecond short (`299999ms`): Prometheus before 3.0
    /// includes a sample on a range's left edge, which the reader's left-open window (like
    /// Prometheus 3's) does not, and with that one sample more a rate can move by a whole
    /// scrape interval's worth.
    pub window: &'a str,
    /// Labels that identify a target; every aggregation keeps them (`sum by (instance, pod)`).
    pub by: &'a [&'a str],
    /// Extra matchers added to every selector (`pod="vllm-0"`), or empty.
    pub matchers: &'a str,
    /// Which gauge statistic gauges read.
    pub stat: Stat,
    /// When set, gauges read only a sample this recent instead of the window's newest: their
    /// value at one step of a subquery whose steps read each sample once (see [`SampleSteps`]).
    pub gauge_range: Option<&'a str>,
    /// The adapter's picks, for selectors that name one (resolve those whose fact is known
    /// beforehand with [`Expr::with_picks`]).
    pub picks: &'a BTreeMap<String, PickSpec>,
}

impl Default for QueryOptions<'_> {
    fn default() -> Self {
        QueryOptions {
            window: "5m",
            by: &[],
            matchers: "",
            stat: Stat::Last,
            gauge_range: None,
            picks: &NO_PICKS,
        }
    }
}

/// The PromQL for `expr`. A bare constant compiles to a number literal.
// Long on purpose: one arm per expression kind, each beside its twin in adapter::eval, so the
// two stay reviewable side by side.
pub fn compile(expr: &Expr, opts: &QueryOptions<'_>) -> String {
    if opts.stat != Stat::Last && expr.stats_per_instant() {
        return statistic_per_instant(expr, opts);
    }
    match expr {
        Expr::Gauge(sel) => alternatives(
            sel,
            "",
            |s| {
                let f = over_time(opts.stat);
                let range = opts.gauge_range.unwrap_or(opts.window);
                picked(format!("{f}({s}[{range}])"), sel, opts)
            },
            opts,
        ),
        Expr::Rate(sel) => alternatives(
            sel,
            "",
            |s| picked(format!("rate({s}[{}])", opts.window), sel, opts),
            opts,
        ),
        Expr::Increase(sel) => alternatives(
            sel,
            "",
            |s| picked(format!("increase({s}[{}])", opts.window), sel, opts),
            opts,
        ),
        Expr::Changes(sel) => alternatives(
            sel,
            "",
            |s| picked(format!("changes({s}[{}])", opts.window), sel, opts),
            opts,
        ),
        Expr::Resets(sel) => alternatives(
            sel,
            "",
            |s| picked(format!("resets({s}[{}])", opts.window), sel, opts),
            opts,
        ),
        Expr::BitShare(sel) => {
            let mask = sel.mask.unwrap_or(0);
            let steps = SampleSteps::of(opts);
            alternatives(
                sel,
                "",
                |s| {
                    let s = format!("last_over_time({s}[{}])", steps.lookback);
                    let bits: Vec<String> = (0..64)
                        .filter(|b| mask & (1u64 << b) != 0)
                        .map(|b| format!("floor({s} / {}) % 2", 1u64 << b))
                        .collect();
                    let any = if bits.is_empty() {
                        "0 * ".to_string() + &s
                    } else {
                        bits.join(" + ")
                    };
                    picked(
                        format!("avg_over_time((({any}) > bool 0)[{}])", steps.range),
                        sel,
                        opts,
                    )
                },
                opts,
            )
        }
        Expr::Quantile(sel) => {
            let q = sel.q.unwrap_or(0.5);
            alternatives(
                sel,
                "_bucket",
                |s| {
                    format!(
                        "histogram_quantile({q}, sum by ({}) ({}))",
                        by_with(opts.by, "le"),
                        picked(format!("rate({s}[{}])", opts.window), sel, opts)
                    )
                },
                opts,
            )
        }
        Expr::HistMean(sel) => {
            let names = sel.metric.values();
            let one = |name: &str| {
                let sum = selector(&format!("{name}_sum"), sel, opts.matchers);
                let count = selector(&format!("{name}_count"), sel, opts.matchers);
                let w = opts.window;
                format!(
                    "sum by ({by}) ({sum}) / (sum by ({by}) ({count}) > 0)",
                    by = opts.by.join(", "),
                    sum = picked(format!("rate({sum}[{w}])"), sel, opts),
                    count = picked(format!("rate({count}[{w}])"), sel, opts),
                )
            };
            or_all(names.iter().map(|n| one(n)).collect())
        }
        Expr::Sum(e) => aggregate("sum", e, opts),
        Expr::Max(e) => aggregate("max", e, opts),
        Expr::Min(e) => aggregate("min", e, opts),
        Expr::Avg(e) => aggregate("avg", e, opts),
        Expr::Count(e) => aggregate("count", e, opts),
        Expr::Div(a, b) => format!("({}) / (({}) != 0)", compile(a, opts), compile(b, opts)),
        Expr::Sub(a, b) => format!("({}) - ({})", compile(a, opts), compile(b, opts)),
        Expr::Add(terms) => terms
            .iter()
            .map(|t| format!("({})", compile(t, opts)))
            .collect::<Vec<_>>()
            .join(" + "),
        Expr::Scale(e, k) => format!("({}) * {}", compile(e, opts), number(*k)),
        Expr::Const(c) => number(*c),
        Expr::PercentToRatio(e) => {
            let inner = compile(e, opts);
            format!("(({inner}) > 1) / 100 or ({inner})")
        }
        Expr::First(alts) => or_all(alts.iter().map(|a| compile(a, opts)).collect()),
        Expr::ZeroWhenAbsent(a, sibling) => format!(
            "({}) or (0 * ({}))",
            compile(a, opts),
            compile(sibling, opts)
        ),
        Expr::QueuedShare(s) => {
            // A step where either gauge has no fresh sample counts for neither.
            let steps = SampleSteps::of(opts);
            let at_step = steps.options(opts);
            let (queue, running) = (compile(&s.queue, &at_step), compile(&s.running, &at_step));
            let range = &steps.range;
            format!(
                "sum_over_time(((({queue}) > bool 0) and ({running}))[{range}]) / (sum_over_time(((({queue}) + ({running})) > bool 0)[{range}]) > 0)"
            )
        }
        // No PromQL form (see `expressible`): an empty vector, for callers that show it.
        Expr::Scaling(_)
        | Expr::Dispersion(_)
        | Expr::Served(_)
        | Expr::Stall(_)
        | Expr::ShareBelow(_)
        | Expr::QuantileFloor(_) => "(vector(1) unless vector(1))".to_string(),
    }
}

/// False when the expression needs the window's samples themselves (a batch scaling pairs
/// counter growth with the batch interval by interval, an arrival dispersion counts arrivals
/// interval by interval, a share of slow intervals compares each interval's growth with a
/// bound), which PromQL cannot do in one query
/// (written with nested subqueries, it was a 23 KB query taking 3.5 s on 100 replicas), or a
/// bucket's bound as a value (a quantile's floor: PromQL has no function from a label to a
/// value); live triage reads such a signal's raw samples, or a histogram's bucket rates,
/// instead.
pub fn expressible(expr: &Expr) -> bool {
    !expr.any(&|e| {
        matches!(
            e,
            Expr::Scaling(_)
                | Expr::Dispersion(_)
                | Expr::Served(_)
                | Expr::Stall(_)
                | Expr::ShareBelow(_)
                | Expr::QuantileFloor(_)
        )
    })
}

/// A window statistic of an expression that divides or subtracts (see
/// [`Expr::stats_per_instant`]): the statistic of the expression's value at each sample instant
/// of the window, as the reader takes it. Its gauges must be scraped together (one exporter's),
/// so that a step reads a fresh sample of each.
fn statistic_per_instant(expr: &Expr, opts: &QueryOptions<'_>) -> String {
    let steps = SampleSteps::of(opts);
    let at_instant = compile(expr, &steps.options(opts));
    format!("{}(({at_instant})[{}])", over_time(opts.stat), steps.range)
}

/// Most steps a subquery over the window takes.
const MAX_SAMPLE_STEPS: i64 = 1000;

/// Subquery steps that read each sample of the window once, as the reader walks a window's
/// samples: a second apart (finer than any scrape interval), each gauge reading only a sample
/// since the step before. A window longer than MAX_SAMPLE_STEPS seconds takes that many steps,
/// reading every few samples. Steps fall on whole multiples of the step, so a sample newer than
/// the last of them is not read (at most a second's worth on windows up to 16 minutes).
struct SampleSteps {
    /// `window:step` of the subquery.
    range: String,
    /// How far back a gauge looks at each step: one millisecond less than a step.
    lookback: String,
}

impl SampleSteps {
    fn of(opts: &QueryOptions<'_>) -> SampleSteps {
        let window_ms = crate::time::parse_duration(opts.window).unwrap_or(300_000);
        let step_ms = (window_ms / MAX_SAMPLE_STEPS).max(1000);
        SampleSteps {
            range: format!("{}:{step_ms}ms", opts.window),
            lookback: format!("{}ms", step_ms - 1),
        }
    }

    /// QueryOptions whose gauges read their value at one step.
    fn options<'a>(&'a self, opts: &QueryOptions<'a>) -> QueryOptions<'a> {
        QueryOptions {
            stat: Stat::Last,
            gauge_range: Some(&self.lookback),
            ..*opts
        }
    }
}

/// The range function that takes `stat` over a window.
fn over_time(stat: Stat) -> &'static str {
    match stat {
        Stat::Last => "last_over_time",
        Stat::Mean => "avg_over_time",
        Stat::Max => "max_over_time",
        Stat::Min => "min_over_time",
    }
}

/// `inner` (one value per series of `sel`) restricted to the series whose label is the value
/// the selector's pick chooses per target: the value with the largest summed rate of the pick's
/// counter (`topk` breaks ties arbitrarily where the file reader takes the smallest value; ties
/// need equal rates, in practice idle models). Unchanged without a pick.
fn picked(inner: String, sel: &SeriesSelector, opts: &QueryOptions<'_>) -> String {
    let Some(pick) = sel.pick.as_ref().and_then(|p| opts.picks.get(p)) else {
        return inner;
    };
    let by = opts.by.join(", ");
    let on = by_with(opts.by, &pick.label);
    let ranked = alternatives(
        &pick.largest_rate,
        "",
        |s| format!("rate({s}[{}])", opts.window),
        opts,
    );
    format!("({inner} and on ({on}) topk by ({by}) (1, sum by ({on}) ({ranked})))")
}

fn number(x: f64) -> String {
    // PromQL reads exponents; Rust's Display never writes a lossy form.
    format!("{x:?}")
}

fn by_with(by: &[&str], extra: &str) -> String {
    let mut all: Vec<&str> = vec![extra];
    all.extend(by.iter().copied());
    all.join(", ")
}

fn aggregate(op: &str, e: &Expr, opts: &QueryOptions<'_>) -> String {
    format!("{op} by ({}) ({})", opts.by.join(", "), compile(e, opts))
}

fn or_all(parts: Vec<String>) -> String {
    if parts.len() == 1 {
        return parts.into_iter().next().unwrap_or_default();
    }
    parts
        .iter()
        .map(|p| format!("({p})"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// One leaf per alternative metric name, joined with `or` (the first that has series).
fn alternatives(
    sel: &SeriesSelector,
    suffix: &str,
    leaf: impl Fn(String) -> String,
    opts: &QueryOptions<'_>,
) -> String {
    or_all(
        sel.metric
            .values()
            .iter()
            .map(|name| leaf(selector(&format!("{name}{suffix}"), sel, opts.matchers)))
            .collect(),
    )
}

/// A PromQL string literal's content.
pub(crate) fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A literal inside a regular expression.
pub(crate) fn regex_quote(v: &str) -> String {
    // Values are literals: escape regex metacharacters inside the alternation.
    let mut out = String::new();
    for c in v.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

pub(crate) fn matcher_list(m: &Matchers, negate: bool) -> Vec<String> {
    m.iter()
        .map(|(label, vals)| {
            let vals = vals.values();
            match (vals.as_slice(), negate) {
                ([one], false) => format!("{label}=\"{}\"", escape(one)),
                ([one], true) => format!("{label}!=\"{}\"", escape(one)),
                (many, neg) => format!(
                    "{label}{}\"{}\"",
                    if neg { "!~" } else { "=~" },
                    escape(
                        &many
                            .iter()
                            .map(|v| regex_quote(v))
                            .collect::<Vec<_>>()
                            .join("|")
                    )
                ),
            }
        })
        .collect()
}

/// `name{matchers}`; names with characters PromQL's bare form allows (colons included) stay bare.
fn selector(name: &str, sel: &SeriesSelector, extra: &str) -> String {
    let mut m = matcher_list(&sel.matchers, false);
    m.extend(matcher_list(&sel.where_not, true));
    if !extra.trim().is_empty() {
        m.push(
            extra
                .trim()
                .trim_matches(|c| c == '{' || c == '}')
                .to_string(),
        );
    }
    if m.is_empty() {
        name.to_string()
    } else {
        format!("{name}{{{}}}", m.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(yaml: &str) -> Expr {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn leaves_and_aggregations() {
        let by = ["instance", "pod"];
        let o = QueryOptions {
            by: &by,
            ..QueryOptions::default()
        };
        assert_eq!(
            compile(&expr(r#"{quantile: {metric: "vllm:time_to_first_token_seconds", q: 0.99}}"#), &o),
            "histogram_quantile(0.99, sum by (le, instance, pod) (rate(vllm:time_to_first_token_seconds_bucket[5m])))"
        );
        assert_eq!(
            compile(
                &expr(r#"{sum: {rate: {metric: "vllm:num_preemptions_total"}}}"#),
                &o
            ),
            "sum by (instance, pod) (rate(vllm:num_preemptions_total[5m]))"
        );
        assert_eq!(
            compile(&expr(r#"{max: {gauge: {metric: ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]}}}"#), &o),
            "max by (instance, pod) ((last_over_time(vllm:kv_cache_usage_perc[5m])) or (last_over_time(vllm:gpu_cache_usage_perc[5m])))"
        );
        let mean = QueryOptions {
            stat: Stat::Mean,
            ..o
        };
        assert_eq!(
            compile(
                &expr(r#"{sum: {gauge: {metric: "vllm:num_requests_waiting"}}}"#),
                &mean
            ),
            "sum by (instance, pod) (avg_over_time(vllm:num_requests_waiting[5m]))"
        );
    }

    #[test]
    fn statistics_of_a_ratio_are_taken_at_each_step() {
        let ratio = expr(
            r#"{max: {div: [{gauge: {metric: U}}, {add: [{gauge: {metric: U}}, {gauge: {metric: F}}]}]}}"#,
        );
        let max = QueryOptions {
            stat: Stat::Max,
            ..QueryOptions::default()
        };
        assert_eq!(
            compile(&ratio, &max),
            "max_over_time((max by () ((last_over_time(U[999ms])) / (((last_over_time(U[999ms])) + (last_over_time(F[999ms]))) != 0)))[5m:1000ms])"
        );
        // The newest value needs no subquery; neither do statistics of a plain aggregation.
        assert!(!compile(&ratio, &QueryOptions::default()).contains(":1000ms]"));
        assert_eq!(
            compile(&expr(r#"{max: {gauge: {metric: U}}}"#), &max),
            "max by () (max_over_time(U[5m]))"
        );
    }

    #[test]
    fn a_queued_share_counts_steps_with_both_gauges() {
        let share = expr(
            "{queued_share: {queue: {sum: {gauge: {metric: q}}}, running: {sum: {gauge: {metric: r}}}}}",
        );
        let o = QueryOptions {
            window: "10m",
            ..QueryOptions::default()
        };
        let (q, r) = (
            "sum by () (last_over_time(q[999ms]))",
            "sum by () (last_over_time(r[999ms]))",
        );
        assert_eq!(
            compile(&share, &o),
            format!("sum_over_time(((({q}) > bool 0) and ({r}))[10m:1000ms]) / (sum_over_time(((({q}) + ({r})) > bool 0)[10m:1000ms]) > 0)")
        );
        // A day is read at 1,000 steps.
        let day = QueryOptions { window: "1d", ..o };
        assert!(compile(&share, &day).contains("[1d:86400ms]"));
        assert!(compile(&share, &day).contains("[86399ms]"));
        assert!(expressible(&share));
    }

    #[test]
    fn ratios_are_guarded_and_matchers_quoted() {
        let o = QueryOptions {
            matchers: r#"pod="vllm-0""#,
            ..QueryOptions::default()
        };
        assert_eq!(
            compile(
                &expr(
                    r#"{div: [{sum: {rate: {metric: "vllm:request_success_total", where: {finished_reason: [abort, error]}}}}, {sum: {rate: {metric: "vllm:request_success_total"}}}]}"#
                ),
                &o
            ),
            r#"(sum by () (rate(vllm:request_success_total{finished_reason=~"abort|error", pod="vllm-0"}[5m]))) / ((sum by () (rate(vllm:request_success_total{pod="vllm-0"}[5m]))) != 0)"#
        );
        assert_eq!(
            compile(
                &expr(r#"{hist_mean: {metric: "x"}}"#),
                &QueryOptions::default()
            ),
            "sum by () (rate(x_sum[5m])) / (sum by () (rate(x_count[5m])) > 0)"
        );
        assert_eq!(
            compile(
                &expr(
                    r#"{gauge: {metric: "m", where_not: {cache_source: total}, where: {mode: "a.b"}}}"#
                ),
                &QueryOptions::default()
            ),
            r#"last_over_time(m{mode="a.b", cache_source!="total"}[5m])"#
        );
        assert_eq!(
            compile(
                &expr(r#"{gauge: {metric: "m", where: {k: ["a.b", "c"]}}}"#),
                &QueryOptions::default()
            ),
            r#"last_over_time(m{k=~"a\\.b|c"}[5m])"#
        );
    }

    #[test]
    fn picks_and_absent_counters() {
        let picks: BTreeMap<String, PickSpec> = serde_yaml::from_str(
            r#"{entry: {label: model, largest_rate: {metric: D}, why: "the caller"}}"#,
        )
        .unwrap();
        let by = ["pod", "instance"];
        let o = QueryOptions {
            by: &by,
            picks: &picks,
            ..QueryOptions::default()
        };
        assert_eq!(
            compile(&expr(r#"{sum: {rate: {metric: S, pick: entry}}}"#), &o),
            "sum by (pod, instance) ((rate(S[5m]) and on (model, pod, instance) topk by (pod, instance) (1, sum by (model, pod, instance) (rate(D[5m])))))"
        );
        assert_eq!(
            compile(
                &expr(r#"{zero_when_absent: [{sum: {rate: {metric: F}}}, {sum: {rate: {metric: S}}}]}"#),
                &o
            ),
            "(sum by (pod, instance) (rate(F[5m]))) or (0 * (sum by (pod, instance) (rate(S[5m]))))"
        );
        // A pick the fact names is a plain matcher.
        let named = BTreeMap::from([(
            "entry".to_string(),
            Ok(("model".to_string(), "ensemble".to_string())),
        )]);
        let e = expr(r#"{sum: {rate: {metric: S, pick: entry}}}"#)
            .with_picks(&named)
            .unwrap();
        assert_eq!(
            compile(&e, &o),
            r#"sum by (pod, instance) (rate(S{model="ensemble"}[5m]))"#
        );
    }

    #[test]
    fn bit_share_scale_and_percent() {
        assert_eq!(
            compile(
                &expr(r#"{bit_share: {metric: "R", mask: 132}}"#),
                &QueryOptions::default()
            ),
            "avg_over_time(((floor(last_over_time(R[999ms]) / 4) % 2 + floor(last_over_time(R[999ms]) / 128) % 2) > bool 0)[5m:1000ms])"
        );
        assert_eq!(
            compile(
                &expr(r#"{scale: [{gauge: {metric: "G"}}, 0.01]}"#),
                &QueryOptions::default()
            ),
            "(last_over_time(G[5m])) * 0.01"
        );
        assert_eq!(
            compile(
                &expr(r#"{percent_to_ratio: {gauge: {metric: "G"}}}"#),
                &QueryOptions::default()
            ),
            "((last_over_time(G[5m])) > 1) / 100 or (last_over_time(G[5m]))"
        );
        assert_eq!(
            compile(&expr(r#"{const: 0}"#), &QueryOptions::default()),
            "0.0"
        );
        assert_eq!(
            compile(
                &expr(
                    r#"{sub: [{const: 1}, {avg: {rate: {metric: "node_cpu_seconds_total", where: {mode: idle}}}}]}"#
                ),
                &QueryOptions::default()
            ),
            r#"(1.0) - (avg by () (rate(node_cpu_seconds_total{mode="idle"}[5m])))"#
        );
    }
}
