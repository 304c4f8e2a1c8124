//! A prepared target and what the user gives beyond the inputs: [`Options`] (the serve command
//! line, `--fact`, `--signal`, the window, the selector), [`Prepared`] (a snapshot with notes),
//! and the facts every source adds the same way ([`add_facts`], fed by a [`FactSource`]).
//!
//! It sits below every source and the pipeline, so a source can yield prepared targets (a
//! snapshot file, a Prometheus API) without knowing the pipeline that prepares the others.
//!
//! Fact precedence, lowest first: the engine's defaults, info metrics (`vllm:cache_config_info`),
//! labels of the engine's series (`model_name`), the serve command line (`--engine-args`), and
//! `--fact`. `--signal` adds measurements the metrics lack (a gateway's client-side TTFT, say).

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use llm_doctor_engine::{FactValue, SignalValue, Snapshot};

use crate::rules::Rules;
use crate::signal::adapter::spec::SeriesSelector;
use crate::signal::adapter::AdapterSpec;
use crate::signal::engine_args;

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

pub(crate) fn dedup(mut v: Vec<&str>) -> Vec<&str> {
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
    fn gauge_fact(&self, fact: &str, selector: &SeriesSelector) -> Option<f64>;
    /// The smallest value of `label` over the engine's own series (`detect` prefixes).
    fn engine_label(&self, engine: &AdapterSpec, label: &str) -> Option<String>;
}

/// The source of a signal the user gave with `--signal`: a value no reading replaces.
pub(crate) const GIVEN_SIGNAL: &str = "--signal";

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
                    source: GIVEN_SIGNAL.to_string(),
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
    // One source for all of them: a postmortem sets them again at every step.
    let source = format!("{} {what}", engine.name);
    for (fact, value) in defaults {
        let text = match value {
            serde_yaml::Value::Bool(b) => {
                std::borrow::Cow::Borrowed(if *b { "true" } else { "false" })
            }
            serde_yaml::Value::Number(n) => std::borrow::Cow::Owned(n.to_string()),
            serde_yaml::Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
            other => bail!(
                "{}: default for `{fact}` must be a scalar, got {other:?}",
                engine.name
            ),
        };
        snapshot.set_fact_str(&rules.catalog, fact, &text, source.clone())?;
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

fn describe_selector(s: &SeriesSelector) -> String {
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
