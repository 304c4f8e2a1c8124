//! `rules export`: what the playbooks say, in the formats of the tools on-call engineers already
//! run: Prometheus alerting rules and Grafana dashboards.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use llm_doctor_engine::condition::{Env, Input, Slot, WindowStats};
use llm_doctor_engine::FactValue;

use crate::rules::Rules;
use crate::signal::adapter::AdapterSpec;

pub mod grafana;
mod prometheus;

pub use prometheus::export_prometheus;

/// What an export knows before any metric: the engine's default facts and the default SLOs.
/// Signals are unknown.
pub(crate) struct Defaults {
    pub(crate) facts: BTreeMap<usize, FactValue>,
    pub(crate) slos: Vec<f64>,
}

impl Env for Defaults {
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

/// The engine's facts as an export knows them: its name and its adapter's defaults.
pub(crate) fn engine_facts(rules: &Rules, engine: &AdapterSpec) -> BTreeMap<usize, FactValue> {
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

/// The engine adapters exported: all, or those of `engine` (by engine name: `trtllm` is
/// Triton's and trtllm-serve's).
pub(crate) fn engines<'r>(rules: &'r Rules, engine: Option<&str>) -> Result<Vec<&'r AdapterSpec>> {
    let engines: Vec<&AdapterSpec> = rules
        .adapters
        .engines()
        .filter(|a| engine.is_none_or(|e| a.engine_name() == e))
        .collect();
    if engines.is_empty() {
        bail!("unknown engine `{}`", engine.unwrap_or(""));
    }
    Ok(engines)
}

/// `high_ttft` as `HighTtft`.
pub(crate) fn camel(id: &str) -> String {
    id.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}
