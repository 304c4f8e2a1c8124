//! Each symptom's condition as PromQL, per engine: what `rules export prometheus` writes as
//! alerting rules, and what a top-down postmortem asks a metrics store for over a whole fleet.
//!
//! Signals compile through `promql::compile` from the engine's adapter (or the GPU and host
//! adapters), facts take the engine's defaults and SLOs their defaults. Clauses Prometheus
//! cannot evaluate (a signal the engine does not export, a fact nobody set) are dropped as
//! three-valued logic allows; a symptom with nothing left to check has no query.

use std::collections::BTreeMap;

use llm_doctor_engine::condition::promql::{Exported, PromqlScope, SignalStat};
use llm_doctor_engine::condition::{Condition, Env, Input, Slot, WindowStats};
use llm_doctor_engine::FactValue;

use crate::rules::Rules;
use crate::signal::adapter::eval::Stat;
use crate::signal::adapter::spec::Expr;
use crate::signal::adapter::{AdapterKind, AdapterSpec};
use crate::signal::promql;

/// Labels engine queries keep: what identifies a replica (and what `serve` turns into a
/// selector).
pub const ENGINE_BY: &[&str] = &["namespace", "pod", "instance", "model_name"];
/// Labels GPU and host queries keep.
pub const EXPORTER_BY: &[&str] = &["namespace", "pod", "instance", "Hostname", "hostname"];

/// What a query knows before any metric: the engine's default facts and the default SLOs.
/// Signals are unknown.
pub struct Defaults {
    /// Facts by catalog index.
    pub facts: BTreeMap<usize, FactValue>,
    /// SLO values by index.
    pub slos: Vec<f64>,
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

/// The engine's facts as a query knows them: its name and its adapter's defaults.
pub fn engine_facts(rules: &Rules, engine: &AdapterSpec) -> BTreeMap<usize, FactValue> {
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

/// One symptom condition of one engine as PromQL.
pub struct SymptomQuery<'r> {
    /// The symptom's index in the playbook.
    pub symptom: usize,
    /// `warning` (its `when`) or `critical` (its `critical_when`).
    pub severity: &'static str,
    /// The condition compiled.
    pub condition: &'r Condition,
    /// The PromQL: a series per replica at the instants the condition holds.
    pub expr: Option<String>,
}

/// Every symptom's conditions for engine adapter `engine` over `window` (a PromQL duration),
/// in playbook order, warning before critical; `expr` is None where nothing is left to check.
pub fn symptom_queries<'r>(
    rules: &'r Rules,
    engine: &AdapterSpec,
    window: &str,
    slos: &[f64],
) -> Vec<SymptomQuery<'r>> {
    let scope = Scope {
        rules,
        engine,
        window,
        defaults: Defaults {
            facts: engine_facts(rules, engine),
            slos: slos.to_vec(),
        },
    };
    let mut out = Vec::new();
    for (i, s) in rules.playbook.symptoms.iter().enumerate() {
        let mut variants = vec![("warning", &s.when)];
        if let Some(c) = &s.critical_when {
            variants.push(("critical", c));
        }
        for (severity, condition) in variants {
            let expr = match condition.to_promql(&scope) {
                Exported::Query(expr) => Some(expr),
                _ => None,
            };
            out.push(SymptomQuery {
                symptom: i,
                severity,
                condition,
                expr,
            });
        }
    }
    out
}

/// The adapter that provides `signal` for engine adapter `engine` (the engine's own definition
/// first, then a GPU or host exporter's), and its definition.
pub fn provider<'r>(
    rules: &'r Rules,
    engine: &'r AdapterSpec,
    signal: &str,
) -> Option<(&'r AdapterSpec, &'r Expr)> {
    let exporters = (rules.adapters.list.iter()).filter(|a| a.kind != AdapterKind::Engine);
    std::iter::once(engine)
        .chain(exporters)
        .find_map(|a| a.signals.get(signal).map(|e| (a, e)))
}

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
        let (adapter, expr) = provider(self.rules, self.engine, name)?;
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
            Some(Expr::Const(c)) => Some(*c),
            _ => None,
        }
    }

    fn constants(&self) -> &dyn Env {
        &self.defaults
    }
}
