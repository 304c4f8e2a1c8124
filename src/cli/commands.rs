//! The work behind each subcommand. Every command returns its output and exit code; `main`
//! prints. Errors (bad input, bad flags) become exit code 2 there.

use std::collections::BTreeMap;
use std::io::IsTerminal;

use anyhow::{bail, Context, Result};
use llm_doctor_engine::report::Status;

use super::{
    Cli, Command, DiagnoseArgs, Format, GraphFormat, NvmlSamplingArgs, RecordArgs, RulesCommand,
};
use crate::pipeline::{self, Options};
use crate::report::{self, Report, TargetReport};
use crate::rules::load_rules;
use crate::source::file::read_text;

/// What a command produced.
#[derive(Debug)]
pub struct Outcome {
    /// Text for stdout.
    pub stdout: String,
    /// Exit code: 0 healthy or success, 1 problems found or tests failed.
    pub code: u8,
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<Outcome> {
    match cli.command {
        Command::Diagnose(args) => diagnose(args),
        Command::Rules(cmd) => rules(cmd),
        Command::Record(args) => record(args),
        Command::Serve(args) => {
            crate::serve::run(&args.config, args.rules.as_deref())?;
            Ok(Outcome {
                stdout: String::new(),
                code: 0,
            })
        }
        Command::Signals { format } => signals(format),
        Command::Eval(args) => eval(args),
    }
}

fn key_value(s: &str, flag: &str) -> Result<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => bail!("{flag} expects KEY=VALUE, got `{s}`"),
    }
}

fn number(v: &str, what: &str) -> Result<f64> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .with_context(|| format!("{what}: `{v}` is not a number"))
}

fn diagnose(args: DiagnoseArgs) -> Result<Outcome> {
    let rules = load_rules(args.rules.as_deref())?;
    let engine_args = match args.engine_args.as_deref() {
        Some(a) if a.starts_with('@') => Some(
            std::fs::read_to_string(&a[1..])
                .with_context(|| format!("reading --engine-args file `{}`", &a[1..]))?,
        ),
        other => other.map(str::to_string),
    };
    let facts = args
        .facts
        .iter()
        .map(|f| key_value(f, "--fact"))
        .collect::<Result<Vec<_>>>()?;
    let signals = args
        .signals
        .iter()
        .map(|s| {
            let (k, v) = key_value(s, "--signal")?;
            Ok((k.clone(), number(&v, &format!("--signal {k}"))?))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut slos = BTreeMap::new();
    for s in &args.slos {
        let (k, v) = key_value(s, "--slo")?;
        let n = number(&v, &format!("--slo {k}"))?;
        slos.insert(k, n);
    }
    let slo_values = rules
        .playbook
        .slo_values(&slos)
        .map_err(anyhow::Error::msg)
        .context("--slo")?;
    let at_ms = args
        .at
        .as_deref()
        .map(crate::time::parse_time)
        .transpose()
        .map_err(anyhow::Error::msg)
        .context("--at")?;
    let interval = positive_duration(&args.interval, "--interval")?;
    let nvml = args
        .nvml
        .then(|| {
            nvml_sampling(
                &args.nvml_sampling,
                crate::source::live::nvml::Sampling::default(),
            )
        })
        .transpose()?;
    let nvml_span_ms = nvml.map_or(0, |s| s.interval.as_millis() as i64);
    let window_ms = match &args.window {
        Some(w) => positive_duration(w, "--window")?.as_millis() as i64,
        // Two scrapes an interval apart: a window a little longer than the interval holds both
        // (and the NVML readings, taken meanwhile).
        None if !args.scrape.is_empty() => (interval.as_millis() as i64).max(nvml_span_ms) * 3 / 2,
        None => 300_000.max(nvml_span_ms * 3 / 2),
    };

    let mut inputs = Vec::new();
    let mut prepared = Vec::new();
    for f in &args.files {
        let text = read_text(f)?;
        let name = f.display().to_string();
        if crate::source::file::snapshot::looks_like(&text) {
            prepared.extend(
                crate::source::file::snapshot::parse(&text, &name, &rules.catalog, at_ms)
                    .map_err(anyhow::Error::msg)?,
            );
        } else {
            inputs.push((name, text));
        }
    }
    let mut input_warnings = Vec::new();
    let mut set = if inputs.is_empty() {
        None
    } else {
        let (set, w) = crate::source::file::parse_inputs_with_warnings(&inputs)?;
        input_warnings = w;
        Some(set)
    };
    let mut errors = Vec::new();
    let scrape_opts = if args.scrape.is_empty() {
        None
    } else {
        Some(scrape_options(&args.timeout, &args.headers)?)
    };
    // The GPUs are sampled while the endpoints are scraped, so both cover the same time.
    let (scraped, gpus) = with_nvml(nvml, || match &scrape_opts {
        Some(opts) => {
            crate::source::live::scrape::scrape(&args.scrape, 2, interval, opts, &mut |line| {
                eprintln!("{line}")
            })
        }
        None => Vec::new(),
    });
    for s in scraped {
        match s.result {
            Ok(got) => match &mut set {
                Some(all) => all.merge(got),
                None => set = Some(got),
            },
            Err(e) => errors.push(format!("{}: {e}", s.url)),
        }
    }
    // (host name, notes) of the NVML readings, for the target the GPUs join.
    let mut nvml_notes = None;
    match gpus {
        Some(Ok(c)) => {
            // Live GPU readings beside an older recording describe different times.
            let recorded_end = set
                .as_ref()
                .filter(|s| s.has_timestamps)
                .and_then(|s| s.newest_ms());
            if let (Some(end), Some(read_at)) = (recorded_end, c.set.oldest_ms()) {
                if (read_at - end).abs() > window_ms {
                    input_warnings.push(format!(
                        "the NVML readings were taken {} away from the newest sample of the other inputs, more than the {} window: they do not describe the same time (record both together with `record --scrape URL --nvml`)",
                        crate::time::format_duration((read_at - end).abs() / 1000 * 1000),
                        crate::time::format_duration(window_ms)
                    ));
                }
            }
            match &mut set {
                Some(all) => all.merge(c.set),
                None => set = Some(c.set),
            }
            nvml_notes = Some((c.hostname, c.notes));
        }
        // A failing source does not abort the diagnosis: its GPU checks become unknown.
        Some(Err(e)) if set.is_some() || !prepared.is_empty() => errors.push(e.to_string()),
        Some(Err(e)) if args.scrape.is_empty() => bail!("{e}"),
        Some(Err(e)) => errors.push(e.to_string()),
        None => {}
    }
    let options = Options {
        engine_args,
        facts,
        signals,
        at_ms,
        window_ms,
        selector: args
            .selector
            .as_deref()
            .map(crate::signal::selector::Selector::parse)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        engine: args.engine.clone(),
    };
    if let Some(url) = &args.prom.prometheus {
        if !args.files.is_empty() || !args.scrape.is_empty() || args.nvml {
            bail!("--prometheus cannot be combined with files, --scrape or --nvml");
        }
        let live = crate::source::live::prometheus::LiveOptions {
            url: url.clone(),
            auth: prometheus_auth(&args.prom, &args.headers)?,
            timeout: positive_duration(&args.timeout, "--timeout")?,
            concurrency: crate::source::live::prometheus::DEFAULT_CONCURRENCY,
        };
        let started = std::time::Instant::now();
        let result =
            crate::source::live::prometheus::prepare_from_prometheus(&rules, &live, &options)
                .with_context(|| format!("querying Prometheus at {url}"))?;
        eprintln!(
            "queried {url}: {} queries in {} ms (slowest {} ms), {} targets",
            result.queries,
            started.elapsed().as_millis(),
            result.slowest_query.as_millis(),
            result.prepared.len()
        );
        prepared.extend(result.prepared);
        errors.extend(result.errors);
    }
    if set.is_none() && prepared.is_empty() && args.prom.prometheus.is_none() {
        if args.nvml {
            bail!("no source could be read:\n  {}", errors.join("\n  "));
        }
        bail!("no endpoint could be scraped:\n  {}", errors.join("\n  "));
    }
    if let Some(set) = &set {
        prepared.extend(pipeline::prepare(set, &rules, &options)?);
    }
    if let Some((host, notes)) = &nvml_notes {
        let n = prepared.len();
        for p in &mut prepared {
            if crate::source::live::nvml::is_local_target(&p.snapshot.target.labels, host, n) {
                p.notes.extend(notes.iter().cloned());
            }
        }
    }
    if let Some(path) = &args.save_snapshot {
        let json = path.extension().is_some_and(|e| e == "json");
        std::fs::write(
            path,
            crate::source::file::snapshot::write(&prepared, &rules.catalog, json),
        )
        .with_context(|| format!("writing `{}`", path.display()))?;
    }
    let mut targets: Vec<TargetReport> = prepared
        .into_iter()
        .map(|p| {
            let mut t = TargetReport::diagnose(&rules.playbook, p, &slo_values);
            t.notes.extend(input_warnings.iter().cloned());
            t
        })
        .collect();
    // Worst first, so a fleet's problems lead.
    targets.sort_by(|a, b| {
        b.diagnosis
            .status
            .cmp(&a.diagnosis.status)
            .then_with(|| a.diagnosis.target.labels.cmp(&b.diagnosis.target.labels))
    });
    let report = Report { targets, errors };
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
    let format = args
        .format
        .unwrap_or(if stdout { Format::Table } else { Format::Json });
    let text = match format {
        Format::Table => report::table::render(
            &report,
            report::table::Style {
                color: stdout && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            },
        ),
        Format::Json => report::json::render(&report),
        Format::Markdown => report::markdown::render(&report),
    };
    Ok(Outcome { stdout: text, code })
}

fn eval(args: crate::cli::EvalArgs) -> Result<Outcome> {
    let rules = load_rules(args.rules.as_deref())?;
    let report = crate::score::corpus::run(&args.dir, &rules, args.split)?;
    let floors = crate::score::corpus::Floors {
        min_top1: args.min_top1,
        min_top3: args.min_top3,
        max_false_alarms: args.max_false_alarms,
    };
    let failures = floors.failures(&report);
    let mut stdout = match args.format {
        Some(Format::Json) => crate::score::corpus::render_json(&report),
        _ => crate::score::corpus::render_markdown(&report),
    };
    if args.format != Some(Format::Json) && !failures.is_empty() {
        stdout.push_str("\nFloors not met:\n");
        for f in &failures {
            stdout.push_str(&format!("  {f}\n"));
        }
    }
    Ok(Outcome {
        stdout,
        code: u8::from(!failures.is_empty()),
    })
}

/// `--nvml-samples` and `--nvml-interval` as a sampling plan.
fn nvml_sampling(
    args: &NvmlSamplingArgs,
    default: crate::source::live::nvml::Sampling,
) -> Result<crate::source::live::nvml::Sampling> {
    let samples = args.nvml_samples.unwrap_or(default.samples);
    if samples == 0 {
        bail!("--nvml-samples must be at least 1");
    }
    let interval = match &args.nvml_interval {
        None => default.interval,
        Some(text) => {
            let ms = crate::time::parse_duration(text)
                .map_err(anyhow::Error::msg)
                .context("--nvml-interval")?;
            if ms < 0 {
                bail!("--nvml-interval must not be negative, got `{text}`");
            }
            std::time::Duration::from_millis(ms as u64)
        }
    };
    Ok(crate::source::live::nvml::Sampling { samples, interval })
}

/// Runs `work` while, when `nvml` is given, the GPUs are sampled through NVML on another thread;
/// returns both results.
fn with_nvml<T>(
    nvml: Option<crate::source::live::nvml::Sampling>,
    work: impl FnOnce() -> T,
) -> (
    T,
    Option<Result<crate::source::live::nvml::Collected, crate::source::live::nvml::NvmlError>>,
) {
    std::thread::scope(|scope| {
        let gpus = nvml.map(|s| scope.spawn(move || crate::source::live::nvml::collect_live(&s)));
        let out = work();
        let gpus = gpus.map(|h| {
            h.join().unwrap_or_else(|_| {
                Err(crate::source::live::nvml::NvmlError::Call {
                    call: "sampling".to_string(),
                    detail: "the NVML thread panicked".to_string(),
                })
            })
        });
        if let Some(Ok(c)) = &gpus {
            eprintln!(
                "read {} GPU{} through NVML ({} readings each)",
                c.gpus,
                if c.gpus == 1 { "" } else { "s" },
                c.samples
            );
        }
        (out, gpus)
    })
}

/// Credentials for `--prometheus`: flags first, then the environment.
fn prometheus_auth(
    args: &crate::cli::PrometheusArgs,
    headers: &[String],
) -> Result<crate::source::live::prometheus::PromAuth> {
    let bearer = match (&args.bearer_token, &args.bearer_token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(f)) => Some(
            std::fs::read_to_string(f)
                .with_context(|| format!("reading --bearer-token-file `{}`", f.display()))?
                .trim()
                .to_string(),
        ),
        (None, None) => std::env::var("LLM_DOCTOR_BEARER_TOKEN")
            .ok()
            .filter(|t| !t.is_empty()),
    };
    let basic = match args.basic_auth.clone().or_else(|| {
        std::env::var("LLM_DOCTOR_BASIC_AUTH")
            .ok()
            .filter(|t| !t.is_empty())
    }) {
        Some(pair) => match pair.split_once(':') {
            Some((user, pass)) => Some((user.to_string(), pass.to_string())),
            None => bail!("--basic-auth expects USER:PASSWORD"),
        },
        None => None,
    };
    Ok(crate::source::live::prometheus::PromAuth {
        bearer,
        basic,
        headers: parse_headers(headers)?,
        ca_file: args.ca_file.clone(),
    })
}

/// `--header 'Name: value'` arguments.
fn parse_headers(headers: &[String]) -> Result<Vec<(String, String)>> {
    headers
        .iter()
        .map(|h| crate::source::live::scrape::parse_header(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)
}

/// How `--scrape` and `record --scrape` talk to endpoints.
fn scrape_options(
    timeout: &str,
    headers: &[String],
) -> Result<crate::source::live::scrape::ScrapeOptions> {
    Ok(crate::source::live::scrape::ScrapeOptions {
        timeout: positive_duration(timeout, "--timeout")?,
        headers: parse_headers(headers)?,
    })
}

/// A Prometheus duration that must be longer than zero; `flag` names it in errors.
fn positive_duration(s: &str, flag: &str) -> Result<std::time::Duration> {
    let ms = crate::time::parse_duration(s)
        .map_err(anyhow::Error::msg)
        .with_context(|| flag.to_string())?;
    if ms <= 0 {
        bail!("{flag} must be longer than zero, got `{s}`");
    }
    Ok(std::time::Duration::from_millis(ms as u64))
}

fn record(args: RecordArgs) -> Result<Outcome> {
    if let Some(url) = &args.prom.prometheus {
        if !args.scrape.is_empty() || args.nvml {
            bail!("record --prometheus cannot be combined with --scrape or --nvml");
        }
        let (Some(from), Some(to)) = (&args.from, &args.to) else {
            bail!("record --prometheus needs --from and --to");
        };
        let time = |s: &str, flag: &str| {
            crate::time::parse_time(s)
                .map_err(anyhow::Error::msg)
                .with_context(|| flag.to_string())
        };
        let live = crate::source::live::prometheus::LiveOptions {
            url: url.clone(),
            auth: prometheus_auth(&args.prom, &args.headers)?,
            timeout: positive_duration(&args.timeout, "--timeout")?,
            concurrency: crate::source::live::prometheus::DEFAULT_CONCURRENCY,
        };
        let selector = args
            .selector
            .as_deref()
            .map(crate::signal::selector::Selector::parse)
            .transpose()
            .map_err(anyhow::Error::msg)?;
        let rules = load_rules(None)?;
        let (text, notes) = crate::source::live::prometheus::record_from_prometheus(
            &rules,
            &live,
            selector.as_ref(),
            time(from, "--from")?,
            time(to, "--to")?,
            positive_duration(&args.step, "--step")?.as_millis() as i64,
        )
        .with_context(|| format!("recording from Prometheus at {url}"))?;
        for n in &notes {
            eprintln!("note: {n}");
        }
        std::fs::write(&args.out, &text)
            .with_context(|| format!("writing `{}`", args.out.display()))?;
        return Ok(Outcome {
            stdout: format!("wrote {} ({} bytes)\n", args.out.display(), text.len()),
            code: 0,
        });
    }
    let opts = scrape_options(&args.timeout, &args.headers)?;
    let duration = positive_duration(&args.duration, "--duration")?;
    let interval = positive_duration(&args.interval, "--interval")?;
    // A recording reads the GPUs as often as it scrapes, over the whole duration.
    let every_interval = crate::source::live::nvml::Sampling {
        samples: (duration.as_millis() / interval.as_millis().max(1)) as usize + 1,
        interval: duration,
    };
    let nvml = args
        .nvml
        .then(|| nvml_sampling(&args.nvml_sampling, every_interval))
        .transpose()?;
    let ((text, mut errors), gpus) = with_nvml(nvml, || {
        if args.scrape.is_empty() {
            (String::new(), Vec::new())
        } else {
            crate::source::live::scrape::record(
                &args.scrape,
                duration,
                interval,
                &opts,
                &mut |line| eprintln!("{line}"),
            )
        }
    });
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
    std::fs::write(&args.out, &text)
        .with_context(|| format!("writing `{}`", args.out.display()))?;
    Ok(Outcome {
        stdout: format!("wrote {} ({} bytes)\n", args.out.display(), text.len()),
        code: u8::from(!errors.is_empty()),
    })
}

fn rules(cmd: RulesCommand) -> Result<Outcome> {
    match cmd {
        RulesCommand::Check { dir } => {
            let rules = load_rules(dir.as_deref())?;
            Ok(Outcome {
                stdout: format!(
                    "ok: {} symptoms, {} causes, {} remediations, {} SLOs; {} adapters; graph acyclic, every cause reaches a symptom\n",
                    rules.playbook.symptoms.len(),
                    rules.playbook.causes.len(),
                    rules.playbook.remediations.len(),
                    rules.playbook.slos.len(),
                    rules.adapters.list.len()
                ),
                code: 0,
            })
        }
        RulesCommand::Test { dir, rules: rdir } => {
            let rules = load_rules(rdir.as_deref())?;
            let files = crate::score::fixtures::discover(&dir)?;
            if files.is_empty() {
                bail!("no fixture tests (*.test.yaml) in `{}`", dir.display());
            }
            let mut out = String::new();
            let (mut passed, mut failed) = (0, 0);
            for f in &files {
                let r = crate::score::fixtures::run_one(f, &rules);
                let name = f
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default();
                if r.failures.is_empty() {
                    passed += 1;
                    out.push_str(&format!("ok    {name}  [{}]\n", r.causes.join(", ")));
                } else {
                    failed += 1;
                    out.push_str(&format!("FAIL  {name}\n"));
                    for x in &r.failures {
                        out.push_str(&format!("      - {x}\n"));
                    }
                }
            }
            out.push_str(&format!("{passed} passed, {failed} failed\n"));
            Ok(Outcome {
                stdout: out,
                code: u8::from(failed > 0),
            })
        }
        RulesCommand::Explain { id, rules: rdir } => {
            let rules = load_rules(rdir.as_deref())?;
            Ok(Outcome {
                stdout: crate::report::explain::explain(&rules, &id)?,
                code: 0,
            })
        }
        RulesCommand::Export {
            format: crate::cli::ExportFormat::Prometheus,
            engine,
            window,
            for_,
            rules: rdir,
        } => {
            let rules = load_rules(rdir.as_deref())?;
            Ok(Outcome {
                stdout: crate::export::export_prometheus(
                    &rules,
                    engine.as_deref(),
                    &window,
                    &for_,
                )?,
                code: 0,
            })
        }
        RulesCommand::Graph {
            format,
            rules: rdir,
        } => {
            let rules = load_rules(rdir.as_deref())?;
            Ok(Outcome {
                stdout: crate::report::graph::graph(
                    &rules.playbook,
                    format == GraphFormat::Mermaid,
                ),
                code: 0,
            })
        }
    }
}

fn signals(format: Format) -> Result<Outcome> {
    let rules = load_rules(None)?;
    let c = &rules.catalog;
    let stdout = if format == Format::Json {
        let v = serde_json::json!({"signals": c.signals(), "facts": c.facts()});
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else {
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::NOTHING);
        t.set_header(vec![
            "signal",
            "unit",
            "group",
            "provided by",
            "description",
        ]);
        for s in c.signals() {
            let by: Vec<&str> = rules
                .adapters
                .list
                .iter()
                .filter(|a| a.signals.contains_key(&s.name))
                .map(|a| a.name.as_str())
                .collect();
            t.add_row(vec![
                s.name.clone(),
                s.unit.clone(),
                s.group.clone(),
                if by.is_empty() {
                    "--signal".into()
                } else {
                    by.join(", ")
                },
                s.description.clone(),
            ]);
        }
        let mut f = comfy_table::Table::new();
        f.load_style(comfy_table::presets::NOTHING);
        f.set_header(vec!["fact", "type", "description"]);
        for x in c.facts() {
            f.add_row(vec![
                x.name.clone(),
                format!("{:?}", x.ty).to_lowercase(),
                x.description.clone(),
            ]);
        }
        format!("SIGNALS\n{t}\n\nFACTS\n{f}\n")
    };
    Ok(Outcome { stdout, code: 0 })
}
