//! From inputs to snapshots: read files, split targets, compute signals, gather facts.
//!
//! Fact precedence, lowest first: the engine's defaults, info metrics (`vllm:cache_config_info`),
//! labels of the engine's series (`model_name`), the serve command line (`--engine-args`), and
//! `--fact`. `--signal` adds measurements the metrics lack (a gateway's client-side TTFT, say).

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use llm_doctor_engine::{FactValue, SignalValue, Snapshot, Window};

use crate::adapter::eval::{Frame, Stat, TargetSeries};
use crate::adapter::spec::{Expr, Selector};
use crate::adapter::{fill_signals, AdapterSpec, TargetInput};
use crate::engine_args;
use crate::exposition;
use crate::rules::Rules;
use crate::series::SeriesSet;

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
    pub selector: Option<crate::selector::Selector>,
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
fn restrict_to_engine(
    adapters: &crate::adapter::Adapters,
    engine: &str,
) -> Result<crate::adapter::Adapters> {
    let engines: Vec<&str> = adapters.engines().map(|a| a.engine_name()).collect();
    if !engines.contains(&engine) {
        let hint = llm_doctor_engine::suggest::did_you_mean(engine, engines.iter().copied())
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        bail!(
            "--engine: unknown engine `{engine}`{hint}; engines: {}",
            dedup(engines).join(", ")
        );
    }
    let mut out = adapters.clone();
    out.list
        .retain(|a| a.kind != crate::adapter::AdapterKind::Engine || a.engine_name() == engine);
    Ok(out)
}

fn dedup(mut v: Vec<&str>) -> Vec<&str> {
    v.sort_unstable();
    v.dedup();
    v
}

/// Reads and merges exposition files and saved Prometheus API answers; also returns warnings
/// (partial answers, skipped samples) to show beside the diagnosis. `(name, text)` pairs
/// keep this free of file I/O.
pub fn parse_inputs_with_warnings(inputs: &[(String, String)]) -> Result<(SeriesSet, Vec<String>)> {
    let mut warnings = Vec::new();
    let mut set: Option<SeriesSet> = None;
    for (name, text) in inputs {
        let mut parsed = if crate::api_json::looks_like(text) {
            let p = crate::api_json::parse_with_warnings(text, name).map_err(anyhow::Error::new)?;
            warnings.extend(p.warnings);
            p.set
        } else {
            exposition::parse(text, name).map_err(anyhow::Error::new)?
        };
        if parsed.series.is_empty() {
            bail!("{name}: no samples (an empty file, or only comments)");
        }
        // Pages saved with curl carry no target labels: with several files, each file is a
        // target of its own, named after the file, so replicas are not mixed up.
        if inputs.len() > 1
            && parsed
                .series
                .iter()
                .all(|s| s.labels.get("instance").is_none() && s.labels.get("pod").is_none())
        {
            for s in &mut parsed.series {
                let mut pairs = s.labels.0.clone();
                pairs.push(("instance".to_string(), name.clone()));
                s.labels = crate::series::Labels::new(pairs);
            }
            parsed.normalize();
        }
        match &mut set {
            None => set = Some(parsed),
            Some(s) => s.merge(parsed),
        }
    }
    Ok((set.context("no input files")?, warnings))
}

/// Reads and merges inputs, dropping warnings (partial answers and the like).
pub fn parse_inputs(inputs: &[(String, String)]) -> Result<SeriesSet> {
    parse_inputs_with_warnings(inputs).map(|(set, _)| set)
}

/// Builds one snapshot per target found in `set`.
pub fn prepare(set: &SeriesSet, rules: &Rules, opts: &Options) -> Result<Vec<Prepared>> {
    let command_line = match &opts.engine_args {
        Some(text) => Some(
            engine_args::parse(text, &rules.adapters, &rules.catalog)
                .map_err(|e| anyhow::anyhow!("--engine-args: {e}"))?,
        ),
        None => None,
    };
    let adapters = match &opts.engine {
        Some(e) => restrict_to_engine(&rules.adapters, e)?,
        None => rules.adapters.clone(),
    };
    let mut targets = crate::targets::split(set, &adapters);
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

    let frame = if set.has_timestamps {
        let end = opts
            .at_ms
            .or(set.newest_ms())
            .context("the input has no samples")?;
        if let (Some(at), Some(oldest)) = (opts.at_ms, set.oldest_ms()) {
            if at < oldest {
                bail!(
                    "--at {} is before the first sample ({}): nothing to diagnose",
                    crate::render::format_time(at),
                    crate::render::format_time(oldest)
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
    };

    let mut out = Vec::new();
    for input in targets {
        out.push(prepare_target(
            &input,
            frame,
            command_line.as_ref(),
            rules,
            opts,
        )?);
    }
    Ok(out)
}

fn prepare_target(
    input: &TargetInput<'_>,
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
    fill_signals(&mut snapshot, catalog, &rules.adapters, input, frame);
    // Exporters' versions are worth a note (engines' become the engine_version fact below).
    for a in rules
        .adapters
        .list
        .iter()
        .filter(|a| a.kind != crate::adapter::AdapterKind::Engine)
    {
        if !input.adapters.contains(&a.name) {
            continue;
        }
        if let Some(v) = a
            .versions
            .iter()
            .find(|v| input.series.iter().any(|s| s.name == v.metric))
        {
            notes.push(format!("{}: {}", a.name, v.version));
        }
    }

    let engine = input.engine.as_deref().and_then(|e| rules.adapters.get(e));
    if let Some(engine) = engine {
        apply_engine_facts(&mut snapshot, rules, engine, input, frame, &mut notes)?;
    }
    if let Some(cl) = command_line {
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
        for (fact, value) in &cl.facts {
            snapshot
                .set_fact_str(catalog, fact, value, "engine args")
                .with_context(|| format!("--engine-args: `{value}` for {fact}"))?;
        }
    }
    for (fact, value) in &opts.facts {
        snapshot
            .set_fact_str(catalog, fact, value, "--fact")
            .map_err(|e| {
                anyhow::anyhow!("--fact {fact}={value}: {e}{}", suggest_fact(rules, fact))
            })?;
    }
    for (name, value) in &opts.signals {
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
    Ok(Prepared { snapshot, notes })
}

fn suggest_fact(rules: &Rules, name: &str) -> String {
    llm_doctor_engine::suggest::did_you_mean(
        name,
        rules.catalog.facts().iter().map(|f| f.name.as_str()),
    )
    .map(|s| format!(" (did you mean `{s}`?)"))
    .unwrap_or_default()
}

fn suggest_signal(rules: &Rules, name: &str) -> String {
    llm_doctor_engine::suggest::did_you_mean(
        name,
        rules.catalog.signals().iter().map(|s| s.name.as_str()),
    )
    .map(|s| format!(" (did you mean `{s}`?)"))
    .unwrap_or_default()
}

/// Engine defaults, then info-metric labels, then series labels.
fn apply_engine_facts(
    snapshot: &mut Snapshot,
    rules: &Rules,
    engine: &AdapterSpec,
    input: &TargetInput<'_>,
    frame: Frame,
    notes: &mut Vec<String>,
) -> Result<()> {
    let catalog = &rules.catalog;
    if let Some(v) = engine
        .versions
        .iter()
        .find(|v| input.series.iter().any(|s| s.name == v.metric))
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
    for (fact, value) in &engine.defaults {
        let text = match value {
            serde_yaml::Value::Bool(b) => b.to_string(),
            serde_yaml::Value::Number(n) => n.to_string(),
            serde_yaml::Value::String(s) => s.clone(),
            other => bail!(
                "{}: default for `{fact}` must be a scalar, got {other:?}",
                engine.name
            ),
        };
        snapshot.set_fact_str(catalog, fact, &text, format!("{} default", engine.name))?;
    }
    for info in &engine.info_facts {
        // One series per engine index under data parallelism; they agree on configuration.
        let Some(series) = input.series.iter().find(|s| s.name == info.metric) else {
            continue;
        };
        for (label, fact) in &info.labels {
            let Some(value) = series.labels.get(label) else {
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
    let ts = TargetSeries::new(input.series.iter().copied());
    for (fact, selector) in &engine.gauge_facts {
        let expr = Expr::Max(Box::new(Expr::Gauge(selector.clone())));
        if let Ok(v) = crate::adapter::eval::eval_signal(&expr, &ts, frame, Stat::Last) {
            snapshot.set_fact(
                catalog,
                fact,
                FactValue::Number(v),
                format!("metric {}", describe_selector(selector)),
            )?;
        }
    }
    for (label, fact) in &engine.label_facts {
        let mut values: BTreeMap<&str, ()> = BTreeMap::new();
        for s in &input.series {
            if engine.detect.iter().any(|p| s.name.starts_with(p.as_str())) {
                if let Some(v) = s.labels.get(label) {
                    values.insert(v, ());
                }
            }
        }
        if let Some((v, _)) = values.iter().next() {
            snapshot.set_fact_str(catalog, fact, v, format!("label {label}"))?;
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
