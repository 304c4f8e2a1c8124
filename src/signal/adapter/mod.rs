//! Adapters: the only code that knows engines' and exporters' metric names.
//!
//! Each adapter is data (`rules/signals/*.yaml`, see `spec`); `eval` turns one target's series into
//! canonical signal values; `build_snapshot` assembles a snapshot of signals, facts and hints for
//! the engine.

pub mod eval;
mod expr_yaml;
pub mod spec;
pub mod stats;
mod unique_keys;

use std::collections::BTreeSet;

use llm_doctor_engine::condition::WindowStats;
use llm_doctor_engine::suggest::hint;
use llm_doctor_engine::{Catalog, SignalValue, Snapshot, Target};

use crate::signal::series::Series;
use eval::{Frame, Stat, TargetSeries};
pub use spec::{AdapterKind, AdapterSpec};

/// All adapters, validated against the catalog.
#[derive(Debug, Clone)]
pub struct Adapters {
    /// In load order: engines first, then GPU and host exporters.
    pub list: Vec<AdapterSpec>,
}

impl Adapters {
    /// Parses and validates adapter files (`(file name, text)`); reports every problem.
    pub fn load(files: &[(String, String)], catalog: &Catalog) -> Result<Adapters, Vec<String>> {
        let mut errors = Vec::new();
        let mut list: Vec<AdapterSpec> = Vec::new();
        for (name, text) in files {
            if let Err(e) = llm_doctor_engine::yaml_guard::check_depth(text) {
                errors.push(format!("{name}:{e}"));
                continue;
            }
            match serde_yaml::from_str::<AdapterSpec>(text) {
                Ok(a) => {
                    validate(&a, name, catalog, &mut errors);
                    match list.iter().position(|x| x.name == a.name) {
                        Some(i) => list[i] = a,
                        None => list.push(a),
                    }
                }
                Err(e) => errors.push(format!("error: {name}: {e}")),
            }
        }
        list.sort_by_key(|a| a.kind);
        number_selectors(&mut list);
        for a in &mut list {
            a.planned = plan(a, catalog);
        }
        if errors.is_empty() {
            Ok(Adapters { list })
        } else {
            Err(errors)
        }
    }

    /// The adapter a sample name belongs to.
    pub fn owner(&self, sample_name: &str) -> Option<&AdapterSpec> {
        self.list
            .iter()
            .find(|a| a.detect.iter().any(|p| sample_name.starts_with(p.as_str())))
    }

    /// An adapter by name.
    pub fn get(&self, name: &str) -> Option<&AdapterSpec> {
        self.list.iter().find(|a| a.name == name)
    }

    /// Engine adapters.
    pub fn engines(&self) -> impl Iterator<Item = &AdapterSpec> {
        self.list.iter().filter(|a| a.kind == AdapterKind::Engine)
    }
}

/// What each of `a`'s signals needs known before it is evaluated, in their order.
fn plan(a: &AdapterSpec, catalog: &Catalog) -> Vec<spec::PlannedSignal> {
    (a.signals.iter())
        .map(|(name, e)| planned(name, e, catalog))
        .collect()
}

/// What signal `name`, computed by `e`, needs known before it is evaluated.
fn planned(name: &str, e: &spec::Expr, catalog: &Catalog) -> spec::PlannedSignal {
    spec::PlannedSignal {
        index: catalog.signal(name),
        has_picks: e.has_picks(),
        reads_gauge: eval::reads_gauge(e),
    }
}

/// Gives every selector of the adapters its own [`spec::SeriesSelector::slot`].
fn number_selectors(list: &mut [AdapterSpec]) {
    let mut next = 0u32;
    let mut number = |s: &spec::SeriesSelector| {
        let mut s = s.clone();
        s.slot = Some(next);
        next += 1;
        Ok::<_, std::convert::Infallible>(s)
    };
    for a in list {
        for e in a.signals.values_mut() {
            let Ok(numbered) = e.map_selectors(&mut number);
            *e = numbered;
        }
        let plain = a.gauge_facts.values_mut();
        for s in plain.chain(a.picks.values_mut().map(|p| &mut p.largest_rate)) {
            let Ok(numbered) = number(s);
            *s = numbered;
        }
    }
}

fn validate(a: &AdapterSpec, file: &str, catalog: &Catalog, errors: &mut Vec<String>) {
    let signals: Vec<&str> = catalog.signals().iter().map(|s| s.name.as_str()).collect();
    let facts: Vec<&str> = catalog.facts().iter().map(|f| f.name.as_str()).collect();
    let mut check = |kind: &str, name: &str, known: &[&str]| {
        if !known.contains(&name) {
            let hint = hint(name, known.iter().copied());
            errors.push(format!(
                "error: {file}: adapter `{}` names unknown {kind} `{name}`{hint}",
                a.name
            ));
        }
    };
    for s in a.signals.keys().chain(a.hints.keys()) {
        check("signal", s, &signals);
    }
    for f in a
        .info_facts
        .iter()
        .flat_map(|i| i.labels.values())
        .chain(a.label_facts.values())
        .chain(a.defaults.keys())
    {
        check("fact", f, &facts);
    }
    for f in a.gauge_facts.keys() {
        check("fact", f, &facts);
    }
    for f in a.picks.values().filter_map(|p| p.fact.as_ref()) {
        check("fact", f, &facts);
    }
    if let Some(cl) = &a.command_line {
        for f in cl
            .flags
            .values()
            .chain(cl.presence.values())
            .chain(cl.env.values())
            .chain(cl.inverted.values())
        {
            check("fact", f, &facts);
        }
    }
    if let Some(mc) = &a.model_config {
        for f in mc
            .fields
            .values()
            .map(|x| &x.fact)
            .chain(mc.parameters.values())
        {
            check("fact", f, &facts);
        }
    }
    for (name, expr) in &a.signals {
        for pick in expr.picks() {
            if !a.picks.contains_key(pick) {
                errors.push(format!(
                    "error: {file}: adapter `{}` signal `{name}` uses pick `{pick}`, which `picks` does not define",
                    a.name
                ));
            }
        }
        check_zero_when_absent(expr, &mut |why| {
            errors.push(format!(
                "error: {file}: adapter `{}` signal `{name}`: {why}",
                a.name
            ))
        });
    }
}

/// `zero_when_absent` takes a missing counter as zero, which is exact only in a sum of counters:
/// its first term must be `sum` of `rate` or `increase`.
fn check_zero_when_absent(e: &spec::Expr, report: &mut impl FnMut(String)) {
    use spec::Expr::*;
    match e {
        ZeroWhenAbsent(a, b) => {
            if !matches!(&**a, Sum(inner) if matches!(&**inner, Rate(_) | Increase(_))) {
                report("`zero_when_absent` takes a sum of counters (`sum` of `rate` or `increase`) first".to_string());
            }
            check_zero_when_absent(a, report);
            check_zero_when_absent(b, report);
        }
        Sum(e) | Max(e) | Min(e) | Avg(e) | Count(e) | Scale(e, _) | PercentToRatio(e) => {
            check_zero_when_absent(e, report)
        }
        Div(a, b) | Sub(a, b) => {
            check_zero_when_absent(a, report);
            check_zero_when_absent(b, report);
        }
        Add(v) | First(v) => v.iter().for_each(|e| check_zero_when_absent(e, report)),
        _ => {}
    }
}

/// The value each of `a`'s picks chose for a target: the fact that names it (from `facts`, the
/// user's `--fact`), else [`eval::choose`] over the target's series; per pick, (label, value) or
/// why there is none.
pub fn choose_picks(
    a: &AdapterSpec,
    facts: &[(String, String)],
    ts: &TargetSeries<'_>,
    frame: Frame,
) -> spec::Picks {
    a.picks
        .iter()
        .map(|(name, p)| {
            let named = p
                .fact
                .as_ref()
                .and_then(|f| facts.iter().rev().find(|(k, _)| k == f))
                .map(|(_, v)| v.clone());
            let value = match named {
                Some(v) => Ok(v),
                None => eval::choose(p, ts, frame).map_err(|e| {
                    let hint = p
                        .fact
                        .as_ref()
                        .map(|f| format!(" (name it with --fact {f}=...)"))
                        .unwrap_or_default();
                    spec::NoPick(format!("no {name} {}{hint}: {e}", p.label))
                }),
            };
            (name.clone(), value.map(|v| (p.label.clone(), v)))
        })
        .collect()
}

/// One target's series grouped by the adapter that owns them.
pub struct TargetInput<'a> {
    /// Identity of the target.
    pub target: Target,
    /// The engine adapter's name, when an engine was detected.
    pub engine: Option<String>,
    /// Series of the engine, GPU and host adapters joined to this target.
    pub series: Vec<&'a Series>,
    /// Which adapters contributed (for hints).
    pub adapters: Vec<String>,
    /// Notes about the join, shown in the report.
    pub notes: Vec<String>,
}

/// Computes every signal the target's adapters define; records hints for the rest. `facts`
/// (the user's `--fact`) may name the value of an adapter's pick.
pub fn fill_signals(
    snapshot: &mut Snapshot,
    catalog: &Catalog,
    adapters: &Adapters,
    input: &TargetInput<'_>,
    frame: Frame,
    facts: &[(String, String)],
) {
    let ts = TargetSeries::new(input.series.iter().copied());
    fill_signals_from(
        snapshot,
        catalog,
        adapters,
        input,
        (&ts, None),
        frame,
        facts,
        true,
    );
}

/// [`fill_signals`] over series already indexed, keeping combined gauges' instant values in
/// `memo` when given (a window that slides reuses them). Without `provenance` each signal's
/// `source` is left empty and no hint says how to get a missing one: a postmortem's steps keep
/// only values and verdicts.
#[allow(clippy::too_many_arguments)]
pub fn fill_signals_from(
    snapshot: &mut Snapshot,
    catalog: &Catalog,
    adapters: &Adapters,
    input: &TargetInput<'_>,
    (ts, mut memo): (&TargetSeries<'_>, Option<&mut eval::InstantMemo>),
    frame: Frame,
    facts: &[(String, String)],
    provenance: bool,
) {
    // By catalog index: looked up once a signal, where a set of names was searched and grown
    // at every step of a postmortem.
    let mut provided = vec![false; catalog.signals().len()];
    let present = adapters.present(&input.adapters);
    for a in &present {
        let chosen = choose_picks(a, facts, ts, frame);
        for (j, (name, written)) in a.signals.iter().enumerate() {
            // Known once at load (an adapter made otherwise has no plan: found here).
            let planned =
                (a.planned.get(j).copied()).unwrap_or_else(|| planned(name, written, catalog));
            // Names were validated against the catalog at load.
            let Some(k) = planned.index else {
                continue;
            };
            if provided[k] {
                continue;
            }
            // Most expressions have no pick: read them as written rather than copy them at
            // every step.
            let resolved = if !planned.has_picks {
                Ok(std::borrow::Cow::Borrowed(written))
            } else {
                written.with_picks(&chosen).map(std::borrow::Cow::Owned)
            };
            let expr: &spec::Expr = match &resolved {
                Ok(e) => e,
                Err(reason) => {
                    if provenance {
                        let _ = snapshot.set_hint(catalog, name, absent_hint(a, name, &reason.0));
                    }
                    continue;
                }
            };
            let memo_of = memo.as_deref_mut().map(|m| (m, name.as_str()));
            match eval::eval_signal_memo(expr, ts, frame, memo_of) {
                Ok(value) => {
                    let stats = (frame.end_ms.is_some() && planned.reads_gauge).then(|| {
                        if let Some((min, mean, max)) = eval::combined_window_stats(
                            expr,
                            ts,
                            frame,
                            memo.as_deref_mut().map(|m| (m, name.as_str())),
                        ) {
                            return WindowStats {
                                min,
                                mean,
                                max,
                                last: value,
                            };
                        }
                        if let Some((min, mean, max)) = stats::gauge_window_stats(expr, ts, frame) {
                            return WindowStats {
                                min,
                                mean,
                                max,
                                last: value,
                            };
                        }
                        let get = |s| eval::eval_signal(expr, ts, frame, s).unwrap_or(value);
                        WindowStats {
                            min: get(Stat::Min),
                            mean: get(Stat::Mean),
                            max: get(Stat::Max),
                            last: value,
                        }
                    });
                    let mut source = String::new();
                    if provenance {
                        source = format!("{}: {}", a.name, describe(expr));
                    }
                    if provenance {
                        for pick in written.picks() {
                            if let (Some(Ok((label, value))), Some(p)) =
                                (chosen.get(pick), a.picks.get(pick))
                            {
                                source.push_str(&format!("; {pick} {label} `{value}` ({})", p.why));
                            }
                        }
                    }
                    let zeroed = if provenance {
                        eval::zeroed(expr, ts, frame)
                    } else {
                        Vec::new()
                    };
                    for counter in zeroed {
                        source.push_str(&format!(
                            "; `{counter}` has no series (never incremented): counted as 0"
                        ));
                    }
                    let sv = SignalValue {
                        value,
                        stats,
                        source,
                    };
                    snapshot.set_signal_at(k, sv);
                    provided[k] = true;
                }
                Err(reason) if provenance => {
                    let _ = snapshot.set_hint(catalog, name, absent_hint(a, name, &reason));
                }
                Err(_) => {}
            }
        }
    }
    if provenance {
        let provided: BTreeSet<&str> = (catalog.signals().iter().zip(&provided))
            .filter(|(_, &p)| p)
            .map(|(def, _)| def.name.as_str())
            .collect();
        fill_missing_hints(
            snapshot,
            catalog,
            adapters,
            &present,
            input.engine.as_deref(),
            &provided,
        );
    }
}

impl Adapters {
    /// The adapters named in `names`, in load order (engines first): the order in which they
    /// provide signals, the first one winning.
    pub fn present(&self, names: &[String]) -> Vec<&AdapterSpec> {
        self.list
            .iter()
            .filter(|a| names.contains(&a.name))
            .collect()
    }
}

/// The hint for signal `name`, which adapter `a` defines but could not compute for `reason`:
/// the adapter's configured hint says what to do; the raw reason only when there is none.
pub fn absent_hint(a: &AdapterSpec, name: &str, reason: &str) -> String {
    match a.hints.get(name) {
        Some(h) => h.clone(),
        None => format!("{}: {reason}", a.name),
    }
}

/// Hints for the catalog signals that no `present` adapter provided and that have no hint yet:
/// the hint of a present adapter, else where such a signal would come from (an exporter to
/// scrape, or "`engine` does not export it").
pub fn fill_missing_hints(
    snapshot: &mut Snapshot,
    catalog: &Catalog,
    adapters: &Adapters,
    present: &[&AdapterSpec],
    engine: Option<&str>,
    provided: &BTreeSet<&str>,
) {
    for def in catalog.signals() {
        let name = def.name.as_str();
        if provided.contains(name)
            || snapshot
                .hint_at(catalog.signal(name).unwrap_or(0))
                .is_some()
        {
            continue;
        }
        let hint = present
            .iter()
            .find_map(|a| a.hints.get(name).cloned())
            .or_else(|| {
                let kind = adapters
                    .list
                    .iter()
                    .find(|a| a.signals.contains_key(name))
                    .map(|a| a.kind);
                match kind {
                    Some(AdapterKind::Gpu) => Some("no GPU metrics for this target: scrape dcgm-exporter (default :9400) beside the engine, or use --nvml".to_string()),
                    Some(AdapterKind::Host) => Some("no host metrics for this target: scrape node_exporter (default :9100) beside the engine".to_string()),
                    Some(AdapterKind::Container) => Some("no container metrics for this replica: scrape the kubelet's /metrics/cadvisor, and keep the pod label on the engine's series (they join by pod)".to_string()),
                    Some(AdapterKind::Engine) => engine.map(|e| format!("{e} does not export it")),
                    None => None,
                }
            });
        if let Some(h) = hint {
            let _ = snapshot.set_hint(catalog, name, h);
        }
    }
}

/// A short provenance string: the metric names an expression reads.
fn describe(expr: &spec::Expr) -> String {
    use spec::Expr::*;
    fn names(e: &spec::Expr, out: &mut Vec<String>) {
        match e {
            Gauge(s) | Rate(s) | Increase(s) | Changes(s) | Resets(s) | BitShare(s)
            | ShareBelow(s) | Quantile(s) | QuantileFloor(s) | HistMean(s) => {
                if let Some(n) = s.metric.values().first() {
                    if !out.iter().any(|x| x == n) {
                        out.push(n.to_string());
                    }
                }
            }
            Sum(e) | Max(e) | Min(e) | Avg(e) | Count(e) | Scale(e, _) | PercentToRatio(e) => {
                names(e, out)
            }
            Div(a, b) | Sub(a, b) | ZeroWhenAbsent(a, b) => {
                names(a, out);
                names(b, out);
            }
            Add(v) | First(v) => v.iter().for_each(|e| names(e, out)),
            Scaling(s) => {
                names(&s.work, out);
                names(&s.batch, out);
                if let Some(e) = &s.lifetime {
                    names(e, out);
                }
            }
            QueuedShare(s) => {
                names(&s.queue, out);
                names(&s.running, out);
            }
            Dispersion(s) | Served(s) => {
                names(&s.done, out);
                names(&s.present, out);
            }
            Stall(s) => {
                names(&s.work, out);
                names(&s.busy, out);
            }
            Const(_) => {}
        }
    }
    let mut out = Vec::new();
    names(expr, &mut out);
    out.join(", ")
}

impl Adapters {
    /// Every sample name a diagnosis reads: the metrics of every signal, pick, gauge fact, info
    /// metric and version hint, as written (a histogram's or counter's base name stands for its
    /// `_bucket`, `_sum`, `_count` and `_total` samples, see [`Adapters::reads`]). A reader
    /// may drop every other series without changing a diagnosis.
    pub fn read_names(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for a in &self.list {
            for e in a.signals.values() {
                out.extend(e.metric_names().into_iter().map(str::to_string));
            }
            for p in a.picks.values() {
                out.extend(p.largest_rate.metric.values().iter().map(|n| n.to_string()));
            }
            for s in a.gauge_facts.values() {
                out.extend(s.metric.values().iter().map(|n| n.to_string()));
            }
            out.extend(a.info_facts.iter().map(|i| i.metric.clone()));
            out.extend(a.versions.iter().map(|v| v.metric.clone()));
        }
        out
    }

    /// Whether `sample` is one of `names` ([`Adapters::read_names`]) or a sample of one.
    pub fn reads(names: &BTreeSet<String>, sample: &str) -> bool {
        names.contains(sample)
            || ["_bucket", "_sum", "_count", "_total", "_created"]
                .iter()
                .any(|suffix| {
                    sample
                        .strip_suffix(suffix)
                        .is_some_and(|b| names.contains(b))
                })
    }
}

#[cfg(test)]
mod tests {
    /// Every selector of the loaded adapters has a number of its own: two sharing one would
    /// read each other's series.
    #[test]
    fn every_loaded_selector_has_its_own_slot() {
        let rules = crate::rules::load_rules(None).unwrap();
        let mut slots = Vec::new();
        for a in &rules.adapters.list {
            for e in a.signals.values() {
                e.visit(&mut |n| slots.extend(n.selector().map(|s| s.slot)));
            }
            slots.extend(a.gauge_facts.values().map(|s| s.slot));
            slots.extend(a.picks.values().map(|p| p.largest_rate.slot));
        }
        assert!(slots.len() > 100, "{} selectors", slots.len());
        let mut numbers: Vec<u32> = slots.iter().map(|s| s.expect("numbered")).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), slots.len());
    }
}
