//! `diagnose`: read recordings and running systems, split them into targets, diagnose each and
//! render the report. Sources are gathered first (files, then scrapes with NVML beside them,
//! then a Prometheus API); a source that fails becomes an error in the report, not an abort,
//! unless nothing at all could be read.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use llm_doctor_engine::report::Status;

use super::format::Format;
use super::outcome::Outcome;
use super::parse;
use super::sources::{with_nvml, NvmlSamplingArgs, PrometheusArgs};
use crate::pipeline::{self, Options, Prepared};
use crate::report::{self, Report, TargetReport};
use crate::rules::{load_rules, Rules};
use crate::signal::selector::Selector;
use crate::signal::series::SeriesSet;
use crate::source::file::{read_text, snapshot, ReadOptions, Retention};
use crate::source::live::{nvml, scrape};

/// Arguments of `diagnose`.
#[derive(Debug, clap::Args)]
pub struct DiagnoseArgs {
    /// Recorded metrics, joined: Prometheus text or OpenMetrics (plain or gzip), Prometheus API
    /// JSON answers, or llm-doctor snapshot/timeline files; `-` reads standard input.
    #[arg(required_unless_present_any = ["scrape", "nvml", "prometheus"])]
    pub files: Vec<PathBuf>,
    /// Query a Prometheus-compatible API instead of files (see the Prometheus options).
    #[command(flatten)]
    pub prom: PrometheusArgs,
    /// Scrape a /metrics endpoint twice, `--interval` apart, and diagnose the time between. Repeatable.
    #[arg(long, value_name = "URL")]
    pub scrape: Vec<String>,
    /// Time between the two scrapes (a Prometheus duration).
    #[arg(long, default_value = "15s", value_parser = parse::positive_duration)]
    pub interval: Duration,
    /// Per-request timeout for --scrape.
    #[arg(long, default_value = "10s", value_parser = parse::positive_duration)]
    pub timeout: Duration,
    /// An HTTP header for --scrape, `Name: value` (e.g. 'Authorization: Bearer TOKEN'). Repeatable.
    #[arg(long = "header", value_name = "NAME: VALUE", value_parser = scrape::parse_header)]
    pub headers: Vec<(String, String)>,
    /// Also write the snapshots that were diagnosed (YAML, or JSON for a .json name).
    #[arg(long, value_name = "FILE")]
    pub save_snapshot: Option<PathBuf>,
    /// The serve command line (`vllm serve MODEL --max-num-seqs 4`), or `@FILE` to read it.
    #[arg(long)]
    pub engine_args: Option<String>,
    /// A fact about the deployment, `key=value` (see `llm-doctor signals`). Repeatable.
    #[arg(long = "fact", value_name = "KEY=VALUE", value_parser = parse::key_value)]
    pub facts: Vec<(String, String)>,
    /// A measurement the metrics lack, `signal=value` (e.g. a gateway's client_ttft_p99_seconds=3.2). Repeatable.
    #[arg(long = "signal", value_name = "NAME=VALUE", value_parser = parse::key_number)]
    pub signals: Vec<(String, f64)>,
    /// Override an SLO, `name=value` (e.g. ttft_p99_seconds=2). Repeatable.
    #[arg(long = "slo", value_name = "NAME=VALUE", value_parser = parse::key_number)]
    pub slos: Vec<(String, f64)>,
    /// End of the window: RFC 3339 or Unix seconds (default: the newest sample).
    #[arg(long, value_parser = parse::time)]
    pub at: Option<i64>,
    /// Window length, a Prometheus duration (30s, 5m, 1h); default 5m, or 1.5 × --interval with --scrape.
    #[arg(long, value_parser = parse::positive_duration)]
    pub window: Option<Duration>,
    /// Output format (default: table on a terminal, JSON otherwise).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Width of the table in columns (default: the terminal's, else 150).
    #[arg(long, value_parser = clap::value_parser!(u16).range(40..))]
    pub width: Option<u16>,
    /// Show every target of a fleet in full (default: troubled ones in full, healthy ones in a line).
    #[arg(long, conflicts_with = "problems_only")]
    pub all: bool,
    /// Show only the troubled targets of a fleet (after the summary).
    #[arg(long)]
    pub problems_only: bool,
    /// Also show how this symptom or cause judged each target, fired or not: its gate, every
    /// item for and against it, and the values they read (repeatable), to answer "why not X?".
    #[arg(long, value_name = "RULE")]
    pub why: Vec<String>,
    /// No progress lines on stderr (scrape rounds, Prometheus query timings); errors still show.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Colour in the table: auto (on a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// A directory of playbooks (and `signals/` adapters) that add to or override the shipped ones.
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Only diagnose targets whose labels match these PromQL matchers, e.g. 'model_name="x",pod=~"vllm-.*"'.
    #[arg(long, value_parser = Selector::parse)]
    pub selector: Option<Selector>,
    /// Read the metrics as this engine's (vllm, sglang, tgi, trtllm, llamacpp) when names alone mislead.
    #[arg(long)]
    pub engine: Option<String>,
    /// Also read this host's GPUs through NVML (no dcgm-exporter needed); needs the NVIDIA driver.
    #[arg(long)]
    pub nvml: bool,
    /// How --nvml samples.
    #[command(flatten)]
    pub nvml_sampling: NvmlSamplingArgs,
}

/// What the sources yielded so far.
#[derive(Default)]
struct Gathered {
    /// Raw series from files, scrapes and NVML, merged.
    set: Option<SeriesSet>,
    /// Targets that came already prepared (snapshot files, a Prometheus API).
    prepared: Vec<Prepared>,
    /// Notes for every target about how the inputs were read.
    warnings: Vec<String>,
    /// Sources that failed.
    errors: Vec<String>,
    /// (host name, notes) of the NVML readings, for the target the GPUs join.
    nvml_notes: Option<(String, Vec<String>)>,
}

impl Gathered {
    fn merge(&mut self, got: SeriesSet) {
        match &mut self.set {
            Some(all) => all.merge(got),
            None => self.set = Some(got),
        }
    }
}

/// Runs `diagnose`: exit code 0 when every target is healthy and every source was read.
pub fn run(args: DiagnoseArgs) -> Result<Outcome> {
    if args.prom.prometheus.is_some()
        && (!args.files.is_empty() || !args.scrape.is_empty() || args.nvml)
    {
        bail!("--prometheus cannot be combined with files, --scrape or --nvml");
    }
    let rules = load_rules(args.rules.as_deref())?;
    crate::report::why::check_ids(&rules.playbook, &args.why)?;
    let engine_args = super::input::engine_args(args.engine_args.as_deref())?;
    let slos: BTreeMap<String, f64> = args.slos.iter().cloned().collect();
    let slo_values = rules
        .playbook
        .slo_values(&slos)
        .map_err(anyhow::Error::msg)
        .context("--slo")?;
    let sampling = args
        .nvml
        .then(|| args.nvml_sampling.sampling(nvml::Sampling::default()))
        .transpose()?;
    let window_ms = window_ms(&args, sampling);
    let options = Options {
        engine_args,
        facts: args.facts.clone(),
        signals: args.signals.clone(),
        at_ms: args.at,
        window_ms,
        selector: args.selector.clone(),
        engine: args.engine.clone(),
    };

    let mut got = Gathered::default();
    let inputs = super::input::inputs(&args.files)?;
    let limit = target_limit(&rules, &options);
    read_files(&inputs.paths, &rules, (args.at, window_ms), limit, &mut got)
        .map_err(|e| inputs.name_errors(e))?;
    read_live(&args, sampling, window_ms, &mut got)?;
    if let Some(url) = &args.prom.prometheus {
        query_prometheus(url, &args, &rules, &options, &mut got)?;
    }
    if got.set.is_none() && got.prepared.is_empty() && args.prom.prometheus.is_none() {
        if args.nvml {
            bail!("no source could be read:\n  {}", got.errors.join("\n  "));
        }
        bail!(
            "no endpoint could be scraped:\n  {}",
            got.errors.join("\n  ")
        );
    }
    let prepared = prepare(
        got.set.as_ref(),
        got.prepared,
        &got.nvml_notes,
        &rules,
        &options,
    )?;
    // The series are read into the prepared targets now. A fleet's are hundreds of thousands of
    // small allocations, and freeing them took about a tenth of the run: another thread frees
    // them beside the diagnosis, or the process ends first and the system takes them back.
    if let Some(set) = got.set.take() {
        let _ = std::thread::Builder::new().spawn(move || drop(set));
    }
    if let Some(path) = &args.save_snapshot {
        let json = path.extension().is_some_and(|e| e == "json");
        std::fs::write(path, snapshot::write(&prepared, &rules.catalog, json))
            .with_context(|| format!("writing `{}`", path.display()))?;
    }
    // Targets are independent: a fleet is diagnosed on every core.
    let mut targets: Vec<TargetReport> =
        crate::parallel::map_owned(prepared, pipeline::TARGETS_PER_THREAD, |p| {
            let mut t = TargetReport::diagnose_checking(&rules.playbook, p, &slo_values, &args.why);
            t.notes.extend(got.warnings.iter().cloned());
            t
        });
    // Worst first, so a fleet's problems lead.
    targets.sort_by(|a, b| {
        b.diagnosis
            .status
            .cmp(&a.diagnosis.status)
            .then_with(|| a.diagnosis.target.labels.cmp(&b.diagnosis.target.labels))
    });
    render(
        Report {
            targets,
            errors: got.errors,
        },
        args.format,
        View::of(&args),
    )
}

/// What a file read counts to stop early at [`pipeline::max_targets`]: engine replicas, each a
/// target of its own. None when the split may keep fewer targets than the file names
/// (`--selector`, `--engine`): the count after the split decides then.
fn target_limit(rules: &Rules, opts: &Options) -> Option<crate::source::file::stream::TargetLimit> {
    if opts.selector.is_some() || opts.engine.is_some() {
        return None;
    }
    let adapters = rules.adapters.clone();
    Some(crate::source::file::stream::TargetLimit {
        target_of: std::sync::Arc::new(move |s| {
            crate::target::engine_replica(s, &adapters).map(|(a, r)| format!("{a}\u{0}{r}"))
        }),
        max: pipeline::max_targets(),
    })
}

/// `--window`, or a default that holds what will be read.
fn window_ms(args: &DiagnoseArgs, sampling: Option<nvml::Sampling>) -> i64 {
    let nvml_span_ms = sampling.map_or(0, |s| s.interval.as_millis() as i64);
    match args.window {
        Some(w) => w.as_millis() as i64,
        // Two scrapes an interval apart: a window a little longer than the interval holds both
        // (and the NVML readings, taken meanwhile).
        None if !args.scrape.is_empty() => {
            (args.interval.as_millis() as i64).max(nvml_span_ms) * 3 / 2
        }
        None => 300_000.max(nvml_span_ms * 3 / 2),
    }
}

/// The recorded files: snapshots come prepared, the rest are parsed and joined as series.
/// Exposition files are streamed and keep only what the diagnosis reads: two windows before
/// the newest sample (or before `--at`), since window statistics of ratios evaluate a window
/// ending at each sample of the last one.
fn read_files(
    files: &[PathBuf],
    rules: &Rules,
    (at_ms, window_ms): (Option<i64>, i64),
    target_limit: Option<crate::source::file::stream::TargetLimit>,
    got: &mut Gathered,
) -> Result<()> {
    let mut series_files = Vec::new();
    for f in files {
        if super::input::is_snapshot(f)? {
            let text = read_text(f)?;
            let name = f.display().to_string();
            got.prepared.extend(
                snapshot::parse(&text, &name, &rules.catalog, at_ms).map_err(anyhow::Error::msg)?,
            );
        } else {
            series_files.push(f.clone());
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
fn read_live(
    args: &DiagnoseArgs,
    sampling: Option<nvml::Sampling>,
    window_ms: i64,
    got: &mut Gathered,
) -> Result<()> {
    let opts = scrape::ScrapeOptions {
        timeout: args.timeout,
        headers: args.headers.clone(),
    };
    let (scraped, gpus) = with_nvml(sampling, || {
        if args.scrape.is_empty() {
            return Vec::new();
        }
        scrape::scrape(&args.scrape, 2, args.interval, &opts, &mut |line| {
            if !args.quiet {
                eprintln!("{line}")
            }
        })
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
        Some(Err(e)) if args.scrape.is_empty() => bail!("{e}"),
        Some(Err(e)) => got.errors.push(e.to_string()),
        None => {}
    }
    Ok(())
}

/// `--prometheus`: every target the API knows, prepared there.
fn query_prometheus(
    url: &str,
    args: &DiagnoseArgs,
    rules: &Rules,
    options: &Options,
    got: &mut Gathered,
) -> Result<()> {
    let live = args.prom.live_options(url, args.timeout, &args.headers)?;
    let started = std::time::Instant::now();
    let result = crate::source::live::prometheus::prepare_from_prometheus(rules, &live, options)
        .with_context(|| format!("querying Prometheus at {url}"))?;
    if !args.quiet {
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
        prepared.extend(pipeline::prepare(set, rules, options)?);
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

/// When to colour the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set.
    Auto,
    /// Always, even into a pipe.
    Always,
    /// Never.
    Never,
}

/// How the table is to be drawn, from the flags.
struct View {
    width: Option<u16>,
    detail: report::table::Detail,
    color: ColorChoice,
}

impl View {
    fn of(args: &DiagnoseArgs) -> View {
        use report::table::Detail;
        View {
            width: args.width,
            color: args.color,
            detail: if args.all {
                Detail::All
            } else if args.problems_only {
                Detail::ProblemsOnly
            } else {
                Detail::Problems
            },
        }
    }

    /// Colour and the terminal's width only on a terminal.
    fn style(&self, terminal: bool) -> report::table::Style {
        let width = self.width.unwrap_or_else(|| {
            let cols = terminal
                .then(|| console::Term::stdout().size_checked())
                .flatten()
                .map(|(_, cols)| cols);
            cols.unwrap_or(150).max(40)
        });
        report::table::Style {
            color: match self.color {
                ColorChoice::Always => true,
                ColorChoice::Never => false,
                ColorChoice::Auto => {
                    terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                }
            },
            width,
            detail: self.detail,
        }
    }
}

/// The report in the chosen format (default: a table on a terminal, JSON otherwise).
fn render(report: Report, format: Option<Format>, view: View) -> Result<Outcome> {
    // A source that failed means the picture is incomplete: not "healthy".
    let code = if report.errors.is_empty()
        && report
            .targets
            .iter()
            .all(|t| t.diagnosis.status == Status::Healthy)
    {
        0
    } else {
        1
    };
    let stdout = std::io::stdout().is_terminal();
    let text = match format.unwrap_or(if stdout { Format::Table } else { Format::Json }) {
        Format::Table => report::table::render(&report, view.style(stdout)),
        Format::Json => report::json::render(&report),
        Format::Markdown => report::markdown::render(&report),
    };
    Ok(Outcome { stdout: text, code })
}
