//! Replicas as discovery names them: identity labels, (pod, instance) pairs and join keys
//! read from label groups.

use std::collections::{BTreeMap, BTreeSet};

use crate::target::{self, IDENTITY_LABELS, JOIN_LABELS};

/// One engine replica as discovery saw it.
#[derive(Debug, Clone, Default)]
pub(super) struct Replica {
    /// Identity labels (the file reader's `IDENTITY_LABELS`), from the replica's groups.
    pub(super) labels: BTreeMap<String, String>,
    /// The (pod, instance) pairs of its groups.
    pub(super) pairs: BTreeSet<(String, String)>,
    /// Its discovery groups (for label facts).
    pub(super) groups: Vec<BTreeMap<String, String>>,
}

/// Discovery groups of one engine adapter by replica: the pod, else the instance.
pub(super) fn engine_replicas(groups: &[BTreeMap<String, String>]) -> BTreeMap<String, Replica> {
    let mut out: BTreeMap<String, Replica> = BTreeMap::new();
    for g in groups {
        let key = replica_key(g);
        let r = out.entry(key).or_default();
        r.pairs.insert(pair(g));
        r.groups.push(g.clone());
    }
    for r in out.values_mut() {
        r.groups.sort();
        for l in IDENTITY_LABELS {
            // The smallest value where groups disagree, so the choice does not depend on order.
            if let Some(v) = r
                .groups
                .iter()
                .filter_map(|g| g.get(*l))
                .filter(|v| !v.is_empty())
                .min()
            {
                r.labels.insert(l.to_string(), v.clone());
            }
        }
    }
    out
}

pub(super) fn label<'a>(labels: &'a BTreeMap<String, String>, name: &str) -> &'a str {
    labels.get(name).map(String::as_str).unwrap_or("")
}

fn replica_key(labels: &BTreeMap<String, String>) -> String {
    match label(labels, "pod") {
        "" => label(labels, "instance").to_string(),
        pod => pod.to_string(),
    }
}

pub(super) fn pair(labels: &BTreeMap<String, String>) -> (String, String) {
    (
        label(labels, "pod").to_string(),
        label(labels, "instance").to_string(),
    )
}

/// The join labels' values: series that agree on them join alike.
pub(super) fn join_tuple(labels: &BTreeMap<String, String>) -> Vec<String> {
    JOIN_LABELS
        .iter()
        .map(|l| label(labels, l).to_string())
        .collect()
}

pub(super) fn join_keys(labels: &BTreeMap<String, String>) -> Vec<String> {
    target::join_keys_of(|l| labels.get(l).map(String::as_str).filter(|v| !v.is_empty()))
}
