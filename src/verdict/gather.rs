//! Gathering one window: the recorded files (snapshots come prepared, the rest are streamed as
//! series), then the scrapes with the GPUs sampled beside them, then a Prometheus API; the
//! series are split into prepared targets. A source that fails becomes an error beside the
//! targets, not an abort, unless nothing at all could be read.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::input::InputKind;
use crate::prepared::{Options, Prepared};
use crate::rules::Rules;
use crate::signal::series::SeriesSet;
use crate::source::file::stream::TargetLimit;
use crate::source::file::{read_text, requests, snapshot, ReadOptions, Retention};
use crate::source::live::prometheus::LiveOptions;
use crate::source::live::{nvml, scrape};

/// What to read for one window.
pub struct Sources<'a> {
    /// Recorded metrics or snapshots; `-` is standard input.
    pub files: &'a [PathBuf],
    /// /metrics endpoints, scraped twice `interval` apart.
    pub scrape: &'a [String],
    /// Time between the two scrapes.
    pub interval: Duration,
    /// How to scrape.
    pub scrape_options: scrape::ScrapeOptions,
    /// The local GPUs through NVML, sampled so.
    pub nvml: Option<nvml::Sampling>,
    /// A Prometheus-compatible API: its URL (as given) and how to query it.
    pub prometheus: Option<(String, LiveOptions)>,
    /// No progress lines on stderr.
    pub quiet: bool,
    /// Which field of a JSON request log holds what (`--request-fields`).
    pub request_fields: Option<requests::FieldMap>,
}

/// What the sources yielded: prepared targets, notes about the inputs as a whole, and the
/// sources that failed.
pub struct Gathered {
    /// One prepared target per replica, those that came prepared first.
    pub prepared: Vec<Prepared>,
    /// Notes for every target about how the inputs were read.
    pub warnings: Vec<String>,
    /// Sources that failed, with the reason.
    pub errors: Vec<String>,
    /// The slowest requests read (gateway logs, engine traces), each with its time split.
    pub slowest: Option<crate::traffic::slowest::Slowest>,
}

/// The sources' state while they are read.
#[derive(Default)]
struct Reading {
    /// Raw series from files, scrapes and NVML, merged.
    set: Option<SeriesSet>,
    /// Targets that came already prepared (snapshot files, a Prometheus API).
    prepared: Vec<Prepared>,
    warnings: Vec<String>,
    errors: Vec<String>,
    /// (host name, notes) of the NVML readings, for the target the GPUs join.
    nvml_notes: Option<(String, Vec<String>)>,
    /// Requests from gateway logs and engine traces.
    /// Request-record files (gateway logs, engine traces), read once the targets' windows are
    /// known: only their requests are kept.
    request_files: Vec<(PathBuf, requests::RecordKind)>,
}

impl Reading {
    fn merge(&mut self, got: SeriesSet) {
        match &mut self.set {
            Some(all) => all.merge(got),
            None => self.set = Some(got),
        }
    }
}

/// Reads every source for the window `options` names and prepares its targets.
pub fn gather(sources: &Sources<'_>, rules: &Rules, options: &Options) -> Result<Gathered> {
    let mut got = Reading::default();
    let inputs = super::input::inputs(sources.files)?;
    let limit = target_limit(rules, options);
    read_files(
        &inputs.paths,
        rules,
        (options.at_ms, options.window_ms),
        limit,
        sources.request_fields.as_ref(),
        &mut got,
    )
    .map_err(|e| inputs.name_errors(e))?;
    read_live(sources, options.window_ms, &mut got)?;
    if let Some((url, live)) = &sources.prometheus {
        query_prometheus(url, live, sources.quiet, rules, options, &mut got)?;
    }
    if got.set.is_none() && got.prepared.is_empty() && sources.prometheus.is_none() {
        if !got.request_files.is_empty() && sources.scrape.is_empty() && sources.nvml.is_none() {
            bail!("request records (a gateway's log, an engine's traces) alone have nothing to judge: give them beside the engine's metrics");
        }
        if sources.nvml.is_some() {
            bail!("no source could be read:\n  {}", got.errors.join("\n  "));
        }
        bail!(
            "no endpoint could be scraped:\n  {}",
            got.errors.join("\n  ")
        );
    }
    let mut prepared = prepare(
        got.set.as_ref(),
        got.prepared,
        &got.nvml_notes,
        rules,
        options,
    )?;
    let mut slowest = None;
    if !got.request_files.is_empty() {
        let attached = attach_request_files(
            &mut prepared,
            &got.request_files,
            sources.request_fields.as_ref(),
            rules,
        );
        got.warnings.extend(attached.notes);
        got.errors.extend(attached.errors);
        slowest = attached.slowest;
    }
    // The series are read into the prepared targets now. A fleet's are hundreds of thousands of
    // small allocations, and freeing them took about a tenth of the run: another thread frees
    // them beside the diagnosis, or the process ends first and the system takes them back.
    if let Some(set) = got.set.take() {
        let _ = std::thread::Builder::new().spawn(move || drop(set));
    }
    Ok(Gathered {
        prepared,
        warnings: got.warnings,
        errors: got.errors,
        slowest,
    })
}

/// What the request files gave a diagnosis: notes on them, the slowest requests of the
/// targets' windows, and the files that did not read (an error beside the diagnosis, as a
/// failed source is: the metrics and the other files are still judged).
pub struct RequestsRead {
    /// How the files were read and what the requests show as a whole.
    pub notes: Vec<String>,
    /// The slowest requests, each with its time split.
    pub slowest: Option<crate::traffic::slowest::Slowest>,
    /// Per file that did not read: why (file and line).
    pub errors: Vec<String>,
}

/// Reads request-record files (gateway logs, engine traces), keeping the requests of the
/// targets' windows, and joins them to the targets.
pub fn attach_request_files(
    prepared: &mut [Prepared],
    files: &[(PathBuf, requests::RecordKind)],
    fields: Option<&requests::FieldMap>,
    rules: &Rules,
) -> RequestsRead {
    let read = requests::read_paths(files, fields, span_of(prepared));
    let mut notes: Vec<String> = read
        .outside
        .iter()
        .filter(|(_, outside, _)| *outside > 0)
        .map(|(name, outside, kept)| {
            format!(
                "{outside} of {} request records in `{name}` end outside the windows read and were left out",
                outside + kept
            )
        })
        .collect();
    let attached = super::requests::attach(prepared, &read.requests, &rules.catalog);
    notes.extend(attached.notes);
    RequestsRead {
        notes,
        slowest: attached.slowest,
        errors: read.errors,
    }
}

/// The span whose requests the targets' windows read: from the earliest window's start to the
/// latest window's end; every request when a window has no end (metrics without timestamps).
fn span_of(prepared: &[Prepared]) -> requests::Keep {
    let mut span: Option<(i64, i64)> = None;
    for p in prepared {
        let w = &p.snapshot.window;
        let (Some(end), Some(len)) = (w.end_ms, w.length_ms) else {
            return requests::Keep::All;
        };
        span = Some(span.map_or((end - len, end), |(a, b)| (a.min(end - len), b.max(end))));
    }
    span.map_or(requests::Keep::All, |(from_ms, to_ms)| {
        requests::Keep::Ending { from_ms, to_ms }
    })
}

/// `--window`, or a default that holds what will be read: two scrapes `interval` apart (and
/// the NVML readings taken meanwhile) when scraping, else 5 minutes.
pub fn window_ms(
    window: Option<Duration>,
    scraping: bool,
    interval: Duration,
    sampling: Option<nvml::Sampling>,
) -> i64 {
    let nvml_span_ms = sampling.map_or(0, |s| s.interval.as_millis() as i64);
    match window {
        Some(w) => w.as_millis() as i64,
        // A window a little longer than the interval holds both scrapes.
        None if scraping => (interval.as_millis() as i64).max(nvml_span_ms) * 3 / 2,
        None => 300_000.max(nvml_span_ms * 3 / 2),
    }
}

/// What a file read counts to stop early at [`crate::pipeline::max_targets`]: engine replicas,
/// each a target of its own. None when the split may keep fewer targets than the file names
/// (`--selector`, `--engine`): the count after the split decides then.
fn target_limit(rules: &Rules, opts: &Options) -> Option<TargetLimit> {
    if opts.selector.is_some() || opts.engine.is_some() {
        return None;
    }
    let adapters = rules.adapters.clone();
    Some(TargetLimit {
        target_of: std::sync::Arc::new(move |s| {
            crate::target::engine_replica(s, &adapters).map(|(a, r)| format!("{a}\u{0}{r}"))
        }),
        max: crate::pipeline::max_targets(),
    })
}

/// The recorded files: snapshots come prepared, the rest are parsed and joined as series.
/// Exposition files are streamed and keep only what the diagnosis reads: two windows before
/// the newest sample (or before `--at`), since window statistics of ratios evaluate a window
/// ending at each sample of the last one.
fn read_files(
    files: &[PathBuf],
    rules: &Rules,
    (at_ms, window_ms): (Option<i64>, i64),
    target_limit: Option<TargetLimit>,
    request_fields: Option<&requests::FieldMap>,
    got: &mut Reading,
) -> Result<()> {
    let mut series_files = Vec::new();
    for f in files {
        match super::input::kind(f, request_fields.is_some())? {
            InputKind::Snapshot => {
                let text = read_text(f)?;
                let name = f.display().to_string();
                got.prepared
                    .extend(snapshot::parse(&text, &name, &rules.catalog, at_ms)?);
            }
            InputKind::Requests(k) => {
                if k == requests::RecordKind::Mapped && request_fields.is_none() {
                    bail!("`{}` needs --request-fields", f.display());
                }
                got.request_files.push((f.clone(), k));
            }
            InputKind::Metrics => series_files.push(f.clone()),
        }
    }
    if series_files.is_empty() {
        return Ok(());
    }
    let keep_ms = window_ms.saturating_mul(2);
    let retention = match at_ms {
        Some(at) => Retention::Range {
            from_ms: at.saturating_sub(keep_ms),
            to_ms: at,
        },
        None => Retention::LastWindow { keep_ms },
    };
    let opts = ReadOptions {
        retention,
        target_limit,
        ..ReadOptions::default()
    };
    let read = crate::source::file::read_files(&series_files, &opts)?;
    if let (Some(at), Some((oldest, newest))) = (at_ms, read.span) {
        // Checked here, over every sample read: the retention kept none outside the window.
        if at < oldest {
            bail!(
                "--at {} is before the first sample ({}): nothing to diagnose",
                crate::time::format_time(at),
                crate::time::format_time(oldest)
            );
        }
        if at.saturating_sub(window_ms) >= newest {
            bail!(
                "--at {} is more than the {} window after the last sample ({}): nothing in the window to diagnose",
                crate::time::format_time(at),
                crate::time::format_duration(window_ms),
                crate::time::format_time(newest)
            );
        }
    }
    got.warnings = read.warnings;
    got.set = Some(read.set);
    Ok(())
}

/// `--scrape` and `--nvml`: the GPUs are sampled while the endpoints are scraped, so both cover
/// the same time.
fn read_live(sources: &Sources<'_>, window_ms: i64, got: &mut Reading) -> Result<()> {
    let (scraped, gpus) = nvml::sample_beside(sources.nvml, || {
        if sources.scrape.is_empty() {
            return Vec::new();
        }
        scrape::scrape(
            sources.scrape,
            2,
            sources.interval,
            &sources.scrape_options,
            &mut |line| {
                if !sources.quiet {
                    eprintln!("{line}")
                }
            },
        )
    });
    for s in scraped {
        match s.result {
            Ok(set) => got.merge(set),
            Err(e) => got.errors.push(format!("{}: {e}", s.url)),
        }
    }
    match gpus {
        Some(Ok(c)) => {
            // Live GPU readings beside an older recording describe different times.
            let recorded_end = got
                .set
                .as_ref()
                .filter(|s| s.has_timestamps)
                .and_then(|s| s.newest_ms());
            if let (Some(end), Some(read_at)) = (recorded_end, c.set.oldest_ms()) {
                if (read_at - end).abs() > window_ms {
                    got.warnings.push(format!(
                        "the NVML readings were taken {} away from the newest sample of the other inputs, more than the {} window: they do not describe the same time (record both together with `record --scrape URL --nvml`)",
                        crate::time::format_duration((read_at - end).abs() / 1000 * 1000),
                        crate::time::format_duration(window_ms)
                    ));
                }
            }
            got.merge(c.set);
            got.nvml_notes = Some((c.hostname, c.notes));
        }
        // A failing source does not abort the diagnosis: its GPU checks become unknown.
        Some(Err(e)) if got.set.is_some() || !got.prepared.is_empty() => {
            got.errors.push(e.to_string())
        }
        Some(Err(e)) if sources.scrape.is_empty() => bail!("{e}"),
        Some(Err(e)) => got.errors.push(e.to_string()),
        None => {}
    }
    Ok(())
}

/// `--prometheus`: every target the API knows, prepared there.
fn query_prometheus(
    url: &str,
    live: &LiveOptions,
    quiet: bool,
    rules: &Rules,
    options: &Options,
    got: &mut Reading,
) -> Result<()> {
    let started = std::time::Instant::now();
    let result = crate::source::live::prometheus::prepare_from_prometheus(rules, live, options)
        .with_context(|| format!("querying Prometheus at {url}"))?;
    if !quiet {
        eprintln!(
            "queried {url}: {} queries in {} ms (slowest {} ms), {} targets",
            result.queries,
            started.elapsed().as_millis(),
            result.slowest_query.as_millis(),
            result.prepared.len()
        );
    }
    got.prepared.extend(result.prepared);
    got.errors.extend(result.errors);
    Ok(())
}

/// The series split into prepared targets, after those that came prepared; the NVML notes go to
/// the target on the GPUs' host.
fn prepare(
    set: Option<&SeriesSet>,
    mut prepared: Vec<Prepared>,
    nvml_notes: &Option<(String, Vec<String>)>,
    rules: &Rules,
    options: &Options,
) -> Result<Vec<Prepared>> {
    if let Some(set) = set {
        prepared.extend(crate::pipeline::prepare(set, rules, options)?);
    }
    if let Some((host, notes)) = nvml_notes {
        let n = prepared.len();
        for p in &mut prepared {
            if nvml::is_local_target(&p.snapshot.target.labels, host, n) {
                p.notes.extend(notes.iter().cloned());
            }
        }
    }
    Ok(prepared)
}
