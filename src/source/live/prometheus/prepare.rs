//! One live triage (`diagnose --prometheus`): plan, query, build targets, assemble.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};
use llm_doctor_engine::Window;

use super::assemble::{assemble, LiveResult};
use super::http::{api_seconds, client, query_endpoint, Http, LiveOptions};
use super::plan::{run, Plan};
use crate::http::header_map;
use crate::prepared::{self, UserInputs};
use crate::rules::Rules;

/// Diagnosis inputs for every target Prometheus knows at `opts.at_ms` (default: now), or those
/// `opts.selector` picks, over a window of `opts.window_ms`. Facts and signals from
/// `opts.engine_args`, `opts.facts` and `opts.signals` apply as for files; `opts.engine`
/// restricts the engines looked for.
///
/// Errors when Prometheus cannot be reached or answers no discovery query, when it knows no
/// target, or when the options are wrong; a query that fails later is listed in
/// [`LiveResult::errors`] and costs only its signals.
pub fn prepare_from_prometheus(
    rules: &Rules,
    live: &LiveOptions,
    opts: &prepared::Options,
) -> Result<LiveResult> {
    let command_line = prepared::parse_engine_args(opts, rules)?;
    let adapters = match &opts.engine {
        Some(e) => prepared::restrict_to_engine(&rules.adapters, e)?,
        None => rules.adapters.clone(),
    };
    if opts.window_ms <= 0 {
        bail!("--window must be positive");
    }
    let at_ms = opts.at_ms.unwrap_or_else(now_ms);
    let endpoint = query_endpoint(&live.url)?;
    let client = client(live)?;
    let headers = header_map(&live.auth.headers)?;
    if tokio::runtime::Handle::try_current().is_ok() {
        bail!("internal error: prepare_from_prometheus called from inside an async runtime");
    }
    let runtime = crate::http::client_runtime()?;

    let plan = Plan {
        adapters: &adapters,
        window: triage_window(opts.window_ms),
        selector: opts.selector.as_ref(),
        facts: &opts.facts,
    };
    let http = Http {
        client,
        endpoint,
        headers,
        auth: live.auth.clone(),
        timeout: live.timeout,
        time: api_seconds(at_ms),
    };
    let answers = runtime.block_on(run(&plan, &http, live.concurrency.max(1), &live.url))?;

    let user = UserInputs {
        command_line: command_line.as_ref(),
        facts: &opts.facts,
        signals: &opts.signals,
    };
    let frame = Window {
        end_ms: Some(at_ms),
        length_ms: Some(opts.window_ms),
        lifetime: false,
    };
    assemble(rules, &plan, answers, frame, &user, opts)
}

/// The range a triage over a window of `window_ms` writes into its queries: one millisecond
/// short, left-open as the reader's window on Prometheus 2 too (see
/// `promql::QueryOptions::window`).
pub fn triage_window(window_ms: i64) -> String {
    prom_duration(window_ms - 1)
}

/// A window in milliseconds as a PromQL duration, in the largest exact unit.
pub(super) fn prom_duration(ms: i64) -> String {
    for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1000)] {
        if ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
