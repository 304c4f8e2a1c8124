//! `eval`: score the diagnosis on the labelled corpus and hold it to floors.

use std::path::PathBuf;

use anyhow::Result;

use super::format::Format;
use super::outcome::Outcome;
use crate::rules::load_rules;
use crate::score::case;
use crate::score::corpus::{self, CaseSplit, Floors};

/// Arguments of `eval`.
#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// The corpus: a directory of cases (`<id>.yaml` beside its recording), searched recursively.
    #[arg(default_value = "corpus")]
    pub dir: PathBuf,
    /// Which cases to score: `train`, `test` (held out while rules change) or `all`.
    #[arg(long, value_enum, default_value_t = CaseSplit::All)]
    pub split: CaseSplit,
    /// Output format (default: Markdown tables; json for tools).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Fail (exit 1) when the top-1 share of fault cases is below this (0..1).
    #[arg(long, value_name = "RATIO")]
    pub min_top1: Option<f64>,
    /// Fail (exit 1) when the top-3 share of fault cases is below this (0..1).
    #[arg(long, value_name = "RATIO")]
    pub min_top3: Option<f64>,
    /// Fail (exit 1) when more healthy or near-miss cases than this raise an alarm.
    #[arg(long, value_name = "N")]
    pub max_false_alarms: Option<usize>,
    /// Fail (exit 1) when more than this share of healthy or near-miss cases raise an alarm
    /// (0..1).
    #[arg(long, value_name = "RATIO")]
    pub max_false_alarm_ratio: Option<f64>,
    /// Print the scores and the confusion only, not a row per case.
    #[arg(long, conflicts_with = "cases")]
    pub summary: bool,
    /// Print a row per case only, not the scores.
    #[arg(long)]
    pub cases: bool,
    /// A directory of playbooks (and `signals/` adapters) that add to or override the shipped ones.
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Explain one case instead: its label, how it scored and its whole diagnosis, run as the
    /// score runs it (text, or `--format json`). Exit code 1 when it does not come out right, 2
    /// when it cannot be run (the score counts such a case as wrong).
    #[arg(long, value_name = "ID", conflicts_with_all = ["split", "min_top1", "min_top3", "max_false_alarms", "max_false_alarm_ratio"])]
    pub case: Option<String>,
    /// With `--case`: how this symptom or cause judged the case, fired or not: its gate, every
    /// item for and against it, and each value they read (repeatable).
    #[arg(long, value_name = "RULE", requires = "case")]
    pub why: Vec<String>,
}

/// Runs `eval`: exit code 1 when a floor is not met.
pub fn run(args: EvalArgs) -> Result<Outcome> {
    let rules = load_rules(args.rules.as_deref())?;
    if let Some(id) = &args.case {
        let explained = case::explain(&case::find(&args.dir, id)?, &rules, &args.why)?;
        return Ok(Outcome {
            stdout: match args.format {
                Some(Format::Json) => case::render_json(&explained),
                _ => case::render_text(&explained),
            },
            code: u8::from(!explained.case.correct()),
        });
    }
    let report = corpus::run(&args.dir, &rules, args.split)?;
    let floors = Floors {
        min_top1: args.min_top1,
        min_top3: args.min_top3,
        max_false_alarms: args.max_false_alarms,
        max_false_alarm_ratio: args.max_false_alarm_ratio,
    };
    let failures = floors.failures(&report);
    let mut stdout = match args.format {
        Some(Format::Json) => corpus::render_json(&report),
        _ if args.summary => corpus::render_summary(&report),
        _ if args.cases => corpus::render_cases(&report),
        _ => corpus::render_markdown(&report),
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
