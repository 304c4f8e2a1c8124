//! Assembly: answers mapped to targets, per-group values combined, and each target's signals,
//! hints and facts filled through the file reader's own code.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{bail, Result};
use llm_doctor_engine::condition::WindowStats;
use llm_doctor_engine::{SignalValue, Snapshot, Window};

use super::answer::{Answer, AnswerSample};
use super::labels::label;
use super::plan::{stat_index, stat_of, Answers, Plan, Purpose, Query};
use super::targets::{build_targets, LiveTarget, Routes};
use crate::prepared::{self, FactSource, Prepared, UserInputs};
use crate::rules::Rules;
use crate::signal::adapter::eval::{
    combined_window_stats, eval_signal, reads_gauge, Frame, Stat, TargetSeries,
};
use crate::signal::adapter::spec::{Expr, SeriesSelector};
use crate::signal::adapter::{absent_hint, fill_missing_hints, AdapterKind, AdapterSpec, Adapters};
use crate::signal::promql;
use crate::signal::series::Series;

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

/// How per-group values of one target combine into the file reader's one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Combine {
    Sum,
    Max,
    Min,
}

/// Whether an expression aggregates series (by the target labels, once compiled).
pub(super) fn aggregates(e: &Expr) -> bool {
    match e {
        Expr::Sum(_)
        | Expr::Max(_)
        | Expr::Min(_)
        | Expr::Avg(_)
        | Expr::Count(_)
        | Expr::Quantile(_)
        | Expr::QuantileFloor(_)
        | Expr::HistMean(_)
        | Expr::Scaling(_)
        | Expr::QueuedShare(_)
        | Expr::Dispersion(_)
        | Expr::Served(_)
        | Expr::Stall(_) => true,
        Expr::Gauge(_)
        | Expr::Rate(_)
        | Expr::Increase(_)
        | Expr::Changes(_)
        | Expr::Resets(_)
        | Expr::BitShare(_)
        | Expr::ShareBelow(_)
        | Expr::Const(_) => false,
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
pub(super) enum Value {
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
        if let Some(t) = routes.target_of(adapter, kind, |n| label(labels, n)) {
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

pub(super) fn assemble(
    rules: &Rules,
    plan: &Plan<'_>,
    answers: Answers,
    window: Window,
    user: &UserInputs<'_>,
    opts: &prepared::Options,
) -> Result<LiveResult> {
    let adapters = plan.adapters;
    let (targets, routes) = build_targets(adapters, &answers);
    let order = select(adapters, &targets, &window, opts)?;
    let (errors, server_notes) = failures_and_notes(adapters, &answers);
    let (mapped, versions, infos) = map_answers(adapters, &answers, &routes);
    let samples = route_samples(adapters, &answers, &routes);
    let lookup = Lookup {
        answers: &answers,
        mapped: &mapped,
        samples: &samples,
        frame: Frame {
            end_ms: window.end_ms,
            window_ms: window.length_ms.unwrap_or(0),
        },
    };
    // Targets are independent: a fleet is assembled on every core, as files are prepared.
    let shared = Shared {
        rules,
        adapters,
        lookup: &lookup,
        window: &window,
        versions: &versions,
        infos: &infos,
        user,
    };
    let prepared =
        crate::parallel::map_indexed(order.len(), crate::parallel::TARGETS_PER_THREAD, |k| {
            prepare_target(&shared, &targets[order[k]], order[k]).map(|mut p| {
                p.notes.extend(server_notes.iter().cloned());
                p
            })
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    let (queries, slowest_query) = (answers.queries, answers.slowest);
    // The answers are a fleet's worth of small allocations: freeing them took 10-12 ms of the
    // ~50 a 100-replica triage spends after its last answer, so they are freed beside the
    // diagnosis instead of before it (or here, where no thread can be started).
    drop((mapped, samples));
    let _ = std::thread::Builder::new()
        .name("free-answers".into())
        .spawn(move || drop(answers));
    Ok(LiveResult {
        prepared,
        errors,
        queries,
        slowest_query,
    })
}

/// What every target's assembly reads.
struct Shared<'a> {
    rules: &'a Rules,
    adapters: &'a Adapters,
    lookup: &'a Lookup<'a>,
    window: &'a Window,
    versions: &'a Versions,
    infos: &'a Infos,
    user: &'a UserInputs<'a>,
}

/// Target `t`'s snapshot: its signals, the hints for those it lacks, and its facts.
fn prepare_target(shared: &Shared<'_>, lt: &LiveTarget, t: usize) -> Result<Prepared> {
    let Shared {
        rules,
        adapters,
        lookup,
        window,
        versions,
        infos,
        user,
    } = *shared;
    let catalog = &rules.catalog;
    let mut snapshot = Snapshot::new(catalog, lt.target.clone());
    snapshot.window = window.clone();
    let mut notes = lt.notes.clone();
    let names: Vec<String> = lt
        .adapters
        .iter()
        .map(|&i| adapters.list[i].name.clone())
        .collect();
    let present = rules.adapters.present(&names);
    let provided = fill_signals(&mut snapshot, rules, adapters, &present, lookup, t);
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
        versions,
        infos,
        gauge_facts: match (lt.engine, engine) {
            (Some(i), Some(e)) => lookup.gauge_facts(e, i, t),
            _ => BTreeMap::new(),
        },
    };
    prepared::add_facts(
        &mut snapshot,
        &mut notes,
        rules,
        (&names, engine.and_then(|e| rules.adapters.get(&e.name))),
        &source,
        user,
    )?;
    Ok(Prepared { snapshot, notes })
}

/// The targets to diagnose, in order: all of them, or those `--selector` picks. Errors when
/// Prometheus knows none, none of `--engine`'s, or none the selector matches.
fn select(
    adapters: &Adapters,
    targets: &[LiveTarget],
    window: &Window,
    opts: &prepared::Options,
) -> Result<Vec<usize>> {
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
    Ok(order)
}

/// Failed queries in words, and the server's notes, once each.
fn failures_and_notes(adapters: &Adapters, answers: &Answers) -> (Vec<String>, BTreeSet<String>) {
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
    (errors, server_notes)
}

/// Version-revealing metric names seen per target: (target, metric name).
type Versions = BTreeSet<(usize, String)>;
/// An info metric's labels per (target, metric).
type Infos = BTreeMap<(usize, String), BTreeMap<String, String>>;

/// The answers mapped to targets: signal and gauge-fact values, version-revealing names and
/// info labels.
fn map_answers<'a>(
    adapters: &Adapters,
    answers: &'a Answers,
    routes: &Routes,
) -> (BTreeMap<&'a Purpose, Mapped>, Versions, Infos) {
    let mut mapped: BTreeMap<&Purpose, Mapped> = BTreeMap::new();
    let mut versions: Versions = BTreeSet::new();
    let mut infos: Infos = BTreeMap::new();
    for (purpose, (_, outcome)) in &answers.by_purpose {
        let Ok(answer) = outcome else { continue };
        match purpose {
            Purpose::Signal(i, ..) | Purpose::GaugeFact(i, _) => {
                let kind = adapters.list[*i].kind;
                mapped.insert(purpose, map_answer(answer, *i, kind, routes));
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
                    if let Some(t) =
                        routes.target_of(i, adapters.list[i].kind, |n| label(labels, n))
                    {
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
                let mut samples: Vec<&AnswerSample> = answer.samples.iter().collect();
                samples.sort_by(|a, b| a.0.cmp(&b.0));
                for (labels, _) in samples {
                    for &i in &owner {
                        if let Some(t) =
                            routes.target_of(i, AdapterKind::Engine, |n| label(labels, n))
                        {
                            // The first series wins, as in the file reader.
                            infos
                                .entry((t, metric.clone()))
                                .or_insert_with(|| labels.clone());
                        }
                    }
                }
            }
            Purpose::Discover(_) | Purpose::Samples(..) => {}
        }
    }
    (mapped, versions, infos)
}

/// Raw series of each `Samples` answer, per target.
type RoutedSamples<'a> = BTreeMap<&'a Purpose, BTreeMap<usize, Vec<&'a Series>>>;

/// The raw series of the `Samples` answers, routed to their targets as other answers are.
fn route_samples<'a>(
    adapters: &Adapters,
    answers: &'a Answers,
    routes: &Routes,
) -> RoutedSamples<'a> {
    let mut out: RoutedSamples = BTreeMap::new();
    for (purpose, (_, outcome)) in &answers.by_purpose {
        let (Purpose::Samples(i, _), Ok(answer)) = (purpose, outcome) else {
            continue;
        };
        let by_target = out.entry(purpose).or_default();
        for s in &answer.series {
            let label = |n: &str| s.labels.get(n).unwrap_or("");
            if let Some(t) = routes.target_of(*i, adapters.list[*i].kind, label) {
                by_target.entry(t).or_default().push(s);
            }
        }
    }
    out
}

/// Target `t`'s signals from the present adapters, the first adapter to provide one winning;
/// a missing value leaves its hint. Returns the signals provided.
fn fill_signals<'r>(
    snapshot: &mut Snapshot,
    rules: &Rules,
    adapters: &Adapters,
    present: &[&'r AdapterSpec],
    lookup: &Lookup<'_>,
    t: usize,
) -> BTreeSet<&'r str> {
    let catalog = &rules.catalog;
    let mut provided: BTreeSet<&str> = BTreeSet::new();
    for a in present {
        let Some(i) = adapters.list.iter().position(|x| x.name == a.name) else {
            continue;
        };
        for (name, expr) in &a.signals {
            if provided.contains(name.as_str()) {
                continue;
            }
            match lookup.signal(a, i, name, expr, t, Stat::Last) {
                (Value::Known(v), promql) => {
                    let stats =
                        reads_gauge(expr).then(|| lookup.window_stats(a, i, name, expr, t, v));
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
    provided
}

/// Reads values out of the mapped answers.
struct Lookup<'a> {
    pub(super) answers: &'a Answers,
    pub(super) mapped: &'a BTreeMap<&'a Purpose, Mapped>,
    pub(super) samples: &'a RoutedSamples<'a>,
    /// The window, for signals computed from raw samples.
    pub(super) frame: Frame,
}

impl Lookup<'_> {
    /// Signal `name` (expression `expr`) of adapter `a` (index `i`) for target `t`: its value
    /// or a hint, and the PromQL to show as its source.
    pub(super) fn signal(
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
        if super::plan::from_samples(expr) {
            return self.signal_from_samples(a, i, name, expr, t);
        }
        let purpose = Purpose::Signal(i, name.to_string());
        let query = match self.answered(a, &purpose) {
            Ok(query) => query,
            Err(missing) => return missing,
        };
        let values = self
            .mapped
            .get(&purpose)
            .and_then(|m| m.get(&(t, stat_index(stat))))
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let v = match combine(values, combine_rule(expr)) {
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
        };
        (v, query.shown.clone())
    }

    /// The query sent for `purpose` once it answered, or the missing value that says why not.
    fn answered(&self, a: &AdapterSpec, purpose: &Purpose) -> Result<&Query, (Value, String)> {
        match self.answers.by_purpose.get(purpose) {
            None => Err((
                Value::Missing(format!("{}: not queried", a.name)),
                String::new(),
            )),
            Some((query, Err(f))) => Err((
                Value::Missing(format!(
                    "{}: the query failed: {}",
                    a.name,
                    first_line(&f.message)
                )),
                query.shown.clone(),
            )),
            Some((query, Ok(_))) => Ok(query),
        }
    }

    /// Gauge signal `name`'s window statistics for target `t`, whose value is `last`; a
    /// statistic that is missing falls back to the value, as in the file reader.
    fn window_stats(
        &self,
        a: &AdapterSpec,
        i: usize,
        name: &str,
        expr: &Expr,
        t: usize,
        last: f64,
    ) -> WindowStats {
        if super::plan::from_samples(expr) {
            // All three from one pass over the instants, as the reader takes them.
            let (min, mean, max) =
                combined_window_stats(expr, &self.target_samples(i, name, t), self.frame, None)
                    .unwrap_or((last, last, last));
            return WindowStats {
                min,
                mean,
                max,
                last,
            };
        }
        let get = |stat| match self.signal(a, i, name, expr, t, stat).0 {
            Value::Known(x) => x,
            Value::Missing(_) => last,
        };
        WindowStats {
            min: get(Stat::Min),
            mean: get(Stat::Mean),
            max: get(Stat::Max),
            last,
        }
    }

    /// A signal computed by the file reader's evaluation from its metrics' raw samples in the
    /// window (see [`super::plan::from_samples`]).
    fn signal_from_samples(
        &self,
        a: &AdapterSpec,
        i: usize,
        name: &str,
        expr: &Expr,
        t: usize,
    ) -> (Value, String) {
        let query = match self.answered(a, &Purpose::Samples(i, name.to_string())) {
            Ok(query) => query,
            Err(missing) => return missing,
        };
        // Bucket rates arrive as one value a series: totals of the window, read as they are.
        let frame = if super::plan::from_bucket_rates(expr) {
            Frame {
                end_ms: None,
                ..self.frame
            }
        } else {
            self.frame
        };
        let v = match eval_signal(expr, &self.target_samples(i, name, t), frame, Stat::Last) {
            Ok(v) => Value::Known(v),
            Err(why) => Value::Missing(format!("{}: {why}", a.name)),
        };
        (v, query.shown.clone())
    }

    /// Target `t`'s raw series from signal `name`'s `Samples` answer, indexed as the reader's.
    fn target_samples(&self, i: usize, name: &str, t: usize) -> TargetSeries<'_> {
        let series = self
            .samples
            .get(&Purpose::Samples(i, name.to_string()))
            .and_then(|m| m.get(&t))
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        TargetSeries::new(series.iter().copied())
    }

    /// Engine `e`'s (index `i`) gauge facts for target `t`.
    pub(super) fn gauge_facts(&self, e: &AdapterSpec, i: usize, t: usize) -> BTreeMap<String, f64> {
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

pub(super) fn first_line(s: &str) -> &str {
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
        Purpose::Samples(i, signal) => format!("{} signal {signal} (from samples)", name(*i)),
    }
}

/// [`FactSource`] over Prometheus' answers for one target.
struct LiveFacts<'a> {
    pub(super) target: usize,
    pub(super) groups: &'a [BTreeMap<String, String>],
    pub(super) versions: &'a Versions,
    pub(super) infos: &'a Infos,
    pub(super) gauge_facts: BTreeMap<String, f64>,
}

impl FactSource for LiveFacts<'_> {
    fn has_metric(&self, name: &str) -> bool {
        self.versions.contains(&(self.target, name.to_string()))
    }

    fn info_label(&self, metric: &str, label: &str) -> Option<&str> {
        self.infos
            .get(&(self.target, metric.to_string()))?
            .get(label)
            .map(String::as_str)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(yaml: &str) -> Expr {
        serde_yaml::from_str(yaml).unwrap()
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
}
