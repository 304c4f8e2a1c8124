//! One series' samples, stored compactly: values in blocks of plain `f64`s, timestamps as runs
//! of evenly spaced instants.
//!
//! A postmortem of a fleet-day keeps every sample of the range, 1.5 million per replica. As
//! [`Sample`]s (an optional `i64` and an `f64`) they took 24 bytes each, 2.5 GB for 64
//! replicas. Scrapes come at a steady interval, so a series' timestamps are nearly always one
//! run `start + k * step`: kept as runs, a sample costs its value, 8 bytes. Timestamps that do
//! not fall in runs (jittered scrapes, samples without a timestamp) are kept one by one, as
//! before. Values grow in blocks rather than one vector, so a long series never holds twice its
//! size while it grows.
//!
//! Readers see [`Sample`]s: by index, by iterator, or through a [`SampleSlice`] of a window.

use std::fmt;
use std::sync::OnceLock;

use super::series::Sample;

/// Values per block (a power of two: the index is split by shifting).
const BLOCK_BITS: u32 = 8;
const BLOCK: usize = 1 << BLOCK_BITS;

/// The samples of one series, in the order they were pushed.
#[derive(Clone, Default)]
pub struct Samples {
    /// Full blocks of `BLOCK` values, then the last, partly filled one.
    blocks: Vec<Vec<f64>>,
    len: usize,
    times: Times,
    /// Made on first use by a counter's window, forgotten by any push.
    marks: OnceLock<Box<CounterMarks>>,
}

/// What a counter's window needs beyond its two end samples, found once per series so that a
/// window sliding over a postmortem's range does not walk its samples at every step.
#[derive(Clone, Debug, Default)]
pub struct CounterMarks {
    /// Indices of NaN and ±Inf values, ascending.
    pub nonfinite: Vec<usize>,
    /// Each drop between consecutive finite values (a counter reset): the later value's index
    /// and the value before the drop, ascending by index.
    pub resets: Vec<(usize, f64)>,
}

#[derive(Clone, Debug)]
enum Times {
    /// Every sample has a timestamp, and they form these runs.
    Runs(Vec<Run>),
    /// One by one: some sample has no timestamp, or there were too many runs.
    Each(Vec<Option<i64>>),
}

impl Default for Times {
    fn default() -> Self {
        Times::Runs(Vec::new())
    }
}

/// The samples before index `end` and after the previous run's, at `start + k * step`.
#[derive(Clone, Copy, Debug)]
struct Run {
    start: i64,
    step: i64,
    end: usize,
}

impl Run {
    /// The `k`th instant. Wrapping: every instant of a run was a pushed `i64`, so the true
    /// result fits even where `step * k` alone would not.
    #[inline]
    fn at(&self, k: usize) -> i64 {
        self.start.wrapping_add(self.step.wrapping_mul(k as i64))
    }

    /// How many of the run's instants are at or before `t` (`step` > 0), unbounded above: the
    /// caller clamps to the run's length.
    fn count_upto(&self, t: i64) -> usize {
        if t < self.start {
            return 0;
        }
        let k = match t.checked_sub(self.start) {
            Some(d) => i128::from(d / self.step),
            // Timestamps so far apart that their distance exceeds i64 (i128 division is slow).
            None => (i128::from(t) - i128::from(self.start)) / i128::from(self.step),
        };
        usize::try_from(k + 1).unwrap_or(usize::MAX)
    }
}

impl Samples {
    /// No samples.
    pub fn new() -> Self {
        Samples::default()
    }

    /// How many samples.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a sample.
    pub fn push(&mut self, sample: Sample) {
        self.push_with_room(sample, 1);
    }

    /// [`Samples::push`], knowing that `more` samples (this one included) are coming: a new
    /// block is made with room for them at once rather than grown a sample at a time. A series
    /// past its first block is long, so later blocks are made whole.
    fn push_with_room(&mut self, sample: Sample, more: usize) {
        self.marks.take();
        match self.blocks.last_mut() {
            Some(b) if b.len() < BLOCK => b.push(sample.value),
            _ => {
                let room = if self.len == 0 {
                    more.clamp(1, BLOCK)
                } else {
                    BLOCK
                };
                let mut block = Vec::with_capacity(room);
                block.push(sample.value);
                self.blocks.push(block);
            }
        }
        let index = self.len;
        self.len += 1;
        self.push_time(sample.t_ms, index);
    }

    /// Adds the instant of sample `index`, the next one.
    fn push_time(&mut self, t_ms: Option<i64>, index: usize) {
        if let Times::Runs(runs) = &mut self.times {
            match t_ms {
                Some(t) if extend_runs(runs, t, index) => return,
                _ => {}
            }
            // Runs no longer pay (each costs three words): keep the instants one by one.
            let each: Vec<Option<i64>> = (0..index).map(|i| Some(runs_time(runs, i))).collect();
            self.times = Times::Each(each);
        }
        if let Times::Each(each) = &mut self.times {
            each.push(t_ms);
        }
    }

    /// The samples of `all`, stored as pushing them one by one would store them, the values
    /// copied a block at a time: how a store's answer, read into a buffer first, becomes a
    /// series (a sample pushed alone was most of the cost of keeping it).
    pub fn from_slice(all: &[Sample]) -> Samples {
        let mut out = Samples {
            blocks: all
                .chunks(BLOCK)
                .map(|c| c.iter().map(|s| s.value).collect())
                .collect(),
            len: all.len(),
            ..Samples::default()
        };
        if let Some(run) = one_run(all) {
            out.times = Times::Runs(vec![run]);
            return out;
        }
        for (index, s) in all.iter().enumerate() {
            out.push_time(s.t_ms, index);
        }
        out
    }

    /// The value of sample `i`.
    #[inline(always)]
    fn value(&self, i: usize) -> f64 {
        self.blocks[i >> BLOCK_BITS][i & (BLOCK - 1)]
    }

    /// The timestamp of sample `i`.
    #[inline(always)]
    pub fn time(&self, i: usize) -> Option<i64> {
        match &self.times {
            // The common case, inlined: one run.
            Times::Runs(runs) if runs.len() == 1 => Some(runs[0].at(i)),
            Times::Runs(runs) => Some(runs_time(runs, i)),
            Times::Each(each) => each[i],
        }
    }

    /// Sample `i`, if there is one.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Sample> {
        (i < self.len).then(|| self.at(i))
    }

    /// Sample `i`, which must exist.
    #[inline(always)]
    fn at(&self, i: usize) -> Sample {
        Sample {
            t_ms: self.time(i),
            value: self.value(i),
        }
    }

    /// The first sample.
    pub fn first(&self) -> Option<Sample> {
        self.get(0)
    }

    /// The last sample.
    pub fn last(&self) -> Option<Sample> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// Every sample, in order.
    pub fn iter(&self) -> Iter<'_> {
        self.slice(0, self.len).iter()
    }

    /// Samples `lo..hi`.
    pub fn slice(&self, lo: usize, hi: usize) -> SampleSlice<'_> {
        let hi = hi.min(self.len);
        SampleSlice {
            samples: self,
            lo: lo.min(hi),
            hi,
        }
    }

    /// The samples with `after < t <= until` (sorted samples, as a series keeps them; those
    /// without a timestamp are never in). Evenly spaced instants are found by arithmetic, others
    /// by binary search.
    pub fn window(&self, after: i64, until: i64) -> SampleSlice<'_> {
        if let Times::Runs(runs) = &self.times {
            if let [run] = runs.as_slice() {
                if run.step > 0 {
                    let lo = run.count_upto(after).min(self.len);
                    let hi = run.count_upto(until).clamp(lo, self.len);
                    return self.slice(lo, hi);
                }
            }
        }
        let lo = self.partition_point(|t| t.is_none_or(|t| t <= after));
        let hi = self.partition_point(|t| t.is_none_or(|t| t <= until));
        // Unsorted input gives an empty window rather than a reversed one.
        self.slice(lo, hi.max(lo))
    }

    /// The first index whose timestamp `pred` rejects, assuming it accepts a prefix (as
    /// `slice::partition_point` does).
    pub fn partition_point(&self, pred: impl Fn(Option<i64>) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.time(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The non-finite values and the counter resets of these samples (computed on first call).
    pub fn counter_marks(&self) -> &CounterMarks {
        self.marks.get_or_init(|| {
            let mut marks = CounterMarks::default();
            let mut prev: Option<f64> = None;
            for i in 0..self.len {
                let v = self.value(i);
                if !v.is_finite() {
                    marks.nonfinite.push(i);
                    continue;
                }
                if let Some(p) = prev.filter(|p| v < *p) {
                    marks.resets.push((i, p));
                }
                prev = Some(v);
            }
            Box::new(marks)
        })
    }

    /// The earliest and latest timestamps (`None` when no sample has one), and whether every
    /// sample has one: from the ends of each run without walking its samples, so that joining
    /// a fleet's series costs per series, not per sample.
    pub fn time_span(&self) -> (Option<(i64, i64)>, bool) {
        let widen = |span: Option<(i64, i64)>, lo: i64, hi: i64| {
            Some(span.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))))
        };
        match &self.times {
            Times::Runs(runs) => {
                let mut span = None;
                let mut begin = 0;
                for run in runs {
                    // A run's instants move one way (its step has either sign): its ends bound it.
                    let (a, b) = (run.start, run.at(run.end - begin - 1));
                    span = widen(span, a.min(b), a.max(b));
                    begin = run.end;
                }
                (span, true)
            }
            Times::Each(each) => {
                let mut span = None;
                for t in each.iter().flatten() {
                    span = widen(span, *t, *t);
                }
                (span, each.iter().all(Option::is_some))
            }
        }
    }

    /// Whether every sample has a timestamp later than the one before: runs that climb, each
    /// starting after the last ended, are, without walking their samples.
    pub fn is_strictly_increasing(&self) -> bool {
        match &self.times {
            Times::Runs(runs) => {
                let mut begin = 0;
                let mut last: Option<i64> = None;
                for run in runs {
                    let n = run.end - begin;
                    if (n > 1 && run.step <= 0) || last.is_some_and(|t| t >= run.start) {
                        return false;
                    }
                    last = Some(run.at(n - 1));
                    begin = run.end;
                }
                true
            }
            Times::Each(each) => each.windows(2).all(|w| w[0] < w[1]),
        }
    }

    /// The samples as a vector of [`Sample`]s.
    pub fn to_vec(&self) -> Vec<Sample> {
        self.iter().collect()
    }

    /// Keeps the samples `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&Sample) -> bool) {
        if self.iter().all(|s| keep(&s)) {
            return;
        }
        *self = self.iter().filter(|s| keep(s)).collect();
    }

    /// Drops the first `k` samples (a window's trim: the oldest), moving the values and
    /// shifting the runs rather than pushing every kept sample again.
    pub fn drop_first(&mut self, k: usize) {
        let k = k.min(self.len);
        if k == 0 {
            return;
        }
        self.marks.take();
        let rest = self.len - k;
        let mut values = self.blocks.iter().flatten().skip(k).copied();
        let mut blocks = Vec::with_capacity(rest.div_ceil(BLOCK));
        for b in 0..rest.div_ceil(BLOCK) {
            let mut block = Vec::with_capacity(BLOCK.min(rest - b * BLOCK));
            block.extend(values.by_ref().take(BLOCK));
            blocks.push(block);
        }
        self.blocks = blocks;
        match &mut self.times {
            Times::Runs(runs) => {
                let mut begin = 0;
                let mut kept = Vec::with_capacity(runs.len());
                for run in runs.iter() {
                    if run.end > k {
                        kept.push(Run {
                            start: run.at(k.saturating_sub(begin)),
                            step: run.step,
                            end: run.end - k,
                        });
                    }
                    begin = run.end;
                }
                *runs = kept;
            }
            Times::Each(each) => {
                each.drain(..k);
            }
        }
        self.len = rest;
    }

    /// Moves every sample of `other` to the end of this one.
    pub fn append(&mut self, other: &mut Samples) {
        for s in other.iter() {
            self.push(s);
        }
        *other = Samples::default();
    }

    /// Gives samples without a timestamp this one.
    pub fn stamp_untimed(&mut self, t_ms: i64) {
        if let Times::Each(each) = &self.times {
            if each.iter().any(Option::is_none) {
                *self = self
                    .iter()
                    .map(|s| Sample {
                        t_ms: s.t_ms.or(Some(t_ms)),
                        value: s.value,
                    })
                    .collect();
            }
        }
    }

    /// Returns the room grown for samples that never came, when it is more than an eighth.
    pub fn shrink_slack(&mut self) {
        if let Some(b) = self.blocks.last_mut() {
            if b.capacity() > b.len() + b.len() / 8 {
                b.shrink_to_fit();
            }
        }
        self.blocks.shrink_to_fit();
        match &mut self.times {
            Times::Runs(r) => r.shrink_to_fit(),
            Times::Each(e) => {
                if e.capacity() > e.len() + e.len() / 8 {
                    e.shrink_to_fit()
                }
            }
        }
    }
}

/// Extends the runs with an instant `t` at `index`; false when runs would cost more than
/// keeping instants one by one.
fn extend_runs(runs: &mut Vec<Run>, t: i64, index: usize) -> bool {
    if let Some(r) = runs.len().checked_sub(1) {
        let begin = runs_start(runs, r);
        let last = &mut runs[r];
        let k = last.end - begin;
        if k == 1 {
            if let Some(step) = t.checked_sub(last.start) {
                last.step = step;
                last.end += 1;
                return true;
            }
        } else if last.at(k - 1).checked_add(last.step) == Some(t) {
            last.end += 1;
            return true;
        }
    }
    // A run is three words and an instant one by one is two: past that, runs do not pay.
    if runs.len() >= 4 && runs.len() * 3 > (index + 1) * 2 {
        return false;
    }
    runs.push(Run {
        start: t,
        step: 0,
        end: index + 1,
    });
    true
}

/// The one run [`extend_runs`] makes of `all` when every instant is one step after the one
/// before (a store's answer nearly always); None otherwise, or when there are none.
fn one_run(all: &[Sample]) -> Option<Run> {
    let start = all.first()?.t_ms?;
    let step = match all.get(1) {
        Some(s) => s.t_ms?.checked_sub(start)?,
        None => 0,
    };
    let mut before = start;
    for s in all.iter().skip(1) {
        let t = s.t_ms?;
        if before.checked_add(step) != Some(t) {
            return None;
        }
        before = t;
    }
    Some(Run {
        start,
        step,
        end: all.len(),
    })
}

/// The index of run `r`'s first sample.
fn runs_start(runs: &[Run], r: usize) -> usize {
    if r == 0 {
        0
    } else {
        runs[r - 1].end
    }
}

/// The instant of sample `i` (which must exist).
fn runs_time(runs: &[Run], i: usize) -> i64 {
    let r = runs.partition_point(|run| run.end <= i);
    runs[r].at(i - runs_start(runs, r))
}

impl FromIterator<Sample> for Samples {
    fn from_iter<I: IntoIterator<Item = Sample>>(iter: I) -> Self {
        let mut out = Samples::new();
        out.extend(iter);
        out
    }
}

impl From<Vec<Sample>> for Samples {
    fn from(v: Vec<Sample>) -> Self {
        Samples::from_slice(&v)
    }
}

impl Extend<Sample> for Samples {
    fn extend<I: IntoIterator<Item = Sample>>(&mut self, iter: I) {
        let mut iter = iter.into_iter();
        while let Some(s) = iter.next() {
            self.push_with_room(s, iter.size_hint().0 + 1);
        }
    }
}

/// Equal when they hold the same samples, however they are stored.
impl PartialEq for Samples {
    fn eq(&self, other: &Samples) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for Samples {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a Samples {
    type Item = Sample;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// A run of consecutive samples: a window, or all of them.
#[derive(Clone, Copy)]
pub struct SampleSlice<'a> {
    samples: &'a Samples,
    lo: usize,
    hi: usize,
}

impl<'a> SampleSlice<'a> {
    /// The indices `lo..hi` of the slice in its series.
    pub fn bounds(&self) -> (usize, usize) {
        (self.lo, self.hi)
    }

    /// How many samples.
    pub fn len(&self) -> usize {
        self.hi - self.lo
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.hi == self.lo
    }

    /// Sample `k` of the slice.
    pub fn get(&self, k: usize) -> Option<Sample> {
        (k < self.len())
            .then(|| self.samples.get(self.lo + k))
            .flatten()
    }

    /// The first sample.
    pub fn first(&self) -> Option<Sample> {
        self.get(0)
    }

    /// The last sample.
    pub fn last(&self) -> Option<Sample> {
        self.len().checked_sub(1).and_then(|k| self.get(k))
    }

    /// The values alone, in order, as the runs of contiguous `f64`s the slice covers (one per
    /// block it touches): what a window statistic walks, without decoding timestamps.
    pub fn value_runs(&self) -> impl Iterator<Item = &'a [f64]> + 'a {
        let (lo, hi, blocks) = (self.lo, self.hi, &self.samples.blocks);
        let (first, last) = (lo >> BLOCK_BITS, hi.saturating_sub(1) >> BLOCK_BITS);
        let blocks_touched = if hi > lo { first..last + 1 } else { 0..0 };
        blocks_touched.map(move |b| {
            let from = if b == first { lo & (BLOCK - 1) } else { 0 };
            let to = if b == last {
                ((hi - 1) & (BLOCK - 1)) + 1
            } else {
                BLOCK
            };
            &blocks[b][from..to]
        })
    }

    /// The timestamps alone, in order.
    pub fn times(&self) -> impl Iterator<Item = Option<i64>> + 'a {
        let samples = self.samples;
        (self.lo..self.hi).map(move |i| samples.time(i))
    }

    /// The samples, in order (reversible).
    pub fn iter(&self) -> Iter<'a> {
        Iter {
            samples: self.samples,
            front: self.lo,
            back: self.hi,
        }
    }
}

/// Samples by value, in order.
#[derive(Clone)]
pub struct Iter<'a> {
    samples: &'a Samples,
    front: usize,
    back: usize,
}

impl Iterator for Iter<'_> {
    type Item = Sample;

    #[inline]
    fn next(&mut self) -> Option<Sample> {
        if self.front >= self.back {
            return None;
        }
        let i = self.front;
        self.front += 1;
        Some(self.samples.at(i))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Sample> {
        if self.front >= self.back {
            return None;
        }
        self.back -= 1;
        Some(self.samples.at(self.back))
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: Option<i64>, value: f64) -> Sample {
        Sample { t_ms: t, value }
    }

    #[test]
    fn regular_instants_are_one_run() {
        let s: Samples = (0..3000)
            .map(|i| at(Some(1000 + i * 15), i as f64))
            .collect();
        assert!(matches!(&s.times, Times::Runs(r) if r.len() == 1));
        assert_eq!(s.len(), 3000);
        assert_eq!(s.get(2999), Some(at(Some(1000 + 2999 * 15), 2999.0)));
        assert_eq!(s.get(3000), None);
        assert_eq!(s.partition_point(|t| t.is_some_and(|t| t <= 1030)), 3);
        let back: Vec<Sample> = s.slice(10, 13).iter().rev().collect();
        assert_eq!(back[0], at(Some(1000 + 12 * 15), 12.0));
    }

    #[test]
    fn any_sequence_reads_back_as_pushed() {
        let cases: Vec<Vec<Sample>> = vec![
            vec![],
            vec![at(None, 1.0)],
            vec![at(Some(5), 1.0), at(None, 2.0), at(Some(5), 3.0)],
            // A gap, a step change, a step back, and the extremes of i64.
            (0..40)
                .map(|i| at(Some(if i < 20 { i * 10 } else { i * 7 - 3 }), i as f64))
                .chain([at(Some(i64::MIN), 0.5), at(Some(i64::MAX), f64::NAN)])
                .collect(),
            // Jitter: too many runs, kept one by one.
            (0..50)
                .map(|i| at(Some(i * 1000 + i % 3), -(i as f64)))
                .collect(),
            // Past one block, with a sample without a timestamp in the second.
            (0..600)
                .map(|i| at((i != 300).then_some(i * 15), i as f64))
                .collect(),
            // One run past a block; two samples a step back; a step of zero.
            (0..600).map(|i| at(Some(7 + i * 15), i as f64)).collect(),
            vec![at(Some(30), 1.0), at(Some(15), 2.0)],
            vec![at(Some(30), 1.0), at(Some(30), 2.0), at(Some(30), 3.0)],
            vec![at(Some(i64::MIN), 1.0), at(Some(i64::MAX), 2.0)],
        ];
        for v in cases {
            let s = Samples::from(v.clone());
            // Pushed one by one, or copied a block at a time: the same samples.
            let pushed: Samples = v.iter().copied().collect();
            let bits = |s: &Samples| -> Vec<(Option<i64>, u64)> {
                s.iter().map(|x| (x.t_ms, x.value.to_bits())).collect()
            };
            assert_eq!(bits(&s), bits(&pushed));
            assert_eq!(format!("{:?}", s.times), format!("{:?}", pushed.times));
            let got = s.to_vec();
            assert_eq!(got.len(), v.len());
            for (g, w) in got.iter().zip(&v) {
                assert_eq!(g.t_ms, w.t_ms);
                assert_eq!(g.value.to_bits(), w.value.to_bits());
            }
            for (i, w) in v.iter().enumerate() {
                assert_eq!(s.time(i), w.t_ms);
            }
            assert_eq!(s.time_span(), walked_span(&v), "{v:?}");
            assert_eq!(s.is_strictly_increasing(), walked_increasing(&v), "{v:?}");
        }
    }

    /// What [`Samples::time_span`] must say: the bounds and completeness of a walk.
    fn walked_span(v: &[Sample]) -> (Option<(i64, i64)>, bool) {
        let ts: Vec<i64> = v.iter().filter_map(|s| s.t_ms).collect();
        let span = ts.iter().min().zip(ts.iter().max()).map(|(a, b)| (*a, *b));
        (span, ts.len() == v.len())
    }

    #[test]
    fn dropping_the_first_samples_keeps_the_rest_as_pushed() {
        let cases: Vec<Vec<Sample>> = vec![
            vec![],
            vec![at(Some(5), 1.0)],
            (0..600)
                .map(|i| at(Some(1000 + i * 15), i as f64))
                .collect(),
            // Runs with a gap and a step change, then instants one by one.
            (0..300)
                .map(|i| at(Some(if i < 100 { i * 10 } else { 5000 + i * 7 }), i as f64))
                .collect(),
            (0..300)
                .map(|i| at(Some(i * 1000 + i % 3), -(i as f64)))
                .collect(),
            vec![at(None, 1.0), at(Some(3), 2.0), at(None, 3.0)],
        ];
        for v in cases {
            for k in [
                0, 1, 2, 99, 100, 101, 255, 256, 257, 299, 300, 599, 600, 601,
            ] {
                let mut s = Samples::from(v.clone());
                s.drop_first(k);
                let want: Vec<Sample> = v.iter().skip(k).copied().collect();
                assert_eq!(s.len(), want.len());
                let got = s.to_vec();
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(g.t_ms, w.t_ms, "k {k}, sample {i}");
                    assert_eq!(g.value.to_bits(), w.value.to_bits(), "k {k}, sample {i}");
                }
                // Still a series that grows as pushed.
                s.push(at(Some(1_000_000), 7.0));
                assert_eq!(s.last(), Some(at(Some(1_000_000), 7.0)));
                assert_eq!(s.len(), want.len() + 1);
            }
        }
    }

    /// What [`Samples::is_strictly_increasing`] must say (`None` sorts before any instant).
    fn walked_increasing(v: &[Sample]) -> bool {
        v.windows(2).all(|w| w[0].t_ms < w[1].t_ms)
    }

    proptest::proptest! {
        #[test]
        fn the_time_span_of_runs_is_the_walks(
            times in proptest::collection::vec(
                proptest::option::weighted(0.97, -1_000_000i64..1_000_000), 0..200),
            steady in 0usize..200,
        ) {
            // Mostly steady instants (runs), then whatever came.
            let v: Vec<Sample> = (0..steady)
                .map(|i| at(Some(5_000_000 + 15 * i as i64), 1.0))
                .chain(times.iter().map(|t| at(*t, 2.0)))
                .collect();
            let s = Samples::from(v.clone());
            // Copied from a slice as pushed one by one: the same runs.
            let pushed: Samples = v.iter().copied().collect();
            proptest::prop_assert_eq!(format!("{:?}", s.times), format!("{:?}", pushed.times));
            let steady_only = Samples::from(v[..steady].to_vec());
            let pushed: Samples = v[..steady].iter().copied().collect();
            proptest::prop_assert_eq!(format!("{:?}", steady_only.times), format!("{:?}", pushed.times));
            proptest::prop_assert_eq!(s.time_span(), walked_span(&v));
            proptest::prop_assert_eq!(s.is_strictly_increasing(), walked_increasing(&v));
            // Climbing runs and their joins, where the walk is true.
            let climbing: Vec<Sample> = (0..steady)
                .map(|i| at(Some(15 * i as i64), 1.0))
                .chain((0..steady).map(|i| at(Some(15 * steady as i64 + 7 * i as i64), 1.0)))
                .collect();
            let c = Samples::from(climbing.clone());
            proptest::prop_assert_eq!(c.is_strictly_increasing(), walked_increasing(&climbing));
        }
    }

    /// The arithmetic window of one run must be the binary search's, at and around every edge.
    #[test]
    fn window_by_arithmetic_is_the_binary_search() {
        let huge = i64::MAX / 2 + 1;
        for runs in [
            (0..20)
                .map(|i| at(Some(-50 + i * 15), 0.0))
                .collect::<Samples>(),
            // Instants whose distance from the first exceeds i64.
            (0..3)
                .map(|i| at(Some((i64::MIN + 7).wrapping_add(huge.wrapping_mul(i))), 0.0))
                .collect(),
        ] {
            let mut each = runs.clone();
            each.times = Times::Each(runs.iter().map(|s| s.t_ms).collect());
            let edges = runs.iter().flat_map(|s| {
                let t = s.t_ms.unwrap();
                [t.saturating_sub(1), t, t.saturating_add(1)]
            });
            let probes: Vec<i64> = [i64::MIN, -80, 0, 100, 1000, i64::MAX]
                .into_iter()
                .chain(edges)
                .collect();
            for &after in &probes {
                for &until in &probes {
                    let (a, b) = (runs.window(after, until), each.window(after, until));
                    assert_eq!((a.lo, a.hi), (b.lo, b.hi), "({after}, {until}]");
                }
            }
        }
    }

    /// A slice's values and timestamps read alone are its samples', for slices starting and
    /// ending anywhere around block edges, also after the first samples were dropped.
    #[test]
    fn value_runs_and_times_are_the_slices_samples() {
        let v: Vec<Sample> = (0..700)
            .map(|i| at(Some(1000 + i * 15), i as f64 * 0.5))
            .collect();
        for dropped in [0, 1, 255, 256, 300] {
            let mut s = Samples::from(v.clone());
            s.drop_first(dropped);
            let n = s.len();
            let edges = [0, 1, 254, 255, 256, 257, 511, 512, 513, n - 1, n];
            for &lo in edges.iter().filter(|&&e| e <= n) {
                for &hi in edges.iter().filter(|&&e| e >= lo && e <= n) {
                    let slice = s.slice(lo, hi);
                    let want: Vec<Sample> = slice.iter().collect();
                    let values: Vec<f64> = slice.value_runs().flatten().copied().collect();
                    let times: Vec<Option<i64>> = slice.times().collect();
                    assert_eq!(values, want.iter().map(|x| x.value).collect::<Vec<_>>());
                    assert_eq!(times, want.iter().map(|x| x.t_ms).collect::<Vec<_>>());
                    assert_eq!(want.len(), hi - lo, "dropped {dropped}, {lo}..{hi}");
                }
            }
        }
    }

    #[test]
    fn retain_append_and_stamp() {
        let mut a: Samples = (0..10).map(|i| at(Some(i), i as f64)).collect();
        a.retain(|s| s.value >= 5.0);
        assert_eq!(a.first(), Some(at(Some(5), 5.0)));
        let mut b: Samples = vec![at(None, 1.0)].into();
        a.append(&mut b);
        assert!(b.is_empty());
        assert_eq!(a.last(), Some(at(None, 1.0)));
        a.stamp_untimed(99);
        assert_eq!(a.last(), Some(at(Some(99), 1.0)));
        assert_eq!(a.len(), 6);
    }
}
