//! `record`: write what running systems show to an OpenMetrics file for a later `diagnose` or a
//! Prometheus import: a range of a Prometheus-compatible API, or /metrics endpoints scraped over
//! a duration with the local GPUs read through NVML beside them.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::outcome::Outcome;
use super::parse;
use super::sources::{NvmlSamplingArgs, PrometheusArgs};
use crate::rules::load_rules;
use crate::signal::selector::Selector;
use crate::signal::series::SeriesSet;
use crate::source::live::prometheus::record_from_prometheus;
use crate::source::live::{nvml, scrape};

mod file;
mod saves;

use file::{check_writable, stream_to_file};

/// Arguments of `record`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).multiple(true).args(["scrape", "nvml", "prometheus", "otlp"])))]
pub struct RecordArgs {
    /// Receive an engine's request spans instead: listen for OTLP/HTTP at this address
    /// (`HOST:PORT`; the engine posts to `http://HOST:PORT/v1/traces`) for --duration or until
    /// stopped, and write each export to --out as one JSON line (gzip when named `.gz`).
    #[arg(long, value_name = "HOST:PORT", conflicts_with_all = ["scrape", "nvml", "prometheus"])]
    pub otlp: Option<std::net::SocketAddr>,
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
    /// Output file: OpenMetrics with timestamps in seconds and `# EOF`, gzip when it ends in `.gz`
    /// (with --otlp: one OTLP/JSON export per line).
    /// With --scrape it is written whole after rounds 1, 2, 4, 8, … (beside the rounds, which
    /// keep their schedule) and the rounds in between are kept in `OUT.parts/` until the next
    /// whole save is done.
    #[arg(long)]
    pub out: PathBuf,
    /// How progress and errors are written on stderr: plain lines, or one JSON object per line.
    #[arg(long, value_enum, default_value_t = crate::log::LogFormat::Text)]
    pub log_format: crate::log::LogFormat,
}

/// Runs `record`: exit code 1 when a source failed but something was still written.
pub fn run(args: RecordArgs) -> Result<Outcome> {
    crate::log::init(args.log_format);
    if let Some(addr) = args.otlp {
        return from_otlp(addr, &args);
    }
    match &args.prom.prometheus {
        Some(url) => from_prometheus(url, &args),
        None => from_endpoints(&args),
    }
}

/// `record --otlp HOST:PORT`: receives traces for `--duration` or until stopped.
fn from_otlp(addr: std::net::SocketAddr, args: &RecordArgs) -> Result<Outcome> {
    check_writable(&args.out)?;
    let file = std::fs::File::create(&args.out)
        .with_context(|| format!("writing `{}`", args.out.display()))?;
    let out: Box<dyn crate::source::live::otlp::Output> = if file::is_gzip_name(&args.out) {
        Box::new(flate2::write::GzEncoder::new(
            file,
            flate2::Compression::fast(),
        ))
    } else {
        Box::new(file)
    };
    let duration = args.duration;
    let received = crate::http::server_runtime()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("listening on {addr}"))?;
        let bound = listener.local_addr()?;
        tracing::info!("receiving OTLP traces on http://{bound}/v1/traces for {duration:?}");
        let stop = async move {
            tokio::select! {
                () = tokio::time::sleep(duration) => {}
                () = crate::http::stop_signal() => {}
            }
        };
        crate::source::live::otlp::receive(listener, out, stop)
            .await
            .context("receiving traces")
    })?;
    if received.refused > 0 {
        tracing::warn!(
            refused = received.refused,
            "{} posts refused (not an OTLP trace export, or not POST /v1/traces)",
            received.refused
        );
    }
    if received.exports == 0 {
        tracing::warn!("no traces came: is the engine pointed at http://{addr}/v1/traces over OTLP/HTTP (vLLM: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)?");
    }
    Ok(Outcome {
        stdout: format!(
            "wrote {} ({} exports, {} request spans)\n",
            args.out.display(),
            received.exports,
            received.requests
        ),
        code: u8::from(received.exports == 0),
    })
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
        tracing::info!("note: {n}");
    }
    Ok(Outcome {
        stdout: format!("wrote {} ({bytes} bytes of text)\n", args.out.display()),
        code: 0,
    })
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
    let mut saves = saves::Saves::new(&args.out, std::io::stderr().is_terminal())?;
    let (recorded, gpus) = crate::source::live::nvml::sample_beside(sampling, || {
        if args.scrape.is_empty() {
            return None;
        }
        Some(scrape::record_with(
            &args.scrape,
            duration,
            interval,
            &opts,
            &mut |line| tracing::info!("{line}"),
            Some(&mut |round, all| saves.after_round(round, all)),
        ))
    });
    let (mut set, mut errors) = match recorded {
        Some(r) => {
            if r.interrupted {
                tracing::warn!(
                    "recording stopped after {} of {} rounds; keeping what was recorded",
                    r.rounds.0,
                    r.rounds.1
                );
            }
            (r.set, r.errors)
        }
        None => (SeriesSet::default(), Vec::new()),
    };
    for e in &errors {
        tracing::error!("error: {e}");
    }
    let scraped_nothing = set.sample_count() == 0;
    let all_failed =
        !args.scrape.is_empty() && errors.len() == args.scrape.len() && scraped_nothing;
    match gpus {
        None => {}
        Some(Err(e)) if args.scrape.is_empty() => bail!("{e}"),
        Some(Err(e)) => {
            tracing::error!("error: {e}");
            errors.push(e.to_string());
        }
        // NVML's readings go in under dcgm-exporter's names, beside the scraped series.
        Some(Ok(c)) => {
            let mut gpus = c.set;
            gpus.merge(set);
            set = gpus;
        }
    }
    if all_failed && set.sample_count() == 0 {
        bail!("no endpoint could be recorded");
    }
    // A whole save still being written goes to the same file: stopped, since this one holds
    // everything it would.
    saves.stop();
    let bytes = saves::write_whole(&args.out, &set).with_context(|| {
        format!(
            "the rounds saved so far are in `{}` and `{}`",
            args.out.display(),
            saves::parts_dir(&args.out).display()
        )
    })?;
    saves.finish();
    Ok(Outcome {
        stdout: format!("wrote {} ({bytes} bytes of text)\n", args.out.display()),
        code: u8::from(!errors.is_empty()),
    })
}
