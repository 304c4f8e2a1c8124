//! `rules export`: what the playbooks say, in the formats of the tools on-call engineers already
//! run: Prometheus alerting rules and Grafana dashboards.

use anyhow::{bail, Result};

use crate::rules::Rules;
use crate::signal::adapter::AdapterSpec;

pub mod grafana;
mod prometheus;

pub(crate) use crate::verdict::symptom_promql::Defaults;
pub use prometheus::export_prometheus;

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
