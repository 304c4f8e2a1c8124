//! Size bounds for the receiver's memories (diagnoses, triage results, deliveries): kept for
//! `dedupe_ttl`, but never more than a fixed number of entries, and pruned only when full, so a
//! request does not scan them all.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

/// Diagnoses remembered per (fingerprint, startsAt); a forgotten one is diagnosed again.
pub const MAX_DIAGNOSES: usize = 1024;
/// Triage results remembered per (target, time); each holds whole reports.
pub const MAX_TRIAGES: usize = 256;
/// Deliveries remembered per group notification (small; forgetting one would deliver a resend
/// again).
pub const MAX_DELIVERIES: usize = 65_536;

/// Makes room in `map` for one more entry when it holds `cap`: first every entry older than
/// `ttl`, then the oldest ones. `age` says how old an entry is, or None for one in use, which
/// stays.
pub fn make_room<K: Clone + Eq + Hash, V>(
    map: &mut HashMap<K, V>,
    cap: usize,
    ttl: Duration,
    age: impl Fn(&V) -> Option<Duration>,
) {
    if map.len() < cap {
        return;
    }
    map.retain(|_, v| age(v).is_none_or(|a| a < ttl));
    if map.len() < cap {
        return;
    }
    // Still full of live entries: the oldest quarter goes (so the next inserts need no scan).
    let mut ages: Vec<(Duration, K)> = map
        .iter()
        .filter_map(|(k, v)| age(v).map(|a| (a, k.clone())))
        .collect();
    ages.sort_by_key(|a| std::cmp::Reverse(a.0));
    for (_, k) in ages.into_iter().take((cap / 4).max(1)) {
        map.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_map_loses_its_expired_then_its_oldest_entries_and_keeps_those_in_use() {
        let ttl = Duration::from_secs(60);
        // value: Some(age in s), or None for an entry in use
        let mut map: HashMap<u32, Option<u64>> = HashMap::new();
        let age = |v: &Option<u64>| v.map(Duration::from_secs);
        for i in 0..10_000u32 {
            make_room(&mut map, 100, ttl, age);
            // Entries get younger as i grows; one in a thousand is in use.
            let v = if i % 1000 == 0 {
                None
            } else {
                Some(10_000 - u64::from(i))
            };
            map.insert(i, v);
        }
        assert!(map.len() <= 100, "{}", map.len());
        assert_eq!(
            map.values().filter(|v| v.is_none()).count(),
            10,
            "in use: kept"
        );
        // The youngest entry stays; a prune leaves nothing expired (between prunes expired
        // entries may wait: readers check the age).
        assert!(map.contains_key(&9_999));
        let len = map.len();
        make_room(&mut map, len, ttl, age);
        assert!(map.values().all(|v| v.is_none_or(|a| a < 60)));
    }
}
