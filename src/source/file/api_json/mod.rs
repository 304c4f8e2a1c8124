//! Prometheus HTTP API answers saved to a file (`curl .../api/v1/query_range > answer.json`).
//!
//! `/api/v1/query` and `/api/v1/query_range` answer with
//! `{"status": "success", "data": {"resultType": "matrix", "result": [...]}}`; VictoriaMetrics,
//! Thanos and Mimir answer in the same shape (VictoriaMetrics adds `"isPartial"`). This module
//! turns such an answer into the same [`SeriesSet`] the exposition parser produces, so the rest
//! of the pipeline cannot tell a saved query from a recorded `/metrics` page.
//!
//! What it accepts and why:
//! - `matrix` (`values: [[ts, "v"], ...]`) and `vector` (`value: [ts, "v"]`) results whose series
//!   carry `__name__`. Only raw series can be mapped onto the adapters' metric names, so a result
//!   without a name (the answer to `rate(x[5m])` or `sum by (pod) (x)`) is an error that says
//!   which query to save instead; so are `scalar` and `string` results.
//! - Timestamps are float seconds. They are converted to milliseconds from their shortest
//!   decimal form (the digits the server wrote), not by multiplying the float, so
//!   `1761955800.123` becomes `...123` ms and never `...122`. Sub-millisecond digits are
//!   truncated, as Prometheus does.
//! - Values are strings; `NaN`, `+Inf` and `-Inf` are kept (the windowing layer skips them).
//!   Plain JSON numbers are accepted too.
//! - `"status": "error"` answers become an error quoting `errorType` and `error`.
//! - `warnings` and `infos` (Prometheus) and `"isPartial": true` (VictoriaMetrics) keep the data
//!   and are returned as warnings by [`parse_with_warnings`]: a partial answer may lack series.
//! - Native-histogram samples (`histogram`/`histograms`) are skipped with a warning.
//!
//! The API carries no metric types, so they are inferred from names (see [`infer_families`]):
//! `_total` is a counter, `_bucket` with `le` a histogram (with its `_sum` and `_count`),
//! `_sum`/`_count` beside `quantile` series (or as a pair without buckets) a summary, anything
//! else a gauge. Inferred types are guesses: when this set is merged with an exposition file
//! that declares types, the declared ones should be preferred by the caller.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, Visitor};
use serde::Deserialize;

use crate::signal::series::{Labels, MetricType, Sample, Samples, Series, SeriesSet};

mod numbers;
mod scan;

use numbers::{parse_value, seconds_to_ms};

/// The query to save when an answer is not raw series.
pub const RAW_SERIES_HINT: &str = "llm-doctor needs raw series: query e.g. \
`{__name__=~\"vllm:.*|DCGM_.*|node_cpu_seconds_total\"}[15m]` with /api/v1/query (a matrix of \
raw samples) and save that answer";

/// Why an API answer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ApiJsonError {
    /// Not JSON, or JSON of the wrong shape; serde_json's message has the line and column.
    /// Not marked as the error's source: the message already says it, and a chain would say
    /// it twice.
    #[error("{file}: not a Prometheus API answer: {cause}")]
    Json {
        /// The file.
        file: String,
        /// The parser's error, with line and column.
        cause: serde_json::Error,
    },
    /// The server answered `"status": "error"`.
    #[error("{file}: the query failed on the server ({error_type}): {error}")]
    Server {
        /// The file.
        file: String,
        /// `errorType`, e.g. `bad_data`, `timeout`.
        error_type: String,
        /// `error`, the server's message.
        error: String,
    },
    /// A scalar or string result: there is no series to map onto metrics.
    #[error("{file}: the answer is a {kind}, which cannot be mapped to metrics (it has no metric name or labels); {RAW_SERIES_HINT}")]
    NotSeries {
        /// The file.
        file: String,
        /// `scalar` or `string`.
        kind: &'static str,
    },
    /// Series without `__name__`: the answer to an expression, not raw series.
    #[error("{file}: {count} of the answer's series {verb} no metric name (`__name__`), e.g. `{example}`: this is the result of an expression such as `rate(x[5m])`, not raw series; {RAW_SERIES_HINT}", verb = if *.count == 1 { "has" } else { "have" })]
    NoName {
        /// The file.
        file: String,
        /// How many series lack a name.
        count: usize,
        /// The labels of the first one.
        example: String,
    },
    /// Well-formed JSON whose content cannot be used (bad status, timestamp, no series).
    #[error("{file}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// What is wrong, quoting the input.
        message: String,
    },
}

/// A parsed answer with what the server said about it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    /// The series, with inferred family types.
    pub set: SeriesSet,
    /// Server warnings and infos, partial answers and skipped samples, each prefixed with the
    /// file name. The data is usable, but the reader should see these.
    pub warnings: Vec<String>,
    /// True when the server flagged the answer as partial (VictoriaMetrics `isPartial`).
    pub partial: bool,
}

/// Cheap content check: a JSON object with `"status"` and `"data"`, `"resultType"` or
/// `"errorType"` near its start.
pub fn looks_like(text: &str) -> bool {
    let t = text.trim_start_matches('\u{feff}').trim_start();
    if !t.starts_with('{') {
        return false;
    }
    let head = head(t, 4096);
    head.contains("\"status\"")
        && (head.contains("\"data\"")
            || head.contains("\"resultType\"")
            || head.contains("\"errorType\""))
}

/// The first `max` bytes of `s`, cut at a char boundary.
fn head(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Parses a saved `/api/v1/query` or `/api/v1/query_range` answer into series, dropping the
/// warnings (see [`parse_with_warnings`] to keep them).
pub fn parse(text: &str, file: &str) -> Result<SeriesSet, ApiJsonError> {
    parse_with_warnings(text, file).map(|p| p.set)
}

/// Parses a saved API answer, returning the series and the server's warnings. A large answer
/// is read on every core (see [`parse_in_pieces`]).
pub fn parse_with_warnings(text: &str, file: &str) -> Result<Parsed, ApiJsonError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let threads = match text.len() >= PIECES_FROM_BYTES {
        true => std::thread::available_parallelism().map_or(1, |n| n.get()),
        false => 1,
    };
    if let Some(parsed) = parse_in_runs(text, file, threads, 1) {
        return Ok(parsed);
    }
    parse_whole(text, file)
}

/// [`parse_with_warnings`] on one core, the answer read as one JSON document.
fn parse_whole(text: &str, file: &str) -> Result<Parsed, ApiJsonError> {
    let answer: Answer = serde_json::from_str(text).map_err(|cause| ApiJsonError::Json {
        file: file.to_string(),
        cause,
    })?;
    check_status(&answer, file)?;
    let warnings = server_notes(&answer, file);
    let items = series_items(answer.data, file)?;
    let (series, native_skipped) = to_series(&items, file)?;
    Ok(parsed(
        series,
        native_skipped,
        warnings,
        answer.is_partial,
        file,
    ))
}

/// The series of an answer as a set, families inferred, with what the server said.
fn parsed(
    series: Vec<Series>,
    native_skipped: usize,
    mut warnings: Vec<String>,
    partial: bool,
    file: &str,
) -> Parsed {
    if native_skipped > 0 {
        warnings.push(format!(
            "{file}: native-histogram samples of {native_skipped} series were skipped (only classic `_bucket` series are read)"
        ));
    }
    let mut set = SeriesSet {
        series,
        ..Default::default()
    };
    set.normalize();
    set.families = infer_families(&set);
    Parsed {
        set,
        warnings,
        partial,
    }
}

/// Answers at least this large are read in pieces, one a core: a day of a few replicas is one
/// answer of 100 MB, which a single core read while the other waited.
const PIECES_FROM_BYTES: usize = 8 << 20;

/// Where the next series of a `result` begins. Inside a JSON string a quote is escaped, so a
/// `{` directly followed by a quote and `metric` starts an object; behind `},` it is the next
/// element of the array, as Prometheus, Thanos and VictoriaMetrics write their series.
const NEXT_SERIES: &str = "},{\"metric\":";

/// [`parse_with_warnings`] on `threads` cores: the series of the `result` array cut where one
/// ends and the next begins (see [`NEXT_SERIES`]) into runs of about equal size, each read in
/// place on a thread of its own, the series put back in the answer's order, so the set is the
/// one a whole read gives; the envelope around the array is then read as JSON with the array
/// left empty. None when the answer is anything else than a success with series in that form,
/// or when a run cannot be read: the caller then reads it whole and says exactly what is wrong,
/// where.
fn parse_in_pieces(text: &str, file: &str, threads: usize) -> Option<Parsed> {
    parse_in_runs(text, file, threads, 2)
}

/// [`parse_in_pieces`] in at least `min_runs` runs (one reads a small answer on this thread,
/// its series scanned, not deserialized).
fn parse_in_runs(text: &str, file: &str, threads: usize, min_runs: usize) -> Option<Parsed> {
    // A key: in a string its quotes would be escaped. Only the compact layout servers write
    // (`"data":{"resultType":"matrix","result":[{"metric":...`) is read this way; whether it is
    // the answer's own `data` is checked once the envelope is read, below.
    const RESULT: &str = "\"result\":[";
    let at = text.find(RESULT)?;
    let head = &text[..at];
    if !head.ends_with("\"data\":{\"resultType\":\"matrix\",")
        && !head.ends_with("\"data\":{\"resultType\":\"vector\",")
    {
        return None;
    }
    let open = at + RESULT.len();
    let all = &text[open..];
    if !all.starts_with("{\"metric\":") {
        return None;
    }
    let starts = run_starts(all, threads);
    if starts.len() < min_runs {
        return None;
    }
    let runs: Vec<(&str, bool)> = (0..starts.len())
        .map(|k| match starts.get(k + 1) {
            // Without the comma between two runs.
            Some(&next) => (&all[starts[k]..next - 1], false),
            None => (&all[starts[k]..], true),
        })
        .collect();
    let read: Vec<Option<(Vec<Series>, usize, usize)>> = if let [(run, last)] = runs[..] {
        vec![read_run(run, last, file)]
    } else {
        std::thread::scope(|scope| {
            let reading: Vec<_> = (runs.iter())
                .map(|&(run, last)| scope.spawn(move || read_run(run, last, file)))
                .collect();
            reading
                .into_iter()
                .map(|r| r.join().ok().flatten())
                .collect()
        })
    };
    let mut series = Vec::new();
    let (mut native_skipped, mut close) = (0, open);
    for (k, run) in read.into_iter().enumerate() {
        let (s, n, end) = run?;
        series.extend(s);
        native_skipped += n;
        close = open + starts[k] + end;
    }
    // The envelope, with an empty array where the series were: read as a whole read reads it,
    // and the array must be the answer's own `data.result` (not one under another key).
    let envelope = format!("{}]{}", &text[..open], &text[close + 1..]);
    let answer: Answer = serde_json::from_str(&envelope).ok()?;
    check_status(&answer, file).ok()?;
    let warnings = server_notes(&answer, file);
    match &answer.data {
        Some(Data::Matrix(items) | Data::Vector(items)) if items.is_empty() => {}
        _ => return None,
    }
    let placed: Envelope<ResultAt> = serde_json::from_str(&envelope).ok()?;
    let array = placed.data?.result.get();
    if array.as_ptr() as usize - envelope.as_ptr() as usize != open - 1 {
        return None;
    }
    Some(parsed(
        series,
        native_skipped,
        warnings,
        answer.is_partial,
        file,
    ))
}

/// The read in pieces alone, for tests of real servers' answers (which must take it): None
/// where [`parse_with_warnings`] would read the answer whole.
#[doc(hidden)]
pub fn read_in_pieces(text: &str, file: &str, threads: usize) -> Option<Parsed> {
    parse_in_pieces(text, file, threads)
}

/// For fuzzing: whatever the text, a read in pieces, or scanned in one run, that succeeds
/// gives what serde's whole read gives.
#[doc(hidden)]
pub fn check_pieces_agree(text: &str) {
    for (threads, min_runs) in [(3, 2), (1, 1)] {
        if let Some(pieces) = parse_in_runs(text, "fuzz", threads, min_runs) {
            let whole = parse_whole(text, "fuzz").map(|w| format!("{w:?}"));
            assert_eq!(
                whole.ok(),
                Some(format!("{pieces:?}")),
                "pieces ({threads} threads) and whole differ"
            );
        }
    }
}

/// Where an answer's `data.result` is, as text borrowed from it.
#[derive(Deserialize)]
struct ResultAt<'a> {
    #[serde(borrow)]
    result: &'a serde_json::value::RawValue,
}

/// Where each of up to `n` runs of whole series of `all` (the text after the result array's
/// `[`) begins: the first series boundary past each run's share.
fn run_starts(all: &str, n: usize) -> Vec<usize> {
    let share = all.len() / n.max(1) + 1;
    let mut starts = vec![0];
    while starts.len() < n {
        let mut from = starts[starts.len() - 1] + share;
        if from >= all.len() {
            break;
        }
        while !all.is_char_boundary(from) {
            from += 1;
        }
        match all[from..].find(NEXT_SERIES) {
            // The next series' `{`, past the `},`.
            Some(at) => starts.push(from + at + 2),
            None => break,
        }
    }
    starts
}

/// The series of `run` (`{...},{...}`), each read in place and converted at once, with how
/// many had native-histogram samples and where the run ends: at its end, or for the `last`
/// run at the array's `]`. None when it holds anything else.
fn read_run(run: &str, last: bool, file: &str) -> Option<(Vec<Series>, usize, usize)> {
    let blank = |s: &str| s.len() - s.trim_start_matches([' ', '\t', '\n', '\r']).len();
    let (mut series, mut native_skipped, mut at) = (Vec::new(), 0, 0);
    let mut scratch = Vec::new();
    loop {
        if let Some((s, end)) = scan::series_at(run, at, &mut scratch) {
            series.push(s);
            at = end;
        } else {
            let mut stream = serde_json::Deserializer::from_str(&run[at..]).into_iter::<Item>();
            let item = stream.next()?.ok()?;
            at += stream.byte_offset();
            let (s, n) = to_series(std::slice::from_ref(&item), file).ok()?;
            series.extend(s);
            native_skipped += n;
        }
        at += blank(&run[at..]);
        match run.as_bytes().get(at) {
            Some(b',') => at += 1,
            Some(b']') if last => return Some((series, native_skipped, at)),
            None if !last => return Some((series, native_skipped, at)),
            _ => return None,
        }
    }
}

/// The series of a query answer's `result`, given as its JSON text (a vector's rows or a
/// matrix's series): the live client keeps it unparsed until it knows the result's type.
pub(crate) fn series_of_text(result: &str, file: &str) -> Result<Vec<Series>, ApiJsonError> {
    if let Some(run) = result.strip_prefix('[') {
        if let Some((series, _, end)) = read_run(run, true, file) {
            if run[end + 1..].trim().is_empty() {
                return Ok(series);
            }
        }
    }
    let items: Vec<Item> = serde_json::from_str(result).map_err(|cause| ApiJsonError::Json {
        file: file.to_string(),
        cause,
    })?;
    Ok(to_series(&items, file)?.0)
}

fn invalid(file: &str, message: String) -> ApiJsonError {
    ApiJsonError::Invalid {
        file: file.to_string(),
        message,
    }
}

/// `status` must be `success`; an `error` answer is the server's error.
fn check_status(answer: &Answer, file: &str) -> Result<(), ApiJsonError> {
    match answer.status.as_str() {
        "success" => Ok(()),
        "error" => Err(ApiJsonError::Server {
            file: file.to_string(),
            error_type: answer
                .error_type
                .clone()
                .unwrap_or_else(|| "unknown".to_string()),
            error: answer
                .error
                .clone()
                .unwrap_or_else(|| "(no message given)".to_string()),
        }),
        other => Err(invalid(
            file,
            format!("unexpected `status` `{other}` (expected `success` or `error`)"),
        )),
    }
}

/// `isPartial`, `warnings` and `infos`, in words.
fn server_notes<D>(answer: &Envelope<D>, file: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    if answer.is_partial {
        warnings.push(format!(
            "{file}: the server marked the answer as partial (isPartial: true): some storage nodes did not answer, so series or samples may be missing"
        ));
    }
    for w in &answer.warnings {
        warnings.push(format!("{file}: server warning: {w}"));
    }
    for i in &answer.infos {
        warnings.push(format!("{file}: server info: {i}"));
    }
    warnings
}

/// The series of a matrix or vector answer; scalars, strings and empty answers are errors.
fn series_items(data: Option<Data>, file: &str) -> Result<Vec<Item>, ApiJsonError> {
    let items = items_of(data, file)?;
    if items.is_empty() {
        return Err(invalid(
            file,
            format!("the answer holds no series (the query matched nothing); {RAW_SERIES_HINT}"),
        ));
    }
    Ok(items)
}

/// The rows of a matrix or vector answer, none or many; scalars and strings are errors.
fn items_of(data: Option<Data>, file: &str) -> Result<Vec<Item>, ApiJsonError> {
    let data = data.ok_or_else(|| {
        invalid(
            file,
            "`status` is `success` but there is no `data`".to_string(),
        )
    })?;
    let items = match data {
        Data::Matrix(items) | Data::Vector(items) => items,
        Data::Scalar(_) => {
            return Err(ApiJsonError::NotSeries {
                file: file.to_string(),
                kind: "scalar",
            })
        }
        Data::String(_) => {
            return Err(ApiJsonError::NotSeries {
                file: file.to_string(),
                kind: "string",
            })
        }
    };
    Ok(items)
}

/// One row of an answer the store computed: its labels and its points (ms, value).
pub type Row = (BTreeMap<String, String>, Vec<(i64, f64)>);

/// The rows of a matrix or vector answer as the store computed them, named or not (an
/// aggregation's series carry no `__name__`), and what the server said (as
/// [`parse_with_warnings`] returns it); an answer that matched nothing has no rows. For
/// answers that are not raw series: a top-down postmortem's coarse view.
pub fn rows(text: &str, file: &str) -> Result<(Vec<Row>, Vec<String>), ApiJsonError> {
    let answer: Answer = serde_json::from_str(text).map_err(|cause| ApiJsonError::Json {
        file: file.to_string(),
        cause,
    })?;
    check_status(&answer, file)?;
    let notes = server_notes(&answer, file);
    let rows = (items_of(answer.data, file)?.into_iter())
        .map(|item| {
            let points = (item.values.iter().chain(&item.value))
                .map(|p| match seconds_to_ms(p.0) {
                    Some(t_ms) => Ok((t_ms, p.1 .0)),
                    None => Err(invalid(
                        file,
                        format!("timestamp `{}` is out of range", p.0),
                    )),
                })
                .collect::<Result<_, _>>()?;
            Ok((item.metric, points))
        })
        .collect::<Result<_, _>>()?;
    Ok((rows, notes))
}

/// The items as series, and how many carried native-histogram samples (skipped). Items without
/// a metric name are an error that counts them and shows one.
fn to_series(items: &[Item], file: &str) -> Result<(Vec<Series>, usize), ApiJsonError> {
    let mut unnamed: Vec<&Item> = Vec::new();
    let mut native_skipped = 0usize;
    let mut series = Vec::with_capacity(items.len());
    for item in items {
        let Some(name) = item.metric.get("__name__").filter(|n| !n.is_empty()) else {
            unnamed.push(item);
            continue;
        };
        if item.has_native {
            native_skipped += 1;
        }
        // Prometheus treats an empty label value as the label being absent.
        let labels = Labels::new(
            item.metric
                .iter()
                .filter(|(k, v)| k.as_str() != "__name__" && !v.is_empty())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
        let mut samples = Samples::new();
        for p in item.values.iter().chain(item.value.iter()) {
            let t_ms = seconds_to_ms(p.0).ok_or_else(|| {
                invalid(
                    file,
                    format!("timestamp `{}` of `{name}{labels}` is out of range", p.0),
                )
            })?;
            samples.push(Sample {
                t_ms: Some(t_ms),
                value: p.1 .0,
            });
        }
        if samples.is_empty() && item.has_native {
            continue;
        }
        series.push(Series {
            name: name.clone(),
            labels,
            samples,
        });
    }
    if let Some(first) = unnamed.first() {
        let example = Labels::new(
            first
                .metric
                .iter()
                .filter(|(k, _)| k.as_str() != "__name__")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
        .to_string();
        return Err(ApiJsonError::NoName {
            file: file.to_string(),
            count: unnamed.len(),
            example: if example.is_empty() {
                "{}".to_string()
            } else {
                example
            },
        });
    }
    Ok((series, native_skipped))
}

/// Infers family types from sample names, since API answers carry none:
/// - `x_bucket` series with an `le` label make `x` a histogram (owning `x_sum`, `x_count`);
/// - series named `x` with a `quantile` label, or an `x_sum` + `x_count` pair without buckets,
///   make `x` a summary;
/// - `*_total` is a counter (declared under its full name, as the text format does);
/// - everything else is a gauge (including `_created` and `_info` series).
pub fn infer_families(set: &SeriesSet) -> BTreeMap<String, MetricType> {
    let names: BTreeSet<&str> = set.series.iter().map(|s| s.name.as_str()).collect();
    let mut histograms: BTreeSet<&str> = BTreeSet::new();
    let mut summaries: BTreeSet<&str> = BTreeSet::new();
    for s in &set.series {
        if let Some(base) = s.name.strip_suffix("_bucket") {
            if s.labels.get("le").is_some() {
                histograms.insert(base);
            }
        }
        if s.labels.get("quantile").is_some() {
            summaries.insert(s.name.as_str());
        }
    }
    for name in &names {
        if let Some(base) = name.strip_suffix("_sum") {
            if !histograms.contains(base) && names.contains(format!("{base}_count").as_str()) {
                summaries.insert(base);
            }
        }
    }
    let mut families = BTreeMap::new();
    for name in names {
        let part_of = |bases: &BTreeSet<&str>| {
            ["_bucket", "_sum", "_count", "_created"]
                .iter()
                .any(|suffix| {
                    name.strip_suffix(suffix)
                        .is_some_and(|base| bases.contains(base))
                })
        };
        if part_of(&histograms) {
            continue;
        }
        if summaries.contains(name) || part_of(&summaries) {
            continue;
        }
        let ty = if name.ends_with("_total") {
            MetricType::Counter
        } else {
            MetricType::Gauge
        };
        families.insert(name.to_string(), ty);
    }
    for base in histograms {
        families.insert(base.to_string(), MetricType::Histogram);
    }
    for base in summaries {
        families
            .entry(base.to_string())
            .or_insert(MetricType::Summary);
    }
    families
}

// ----- the answer as JSON -----

/// The envelope of a Prometheus HTTP API answer (VictoriaMetrics adds `isPartial`), shared with
/// the live client, which reads the same envelope around its own `data`.
#[derive(Debug, Deserialize)]
pub(crate) struct Envelope<D> {
    pub(crate) status: String,
    #[serde(default = "none")]
    pub(crate) data: Option<D>,
    #[serde(default, rename = "errorType")]
    pub(crate) error_type: Option<String>,
    #[serde(default)]
    pub(crate) error: Option<String>,
    #[serde(default)]
    pub(crate) warnings: Vec<String>,
    #[serde(default)]
    pub(crate) infos: Vec<String>,
    #[serde(default, rename = "isPartial")]
    pub(crate) is_partial: bool,
}

fn none<D>() -> Option<D> {
    None
}

type Answer = Envelope<Data>;

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum Data {
    Matrix(Vec<Item>),
    Vector(Vec<Item>),
    Scalar(IgnoredAny),
    String(IgnoredAny),
}

struct Item {
    metric: BTreeMap<String, String>,
    values: Vec<Point>,
    value: Option<Point>,
    has_native: bool,
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Written out so that native-histogram fields are noticed while other unknown fields
        // (a future server's additions) are ignored.
        #[derive(Deserialize)]
        struct Raw {
            #[serde(default)]
            metric: BTreeMap<String, String>,
            #[serde(default)]
            values: Vec<Point>,
            #[serde(default)]
            value: Option<Point>,
            #[serde(default)]
            histogram: Option<IgnoredAny>,
            #[serde(default)]
            histograms: Option<IgnoredAny>,
        }
        let raw = Raw::deserialize(d)?;
        Ok(Item {
            metric: raw.metric,
            values: raw.values,
            value: raw.value,
            has_native: raw.histogram.is_some() || raw.histograms.is_some(),
        })
    }
}

/// `[unix_seconds, "value"]`.
#[derive(Deserialize)]
struct Point(f64, SampleValue);

/// A sample value: a string as Prometheus writes it (`"1.5"`, `"NaN"`, `"+Inf"`), or a number.
struct SampleValue(f64);

impl<'de> Deserialize<'de> for SampleValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SampleValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sample value such as \"1.5\", \"NaN\" or \"+Inf\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<SampleValue, E> {
                parse_value(s)
                    .map(SampleValue)
                    .ok_or_else(|| E::custom(format!("invalid sample value `{s}`: expected a number such as \"1.5\", \"NaN\", \"+Inf\" or \"-Inf\"")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<SampleValue, E> {
                Ok(SampleValue(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SampleValue, E> {
                Ok(SampleValue(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SampleValue, E> {
                Ok(SampleValue(v as f64))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(results: &str) -> String {
        format!(r#"{{"status":"success","data":{{"resultType":"matrix","result":[{results}]}}}}"#)
    }

    /// `n` series as Prometheus writes them: counters, NaN and infinite values, a label with
    /// text that looks like JSON, non-ASCII values, one series with native-histogram samples.
    fn many_series(n: usize) -> String {
        let rows: Vec<String> = (0..n)
            .map(|i| {
                let odd = match i % 5 {
                    0 => r#"},{\"metric\":"#.to_string(),
                    1 => "héllo ✓".to_string(),
                    _ => format!("pod-{i}"),
                };
                let values: Vec<String> = (0..4)
                    .map(|k| {
                        let v = match (i + k) % 7 {
                            0 => "NaN".to_string(),
                            1 => "+Inf".to_string(),
                            v => format!("{}.5", v * i),
                        };
                        format!(r#"[{}.{k},"{v}"]"#, 1_761_955_800 + k * 15)
                    })
                    .collect();
                let native = if i == 3 {
                    r#","histograms":[[1761955800,{"count":"1","sum":"1"}]]"#
                } else {
                    ""
                };
                format!(
                    r#"{{"metric":{{"__name__":"m{}_total","pod":"{odd}","i":"{i}"}},"values":[{}]{native}}}"#,
                    i % 3,
                    values.join(",")
                )
            })
            .collect();
        matrix(&rows.join(","))
    }

    #[test]
    fn an_answer_read_in_pieces_is_the_answer_read_whole() {
        let text = many_series(200);
        // What servers write around the series: warnings and infos after them
        // (Prometheus), isPartial and stats around them (VictoriaMetrics).
        let around = [
            text.clone(),
            format!(
                r#"{},"warnings":["w \"result\":["],"infos":["i"]}}"#,
                &text[..text.len() - 1]
            ),
            text.replacen(
                r#""status":"success","#,
                r#""status":"success","isPartial":true,"#,
                1,
            )
            .replacen("]}}", r#"]},"stats":{"seriesFetched":"200"}}"#, 1),
        ];
        assert_eq!(parse_whole(&around[1], "f").unwrap().warnings.len(), 3);
        assert!(parse_whole(&around[2], "f").unwrap().partial);
        for text in &around {
            let whole = parse_whole(text, "f").unwrap();
            assert_eq!(whole.set.series.len(), 200);
            assert!(whole
                .warnings
                .iter()
                .any(|w| w.contains("native-histogram")));
            for threads in [2, 3, 7, 64, 1000] {
                let pieces = parse_in_pieces(text, "f", threads).expect("read in pieces");
                // As text: NaN is no value's equal, its own included.
                assert_eq!(
                    format!("{pieces:?}"),
                    format!("{whole:?}"),
                    "{threads} threads"
                );
            }
        }
    }

    #[test]
    fn series_are_cut_between_series_only() {
        let text = many_series(50);
        let open = text.find(r#""result":["#).unwrap() + 10;
        let all = &text[open..];
        for n in [1, 2, 5, 49, 50, 200] {
            let starts = run_starts(all, n);
            assert!(!starts.is_empty() && starts.len() <= n, "{n}: {starts:?}");
            let mut count = 0;
            for (k, &from) in starts.iter().enumerate() {
                let (run, last) = match starts.get(k + 1) {
                    Some(&next) => (&all[from..next - 1], false),
                    None => (&all[from..], true),
                };
                let (series, _, end) = read_run(run, last, "f").expect("whole series");
                count += series.len();
                assert_eq!(&run[end..], if last { "]}}" } else { "" });
            }
            assert_eq!(count, 50, "{n} runs");
        }
    }

    /// Anything but series in Prometheus' compact form is read whole, where errors name
    /// their line and column in the answer itself.
    #[test]
    fn an_answer_that_cannot_be_cut_is_read_whole() {
        let pretty = serde_json::to_string_pretty(
            &serde_json::from_str::<serde_json::Value>(&many_series(20)).unwrap(),
        )
        .unwrap();
        assert!(
            parse_in_pieces(&pretty, "f", 4).is_none(),
            "no compact boundary"
        );
        let broken = many_series(20).replace(r#""i":"17"}"#, r#""i":"17"]"#);
        assert!(
            parse_in_pieces(&broken, "f", 4).is_none(),
            "a piece is not JSON"
        );
        let unnamed = many_series(20).replace(r#""__name__":"m1_total","#, "");
        assert!(
            parse_in_pieces(&unnamed, "f", 4).is_none(),
            "a piece has unnamed series"
        );
        let error = r#"{"status":"error","errorType":"bad_data","error":"x","data":{"resultType":"matrix","result":[{"metric":{"__name__":"a"},"values":[]},{"metric":{"__name__":"b"},"values":[]}]}}"#;
        assert!(parse_in_pieces(error, "f", 4).is_none());
        let elsewhere = matrix("").replacen(
            r#""status":"success","#,
            r#""status":"success","x":{"result":[{"metric":{"__name__":"a"},"values":[]},{"metric":{"__name__":"b"},"values":[]}]},"#,
            1,
        );
        assert!(
            parse_whole(&elsewhere, "f").is_err(),
            "the data's result is empty"
        );
        assert!(
            parse_in_pieces(&elsewhere, "f", 4).is_none(),
            "not the data's result"
        );
        // The servers' layout under another key, before an answer whose own result is empty.
        let series = r#"[{"metric":{"__name__":"a"},"values":[]},{"metric":{"__name__":"b"},"values":[]},{"metric":{"__name__":"c"},"values":[]}]"#;
        for key in [
            format!(r#""x":{{"data":{{"resultType":"matrix","result":{series}}}}}"#),
            format!(r#""x\"data":{{"resultType":"matrix","result":{series}}}"#),
        ] {
            let nested = matrix("").replacen(
                r#""status":"success","#,
                &format!(r#""status":"success",{key},"#),
                1,
            );
            assert!(parse_whole(&nested, "f").is_err(), "{nested}");
            for threads in [2, 3, 4] {
                assert!(parse_in_pieces(&nested, "f", threads).is_none(), "{nested}");
            }
        }
        assert!(parse_in_pieces(error, "f", 4).is_none());
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}"#;
        assert!(parse_in_pieces(scalar, "f", 4).is_none());
    }

    /// Past the size read in pieces, what is wrong is said as a whole read says it: every
    /// unnamed series counted, not a piece's.
    #[test]
    fn a_large_answer_fails_as_a_whole_one_does() {
        let mut n = 2000;
        let text = loop {
            let text = many_series(n).replace(r#""__name__":"m1_total","#, "");
            if text.len() >= PIECES_FROM_BYTES {
                break text;
            }
            n *= 2;
        };
        let err = parse_with_warnings(&text, "f").unwrap_err().to_string();
        let unnamed = (0..n).filter(|i| i % 3 == 1).count();
        assert!(
            err.contains(&format!(
                "{unnamed} of the answer's series have no metric name"
            )),
            "{err}"
        );
        let good = many_series(n);
        let pieces = parse_with_warnings(&good, "f").unwrap();
        assert_eq!(pieces.set.series.len(), n);
    }

    #[test]
    fn detects_api_answers_by_content() {
        assert!(looks_like(&matrix("")));
        assert!(looks_like(
            " \n{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"x\"}"
        ));
        assert!(!looks_like("# TYPE x counter\nx_total 1\n"));
        assert!(!looks_like("{\"llm_doctor\": \"snapshot/v1\"}"));
        assert!(!looks_like(""));
    }

    #[test]
    fn matrix_series_with_exact_millisecond_timestamps() {
        let text = matrix(
            r#"{"metric":{"__name__":"vllm:num_requests_waiting","pod":"p","model_name":"m","empty":""},
                "values":[[1761955800.123,"1"],[1761955815,"NaN"],[1761955830.5,"+Inf"],[1761955845.001,"-Inf"]]}"#,
        );
        let set = parse(&text, "a.json").unwrap();
        assert_eq!(set.series.len(), 1);
        let s = &set.series[0];
        assert_eq!(s.name, "vllm:num_requests_waiting");
        assert_eq!(s.labels.to_string(), r#"{model_name="m",pod="p"}"#);
        let ts: Vec<i64> = s.samples.iter().map(|x| x.t_ms.unwrap()).collect();
        assert_eq!(
            ts,
            [1761955800123, 1761955815000, 1761955830500, 1761955845001]
        );
        assert_eq!(s.samples.to_vec()[0].value, 1.0);
        assert!(s.samples.to_vec()[1].value.is_nan());
        assert_eq!(s.samples.to_vec()[2].value, f64::INFINITY);
        assert_eq!(s.samples.to_vec()[3].value, f64::NEG_INFINITY);
        assert!(set.has_timestamps);
        assert_eq!(set.families["vllm:num_requests_waiting"], MetricType::Gauge);
    }

    #[test]
    fn timestamp_conversion_is_exact_for_millisecond_values() {
        for ms in [
            0i64,
            1,
            999,
            1_761_955_800_123,
            1_761_955_800_001,
            4_102_444_799_999,
        ] {
            let secs: f64 = format!("{}.{:03}", ms / 1000, ms % 1000).parse().unwrap();
            assert_eq!(seconds_to_ms(secs), Some(ms), "{secs}");
        }
        assert_eq!(seconds_to_ms(1.5e9), Some(1_500_000_000_000));
        assert_eq!(seconds_to_ms(f64::NAN), None);
        assert_eq!(seconds_to_ms(1e300), None);
    }

    #[test]
    fn whole_seconds_convert_as_their_decimal_text_does() {
        for secs in [
            0.0,
            1.0,
            -1.0,
            1_796_083_215.0,
            -1_796_083_215.0,
            9.1e15,
            9.3e15,
            1e300,
        ] {
            assert_eq!(
                seconds_to_ms(secs),
                crate::time::seconds_to_ms(&format!("{secs}")),
                "{secs}"
            );
        }
    }

    #[test]
    fn timestamps_read_from_json_text_are_exact() {
        // A cheap LCG: many millisecond timestamps across several decades.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let ms = (x >> 20) as i64 % 4_000_000_000_000;
            let text = format!("{}.{:03}", ms / 1000, ms % 1000);
            let secs: f64 = serde_json::from_str(&text).unwrap();
            assert_eq!(seconds_to_ms(secs), Some(ms), "{text}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, failure_persistence: None, ..Default::default() })]
        #[test]
        fn never_panics(text in "\\PC{0,200}") {
            let _ = parse(&text, "p.json");
        }

        #[test]
        fn never_panics_on_answer_like_text(cut in 0usize..400, junk in "[\\[\\]{}\",:0-9a-zA-Z_. +-]{0,12}") {
            let base = matrix(r#"{"metric":{"__name__":"x","a":"b"},"values":[[1.5,"1"],[2,"NaN"]]}"#);
            let cut = cut.min(base.len());
            let text = format!("{}{junk}{}", &base[..cut], &base[cut..]);
            let _ = parse_with_warnings(&text, "p.json");
        }

        /// The scanned read and serde's agree on every answer: the same series, or both an
        /// error. Junk inserted anywhere makes answers the scanner must give up on.
        #[test]
        fn scanned_answers_read_as_serde_reads_them(
            rows in proptest::collection::vec(answer_row(), 0..4),
            junk_at in proptest::option::weighted(0.2, (0usize..600, "[\\[\\]{}\",:0-9a-z. ]{1,3}")),
        ) {
            let mut text = matrix(&rows.join(","));
            if let Some((at, junk)) = junk_at {
                let at = (0..=at.min(text.len())).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
                text.insert_str(at, &junk);
            }
            let scanned = parse_with_warnings(&text, "p.json").map(|p| format!("{p:?}"));
            let whole = parse_whole(&text, "p.json").map(|p| format!("{p:?}"));
            match (scanned, whole) {
                (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a, b),
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a.to_string(), b.to_string()),
                (a, b) => proptest::prop_assert!(false, "scanned {a:?}, serde {b:?}, for {text}"),
            }
        }
    }

    /// One series of a matrix as a server might write it, now and then with what only serde
    /// reads (escapes, other keys, numbers as values, no name, a repeated label, a timestamp
    /// out of range).
    fn answer_row() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let name = prop_oneof![9 => "[a-z_:]{1,4}".prop_map(Some), 1 => Just(None)];
        let label_value = prop_oneof![9 => "[a-z0-9 ✓:]{0,4}", 1 => "[a-z\"\\\\\n]{0,4}"];
        let labels = prop::collection::vec(
            (
                prop::sample::select(vec!["pod", "a", "le", "B", "a_b", "pod"]),
                label_value,
            ),
            0..4,
        );
        let time = prop_oneof![
            12 => (1_700_000_000u64..1_800_000_000).prop_map(|t| t.to_string()),
            4 => (1_700_000_000u64..1_800_000_000, 1u32..1000).prop_map(|(t, f)| format!("{t}.{f}")),
            1 => prop::sample::select(vec!["0", "-15", "1.5e3", "1e300", "17960832070000000", "1.0001e9",
                "0123", "00", "999999999999999", "1000000000000000", "1796083207 ", "1796083207e0"])
                .prop_map(str::to_string),
        ];
        let value = prop_oneof![
            12 => any::<f64>().prop_map(|v| format!("\"{v}\"")),
            4 => (0u32..100_000).prop_map(|v| format!("\"{v}\"")),
            2 => prop::sample::select(vec!["\"NaN\"", "\"+Inf\"", "\"-Inf\"", "\"1e-7\"", "3", "2.5", "-1e2"])
                .prop_map(str::to_string),
            1 => prop::sample::select(vec!["\" 2\"", "\"x\"", "\"\"", "\"1\\u0030\"", "null",
                "\"0123\"", "\"0\"", "\"999999999999999\"", "\"1000000000000000\"", "\"12\n\"", "\"7 \""])
                .prop_map(str::to_string),
        ];
        let point = (time, value).prop_map(|(t, v)| format!("[{t},{v}]"));
        let shape = prop_oneof![
            12 => Just("values"), 2 => Just("value"), 1 => Just("both"), 1 => Just("histogram"),
            1 => Just("other"), 1 => Just("twice"),
        ];
        (
            name,
            labels,
            prop::collection::vec(point, 0..6),
            shape,
            any::<bool>(),
        )
            .prop_map(|(name, labels, points, shape, spaced)| {
                let quoted = |t: &str| serde_json::to_string(t).unwrap();
                let metric: Vec<String> = (name.iter().map(|n| ("__name__", n.as_str())))
                    .chain(labels.iter().map(|(k, v)| (*k, v.as_str())))
                    .map(|(k, v)| format!("{}:{}", quoted(k), quoted(v)))
                    .collect();
                let values = format!("[{}]", points.join(","));
                let one = points
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "[1,\"1\"]".to_string());
                let body = match shape {
                    "values" => format!("\"values\":{values}"),
                    "value" => format!("\"value\":{one}"),
                    "both" => format!("\"value\":{one},\"values\":{values}"),
                    "histogram" => {
                        format!("\"values\":{values},\"histograms\":[[1,{{\"count\":\"1\"}}]]")
                    }
                    "twice" => format!("\"values\":{values},\"values\":{values}"),
                    _ => format!("\"values\":{values},\"stats\":{{}}"),
                };
                let row = format!("{{\"metric\":{{{}}},{body}}}", metric.join(","));
                if spaced {
                    row.replace(',', " ,\n ").replace(':', ": ")
                } else {
                    row
                }
            })
    }

    #[test]
    fn rows_of_computed_answers_need_no_name() {
        let text = r#"{"status":"success","isPartial":true,"data":{"resultType":"matrix","result":[
            {"metric":{"instance":"a:1"},"values":[[1796083500,"1"],[1796083800.5,"NaN"]]},
            {"metric":{},"values":[]}]},"warnings":["w"]}"#;
        let (read, notes) = rows(text, "u").unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].0.get("instance").map(String::as_str), Some("a:1"));
        assert_eq!(read[0].1[0], (1_796_083_500_000, 1.0));
        assert_eq!(read[0].1[1].0, 1_796_083_800_500);
        assert!(read[0].1[1].1.is_nan());
        assert!(read[1].0.is_empty() && read[1].1.is_empty());
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[1].starts_with("u: server warning: w"), "{notes:?}");

        let empty = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert!(rows(empty, "u").unwrap().0.is_empty());
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#;
        assert!(matches!(
            rows(scalar, "u"),
            Err(ApiJsonError::NotSeries { .. })
        ));
        let far = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1e300,"1"]]}]}}"#;
        let e = rows(far, "u").unwrap_err().to_string();
        assert!(e.contains("out of range"), "{e}");
        let bad = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"x"]]}]}}"#;
        assert!(rows(bad, "u").is_err());
    }

    #[test]
    fn sample_value_spellings() {
        for (s, want) in [
            ("1.5", 1.5),
            ("-2", -2.0),
            ("1e3", 1000.0),
            ("+Inf", f64::INFINITY),
            ("-Inf", f64::NEG_INFINITY),
            ("inf", f64::INFINITY),
        ] {
            assert_eq!(parse_value(s), Some(want), "{s}");
        }
        assert!(parse_value("NaN").unwrap().is_nan());
        for bad in ["", "abc", "--1", "1,5", "+-1"] {
            assert_eq!(parse_value(bad), None, "{bad}");
        }
        // Whole counts take their own path: the same float as Rust's parser, at every length
        // around where that path stops (15 digits) and with leading zeros.
        for s in [
            "0",
            "007",
            "123456789012345",
            "999999999999999",
            "1234567890123456",
            "9007199254740993",
        ] {
            assert_eq!(parse_value(s), s.parse::<f64>().ok(), "{s}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_count_reads_as_rusts_parser_reads_it(n: u64, zeros in 0usize..3) {
            let s = format!("{}{n}", "0".repeat(zeros));
            proptest::prop_assert_eq!(parse_value(&s), s.parse::<f64>().ok());
        }
    }

    #[test]
    fn types_are_inferred_from_names() {
        let text = matrix(
            r#"{"metric":{"__name__":"vllm:num_preemptions_total"},"values":[[1,"1"]]},
               {"metric":{"__name__":"vllm:num_preemptions_created"},"values":[[1,"1"]]},
               {"metric":{"__name__":"vllm:e2e_request_latency_seconds_bucket","le":"+Inf"},"values":[[1,"1"]]},
               {"metric":{"__name__":"vllm:e2e_request_latency_seconds_sum"},"values":[[1,"1"]]},
               {"metric":{"__name__":"vllm:e2e_request_latency_seconds_count"},"values":[[1,"1"]]},
               {"metric":{"__name__":"go_gc_duration_seconds","quantile":"0.5"},"values":[[1,"1"]]},
               {"metric":{"__name__":"go_gc_duration_seconds_sum"},"values":[[1,"1"]]},
               {"metric":{"__name__":"go_gc_duration_seconds_count"},"values":[[1,"1"]]},
               {"metric":{"__name__":"rpc_seconds_sum"},"values":[[1,"1"]]},
               {"metric":{"__name__":"rpc_seconds_count"},"values":[[1,"1"]]},
               {"metric":{"__name__":"lonely_count"},"values":[[1,"1"]]},
               {"metric":{"__name__":"odd_bucket"},"values":[[1,"1"]]},
               {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"0"},"values":[[1,"1"]]}"#,
        );
        let set = parse(&text, "t.json").unwrap();
        use MetricType::*;
        for (name, want) in [
            ("vllm:num_preemptions_total", Counter),
            ("vllm:num_preemptions_created", Gauge),
            ("vllm:e2e_request_latency_seconds_bucket", Histogram),
            ("vllm:e2e_request_latency_seconds_sum", Histogram),
            ("vllm:e2e_request_latency_seconds_count", Histogram),
            ("go_gc_duration_seconds", Summary),
            ("go_gc_duration_seconds_sum", Summary),
            ("go_gc_duration_seconds_count", Summary),
            ("rpc_seconds_sum", Summary),
            ("rpc_seconds_count", Summary),
            ("lonely_count", Gauge),
            ("odd_bucket", Gauge),
            ("DCGM_FI_DEV_GPU_UTIL", Gauge),
        ] {
            assert_eq!(set.family_type(name), want, "{name}");
        }
    }

    #[test]
    fn vector_answers_have_one_sample_per_series() {
        let text = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"up","job":"b"},"value":[1761955800,"1"]},
            {"metric":{"__name__":"up","job":"a"},"value":[1761955800,"0"]}]}}"#;
        let set = parse(text, "v.json").unwrap();
        let got: Vec<String> = set.series.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, [r#"up{job="a"}"#, r#"up{job="b"}"#]);
        assert_eq!(set.series[0].samples.to_vec()[0].value, 0.0);
        assert_eq!(set.newest_ms(), Some(1_761_955_800_000));
    }

    #[test]
    fn errors_name_the_file_and_say_what_to_do() {
        let err = |text: &str| parse(text, "q.json").unwrap_err().to_string();
        let e = err(r#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#);
        assert!(e.starts_with("q.json: "), "{e}");
        assert!(
            e.contains("bad_data") && e.contains("parse error at char 5"),
            "{e}"
        );

        let e = err(&matrix(r#"{"metric":{"pod":"p"},"values":[[1,"1"]]}"#));
        assert!(
            e.contains("no metric name") && e.contains(r#"{pod="p"}"#),
            "{e}"
        );
        assert!(e.contains(r#"{__name__=~"vllm:.*|DCGM_.*|node_cpu_seconds_total"}[15m]"#));

        let e = err(r#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#);
        assert!(
            e.contains("scalar") && e.contains("cannot be mapped to metrics"),
            "{e}"
        );
        let e = err(r#"{"status":"success","data":{"resultType":"string","result":[1,"x"]}}"#);
        assert!(e.contains("string"), "{e}");

        let e =
            err("{\"status\":\"success\",\n \"data\": {\"resultType\": \"matrix\", \"result\": [}");
        assert!(e.contains("line 2 column"), "{e}");

        let e = err(&matrix(
            r#"{"metric":{"__name__":"x"},"values":[[1,"one"]]}"#,
        ));
        assert!(
            e.contains("invalid sample value `one`") && e.contains("line 1"),
            "{e}"
        );

        let e = err(&matrix(""));
        assert!(e.contains("no series"), "{e}");
        let e = err(r#"{"status":"weird","data":null}"#);
        assert!(e.contains("`weird`"), "{e}");
        let e = err(r#"{"status":"success"}"#);
        assert!(e.contains("no `data`"), "{e}");
        let e = err(r#"{"status":"success","data":{"resultType":"table","result":[]}}"#);
        assert!(e.contains("table"), "{e}");
        let e = err("[]");
        assert!(e.starts_with("q.json: "), "{e}");
    }

    #[test]
    fn warnings_partial_answers_and_native_histograms() {
        let text = r#"{"status":"success","isPartial":true,"warnings":["w1"],"infos":["i1"],
            "data":{"resultType":"matrix","result":[
              {"metric":{"__name__":"x"},"values":[[1,"1"]]},
              {"metric":{"__name__":"h"},"histograms":[[1,{"count":"1","sum":"1"}]]}]},
            "stats":{"seriesFetched":"2"}}"#;
        let p = parse_with_warnings(text, "vm.json").unwrap();
        assert!(p.partial);
        assert_eq!(p.warnings.len(), 4, "{:?}", p.warnings);
        assert!(p.warnings[0].contains("partial"));
        assert!(p.warnings[1].ends_with("server warning: w1"));
        assert!(p.warnings[2].ends_with("server info: i1"));
        assert!(p.warnings[3].contains("native-histogram"));
        // A byte-order mark (Windows editors) is not an error.
        assert!(parse(
            &format!(
                "\u{feff}{}",
                matrix(r#"{"metric":{"__name__":"x"},"values":[[1,"1"]]}"#)
            ),
            "b.json"
        )
        .is_ok());
        assert_eq!(p.set.series.len(), 1);
        assert_eq!(p.set.sample_count(), 1);
    }
}
