//! From inputs to snapshots: read files, split targets, compute signals, gather facts.
//!
//! Fact precedence, lowest first: the engine's defaults, info metrics (`vllm:cache_config_info`),
//! labels of the engine's series (`model_name`), the serve command line (`--engine-args`), and
//! `--fact`. `--signal` adds measurements the metrics lack (a gateway's client-side TTFT, say).

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use llm_doctor_engine::{FactValue, SignalValue, Snapshot, Window};

use crate::rules::Rules;
use crate::signal::adapter::eval::{Frame, InstantMemo, Stat, TargetSeries};
use crate::signal::adapter::spec::{Expr, Selector};
use crate::signal::adapter::{fill_signals_from, AdapterSpec, TargetInput};
use crate::signal::engine_args;
use crate::signal::series::SeriesSet;

/// What the user asked for, beyond the inputs.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Serve command line.
    pub engine_args: Option<String>,
    /// `--fact key=value`, in order.
    pub facts: Vec<(String, String)>,
    /// `--signal name=value`, in order.
    pub signals: Vec<(String, f64)>,
    /// End of the window (ms); default: the newest sample.
    pub at_ms: Option<i64>,
    /// Window length (ms).
    pub window_ms: i64,
    /// Only targets whose identity labels match.
    pub selector: Option<crate::signal::selector::Selector>,
    /// Read the metrics as this engine's only (`--engine`), when names alone mislead.
    pub engine: Option<String>,
}

/// A snapshot with notes about how it was assembled.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The snapshot to diagnose.
    pub snapshot: Snapshot,
    /// Joins, guesses and caveats to show the reader.
    pub notes: Vec<String>,
}

/// Keeps only the engine adapters of `engine` (GPU and host adapters stay).
pub(crate) fn restrict_to_engine(
    adapters: &crate::signal::adapter::Adapters,
    engine: &str,
) -> Result<crate::signal::adapter::Adapters> {
    let engines: Vec<&str> = adapters.engines().map(|a| a.engine_name()).collect();
    if !engines.contains(&engine) {
        let hint = llm_doctor_engine::suggest::hint(engine, engines.iter().copied());
        bail!(
            "--engine: unknown engine `{engine}`{hint}; engines: {}",
            dedup(engines).join(", ")
        );
    }
    let mut out = adapters.clone();
    out.list.retain(|a| {
        a.kind != crate::signal::adapter::AdapterKind::Engine || a.engine_name() == engine
    });
    Ok(out)
}

fn dedup(mut v: Vec<&str>) -> Vec<&str> {
    v.sort_unstable();
    v.dedup();
    v
}

/// `--engine-args`, parsed.
pub(crate) fn parse_engine_args(
    opts: &Options,
    rules: &Rules,
) -> Result<Option<engine_args::CommandLineFacts>> {
    opts.engine_args
        .as_deref()
        .map(|text| {
            engine_args::parse(text, &rules.adapters, &rules.catalog)
                .map_err(|e| anyhow::anyhow!("--engine-args: {e}"))
        })
        .transpose()
}

/// The window every target is read over: ending at `--at` or the newest sample.
fn frame_of(set: &SeriesSet, opts: &Options) -> Result<Frame> {
    Ok(if set.has_timestamps {
        let end = opts
            .at_ms
            .or(set.newest_ms())
            .context("the input has no samples")?;
        if let (Some(at), Some(oldest)) = (opts.at_ms, set.oldest_ms()) {
            if at < oldest {
                bail!(
                    "--at {} is before the first sample ({}): nothing to diagnose",
                    crate::time::format_time(at),
                    crate::time::format_time(oldest)
                );
            }
        }
        if let (Some(at), Some(newest)) = (opts.at_ms, set.newest_ms()) {
            if at.saturating_sub(opts.window_ms) >= newest {
                bail!(
                    "--at {} is more than the {} window after the last sample ({}): nothing in the window to diagnose",
                    crate::time::format_time(at),
                    crate::time::format_duration(opts.window_ms),
                    crate::time::format_time(newest)
                );
            }
        }
        // A rate needs two samples in the window.
        if let Some(step) = set.scrape_interval_ms() {
            if opts.window_ms <= step {
                bail!(
                    "--window {} holds at most one sample: the input is scraped every {}; use at least {}",
                    crate::time::format_duration(opts.window_ms),
                    crate::time::format_duration(step),
                    crate::time::format_duration(2 * step)
                );
            }
        }
        Frame {
            end_ms: Some(end),
            window_ms: opts.window_ms,
        }
    } else {
        Frame {
            end_ms: None,
            window_ms: opts.window_ms,
        }
    })
}

/// Fewest targets worth a thread of their own (one takes tens of microseconds).
pub const TARGETS_PER_THREAD: usize = 16;

/// Builds one snapshot per target found in `set`.
pub fn prepare(set: &SeriesSet, rules: &Rules, opts: &Options) -> Result<Vec<Prepared>> {
    let split = Split::new(set, rules, opts)?;
    let frame = frame_of(set, opts)?;
    // Targets are independent: a fleet is prepared on every core.
    crate::parallel::map_indexed(split.len(), TARGETS_PER_THREAD, |i| {
        split.prepare_at(i, frame)
    })
    .into_iter()
    .collect()
}

/// The targets of a series set, found once, so that each can be prepared over any window: a
/// postmortem prepares them at every step of a range.
pub struct Split<'a> {
    inputs: Vec<TargetInput<'a>>,
    /// Each target's series indexed by name, once.
    indexed: Vec<TargetSeries<'a>>,
    /// Each target's combined-gauge instant values, reused as the window slides.
    memos: Vec<std::sync::Mutex<InstantMemo>>,
    command_line: Option<engine_args::CommandLineFacts>,
    rules: &'a Rules,
    opts: &'a Options,
}

impl<'a> Split<'a> {
    /// Splits `set` into targets (engine, GPU and host series joined), keeping those the
    /// selector matches.
    pub fn new(set: &'a SeriesSet, rules: &'a Rules, opts: &'a Options) -> Result<Split<'a>> {
        let command_line = parse_engine_args(opts, rules)?;
        let adapters = match &opts.engine {
            Some(e) => restrict_to_engine(&rules.adapters, e)?,
            None => rules.adapters.clone(),
        };
        let inputs = split_targets(set, rules, opts, &adapters)?;
        // Each target's index is its own work: a fleet's are built on every core.
        let indexed = crate::parallel::map_indexed(inputs.len(), TARGETS_PER_THREAD, |i| {
            TargetSeries::new(inputs[i].series.iter().copied())
        });
        let memos = inputs.iter().map(|_| Default::default()).collect();
        Ok(Split {
            inputs,
            indexed,
            memos,
            command_line,
            rules,
            opts,
        })
    }

    /// How many targets.
    pub fn len(&self) -> usize {
        self.inputs.len()
    }

    /// Target `i`'s identity.
    pub fn target(&self, i: usize) -> &llm_doctor_engine::Target {
        &self.inputs[i].target
    }

    /// Whether there are none (never, after [`Split::new`] succeeded).
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// Target `i` prepared over `frame`. Windows of one target are best taken in time order:
    /// instant values of the previous window are reused.
    pub fn prepare_at(&self, i: usize, frame: Frame) -> Result<Prepared> {
        self.prepare(i, frame, true)
    }

    /// [`Split::prepare_at`] without the signals' provenance (`source` left empty): what a
    /// postmortem's steps need, at a fraction of the cost.
    pub fn values_at(&self, i: usize, frame: Frame) -> Result<Prepared> {
        self.prepare(i, frame, false)
    }

    fn prepare(&self, i: usize, frame: Frame, provenance: bool) -> Result<Prepared> {
        let mut memo = self.memos[i]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        prepare_target(
            &self.inputs[i],
            (&self.indexed[i], &mut memo, provenance),
            frame,
            self.command_line.as_ref(),
            self.rules,
            self.opts,
        )
    }
}

/// The targets of `set`, or an error that says why there are none.
fn split_targets<'a>(
    set: &'a SeriesSet,
    rules: &Rules,
    opts: &Options,
    adapters: &crate::signal::adapter::Adapters,
) -> Result<Vec<TargetInput<'a>>> {
    let mut targets = crate::target::split(set, adapters);
    if targets.is_empty() {
        let prefixes: Vec<String> = rules
            .adapters
            .list
            .iter()
            .flat_map(|a| a.detect.iter().map(|p| format!("`{p}`")))
            .collect();
        bail!(
            "no serving-engine, GPU or host metrics found in the input (recognised prefixes: {})",
            prefixes.join(", ")
        );
    }

    if let Some(e) = &opts.engine {
        if !targets.iter().any(|t| t.engine.is_some()) {
            let found: Vec<&str> = rules
                .adapters
                .engines()
                .filter(|a| {
                    set.series.iter().any(|s| {
                        rules
                            .adapters
                            .owner(&s.name)
                            .is_some_and(|o| o.name == a.name)
                    })
                })
                .map(|a| a.engine_name())
                .collect();
            bail!(
                "--engine {e}: no {e} metrics in the input{}",
                if found.is_empty() {
                    String::new()
                } else {
                    format!(" (found {})", dedup(found).join(", "))
                }
            );
        }
    }
    if let Some(sel) = &opts.selector {
        let before = targets.len();
        targets.retain(|t| sel.matches(&t.target.labels));
        if targets.is_empty() {
            bail!("--selector matches none of the {before} targets in the input");
        }
    }
    let max = max_targets();
    if targets.len() > max {
        bail!(
            "{} targets in the input, more than the {max} diagnosed at once (LLM_DOCTOR_MAX_TARGETS raises the limit; --selector narrows the input)",
            targets.len()
        );
    }
    Ok(targets)
}

/// The most targets one run diagnoses: `LLM_DOCTOR_MAX_TARGETS`, else 10,000. Each costs tens of
/// kilobytes of report; a million one-sample pods must be an error, not a process killed for
/// memory.
pub fn max_targets() -> usize {
    std::env::var("LLM_DOCTOR_MAX_TARGETS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(10_000)
}

fn prepare_target(
    input: &TargetInput<'_>,
    (indexed, memo, provenance): (&TargetSeries<'_>, &mut InstantMemo, bool),
    frame: Frame,
    command_line: Option<&engine_args::CommandLineFacts>,
    rules: &Rules,
    opts: &Options,
) -> Result<Prepared> {
    let catalog = &rules.catalog;
    let mut snapshot = Snapshot::new(catalog, input.target.clone());
    let mut notes = input.notes.clone();
    snapshot.window = Window {
        end_ms: frame.end_ms,
        length_ms: frame.end_ms.map(|_| frame.window_ms),
        lifetime: frame.end_ms.is_none(),
    };
    if frame.end_ms.is_none() {
        notes.push(
            "the input has no timestamps: values are averages since the server started, and per-second rates are unknown"
                .to_string(),
        );
    }
    fill_signals_from(
        &mut snapshot,
        catalog,
        &rules.adapters,
        input,
        (indexed, Some(memo)),
        frame,
        &opts.facts,
        provenance,
    );
    let engine = input.engine.as_deref().and_then(|e| rules.adapters.get(e));
    let source = SeriesFacts { indexed, frame };
    let user = UserInputs {
        command_line,
        facts: &opts.facts,
        signals: &opts.signals,
    };
    add_facts(
        &mut snapshot,
        &mut notes,
        rules,
        (&input.adapters, engine),
        &source,
        &user,
    )?;
    Ok(Prepared { snapshot, notes })
}

/// What the user said beyond the metrics: the serve command line, `--fact` and `--signal`.
pub(crate) struct UserInputs<'a> {
    /// Facts from `--engine-args`.
    pub command_line: Option<&'a engine_args::CommandLineFacts>,
    /// `--fact key=value`, in order.
    pub facts: &'a [(String, String)],
    /// `--signal name=value`, in order.
    pub signals: &'a [(String, f64)],
}

/// Where a target's engine facts and versions are read from: a recording's series, or
/// Prometheus' answers (`crate::source::live::prometheus`). Both feed [`add_facts`], so the precedence of facts
/// cannot differ between the two.
pub(crate) trait FactSource {
    /// Whether the target has a series with this sample name.
    fn has_metric(&self, name: &str) -> bool;
    /// A label of the target's (first) series of an info metric.
    fn info_label(&self, metric: &str, label: &str) -> Option<&str>;
    /// A gauge fact's value: the maximum over the target's series of the selector, last value
    /// in the window.
    fn gauge_fact(&self, fact: &str, selector: &Selector) -> Option<f64>;
    /// The smallest value of `label` over the engine's own series (`detect` prefixes).
    fn engine_label(&self, engine: &AdapterSpec, label: &str) -> Option<String>;
}

/// [`FactSource`] over a recording's series, through the target's index (a postmortem asks at
/// every step).
struct SeriesFacts<'a, 'b> {
    indexed: &'a TargetSeries<'b>,
    frame: Frame,
}

impl FactSource for SeriesFacts<'_, '_> {
    fn has_metric(&self, name: &str) -> bool {
        !self.indexed.named(name).is_empty()
    }

    fn info_label(&self, metric: &str, label: &str) -> Option<&str> {
        // One series per engine index under data parallelism; they agree on configuration.
        self.indexed.named(metric).first()?.labels.get(label)
    }

    fn gauge_fact(&self, _fact: &str, selector: &Selector) -> Option<f64> {
        let expr = Expr::Max(Box::new(Expr::Gauge(selector.clone())));
        crate::signal::adapter::eval::eval_signal(&expr, self.indexed, self.frame, Stat::Last).ok()
    }

    fn engine_label(&self, engine: &AdapterSpec, label: &str) -> Option<String> {
        self.indexed.least_label(&engine.detect, label)
    }
}

/// Everything after the signals: exporters' versions (as notes), then facts from lowest
/// precedence to highest — the engine's version, name and defaults, info metrics, gauge facts,
/// label facts, `--engine-args`, `--fact` — and finally `--signal`. `present` names the
/// adapters joined to the target and its engine adapter, if any.
pub(crate) fn add_facts(
    snapshot: &mut Snapshot,
    notes: &mut Vec<String>,
    rules: &Rules,
    present: (&[String], Option<&AdapterSpec>),
    source: &dyn FactSource,
    user: &UserInputs<'_>,
) -> Result<()> {
    let catalog = &rules.catalog;
    let (adapters, engine) = present;
    // Exporters' versions are worth a note (engines' become the engine_version fact below).
    for a in rules
        .adapters
        .list
        .iter()
        .filter(|a| a.kind != crate::signal::adapter::AdapterKind::Engine)
    {
        if !adapters.contains(&a.name) {
            continue;
        }
        if let Some(v) = a.versions.iter().find(|v| source.has_metric(&v.metric)) {
            notes.push(format!("{}: {}", a.name, v.version));
        }
    }

    if let Some(engine) = engine {
        apply_engine_facts(snapshot, rules, engine, source, notes)?;
    }
    if let Some(cl) = user.command_line {
        apply_command_line(snapshot, notes, rules, cl)?;
    }
    for (fact, value) in user.facts {
        snapshot
            .set_fact_str(catalog, fact, value, "--fact")
            .map_err(|e| {
                anyhow::anyhow!("--fact {fact}={value}: {e}{}", suggest_fact(rules, fact))
            })?;
    }
    for (name, value) in user.signals {
        snapshot
            .set_signal(
                catalog,
                name,
                SignalValue {
                    value: *value,
                    stats: None,
                    source: "--signal".to_string(),
                },
            )
            .map_err(|e| {
                anyhow::anyhow!(
                    "--signal {name}={value}: {e}{}",
                    suggest_signal(rules, name)
                )
            })?;
    }
    Ok(())
}

/// The serve command line's facts, over the engine's defaults for what it leaves unset.
fn apply_command_line(
    snapshot: &mut Snapshot,
    notes: &mut Vec<String>,
    rules: &Rules,
    cl: &engine_args::CommandLineFacts,
) -> Result<()> {
    if snapshot
        .target
        .engine
        .as_deref()
        .is_some_and(|e| e != cl.engine)
    {
        notes.push(format!(
            "--engine-args describe a {} server but the metrics are from {}; flags applied anyway",
            cl.engine,
            snapshot.target.engine.as_deref().unwrap_or("?")
        ));
    }
    // The command line is known, so what it leaves unset is the engine's default.
    if let Some(a) = rules
        .adapters
        .engines()
        .find(|a| a.engine_name() == cl.engine && !a.command_line_defaults.is_empty())
    {
        set_defaults(
            snapshot,
            rules,
            a,
            &a.command_line_defaults,
            "default (not set on the command line)",
        )?;
    }
    for (fact, value) in &cl.facts {
        snapshot
            .set_fact_str(&rules.catalog, fact, value, "engine args")
            .with_context(|| format!("--engine-args: `{value}` for {fact}"))?;
    }
    Ok(())
}

fn suggest_fact(rules: &Rules, name: &str) -> String {
    llm_doctor_engine::suggest::hint(name, rules.catalog.facts().iter().map(|f| f.name.as_str()))
}

fn suggest_signal(rules: &Rules, name: &str) -> String {
    llm_doctor_engine::suggest::hint(
        name,
        rules.catalog.signals().iter().map(|s| s.name.as_str()),
    )
}

/// Sets an adapter's default facts, with `what` in their provenance.
fn set_defaults(
    snapshot: &mut Snapshot,
    rules: &Rules,
    engine: &AdapterSpec,
    defaults: &BTreeMap<String, serde_yaml::Value>,
    what: &str,
) -> Result<()> {
    for (fact, value) in defaults {
        let text = match value {
            serde_yaml::Value::Bool(b) => b.to_string(),
            serde_yaml::Value::Number(n) => n.to_string(),
            serde_yaml::Value::String(s) => s.clone(),
            other => bail!(
                "{}: default for `{fact}` must be a scalar, got {other:?}",
                engine.name
            ),
        };
        snapshot.set_fact_str(
            &rules.catalog,
            fact,
            &text,
            format!("{} {what}", engine.name),
        )?;
    }
    Ok(())
}

/// Engine defaults, then info-metric labels, then series labels.
fn apply_engine_facts(
    snapshot: &mut Snapshot,
    rules: &Rules,
    engine: &AdapterSpec,
    source: &dyn FactSource,
    notes: &mut Vec<String>,
) -> Result<()> {
    let catalog = &rules.catalog;
    if let Some(v) = engine
        .versions
        .iter()
        .find(|v| source.has_metric(&v.metric))
    {
        snapshot.set_fact(
            catalog,
            "engine_version",
            FactValue::Str(v.version.clone()),
            format!("metric {}", v.metric),
        )?;
    }
    snapshot.set_fact(
        catalog,
        "engine",
        FactValue::Str(engine.engine_name().to_string()),
        "detected from metric names",
    )?;
    set_defaults(snapshot, rules, engine, &engine.defaults, "default")?;
    for info in &engine.info_facts {
        for (label, fact) in &info.labels {
            let Some(value) = source.info_label(&info.metric, label) else {
                continue;
            };
            if value.is_empty() || value == "None" {
                continue;
            }
            if let Err(e) = snapshot.set_fact_str(catalog, fact, value, info.metric.clone()) {
                notes.push(format!(
                    "{}: label {label}=\"{value}\" ignored: {e}",
                    info.metric
                ));
            }
        }
    }
    for (fact, selector) in &engine.gauge_facts {
        if let Some(v) = source.gauge_fact(fact, selector) {
            snapshot.set_fact(
                catalog,
                fact,
                FactValue::Number(v),
                format!("metric {}", describe_selector(selector)),
            )?;
        }
    }
    for (label, fact) in &engine.label_facts {
        if let Some(v) = source.engine_label(engine, label) {
            snapshot.set_fact_str(catalog, fact, &v, format!("label {label}"))?;
        }
    }
    Ok(())
}

fn describe_selector(s: &Selector) -> String {
    let name = s.metric.values().first().copied().unwrap_or("").to_string();
    let labels: Vec<String> = s
        .matchers
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.values().join("|")))
        .collect();
    if labels.is_empty() {
        name
    } else {
        format!("{name}{{{}}}", labels.join(","))
    }
}
