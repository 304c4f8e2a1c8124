//! Fixture tests (`llm-doctor rules test`), in the spirit of `promtool test rules`.
//!
//! A fixture is a recorded input plus `<name>.test.yaml` stating what must and must not be
//! diagnosed. The test file opens with a comment on its intent, e.g.
//!
//! ```yaml
//! # Should fire: kv_cache_exhaustion first; high_ttft and oom.
//! # Must not fire: small_batch_limit (the KV cache, not the batch limit, is what stops admission).
//! input: kv_cache_exhaustion.om
//! engine_args: "vllm serve Qwen/Qwen2.5-7B-Instruct"
//! expect:
//!   status: critical
//!   top_cause: kv_cache_exhaustion
//!   symptoms: [high_ttft, oom]
//!   absent_causes: [small_batch_limit]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;

use crate::pipeline;
use crate::prepared::Options;
use crate::report::TargetReport;
use crate::rules::Rules;

/// One fixture test as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureTest {
    /// Input files, relative to the test file.
    pub input: crate::signal::adapter::spec::OneOrMany,
    /// Serve command line.
    #[serde(default)]
    pub engine_args: Option<String>,
    /// Facts.
    #[serde(default)]
    pub facts: BTreeMap<String, serde_yaml::Value>,
    /// Extra signals.
    #[serde(default)]
    pub signals: BTreeMap<String, f64>,
    /// SLO overrides.
    #[serde(default)]
    pub slos: BTreeMap<String, f64>,
    /// End of the window.
    #[serde(default)]
    pub at: Option<String>,
    /// Window length.
    #[serde(default)]
    pub window: Option<String>,
    /// `--engine`.
    #[serde(default)]
    pub engine: Option<String>,
    /// `--selector`.
    #[serde(default)]
    pub selector: Option<String>,
    /// Expectations for a single-target input.
    #[serde(default)]
    pub expect: Option<Expect>,
    /// Expectations per target of a fleet, each picked by a selector that must match exactly one.
    #[serde(default)]
    pub targets: Vec<TargetExpect>,
    /// How many targets the input must yield (fleets).
    #[serde(default)]
    pub target_count: Option<usize>,
}

/// Expectations for one target of a fleet.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetExpect {
    /// PromQL matchers on the target's identity labels, e.g. `pod="vllm-2"`.
    pub selector: String,
    /// What that target must (and must not) produce.
    pub expect: Expect,
}

/// What a fixture must (and must not) produce.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Overall status.
    #[serde(default)]
    pub status: Option<String>,
    /// The cause ranked first.
    #[serde(default)]
    pub top_cause: Option<String>,
    /// Causes that must fire (any rank).
    #[serde(default)]
    pub causes: Vec<String>,
    /// Symptoms that must fire.
    #[serde(default)]
    pub symptoms: Vec<String>,
    /// Causes that must not fire.
    #[serde(default)]
    pub absent_causes: Vec<String>,
    /// Symptoms that must not fire.
    #[serde(default)]
    pub absent_symptoms: Vec<String>,
    /// No symptom at all may fire (healthy baselines).
    #[serde(default)]
    pub no_symptoms: bool,
    /// Rules that must be reported as not checked.
    #[serde(default)]
    pub unchecked: Vec<String>,
    /// Symptoms that fire with no measured cause behind them, to be said so ("No measured cause
    /// explains ...").
    #[serde(default)]
    pub unexplained: Vec<String>,
    /// Every fired symptom has a measured cause behind it.
    #[serde(default)]
    pub all_explained: bool,
}

/// The outcome of one fixture.
#[derive(Debug, Clone)]
pub struct FixtureResult {
    /// Test file.
    pub path: PathBuf,
    /// Failed expectations (empty: passed).
    pub failures: Vec<String>,
    /// The parsed test, when it could be read.
    pub test: Option<FixtureTest>,
    /// Causes in rank order.
    pub causes: Vec<String>,
}

/// Finds `*.test.yaml` files in `dir`, sorted.
pub fn discover(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading fixture directory `{}`", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".test.yaml"))
        .collect();
    out.sort();
    Ok(out)
}

/// Runs one fixture test.
pub fn run_one(path: &Path, rules: &Rules) -> FixtureResult {
    let mut result = FixtureResult {
        path: path.to_path_buf(),
        failures: Vec::new(),
        test: None,
        causes: Vec::new(),
    };
    match run_inner(path, rules, &mut result) {
        Ok(()) => {}
        Err(e) => result.failures.push(format!("error: {e:#}")),
    }
    result
}

/// A YAML scalar as the text a command-line flag would carry.
pub(crate) fn scalar(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        serde_yaml::Value::Number(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

/// What `diagnose` would be told for this fixture test.
fn options_of(test: &FixtureTest) -> Result<Options> {
    Ok(Options {
        engine_args: test.engine_args.clone(),
        facts: test
            .facts
            .iter()
            .map(|(k, v)| (k.clone(), scalar(v)))
            .collect(),
        signals: test.signals.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        at_ms: test
            .at
            .as_deref()
            .map(crate::time::parse_time)
            .transpose()?,
        window_ms: crate::time::parse_duration(test.window.as_deref().unwrap_or("5m"))?,
        selector: test
            .selector
            .as_deref()
            .map(crate::signal::selector::Selector::parse)
            .transpose()?,
        engine: test.engine.clone(),
    })
}

fn run_inner(path: &Path, rules: &Rules, result: &mut FixtureResult) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading `{}`", path.display()))?;
    let test: FixtureTest =
        serde_yaml::from_str(&text).with_context(|| format!("{}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut inputs = Vec::new();
    for f in test.input.values() {
        let p = dir.join(f);
        let t = crate::source::file::read_text(&p)?;
        inputs.push((p.display().to_string(), t));
    }
    let opts = options_of(&test)?;
    let set = crate::source::file::parse_inputs(&inputs)?;
    let prepared = pipeline::prepare(&set, rules, &opts)?;
    let slos = rules.playbook.slo_values(&test.slos)?;
    let reports: Vec<TargetReport> = prepared
        .into_iter()
        .map(|p| crate::verdict::judge(&rules.playbook, p, &slos, &[]))
        .collect();
    if let Some(n) = test.target_count {
        if reports.len() != n {
            result
                .failures
                .push(format!("expected {n} targets, found {}", reports.len()));
        }
    }
    if let Some(expect) = &test.expect {
        anyhow::ensure!(
            reports.len() == 1,
            "`expect` needs exactly one target, found {}: use `targets` with selectors",
            reports.len()
        );
        result.failures.extend(check(expect, &reports[0]));
        result.causes = reports[0]
            .diagnosis
            .causes
            .iter()
            .map(|c| c.id.clone())
            .collect();
    }
    for t in &test.targets {
        let sel = crate::signal::selector::Selector::parse(&t.selector)?;
        let hits: Vec<&TargetReport> = reports
            .iter()
            .filter(|r| sel.matches(&r.diagnosis.target.labels))
            .collect();
        match hits.as_slice() {
            [r] => {
                for f in check(&t.expect, r) {
                    result.failures.push(format!("{}: {f}", t.selector));
                }
                result.causes.push(format!(
                    "{}: {}",
                    t.selector,
                    r.diagnosis
                        .causes
                        .first()
                        .map(|c| c.id.as_str())
                        .unwrap_or("-")
                ));
            }
            _ => result.failures.push(format!(
                "selector {} matches {} targets, not one",
                t.selector,
                hits.len()
            )),
        }
    }
    anyhow::ensure!(
        test.expect.is_some() || !test.targets.is_empty(),
        "a fixture test needs `expect` or `targets`"
    );
    result.test = Some(test);
    Ok(())
}

/// Compares a diagnosis with expectations; returns what did not hold.
pub fn check(expect: &Expect, report: &TargetReport) -> Vec<String> {
    let d = &report.diagnosis;
    let mut f = Vec::new();
    let causes: Vec<&str> = d.causes.iter().map(|c| c.id.as_str()).collect();
    let symptoms: Vec<&str> = d.symptoms.iter().map(|s| s.id.as_str()).collect();
    if let Some(s) = &expect.status {
        if d.status.as_str() != s {
            f.push(format!("status: expected {s}, got {}", d.status.as_str()));
        }
    }
    if let Some(t) = &expect.top_cause {
        if causes.first() != Some(&t.as_str()) {
            f.push(format!(
                "top cause: expected {t}, got [{}]",
                causes.join(", ")
            ));
        }
    }
    for c in &expect.causes {
        if !causes.contains(&c.as_str()) {
            f.push(format!(
                "cause {c} did not fire (fired: [{}])",
                causes.join(", ")
            ));
        }
    }
    for c in &expect.absent_causes {
        if causes.contains(&c.as_str()) {
            f.push(format!("cause {c} fired but must not"));
        }
    }
    for s in &expect.symptoms {
        if !symptoms.contains(&s.as_str()) {
            f.push(format!(
                "symptom {s} did not fire (fired: [{}])",
                symptoms.join(", ")
            ));
        }
    }
    for s in &expect.absent_symptoms {
        if symptoms.contains(&s.as_str()) {
            f.push(format!("symptom {s} fired but must not"));
        }
    }
    if expect.no_symptoms && !symptoms.is_empty() {
        f.push(format!(
            "expected no symptom, got [{}]",
            symptoms.join(", ")
        ));
    }
    for u in &expect.unchecked {
        if !d.unchecked.iter().any(|x| &x.rule == u) {
            f.push(format!("{u} was expected among the unchecked rules"));
        }
    }
    for u in &expect.unexplained {
        if !d.unexplained.iter().any(|x| x == u) {
            f.push(format!(
                "symptom {u} was expected to be named unexplained (unexplained: [{}])",
                d.unexplained.join(", ")
            ));
        }
    }
    if expect.all_explained && !d.unexplained.is_empty() {
        f.push(format!(
            "expected every symptom explained, unexplained: [{}]",
            d.unexplained.join(", ")
        ));
    }
    f
}
