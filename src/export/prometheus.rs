//! `rules export prometheus`: Prometheus alerting rules for every symptom, per engine, generated
//! from the same definitions the diagnosis uses.
//!
//! Each symptom's condition is exported to PromQL (`Condition::to_promql`): signals compile
//! through `promql::compile` from the engine's adapter (or the GPU and host adapters), facts take
//! the engine's defaults and SLOs their defaults. Clauses Prometheus cannot evaluate (a signal the
//! engine does not export, a fact nobody set) are dropped as three-valued logic allows; a symptom
//! with nothing left to check is listed as a comment instead of a rule. Alerts carry
//! `llm_doctor_symptom`, which `serve` maps back to the symptom.

use std::collections::BTreeMap;

use anyhow::Result;
use llm_doctor_engine::condition::promql::{Exported, PromqlScope, SignalStat};
use llm_doctor_engine::condition::{Env, Slot};
use serde::Serialize;

use super::{camel, engine_facts, Defaults};
use crate::rules::Rules;
use crate::signal::adapter::eval::Stat;
use crate::signal::adapter::{AdapterKind, AdapterSpec};
use crate::signal::promql;

/// Labels engine alerts keep: what identifies a replica, and what `serve` turns into a selector.
const ENGINE_BY: &[&str] = &["namespace", "pod", "instance", "model_name"];
/// Labels GPU and host alerts keep.
const EXPORTER_BY: &[&str] = &["namespace", "pod", "instance", "Hostname", "hostname"];

struct Scope<'a> {
    rules: &'a Rules,
    engine: &'a AdapterSpec,
    window: &'a str,
    defaults: Defaults,
}

impl PromqlScope for Scope<'_> {
    fn signal(&self, slot: Slot, stat: SignalStat) -> Option<String> {
        let Slot::Signal(i) = slot else { return None };
        let name = &self.rules.catalog.signals()[i].name;
        let exporters = self
            .rules
            .adapters
            .list
            .iter()
            .filter(|a| a.kind != AdapterKind::Engine);
        let (adapter, expr) = std::iter::once(self.engine)
            .chain(exporters)
            .find_map(|a| a.signals.get(name).map(|e| (a, e)))?;
        if !promql::expressible(expr) {
            return None;
        }
        let by = if adapter.kind == AdapterKind::Engine {
            ENGINE_BY
        } else {
            EXPORTER_BY
        };
        let stat = match stat {
            SignalStat::Last => Stat::Last,
            SignalStat::Mean => Stat::Mean,
            SignalStat::Max => Stat::Max,
            SignalStat::Min => Stat::Min,
        };
        Some(promql::compile(
            expr,
            &promql::QueryOptions {
                window: self.window,
                by,
                stat,
                picks: &adapter.picks,
                ..promql::QueryOptions::default()
            },
        ))
    }

    fn constant_signal(&self, slot: Slot) -> Option<f64> {
        let Slot::Signal(i) = slot else { return None };
        match self
            .engine
            .signals
            .get(&self.rules.catalog.signals()[i].name)
        {
            Some(crate::signal::adapter::spec::Expr::Const(c)) => Some(*c),
            _ => None,
        }
    }

    fn constants(&self) -> &dyn Env {
        &self.defaults
    }
}

#[derive(Serialize)]
struct RuleFile {
    groups: Vec<Group>,
}

#[derive(Serialize)]
struct Group {
    name: String,
    rules: Vec<AlertRule>,
}

#[derive(Serialize)]
struct AlertRule {
    alert: String,
    expr: String,
    #[serde(rename = "for")]
    for_: String,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

/// The rule file (YAML) for every engine, or one (`engine`, by engine name).
// Long on purpose: the rule file is written top to bottom (header, not-exported list, one group
// per engine with a warning and a critical rule per symptom), in the order it reads.
pub fn export_prometheus(
    rules: &Rules,
    engine: Option<&str>,
    window: &str,
    for_: &str,
    runbook_url: &str,
) -> Result<String> {
    crate::time::parse_duration(window)?;
    crate::time::parse_duration(for_)?;
    let engines = super::engines(rules, engine)?;
    let slos = rules.playbook.slo_values(&BTreeMap::new())?;
    let mut groups = Vec::new();
    let mut skipped = Vec::new();
    for a in engines {
        let scope = Scope {
            rules,
            engine: a,
            window,
            defaults: Defaults {
                facts: engine_facts(rules, a),
                slos: slos.clone(),
            },
        };
        let mut out = Vec::new();
        for s in &rules.playbook.symptoms {
            let mut variants = vec![("warning", &s.when, String::new())];
            if let Some(c) = &s.critical_when {
                variants.push(("critical", c, "Critical".to_string()));
            }
            for (severity, cond, suffix) in variants {
                match cond.to_promql(&scope) {
                    Exported::Query(expr) => out.push(AlertRule {
                        alert: format!("LLMDoctor{}{suffix}", camel(&s.id)),
                        expr,
                        for_: for_.to_string(),
                        labels: BTreeMap::from([
                            ("severity".to_string(), severity.to_string()),
                            ("llm_doctor_symptom".to_string(), s.id.clone()),
                            ("engine".to_string(), a.engine_name().to_string()),
                            // Triton and trtllm-serve are both engine `trtllm`.
                            ("llm_doctor_adapter".to_string(), a.name.clone()),
                        ]),
                        annotations: BTreeMap::from([
                            // The expression's value is its first signal's: shown, humanized.
                            (
                                "summary".to_string(),
                                format!("{} ({{{{ $value | humanize }}}})", s.title),
                            ),
                            (
                                "runbook_url".to_string(),
                                runbook_url.replace("{id}", &s.id),
                            ),
                            ("description".to_string(), s.why.clone()),
                            (
                                "condition".to_string(),
                                cond.source()
                                    .split_whitespace()
                                    .collect::<Vec<_>>()
                                    .join(" "),
                            ),
                        ]),
                    }),
                    _ if severity == "warning" => skipped.push(format!(
                        "{}: {} (its signals are not exported)",
                        a.name, s.id
                    )),
                    _ => {}
                }
            }
        }
        groups.push(Group {
            name: format!("llm-doctor-{}", a.name),
            rules: out,
        });
    }
    let mut text = String::from(
        "# Prometheus alerting rules generated by `llm-doctor rules export prometheus` from the\n# playbooks' symptoms and the engines' signal definitions. Do not edit: regenerate.\n",
    );
    for s in &skipped {
        text.push_str(&format!("# not exported: {s}\n"));
    }
    text.push_str(&serde_yaml::to_string(&RuleFile { groups })?);
    Ok(text)
}
