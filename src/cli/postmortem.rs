//! `postmortem`: slide the diagnosis across a range of a recording or of Prometheus history and
//! report the incidents: what broke first, and why. `diff`: a good window against a bad one.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::outcome::Outcome;
use super::parse;
use super::sources::PrometheusArgs;
use crate::postmortem;
use crate::prepared::Options;
use crate::report::postmortem as render;
use crate::rules::{load_rules, Rules};
use crate::signal::selector::Selector;
use crate::signal::series::SeriesSet;
use crate::verdict::{range, top_down};

/// Report formats of `postmortem`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// Text for the terminal.
    Table,
    /// Markdown; with `--output`, charts are written beside it as SVG files.
    Markdown,
    /// One self-contained HTML page with SVG charts.
    Html,
    /// JSON: episodes, incidents, onsets and the fleet view.
    Json,
}

/// What `postmortem` and `diff` share: where the metrics come from and how they are judged.
#[derive(Debug, clap::Args)]
pub struct RangeInputArgs {
    /// Recorded metrics (Prometheus text or OpenMetrics, plain or gzip, or Prometheus API JSON);
    /// `-` reads standard input.
    #[arg(required_unless_present = "prometheus")]
    pub files: Vec<PathBuf>,
    /// Query a Prometheus-compatible API instead of files (with --from and --to).
    #[command(flatten)]
    pub prom: PrometheusArgs,
    /// Per-request timeout for --prometheus.
    #[arg(long, default_value = "60s", value_parser = parse::positive_duration)]
    pub timeout: Duration,
    /// The serve command line, or `@FILE` to read it.
    #[arg(long)]
    pub engine_args: Option<String>,
    /// A fact about the deployment, `key=value`. Repeatable.
    #[arg(long = "fact", value_name = "KEY=VALUE", value_parser = parse::key_value)]
    pub facts: Vec<(String, String)>,
    /// Override an SLO, `name=value` (e.g. ttft_p99_seconds=2). Repeatable.
    #[arg(long = "slo", value_name = "NAME=VALUE", value_parser = parse::key_number)]
    pub slos: Vec<(String, f64)>,
    /// Window each instant is judged over, a Prometheus duration (default 5m, as `diagnose`).
    #[arg(long, default_value = "5m", value_parser = parse::positive_duration)]
    pub window: Duration,
    /// A directory of playbooks (and `signals/` adapters) that add to or override the shipped ones.
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Only targets whose labels match these PromQL matchers.
    #[arg(long, value_parser = Selector::parse)]
    pub selector: Option<Selector>,
    /// Read the metrics as this engine's (vllm, sglang, tgi, trtllm, llamacpp).
    #[arg(long)]
    pub engine: Option<String>,
}

/// Arguments of `postmortem`.
#[derive(Debug, clap::Args)]
pub struct PostmortemArgs {
    /// Inputs and judgement.
    #[command(flatten)]
    pub input: RangeInputArgs,
    /// Start of the range: RFC 3339 or Unix seconds (default: the recording's start).
    #[arg(long, value_parser = parse::time)]
    pub from: Option<i64>,
    /// End of the range (default: the recording's end).
    #[arg(long, value_parser = parse::time)]
    pub to: Option<i64>,
    /// Distance between judged instants (default: the recording's scrape interval; 15s with
    /// --prometheus).
    #[arg(long, value_parser = parse::positive_duration)]
    pub step: Option<Duration>,
    /// Report format (default: table on a terminal, JSON otherwise).
    #[arg(long, value_enum)]
    pub format: Option<ReportFormat>,
    /// Write the report to this file instead of stdout (Markdown charts go to FILE's
    /// `<stem>-charts/` folder).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// With --prometheus: read every raw series (`raw`), or the store's coarse view of the
    /// fleet first and raw series only of the replicas and spans it shows unhealthy
    /// (`top-down`); `auto` picks raw up to 20 million points (series x steps).
    #[arg(long, value_enum, default_value_t = top_down::ReadPlan::Auto)]
    pub plan: top_down::ReadPlan,
    /// With --plan top-down: the step (and window) of the store's coarse view.
    #[arg(long, default_value = "5m", value_parser = parse::positive_duration)]
    pub coarse_step: Duration,
}

/// The postmortem of a recording read whole (files, or the raw plan of a store).
fn judge_recording(
    recording: range::Recording,
    args: &PostmortemArgs,
    rules: &Rules,
    options: &Options,
    slos: &[f64],
    window_ms: i64,
) -> Result<postmortem::Postmortem> {
    let (set, notes, span) = (recording.set, recording.notes, recording.span);
    let request_files = recording.request_files;
    let range = range::instants(&set, span, (args.from, args.to), args.step, window_ms)?;
    let progress = Progress::new(args.quiet);
    let mut pm = postmortem::analyse(&set, rules, options, slos, range, &progress)?;
    progress.finish();
    // The command exits once the report is written: freeing every raw series it judged (a
    // fleet's millions of samples, a few percent of the whole run) would only delay that.
    std::mem::forget(set);
    pm.notes.extend(notes);
    if !request_files.is_empty() {
        // The requests that ended in the judged range, its first window included.
        let from = pm.from_ms.saturating_sub(pm.window_ms);
        let (view, errors) = postmortem::requests::view(&request_files, from, pm.to_ms);
        pm.notes.extend(
            errors
                .into_iter()
                .map(|e| format!("request records not read: {e}")),
        );
        if view.is_none() {
            pm.notes
                .push("no request record ended inside the range judged".to_string());
        }
        pm.requests = view;
    }
    Ok(pm)
}

/// Runs `postmortem`: exit code 0 when no target had an incident in the range.
pub fn run(args: PostmortemArgs) -> Result<Outcome> {
    let rules = load_rules(args.input.rules.as_deref())?;
    let slos = slo_values(&rules, &args.input.slos)?;
    let window_ms = args.input.window.as_millis() as i64;
    let options = options(&args.input)?;
    let pm = match &args.input.prom.prometheus {
        Some(url) => {
            if !args.input.files.is_empty() {
                bail!("--prometheus cannot be combined with files");
            }
            let (Some(from), Some(to)) = (args.from, args.to) else {
                bail!("postmortem --prometheus needs --from and --to");
            };
            let step = args.step.map_or(15_000, |s| s.as_millis() as i64);
            let live = args.input.prom.live_options(url, args.input.timeout, &[])?;
            let query = range::RangeQuery {
                url,
                live: &live,
                selector: args.input.selector.as_ref(),
                from_ms: from,
                to_ms: to,
                step_ms: step,
                window_ms,
            };
            let (plan, why) = top_down::choose(args.plan, &query, &rules)?;
            let mut pm = if plan == top_down::ReadPlan::TopDown {
                let coarse = args.coarse_step.as_millis() as i64;
                top_down::postmortem(&query, &rules, &options, &slos, coarse, args.quiet)?
            } else {
                let recording = range::query_prometheus(&query, &rules, args.quiet)?;
                judge_recording(recording, &args, &rules, &options, &slos, window_ms)?
            };
            pm.notes.insert(0, why);
            pm
        }
        None => {
            let recording =
                range::read_recordings(&args.input.files, &rules, (args.from, args.to), window_ms)?;
            judge_recording(recording, &args, &rules, &options, &slos, window_ms)?
        }
    };

    let code = u8::from(pm.targets.iter().any(|t| !t.incidents.is_empty()));
    let stdout_terminal = std::io::stdout().is_terminal();
    let format = args
        .format
        .unwrap_or(if args.output.is_none() && stdout_terminal {
            ReportFormat::Table
        } else if args
            .output
            .as_deref()
            .and_then(Path::extension)
            .is_some_and(|e| e == "html")
        {
            ReportFormat::Html
        } else if args
            .output
            .as_deref()
            .and_then(Path::extension)
            .is_some_and(|e| e == "md")
        {
            ReportFormat::Markdown
        } else {
            ReportFormat::Json
        });
    let text = match format {
        ReportFormat::Table => render::table(&pm, &rules),
        ReportFormat::Json => render::json(&pm),
        ReportFormat::Html => render::html(&pm, &rules, &slos),
        ReportFormat::Markdown => match &args.output {
            Some(path) => {
                let dir = charts_dir(path);
                let charts = render::charts(&pm, &rules, &slos);
                if !charts.is_empty() {
                    std::fs::create_dir_all(&dir)
                        .with_context(|| format!("creating `{}`", dir.display()))?;
                }
                for (name, svg) in &charts {
                    let file = dir.join(name);
                    std::fs::write(&file, svg)
                        .with_context(|| format!("writing `{}`", file.display()))?;
                }
                let rel = dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                render::markdown(&pm, &rules, Some(&rel))
            }
            None => render::markdown(&pm, &rules, None),
        },
    };
    match &args.output {
        Some(path) => {
            std::fs::write(path, &text).with_context(|| format!("writing `{}`", path.display()))?;
            Ok(Outcome {
                stdout: String::new(),
                code,
            })
        }
        None => Ok(Outcome { stdout: text, code }),
    }
}

/// `report.md` keeps its charts in `report-charts/`.
fn charts_dir(output: &Path) -> PathBuf {
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".to_string());
    output.with_file_name(format!("{stem}-charts"))
}

fn slo_values(rules: &Rules, slos: &[(String, f64)]) -> Result<Vec<f64>> {
    let map: BTreeMap<String, f64> = slos.iter().cloned().collect();
    rules.playbook.slo_values(&map).context("--slo")
}

fn options(input: &RangeInputArgs) -> Result<Options> {
    Ok(Options {
        engine_args: crate::verdict::input::engine_args(input.engine_args.as_deref())?,
        facts: input.facts.clone(),
        signals: Vec::new(),
        at_ms: None,
        window_ms: input.window.as_millis() as i64,
        selector: input.selector.clone(),
        engine: input.engine.clone(),
    })
}

/// A progress bar on stderr, only on a terminal and without `-q`.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(quiet: bool) -> Self {
        if quiet || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} judging {pos}/{len} target-steps [{bar:30}] {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        Progress { bar: Some(bar) }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl postmortem::Progress for Progress {
    fn start(&self, total: u64) {
        if let Some(b) = &self.bar {
            b.set_length(total);
        }
    }

    fn tick(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }
}

/// Arguments of `diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// Inputs and judgement: one recording (two windows of it) or two (GOOD then BAD).
    #[command(flatten)]
    pub input: RangeInputArgs,
    /// End of the good window (default: the end of the first file).
    #[arg(long, value_parser = parse::time)]
    pub good_at: Option<i64>,
    /// End of the bad window (default: the end of the last file).
    #[arg(long, value_parser = parse::time)]
    pub bad_at: Option<i64>,
    /// With --prometheus: the good window's replica (PromQL matchers); default --selector.
    #[arg(long, value_parser = Selector::parse)]
    pub good_selector: Option<Selector>,
    /// The bad window's replica (PromQL matchers); default --selector.
    #[arg(long, value_parser = Selector::parse)]
    pub bad_selector: Option<Selector>,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: Option<ReportFormat>,
}

/// Runs `diff`: exit code 0 always when it could compare (it answers a question, it does not
/// judge).
pub fn run_diff(args: DiffArgs) -> Result<Outcome> {
    let rules = load_rules(args.input.rules.as_deref())?;
    let slos = slo_values(&rules, &args.input.slos)?;
    let window_ms = args.input.window.as_millis() as i64;
    let files = &args.input.files;
    // Each side is read on its own: standard input can feed one of them only.
    if files.iter().filter(|f| f.as_os_str() == "-").count() > 1 {
        bail!("`-` (standard input) can be given once");
    }
    let (good_set, bad_set) = match (&args.input.prom.prometheus, files.len()) {
        (Some(_), _) => bail!("diff reads recordings; record the two windows first (`llm-doctor record --prometheus`)"),
        (None, 1) => {
            let set = range::read_recordings(files, &rules, (None, None), window_ms)?.set;
            (set.clone(), set)
        }
        (None, 2) => (
            range::read_recordings(&files[..1], &rules, (None, None), window_ms)?.set,
            range::read_recordings(&files[1..], &rules, (None, None), window_ms)?.set,
        ),
        (None, n) => bail!("diff takes one recording (two windows of it) or two (good, bad); got {n}"),
    };
    if files.len() == 1 && args.good_at.is_none() {
        bail!("with one recording, say where the good window ends: --good-at TIME");
    }
    let base = options(&args.input)?;
    let side = |set: &SeriesSet, at: Option<i64>, selector: &Option<Selector>, which: &str| {
        let mut opts = base.clone();
        opts.selector = selector.clone().or_else(|| base.selector.clone());
        opts.at_ms = at;
        postmortem::diff::window_side(set, &rules, &opts, &slos, window_ms)
            .with_context(|| format!("the {which} window"))
    };
    let good = side(&good_set, args.good_at, &args.good_selector, "good")?;
    let bad = side(&bad_set, args.bad_at, &args.bad_selector, "bad")?;
    let d = postmortem::diff::diff(good.side(), bad.side());
    let text = match args.format.unwrap_or(if std::io::stdout().is_terminal() {
        ReportFormat::Table
    } else {
        ReportFormat::Json
    }) {
        ReportFormat::Json => serde_json::to_string_pretty(&d)? + "\n",
        ReportFormat::Markdown => render::diff_markdown(&d),
        ReportFormat::Table => render::diff_table(&d),
        ReportFormat::Html => bail!("diff writes table, markdown or json"),
    };
    Ok(Outcome {
        stdout: text,
        code: 0,
    })
}
