//! `rules`: check, test, explain, export and draw the playbooks.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Subcommand, ValueEnum};

use super::outcome::Outcome;
use crate::rules::load_rules;

/// Rule export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Prometheus alerting rules (YAML, for `rule_files`).
    Prometheus,
    /// Grafana dashboards (JSON), one per engine: the signals the diagnosis reads, with the
    /// playbooks' thresholds.
    Grafana,
}

/// How `rules explain` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExplainFormat {
    /// Plain text for the terminal.
    Text,
    /// Markdown, to publish as a runbook page.
    Markdown,
}

/// Graph formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// Graphviz.
    Dot,
    /// Mermaid flowchart.
    Mermaid,
}

/// `rules` subcommands.
#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Validate playbooks: schema, names, types, graph.
    Check {
        /// Extra or overriding rules directory.
        dir: Option<PathBuf>,
    },
    /// Run fixture tests (`*.test.yaml`): expected causes and symptoms for recorded inputs.
    Test {
        /// Fixture directory.
        #[arg(default_value = "fixtures")]
        dir: PathBuf,
        /// Extra or overriding rules directory.
        #[arg(long)]
        rules: Option<PathBuf>,
    },
    /// Explain a symptom, cause, remediation, signal or fact.
    Explain {
        /// The id.
        id: String,
        /// `text` for the terminal, `markdown` to publish as a runbook (`rules export`'s
        /// `runbook_url` points at one page per symptom).
        #[arg(long, value_enum, default_value_t = ExplainFormat::Text)]
        format: ExplainFormat,
        /// Extra or overriding rules directory.
        #[arg(long)]
        rules: Option<PathBuf>,
    },
    /// Export alerting rules for every symptom (`prometheus`), or dashboards of the signals the
    /// diagnosis reads (`grafana`), per engine.
    Export {
        /// Rule format.
        #[arg(value_enum)]
        format: ExportFormat,
        /// Only this engine (vllm, sglang, tgi, trtllm, llamacpp).
        #[arg(long)]
        engine: Option<String>,
        /// Range of rates and window functions in the rules; a dashboard's default window.
        // Text, not a parsed duration: it goes into the rules as written.
        #[arg(long, default_value = "5m", value_parser = super::parse::positive_duration_text)]
        window: String,
        /// How long a condition must hold before the alert fires.
        #[arg(long = "for", default_value = "2m", value_parser = super::parse::duration_text)]
        for_: String,
        /// The `runbook_url` annotation of each alert; `{id}` becomes the symptom's id. Publish
        /// the pages with `llm-doctor rules explain ID --format markdown`.
        #[arg(long, default_value = "runbooks/{id}.md")]
        runbook_url: String,
        /// Override an objective, `name=value` (e.g. ttft_p99_seconds=2), as `diagnose --slo`:
        /// the thresholds of the rules and of the dashboards' lines. Repeatable.
        #[arg(long = "slo", value_name = "NAME=VALUE", value_parser = super::parse::key_number)]
        slos: Vec<(String, f64)>,
        /// Dashboards: the Prometheus datasource selected by default (by name).
        #[arg(long)]
        datasource: Option<String>,
        /// Dashboards: write one file per engine (`llm-doctor-<adapter>.json`) into this
        /// directory instead of one dashboard to standard output.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Extra or overriding rules directory.
        #[arg(long)]
        rules: Option<PathBuf>,
    },
    /// Print the diagnosis graph.
    Graph {
        /// dot or mermaid.
        #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
        format: GraphFormat,
        /// Extra or overriding rules directory.
        #[arg(long)]
        rules: Option<PathBuf>,
    },
}

/// Runs a `rules` subcommand.
pub fn run(cmd: RulesCommand) -> Result<Outcome> {
    let ok = |stdout: String| Ok(Outcome { stdout, code: 0 });
    match cmd {
        RulesCommand::Check { dir } => {
            let rules = load_rules(dir.as_deref())?;
            ok(format!(
                "ok: {} symptoms, {} causes, {} remediations, {} SLOs; {} adapters; graph acyclic, every cause reaches a symptom\n",
                rules.playbook.symptoms.len(),
                rules.playbook.causes.len(),
                rules.playbook.remediations.len(),
                rules.playbook.slos.len(),
                rules.adapters.list.len()
            ))
        }
        RulesCommand::Test { dir, rules } => test(&dir, rules.as_deref()),
        RulesCommand::Explain { id, format, rules } => {
            let rules = load_rules(rules.as_deref())?;
            let text = crate::report::explain::explain(&rules, &id)?;
            ok(match format {
                ExplainFormat::Text => text,
                ExplainFormat::Markdown => crate::report::explain::markdown(&text),
            })
        }
        RulesCommand::Export {
            format,
            engine,
            window,
            for_,
            runbook_url,
            slos,
            datasource,
            out,
            rules,
        } => {
            let rules = load_rules(rules.as_deref())?;
            let slos: std::collections::BTreeMap<String, f64> = slos.into_iter().collect();
            match format {
                ExportFormat::Prometheus => {
                    if out.is_some() || datasource.is_some() {
                        bail!("--out and --datasource are options of `rules export grafana`");
                    }
                    ok(crate::export::export_prometheus(
                        &rules,
                        engine.as_deref(),
                        &window,
                        &for_,
                        &runbook_url,
                        &slos,
                    )?)
                }
                ExportFormat::Grafana => {
                    let dashboards = crate::export::grafana::export_grafana(
                        &rules,
                        engine.as_deref(),
                        &window,
                        datasource.as_deref(),
                        &slos,
                    )?;
                    ok(write_dashboards(&dashboards, out.as_deref())?)
                }
            }
        }
        RulesCommand::Graph { format, rules } => {
            let rules = load_rules(rules.as_deref())?;
            ok(crate::report::graph::graph(
                &rules.playbook,
                format == GraphFormat::Mermaid,
            ))
        }
    }
}

/// The dashboards as files in `out`, listed; or the one dashboard as it is.
fn write_dashboards(
    dashboards: &[crate::export::grafana::Dashboard],
    out: Option<&std::path::Path>,
) -> Result<String> {
    let Some(dir) = out else {
        return match dashboards {
            [one] => Ok(format!("{}\n", serde_json::to_string_pretty(&one.json)?)),
            several => {
                let names: Vec<&str> = several.iter().map(|d| d.adapter.as_str()).collect();
                bail!(
                    "{} dashboards ({}): choose one with --engine, or write them all with --out DIR",
                    names.len(),
                    names.join(", ")
                )
            }
        };
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("creating `{}`: {e}", dir.display()))?;
    let mut listed = String::new();
    for d in dashboards {
        let path = dir.join(format!("llm-doctor-{}.json", d.adapter));
        let text = format!("{}\n", serde_json::to_string_pretty(&d.json)?);
        std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("writing `{}`: {e}", path.display()))?;
        listed.push_str(&format!("{}\n", path.display()));
    }
    Ok(listed)
}

/// `rules test`: every fixture in `dir`, one line each; exit code 1 when one fails.
fn test(dir: &std::path::Path, rules_dir: Option<&std::path::Path>) -> Result<Outcome> {
    let rules = load_rules(rules_dir)?;
    let files = crate::score::fixtures::discover(dir)?;
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
