//! The raw sample model that every metrics source is reduced to.
//!
//! Exposition files (one scrape, or a recording of many scrapes) and query results all end up as
//! a [`SeriesSet`]: plain series of timestamped floats plus the family types that `# TYPE` lines
//! declared. Keeping this model dumb — no PromQL, no units, no engine knowledge — lets the
//! parser, the windowing functions and the adapters that map engine metrics to signals evolve
//! independently. The one piece of exposition knowledge kept here is [`SeriesSet::family_type`],
//! because the suffix rules (`_total`, `_bucket`, ...) are needed by every consumer.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

pub use super::samples::Samples;

/// Metric type as declared by `# TYPE` (Unknown when undeclared).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum MetricType {
    /// Monotonic counter; samples are `<family>_total` (and `_created`).
    Counter,
    /// Point-in-time value.
    Gauge,
    /// Cumulative histogram: `_bucket{le=..}`, `_sum`, `_count` (and `_created`).
    Histogram,
    /// OpenMetrics gauge histogram: `_bucket{le=..}`, `_gsum`, `_gcount`.
    GaugeHistogram,
    /// Summary: `<family>{quantile=..}`, `_sum`, `_count` (and `_created`).
    Summary,
    /// OpenMetrics info metric: `<family>_info` with value 1.
    Info,
    /// OpenMetrics state set: `<family>{<family>=state}` with 0/1 values.
    StateSet,
    /// Undeclared, or declared `unknown`/`untyped`.
    #[default]
    Unknown,
}

impl MetricType {
    /// Parses the type word of a `# TYPE` line. `untyped` is the Prometheus text format's
    /// spelling of OpenMetrics' `unknown`; both map to [`MetricType::Unknown`]. Case-sensitive,
    /// like Prometheus.
    pub fn from_type_word(word: &str) -> Option<MetricType> {
        Some(match word {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "gaugehistogram" => MetricType::GaugeHistogram,
            "summary" => MetricType::Summary,
            "info" => MetricType::Info,
            "stateset" => MetricType::StateSet,
            "unknown" | "untyped" => MetricType::Unknown,
            _ => return None,
        })
    }

    /// The OpenMetrics spelling of the type, as written in `# TYPE` lines.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::GaugeHistogram => "gaugehistogram",
            MetricType::Summary => "summary",
            MetricType::Info => "info",
            MetricType::StateSet => "stateset",
            MetricType::Unknown => "unknown",
        }
    }

    /// Whether a family of this type exposes samples named `<family><suffix>`. Checking this
    /// stops a gauge `foo` from claiming an unrelated, undeclared `foo_count`.
    fn owns_suffix(self, suffix: &str) -> bool {
        use MetricType::*;
        match suffix {
            "_total" => self == Counter,
            "_created" => matches!(self, Counter | Histogram | Summary | GaugeHistogram),
            "_bucket" => matches!(self, Histogram | GaugeHistogram),
            "_count" | "_sum" => matches!(self, Histogram | Summary),
            "_gcount" | "_gsum" => self == GaugeHistogram,
            "_info" => self == Info,
            _ => false,
        }
    }
}

impl fmt::Display for MetricType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Sample-name suffixes that belong to a family with a shorter name.
const FAMILY_SUFFIXES: [&str; 8] = [
    "_total", "_created", "_bucket", "_count", "_sum", "_gcount", "_gsum", "_info",
];

/// Sorted label pairs (by name), excluding the metric name.
///
/// Labels with empty values are never stored by the parser: Prometheus treats `l=""` as the
/// label being absent, so `x{l=""}` and `x` are the same series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Labels(pub Vec<(String, String)>);

impl Labels {
    /// Builds a label set from pairs in any order, sorting them by name so that equal sets
    /// compare equal. Duplicate names are kept (callers that need uniqueness check first).
    pub fn new(mut pairs: Vec<(String, String)>) -> Labels {
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        Labels(pairs)
    }

    /// The value of label `name`, if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        // A linear scan: label sets are small, and it stays correct for hand-built unsorted sets.
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `(name, value)` pairs in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// The labels as a map (the form live answers and facts use).
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

/// Writes `{a="b",c="d"}` with exposition-style escaping of values; an empty set writes
/// nothing, so `format!("{name}{labels}")` reads like the exposition line (`foo`, not `foo{}`).
impl fmt::Display for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        f.write_str("{")?;
        for (i, (name, value)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{name}=\"")?;
            for c in value.chars() {
                match c {
                    '\\' => f.write_str("\\\\")?,
                    '"' => f.write_str("\\\"")?,
                    '\n' => f.write_str("\\n")?,
                    c => write!(f, "{c}")?,
                }
            }
            f.write_str("\"")?;
        }
        f.write_str("}")
    }
}

/// One observation. `t_ms` is milliseconds since the Unix epoch; `None` when the exposition
/// line carried no timestamp (a live scrape rather than a recording).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sample {
    /// Milliseconds since the Unix epoch, if the source gave one.
    pub t_ms: Option<i64>,
    /// The value as exposed; NaN and ±Inf are kept (the windowing layer skips them).
    pub value: f64,
}

/// All samples of one sample name + label set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    /// The sample name as exposed (e.g. `vllm:num_preemptions_total`), not the family name.
    pub name: String,
    /// The labels without the metric name.
    pub labels: Labels,
    /// Sorted by time (timestamp-less samples first), one sample per timestamp.
    pub samples: Samples,
}

impl Series {
    /// Orders series by name, then labels: the order a [`SeriesSet`] keeps them in.
    pub fn key_cmp(&self, other: &Series) -> Ordering {
        self.name
            .cmp(&other.name)
            .then_with(|| self.labels.cmp(&other.labels))
    }

    /// Bytes that order as [`Series::key_cmp`] does: the name, then each label's name and
    /// value, each ended by a 0 byte, with 0 and 1 inside written as 1 1 and 1 2 (so an end
    /// sorts before any byte of a longer string).
    fn sort_key(&self) -> Vec<u8> {
        let mut key = Vec::with_capacity(self.name.len() + 16 * (self.labels.0.len() + 1));
        let mut put = |text: &str| {
            if text.bytes().all(|b| b > 1) {
                key.extend_from_slice(text.as_bytes());
            } else {
                for b in text.bytes() {
                    match b {
                        0 => key.extend_from_slice(&[1, 1]),
                        1 => key.extend_from_slice(&[1, 2]),
                        b => key.push(b),
                    }
                }
            }
            key.push(0);
        };
        put(&self.name);
        for (name, value) in &self.labels.0 {
            put(name);
            put(value);
        }
        key
    }
}

/// Writes `name{labels}` (just `name` without labels).
impl fmt::Display for Series {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.name, self.labels)
    }
}

/// Everything read from one or more exposition files.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SeriesSet {
    /// Sorted by (name, labels) for determinism; no two series share name and labels.
    pub series: Vec<Series>,
    /// Family name -> declared type, from `# TYPE` lines.
    pub families: BTreeMap<String, MetricType>,
    /// True when there is at least one sample and every sample has a timestamp.
    pub has_timestamps: bool,
    /// Samples dropped because another sample of the same series had the same timestamp and a
    /// different value (the one read later was kept), with the first such place: a file that
    /// repeats itself, or joined files that disagree. Said beside the diagnosis, never silent.
    pub conflicts: Conflicts,
}

/// Disagreeing duplicate samples found while joining series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conflicts {
    /// How many samples were dropped.
    pub count: usize,
    /// The first one: series, timestamp, the dropped and the kept value.
    pub first: Option<String>,
}

impl SeriesSet {
    /// Restores the invariants after series were pushed in any order: series sorted by
    /// (name, labels) with duplicates joined, samples sorted by time with one per timestamp
    /// (the one pushed later wins), and `has_timestamps` recomputed. Public so that callers
    /// building sets by hand (adapters, tests) get the same guarantees as parsed ones.
    pub fn normalize(&mut self) {
        let mut all = std::mem::take(&mut self.series);
        if !all
            .windows(2)
            .all(|w| w[0].key_cmp(&w[1]) == Ordering::Less)
        {
            // Stable, so samples of joined duplicates keep their push order for the dedup below.
            // By a byte key built once per series: comparing names and each label pair took
            // a dozen string comparisons a step, most of the time of joining a fleet's file.
            all.sort_by_cached_key(Series::sort_key);
            let mut joined: Vec<Series> = Vec::with_capacity(all.len());
            for mut s in all {
                match joined.last_mut() {
                    Some(last) if last.name == s.name && last.labels == s.labels => {
                        last.samples.append(&mut s.samples)
                    }
                    _ => joined.push(s),
                }
            }
            all = joined;
        }
        for s in &mut all {
            if let Some((t, dropped, kept, n)) = sort_dedup_samples(&mut s.samples) {
                self.conflicts.count += n;
                self.conflicts.first.get_or_insert_with(|| {
                    format!(
                        "{}{} at {} ms: {dropped} and {kept}",
                        s.name,
                        s.labels,
                        t.map_or("no timestamp".into(), |t| t.to_string())
                    )
                });
            }
        }
        self.series = all;
        self.has_timestamps = self.compute_has_timestamps();
    }

    fn compute_has_timestamps(&self) -> bool {
        let mut any = false;
        for s in &self.series {
            if !s.samples.time_span().1 {
                return false;
            }
            any |= !s.samples.is_empty();
        }
        any
    }

    /// Joins another set (e.g. the next file) into this one: series with the same name and
    /// labels become one, with samples merged by time; on an exact duplicate timestamp the
    /// sample from `other` wins. A family type declared in `other` wins unless it is Unknown.
    pub fn merge(&mut self, other: SeriesSet) {
        self.merge_all([other]);
    }

    /// The family types and conflicts of a set being joined: a declared type wins over
    /// Unknown, the first conflict found stays the first.
    fn join_declarations(
        &mut self,
        families: &BTreeMap<String, MetricType>,
        conflicts: &Conflicts,
    ) {
        for (name, &ty) in families {
            match self.families.get_mut(name) {
                Some(existing) => {
                    if ty != MetricType::Unknown {
                        *existing = ty;
                    }
                }
                None => {
                    self.families.insert(name.clone(), ty);
                }
            }
        }
        self.conflicts.count += conflicts.count;
        if self.conflicts.first.is_none() {
            self.conflicts.first.clone_from(&conflicts.first);
        }
    }

    /// Joins several sets, sorting once: a round of a hundred endpoints is not sorted a hundred
    /// times. The same series, samples and conflict count as merging them one after another;
    /// the conflict named first may be another of them.
    pub fn merge_all(&mut self, others: impl IntoIterator<Item = SeriesSet>) {
        for other in others {
            self.join_declarations(&other.families, &other.conflicts);
            self.series.extend(other.series);
        }
        self.normalize();
    }

    /// [`SeriesSet::merge`] for the next round of a recording: the samples of a series of
    /// `other` that all come after this set's samples of it are copied onto its end (found by
    /// binary search), so a round costs what the round holds, not what the recording holds, and
    /// no name or label is copied again; any other series (new, or overlapping in time) is
    /// joined as `merge` joins it. Gives the same set as `merge(other.clone())`.
    pub fn merge_next(&mut self, other: &SeriesSet) {
        self.join_declarations(&other.families, &other.conflicts);
        let mut rest = Vec::new();
        for s in &other.series {
            match self.series.binary_search_by(|x| x.key_cmp(s)) {
                Ok(i)
                    if self.has_timestamps && comes_after(&self.series[i].samples, &s.samples) =>
                {
                    let kept = &mut self.series[i].samples;
                    for sample in s.samples.iter() {
                        kept.push(sample);
                    }
                }
                _ => rest.push(s.clone()),
            }
        }
        if !rest.is_empty() {
            self.series.extend(rest);
            self.normalize();
        }
    }

    /// The scrape interval: the median distance between samples of the series with the most
    /// samples; None with fewer than two timestamped samples in every series.
    pub fn scrape_interval_ms(&self) -> Option<i64> {
        let series = self.series.iter().max_by_key(|s| s.samples.len())?;
        let times = series.samples.iter().map(|x| x.t_ms);
        let mut gaps: Vec<i64> = times
            .clone()
            .zip(times.skip(1))
            .filter_map(|(a, b)| Some(b? - a?))
            .filter(|g| *g > 0)
            .collect();
        if gaps.is_empty() {
            return None;
        }
        gaps.sort_unstable();
        Some(gaps[gaps.len() / 2])
    }

    /// The newest timestamp of any sample, if any sample has one.
    pub fn newest_ms(&self) -> Option<i64> {
        self.series
            .iter()
            .filter_map(|s| s.samples.last().and_then(|x| x.t_ms))
            .max()
    }

    /// The oldest timestamp of any sample, if any sample has one.
    pub fn oldest_ms(&self) -> Option<i64> {
        self.series
            .iter()
            .filter_map(|s| s.samples.iter().find_map(|x| x.t_ms))
            .min()
    }

    /// Total number of samples over all series.
    pub fn sample_count(&self) -> usize {
        self.series.iter().map(|s| s.samples.len()).sum()
    }

    /// True when there are no samples at all.
    pub fn is_empty(&self) -> bool {
        self.series.iter().all(|s| s.samples.is_empty())
    }

    /// The declared family a sample name belongs to, with its type: an exact family match
    /// first (`# TYPE x_total counter` in the text format, summaries, state sets), then the
    /// family with one suffix stripped when that family's type exposes that suffix
    /// (`vllm:num_preemptions` counter → `vllm:num_preemptions_total`).
    pub fn family_of(&self, sample_name: &str) -> Option<(&str, MetricType)> {
        if let Some((name, ty)) = self.families.get_key_value(sample_name) {
            return Some((name.as_str(), *ty));
        }
        for suffix in FAMILY_SUFFIXES {
            if let Some(base) = sample_name.strip_suffix(suffix) {
                if let Some((name, ty)) = self.families.get_key_value(base) {
                    if ty.owns_suffix(suffix) {
                        return Some((name.as_str(), *ty));
                    }
                }
            }
        }
        None
    }

    /// The type of the family a sample name belongs to (see [`SeriesSet::family_of`]);
    /// Unknown when no declared family claims it.
    pub fn family_type(&self, sample_name: &str) -> MetricType {
        self.family_of(sample_name)
            .map_or(MetricType::Unknown, |(_, ty)| ty)
    }

    /// All series with exactly this sample name, in label order. Binary search on the sorted
    /// vector, so this is cheap enough to call per signal per evaluation.
    pub fn iter_by_name<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s Series> + 's {
        let start = self.series.partition_point(|s| s.name.as_str() < name);
        self.series[start..]
            .iter()
            .take_while(move |s| s.name == name)
    }
}

/// Whether every sample of `next` has a timestamp, they increase, and the first comes after
/// the last of `kept` (whose samples the caller knows to be timestamped): then appending keeps
/// `kept` sorted with one sample per timestamp.
fn comes_after(kept: &Samples, next: &Samples) -> bool {
    let (Some(last), Some(first)) = (kept.last(), next.first()) else {
        return false;
    };
    matches!((last.t_ms, first.t_ms), (Some(l), Some(f)) if f > l)
        && next.time_span().1
        && next.is_strictly_increasing()
}

/// Sorts by time (stable) and keeps one sample per timestamp (the later one). Returns the
/// first disagreement (timestamp, dropped value, kept value) and how many samples disagreed.
fn sort_dedup_samples(samples: &mut Samples) -> Option<(Option<i64>, f64, f64, usize)> {
    if samples.is_strictly_increasing() {
        return None;
    }
    let mut v = samples.to_vec();
    let first = sort_dedup_vec(&mut v);
    *samples = v.into();
    first
}

fn sort_dedup_vec(samples: &mut Vec<Sample>) -> Option<(Option<i64>, f64, f64, usize)> {
    samples.sort_by_key(|s| s.t_ms);
    let mut kept = 0;
    let mut first = None;
    let mut count = 0;
    for read in 0..samples.len() {
        if kept > 0 && samples[kept - 1].t_ms == samples[read].t_ms {
            let (old, new) = (samples[kept - 1].value, samples[read].value);
            // NaN never equals itself: two staleness markers agree.
            if old != new && !(old.is_nan() && new.is_nan()) {
                count += 1;
                first.get_or_insert((samples[read].t_ms, old, new));
            }
            samples[kept - 1] = samples[read];
        } else {
            samples[kept] = samples[read];
            kept += 1;
        }
    }
    samples.truncate(kept);
    first.map(|(t, old, new)| (t, old, new, count))
}

/// Builders for tests elsewhere in the crate.
#[cfg(test)]
pub(crate) mod testutil {
    use super::*;

    /// Labels from pairs.
    pub(crate) fn labels(pairs: &[(&str, &str)]) -> Labels {
        Labels::new(
            pairs
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// A series from a name, label pairs and (time, value) samples.
    pub(crate) fn series(name: &str, l: &[(&str, &str)], samples: &[(Option<i64>, f64)]) -> Series {
        Series {
            name: name.to_string(),
            labels: labels(l),
            samples: samples
                .iter()
                .map(|&(t_ms, value)| Sample { t_ms, value })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::{labels, series};
    use super::*;

    #[test]
    fn labels_sorted_get_and_display() {
        let l = labels(&[("pod", "a"), ("model_name", "m\"x\\y\nz")]);
        assert_eq!(l.0[0].0, "model_name");
        assert_eq!(l.get("pod"), Some("a"));
        assert_eq!(l.get("missing"), None);
        assert_eq!(l.to_string(), r#"{model_name="m\"x\\y\nz",pod="a"}"#);
        assert_eq!(Labels::default().to_string(), "");
        let s = series("vllm:x_total", &[("a", "b")], &[]);
        assert_eq!(s.to_string(), r#"vllm:x_total{a="b"}"#);
    }

    proptest::proptest! {
        /// The byte key orders series as the comparison does, including names and values that
        /// hold the bytes the key uses as ends and escapes, and labels that are prefixes.
        #[test]
        fn the_sort_key_orders_as_key_cmp(
            a_name in "[a\\x00\\x01b]{0,3}",
            b_name in "[a\\x00\\x01b]{0,3}",
            a_labels in proptest::collection::vec(("[a\\x00\\x01]{0,2}", "[a\\x00\\x01]{0,2}"), 0..3),
            b_labels in proptest::collection::vec(("[a\\x00\\x01]{0,2}", "[a\\x00\\x01]{0,2}"), 0..3),
        ) {
            let make = |name: &str, l: &[(String, String)]| Series {
                name: name.to_string(),
                labels: Labels::new(l.to_vec()),
                samples: Samples::default(),
            };
            let (a, b) = (make(&a_name, &a_labels), make(&b_name, &b_labels));
            proptest::prop_assert_eq!(a.sort_key().cmp(&b.sort_key()), a.key_cmp(&b));
        }
    }

    #[test]
    fn metric_type_words_round_trip() {
        for ty in [
            MetricType::Counter,
            MetricType::Gauge,
            MetricType::Histogram,
            MetricType::GaugeHistogram,
            MetricType::Summary,
            MetricType::Info,
            MetricType::StateSet,
            MetricType::Unknown,
        ] {
            assert_eq!(MetricType::from_type_word(ty.as_str()), Some(ty));
        }
        assert_eq!(
            MetricType::from_type_word("untyped"),
            Some(MetricType::Unknown)
        );
        assert_eq!(MetricType::from_type_word("Counter"), None);
    }

    #[test]
    fn family_type_suffix_rules() {
        let mut set = SeriesSet::default();
        let decl = [
            ("vllm:num_preemptions", MetricType::Counter),
            ("vllm:e2e_request_latency_seconds", MetricType::Histogram),
            ("vllm:iteration_tokens_total", MetricType::Histogram),
            ("tgi_request_skipped_tokens", MetricType::Summary),
            ("python_gc_objects_collected_total", MetricType::Counter),
            ("vllm:cache_config", MetricType::Info),
            ("queue_depth", MetricType::Gauge),
            ("gh", MetricType::GaugeHistogram),
        ];
        for (n, t) in decl {
            set.families.insert(n.to_string(), t);
        }
        use MetricType::*;
        let cases = [
            ("vllm:num_preemptions_total", Counter),
            ("vllm:num_preemptions_created", Counter),
            ("vllm:num_preemptions", Counter),
            ("vllm:e2e_request_latency_seconds_bucket", Histogram),
            ("vllm:e2e_request_latency_seconds_sum", Histogram),
            ("vllm:e2e_request_latency_seconds_count", Histogram),
            ("vllm:e2e_request_latency_seconds_created", Histogram),
            ("vllm:iteration_tokens_total_bucket", Histogram),
            ("tgi_request_skipped_tokens", Summary),
            ("tgi_request_skipped_tokens_count", Summary),
            ("tgi_request_skipped_tokens_bucket", Unknown),
            // Text format: the family is declared with the full `_total` name.
            ("python_gc_objects_collected_total", Counter),
            ("vllm:cache_config_info", Info),
            ("queue_depth", Gauge),
            // A gauge owns no suffixed samples.
            ("queue_depth_count", Unknown),
            ("gh_gsum", GaugeHistogram),
            ("gh_bucket", GaugeHistogram),
            ("gh_sum", Unknown),
            ("undeclared_total", Unknown),
        ];
        for (name, want) in cases {
            assert_eq!(set.family_type(name), want, "{name}");
        }
        assert_eq!(
            set.family_of("vllm:num_preemptions_total"),
            Some(("vllm:num_preemptions", Counter))
        );
    }

    /// Name index, label index, samples.
    type Row = (u8, u8, Vec<(Option<i64>, f64)>);

    /// A set from rows, normalized as a parse gives it.
    fn round_set(rows: &[Row]) -> SeriesSet {
        let mut set = SeriesSet {
            series: rows
                .iter()
                .map(|(n, l, samples)| {
                    let value = l.to_string();
                    series(&format!("m{n}"), &[("pod", value.as_str())], samples)
                })
                .collect(),
            families: BTreeMap::from([(format!("m{}", rows.len() % 3), MetricType::Gauge)]),
            ..SeriesSet::default()
        };
        set.normalize();
        set
    }

    #[test]
    fn merge_next_appends_later_rounds_and_joins_the_rest() {
        let mut set = round_set(&[(0, 0, vec![(Some(1000), 1.0)])]);
        set.merge_next(&round_set(&[(0, 0, vec![(Some(2000), 2.0)])]));
        // The same instant again, with another value: the later wins, as in `merge`.
        set.merge_next(&round_set(&[(0, 0, vec![(Some(2000), 3.0)])]));
        let samples = |set: &SeriesSet| -> Vec<_> {
            set.series[0]
                .samples
                .iter()
                .map(|s| (s.t_ms, s.value))
                .collect()
        };
        assert_eq!(samples(&set), [(Some(1000), 1.0), (Some(2000), 3.0)]);
        assert_eq!(set.conflicts.count, 1);
        // A series seen for the first time.
        set.merge_next(&round_set(&[
            (0, 0, vec![(Some(3000), 5.0)]),
            (1, 0, vec![(Some(3000), 4.0)]),
        ]));
        assert_eq!(samples(&set).len(), 3);
        assert_eq!(set.series.len(), 2);
        assert!(set.has_timestamps);
    }

    #[test]
    fn merge_all_is_merging_one_after_another() {
        let sets = [
            round_set(&[
                (0, 0, vec![(Some(1000), 1.0)]),
                (1, 1, vec![(Some(500), 2.0)]),
            ]),
            round_set(&[(0, 0, vec![(Some(1000), 3.0), (Some(2000), 4.0)])]),
            round_set(&[(1, 0, vec![(None, 5.0)])]),
        ];
        let mut one_by_one = SeriesSet::default();
        for s in sets.clone() {
            one_by_one.merge(s);
        }
        let mut at_once = SeriesSet::default();
        at_once.merge_all(sets);
        assert_eq!(at_once, one_by_one);
        assert_eq!(at_once.conflicts.count, 1);
    }

    proptest::proptest! {
        /// `merge_all` keeps what merging one after another keeps, up to which conflict is
        /// named first.
        #[test]
        fn merge_all_is_merge_up_to_the_first_conflict(
            sets in proptest::collection::vec(
                proptest::collection::vec(
                    (0u8..3, 0u8..2, proptest::collection::vec(
                        (proptest::option::weighted(0.9, 0i64..8), -2.0f64..2.0), 0..4)),
                    0..5),
                0..5),
        ) {
            let sets: Vec<SeriesSet> = sets.iter().map(|rows| round_set(rows)).collect();
            let mut one_by_one = SeriesSet::default();
            for s in sets.clone() {
                one_by_one.merge(s);
            }
            let mut at_once = SeriesSet::default();
            at_once.merge_all(sets);
            proptest::prop_assert_eq!(&at_once.series, &one_by_one.series);
            proptest::prop_assert_eq!(&at_once.families, &one_by_one.families);
            proptest::prop_assert_eq!(at_once.has_timestamps, one_by_one.has_timestamps);
            proptest::prop_assert_eq!(at_once.conflicts.count, one_by_one.conflicts.count);
        }
    }

    proptest::proptest! {
        /// Joining a recording's rounds one by one with `merge_next` gives what `merge` gives:
        /// later rounds (appended in place), overlapping and repeated times, untimed samples,
        /// series that appear late.
        #[test]
        fn merge_next_is_merge(
            rounds in proptest::collection::vec(
                proptest::collection::vec(
                    (0u8..2, 0u8..2, proptest::collection::vec(
                        (proptest::option::weighted(0.998, 0i64..40), -2.0f64..2.0), 0..4)),
                    0..6),
                1..8),
            step in 0i64..20,
        ) {
            let (mut by_merge, mut by_next) = (SeriesSet::default(), SeriesSet::default());
            for (k, rows) in rounds.iter().enumerate() {
                // Most rounds come after the one before, as a recording's do.
                let shifted: Vec<_> = rows.iter().map(|(n, l, samples)| {
                    let samples = samples.iter()
                        .map(|&(t, v)| (t.map(|t| t + step * k as i64 * 10), v))
                        .collect();
                    (*n, *l, samples)
                }).collect();
                let round = round_set(&shifted);
                by_merge.merge(round.clone());
                by_next.merge_next(&round);
                proptest::prop_assert_eq!(&by_next, &by_merge);
            }
        }
    }

    #[test]
    fn merge_joins_series_and_later_duplicate_wins() {
        let mut a = SeriesSet {
            series: vec![
                series("b", &[], &[(Some(1000), 1.0), (Some(3000), 3.0)]),
                series("a", &[("x", "1")], &[(Some(1000), 10.0)]),
            ],
            families: BTreeMap::from([("a".to_string(), MetricType::Gauge)]),
            has_timestamps: true,
            conflicts: Default::default(),
        };
        a.normalize();
        assert_eq!(a.series[0].name, "a");
        let b = SeriesSet {
            series: vec![
                series("b", &[], &[(Some(2000), 2.0), (Some(3000), 33.0)]),
                series("c", &[], &[(Some(500), 5.0)]),
            ],
            families: BTreeMap::from([
                ("a".to_string(), MetricType::Unknown),
                ("b".to_string(), MetricType::Counter),
            ]),
            has_timestamps: true,
            conflicts: Default::default(),
        };
        a.merge(b);
        let names: Vec<_> = a.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        let b_samples: Vec<_> = a.series[1]
            .samples
            .iter()
            .map(|s| (s.t_ms.unwrap(), s.value))
            .collect();
        assert_eq!(b_samples, [(1000, 1.0), (2000, 2.0), (3000, 33.0)]);
        assert_eq!(a.families["a"], MetricType::Gauge);
        assert_eq!(a.families["b"], MetricType::Counter);
        assert!(a.has_timestamps);
        assert_eq!(a.newest_ms(), Some(3000));
        assert_eq!(a.oldest_ms(), Some(500));
        assert_eq!(a.sample_count(), 5);

        a.merge(SeriesSet {
            series: vec![series("d", &[], &[(None, 1.0)])],
            ..Default::default()
        });
        assert!(!a.has_timestamps);
        assert_eq!(a.oldest_ms(), Some(500));
    }

    #[test]
    fn empty_set_properties() {
        let set = SeriesSet::default();
        assert!(set.is_empty());
        assert!(!set.has_timestamps);
        assert_eq!(set.newest_ms(), None);
        assert_eq!(set.oldest_ms(), None);
        assert_eq!(set.iter_by_name("x").count(), 0);
    }

    #[test]
    fn iter_by_name_finds_exact_name_only() {
        let mut set = SeriesSet {
            series: vec![
                series("x", &[("a", "2")], &[(None, 1.0)]),
                series("x_total", &[], &[(None, 1.0)]),
                series("w", &[], &[(None, 1.0)]),
                series("x", &[("a", "1")], &[(None, 1.0)]),
                series("y", &[], &[(None, 1.0)]),
            ],
            ..Default::default()
        };
        set.normalize();
        let got: Vec<_> = set.iter_by_name("x").map(|s| s.to_string()).collect();
        assert_eq!(got, [r#"x{a="1"}"#, r#"x{a="2"}"#]);
        assert_eq!(set.iter_by_name("x_tot").count(), 0);
        assert_eq!(set.iter_by_name("z").count(), 0);
    }

    #[test]
    fn timestampless_duplicates_keep_the_later_value() {
        let mut set = SeriesSet {
            series: vec![series("x", &[], &[(None, 1.0), (None, 2.0)])],
            ..Default::default()
        };
        set.normalize();
        assert_eq!(
            set.series[0].samples.to_vec(),
            [Sample {
                t_ms: None,
                value: 2.0
            }]
        );
    }
}
