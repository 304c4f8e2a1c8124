//! `record`: write what running systems show to an OpenMetrics file for a later `diagnose` or a
//! Prometheus import: a range of a Prometheus-compatible API, or /metrics endpoints scraped over
//! a duration with the local GPUs read through NVML beside them.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::outcome::Outcome;
use super::parse;
use super::sources::{with_nvml, NvmlSamplingArgs, PrometheusArgs};
use crate::rules::load_rules;
use crate::signal::selector::Selector;
use crate::source::live::prometheus::record_from_prometheus;
use crate::source::live::{nvml, scrape};

/// Arguments of `record`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).multiple(true).args(["scrape", "nvml", "prometheus"])))]
pub struct RecordArgs {
    /// Endpoints to scrape. Repeatable.
    #[arg(long, value_name = "URL")]
    pub scrape: Vec<String>,
    /// Also record this host's GPUs through NVML, under dcgm-exporter's metric names.
    #[arg(long)]
    pub nvml: bool,
    /// How --nvml samples.
    #[command(flatten)]
    pub nvml_sampling: NvmlSamplingArgs,
    /// How long to record.
    #[arg(long, default_value = "10m", value_parser = parse::positive_duration)]
    pub duration: Duration,
    /// Time between scrapes.
    #[arg(long, default_value = "15s", value_parser = parse::positive_duration)]
    pub interval: Duration,
    /// Per-request timeout.
    #[arg(long, default_value = "10s", value_parser = parse::positive_duration)]
    pub timeout: Duration,
    /// An HTTP header, `Name: value`. Repeatable.
    #[arg(long = "header", value_name = "NAME: VALUE", value_parser = scrape::parse_header)]
    pub headers: Vec<(String, String)>,
    /// Record from a Prometheus-compatible API instead (see the Prometheus options).
    #[command(flatten)]
    pub prom: PrometheusArgs,
    /// With --prometheus: only replicas whose labels match these PromQL matchers.
    #[arg(long, value_parser = Selector::parse)]
    pub selector: Option<Selector>,
    /// With --prometheus: start of the range (RFC 3339 or Unix seconds).
    #[arg(long, requires = "prometheus", value_parser = parse::time)]
    pub from: Option<i64>,
    /// With --prometheus: end of the range (RFC 3339 or Unix seconds).
    #[arg(long, requires = "prometheus", value_parser = parse::time)]
    pub to: Option<i64>,
    /// With --prometheus: resolution of the recording.
    #[arg(long, default_value = "15s", value_parser = parse::positive_duration)]
    pub step: Duration,
    /// Output file (OpenMetrics with timestamps in seconds and `# EOF`).
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `record`: exit code 1 when a source failed but something was still written.
pub fn run(args: RecordArgs) -> Result<Outcome> {
    match &args.prom.prometheus {
        Some(url) => from_prometheus(url, &args),
        None => from_endpoints(&args),
    }
}

/// `record --prometheus URL --from T --to T`.
fn from_prometheus(url: &str, args: &RecordArgs) -> Result<Outcome> {
    if !args.scrape.is_empty() || args.nvml {
        bail!("record --prometheus cannot be combined with --scrape or --nvml");
    }
    let (Some(from), Some(to)) = (args.from, args.to) else {
        bail!("record --prometheus needs --from and --to");
    };
    check_writable(&args.out)?;
    let live = args.prom.live_options(url, args.timeout, &args.headers)?;
    let rules = load_rules(None)?;
    let range = (from, to, args.step.as_millis() as i64);
    let (bytes, notes) = stream_to_file(&args.out, |mut sink| {
        record_from_prometheus(&rules, &live, args.selector.as_ref(), range, &mut sink)
            .with_context(|| format!("recording from Prometheus at {url}"))
    })?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    Ok(Outcome {
        stdout: format!("wrote {} ({bytes} bytes of text)\n", args.out.display()),
        code: 0,
    })
}

/// What `write` streams, written to `path` (a fleet-day is many gigabytes of text): through a
/// buffered partial file, gzip-compressed when `path` is named so, renamed into place once
/// whole; on an error the partial file is removed.
fn stream_to_file<T>(
    path: &std::path::Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> Result<T>,
) -> Result<T> {
    use std::io::Write as _;
    let partial = partial_path(path);
    let file = std::fs::File::create(&partial)
        .with_context(|| format!("writing `{}`", partial.display()))?;
    let mut sink = std::io::BufWriter::with_capacity(1 << 20, file);
    let stream = || -> Result<T> {
        let t = if is_gzip_name(path) {
            let mut gz = flate2::write::GzEncoder::new(&mut sink, flate2::Compression::fast());
            let t = write(&mut gz)?;
            gz.finish()?;
            t
        } else {
            write(&mut sink)?
        };
        sink.flush()?;
        Ok(t)
    };
    let written = stream();
    drop(sink);
    match written {
        Ok(t) => {
            std::fs::rename(&partial, path)
                .with_context(|| format!("writing `{}`", path.display()))?;
            Ok(t)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(e)
        }
    }
}

/// Whether a recording named `path` is written gzip-compressed (`.gz`, as `FILE.om.gz`).
fn is_gzip_name(path: &std::path::Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// `record --scrape URL… --nvml`: scrapes every `--interval` over `--duration`, the GPUs read
/// as often meanwhile.
fn from_endpoints(args: &RecordArgs) -> Result<Outcome> {
    let opts = scrape::ScrapeOptions {
        timeout: args.timeout,
        headers: args.headers.clone(),
    };
    let (duration, interval) = (args.duration, args.interval);
    // A recording reads the GPUs as often as it scrapes, over the whole duration.
    let every_interval = nvml::Sampling {
        samples: (duration.as_millis() / interval.as_millis().max(1)) as usize + 1,
        interval: duration,
    };
    let sampling = args
        .nvml
        .then(|| args.nvml_sampling.sampling(every_interval))
        .transpose()?;
    // Checked before the first scrape, not after the whole duration.
    check_writable(&args.out)?;
    let terminal = std::io::stderr().is_terminal();
    let mut save = |set: &crate::signal::series::SeriesSet| {
        // A valid file after every round: what was recorded survives a crash or a kill.
        if set.series.is_empty() {
            return;
        }
        let text = crate::source::file::openmetrics::write(set);
        match write_atomically(&args.out, &text) {
            Ok(()) if terminal => eprintln!(
                "saved {} series, {} bytes to {}",
                set.series.len(),
                text.len(),
                args.out.display()
            ),
            Ok(()) => {}
            Err(e) => eprintln!("error: {e:#}"),
        }
    };
    let (recorded, gpus) = with_nvml(sampling, || {
        if args.scrape.is_empty() {
            return None;
        }
        Some(scrape::record_with(
            &args.scrape,
            duration,
            interval,
            &opts,
            &mut |line| eprintln!("{line}"),
            Some(&mut save),
        ))
    });
    let (text, mut errors) = match recorded {
        Some(r) => {
            if r.interrupted {
                eprintln!(
                    "recording stopped after {} of {} rounds; keeping what was recorded",
                    r.rounds.0, r.rounds.1
                );
            }
            (r.text, r.errors)
        }
        None => (String::new(), Vec::new()),
    };
    for e in &errors {
        eprintln!("error: {e}");
    }
    let scraped_nothing = text.lines().all(|l| l.starts_with('#'));
    let all_failed =
        !args.scrape.is_empty() && errors.len() == args.scrape.len() && scraped_nothing;
    let text = match gpus {
        None => text,
        Some(Err(e)) if args.scrape.is_empty() => bail!("{e}"),
        Some(Err(e)) => {
            eprintln!("error: {e}");
            errors.push(e.to_string());
            text
        }
        // NVML's readings go in under dcgm-exporter's names, beside the scraped series.
        Some(Ok(c)) => {
            let mut set = c.set;
            if !scraped_nothing {
                set.merge(
                    crate::source::file::exposition::parse(&text, "the scrapes")
                        .map_err(anyhow::Error::new)
                        .context("re-reading the scrapes")?,
                );
            }
            crate::source::file::openmetrics::write(&set)
        }
    };
    if all_failed && text.lines().all(|l| l.starts_with('#')) {
        bail!("no endpoint could be recorded");
    }
    write_atomically(&args.out, &text)?;
    Ok(Outcome {
        stdout: format!("wrote {} ({} bytes)\n", args.out.display(), text.len()),
        code: u8::from(!errors.is_empty()),
    })
}

/// `path.partial` beside `path`: written whole, then renamed over `path`, so `path` is always a
/// complete file.
fn partial_path(path: &std::path::Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

/// Fails now, with the reason, when `path` cannot be written.
fn check_writable(path: &std::path::Path) -> Result<()> {
    let probe = partial_path(path);
    std::fs::write(&probe, b"")
        .with_context(|| format!("--out `{}` cannot be written", path.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes `text` to `path` through a partial file and a rename.
fn write_atomically(path: &std::path::Path, text: &str) -> Result<()> {
    let partial = partial_path(path);
    std::fs::write(&partial, text).with_context(|| format!("writing `{}`", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("writing `{}`", path.display()))
}
