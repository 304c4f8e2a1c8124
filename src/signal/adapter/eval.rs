//! Evaluates adapter expressions over one target's series.
//!
//! This is the one place where raw samples become windowed values: rates and increases of
//! counters, `histogram_quantile`, histogram means, gauge statistics, all through `window`'s
//! Prometheus-compatible functions. Without timestamps (a single saved `/metrics` page) values are
//! lifetime figures: histograms are read cumulatively, ratios of counters are ratios of totals,
//! and a plain per-second rate is not computable and reported as absent.

use std::collections::BTreeMap;

use crate::signal::samples::Samples;
use crate::signal::series::Series;
use crate::signal::window;

use super::spec::{
    Arrivals, Expr, Matchers, PickSpec, QueuedShare, Scaling, SeriesSelector, Stall,
};

/// Which gauge statistic a leaf reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    /// Newest value in the window.
    Last,
    /// Mean over the window.
    Mean,
    /// Maximum over the window.
    Max,
    /// Minimum over the window.
    Min,
}

/// The time frame of an evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    /// End of the window (ms); None when the input has no timestamps.
    pub end_ms: Option<i64>,
    /// Window length (ms).
    pub window_ms: i64,
}

/// One target's series, indexed by sample name.
pub struct TargetSeries<'a> {
    /// Sample names, sorted, and their series at the same index.
    names: Vec<&'a str>,
    named: Vec<Named<'a>>,
    /// Bucket rates already read at the latest frame (see [`TargetSeries::bucket_rates`]).
    buckets: std::sync::Mutex<BucketMemo>,
    /// The series each selector selects: the same at every step, so found once.
    selections: std::sync::Mutex<SelectionMemo>,
    /// [`TargetSeries::least_label`]'s answers: (prefixes, label, value).
    least_labels: std::sync::Mutex<Vec<LeastLabel>>,
}

type LeastLabel = (Vec<String>, String, Option<String>);

/// At one frame, each histogram's `(le, rate)` pairs: the p50 and the p99 of a histogram read
/// the same buckets, so a step reads them once.
#[derive(Default)]
struct BucketMemo {
    frame: Option<(Option<i64>, i64)>,
    entries: Vec<(SeriesSelector, Vec<(f64, f64)>)>,
}

/// The series of one sample name, each with its [`label_key`]: built once, read by every
/// expression at every step of a postmortem.
#[derive(Default)]
struct Named<'a> {
    series: Vec<&'a Series>,
    keys: Vec<String>,
    /// Each series' `le` bound, parsed once (None without one).
    les: Vec<Option<f64>>,
}

/// What [`select`] found for a selector and suffix: the index of the sample name and the
/// indices of its series the matchers accept, in their order and sorted by label key. A
/// postmortem reads the same few hundred selectors at every step of every target, so each is
/// matched and sorted once per target rather than at every step.
struct Selection {
    name: usize,
    in_order: std::sync::Arc<[u32]>,
    by_key: std::sync::Arc<[u32]>,
}

/// The suffixes a numbered selector is read with, each with its own selection.
const SUFFIXES: [&str; 4] = ["", "_bucket", "_sum", "_count"];

/// Selections of numbered selectors ([`SeriesSelector::slot`]) at `slot * 4 +` the suffix's index in
/// [`SUFFIXES`]. Selectors made while evaluating have no number and are matched each time.
#[derive(Default)]
struct SelectionMemo {
    by_slot: Vec<Option<Result<Selection, Absent>>>,
}

/// A selection's name and its series, in their order or by key.
fn in_order_or_by_key(
    found: &Result<Selection, Absent>,
    sorted: bool,
) -> Result<(usize, std::sync::Arc<[u32]>), Absent> {
    let found = found.as_ref().map_err(Clone::clone)?;
    let indices = if sorted {
        &found.by_key
    } else {
        &found.in_order
    };
    Ok((found.name, std::sync::Arc::clone(indices)))
}

/// Whether two selectors select the same series.
fn selects_alike(a: &SeriesSelector, b: &SeriesSelector) -> bool {
    a.metric == b.metric && a.matchers == b.matchers && a.where_not == b.where_not
}

impl<'a> TargetSeries<'a> {
    /// Indexes `series`.
    pub fn new(series: impl IntoIterator<Item = &'a Series>) -> Self {
        let mut by_name: BTreeMap<&'a str, Named<'a>> = BTreeMap::new();
        for s in series {
            let named = by_name.entry(s.name.as_str()).or_default();
            named.series.push(s);
            named.keys.push(label_key(s));
            named.les.push(s.labels.get("le").and_then(parse_le));
        }
        let (names, named) = by_name.into_iter().unzip();
        TargetSeries {
            names,
            named,
            buckets: Default::default(),
            selections: Default::default(),
            least_labels: Default::default(),
        }
    }

    /// The smallest value of `label` on the series under any of `prefixes`: a fact of the
    /// series set, not of a window, so read once however many steps ask.
    pub fn least_label(&self, prefixes: &[String], label: &str) -> Option<String> {
        let mut memo = self
            .least_labels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, _, v)) = memo.iter().find(|(p, l, _)| p == prefixes && l == label) {
            return v.clone();
        }
        // A series under two prefixes is seen twice: harmless for a minimum.
        let v = prefixes
            .iter()
            .flat_map(|p| self.with_prefix(p))
            .filter_map(|s| s.labels.get(label))
            .min()
            .map(str::to_string);
        memo.push((prefixes.to_vec(), label.to_string(), v.clone()));
        v
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        self.names.binary_search(&name).ok()
    }

    /// Series with this sample name.
    pub fn named(&self, name: &str) -> &[&'a Series] {
        self.index_of(name)
            .map_or(&[], |i| self.named[i].series.as_slice())
    }

    /// Series whose sample name starts with `prefix` (a range of the sorted index, not a scan).
    pub fn with_prefix<'p>(&'p self, prefix: &'p str) -> impl Iterator<Item = &'a Series> + 'p {
        let first = self.names.partition_point(|n| *n < prefix);
        self.names[first..]
            .iter()
            .zip(&self.named[first..])
            .take_while(move |(name, _)| name.starts_with(prefix))
            .flat_map(|(_, n)| n.series.iter().copied())
    }

    /// What `sel` selects with `suffix`, as the index of the sample name and of its series: in
    /// their order, or sorted by label key.
    fn selected_indices(
        &self,
        sel: &SeriesSelector,
        suffix: &str,
        sorted: bool,
    ) -> Result<(usize, std::sync::Arc<[u32]>), Absent> {
        let kind = SUFFIXES.iter().position(|x| *x == suffix);
        let (Some(slot), Some(kind)) = (sel.slot, kind) else {
            return in_order_or_by_key(&self.find(sel, suffix), sorted);
        };
        let at = slot as usize * SUFFIXES.len() + kind;
        let mut memo = self
            .selections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if memo.by_slot.len() <= at {
            memo.by_slot.resize_with(at + 1, || None);
        }
        let found = memo.by_slot[at].get_or_insert_with(|| self.find(sel, suffix));
        in_order_or_by_key(found, sorted)
    }

    /// The selection of the first of the selector's names that has any series.
    fn find(&self, sel: &SeriesSelector, suffix: &str) -> Result<Selection, Absent> {
        for name in sel.metric.values() {
            let full = if suffix.is_empty() {
                std::borrow::Cow::Borrowed(name)
            } else {
                std::borrow::Cow::Owned(format!("{name}{suffix}"))
            };
            let Some(i) = self.index_of(&full) else {
                continue;
            };
            let named = &self.named[i];
            let in_order: Vec<u32> = (0..named.series.len() as u32)
                .filter(|&j| matches(named.series[j as usize], &sel.matchers, &sel.where_not))
                .collect();
            let mut by_key = in_order.clone();
            // Stable: equal keys keep their order, as a sort of the values would.
            by_key.sort_by(|&x, &y| named.keys[x as usize].cmp(&named.keys[y as usize]));
            return Ok(Selection {
                name: i,
                in_order: in_order.into(),
                by_key: by_key.into(),
            });
        }
        Err(format!("no series `{}{suffix}`", first_name(sel)))
    }

    /// The `(le, rate)` pairs of the `_bucket` series `sel` selects, over `frame` (totals
    /// without timestamps), in selection order; read once per frame and histogram.
    fn bucket_rates(&self, sel: &SeriesSelector, frame: Frame) -> Result<Vec<(f64, f64)>, Absent> {
        let mut memo = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (frame.end_ms, frame.window_ms);
        if memo.frame != Some(key) {
            memo.frame = Some(key);
            memo.entries.clear();
        }
        // The quantile itself does not change which buckets are read.
        if let Some((_, pairs)) = memo.entries.iter().find(|(s, _)| selects_alike(s, sel)) {
            return Ok(pairs.clone());
        }
        let (name, indices) = self.selected_indices(sel, "_bucket", false)?;
        let mut pairs: Vec<(f64, f64)> = Vec::with_capacity(indices.len());
        let named = &self.named[name];
        for &j in indices.iter() {
            let (s, le) = (named.series[j as usize], named.les[j as usize]);
            let Some(le) = le else {
                continue;
            };
            let v = match frame.end_ms {
                Some(end) => window::rate(&s.samples, end, frame.window_ms),
                None => window::last_value(&s.samples),
            };
            if let Some(v) = v {
                pairs.push((le, v));
            }
        }
        memo.entries.push((sel.clone(), pairs.clone()));
        Ok(pairs)
    }

    /// Every sample name present.
    pub fn names(&self) -> impl Iterator<Item = &&'a str> {
        self.names.iter()
    }

    /// Every series.
    pub fn all(&self) -> impl Iterator<Item = &&'a Series> {
        self.named.iter().flat_map(|n| n.series.iter())
    }
}

/// A vector: one value per label set (labels without `le`, as a [`label_key`]), sorted by key.
type Vector<'t> = smallvec::SmallVec<[(&'t str, f64); 4]>;

/// Result of evaluating an expression.
struct Out<'t> {
    values: Vector<'t>,
    /// Lifetime mode: the values are counter totals standing in for rates, meaningful only in
    /// a ratio.
    totals: bool,
}

/// Why an expression has no value.
pub type Absent = String;

/// Evaluates a signal expression to one number (aggregating any remaining vector by sum).
pub fn eval_signal(
    expr: &Expr,
    ts: &TargetSeries<'_>,
    frame: Frame,
    stat: Stat,
) -> Result<f64, Absent> {
    let out = eval(expr, ts, frame, stat)?;
    if out.totals {
        return Err(
            "a per-second rate needs samples with timestamps (record a range, or scrape twice)"
                .into(),
        );
    }
    match out.values.len() {
        0 => Err("no matching series in the window".into()),
        1 => Ok(out.values[0].1),
        _ => Ok(out.values.iter().map(|(_, v)| v).sum()),
    }
}

/// One signal's memo: the expression and window length its values belong to, and the values
/// by instant, oldest first.
type MemoEntry = (Expr, i64, std::collections::VecDeque<(i64, Option<f64>)>);

/// The instant values [`combined_window_stats`] computed, per signal, so that a window slid
/// one sample on reuses all but the newest: a postmortem evaluates each instant once, not once
/// per window that holds it.
#[derive(Debug, Default)]
pub struct InstantMemo {
    by_signal: std::collections::HashMap<String, MemoEntry>,
    /// A queued share's, batch scaling's or arrival dispersion's two values at each instant,
    /// per signal.
    pairs: std::collections::HashMap<String, PairEntry>,
}

/// The values of an expression's two parts at each instant since the instant before: the
/// expression, then (instant, (the instant before or the window's start, values)), oldest
/// first.
type PairEntry = (Expr, std::collections::VecDeque<(i64, (i64, Pair))>);

/// Two expressions' values at one instant.
type Pair = [Option<f64>; 2];

/// A memo, the signal whose values it keeps, and that signal's expression.
type MemoOf<'m> = (&'m mut InstantMemo, &'m str, &'m Expr);

/// [`eval_signal`] for a signal that `memo` may keep instant values of: a queued share, a batch
/// scaling and an arrival dispersion read two values at every sample instant of the window, and
/// a window slid one sample on shares all but its ends with the window before.
pub fn eval_signal_memo(
    expr: &Expr,
    ts: &TargetSeries<'_>,
    frame: Frame,
    memo: Option<(&mut InstantMemo, &str)>,
) -> Result<f64, Absent> {
    let memo = memo.map(|(m, signal)| (m, signal, expr));
    match expr {
        Expr::QueuedShare(s) => queued_share(s, ts, frame, memo),
        Expr::Scaling(s) => scaling(s, ts, frame, memo),
        Expr::Dispersion(s) => dispersion(s, ts, frame, memo),
        Expr::Served(s) => served(s, ts, frame, memo),
        Expr::Stall(s) => stall(s, ts, frame, memo),
        _ => eval_signal(expr, ts, frame, Stat::Last),
    }
}

/// Window statistics (min, mean, max) of a signal whose expression combines gauges by division
/// or subtraction: the statistic of a ratio is not the ratio of the statistics (a framebuffer
/// whose total drops when the process dies would show a maximum below its minimum), so the
/// expression is evaluated at every sample instant of the window and those values summarised.
/// None when the expression has no such operator (leaf statistics are exact enough there).
/// `memo` keeps `signal`'s instant values between calls (for the same expression and window
/// length).
pub fn combined_window_stats(
    expr: &Expr,
    ts: &TargetSeries<'_>,
    frame: Frame,
    memo: Option<(&mut InstantMemo, &str)>,
) -> Option<(f64, f64, f64)> {
    let end = frame.end_ms?;
    if !expr.stats_per_instant() {
        return None;
    }
    let start = end.saturating_sub(frame.window_ms);
    let times = sample_instants(expr, ts, start, end);
    let at = |t: i64| {
        let frame = Frame {
            end_ms: Some(t),
            window_ms: frame.window_ms,
        };
        eval_signal(expr, ts, frame, Stat::Last).ok()
    };
    let values: Vec<f64> = match memo {
        None => times.iter().filter_map(|&t| at(t)).collect(),
        Some((memo, signal)) => {
            // Looked up before inserting: the signal's name is copied once, not at every step.
            if !memo.by_signal.contains_key(signal) {
                let fresh = (expr.clone(), frame.window_ms, Default::default());
                memo.by_signal.insert(signal.to_string(), fresh);
            }
            let entry = memo.by_signal.get_mut(signal)?;
            // An instant's value depends on the expression and the window length only.
            if entry.0 != *expr || entry.1 != frame.window_ms {
                *entry = (expr.clone(), frame.window_ms, Default::default());
            }
            let wanted = times.iter().map(|&t| (t, t));
            kept_or_fresh(&mut entry.2, start, wanted, |_, _| true, at)
                .into_iter()
                .filter_map(|(_, v)| v)
                .collect()
        }
    };
    if values.is_empty() {
        return None;
    }
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    Some((min, mean, max))
}

/// The values of `wanted` instants (each with what computing it needs), oldest first: from
/// `known` where an instant is kept and `reusable` accepts it, else computed by `fresh` and kept
/// in its place. Instants at or before `start` are dropped first: windows only move on. Both
/// lists are in time order, so one walk pairs them (new instants come at the end).
fn kept_or_fresh<C, E: Copy>(
    known: &mut std::collections::VecDeque<(i64, E)>,
    start: i64,
    wanted: impl Iterator<Item = (i64, C)>,
    reusable: impl Fn(&E, &C) -> bool,
    mut fresh: impl FnMut(C) -> E,
) -> Vec<(i64, E)> {
    while known.front().is_some_and(|(t, _)| *t <= start) {
        known.pop_front();
    }
    let mut j = 0;
    wanted
        .map(|(t, c)| {
            while j < known.len() && known[j].0 < t {
                j += 1;
            }
            let v = match known.get(j).copied() {
                Some((k, e)) if k == t && reusable(&e, &c) => e,
                Some((k, _)) if k == t => {
                    let v = fresh(c);
                    known[j].1 = v;
                    v
                }
                _ => {
                    let v = fresh(c);
                    known.insert(j, (t, v));
                    v
                }
            };
            j += 1;
            (t, v)
        })
        .collect()
}

/// Every instant in (`start`, `end`] at which a series `expr` reads has a sample, in order.
/// Each series' window is found by binary search: a step costs its window, not the history.
fn sample_instants(expr: &Expr, ts: &TargetSeries<'_>, start: i64, end: i64) -> Vec<i64> {
    let mut times: Vec<i64> = Vec::new();
    let mut other: Vec<i64> = Vec::new();
    for s in expr.metric_names().iter().flat_map(|n| ts.named(n)) {
        other.clear();
        other.extend(s.samples.window(start, end).times().flatten());
        // Series scraped together share their instants: most need no merge.
        if other != times {
            times = merge_dedup(&times, &other);
        }
    }
    times
}

/// The union of two sorted lists of instants, sorted, each instant once.
fn merge_dedup(a: &[i64], b: &[i64]) -> Vec<i64> {
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) if x <= y => {
                i += 1;
                j += usize::from(x == y);
                x
            }
            (_, Some(&y)) => {
                j += 1;
                y
            }
            (Some(&x), None) => {
                i += 1;
                x
            }
            (None, None) => unreachable!(),
        };
        if out.last() != Some(&next) {
            out.push(next);
        }
    }
    out
}

/// True when the expression reads a gauge, so window statistics are meaningful. A batch
/// scaling, a queued share and an arrival dispersion are statistics of the window already.
pub fn reads_gauge(expr: &Expr) -> bool {
    match expr {
        Expr::Gauge(_) => true,
        Expr::Scaling(_)
        | Expr::QueuedShare(_)
        | Expr::Dispersion(_)
        | Expr::Served(_)
        | Expr::Stall(_) => false,
        e => e.children().into_iter().any(reads_gauge),
    }
}

/// The value of `pick.label` whose series of `pick.largest_rate` grow fastest over the window
/// (largest totals without timestamps); ties go to the smallest value, so the choice does not
/// depend on the order of the input.
pub fn choose(pick: &PickSpec, ts: &TargetSeries<'_>, frame: Frame) -> Result<String, Absent> {
    let series = select(&pick.largest_rate, "", ts)?;
    let mut by_value: BTreeMap<&str, f64> = BTreeMap::new();
    for (s, _) in series {
        let Some(value) = s.labels.get(&pick.label) else {
            continue;
        };
        let v = match frame.end_ms {
            Some(end) => window::rate(&s.samples, end, frame.window_ms),
            None => window::last_value(&s.samples),
        };
        if let Some(v) = v.filter(|v| v.is_finite()) {
            *by_value.entry(value).or_default() += v;
        }
    }
    let mut best: Option<(&str, f64)> = None;
    for (value, v) in by_value {
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((value, v));
        }
    }
    best.map(|(v, _)| v.to_string()).ok_or_else(|| {
        format!(
            "no `{}` series with a `{}` label in the window to choose from",
            first_name(&pick.largest_rate),
            pick.label
        )
    })
}

/// The counters of `zero_when_absent` terms that were taken as zero for this target: those
/// with no series while their sibling has some. Said in the signal's provenance.
pub fn zeroed(expr: &Expr, ts: &TargetSeries<'_>, frame: Frame) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    expr.visit(&mut |e| {
        let Expr::ZeroWhenAbsent(a, b) = e else {
            return;
        };
        let absent = !matches!(eval(a, ts, frame, Stat::Last), Ok(o) if !o.values.is_empty());
        if absent && eval(b, ts, frame, Stat::Last).is_ok() {
            for n in a.metric_names() {
                if !out.iter().any(|x| x == n) {
                    out.push(n.to_string());
                }
            }
        }
    });
    out
}

// Long on purpose: one arm per expression kind, each the Prometheus function it mirrors; split
// up, the arms would only pass the same four arguments along.
/// An expression's vector (label key, value) and whether its values are lifetime totals.
pub(super) fn eval_vector<'t>(
    expr: &Expr,
    ts: &'t TargetSeries<'_>,
    frame: Frame,
    stat: Stat,
) -> Result<(Vector<'t>, bool), Absent> {
    eval(expr, ts, frame, stat).map(|o| (o.values, o.totals))
}

fn eval<'t>(
    expr: &Expr,
    ts: &'t TargetSeries<'_>,
    frame: Frame,
    stat: Stat,
) -> Result<Out<'t>, Absent> {
    match expr {
        Expr::Gauge(sel) => leaf(sel, "", ts, |s| match frame.end_ms {
            // Every step reads each gauge's newest value: from the window's end, not a walk.
            Some(end) if stat == Stat::Last => {
                window::last_in_window(&s.samples, end, frame.window_ms)
            }
            Some(end) => {
                window::gauge_stats(&s.samples, end, frame.window_ms).map(|g| match stat {
                    Stat::Last => g.last,
                    Stat::Mean => g.mean,
                    Stat::Max => g.max,
                    Stat::Min => g.min,
                })
            }
            None => window::last_value(&s.samples),
        })
        .map(|values| Out {
            values,
            totals: false,
        }),
        Expr::Rate(sel) => rates(sel, "", ts, frame),
        Expr::Increase(sel) => match frame.end_ms {
            Some(end) => leaf(sel, "", ts, |s| {
                window::increase(&s.samples, end, frame.window_ms)
            }),
            None => leaf(sel, "", ts, |s| window::last_value(&s.samples)),
        }
        .map(|values| Out {
            values,
            totals: false,
        }),
        Expr::Changes(sel) | Expr::Resets(sel) => {
            let resets = matches!(expr, Expr::Resets(_));
            let what = if resets { "resets" } else { "changes" };
            let end = frame.end_ms.ok_or_else(|| {
                format!("counting {what} needs samples with timestamps (record a range)")
            })?;
            let count = |s: &Samples| match resets {
                true => window::resets(s, end, frame.window_ms),
                false => window::changes(s, end, frame.window_ms),
            };
            leaf(sel, "", ts, |s| count(&s.samples)).map(|values| Out {
                values,
                totals: false,
            })
        }
        Expr::BitShare(sel) => {
            let mask = sel.mask.ok_or("bit_share needs `mask`")?;
            leaf(sel, "", ts, |s| bit_share(&s.samples, mask, frame)).map(|values| Out {
                values,
                totals: false,
            })
        }
        Expr::ShareBelow(sel) => {
            let below = sel.below.ok_or("share_below needs `below`")?;
            let end = frame.end_ms.ok_or(
                "a share of slow intervals needs samples with timestamps (record a range)",
            )?;
            leaf(sel, "", ts, |s| {
                share_below(&s.samples, below, end, frame.window_ms)
            })
            .map(|values| Out {
                values,
                totals: false,
            })
        }
        Expr::Quantile(sel) | Expr::QuantileFloor(sel) => {
            let q = sel.q.ok_or("quantile needs `q`")?;
            let mut buckets = ts.bucket_rates(sel, frame)?;
            if buckets.is_empty() {
                return Err(format!(
                    "no samples of `{}_bucket` in the window",
                    first_name(sel)
                ));
            }
            // Sum by le: both merge equal bounds themselves.
            let v = match expr {
                Expr::QuantileFloor(_) => window::histogram_quantile_floor(q, &mut buckets),
                _ => window::histogram_quantile(q, &mut buckets),
            };
            match v {
                Some(v) if v.is_finite() => Ok(Out {
                    values: smallvec::smallvec![("", v)],
                    totals: false,
                }),
                _ => Err(format!(
                    "`{}` has no observations in the window",
                    first_name(sel)
                )),
            }
        }
        Expr::HistMean(sel) => {
            let sum = aggregate(rates(sel, "_sum", ts, frame)?, |v| v.iter().sum())?;
            let count = aggregate(rates(sel, "_count", ts, frame)?, |v| v.iter().sum())?;
            let (s, c) = (single(&sum), single(&count));
            match (s, c) {
                (Some(s), Some(c)) if c > 0.0 => Ok(Out {
                    values: smallvec::smallvec![("", s / c)],
                    totals: false,
                }),
                _ => Err(format!(
                    "`{}` has no observations in the window",
                    first_name(sel)
                )),
            }
        }
        Expr::Sum(e) => aggregate(eval(e, ts, frame, stat)?, |v| v.iter().sum()),
        Expr::Max(e) => aggregate(eval(e, ts, frame, stat)?, |v| {
            v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        }),
        Expr::Min(e) => aggregate(eval(e, ts, frame, stat)?, |v| {
            v.iter().copied().fold(f64::INFINITY, f64::min)
        }),
        Expr::Avg(e) => aggregate(eval(e, ts, frame, stat)?, |v| {
            v.iter().sum::<f64>() / v.len() as f64
        }),
        Expr::Count(e) => {
            let out = eval(e, ts, frame, stat)?;
            Ok(Out {
                values: smallvec::smallvec![("", out.values.len() as f64)],
                totals: false,
            })
        }
        Expr::Div(a, b) => {
            let (a, b) = (eval(a, ts, frame, stat)?, eval(b, ts, frame, stat)?);
            // Totals over totals is a proper ratio even without timestamps.
            let totals = a.totals != b.totals;
            binary(a.values, b.values, totals, |x, y| (y != 0.0).then(|| x / y))
        }
        Expr::Sub(a, b) => {
            let (a, b) = (eval(a, ts, frame, stat)?, eval(b, ts, frame, stat)?);
            let totals = a.totals || b.totals;
            binary(a.values, b.values, totals, |x, y| Some(x - y))
        }
        Expr::Add(terms) => {
            let mut acc: Option<Out> = None;
            for t in terms {
                let o = eval(t, ts, frame, stat)?;
                acc = Some(match acc {
                    None => o,
                    Some(a) => {
                        let totals = a.totals || o.totals;
                        binary(a.values, o.values, totals, |x, y| Some(x + y))?
                    }
                });
            }
            acc.ok_or_else(|| "empty `add`".to_string())
        }
        Expr::Scale(e, k) => {
            let mut out = eval(e, ts, frame, stat)?;
            out.values.iter_mut().for_each(|(_, v)| *v *= k);
            Ok(out)
        }
        Expr::Const(c) => Ok(Out {
            values: smallvec::smallvec![("", *c)],
            totals: false,
        }),
        Expr::PercentToRatio(e) => {
            let mut out = eval(e, ts, frame, stat)?;
            if out.values.iter().any(|(_, v)| *v > 1.0) {
                out.values.iter_mut().for_each(|(_, v)| *v /= 100.0);
            }
            Ok(out)
        }
        Expr::ZeroWhenAbsent(a, sibling) => match eval(a, ts, frame, stat) {
            Ok(o) if !o.values.is_empty() => Ok(o),
            Err(reason) => {
                // Never incremented, so never created: zero wherever the sibling has series.
                let mut o = eval(sibling, ts, frame, stat)
                    .map_err(|e| format!("{reason}, and its sibling: {e}"))?;
                o.values.iter_mut().for_each(|(_, v)| *v = 0.0);
                Ok(o)
            }
            Ok(o) => Ok(o),
        },
        Expr::Scaling(s) => scaling(s, ts, frame, None).map(|v| Out {
            values: smallvec::smallvec![("", v)],
            totals: false,
        }),
        Expr::QueuedShare(s) => queued_share(s, ts, frame, None).map(|v| Out {
            values: smallvec::smallvec![("", v)],
            totals: false,
        }),
        Expr::Dispersion(s) => dispersion(s, ts, frame, None).map(|v| Out {
            values: smallvec::smallvec![("", v)],
            totals: false,
        }),
        Expr::Served(s) => served(s, ts, frame, None).map(|v| Out {
            values: smallvec::smallvec![("", v)],
            totals: false,
        }),
        Expr::Stall(s) => stall(s, ts, frame, None).map(|v| Out {
            values: smallvec::smallvec![("", v)],
            totals: false,
        }),
        Expr::First(alternatives) => {
            let mut reasons = Vec::new();
            for a in alternatives {
                match eval(a, ts, frame, stat) {
                    Ok(o) if !o.values.is_empty() => return Ok(o),
                    Ok(_) => reasons.push("no values".to_string()),
                    Err(e) => reasons.push(e),
                }
            }
            Err(reasons.join(", or "))
        }
    }
}

/// The per-second rates of the counters `sel` selects with `suffix` (totals without
/// timestamps).
fn rates<'t>(
    sel: &SeriesSelector,
    suffix: &str,
    ts: &'t TargetSeries<'_>,
    frame: Frame,
) -> Result<Out<'t>, Absent> {
    match frame.end_ms {
        Some(end) => leaf(sel, suffix, ts, |s| {
            window::rate(&s.samples, end, frame.window_ms)
        })
        .map(|values| Out {
            values,
            totals: false,
        }),
        None => leaf(sel, suffix, ts, |s| window::last_value(&s.samples)).map(|values| Out {
            values,
            totals: true,
        }),
    }
}

/// Each instant of `times` (after `start`) with the frame that reads the newest sample since
/// the instant before, so that series scraped a moment apart still pair up.
fn instant_frames(times: &[i64], start: i64) -> impl Iterator<Item = (i64, Frame)> + '_ {
    times.iter().enumerate().map(move |(i, &t)| {
        let since = if i == 0 { start } else { times[i - 1] };
        let frame = Frame {
            end_ms: Some(t),
            window_ms: t - since,
        };
        (t, frame)
    })
}

/// At each sample instant of `clock` in (`start`, `end`], `parts` evaluated over the frame
/// since the instant before ([`instant_frames`]). With `memo`, the values of instants a
/// window before already had at the same frame are taken from it, and this window's kept.
/// Without timestamps there are no instants: `needs` says so.
fn instant_pairs(
    clock: &Expr,
    parts: [&Expr; 2],
    ts: &TargetSeries<'_>,
    frame: Frame,
    memo: Option<MemoOf<'_>>,
    needs: &str,
) -> Result<Vec<(i64, Pair)>, Absent> {
    let end = frame.end_ms.ok_or(needs)?;
    let start = end.saturating_sub(frame.window_ms);
    let times = sample_instants(clock, ts, start, end);
    let at = |frame: Frame| parts.map(|e| eval_signal(e, ts, frame, Stat::Last).ok());
    let Some((memo, signal, whole)) = memo else {
        return Ok(instant_frames(&times, start)
            .map(|(t, frame)| (t, at(frame)))
            .collect());
    };
    // Looked up before inserting: the signal's name is copied once, not at every step.
    if !memo.pairs.contains_key(signal) {
        memo.pairs
            .insert(signal.to_string(), (whole.clone(), Default::default()));
    }
    let Some((expr, known)) = memo.pairs.get_mut(signal) else {
        unreachable!("inserted above")
    };
    // Instant values belong to the expression they were read for.
    if expr != whole {
        *expr = whole.clone();
        known.clear();
    }
    // An instant is reused only at the same frame (the window's first instant is read since
    // the window's start).
    let wanted = instant_frames(&times, start).map(|(t, frame)| (t, (t - frame.window_ms, frame)));
    let same_since = |(kept, _): &(i64, Pair), (since, _): &(i64, Frame)| kept == since;
    let values = kept_or_fresh(known, start, wanted, same_since, |(since, frame)| {
        (since, at(frame))
    });
    Ok(values.into_iter().map(|(t, (_, v))| (t, v)).collect())
}

/// Evaluates a [`QueuedShare`] over the window (see its docs).
fn queued_share(
    s: &QueuedShare,
    ts: &TargetSeries<'_>,
    frame: Frame,
    memo: Option<MemoOf<'_>>,
) -> Result<f64, Absent> {
    let needs = "a queued share needs samples with timestamps (record a range)";
    let instants = instant_pairs(&s.queue, [&s.queue, &s.running], ts, frame, memo, needs)?;
    let (mut busy, mut queued) = (0usize, 0usize);
    for (_, values) in instants {
        let [Some(queue), Some(running)] = values else {
            continue;
        };
        if queue > 0.0 || running > 0.0 {
            busy += 1;
            queued += usize::from(queue > 0.0);
        }
    }
    if busy == 0 {
        return Err("the replica was never busy in the window".into());
    }
    Ok(queued as f64 / busy as f64)
}

/// Fewest intervals for a [`Arrivals`] statistic to be read: a variance or a rate from fewer
/// says little.
const ARRIVALS_MIN_INTERVALS: usize = 8;

/// One interval between consecutive readable samples of [`Arrivals`]: when it began and ended
/// (ms), the requests that arrived in it and those that finished.
struct ArrivalInterval {
    start: i64,
    end: i64,
    arrived: f64,
    finished: f64,
}

/// The window's intervals of [`Arrivals`], oldest first; None where the run breaks: a missing
/// or non-finite value (a stale marker), as a gap does, and a counter reset (a restart says
/// nothing of how many arrived in between). At least [`ARRIVALS_MIN_INTERVALS`] are read.
fn arrival_intervals(
    s: &Arrivals,
    ts: &TargetSeries<'_>,
    frame: Frame,
    memo: Option<MemoOf<'_>>,
    needs: &str,
) -> Result<Vec<Option<ArrivalInterval>>, Absent> {
    let instants = instant_pairs(&s.present, [&s.done, &s.present], ts, frame, memo, needs)?;
    let mut out = Vec::with_capacity(instants.len());
    let mut prev: Option<(i64, f64, f64)> = None;
    for (t, values) in instants {
        let (Some(done), Some(present)) = (values[0], values[1]) else {
            prev = None;
            out.push(None);
            continue;
        };
        if !done.is_finite() || !present.is_finite() {
            prev = None;
            out.push(None);
            continue;
        }
        if let Some((t0, d0, p0)) = prev {
            out.push((done >= d0).then_some(ArrivalInterval {
                start: t0,
                end: t,
                arrived: done - d0 + present - p0,
                finished: done - d0,
            }));
        }
        prev = Some((t, done, present));
    }
    let read = out.iter().flatten().count();
    if read < ARRIVALS_MIN_INTERVALS {
        return Err(format!(
            "fewer than {ARRIVALS_MIN_INTERVALS} intervals with both counts in the window"
        ));
    }
    Ok(out)
}

/// Evaluates an [`Expr::Dispersion`] over the window (see [`Arrivals`]).
fn dispersion(
    s: &Arrivals,
    ts: &TargetSeries<'_>,
    frame: Frame,
    memo: Option<MemoOf<'_>>,
) -> Result<f64, Absent> {
    let needs = "arrival dispersion needs samples with timestamps (record a range)";
    let intervals = arrival_intervals(s, ts, frame, memo, needs)?;
    let (mut read, mut total) = (0usize, 0.0);
    // Squared differences of neighbouring intervals' arrivals, and how many pairs.
    let (mut squares, mut pairs) = (0.0, 0usize);
    // The previous interval's arrivals, while it is the neighbour of the next one.
    let mut last: Option<f64> = None;
    for interval in &intervals {
        let Some(i) = interval else {
            last = None;
            continue;
        };
        read += 1;
        total += i.arrived;
        if let Some(before) = last {
            squares += (i.arrived - before).powi(2);
            pairs += 1;
        }
        last = Some(i.arrived);
    }
    if pairs == 0 {
        return Err("no two neighbouring intervals with both counts in the window".into());
    }
    let mean = total / read as f64;
    if mean <= 0.0 {
        return Err("no request arrived in the window".into());
    }
    // The variance from neighbouring intervals (von Neumann's mean square successive
    // difference, halved): the same as the plain variance for arrivals at a steady rate, but
    // a change of rate inside the window adds one difference, not a spread over every
    // interval, so a step in demand does not read as a burst.
    let variance = squares / (2.0 * pairs as f64);
    Ok(variance / mean)
}

/// Evaluates an [`Expr::Served`] over the window (see [`Arrivals`]): requests finished over
/// the span from the first arrival to the last finish, against requests arrived over the span
/// from the first arrival to the last. 0 when requests arrived and none finished.
fn served(
    s: &Arrivals,
    ts: &TargetSeries<'_>,
    frame: Frame,
    memo: Option<MemoOf<'_>>,
) -> Result<f64, Absent> {
    let needs = "a served share needs samples with timestamps (record a range)";
    let intervals = arrival_intervals(s, ts, frame, memo, needs)?;
    // From the first interval in which requests arrived: finishes before it are of requests
    // already in the replica, left out with the time they took.
    let from_first: Vec<&ArrivalInterval> = intervals
        .iter()
        .flatten()
        .skip_while(|i| i.arrived <= 0.0)
        .collect();
    let Some(first) = from_first.first().map(|i| i.start) else {
        return Err("no request arrived in the window".into());
    };
    let last_end = |of: fn(&ArrivalInterval) -> f64| {
        from_first.iter().rev().find(|i| of(i) > 0.0).map(|i| i.end)
    };
    let arrived: f64 = from_first.iter().map(|i| i.arrived).sum();
    let finished: f64 = from_first.iter().map(|i| i.finished).sum();
    let Some(last_arrival) = last_end(|i| i.arrived).filter(|_| arrived > 0.0) else {
        return Err("no request arrived in the window".into());
    };
    let Some(last_finish) = last_end(|i| i.finished) else {
        return Ok(0.0);
    };
    let rate = |count: f64, end: i64| count / (end - first).max(1) as f64;
    Ok(rate(finished, last_finish) / rate(arrived, last_arrival))
}

/// A stretch of instants with requests running and the work counter standing still.
struct Stretch {
    /// The instant before `start`, where it was read and near (`start` itself otherwise: then
    /// nothing is known of when the last token came, and nothing is added before the stretch).
    before: i64,
    /// The first instant of the stretch: work had grown by then.
    start: i64,
    /// The last instant at which the work still stood at `work`.
    last: i64,
    work: f64,
}

impl Stretch {
    /// The stall's length in seconds. Samples only bound it: the last token came between
    /// `before` and `start`, the next one between `last` and `resumed` (None: not seen, the
    /// window ended or the replica restarted), so the middle of each open side is added to
    /// the stretch itself, which reads a stall short by a scrape interval on average. A side
    /// counts at most the usual `spacing` of the window: a gap in the scrapes is not a stall.
    /// 0 for a stretch of one instant.
    fn estimate(&self, resumed: Option<i64>, spacing: i64) -> f64 {
        if self.last == self.start {
            return 0.0;
        }
        let side = |gap: i64| gap.min(spacing) as f64 / 2.0;
        let open = side(self.start - self.before) + resumed.map_or(0.0, |t| side(t - self.last));
        ((self.last - self.start) as f64 + open) / 1000.0
    }
}

/// Evaluates a [`Stall`] over the window (see its docs).
fn stall(
    s: &Stall,
    ts: &TargetSeries<'_>,
    frame: Frame,
    memo: Option<MemoOf<'_>>,
) -> Result<f64, Absent> {
    let needs = "a stall needs samples with timestamps (record a range)";
    let instants = instant_pairs(&s.busy, [&s.work, &s.busy], ts, frame, memo, needs)?;
    let gaps = instants.windows(2).map(|w| w[1].0 - w[0].0).collect();
    let spacing = median_gap(gaps).unwrap_or(0);
    let mut longest: Option<f64> = None;
    let mut stretch: Option<Stretch> = None;
    // The instant before this one, where it was read and not after a gap in the scrapes.
    let mut previous: Option<i64> = None;
    for (t, values) in instants {
        // Scrapes that failed leave no instant: a gap of more than two spacings is the
        // replica gone (a crash), which neither continues a stall nor bounds one.
        let before = previous.filter(|&p| t - p <= 2 * spacing);
        let readable = match values {
            [Some(work), Some(busy)] if work.is_finite() && busy.is_finite() => Some((work, busy)),
            _ => None,
        };
        previous = readable.map(|_| t);
        if readable.is_some() {
            longest.get_or_insert(0.0);
        }
        if let (Some(run), Some((work, busy)), Some(_)) = (stretch.as_mut(), readable, before) {
            if busy > 0.0 && work == run.work {
                run.last = t;
                continue;
            }
        }
        // The stretch, if any, ended here: resumed where work grew or the requests left; a
        // counter that fell (a restart), a sample missing or a gap is the replica gone.
        if let (Some(run), Some(stalled)) = (stretch.take(), longest.as_mut()) {
            let resumed = before.is_some() && readable.is_some_and(|(work, _)| work >= run.work);
            *stalled = stalled.max(run.estimate(resumed.then_some(t), spacing));
        }
        stretch = readable
            .filter(|&(_, busy)| busy > 0.0)
            .map(|(work, _)| Stretch {
                before: before.unwrap_or(t),
                start: t,
                last: t,
                work,
            });
    }
    if let (Some(run), Some(stalled)) = (stretch, longest.as_mut()) {
        *stalled = stalled.max(run.estimate(None, spacing));
    }
    longest.ok_or_else(|| "no instant in the window with both values".into())
}

/// The usual gap between samples, milliseconds: the lower median, so that of two gaps the
/// shorter counts (the scrape interval, not a missed scrape). None without a gap.
fn median_gap(mut gaps: Vec<i64>) -> Option<i64> {
    gaps.sort_unstable();
    gaps.get(gaps.len().checked_sub(1)? / 2).copied()
}

/// Fewest intervals at each batch level for a [`Scaling`] to be read.
const SCALING_MIN_INTERVALS: usize = 3;

/// Evaluates a [`Scaling`] over the window (see its docs).
fn scaling(
    s: &Scaling,
    ts: &TargetSeries<'_>,
    frame: Frame,
    memo: Option<MemoOf<'_>>,
) -> Result<f64, Absent> {
    let needs = "batch scaling needs samples with timestamps (record a range)";
    let instants = instant_pairs(&s.batch, [&s.work, &s.batch], ts, frame, memo, needs)?;
    // (batch, speed of one sequence) per interval with sequences running at both ends.
    let mut intervals: Vec<(f64, f64)> = Vec::new();
    let mut spacings: Vec<i64> = Vec::new();
    let mut prev: Option<(i64, f64, f64)> = None;
    for (t, values) in instants {
        let [Some(work), Some(batch)] = values else {
            prev = None;
            continue;
        };
        if let Some((t0, w0, b0)) = prev {
            let (dt, dw) = ((t - t0) as f64 / 1000.0, work - w0);
            // A counter reset, or an interval with an idle end, says nothing of batching.
            if dt > 0.0 && dw >= 0.0 && b0 > 0.0 && batch > 0.0 {
                spacings.push(t - t0);
                let b = (b0 + batch) / 2.0;
                let speed = if s.per_step { dw / dt } else { dw / dt / b };
                intervals.push((b, speed));
            }
        }
        prev = Some((t, work, batch));
    }
    if let Some(lifetime) = &s.lifetime {
        sampled_slower_than_turnover(lifetime, spacings, ts, frame)?;
    }
    let full = intervals.iter().map(|(b, _)| *b).fold(0.0, f64::max);
    if full < 2.0 {
        return Err("the running batch never held two sequences in the window".into());
    }
    let mean = |pick: &dyn Fn(f64) -> bool| {
        let group: Vec<&(f64, f64)> = intervals.iter().filter(|(b, _)| pick(*b)).collect();
        let n = group.len() as f64;
        (group.len() >= SCALING_MIN_INTERVALS).then(|| {
            (
                group.iter().map(|(b, _)| b).sum::<f64>() / n,
                group.iter().map(|(_, v)| v).sum::<f64>() / n,
            )
        })
    };
    let (Some((b_hi, v_hi)), Some((b_lo, v_lo))) =
        (mean(&|b| b >= 0.9 * full), mean(&|b| b <= 0.5 * full))
    else {
        return Err(format!(
            "the running batch did not vary enough in the window to compare (at least {SCALING_MIN_INTERVALS} intervals near its peak of {full:.0} and at half or less)"
        ));
    };
    if v_lo <= 0.0 || b_hi <= b_lo {
        return Err("no sequence advanced at the smaller batch".into());
    }
    Ok((b_hi * v_hi - b_lo * v_lo) / ((b_hi - b_lo) * v_lo))
}

/// An error when sequences live (`lifetime`, seconds, over the window) less than two of the
/// intervals' usual spacing (`spacings`, milliseconds; see [`median_gap`]): the running
/// gauge, sampled that far apart, does not show the batch each interval held (see
/// [`Scaling::lifetime`]). An unknown lifetime claims nothing.
fn sampled_slower_than_turnover(
    lifetime: &Expr,
    spacings: Vec<i64>,
    ts: &TargetSeries<'_>,
    frame: Frame,
) -> Result<(), Absent> {
    let Ok(life) = eval_signal(lifetime, ts, frame, Stat::Last) else {
        return Ok(());
    };
    let Some(spacing) = median_gap(spacings) else {
        return Ok(());
    };
    let spacing = spacing as f64 / 1000.0;
    if life < 2.0 * spacing {
        return Err(format!(
            "a sequence runs {life:.2} s on average, under two of the {spacing:.1} s between samples: the running batch turns over between them, so its samples do not show the batch each interval held"
        ));
    }
    Ok(())
}

fn single(out: &Out<'_>) -> Option<f64> {
    (out.values.len() == 1).then(|| out.values[0].1)
}

fn aggregate<'t>(out: Out<'t>, f: impl Fn(&[f64]) -> f64) -> Result<Out<'t>, Absent> {
    if out.values.is_empty() {
        return Err("no series to aggregate".into());
    }
    let v: smallvec::SmallVec<[f64; 8]> = out.values.iter().map(|(_, v)| *v).collect();
    Ok(Out {
        values: smallvec::smallvec![("", f(&v))],
        totals: out.totals,
    })
}

/// One-to-one matching on identical label sets, as PromQL does; a single unlabelled value on
/// either side applies to every element of the other.
fn binary<'t>(
    a: Vector<'t>,
    b: Vector<'t>,
    totals: bool,
    f: impl Fn(f64, f64) -> Option<f64>,
) -> Result<Out<'t>, Absent> {
    let mut values = Vector::new();
    if b.len() == 1 && b[0].0.is_empty() {
        let y = b[0].1;
        values.extend(a.into_iter().filter_map(|(k, x)| f(x, y).map(|v| (k, v))));
    } else if a.len() == 1 && a[0].0.is_empty() {
        let x = a[0].1;
        values.extend(b.into_iter().filter_map(|(k, y)| f(x, y).map(|v| (k, v))));
    } else if b.len() <= 16 {
        // A target's vectors are short (a series per GPU at most): a scan beats a map. The last
        // of equal keys wins, as when they are collected into one.
        for (k, x) in a {
            if let Some(&(_, y)) = b.iter().rev().find(|(kb, _)| *kb == k) {
                if let Some(v) = f(x, y) {
                    values.push((k, v));
                }
            }
        }
    } else {
        let bm: BTreeMap<&str, f64> = b.into_iter().collect();
        for (k, x) in a {
            if let Some(&y) = bm.get(k) {
                if let Some(v) = f(x, y) {
                    values.push((k, v));
                }
            }
        }
    }
    if values.is_empty() {
        return Err("no values after matching (missing series, or division by zero)".into());
    }
    Ok(Out { values, totals })
}

fn first_name(sel: &SeriesSelector) -> &str {
    sel.metric.values().first().copied().unwrap_or("")
}

fn matches(s: &Series, want: &Matchers, not: &Matchers) -> bool {
    want.iter()
        .all(|(l, vals)| s.labels.get(l).is_some_and(|v| vals.values().contains(&v)))
        && not
            .iter()
            .all(|(l, vals)| !s.labels.get(l).is_some_and(|v| vals.values().contains(&v)))
}

/// The series of the first of the selector's names that has any (with `suffix` appended),
/// that its matchers accept, each with its label key.
pub(super) fn select<'t, 'a>(
    sel: &SeriesSelector,
    suffix: &str,
    ts: &'t TargetSeries<'a>,
) -> Result<Vec<(&'a Series, &'t str)>, Absent> {
    let (name, indices) = ts.selected_indices(sel, suffix, false)?;
    let named = &ts.named[name];
    Ok(indices
        .iter()
        .map(|&j| (named.series[j as usize], named.keys[j as usize].as_str()))
        .collect())
}

fn leaf<'t>(
    sel: &SeriesSelector,
    suffix: &str,
    ts: &'t TargetSeries<'_>,
    value: impl Fn(&Series) -> Option<f64>,
) -> Result<Vector<'t>, Absent> {
    // Taken in key order, so the vector comes out sorted by key.
    let (name, indices) = ts.selected_indices(sel, suffix, true)?;
    let named = &ts.named[name];
    let out: Vector = indices
        .iter()
        .filter_map(|&j| {
            let (s, key) = (named.series[j as usize], named.keys[j as usize].as_str());
            value(s).filter(|v| v.is_finite()).map(|v| (key, v))
        })
        .collect();
    if out.is_empty() {
        // The name read, when a suffix was appended to the first that has series.
        let read = if suffix.is_empty() {
            first_name(sel)
        } else {
            ts.names[name]
        };
        return Err(format!("no usable samples of `{read}` in the window"));
    }
    Ok(out)
}

/// A series' labels but `le`, as a key that only matching and sorting read: each value is
/// length-prefixed, so no value can forge a boundary. Built once per series, by
/// [`TargetSeries::new`].
fn label_key(s: &Series) -> String {
    let mut key =
        String::with_capacity(s.labels.0.iter().map(|(k, v)| k.len() + v.len() + 8).sum());
    for (k, v) in s.labels.0.iter().filter(|(k, _)| k != "le") {
        key.push_str(k);
        key.push('=');
        push_decimal(&mut key, v.len());
        key.push(':');
        key.push_str(v);
        key.push(',');
    }
    key
}

fn push_decimal(out: &mut String, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        out.push(char::from(d));
    }
}

fn parse_le(le: &str) -> Option<f64> {
    match le {
        "+Inf" | "Inf" | "inf" => Some(f64::INFINITY),
        _ => le.parse().ok(),
    }
}

fn bit_share(samples: &Samples, mask: u64, frame: Frame) -> Option<f64> {
    let in_window: Vec<f64> = match frame.end_ms {
        Some(end) => window::in_window(samples, end, frame.window_ms)
            .iter()
            .map(|s| s.value)
            .filter(|v| v.is_finite() && *v >= 0.0)
            .collect(),
        None => window::last_value(samples).into_iter().collect(),
    };
    if in_window.is_empty() {
        return None;
    }
    let hits = in_window
        .iter()
        .filter(|v| (**v as u64) & mask != 0)
        .count();
    Some(hits as f64 / in_window.len() as f64)
}

/// The share of the window's intervals (between consecutive samples) in which a counter grew
/// by less than `below` per second. Intervals across a reset count for neither side; an
/// unreadable sample (a stale marker) breaks the run, as in [`dispersion`] and [`scaling`].
fn share_below(samples: &Samples, below: f64, end_ms: i64, window_ms: i64) -> Option<f64> {
    let (mut slow, mut all) = (0usize, 0usize);
    let mut prev: Option<(i64, f64)> = None;
    for s in window::in_window(samples, end_ms, window_ms).iter() {
        let (Some(t), true) = (s.t_ms, s.value.is_finite()) else {
            prev = None;
            continue;
        };
        if let Some((t0, v0)) = prev {
            let grew = s.value - v0;
            if t > t0 && grew >= 0.0 {
                all += 1;
                if grew / ((t - t0) as f64 / 1000.0) < below {
                    slow += 1;
                }
            }
        }
        prev = Some((t, s.value));
    }
    (all > 0).then(|| slow as f64 / all as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::series::Sample;

    fn series(name: &str, values: &[f64]) -> Series {
        Series {
            name: name.to_string(),
            labels: Default::default(),
            samples: values
                .iter()
                .enumerate()
                .map(|(i, &value)| Sample {
                    t_ms: Some(i as i64 * 1000),
                    value,
                })
                .collect(),
        }
    }

    /// The p50 and p99 of one histogram share its bucket rates, and give what a fresh read
    /// gives.
    #[test]
    fn quantiles_of_one_histogram_read_its_buckets_once() {
        let bucket = |le: &str, step: f64| {
            let points: Vec<(Option<i64>, f64)> = (0..10)
                .map(|i| (Some(i * 15_000), i as f64 * step))
                .collect();
            crate::signal::series::testutil::series("h_bucket", &[("le", le)], &points)
        };
        let all = [bucket("0.1", 1.0), bucket("1", 3.0), bucket("+Inf", 4.0)];
        let frame = Frame {
            end_ms: Some(135_000),
            window_ms: 60_000,
        };
        let shared = TargetSeries::new(all.iter());
        for q in ["0.5", "0.99", "0.5"] {
            let e = expr(&format!("{{quantile: {{metric: h, q: {q}}}}}"));
            let fresh = TargetSeries::new(all.iter());
            assert_eq!(
                eval_signal(&e, &shared, frame, Stat::Last),
                eval_signal(&e, &fresh, frame, Stat::Last)
            );
        }
        assert_eq!(shared.buckets.lock().unwrap().entries.len(), 1);
    }

    /// Of the instants the replica was busy, the share at which requests waited: a spike the
    /// replica worked through scores low; a replica that never worked has none.
    #[test]
    fn the_queued_share_counts_busy_instants_only() {
        let e = expr(
            "{queued_share: {queue: {sum: {gauge: {metric: q}}}, running: {sum: {gauge: {metric: r}}}}}",
        );
        let frame = Frame {
            end_ms: Some(9_000),
            window_ms: 60_000,
        };
        let share = |queue: &[f64], running: &[f64]| {
            let all = [series("q", queue), series("r", running)];
            eval_signal(&e, &TargetSeries::new(all.iter()), frame, Stat::Last)
        };
        let spike = share(
            &[0.0, 5.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            &[0.0, 2.0, 2.0, 2.0, 2.0, 2.0, 1.0, 0.0, 0.0, 0.0],
        );
        assert_eq!(spike, Ok(2.0 / 6.0));
        let backlog = share(&[0.0, 1.0, 2.0, 3.0, 3.0, 2.0, 0.0], &[1.0; 7]);
        assert_eq!(backlog, Ok(5.0 / 7.0));
        assert!(share(&[0.0; 5], &[0.0; 5]).is_err());
        assert!(crate::signal::promql::expressible(&e) && !reads_gauge(&e));
    }

    /// A stall is the longest stretch with requests running and the work counter standing
    /// still; idle stretches, growing work and unreadable samples end it; a replica that never
    /// ran anything never stalled.
    #[test]
    fn a_stall_is_the_longest_busy_stretch_without_work() {
        let e =
            expr("{stall: {work: {sum: {gauge: {metric: w}}}, busy: {sum: {gauge: {metric: b}}}}}");
        let frame = Frame {
            end_ms: Some(9_000),
            window_ms: 60_000,
        };
        let stalled = |work: &[f64], busy: &[f64]| {
            let all = [series("w", work), series("b", busy)];
            eval_signal(&e, &TargetSeries::new(all.iter()), frame, Stat::Last)
        };
        // Work stands at 20 from t=2 to t=5 with two requests running: the stall lasted
        // between 3 s (t=2 to t=5) and 5 s (t=1 to t=6), 4 s in the middle.
        let hung = stalled(
            &[0.0, 10.0, 20.0, 20.0, 20.0, 20.0, 30.0, 30.0, 30.0, 30.0],
            &[0.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0],
        );
        assert_eq!(hung, Ok(4.0));
        // Standing still with nothing running is idle, not a stall.
        assert_eq!(stalled(&[5.0; 10], &[0.0; 10]), Ok(0.0));
        // An unreadable sample (a stale marker) ends the stretch.
        let broken = stalled(
            &[
                0.0,
                10.0,
                10.0,
                f64::NAN,
                10.0,
                10.0,
                10.0,
                20.0,
                30.0,
                40.0,
            ],
            &[1.0; 10],
        );
        // It ends the first stretch (t=1 to 2, half a second added before it, none after: the
        // replica was gone); the one after it (t=4 to 6) gets nothing before it (the sample
        // before was unreadable) and half a second after: 2.5 s.
        assert_eq!(broken, Ok(2.5));
        // A counter that falls is a restart: the stretch before it is not extended past its
        // last instant (t=1 to 5, half a second before it).
        let restarted = stalled(
            &[0.0, 10.0, 10.0, 10.0, 10.0, 10.0, 0.0, 5.0, 9.0, 12.0],
            &[1.0; 10],
        );
        assert_eq!(restarted, Ok(4.5));
        // Scrapes that failed for ten seconds (no instant at all) end the stretch as a crash:
        // t=1 to 3 and half a second before it, not the stretch across the gap.
        let at = |name: &str, values: &[f64]| {
            let points: Vec<(Option<i64>, f64)> = [0, 1, 2, 3, 13, 14]
                .iter()
                .zip(values)
                .map(|(&s, &value)| (Some(s * 1000), value))
                .collect();
            crate::signal::series::testutil::series(name, &[], &points)
        };
        let gapped = [
            at("w", &[0.0, 10.0, 10.0, 10.0, 10.0, 20.0]),
            at("b", &[1.0; 6]),
        ];
        let late = Frame {
            end_ms: Some(14_000),
            window_ms: 60_000,
        };
        let gone = eval_signal(&e, &TargetSeries::new(gapped.iter()), late, Stat::Last);
        assert_eq!(gone, Ok(2.5));
        assert!(!crate::signal::promql::expressible(&e) && !reads_gauge(&e));
    }

    /// A core's idle counter that stands still (grows under the bound a second) in an interval
    /// was pegged in it; the share counts intervals, not the window's mean, so calm seconds at
    /// the window's edges do not hide a pegged core. A reset's interval counts for neither
    /// side; without timestamps there are no intervals.
    #[test]
    fn the_share_below_counts_slow_intervals() {
        let e = expr("{max: {share_below: {metric: idle, below: 0.05}}}");
        let frame = Frame {
            end_ms: Some(10_000),
            window_ms: 60_000,
        };
        let share = |cores: &[&[f64]]| {
            let all: Vec<Series> = cores.iter().map(|c| series("idle", c)).collect();
            eval_signal(&e, &TargetSeries::new(all.iter()), frame, Stat::Last)
        };
        // Idle for 2 s, pegged (idle grows 0.01 s a second) for 7 s, idle for the last second:
        // the mean busy share is 0.79, under 95 %, the core pegged in 7 of 10 intervals.
        let mut edges = vec![0.0];
        for step in [1.0, 1.0, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 1.0] {
            edges.push(edges.last().unwrap() + step);
        }
        assert_eq!(share(&[&edges]), Ok(0.7));
        // The busiest core decides: a second core idle throughout does not dilute it.
        let idle: Vec<f64> = (0..11).map(f64::from).collect();
        assert_eq!(share(&[&idle, &edges]), Ok(0.7));
        assert_eq!(share(&[&idle]), Ok(0.0));
        // A reset (a restarted exporter) skips its interval.
        let mut reset = edges.clone();
        reset[6..].iter_mut().for_each(|v| *v -= 100.0);
        assert_eq!(share(&[&reset]), Ok(6.0 / 9.0));
        // An unreadable sample skips the intervals on either side of it.
        let mut stale = edges.clone();
        stale[3] = f64::NAN;
        assert_eq!(share(&[&stale]), Ok(5.0 / 8.0));
        assert!(share(&[&[1.0]]).is_err(), "one sample has no interval");
        assert!(!crate::signal::promql::expressible(&e));
        let frameless = Frame {
            end_ms: None,
            window_ms: 60_000,
        };
        let all = [series("idle", &edges)];
        assert!(eval_signal(&e, &TargetSeries::new(all.iter()), frameless, Stat::Last).is_err());
    }

    /// Arrivals per interval are the finished requests' growth plus the growth of those in the
    /// replica (a request moved from running back to waiting is no arrival); their variance
    /// over their mean is 0 for even arrivals, large for a burst, and unknown when a window
    /// holds too few intervals. A counter reset skips its interval.
    #[test]
    fn the_arrival_dispersion_counts_arrivals_between_samples() {
        let e = expr(
            "{dispersion: {done: {sum: {gauge: {metric: d}}}, present: {add: [{sum: {gauge: {metric: w}}}, {sum: {gauge: {metric: r}}}]}}}",
        );
        let frame = Frame {
            end_ms: Some(11_000),
            window_ms: 60_000,
        };
        let index = |done: &[f64], waiting: &[f64], running: &[f64]| {
            let all = [
                series("d", done),
                series("w", waiting),
                series("r", running),
            ];
            eval_signal(&e, &TargetSeries::new(all.iter()), frame, Stat::Last)
        };
        let counts = |arrivals: &[f64]| {
            let mut done = vec![0.0];
            arrivals
                .iter()
                .for_each(|a| done.push(done.last().unwrap() + a));
            done
        };
        // Two a second, every second; a preemption (running to waiting) changes nothing.
        let even = counts(&[2.0; 11]);
        let (mut waiting, mut running) = (vec![0.0; 12], vec![3.0; 12]);
        (waiting[5], running[5]) = (1.0, 2.0);
        assert_eq!(index(&even, &waiting, &running), Ok(0.0));
        // 1, 3, 1, 3, ...: mean 2, each neighbour 2 apart: variance 2 (half the mean square
        // successive difference).
        let alternating: Vec<f64> = (0..10).map(|i| [1.0, 3.0][i % 2]).collect();
        assert_eq!(
            index(&counts(&alternating), &[0.0; 11], &[0.0; 11]),
            Ok(1.0)
        );
        // A step in the rate (ten an interval, then thirty) is one change, not a burst: the
        // plain variance over the mean would read 5 here, past a burst's level, and grows
        // with the rate; neighbours differ once by 20, so 400 / 18 over a mean of 20.
        let mut step = vec![10.0; 5];
        step.extend([30.0; 5]);
        let step_index = index(&counts(&step), &[0.0; 11], &[0.0; 11]).unwrap();
        assert!(
            (step_index - 400.0 / 18.0 / 20.0).abs() < 1e-9,
            "{step_index}"
        );
        // Twenty at once, then nothing: the same mean as two a second, a hundred times the spread.
        let mut burst = vec![0.0; 11];
        burst[4] = 20.0;
        let burst_index = index(&counts(&burst), &[0.0; 12], &[0.0; 12]).unwrap();
        assert!(burst_index > 15.0, "{burst_index}");
        // Requests that arrive and stay count too: ten waiting after the burst.
        let mut waiting = vec![0.0; 12];
        waiting[5..].iter_mut().for_each(|w| *w = 10.0);
        let stayed = index(&counts(&[1.0; 11]), &waiting, &[0.0; 12]).unwrap();
        assert!(stayed > 4.0, "{stayed}");
        // A restart resets the counter: its interval is skipped, the rest are even.
        let mut reset = counts(&[2.0; 11]);
        reset[6..].iter_mut().for_each(|d| *d -= 100.0);
        assert_eq!(index(&reset, &[0.0; 12], &[0.0; 12]), Ok(0.0));
        // An unreadable sample skips the intervals on either side of it.
        let mut stale = vec![0.0; 12];
        stale[7] = f64::NAN;
        assert_eq!(index(&counts(&[2.0; 11]), &stale, &[0.0; 12]), Ok(0.0));
        assert!(index(&counts(&[2.0; 5]), &[0.0; 6], &[0.0; 6]).is_err());
        assert!(index(&[5.0; 12], &[0.0; 12], &[0.0; 12]).is_err());
        assert!(!crate::signal::promql::expressible(&e) && !reads_gauge(&e));
        let err = serde_yaml::from_str::<Expr>("dispersion: {done: {gauge: {metric: d}}}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing field `present`"), "{err}");
    }

    /// The served share is the finishing rate (first arrival to last finish) over the arrival
    /// rate (first arrival to last): 1 for a replica that keeps up, under 1 for a backlog left
    /// at the window's end or drained after the arrivals stopped; requests already in the
    /// replica before the first arrival are left out.
    #[test]
    fn the_served_share_compares_finishing_and_arrival_rates() {
        let e = expr(
            "{served: {done: {sum: {gauge: {metric: d}}}, present: {sum: {gauge: {metric: p}}}}}",
        );
        let frame = Frame {
            end_ms: Some(20_000),
            window_ms: 60_000,
        };
        let share = |done: &[f64], present: &[f64]| {
            let all = [series("d", done), series("p", present)];
            eval_signal(&e, &TargetSeries::new(all.iter()), frame, Stat::Last)
        };
        let close = |got: Result<f64, Absent>, want: f64| {
            let got = got.unwrap();
            assert!((got - want).abs() < 1e-9, "{got} != {want}");
        };
        // Two a second arrive and two finish, with four always in the replica.
        let steady: Vec<f64> = (0..21).map(|i| 2.0 * i as f64).collect();
        close(share(&steady, &[4.0; 21]), 1.0);
        // Three arrive a second, two finish: the backlog grows by one a second.
        let growing: Vec<f64> = (0..21).map(|i| i as f64).collect();
        close(share(&steady, &growing), 2.0 / 3.0);
        // Four a second for ten seconds, then none; two finish a second until all forty are
        // done, at 20 s: forty in 20 s against forty in 10 s.
        let present: Vec<f64> = (0..21)
            .map(|i| (2 * i.min(10) - 2 * (i - 10).max(0)) as f64)
            .collect();
        close(share(&steady, &present), 0.5);
        // Requests in the replica at the window's start finish before anything arrives: left
        // out, so a replica that keeps up afterwards reads 1.
        let mut done = vec![0.0, 5.0, 10.0];
        done.extend((1..19).map(|i| 10.0 + i as f64));
        let mut present = vec![10.0, 5.0];
        present.extend([0.0; 19]);
        close(share(&done, &present), 1.0);
        // Arrivals and no finish: nothing served.
        close(share(&[3.0; 21], &growing), 0.0);
        // Nothing arrives: unknown, as is a window of too few intervals.
        assert!(share(&[3.0; 21], &[0.0; 21]).is_err());
        assert!(share(&steady[..5], &[4.0; 5]).is_err());
        assert!(!crate::signal::promql::expressible(&e) && !reads_gauge(&e));
    }

    /// A queued share, a batch scaling and an arrival dispersion kept in a memo while the window
    /// slides give, at every step, the bits a fresh evaluation gives: over series scraped at
    /// their own jittered instants (so the window's first instant reads a frame that changes),
    /// with steps of any length, a NaN, and another expression under the same signal name.
    #[test]
    fn instant_values_kept_while_sliding_equal_fresh_ones() {
        let jittered = |name: &str, phase: i64, value: &dyn Fn(i64) -> f64| Series {
            name: name.to_string(),
            labels: Default::default(),
            samples: (0..400)
                .map(|i| Sample {
                    t_ms: Some(i * 1000 + phase + (i * 7919 % 13) * 37),
                    value: if i == 150 { f64::NAN } else { value(i) },
                })
                .collect(),
        };
        let all = [
            jittered("q", 0, &|i| ((i / 9) % 4) as f64 - 1.0),
            jittered("r", 400, &|i| ((i / 5) % 6) as f64),
            jittered("w", 250, &|i| (i * i % 977) as f64 + i as f64 * 3.0),
        ];
        let ts = TargetSeries::new(all.iter());
        let share = expr(
            "{queued_share: {queue: {sum: {gauge: {metric: q}}}, running: {sum: {gauge: {metric: r}}}}}",
        );
        let scaling = expr("scaling: {work: {gauge: {metric: w}}, batch: {gauge: {metric: r}}}");
        let arrivals =
            expr("dispersion: {done: {gauge: {metric: w}}, present: {gauge: {metric: q}}}");
        let mut memo = InstantMemo::default();
        let (mut end, mut checked) = (20_000, 0);
        while end < 420_000 {
            let frame = Frame {
                end_ms: Some(end),
                window_ms: 60_000,
            };
            // The same name carries the share, then the scaling, then the arrivals' dispersion:
            // the memo must not mix them.
            let e = match end {
                ..200_000 => &share,
                200_000..320_000 => &scaling,
                _ => &arrivals,
            };
            for name in ["a", "b"] {
                let kept = eval_signal_memo(e, &ts, frame, Some((&mut memo, name)));
                let fresh = eval_signal(e, &ts, frame, Stat::Last);
                assert_eq!(
                    kept.map(f64::to_bits),
                    fresh.map(f64::to_bits),
                    "{name} at {end}"
                );
                checked += 1;
            }
            end += 1_000 + (end / 1000 % 5) * 731;
        }
        assert!(checked > 100);
    }

    /// A numbered selector's selection is kept per target and suffix, and reads what an
    /// unnumbered one (matched afresh) reads: values in label-key order whatever the input
    /// order, the matchers applied, and each suffix its own series.
    #[test]
    fn kept_selections_read_what_fresh_ones_read() {
        use crate::signal::series::testutil::series as labelled;
        let points: Vec<(Option<i64>, f64)> =
            (0..10).map(|i| (Some(i * 15_000), i as f64)).collect();
        let all = [
            labelled("c_total", &[("pod", "b")], &points),
            labelled("c_total", &[("pod", "a")], &points),
            labelled("c_total", &[("pod", "z"), ("x", "no")], &points),
            labelled("h_sum", &[("pod", "a")], &points),
            labelled("h_count", &[("pod", "a")], &points),
        ];
        let frame = Frame {
            end_ms: Some(135_000),
            window_ms: 60_000,
        };
        let ts = TargetSeries::new(all.iter());
        let numbered = |yaml: &str, slot: u32| {
            let Ok(e) = expr(yaml).map_selectors(&mut |s| {
                let mut s = s.clone();
                s.slot = Some(slot);
                Ok::<_, std::convert::Infallible>(s)
            });
            e
        };
        for (yaml, slot) in [
            ("{rate: {metric: c_total, where_not: {x: no}}}", 0),
            ("{hist_mean: {metric: h}}", 1),
            ("{rate: {metric: [gone_total, c_total]}}", 2),
        ] {
            let fresh = eval_vector(&expr(yaml), &ts, frame, Stat::Last).map(|v| v.0);
            for _ in 0..2 {
                let kept = eval_vector(&numbered(yaml, slot), &ts, frame, Stat::Last);
                assert_eq!(kept.map(|v| v.0), fresh, "{yaml}");
            }
        }
        let keys: Vec<String> = eval_vector(
            &numbered("{rate: {metric: c_total}}", 3),
            &ts,
            frame,
            Stat::Last,
        )
        .unwrap()
        .0
        .iter()
        .map(|(k, _)| k.to_string())
        .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert_eq!(keys.len(), 3);
        // Slots 0, 2 and 3 read plain, slot 1 with `_sum` and with `_count`: five selections.
        let memo = ts.selections.lock().unwrap();
        let kept = memo.by_slot.iter().filter(|s| s.is_some()).count();
        assert_eq!(kept, 5);
    }

    #[test]
    fn with_prefix_reads_a_range_of_names() {
        let all = [
            series("dcgm_x", &[1.0]),
            series("vllm:b", &[1.0]),
            series("vllm:a", &[1.0]),
            series("vllmx", &[1.0]),
        ];
        let ts = TargetSeries::new(all.iter());
        let names: Vec<&str> = ts.with_prefix("vllm:").map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["vllm:a", "vllm:b"]);
        assert_eq!(ts.with_prefix("zz").count(), 0);
    }

    fn expr(yaml: &str) -> Expr {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn a_batch_that_turns_over_between_samples_has_no_scaling() {
        // Sampled every second: sequences of 1.5 s come and go between two samples, so the
        // gauge's readings are not the batch each interval held.
        let why = efficiency_living(|_| 30.0, Some(1.5)).unwrap_err();
        assert!(why.contains("turns over between them"), "{why}");
        assert!(why.contains("1.50 s"), "{why}");
        // Sequences of 3 s outlive two samples: the same replica's scaling is read.
        let e = efficiency_living(|_| 30.0, Some(3.0)).unwrap();
        assert!((e - 1.0).abs() < 1e-9, "{e}");
    }

    /// Steps counted at one per second per `speed(batch)`, the batch running 1 for ten seconds,
    /// then 4 for ten: the efficiency of that replica.
    fn efficiency(step_rate: impl Fn(f64) -> f64) -> Result<f64, Absent> {
        efficiency_living(step_rate, None)
    }

    /// [`efficiency`] with the scaling's `lifetime` read from a gauge holding `lifetime`
    /// seconds, when given (samples are a second apart).
    fn efficiency_living(
        step_rate: impl Fn(f64) -> f64,
        lifetime: Option<f64>,
    ) -> Result<f64, Absent> {
        let batch: Vec<f64> = (0..21).map(|i| if i <= 10 { 1.0 } else { 4.0 }).collect();
        let mut steps = vec![0.0];
        for i in 1..21 {
            let b = (batch[i - 1] + batch[i]) / 2.0;
            steps.push(steps[i - 1] + step_rate(b));
        }
        let mut all = vec![series("steps", &steps), series("busy", &batch)];
        let mut yaml = String::from(
            "scaling: {work: {gauge: {metric: steps}}, batch: {gauge: {metric: busy}}, per_step: true",
        );
        if let Some(life) = lifetime {
            all.push(series("life", &[life; 21]));
            yaml.push_str(", lifetime: {gauge: {metric: life}}");
        }
        yaml.push('}');
        let ts = TargetSeries::new(all.iter());
        let e = expr(&yaml);
        let frame = Frame {
            end_ms: Some(20_000),
            window_ms: 60_000,
        };
        eval_signal(&e, &ts, frame, Stat::Last)
    }

    #[test]
    fn a_batch_that_keeps_each_sequence_pace_scales_fully() {
        // Memory-bound decode: a step takes as long at batch 4 as at batch 1.
        let e = efficiency(|_| 30.0).unwrap();
        assert!((e - 1.0).abs() < 1e-9, "{e}");
    }

    #[test]
    fn a_saturated_replica_gains_nothing_from_a_fuller_batch() {
        // Compute-bound: a step's time grows with the batch, so tokens per second stay flat.
        let e = efficiency(|b| 30.0 / b).unwrap();
        assert!(e.abs() < 1e-9, "{e}");
    }

    #[test]
    fn a_batch_that_never_varies_or_timestampless_input_is_unknown() {
        let all = [
            series("steps", &[0.0, 10.0, 20.0, 30.0, 40.0]),
            series("busy", &[4.0; 5]),
        ];
        let ts = TargetSeries::new(all.iter());
        let e = expr(
            "scaling: {work: {gauge: {metric: steps}}, batch: {gauge: {metric: busy}}, per_step: true}",
        );
        let frame = Frame {
            end_ms: Some(4_000),
            window_ms: 60_000,
        };
        let why = eval_signal(&e, &ts, frame, Stat::Last).unwrap_err();
        assert!(why.contains("did not vary enough"), "{why}");
        let lifetime = Frame {
            end_ms: None,
            window_ms: 60_000,
        };
        let why = eval_signal(&e, &ts, lifetime, Stat::Last).unwrap_err();
        assert!(why.contains("timestamps"), "{why}");
    }

    #[test]
    fn a_scaling_is_not_a_gauge_and_has_no_promql() {
        let e = expr("scaling: {work: {gauge: {metric: w}}, batch: {gauge: {metric: b}}}");
        assert!(!reads_gauge(&e));
        assert!(!crate::signal::promql::expressible(&e));
        assert!(crate::signal::promql::expressible(&expr(
            "gauge: {metric: b}"
        )));
        let err = serde_yaml::from_str::<Expr>("scaling: {work: {gauge: {metric: w}}, size: 1}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `size`"), "{err}");
    }

    #[test]
    fn a_queued_share_without_its_running_batch_is_an_error_that_says_so() {
        let err = serde_yaml::from_str::<Expr>("queued_share: {queue: {gauge: {metric: q}}}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing field `running`"), "{err}");
        let err = serde_yaml::from_str::<Expr>("queued_share: [1, 2]")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("queued_share") && err.contains("invalid type: sequence"),
            "{err}"
        );
    }
}
