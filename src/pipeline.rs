//! From series to snapshots: split targets, compute signals, gather facts (through
//! [`crate::prepared::add_facts`], which a Prometheus API's answers go through too).

use anyhow::{bail, Context, Result};
use llm_doctor_engine::{Snapshot, Window};

use crate::prepared::{
    add_facts, parse_engine_args, restrict_to_engine, FactSource, Options, Prepared, UserInputs,
};
use crate::rules::Rules;
use crate::signal::adapter::eval::{Frame, InstantMemo, Stat, TargetSeries};
use crate::signal::adapter::spec::{Expr, SeriesSelector};
use crate::signal::adapter::{fill_signals_from, AdapterSpec, TargetInput};
use crate::signal::engine_args;
use crate::signal::series::SeriesSet;

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

/// Builds one snapshot per target found in `set`.
pub fn prepare(set: &SeriesSet, rules: &Rules, opts: &Options) -> Result<Vec<Prepared>> {
    let split = Split::new(set, rules, opts)?;
    let frame = frame_of(set, opts)?;
    // Targets are independent: a fleet is prepared on every core.
    crate::parallel::map_indexed(split.len(), crate::parallel::TARGETS_PER_THREAD, |i| {
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
        let indexed =
            crate::parallel::map_indexed(inputs.len(), crate::parallel::TARGETS_PER_THREAD, |i| {
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
                    format!(" (found {})", crate::prepared::dedup(found).join(", "))
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

    fn gauge_fact(&self, _fact: &str, selector: &SeriesSelector) -> Option<f64> {
        let expr = Expr::Max(Box::new(Expr::Gauge(selector.clone())));
        crate::signal::adapter::eval::eval_signal(&expr, self.indexed, self.frame, Stat::Last).ok()
    }

    fn engine_label(&self, engine: &AdapterSpec, label: &str) -> Option<String> {
        self.indexed.least_label(&engine.detect, label)
    }
}
