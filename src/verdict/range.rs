//! A recording over a range, for `postmortem` and `diff`: recorded files streamed keeping only
//! what a diagnosis reads, or a Prometheus API's range answers; and the instants to judge.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::input::InputKind;
use crate::postmortem::Range;
use crate::rules::Rules;
use crate::signal::selector::Selector;
use crate::signal::series::SeriesSet;
use crate::source::file::{requests, ReadOptions, Retention};
use crate::source::live::prometheus::LiveOptions;

/// A recording over a range: the series, notes about how they were read, and the span of every
/// sample read (kept or not).
pub struct Recording {
    /// The series kept.
    pub set: SeriesSet,
    /// The reader's warnings, or the store's notes.
    pub notes: Vec<String>,
    /// Oldest and newest sample read.
    pub span: Option<(i64, i64)>,
    /// Request-record files given beside the recording (gateway logs, engine traces).
    pub request_files: Vec<(PathBuf, requests::RecordKind)>,
}

/// A range asked of a Prometheus-compatible API.
pub struct RangeQuery<'a> {
    /// The URL as given (for messages).
    pub url: &'a str,
    /// How to query it.
    pub live: &'a LiveOptions,
    /// Only these targets.
    pub selector: Option<&'a Selector>,
    /// The range's first and last judged instant, and the resolution asked for.
    pub from_ms: i64,
    /// See `from_ms`.
    pub to_ms: i64,
    /// See `from_ms`.
    pub step_ms: i64,
    /// The window each instant is judged over: read before `from_ms` too.
    pub window_ms: i64,
}

/// The range from a Prometheus-compatible API. The window before the first instant is read
/// too, so the first verdict has a whole window behind it.
pub fn query_prometheus(query: &RangeQuery<'_>, rules: &Rules, quiet: bool) -> Result<Recording> {
    let started = std::time::Instant::now();
    let got = crate::source::live::prometheus::range_from_prometheus(
        rules,
        query.live,
        query.selector,
        query.from_ms - query.window_ms,
        query.to_ms,
        query.step_ms,
    )
    .with_context(|| format!("querying Prometheus at {}", query.url))?;
    if !quiet {
        eprintln!(
            "queried {}: {} range queries in {} ms (slowest {} ms)",
            query.url,
            got.queries,
            started.elapsed().as_millis(),
            got.slowest_query.as_millis()
        );
    }
    let span = got.set.oldest_ms().zip(got.set.newest_ms());
    Ok(Recording {
        set: got.set,
        notes: got.notes,
        span,
        request_files: Vec::new(),
    })
}

/// Recorded files (`-` is standard input), read as [`read_files`] does; an error names
/// standard input as `<stdin>`.
pub fn read_recordings(
    files: &[PathBuf],
    rules: &Rules,
    range: (Option<i64>, Option<i64>),
    window_ms: i64,
) -> Result<Recording> {
    let inputs = super::input::inputs(files)?;
    read_files(&inputs.paths, rules, range, window_ms).map_err(|e| inputs.name_errors(e))
}

/// Recordings, streamed and merged, keeping only the series a diagnosis reads and, with
/// `--from`/`--to`, only the samples of the range and the window before it; snapshots are
/// refused (they hold one window, not a range).
fn read_files(
    files: &[PathBuf],
    rules: &Rules,
    range: (Option<i64>, Option<i64>),
    window_ms: i64,
) -> Result<Recording> {
    let mut request_files = Vec::new();
    let mut metrics = Vec::new();
    for f in files {
        match super::input::kind(f, false)? {
            InputKind::Snapshot => bail!(
                "`{}` is an llm-doctor snapshot: it holds one window, not a range; give the recording it was made from",
                f.display()
            ),
            InputKind::Requests(requests::RecordKind::Mapped) => bail!(
                "`{}` is a JSON request log of no format postmortem knows (nginx's, Envoy's or OTLP traces)",
                f.display()
            ),
            InputKind::Requests(k) => request_files.push((f.clone(), k)),
            InputKind::Metrics => metrics.push(f.clone()),
        }
    }
    if metrics.is_empty() {
        bail!("request records alone have no range to judge: give the recording of the engine's metrics beside them");
    }
    let files = &metrics[..];
    let names = rules.adapters.read_names();
    let retention = match range {
        (None, None) => Retention::All,
        (from, to) => Retention::Range {
            from_ms: from.map_or(i64::MIN, |f| f.saturating_sub(window_ms)),
            to_ms: to.unwrap_or(i64::MAX),
        },
    };
    let opts = ReadOptions {
        retention,
        keep_name: Some(std::sync::Arc::new(move |name: &str| {
            crate::signal::adapter::Adapters::reads(&names, name)
        })),
        ..ReadOptions::default()
    };
    let read = crate::source::file::read_files(files, &opts)?;
    if !read.set.has_timestamps {
        bail!("the input has no timestamps: a postmortem needs a recording over time (`llm-doctor record`), not one page");
    }
    Ok(Recording {
        set: read.set,
        notes: read.warnings,
        span: read.span,
        request_files,
    })
}

/// The judged instants: from the first instant with a whole window of samples behind it (half
/// the recording, when it is shorter than two windows) to the newest sample, at the
/// recording's own interval unless told otherwise. A verdict over a window the recording only
/// partly covers reads rates from two or three samples: noise, not an incident.
pub fn instants(
    set: &SeriesSet,
    span: Option<(i64, i64)>,
    (from, to): (Option<i64>, Option<i64>),
    step: Option<Duration>,
    window_ms: i64,
) -> Result<Range> {
    let Some((oldest, newest)) = span else {
        bail!("the input has no samples");
    };
    let step_ms = match step {
        Some(s) => s.as_millis() as i64,
        None => set.scrape_interval_ms().unwrap_or(15_000),
    };
    let settled = oldest + window_ms.min((newest - oldest) / 2).max(step_ms);
    let from_ms = from.unwrap_or(settled).max(oldest);
    let to_ms = to.unwrap_or(newest).min(newest);
    if to_ms < from_ms {
        bail!(
            "the range {} .. {} holds no sample (the recording runs {} .. {})",
            crate::time::format_time(from.unwrap_or(from_ms)),
            crate::time::format_time(to.unwrap_or(to_ms)),
            crate::time::format_time(oldest),
            crate::time::format_time(newest)
        );
    }
    if let Some(interval) = set.scrape_interval_ms() {
        if window_ms <= interval {
            bail!(
                "--window {} holds at most one sample: the input is scraped every {}; use at least {}",
                crate::time::format_duration(window_ms),
                crate::time::format_duration(interval),
                crate::time::format_duration(2 * interval)
            );
        }
    }
    let steps = (to_ms - from_ms) / step_ms + 1;
    if steps > 200_000 {
        bail!("{steps} steps: raise --step or shorten the range (at most 200,000)");
    }
    Ok(Range {
        from_ms,
        to_ms,
        step_ms,
        window_ms,
    })
}
