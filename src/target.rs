//! Splits a recording into targets: one per serving replica, with its GPUs and host joined to it.
//!
//! A recording of one replica usually holds three scrape jobs: the engine's (`instance`
//! `host:8000`), dcgm-exporter's (`host:9400`, with a `Hostname`/`hostname` label) and
//! node_exporter's (`host:9100`). They describe one machine, so they are joined by host: the pod
//! label when both sides have it, else the `Hostname`/`hostname` label or the host part of
//! `instance`. When there is a single replica and the exporters' hosts match nothing (a pod IP
//! against a node name, say), they are joined to it anyway and the report says so.

use std::collections::{BTreeMap, HashMap, HashSet};

use llm_doctor_engine::Target;

use crate::signal::adapter::{AdapterKind, AdapterSpec, Adapters, TargetInput};
use crate::signal::series::{Series, SeriesSet};

/// Labels that identify a replica in reports.
pub const IDENTITY_LABELS: &[&str] =
    &["namespace", "pod", "instance", "model_name", "model", "job"];

/// Labels a series is joined to a replica by (see [`join_keys_of`]).
pub const JOIN_LABELS: &[&str] = &["pod", "Hostname", "hostname", "instance"];

/// The note on a target whose only engine has no series at all.
pub const NO_ENGINE_NOTE: &str = "no serving-engine metrics found: only GPU and host checks apply";

/// The host part of an `instance` label.
pub fn host_of(instance: &str) -> &str {
    // `host:port`, `[v6]:port`, or a bare host.
    if let Some(rest) = instance.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match instance.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => instance,
    }
}

/// Keys a series can be joined by, from its labels (`get` returns a label's value): the pod,
/// the `Hostname`/`hostname` label and the host part of `instance`, in that order. Only
/// [`JOIN_LABELS`] are read, so series that agree on those join alike.
pub fn join_keys_of<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Vec<String> {
    let mut keys = Vec::new();
    if let Some(p) = get("pod") {
        keys.push(format!("pod={p}"));
    }
    for l in ["Hostname", "hostname"] {
        if let Some(h) = get(l) {
            keys.push(format!("host={}", h.to_ascii_lowercase()));
        }
    }
    if let Some(i) = get("instance") {
        keys.push(format!("host={}", host_of(i).to_ascii_lowercase()));
    }
    keys
}

fn join_keys(s: &Series) -> Vec<String> {
    join_keys_of(|l| s.labels.get(l))
}

/// The values of a series' [`JOIN_LABELS`]: series that agree on them have the same join keys.
type JoinTuple<'a> = [Option<&'a str>; 4];

fn join_tuple(s: &Series) -> JoinTuple<'_> {
    let mut t = [None; 4];
    for (slot, l) in t.iter_mut().zip(JOIN_LABELS) {
        *slot = s.labels.get(l);
    }
    t
}

/// A target's join keys, sorted and without repeats; computed once per distinct join tuple.
fn target_keys(series: &[&Series]) -> Vec<String> {
    let mut seen: HashSet<JoinTuple<'_>> = HashSet::new();
    let mut keys: Vec<String> = Vec::new();
    for s in series {
        if seen.insert(join_tuple(s)) {
            keys.extend(join_keys(s));
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// Where an exporter's series go, given its join keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// To the target with this index: its keys matched.
    Matched(usize),
    /// To the only target, which it did not match (see [`elimination_note`]).
    Elimination,
    /// Nowhere: it matches no target and there are several (or none).
    Orphan,
    /// Nowhere: it matches several targets (see [`ambiguous_note`]).
    Ambiguous,
    /// Nowhere, and rightly: a container exporter's series of a pod that is no replica's (a
    /// neighbour on the same node).
    NotAReplica,
}

/// Decides the join of series with `keys` to targets whose (sorted) join keys are
/// `target_keys`: a match with exactly one target, else by elimination when there is one
/// target only.
pub fn join(keys: &[String], target_keys: &[Vec<String>]) -> Join {
    let hits: Vec<usize> = (0..target_keys.len())
        .filter(|&i| keys.iter().any(|k| target_keys[i].binary_search(k).is_ok()))
        .collect();
    match hits.as_slice() {
        [i] => Join::Matched(*i),
        [] if target_keys.len() == 1 => Join::Elimination,
        [] => Join::Orphan,
        _ => Join::Ambiguous,
    }
}

/// Decides where an exporter's series go. Host and GPU exporters describe the machine, so they
/// join by pod or host ([`JoinIndex::join`]). A container exporter (cAdvisor) describes every
/// container on the node: joined by host, a neighbour's stall would read as the replica's, so
/// only the replica's own pod joins, and never by elimination.
pub fn exporter_join(kind: AdapterKind, index: &JoinIndex, keys: &[String]) -> Join {
    if kind != AdapterKind::Container {
        return index.join(keys);
    }
    let pods: Vec<String> = keys
        .iter()
        .filter(|k| k.starts_with("pod="))
        .cloned()
        .collect();
    match index.join(&pods) {
        Join::Matched(i) if !pods.is_empty() => Join::Matched(i),
        Join::Ambiguous => Join::Ambiguous,
        _ => Join::NotAReplica,
    }
}

/// The targets' join keys indexed once, so that joining a series costs its own keys, not a scan
/// of every target: a fleet's exporter series are joined in time linear in their number.
#[derive(Debug, Clone, Default)]
pub struct JoinIndex {
    /// Join key -> the targets that have it, ascending.
    by_key: HashMap<String, Vec<usize>>,
    targets: usize,
}

impl JoinIndex {
    /// Indexes targets by their join keys (as [`join`] takes them; need not be sorted).
    pub fn new(target_keys: &[Vec<String>]) -> Self {
        let mut by_key: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, keys) in target_keys.iter().enumerate() {
            for k in keys {
                let hits = by_key.entry(k.clone()).or_default();
                if hits.last() != Some(&i) {
                    hits.push(i);
                }
            }
        }
        JoinIndex {
            by_key,
            targets: target_keys.len(),
        }
    }

    /// The same decision as [`join`] with the indexed targets.
    pub fn join(&self, keys: &[String]) -> Join {
        let mut hits: Vec<usize> = keys
            .iter()
            .filter_map(|k| self.by_key.get(k))
            .flatten()
            .copied()
            .collect();
        hits.sort_unstable();
        hits.dedup();
        match hits.as_slice() {
            [i] => Join::Matched(*i),
            [] if self.targets == 1 => Join::Elimination,
            [] => Join::Orphan,
            _ => Join::Ambiguous,
        }
    }
}

/// The note on the only replica when `adapter`'s series matched it by elimination.
pub fn elimination_note(adapter: &str) -> String {
    format!("{adapter} series matched no replica by host or pod; joined to the only replica")
}

/// The note on every target when `adapter`'s series with `keys` match several replicas.
pub fn ambiguous_note(adapter: &str, keys: &[String]) -> String {
    format!(
        "{adapter} {}: matches several replicas, not joined",
        keys.join(",")
    )
}

/// The `host` label of an exporter-only target, from the first join key of its series.
pub fn host_label(first_key: &str) -> String {
    first_key
        .trim_start_matches("host=")
        .trim_start_matches("pod=")
        .to_string()
}

/// Groups series into targets. Series no adapter recognises are ignored, except those scraped
/// from an engine's own endpoint (same `instance`), such as `process_cpu_seconds_total`.
pub fn split<'a>(set: &'a SeriesSet, adapters: &Adapters) -> Vec<TargetInput<'a>> {
    let mut engines: BTreeMap<(String, String), Vec<&'a Series>> = BTreeMap::new();
    let mut exporters: Vec<(&'a Series, &AdapterSpec)> = Vec::new();
    let mut unowned: Vec<&'a Series> = Vec::new();
    for s in &set.series {
        if let Some((engine, replica)) = engine_replica(s, adapters) {
            engines
                .entry((engine.to_string(), replica.to_string()))
                .or_default()
                .push(s);
            continue;
        }
        match adapters.owner(&s.name) {
            Some(a) => exporters.push((s, a)),
            None => unowned.push(s),
        }
    }
    let mut targets = engine_targets(engines, adapters);
    // Step 2: series from the engine's own endpoint (the first target with that instance).
    let mut by_instance: HashMap<String, usize> = HashMap::new();
    for (i, t) in targets.iter().enumerate() {
        if let Some(inst) = t.target.labels.get("instance") {
            by_instance.entry(inst.clone()).or_insert(i);
        }
    }
    for s in unowned {
        if let Some(&i) = s
            .labels
            .get("instance")
            .and_then(|inst| by_instance.get(inst))
        {
            targets[i].series.push(s);
        }
    }
    let orphans = join_exporters(&mut targets, exporters);
    if targets.is_empty() {
        targets = host_targets(orphans, adapters);
    }
    targets
}

/// The engine target a series belongs to, (adapter, replica: pod, else instance), when an
/// engine's adapter reads it. Each distinct one is a target of its own: the reader counts
/// them to refuse an input of too many targets before holding all of it.
pub fn engine_replica<'s>(s: &'s Series, adapters: &'s Adapters) -> Option<(&'s str, &'s str)> {
    let a = adapters.owner(&s.name)?;
    if a.kind != AdapterKind::Engine {
        return None;
    }
    let replica = s
        .labels
        .get("pod")
        .or_else(|| s.labels.get("instance"))
        .unwrap_or("");
    Some((a.name.as_str(), replica))
}

/// Step 1: engine series grouped by adapter and replica (pod, else instance), one target each.
fn engine_targets<'a>(
    engines: BTreeMap<(String, String), Vec<&'a Series>>,
    adapters: &Adapters,
) -> Vec<TargetInput<'a>> {
    engines
        .into_iter()
        .map(|((engine, _), series)| {
            let mut labels = BTreeMap::new();
            for l in IDENTITY_LABELS {
                if let Some(v) = series.iter().find_map(|s| s.labels.get(l)) {
                    labels.insert(l.to_string(), v.to_string());
                }
            }
            TargetInput {
                target: Target {
                    engine: adapters.get(&engine).map(|a| a.engine_name().to_string()),
                    labels,
                },
                engine: Some(engine.clone()),
                series,
                adapters: vec![engine],
                notes: Vec::new(),
            }
        })
        .collect()
}

/// Step 3: exporters joined by host; by elimination when there is one replica. Returns the
/// series no replica took, by `<adapter> <first join key>`.
fn join_exporters<'a>(
    targets: &mut [TargetInput<'a>],
    exporters: Vec<(&'a Series, &AdapterSpec)>,
) -> BTreeMap<String, Vec<&'a Series>> {
    let target_keys: Vec<Vec<String>> = targets.iter().map(|t| target_keys(&t.series)).collect();
    let index = JoinIndex::new(&target_keys);
    let mut orphans: BTreeMap<String, Vec<&'a Series>> = BTreeMap::new();
    let mut ambiguous: BTreeMap<String, ()> = BTreeMap::new();
    // An exporter's series come in runs with the same join labels (one GPU's, one host's):
    // their keys and decision are computed once per run.
    let mut last: Option<((JoinTuple<'a>, AdapterKind), Vec<String>, Join)> = None;
    for (s, spec) in exporters {
        let adapter = spec.name.as_str();
        let tuple = (join_tuple(s), spec.kind);
        if last.as_ref().is_none_or(|(t, _, _)| *t != tuple) {
            let keys = join_keys(s);
            let d = exporter_join(spec.kind, &index, &keys);
            last = Some((tuple, keys, d));
        }
        let Some((_, keys, decision)) = &last else {
            continue;
        };
        match *decision {
            Join::Matched(i) => attach(&mut targets[i], s, adapter),
            Join::Elimination => {
                let note = elimination_note(adapter);
                if !targets[0].notes.contains(&note) {
                    targets[0].notes.push(note);
                }
                attach(&mut targets[0], s, adapter);
            }
            Join::Orphan => {
                let key = keys.first().cloned().unwrap_or_default();
                orphans
                    .entry(format!("{adapter} {key}"))
                    .or_default()
                    .push(s);
            }
            Join::Ambiguous => {
                ambiguous.insert(ambiguous_note(adapter, keys), ());
            }
            Join::NotAReplica => {}
        }
    }
    for t in targets.iter_mut() {
        for note in ambiguous.keys() {
            t.notes.push(note.clone());
        }
    }
    orphans
}

/// Step 4, when there is no engine at all: each exporter host is a target of its own (GPU and
/// host checks only).
fn host_targets<'a>(
    orphans: BTreeMap<String, Vec<&'a Series>>,
    adapters: &Adapters,
) -> Vec<TargetInput<'a>> {
    let mut by_host: BTreeMap<String, TargetInput<'a>> = BTreeMap::new();
    for (key, series) in orphans {
        let host = key.split_once(' ').map(|x| x.1).unwrap_or("").to_string();
        let t = by_host.entry(host.clone()).or_insert_with(|| TargetInput {
            target: Target {
                engine: None,
                labels: BTreeMap::from([("host".to_string(), host_label(&host))]),
            },
            engine: None,
            series: Vec::new(),
            adapters: Vec::new(),
            notes: vec![NO_ENGINE_NOTE.to_string()],
        });
        for s in series {
            let adapter = adapters
                .owner(&s.name)
                .map(|a| a.name.as_str())
                .unwrap_or("");
            attach(t, s, adapter);
        }
    }
    by_host.into_values().collect()
}

fn attach<'a>(t: &mut TargetInput<'a>, s: &'a Series, adapter: &str) {
    t.series.push(s);
    if !t.adapters.iter().any(|a| a == adapter) {
        t.adapters.push(adapter.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A container exporter joins the replica whose pod it names, and nothing else: not a
    /// neighbour's pod on the replica's host, not by elimination; host and GPU exporters still
    /// join by host.
    #[test]
    fn containers_join_by_their_pod_only() {
        let keys = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let replica = keys(&["host=node-a", "pod=llama-0"]);
        let index = JoinIndex::new(std::slice::from_ref(&replica));
        let own = keys(&["pod=llama-0", "host=node-a"]);
        let neighbour = keys(&["pod=batch-0", "host=node-a"]);
        let c = AdapterKind::Container;
        assert_eq!(exporter_join(c, &index, &own), Join::Matched(0));
        assert_eq!(exporter_join(c, &index, &neighbour), Join::NotAReplica);
        assert_eq!(
            exporter_join(c, &index, &keys(&["host=node-b"])),
            Join::NotAReplica
        );
        let h = AdapterKind::Host;
        assert_eq!(exporter_join(h, &index, &neighbour), Join::Matched(0));
        assert_eq!(
            exporter_join(h, &index, &keys(&["host=node-b"])),
            Join::Elimination
        );
    }

    proptest! {
        /// The index decides as the scan over every target does.
        #[test]
        fn join_index_decides_as_the_scan(
            targets in proptest::collection::vec(proptest::collection::vec(0u8..12, 0..4), 0..6),
            keys in proptest::collection::vec(0u8..12, 0..4),
        ) {
            let key = |k: &u8| format!("host=h{k}");
            let target_keys: Vec<Vec<String>> = targets
                .iter()
                .map(|t| {
                    let mut k: Vec<String> = t.iter().map(key).collect();
                    k.sort();
                    k.dedup();
                    k
                })
                .collect();
            let keys: Vec<String> = keys.iter().map(key).collect();
            prop_assert_eq!(JoinIndex::new(&target_keys).join(&keys), join(&keys, &target_keys));
        }
    }
}
