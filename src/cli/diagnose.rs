//! `diagnose`: its arguments, then the road every entry point shares ([`crate::verdict`]:
//! gather the sources into prepared targets, judge each), then the report in the chosen format.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use llm_doctor_engine::report::Status;

use super::format::Format;
use super::outcome::Outcome;
use super::parse;
use super::sources::{NvmlSamplingArgs, PrometheusArgs};
use crate::prepared::Options;
use crate::report::{self, Report};
use crate::rules::load_rules;
use crate::signal::selector::Selector;
use crate::source::file::snapshot;
use crate::source::live::{nvml, scrape};
use crate::verdict;

/// Arguments of `diagnose`.
#[derive(Debug, clap::Args)]
pub struct DiagnoseArgs {
    /// Recorded metrics, joined: Prometheus text or OpenMetrics (plain or gzip), Prometheus API
    /// JSON answers, or llm-doctor snapshot/timeline files; `-` reads standard input. Request
    /// records beside them: a gateway's JSON access log (nginx, Envoy) or an engine's OTLP
    /// trace exports as JSON lines.
    #[arg(required_unless_present_any = ["scrape", "nvml", "prometheus"])]
    pub files: Vec<PathBuf>,
    /// Read JSON request logs through this map of their fields, `role=field[:ms|:us],...`
    /// (roles: id, trace_id, start, end, status, total, upstream, upstream_time, ttft, model,
    /// prompt_tokens, output_tokens, finish_reason; `total` and `end` or `start` are needed).
    #[arg(long, value_name = "ROLE=FIELD,...", value_parser = |s: &str| crate::source::file::requests::FieldMap::parse(s))]
    pub request_fields: Option<crate::source::file::requests::FieldMap>,
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

/// Runs `diagnose`: arguments, then gather, judge and render. Exit code 0 when every target is
/// healthy and every source was read.
pub fn run(args: DiagnoseArgs) -> Result<Outcome> {
    if args.prom.prometheus.is_some()
        && (!args.files.is_empty() || !args.scrape.is_empty() || args.nvml)
    {
        bail!("--prometheus cannot be combined with files, --scrape or --nvml");
    }
    let rules = load_rules(args.rules.as_deref())?;
    crate::report::why::check_ids(&rules.playbook, &args.why)?;
    let engine_args = verdict::input::engine_args(args.engine_args.as_deref())?;
    let slos: BTreeMap<String, f64> = args.slos.iter().cloned().collect();
    let slo_values = rules.playbook.slo_values(&slos).context("--slo")?;
    let sampling = args
        .nvml
        .then(|| args.nvml_sampling.sampling(nvml::Sampling::default()))
        .transpose()?;
    let window_ms = verdict::window_ms(
        args.window,
        !args.scrape.is_empty(),
        args.interval,
        sampling,
    );
    let options = Options {
        engine_args,
        facts: args.facts.clone(),
        signals: args.signals.clone(),
        at_ms: args.at,
        window_ms,
        selector: args.selector.clone(),
        engine: args.engine.clone(),
    };
    let prometheus = match &args.prom.prometheus {
        Some(url) => Some((
            url.clone(),
            args.prom.live_options(url, args.timeout, &args.headers)?,
        )),
        None => None,
    };
    let sources = verdict::Sources {
        files: &args.files,
        scrape: &args.scrape,
        interval: args.interval,
        scrape_options: scrape::ScrapeOptions {
            timeout: args.timeout,
            headers: args.headers.clone(),
        },
        nvml: sampling,
        prometheus,
        quiet: args.quiet,
        request_fields: args.request_fields.clone(),
    };
    let got = verdict::gather(&sources, &rules, &options)?;
    if let Some(path) = &args.save_snapshot {
        let json = path.extension().is_some_and(|e| e == "json");
        std::fs::write(path, snapshot::write(&got.prepared, &rules.catalog, json))
            .with_context(|| format!("writing `{}`", path.display()))?;
    }
    let targets = verdict::judge_all(
        &rules.playbook,
        got.prepared,
        &slo_values,
        &args.why,
        &got.warnings,
    );
    render(
        Report {
            targets,
            errors: got.errors,
            slowest_requests: got.slowest,
        },
        args.format,
        View::of(&args),
    )
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
