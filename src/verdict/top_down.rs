//! A postmortem of a fleet too large to fetch whole, top down: the metrics store evaluates every
//! symptom's condition over the whole fleet at a coarse step (the PromQL of the exported alert
//! rules, computed where the data is: Thanos, Mimir, VictoriaMetrics split and parallelize it),
//! and answers only where a condition held; then each replica that was unhealthy is read raw
//! over its unhealthy spans (with context before, for the onset, and after) and judged as the
//! raw plan judges it, one replica at a time, so memory depends on one replica's span, not on the
//! fleet or the range. A healthy replica costs one row of the store's answer.
//!
//! Where it can miss: a condition is evaluated over windows as long as the coarse step, each
//! step's window ending where the next begins, so every instant is seen; but a fault much
//! shorter than a step is averaged into its window (a rate, a quantile over the step) and may
//! not cross a threshold there that it crosses in a 5-minute window. Symptoms whose signals have
//! no PromQL form are not in the coarse view.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::range::RangeQuery;
use super::symptom_promql::{symptom_queries, ENGINE_BY};
use crate::postmortem::{self, Postmortem, Range};
use crate::prepared::Options;
use crate::rules::Rules;
use crate::source::live::prometheus::{
    coarse_range, discovery_selector, range_of_replica, raw_points, triage_window, ReplicaKey,
};

/// Which plan a postmortem of a Prometheus-compatible store follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReadPlan {
    /// Every raw series of every replica over the range, judged here.
    Raw,
    /// The store's coarse view of the fleet first, then raw series of the unhealthy spans only.
    TopDown,
    /// Raw when the range's raw series are at most [`AUTO_RAW_POINTS`] points, else top-down.
    Auto,
}

/// The most points (series x steps) `auto` reads raw: a fleet-day of 4 replicas at 15 s is
/// about 7 million and took 1.5-1.8 s and 200 MB raw; 64 replicas, 110 million, 25-29 s and
/// 1.1-2.1 GB.
pub const AUTO_RAW_POINTS: u64 = 20_000_000;

/// Which plan runs for `query`, and the note that says why: `auto` asks the store how many
/// series the raw plan would read.
pub fn choose(plan: ReadPlan, query: &RangeQuery<'_>, rules: &Rules) -> Result<(ReadPlan, String)> {
    let range = (query.from_ms - query.window_ms, query.to_ms, query.step_ms);
    match plan {
        ReadPlan::Raw => Ok((ReadPlan::Raw, "plan: raw (as asked)".to_string())),
        ReadPlan::TopDown => Ok((ReadPlan::TopDown, "plan: top-down (as asked)".to_string())),
        ReadPlan::Auto => {
            let points = raw_points(rules, query.live, range)
                .with_context(|| format!("asking {} how large the range is", query.url))?;
            Ok(if points > AUTO_RAW_POINTS {
                (
                    ReadPlan::TopDown,
                    format!("plan: top-down (the raw series are {points} points, over {AUTO_RAW_POINTS})"),
                )
            } else {
                (
                    ReadPlan::Raw,
                    format!(
                        "plan: raw (the raw series are {points} points, at most {AUTO_RAW_POINTS})"
                    ),
                )
            })
        }
    }
}

/// A replica of the coarse view: its identity and the coarse instants a symptom held, with it.
#[derive(Debug, Default)]
struct Seen {
    pod: Option<String>,
    fired: Vec<(i64, usize)>,
}

/// The postmortem of `query` top down, the coarse view at `coarse_ms` (see the module).
pub fn postmortem(
    query: &RangeQuery<'_>,
    rules: &Rules,
    opts: &Options,
    slos: &[f64],
    coarse_ms: i64,
    quiet: bool,
) -> Result<Postmortem> {
    let started = Instant::now();
    // The coarse view's series carry only the labels the alert rules keep.
    if let Some(sel) = query.selector {
        if let Some(m) = (sel.matchers.iter()).find(|m| !ENGINE_BY.contains(&m.label.as_str())) {
            bail!(
                "--plan top-down selects replicas by {}: `{}` is not in the store's coarse view (use --plan raw)",
                ENGINE_BY.join(", "),
                m.label
            );
        }
    }
    let window = triage_window(coarse_ms);
    let coarse = (query.from_ms, query.to_ms, coarse_ms);
    let context = || format!("querying {} for the fleet's coarse view", query.url);
    // First every engine's replicas; then the symptom conditions of the engines the store has
    // (their GPU and host clauses read the exporters every engine shares: asked once per
    // engine, they are the costliest queries of the view).
    let engines: Vec<&crate::signal::adapter::AdapterSpec> = rules.adapters.engines().collect();
    let replica_queries: Vec<String> = (engines.iter())
        .map(|a| {
            format!(
                "group by (namespace, pod, instance) ({})",
                discovery_selector(a)
            )
        })
        .collect();
    let (replicas, mut notes) =
        coarse_range(query.live, &replica_queries, coarse).with_context(context)?;
    // Each symptom query beside the symptom it asks about.
    let (mut symptom_queries_of, mut symptom_ids) = (Vec::new(), Vec::new());
    for (a, found) in engines.iter().zip(&replicas) {
        if found.is_empty() {
            continue;
        }
        for q in symptom_queries(rules, a, &window, slos) {
            if let (Some(expr), "warning") = (q.expr, q.severity) {
                symptom_queries_of.push(expr);
                symptom_ids.push(q.symptom);
            }
        }
    }
    let (symptoms, more) =
        coarse_range(query.live, &symptom_queries_of, coarse).with_context(context)?;
    for n in more {
        if !notes.contains(&n) {
            notes.push(n);
        }
    }
    let queries_sent = replica_queries.len() + symptom_queries_of.len();
    let answers = (replicas.iter().map(|a| (a, None)))
        .chain(symptoms.iter().zip(symptom_ids.iter().copied().map(Some)));
    let mut fleet: BTreeMap<String, Seen> = BTreeMap::new();
    for (answer, symptom) in answers {
        for (labels, points) in answer {
            let Some(instance) = labels.get("instance") else {
                continue;
            };
            if let Some(sel) = query.selector {
                if !sel.matches(labels) {
                    continue;
                }
            }
            let seen = fleet.entry(instance.clone()).or_default();
            if seen.pod.is_none() {
                seen.pod = labels.get("pod").cloned();
            }
            if let Some(s) = symptom {
                seen.fired.extend(points.iter().map(|(t, _)| (*t, s)));
            }
        }
    }
    let coarse_took = started.elapsed();
    let unhealthy: Vec<(&String, &Seen)> =
        fleet.iter().filter(|(_, s)| !s.fired.is_empty()).collect();
    let mut targets = Vec::new();
    let mut drilled = Vec::new();
    for (instance, seen) in &unhealthy {
        let mut times: Vec<i64> = seen.fired.iter().map(|(t, _)| *t).collect();
        times.sort_unstable();
        times.dedup();
        for (from, to) in spans(&times, coarse_ms, (query.from_ms, query.to_ms)) {
            // Aligned to the fine step, so that the judged instants are the raw plan's.
            let from = query.from_ms + (from - query.from_ms) / query.step_ms * query.step_ms;
            let replica = ReplicaKey {
                instance,
                pod: seen.pod.as_deref(),
            };
            let got = range_of_replica(
                rules,
                query.live,
                &replica,
                (from - query.window_ms, to, query.step_ms),
            )
            .with_context(|| format!("reading {instance} from {}", query.url))?;
            for n in got.notes {
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
            let range = Range {
                from_ms: from,
                to_ms: to,
                step_ms: query.step_ms,
                window_ms: query.window_ms,
            };
            let pm = postmortem::analyse(&got.set, rules, opts, slos, range, &())?;
            drilled.push(format!(
                "{instance} {}-{}",
                crate::time::format_time(from),
                crate::time::format_time(to)
            ));
            targets.extend(pm.targets);
        }
    }
    targets.sort_by_key(|t| {
        (
            t.incidents.is_empty(),
            t.incidents.first().map(|i| i.start_ms),
            t.name(),
        )
    });
    let fleet_view = postmortem::fleet::fleet_of(&targets, fleet.len().max(targets.len()));
    let mut all_notes = vec![format!(
        "top-down: {} replicas in the store's coarse view ({} queries at {} s, {} ms); {} unhealthy there, read raw over {} spans ({}); {} healthy at every coarse step, not read",
        fleet.len(),
        queries_sent,
        coarse_ms / 1000,
        coarse_took.as_millis(),
        unhealthy.len(),
        drilled.len(),
        drilled.join(", "),
        fleet.len() - unhealthy.len()
    )];
    all_notes.extend(notes);
    if !quiet {
        eprintln!("{}", all_notes[0]);
    }
    Ok(Postmortem {
        from_ms: query.from_ms,
        to_ms: query.to_ms,
        step_ms: query.step_ms,
        window_ms: query.window_ms,
        targets,
        fleet: fleet_view,
        notes: all_notes,
        requests: None,
    })
}

/// The spans to read raw around coarse instants `times` (sorted) where a symptom held: each
/// instant's window (`coarse` long, ending there), windows one step apart or closer merged,
/// widened by two steps before (where the fault began) and one after, within `bounds`.
fn spans(times: &[i64], coarse: i64, (lo, hi): (i64, i64)) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for &t in times {
        let (from, to) = ((t - coarse - 2 * coarse).max(lo), (t + coarse).min(hi));
        match out.last_mut() {
            Some(last) if from <= last.1 + coarse => last.1 = last.1.max(to),
            _ => out.push((from, to)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::spans;

    #[test]
    fn spans_merge_neighbouring_windows_and_widen_within_the_range() {
        let m = 60_000;
        // 10, 15, 20 min close together; 60 min alone.
        let times = [10 * m, 15 * m, 20 * m, 60 * m];
        assert_eq!(
            spans(&times, 5 * m, (0, 62 * m)),
            vec![(0, 25 * m), (45 * m, 62 * m)]
        );
        assert!(spans(&[], 5 * m, (0, m)).is_empty());
    }
}
