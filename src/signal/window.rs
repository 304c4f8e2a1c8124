//! Windowed values over raw samples, with the semantics of the PromQL functions they mirror.
//!
//! Recorded exposition files and live query results must give the same numbers, otherwise a
//! diagnosis would depend on where the data came from. So `rate`, `increase` and
//! `histogram_quantile` follow Prometheus' own algorithms (`extrapolatedRate` and
//! `bucketQuantile` in `promql/functions.go` / `promql/quantile.go`) rather than textbook
//! definitions, and windows select samples like a range selector does.
//!
//! Window selection: a window `[end_ms - window_ms, end_ms]` holds the samples with
//! `end_ms - window_ms < t <= end_ms`, i.e. left-open as in Prometheus 3 (Prometheus 2.x also
//! included a sample exactly on the left edge). Samples without a timestamp never fall in a
//! window; use [`last_value`] for timestamp-less data. NaN and ±Inf values are treated as absent
//! (this also drops Prometheus staleness markers, which are NaNs). All functions expect
//! samples sorted by time, as [`crate::signal::series::Series`] keeps them. The durations and
//! times that define a window are read by [`crate::time`].

use crate::signal::samples::{SampleSlice, Samples};
use crate::signal::series::Sample;

/// The samples inside the left-open window `(end_ms - window_ms, end_ms]`, found by binary
/// search on the sorted slice.
pub fn in_window(samples: &Samples, end_ms: i64, window_ms: i64) -> SampleSlice<'_> {
    if window_ms <= 0 {
        return samples.slice(0, 0);
    }
    samples.window(end_ms.saturating_sub(window_ms), end_ms)
}

fn finite(samples: SampleSlice<'_>) -> impl Iterator<Item = Sample> + '_ {
    samples.iter().filter(|s| s.value.is_finite())
}

/// Prometheus' `extrapolatedRate` for counters. Returns `increase`, or `rate` when `is_rate`.
fn extrapolated(samples: &Samples, end_ms: i64, window_ms: i64, is_rate: bool) -> Option<f64> {
    let range_start = end_ms.checked_sub(window_ms)?;
    let window = in_window(samples, end_ms, window_ms);
    let ends = match counter_ends(samples, window) {
        Some(ends) => ends,
        None => counter_walk(window)?,
    };
    extrapolate(ends, range_start, end_ms, window_ms, is_rate)
}

/// What a counter's window comes down to: its first and last finite samples, how many finite
/// samples it holds, and the sum its resets add.
#[derive(Debug, Clone, Copy, PartialEq)]
struct CounterEnds {
    first: Sample,
    last: Sample,
    n: usize,
    resets: f64,
}

/// A counter window's ends from the series' marks, without walking the window: None when a
/// non-finite value lies inside (rare: then the window is walked). The resets are added in
/// order from zero, as the walk adds them, so both give the same bits.
fn counter_ends(samples: &Samples, window: SampleSlice<'_>) -> Option<CounterEnds> {
    let (lo, hi) = window.bounds();
    let marks = samples.counter_marks();
    let from = marks.nonfinite.partition_point(|&i| i < lo);
    if marks.nonfinite.get(from).is_some_and(|&i| i < hi) {
        return None;
    }
    let (first, last) = (window.first()?, window.last()?);
    // A reset at index i lies between samples i - 1 and i: both in the window when lo < i < hi.
    let from = marks.resets.partition_point(|&(i, _)| i <= lo);
    let resets = (marks.resets[from..].iter())
        .take_while(|&&(i, _)| i < hi)
        .fold(0.0, |sum, &(_, before)| sum + before);
    Some(CounterEnds {
        first,
        last,
        n: hi - lo,
        resets,
    })
}

/// The same by walking the window's finite samples.
fn counter_walk(window: SampleSlice<'_>) -> Option<CounterEnds> {
    let mut it = finite(window);
    let first = it.next()?;
    let mut prev = first;
    let mut n = 1usize;
    let mut resets = 0.0;
    for s in it {
        // A drop means the counter restarted from zero: everything up to `prev` was counted.
        if s.value < prev.value {
            resets += prev.value;
        }
        prev = s;
        n += 1;
    }
    Some(CounterEnds {
        first,
        last: prev,
        n,
        resets,
    })
}

/// The increase (or rate) from a window's ends, extrapolated to its edges as Prometheus does.
fn extrapolate(
    ends: CounterEnds,
    range_start: i64,
    end_ms: i64,
    window_ms: i64,
    is_rate: bool,
) -> Option<f64> {
    let CounterEnds {
        first,
        last,
        n,
        resets,
    } = ends;
    if n < 2 {
        return None;
    }
    let (first_t, last_t) = (first.t_ms?, last.t_ms?);
    // Checked: timestamps from arbitrary files can be far enough apart to overflow i64.
    let sampled = last_t.checked_sub(first_t)? as f64 / 1000.0;
    if sampled <= 0.0 {
        return None;
    }
    let result = last.value - first.value + resets;
    let mut to_start = first_t.checked_sub(range_start)? as f64 / 1000.0;
    let mut to_end = end_ms.checked_sub(last_t)? as f64 / 1000.0;
    let average = sampled / (n - 1) as f64;
    // A gap to the edge longer than ~one interval means the series starts or ends inside the
    // window: extrapolate only half an interval there, Prometheus' guess for where it began.
    let threshold = average * 1.1;
    if to_start >= threshold {
        to_start = average / 2.0;
    }
    // Counters cannot go below zero, so never extrapolate back past the implied zero point.
    // Prometheus applies this after the threshold rule above, and so do we.
    if result > 0.0 && first.value >= 0.0 {
        let to_zero = sampled * (first.value / result);
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    if to_end >= threshold {
        to_end = average / 2.0;
    }
    // Same operation order as Prometheus so results match it to the last bit.
    let mut factor = (sampled + to_start + to_end) / sampled;
    if is_rate {
        factor /= window_ms as f64 / 1000.0;
    }
    Some(result * factor)
}

/// Per-second rate of a counter over the window `(end_ms - window_ms, end_ms]`, like PromQL
/// `rate(x[window])`: counter resets are handled and the increase is extrapolated to the
/// window edges (never below zero). None with fewer than two finite samples in the window.
pub fn rate(samples: &Samples, end_ms: i64, window_ms: i64) -> Option<f64> {
    extrapolated(samples, end_ms, window_ms, true)
}

/// Increase of a counter over the window, like PromQL `increase(x[window])`: [`rate`] times
/// the window length in seconds. None with fewer than two finite samples in the window.
pub fn increase(samples: &Samples, end_ms: i64, window_ms: i64) -> Option<f64> {
    extrapolated(samples, end_ms, window_ms, false)
}

/// How many times the value changed between consecutive samples in the window, like PromQL
/// `changes` (NaN to NaN is no change). None without samples in the window.
pub fn changes(samples: &Samples, end_ms: i64, window_ms: i64) -> Option<f64> {
    count_steps(samples, end_ms, window_ms, |a, b| {
        a != b && !(a.is_nan() && b.is_nan())
    })
}

/// How many times a counter went down inside the window (PromQL `resets`). None when the
/// window holds no sample.
pub fn resets(samples: &Samples, end_ms: i64, window_ms: i64) -> Option<f64> {
    count_steps(samples, end_ms, window_ms, |a, b| b < a)
}

/// How many consecutive pairs of values in the window `counts` (earlier, later). None when the
/// window holds no sample.
fn count_steps(
    samples: &Samples,
    end_ms: i64,
    window_ms: i64,
    counts: impl Fn(f64, f64) -> bool,
) -> Option<f64> {
    let w = in_window(samples, end_ms, window_ms);
    w.first()?;
    let n = (w.iter().zip(w.iter().skip(1)))
        .filter(|(a, b)| counts(a.value, b.value))
        .count();
    Some(n as f64)
}

/// The q-quantile of a classic histogram, like PromQL `histogram_quantile` over one series'
/// buckets given as `(le, cumulative count)` pairs in any order (the vector is sorted and
/// compacted in place).
///
/// `q < 0` gives `-Inf` and `q > 1` gives `+Inf` (as Prometheus does; callers treat Inf as
/// absent). None when q is NaN, when the highest bucket is not `+Inf`, when fewer than two
/// distinct bounds remain, or when there are no observations. Pairs with a NaN bound or
/// count are dropped first.
pub fn histogram_quantile(q: f64, buckets: &mut Vec<(f64, f64)>) -> Option<f64> {
    if q.is_nan() {
        return None;
    }
    if q < 0.0 {
        return Some(f64::NEG_INFINITY);
    }
    if q > 1.0 {
        return Some(f64::INFINITY);
    }
    buckets.retain(|(le, count)| !le.is_nan() && !count.is_nan());
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    match buckets.last() {
        Some((le, _)) if *le == f64::INFINITY => {}
        _ => return None,
    }
    // Duplicate bounds (e.g. `le="1"` and `le="1.0"`) are one bucket: sum them, as Prometheus'
    // coalesceBuckets does.
    buckets.dedup_by(|later, kept| {
        if later.0 == kept.0 {
            kept.1 += later.1;
            true
        } else {
            false
        }
    });
    if buckets.len() < 2 {
        return None;
    }
    // Buckets scraped at slightly different moments can be non-monotonic; Prometheus'
    // ensureMonotonic takes the running maximum.
    let mut max = f64::NEG_INFINITY;
    for b in buckets.iter_mut() {
        if b.1 < max {
            b.1 = max;
        } else {
            max = b.1;
        }
    }
    let n = buckets.len();
    let total = buckets[n - 1].1;
    if total == 0.0 || !total.is_finite() {
        return None;
    }
    let rank = q * total;
    // The +Inf bucket is excluded from the search: landing there yields the highest finite bound.
    let b = buckets[..n - 1].partition_point(|&(_, count)| count < rank);
    if b == n - 1 {
        return Some(buckets[n - 2].0);
    }
    if b == 0 && buckets[0].0 <= 0.0 {
        return Some(buckets[0].0);
    }
    let (bucket_end, mut count) = buckets[b];
    let mut bucket_start = 0.0;
    let mut rank = rank;
    if b > 0 {
        bucket_start = buckets[b - 1].0;
        count -= buckets[b - 1].1;
        rank -= buckets[b - 1].1;
    }
    let v = bucket_start + (bucket_end - bucket_start) * (rank / count);
    // 0/0 (q = 0 with an empty first bucket) is NaN in Prometheus: not computable here.
    (!v.is_nan()).then_some(v)
}

/// The lower edge of the bucket that holds the q-quantile: the quantile is known to lie above
/// it, wherever `histogram_quantile`'s interpolation puts it inside the bucket. A histogram
/// places a quantile only within a bucket, so an objective is proven missed only where this
/// edge is at or above it (with V0's TTFT buckets a p99 estimated at 2.1 s may be anything
/// from 1 to 2.5 s). A first bucket with a positive bound starts at 0, as Prometheus assumes;
/// in the `+Inf` bucket the edge is the highest finite bound. None where `histogram_quantile`
/// has no finite answer. Sorts and compacts `buckets` in place as it does.
pub fn histogram_quantile_floor(q: f64, buckets: &mut Vec<(f64, f64)>) -> Option<f64> {
    if !histogram_quantile(q, buckets)?.is_finite() {
        return None;
    }
    // `histogram_quantile` left the buckets sorted, merged and monotonic: find the same bucket.
    let n = buckets.len();
    let rank = q * buckets[n - 1].1;
    let b = buckets[..n - 1].partition_point(|&(_, count)| count < rank);
    Some(match b {
        0 => buckets[0].0.min(0.0),
        b => buckets[b - 1].0,
    })
}

/// Summary of a gauge over a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaugeStats {
    /// The newest finite sample in the window.
    pub last: f64,
    /// Arithmetic mean of the finite samples in the window (not time-weighted, like
    /// `avg_over_time`).
    pub mean: f64,
    /// Largest finite sample in the window.
    pub max: f64,
    /// Smallest finite sample in the window.
    pub min: f64,
}

/// Last, mean, max and min of the finite samples in `(end_ms - window_ms, end_ms]`, like
/// `last_over_time`, `avg_over_time`, `max_over_time` and `min_over_time`. None when the
/// window holds no finite sample.
pub fn gauge_stats(samples: &Samples, end_ms: i64, window_ms: i64) -> Option<GaugeStats> {
    // Only values: a postmortem walks every gauge's window at every step.
    let window = in_window(samples, end_ms, window_ms);
    let mut it = window
        .value_runs()
        .flatten()
        .copied()
        .filter(|v| v.is_finite());
    let first = it.next()?;
    let mut stats = GaugeStats {
        last: first,
        mean: 0.0,
        max: first,
        min: first,
    };
    let mut sum = first;
    let mut n = 1usize;
    for v in it {
        stats.last = v;
        stats.max = stats.max.max(v);
        stats.min = stats.min.min(v);
        sum += v;
        n += 1;
    }
    stats.mean = sum / n as f64;
    Some(stats)
}

/// The newest finite value in `(end_ms - window_ms, end_ms]`, like `last_over_time` (and
/// [`gauge_stats`]' `last`), read from the window's end rather than by walking it.
pub fn last_in_window(samples: &Samples, end_ms: i64, window_ms: i64) -> Option<f64> {
    in_window(samples, end_ms, window_ms)
        .iter()
        .rev()
        .find(|s| s.value.is_finite())
        .map(|s| s.value)
}

/// The last finite value in slice order, ignoring timestamps: the reading of a single scrape
/// without timestamps.
pub fn last_value(samples: &Samples) -> Option<f64> {
    samples
        .iter()
        .rev()
        .find(|s| s.value.is_finite())
        .map(|s| s.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The marks give what walking gives, bit for bit, on series with resets, NaNs and
    /// infinities, for windows anywhere over them.
    #[test]
    fn counter_ends_from_marks_match_the_walk() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..200 {
            let len = (next() % 60) as usize;
            let mut value = 0.0;
            let samples: Samples = (0..len)
                .map(|k| {
                    value = match next() % 20 {
                        0 => 0.3 * (next() % 7) as f64,
                        1 => f64::NAN,
                        2 => f64::INFINITY,
                        _ => value + (next() % 1000) as f64 / 7.0,
                    };
                    Sample {
                        t_ms: Some(k as i64 * 15_000),
                        value,
                    }
                })
                .filter(|s| s.value.is_finite() || s.t_ms.unwrap_or(0) > 0)
                .collect();
            for _ in 0..20 {
                let end = (next() % 1_000_000) as i64 - 100_000;
                let width = (next() % 400_000) as i64;
                let window = in_window(&samples, end, width);
                if let Some(fast) = counter_ends(&samples, window) {
                    let walked = counter_walk(window).expect("a window with ends walks");
                    assert_eq!(fast.first, walked.first);
                    assert_eq!(fast.last, walked.last);
                    assert_eq!(fast.n, walked.n);
                    assert_eq!(fast.resets.to_bits(), walked.resets.to_bits());
                } else if samples.counter_marks().nonfinite.is_empty() {
                    assert!(counter_walk(window).is_none());
                }
            }
        }
    }

    /// Samples at `(seconds, value)`.
    fn s(points: &[(i64, f64)]) -> Samples {
        points
            .iter()
            .map(|&(t, value)| Sample {
                t_ms: Some(t * 1000),
                value,
            })
            .collect()
    }

    fn close(a: Option<f64>, b: f64) {
        let a = a.unwrap_or_else(|| panic!("expected {b}, got None"));
        assert!((a - b).abs() < 1e-9, "expected {b}, got {a}");
    }

    #[test]
    fn rate_regular_counter() {
        // Counter +10 every 15 s: 0,10,20,30,40 at t=0,15,30,45,60 s. Window (0,60] leaves out
        // t=0 (left-open). first=10@15, last=40@60: result 30, sampled 45 s, avg 15 s,
        // threshold 16.5. to_start 15 < 16.5 stays 15; to_zero = 45*10/30 = 15, not smaller.
        // to_end 0. increase = 30 * (45+15+0)/45 = 40; rate = 40/60.
        let c = s(&[(0, 0.0), (15, 10.0), (30, 20.0), (45, 30.0), (60, 40.0)]);
        close(increase(&c, 60_000, 60_000), 40.0);
        close(rate(&c, 60_000, 60_000), 40.0 / 60.0);
    }

    #[test]
    fn rate_with_counter_reset() {
        // 5,10,15 then restart: 3,8,13 at t=10..60 s step 10. result = 13-5 + 15 (value before
        // the drop) = 23. Window (0,60]: to_start 10 < threshold 11; to_zero = 50*5/23 = 10.87,
        // not smaller; to_end 0. increase = 23 * 60/50 = 27.6; rate = 0.46.
        let c = s(&[
            (10, 5.0),
            (20, 10.0),
            (30, 15.0),
            (40, 3.0),
            (50, 8.0),
            (60, 13.0),
        ]);
        close(increase(&c, 60_000, 60_000), 27.6);
        close(rate(&c, 60_000, 60_000), 0.46);
    }

    #[test]
    fn rate_extrapolates_to_unaligned_edges() {
        // Window (40,100]. Samples 45..85 step 10 (v 100..140); 105 is outside. result 40,
        // sampled 40, avg 10, threshold 11. to_start 5 < 11 -> 5 (to_zero 40 is larger);
        // to_end 15 >= 11 -> avg/2 = 5. increase = 40 * (40+5+5)/40 = 50; rate = 50/60.
        let c = s(&[
            (35, 90.0),
            (45, 100.0),
            (55, 110.0),
            (65, 120.0),
            (75, 130.0),
            (85, 140.0),
            (105, 160.0),
        ]);
        close(increase(&c, 100_000, 60_000), 50.0);
        close(rate(&c, 100_000, 60_000), 50.0 / 60.0);
    }

    #[test]
    fn rate_does_not_extrapolate_below_zero() {
        // Same timing, values 1..41: to_zero = 40 * 1/40 = 1 < to_start 5, so start extends
        // only 1 s. increase = 40 * (40+1+5)/40 = 46.
        let c = s(&[(45, 1.0), (55, 11.0), (65, 21.0), (75, 31.0), (85, 41.0)]);
        close(increase(&c, 100_000, 60_000), 46.0);
    }

    #[test]
    fn zero_point_rule_applies_after_threshold_rule() {
        // Series starts late in window (40,100]: samples 70..100, values 8,18,28,38. result 30,
        // sampled 30, avg 10. to_start 30 >= 11 -> avg/2 = 5; to_zero = 30*8/30 = 8 is not
        // smaller, so 5 stays (Prometheus' order; applying to_zero first would give 8).
        // increase = 30 * (30+5+0)/30 = 35.
        let c = s(&[(70, 8.0), (80, 18.0), (90, 28.0), (100, 38.0)]);
        close(increase(&c, 100_000, 60_000), 35.0);
    }

    #[test]
    fn rate_needs_two_samples() {
        assert_eq!(rate(&Samples::new(), 60_000, 60_000), None);
        assert_eq!(rate(&s(&[(30, 1.0)]), 60_000, 60_000), None);
        // The sample on the left edge is outside the left-open window.
        assert_eq!(rate(&s(&[(0, 1.0), (60, 2.0)]), 60_000, 60_000), None);
        // A sample after the end is outside too.
        assert_eq!(rate(&s(&[(30, 1.0), (61, 2.0)]), 60_000, 60_000), None);
        assert_eq!(rate(&s(&[(30, 1.0), (40, 2.0)]), 60_000, 0), None);
        // Timestamp-less samples never fall in a window.
        let no_ts = [
            Sample {
                t_ms: None,
                value: 1.0,
            },
            Sample {
                t_ms: None,
                value: 2.0,
            },
        ];
        assert_eq!(rate(&no_ts.to_vec().into(), 60_000, 60_000), None);
    }

    #[test]
    fn rate_skips_nan_and_inf() {
        let clean = s(&[(15, 10.0), (30, 20.0), (45, 30.0), (60, 40.0)]);
        let dirty = s(&[
            (15, 10.0),
            (20, f64::NAN),
            (30, 20.0),
            (40, f64::INFINITY),
            (45, 30.0),
            (60, 40.0),
        ]);
        close(
            rate(&dirty, 60_000, 60_000),
            rate(&clean, 60_000, 60_000).unwrap(),
        );
        let only_one_finite = s(&[(15, f64::NAN), (30, 20.0)]);
        assert_eq!(rate(&only_one_finite, 60_000, 60_000), None);
    }

    fn hq(q: f64, b: &[(f64, f64)]) -> Option<f64> {
        histogram_quantile(q, &mut b.to_vec())
    }

    const INF: f64 = f64::INFINITY;

    #[test]
    fn quantile_interpolates_inside_bucket() {
        // total 40, rank 20 -> bucket (0.1, 0.5] holding counts 10..30: 0.1 + 0.4 * 10/20 = 0.3.
        let b = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (INF, 40.0)];
        close(hq(0.5, &b), 0.3);
        // Input order does not matter.
        close(
            hq(0.5, &[(INF, 40.0), (1.0, 40.0), (0.1, 10.0), (0.5, 30.0)]),
            0.3,
        );
        // First bucket starts at 0: rank 25 of 100 in (0, 1] holding 50 -> 0.5.
        close(hq(0.25, &[(1.0, 50.0), (2.0, 100.0), (INF, 100.0)]), 0.5);
        // q = 1 lands on the highest bucket with all observations.
        close(hq(1.0, &b), 1.0);
    }

    #[test]
    fn quantile_in_inf_bucket_returns_second_highest_bound() {
        // rank 90 of 100: only the +Inf bucket reaches it.
        close(hq(0.9, &[(0.1, 10.0), (0.5, 20.0), (INF, 100.0)]), 0.5);
    }

    #[test]
    fn quantile_first_bucket_with_non_positive_bound() {
        close(hq(0.25, &[(0.0, 50.0), (1.0, 100.0), (INF, 100.0)]), 0.0);
        close(hq(0.25, &[(-1.0, 50.0), (1.0, 100.0), (INF, 100.0)]), -1.0);
    }

    #[test]
    fn quantile_fixes_non_monotonic_and_duplicate_buckets() {
        // Counts 10, 8, 20 become 10, 10, 20. rank 15 -> bucket (2, 4] holding 10..20:
        // 2 + 2 * 5/10 = 3 (unfixed it would be 2 + 2 * 7/12).
        close(
            hq(0.75, &[(1.0, 10.0), (2.0, 8.0), (4.0, 20.0), (INF, 20.0)]),
            3.0,
        );
        // Duplicate le=1 is summed to 10 of 10: rank 5 -> 0 + 1 * 5/10.
        close(hq(0.5, &[(1.0, 5.0), (INF, 10.0), (1.0, 5.0)]), 0.5);
    }

    #[test]
    fn quantile_not_computable_cases() {
        assert_eq!(hq(0.5, &[(0.1, 0.0), (INF, 0.0)]), None);
        assert_eq!(hq(0.5, &[(0.1, 1.0), (1.0, 2.0)]), None);
        assert_eq!(hq(0.5, &[(INF, 5.0)]), None);
        assert_eq!(hq(0.5, &[]), None);
        assert_eq!(hq(f64::NAN, &[(0.1, 1.0), (INF, 2.0)]), None);
        assert_eq!(hq(0.0, &[(0.1, 0.0), (INF, 2.0)]), None);
        assert_eq!(hq(1.5, &[(0.1, 1.0), (INF, 2.0)]), Some(INF));
        assert_eq!(hq(-0.5, &[(0.1, 1.0), (INF, 2.0)]), Some(f64::NEG_INFINITY));
        // The Inf answers come before any bucket checks, as in Prometheus.
        assert_eq!(hq(2.0, &[]), Some(INF));
    }

    fn floor(q: f64, b: &[(f64, f64)]) -> Option<f64> {
        histogram_quantile_floor(q, &mut b.to_vec())
    }

    #[test]
    fn quantile_floor_is_the_lower_edge_of_the_bucket_holding_it() {
        // vLLM V0's TTFT buckets around one second: a p99 interpolated at 2.2 s lies in
        // (1, 2.5], so all the histogram proves is "above 1 s".
        let b = [(0.5, 90.0), (1.0, 98.0), (2.5, 100.0), (INF, 100.0)];
        close(hq(0.99, &b), 1.75);
        assert_eq!(floor(0.99, &b), Some(1.0));
        // Unordered input and duplicate bounds change nothing.
        let shuffled = [
            (INF, 100.0),
            (2.5, 100.0),
            (1.0, 48.0),
            (0.5, 90.0),
            (1.0, 50.0),
        ];
        assert_eq!(floor(0.99, &shuffled), Some(1.0));
        // The first bucket starts at 0; in +Inf the quantile is above the highest bound.
        assert_eq!(floor(0.5, &b), Some(0.0));
        assert_eq!(
            floor(0.5, &[(-1.0, 50.0), (1.0, 100.0), (INF, 100.0)]),
            Some(-1.0)
        );
        assert_eq!(
            floor(0.9, &[(0.1, 10.0), (0.5, 20.0), (INF, 100.0)]),
            Some(0.5)
        );
        // A rank on a bound belongs to the bucket that bound closes.
        assert_eq!(floor(0.98, &b), Some(0.5));
        // No answer where the quantile has none, or none finite.
        assert_eq!(floor(0.5, &[(0.1, 0.0), (INF, 0.0)]), None);
        assert_eq!(floor(1.5, &b), None);
        assert_eq!(floor(f64::NAN, &b), None);
    }

    proptest::proptest! {
        #[test]
        fn the_floor_is_a_bound_at_or_below_the_quantile(
            counts in proptest::collection::vec(0.0f64..100.0, 1..8),
            q in 0.0f64..=1.0,
        ) {
            // Cumulative counts on bounds 1, 2, 3, ... and +Inf.
            let mut total = 0.0;
            let mut b: Vec<(f64, f64)> = Vec::new();
            for (i, c) in counts.iter().enumerate() {
                total += c;
                b.push(((i + 1) as f64, total));
            }
            b.push((INF, total + 1.0));
            if let Some(v) = hq(q, &b).filter(|v| v.is_finite()) {
                let f = floor(q, &b).expect("a floor wherever a finite quantile");
                proptest::prop_assert!(f <= v, "floor {f} above quantile {v}");
                proptest::prop_assert!(f == 0.0 || b.iter().any(|&(le, _)| le == f), "floor {f} not a bound");
                // No bound lies strictly between the floor and the quantile.
                proptest::prop_assert!(!b.iter().any(|&(le, _)| le > f && le < v));
            }
        }
    }

    #[test]
    fn changes_count_value_changes_inside_the_window() {
        let g = s(&[(10, 1.0), (20, 1.0), (30, 2.0), (40, 2.0), (50, 3.0)]);
        // (10, 50]: 1 -> 2 -> 2 -> 3.
        assert_eq!(changes(&g, 50_000, 40_000), Some(2.0));
        assert_eq!(changes(&g, 50_000, 5_000), Some(0.0));
        assert_eq!(changes(&g, 500_000, 5_000), None);
    }

    #[test]
    fn resets_count_decreases_inside_the_window() {
        let c = s(&[
            (10, 5.0),
            (20, 9.0),
            (30, 1.0),
            (40, 4.0),
            (50, 0.0),
            (60, f64::NAN),
        ]);
        // (10, 60]: 9 -> 1 and 4 -> 0 went down; NaN compares as neither.
        assert_eq!(resets(&c, 60_000, 50_000), Some(2.0));
        assert_eq!(resets(&c, 20_000, 10_000), Some(0.0));
        assert_eq!(resets(&c, 500_000, 5_000), None);
    }

    #[test]
    fn gauge_stats_over_window() {
        // Window (10,60] leaves out t=10; NaN skipped: 5, 3, 9, 2.
        let g = s(&[
            (10, 1.0),
            (20, 5.0),
            (30, f64::NAN),
            (40, 3.0),
            (50, 9.0),
            (60, 2.0),
            (70, 100.0),
        ]);
        let st = gauge_stats(&g, 60_000, 50_000).unwrap();
        assert_eq!(
            st,
            GaugeStats {
                last: 2.0,
                mean: 4.75,
                max: 9.0,
                min: 2.0
            }
        );
        assert_eq!(gauge_stats(&g, 5_000, 1_000), None);
        assert_eq!(gauge_stats(&s(&[(30, f64::NAN)]), 60_000, 60_000), None);
    }

    #[test]
    fn last_value_ignores_non_finite() {
        let v = [
            Sample {
                t_ms: None,
                value: 3.0,
            },
            Sample {
                t_ms: None,
                value: f64::NAN,
            },
        ];
        assert_eq!(last_value(&v.to_vec().into()), Some(3.0));
        assert_eq!(last_value(&Samples::new()), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        /// Extreme timestamps, windows and values must give None or a number, never a panic.
        #[test]
        fn window_functions_never_panic(
            mut points in proptest::collection::vec(
                (proptest::prelude::any::<i64>(), proptest::prelude::any::<f64>()),
                0..20,
            ),
            end_ms in proptest::prelude::any::<i64>(),
            window_ms in proptest::prelude::any::<i64>(),
            q in proptest::prelude::any::<f64>(),
        ) {
            points.sort_by_key(|p| p.0);
            let samples: Samples = points
                .iter()
                .map(|&(t, value)| Sample { t_ms: Some(t), value })
                .collect();
            let _ = rate(&samples, end_ms, window_ms);
            let _ = increase(&samples, end_ms, window_ms);
            let stats = gauge_stats(&samples, end_ms, window_ms);
            // The newest value read from the window's end is the walk's last.
            proptest::prop_assert_eq!(
                last_in_window(&samples, end_ms, window_ms).map(f64::to_bits),
                stats.map(|g| g.last.to_bits())
            );
            let _ = last_value(&samples);
            let mut buckets: Vec<(f64, f64)> = points.iter().map(|&(t, v)| (t as f64, v)).collect();
            buckets.push((f64::INFINITY, 1.0));
            let _ = histogram_quantile(q, &mut buckets);
        }
    }
}
