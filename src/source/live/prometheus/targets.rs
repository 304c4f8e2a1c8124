//! Targets from discovery's answers: one per engine replica, exporter groups joined to them
//! by the file reader's rules, and the routes that map an answer's series back to a target.

use std::collections::{BTreeMap, BTreeSet};

use llm_doctor_engine::Target;

use super::labels::{engine_replicas, join_keys, join_tuple};
use super::plan::{Answers, Purpose};
use crate::signal::adapter::{AdapterKind, AdapterSpec, Adapters};
use crate::target::{self, Join, JOIN_LABELS};

/// A target being assembled.
pub(super) struct LiveTarget {
    pub(super) target: Target,
    /// Engine adapter index, when the target is a replica.
    pub(super) engine: Option<usize>,
    /// Adapters joined to it (engine first), by index.
    pub(super) adapters: Vec<usize>,
    /// Engine discovery groups (label facts read them).
    pub(super) groups: Vec<BTreeMap<String, String>>,
    pub(super) notes: Vec<String>,
}

/// Where answer series go.
pub(super) struct Routes {
    /// (engine adapter, pod, instance) → target.
    engine_pairs: BTreeMap<(usize, String, String), usize>,
    /// (engine adapter, instance label of the target) → target: series from the engine's own
    /// endpoint that are not the engine's (`process_cpu_seconds_total`), as the file reader
    /// joins them.
    engine_instances: BTreeMap<(usize, String), usize>,
    /// (exporter adapter, join tuple) → target.
    exporter_groups: BTreeMap<(usize, Vec<String>), usize>,
}

impl Routes {
    /// The target a series of `adapter` belongs to, from its labels (`label` gives a label's
    /// value, "" when absent): read where they lie, so routing a raw series builds no map.
    pub(super) fn target_of<'l>(
        &self,
        adapter: usize,
        kind: AdapterKind,
        label: impl Fn(&str) -> &'l str,
    ) -> Option<usize> {
        if kind == AdapterKind::Engine {
            let (pod, instance) = (label("pod").to_string(), label("instance").to_string());
            self.engine_pairs
                .get(&(adapter, pod, instance.clone()))
                .or_else(|| self.engine_instances.get(&(adapter, instance)))
                .copied()
        } else {
            let join: Vec<String> = JOIN_LABELS.iter().map(|l| label(l).to_string()).collect();
            self.exporter_groups.get(&(adapter, join)).copied()
        }
    }
}

/// Builds targets from the discovery answers, with the file reader's rules; returns them with
/// the routes that map answer series onto them.
pub(super) fn build_targets(adapters: &Adapters, answers: &Answers) -> (Vec<LiveTarget>, Routes) {
    let mut routes = Routes {
        engine_pairs: BTreeMap::new(),
        engine_instances: BTreeMap::new(),
        exporter_groups: BTreeMap::new(),
    };
    let mut targets = engine_targets(adapters, answers, &mut routes);
    let orphans = join_exporters(adapters, answers, &mut targets, &mut routes);
    if targets.is_empty() {
        targets = host_targets(orphans, &mut routes);
    }
    (targets, routes)
}

/// The label groups discovery found for adapter `i`.
fn discovered(answers: &Answers, i: usize) -> Vec<BTreeMap<String, String>> {
    match answers.by_purpose.get(&Purpose::Discover(i)) {
        Some((_, Ok(a))) => a.samples.iter().map(|(l, _)| l.clone()).collect(),
        _ => Vec::new(),
    }
}

/// Step 1: engine replicas, ordered by adapter name then replica, as the file reader's map.
fn engine_targets(adapters: &Adapters, answers: &Answers, routes: &mut Routes) -> Vec<LiveTarget> {
    let mut engines: Vec<(usize, &AdapterSpec)> = adapters
        .list
        .iter()
        .enumerate()
        .filter(|(_, a)| a.kind == AdapterKind::Engine)
        .collect();
    engines.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    let mut targets: Vec<LiveTarget> = Vec::new();
    for (i, a) in engines {
        for (_, replica) in engine_replicas(&discovered(answers, i)) {
            let t = targets.len();
            for (pod, instance) in &replica.pairs {
                routes
                    .engine_pairs
                    .insert((i, pod.clone(), instance.clone()), t);
            }
            if let Some(instance) = replica.labels.get("instance") {
                routes
                    .engine_instances
                    .entry((i, instance.clone()))
                    .or_insert(t);
            }
            targets.push(LiveTarget {
                target: Target {
                    engine: Some(a.engine_name().to_string()),
                    labels: replica.labels,
                },
                engine: Some(i),
                adapters: vec![i],
                groups: replica.groups,
                notes: Vec::new(),
            });
        }
    }
    targets
}

/// Exporter groups by host key, with the join tuples of those no replica took.
type Orphans = BTreeMap<String, Vec<(usize, Vec<String>)>>;

/// Step 2: exporter groups joined by host; by elimination when there is one replica. Returns the
/// groups no replica took.
fn join_exporters(
    adapters: &Adapters,
    answers: &Answers,
    targets: &mut [LiveTarget],
    routes: &mut Routes,
) -> Orphans {
    let target_keys: Vec<Vec<String>> = targets
        .iter()
        .map(|t| {
            let mut k: Vec<String> = t.groups.iter().flat_map(join_keys).collect();
            k.sort();
            k.dedup();
            k
        })
        .collect();
    let index = target::JoinIndex::new(&target_keys);
    let mut orphans: Orphans = BTreeMap::new();
    let mut ambiguous: BTreeSet<String> = BTreeSet::new();
    for (i, a) in adapters.list.iter().enumerate() {
        if a.kind == AdapterKind::Engine {
            continue;
        }
        let tuples: BTreeSet<Vec<String>> = discovered(answers, i).iter().map(join_tuple).collect();
        for tuple in tuples {
            let labels: BTreeMap<String, String> = JOIN_LABELS
                .iter()
                .zip(&tuple)
                .map(|(l, v)| (l.to_string(), v.clone()))
                .collect();
            let keys = join_keys(&labels);
            let to = match target::exporter_join(a.kind, &index, &keys) {
                Join::Matched(t) => t,
                Join::Elimination => {
                    let note = target::elimination_note(&a.name);
                    if !targets[0].notes.contains(&note) {
                        targets[0].notes.push(note);
                    }
                    0
                }
                Join::Orphan => {
                    let key = keys.first().cloned().unwrap_or_default();
                    orphans.entry(key).or_default().push((i, tuple));
                    continue;
                }
                Join::Ambiguous => {
                    ambiguous.insert(target::ambiguous_note(&a.name, &keys));
                    continue;
                }
                Join::NotAReplica => continue,
            };
            attach(&mut targets[to], i);
            routes.exporter_groups.insert((i, tuple), to);
        }
    }
    for t in targets.iter_mut() {
        t.notes.extend(ambiguous.iter().cloned());
    }
    orphans
}

/// Step 3, when there is no engine at all: each exporter host is a target of its own.
fn host_targets(orphans: Orphans, routes: &mut Routes) -> Vec<LiveTarget> {
    let mut targets = Vec::new();
    for (key, members) in orphans {
        let t = targets.len();
        let mut target = LiveTarget {
            target: Target {
                engine: None,
                labels: BTreeMap::from([("host".to_string(), target::host_label(&key))]),
            },
            engine: None,
            adapters: Vec::new(),
            groups: Vec::new(),
            notes: vec![target::NO_ENGINE_NOTE.to_string()],
        };
        for (i, tuple) in members {
            attach(&mut target, i);
            routes.exporter_groups.insert((i, tuple), t);
        }
        targets.push(target);
    }
    targets
}

fn attach(t: &mut LiveTarget, adapter: usize) {
    if !t.adapters.contains(&adapter) {
        t.adapters.push(adapter);
    }
}
