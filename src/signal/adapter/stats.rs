//! A gauge signal's window statistics (last, mean, max, min) in one evaluation instead of four.
//!
//! A snapshot carries, beside each gauge signal's value, its mean, maximum and minimum over the
//! window; evaluating the expression once per statistic made every gauge signal cost four
//! evaluations at every step of a postmortem. Here the expression is evaluated once with four
//! lanes, one per statistic. Only [`eval`]'s `Gauge` leaf reads the statistic, and without a
//! division or subtraction no operator can keep a label set in one lane and drop it in another,
//! so each lane is exactly what its own evaluation gives. Where that cannot be promised (a
//! division, a subtraction, a mean that overflowed), the answer is `None` and the caller
//! evaluates each statistic on its own, as before.

use std::collections::BTreeMap;

use super::eval::{self, Frame, Stat, TargetSeries};
use super::spec::Expr;
use crate::signal::window;

/// The four statistics: last, mean, max, min.
type Lanes = [f64; 4];

/// Where each statistic is (the last is lane 0).
const MEAN: usize = 1;
const MAX: usize = 2;
const MIN: usize = 3;

/// One value per label set (by label key), sorted by key.
struct Out<'t> {
    values: Vec<(&'t str, Lanes)>,
    totals: bool,
}

/// Why there is no lane answer: the expression is absent in every lane (the reason does not
/// matter: the caller already has the value), or the lanes could disagree.
enum NoLanes {
    Absent,
    Unsupported,
}

/// (min, mean, max) of a gauge signal over `frame`, as [`eval::eval_signal`] with
/// `Stat::Min`, `Stat::Mean` and `Stat::Max` would give them; None when it cannot say so
/// without evaluating each.
pub fn gauge_window_stats(
    expr: &Expr,
    ts: &TargetSeries<'_>,
    frame: Frame,
) -> Option<(f64, f64, f64)> {
    frame.end_ms?;
    let out = lanes(expr, ts, frame).ok()?;
    if out.totals {
        return None;
    }
    let v = match out.values.as_slice() {
        [] => return None,
        [(_, one)] => *one,
        many => {
            let mut sum = [0.0; 4];
            for (lane, s) in sum.iter_mut().enumerate() {
                *s = many.iter().map(|(_, v)| v[lane]).sum();
            }
            sum
        }
    };
    Some((v[MIN], v[MEAN], v[MAX]))
}

fn lanes<'t>(expr: &Expr, ts: &'t TargetSeries<'_>, frame: Frame) -> Result<Out<'t>, NoLanes> {
    if !eval::reads_gauge(expr) {
        // No statistic is read below here: one evaluation serves every lane.
        let (values, totals) =
            eval::eval_vector(expr, ts, frame, Stat::Last).map_err(|_| NoLanes::Absent)?;
        return Ok(Out {
            values: values.into_iter().map(|(k, v)| (k, [v; 4])).collect(),
            totals,
        });
    }
    match expr {
        Expr::Gauge(sel) => {
            let end = frame.end_ms.ok_or(NoLanes::Unsupported)?;
            let series = eval::select(sel, "", ts).map_err(|_| NoLanes::Absent)?;
            let mut values = Vec::with_capacity(series.len());
            for (s, key) in series {
                let Some(g) = window::gauge_stats(&s.samples, end, frame.window_ms) else {
                    continue;
                };
                let v = [g.last, g.mean, g.max, g.min];
                match v.iter().filter(|x| x.is_finite()).count() {
                    4 => values.push((key, v)),
                    0 => {}
                    // A mean that overflowed: that lane alone would drop the series.
                    _ => return Err(NoLanes::Unsupported),
                }
            }
            if values.is_empty() {
                return Err(NoLanes::Absent);
            }
            values.sort_by(|a, b| a.0.cmp(b.0));
            Ok(Out {
                values,
                totals: false,
            })
        }
        Expr::Sum(e) => aggregate(lanes(e, ts, frame)?, |v| v.iter().sum()),
        Expr::Max(e) => aggregate(lanes(e, ts, frame)?, |v| {
            v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        }),
        Expr::Min(e) => aggregate(lanes(e, ts, frame)?, |v| {
            v.iter().copied().fold(f64::INFINITY, f64::min)
        }),
        Expr::Avg(e) => aggregate(lanes(e, ts, frame)?, |v| {
            v.iter().sum::<f64>() / v.len() as f64
        }),
        Expr::Count(e) => {
            let out = lanes(e, ts, frame)?;
            Ok(Out {
                values: vec![("", [out.values.len() as f64; 4])],
                totals: false,
            })
        }
        Expr::Add(terms) => {
            let mut acc: Option<Out> = None;
            for t in terms {
                let o = lanes(t, ts, frame)?;
                acc = Some(match acc {
                    None => o,
                    Some(a) => add(a, o)?,
                });
            }
            acc.ok_or(NoLanes::Absent)
        }
        Expr::Scale(e, k) => {
            let mut out = lanes(e, ts, frame)?;
            out.values
                .iter_mut()
                .for_each(|(_, v)| v.iter_mut().for_each(|x| *x *= k));
            Ok(out)
        }
        Expr::PercentToRatio(e) => {
            let mut out = lanes(e, ts, frame)?;
            for lane in 0..4 {
                if out.values.iter().any(|(_, v)| v[lane] > 1.0) {
                    out.values.iter_mut().for_each(|(_, v)| v[lane] /= 100.0);
                }
            }
            Ok(out)
        }
        Expr::ZeroWhenAbsent(a, sibling) => match lanes(a, ts, frame) {
            Ok(o) if !o.values.is_empty() => Ok(o),
            Err(NoLanes::Absent) => {
                let mut o = lanes(sibling, ts, frame)?;
                o.values.iter_mut().for_each(|(_, v)| *v = [0.0; 4]);
                Ok(o)
            }
            other => other,
        },
        Expr::First(alternatives) => {
            for a in alternatives {
                match lanes(a, ts, frame) {
                    Ok(o) if !o.values.is_empty() => return Ok(o),
                    Ok(_) | Err(NoLanes::Absent) => {}
                    Err(NoLanes::Unsupported) => return Err(NoLanes::Unsupported),
                }
            }
            Err(NoLanes::Absent)
        }
        // A division or subtraction can drop a label set in one lane only (a zero divisor).
        _ => Err(NoLanes::Unsupported),
    }
}

/// As `eval`'s `aggregate`, lane by lane.
fn aggregate<'t>(out: Out<'t>, f: impl Fn(&[f64]) -> f64) -> Result<Out<'t>, NoLanes> {
    if out.values.is_empty() {
        return Err(NoLanes::Absent);
    }
    let mut result = [0.0; 4];
    for (lane, r) in result.iter_mut().enumerate() {
        let v: Vec<f64> = out.values.iter().map(|(_, v)| v[lane]).collect();
        *r = f(&v);
    }
    Ok(Out {
        values: vec![("", result)],
        totals: out.totals,
    })
}

/// As `eval`'s `binary` for `add`: one-to-one on label sets, a single unlabelled value applying
/// to every element of the other side; never drops a lane.
fn add<'t>(a: Out<'t>, b: Out<'t>) -> Result<Out<'t>, NoLanes> {
    let totals = a.totals || b.totals;
    let plus = |x: Lanes, y: Lanes| std::array::from_fn(|i| x[i] + y[i]);
    let mut values = Vec::new();
    if b.values.len() == 1 && b.values[0].0.is_empty() {
        let y = b.values[0].1;
        values.extend(a.values.into_iter().map(|(k, x)| (k, plus(x, y))));
    } else if a.values.len() == 1 && a.values[0].0.is_empty() {
        let x = a.values[0].1;
        values.extend(b.values.into_iter().map(|(k, y)| (k, plus(x, y))));
    } else {
        let bm: BTreeMap<&str, Lanes> = b.values.into_iter().collect();
        for (k, x) in a.values {
            if let Some(&y) = bm.get(k) {
                values.push((k, plus(x, y)));
            }
        }
    }
    if values.is_empty() {
        return Err(NoLanes::Absent);
    }
    Ok(Out { values, totals })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::series::testutil::series;
    use crate::signal::series::Series;

    fn expr(yaml: &str) -> Expr {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn gauge(name: &str, gpu: &str, values: &[f64]) -> Series {
        let points: Vec<(Option<i64>, f64)> = values
            .iter()
            .enumerate()
            .map(|(i, &v)| (Some(i as i64 * 1000), v))
            .collect();
        series(name, &[("gpu", gpu)], &points)
    }

    /// Every lane must be what evaluating that statistic alone gives.
    #[test]
    fn lanes_match_one_evaluation_per_statistic() {
        let all = [
            gauge("u", "0", &[10.0, 90.0, 40.0, 50.0]),
            gauge("u", "1", &[30.0, 20.0, 80.0, 70.0]),
            gauge("r", "0", &[0.1, 0.9, 0.4, 0.5]),
            // Past 1 in the max lane only: a percentage there, a ratio elsewhere.
            gauge("q", "0", &[0.5, 1.5, 0.4, 0.5]),
            gauge("w", "0", &[1.0, 2.0, 3.0, 4.0]),
            gauge("w", "1", &[4.0, 3.0, 2.0, 1.0]),
        ];
        let ts = TargetSeries::new(all.iter());
        let frame = Frame {
            end_ms: Some(3000),
            window_ms: 3000,
        };
        for yaml in [
            "{sum: {gauge: {metric: u}}}",
            "{max: {gauge: {metric: [missing, u]}}}",
            "{min: {gauge: {metric: u}}}",
            "{avg: {scale: [{gauge: {metric: u}}, 0.01]}}",
            "{avg: {percent_to_ratio: {gauge: {metric: u}}}}",
            "{avg: {percent_to_ratio: {gauge: {metric: r}}}}",
            "{avg: {percent_to_ratio: {gauge: {metric: q}}}}",
            "{count: {gauge: {metric: u}}}",
            "{max: {add: [{gauge: {metric: u}}, {gauge: {metric: w}}]}}",
            "{first: [{avg: {gauge: {metric: missing}}}, {avg: {gauge: {metric: w}}}]}",
            "{gauge: {metric: w}}",
        ] {
            let e = expr(yaml);
            let one = |s| eval::eval_signal(&e, &ts, frame, s).unwrap();
            let want = (one(Stat::Min), one(Stat::Mean), one(Stat::Max));
            assert_eq!(gauge_window_stats(&e, &ts, frame), Some(want), "{yaml}");
        }
        // A division could drop a label set in one lane only: left to one evaluation each.
        let div = expr("{max: {div: [{gauge: {metric: u}}, {gauge: {metric: w}}]}}");
        assert_eq!(gauge_window_stats(&div, &ts, frame), None);
    }
}
