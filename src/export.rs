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

use anyhow::{bail, Result};
use llm_doctor_engine::condition::promql::{Exported, PromqlScope, SignalStat};
use llm_doctor_engine::condition::{Env, Input, Slot, WindowStats};
use llm_doctor_engine::FactValue;
use serde::Serialize;

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
    facts: BTreeMap<usize, FactValue>,
    slos: Vec<f64>,
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
        self
    }
}

impl Env for Scope<'_> {
    fn get(&self, slot: Slot) -> Option<Input<'_>> {
        match slot {
            Slot::Fact(i) => self.facts.get(&i).map(|f| match f {
                FactValue::Number(n) => Input::Number(*n),
                FactValue::Str(s) => Input::Str(s),
                FactValue::Bool(b) => Input::Bool(*b),
            }),
            Slot::Slo(i) => self.slos.get(i).map(|v| Input::Number(*v)),
            Slot::Signal(_) => None,
        }
    }

    fn stats(&self, _: Slot) -> Option<WindowStats> {
        None
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

fn camel(id: &str) -> String {
    id.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn engine_facts(rules: &Rules, engine: &AdapterSpec) -> BTreeMap<usize, FactValue> {
    let mut facts = BTreeMap::new();
    facts.insert(
        rules.catalog.fact("engine").unwrap_or(0),
        FactValue::Str(engine.engine_name().to_string()),
    );
    for (name, value) in &engine.defaults {
        let Some(i) = rules.catalog.fact(name) else {
            continue;
        };
        let v = match value {
            serde_yaml::Value::Bool(b) => FactValue::Bool(*b),
            serde_yaml::Value::Number(n) => FactValue::Number(n.as_f64().unwrap_or(f64::NAN)),
            serde_yaml::Value::String(s) => FactValue::Str(s.clone()),
            _ => continue,
        };
        facts.insert(i, v);
    }
    facts
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
    let engines: Vec<&AdapterSpec> = rules
        .adapters
        .engines()
        .filter(|a| engine.is_none_or(|e| a.engine_name() == e))
        .collect();
    if engines.is_empty() {
        bail!("unknown engine `{}`", engine.unwrap_or(""));
    }
    let slos = rules.playbook.slo_values(&BTreeMap::new())?;
    let mut groups = Vec::new();
    let mut skipped = Vec::new();
    for a in engines {
        let scope = Scope {
            rules,
            engine: a,
            window,
            facts: engine_facts(rules, a),
            slos: slos.clone(),
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
