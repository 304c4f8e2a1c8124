//! Size and age bounds for the receiver's memories keyed by what arrives from outside (an
//! alert's fingerprint, a group, a target at a time slot): an entry is kept for `ttl` at most,
//! and never more than a fixed number of them. Entries leave oldest first, from a queue kept in
//! insertion order beside the map, so each call removes the few that are due and never scans
//! the map: at 100 new alerts a second a scan of 65,536 records on every request would cost
//! more than the request.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Diagnoses remembered per (fingerprint, startsAt); a forgotten one is diagnosed again.
pub const MAX_DIAGNOSES: usize = 1024;
/// Triage results remembered per (target, time); each holds whole reports.
pub const MAX_TRIAGES: usize = 256;
/// Deliveries remembered per group notification (compact; forgetting one would deliver a
/// resend again).
pub const MAX_DELIVERIES: usize = 65_536;

/// A map holding at most `cap` entries, none older than `ttl` once a call has seen it due.
/// An entry's age counts from its first insertion: replacing its value keeps its place.
///
/// Times are passed in (`now`), so the bounds can be tested without sleeping.
#[derive(Debug)]
pub struct AgedMap<K, V> {
    /// Key → (value, stamp of its insertion).
    entries: HashMap<K, (V, u64)>,
    /// (stamp, key) in insertion order. A key removed or inserted again leaves a stale pair
    /// here, recognised by its stamp and dropped when it reaches the front.
    order: VecDeque<(u64, K)>,
    cap: usize,
    ttl_us: u64,
    /// Stamps are microseconds since this instant, made strictly increasing so that each one
    /// names a single insertion.
    epoch: Instant,
    /// The least stamp the next insertion may take.
    next_stamp: u64,
}

impl<K: Clone + Eq + Hash, V> AgedMap<K, V> {
    /// An empty map of at most `cap` entries (at least one), each kept at most `ttl`.
    pub fn new(cap: usize, ttl: Duration) -> AgedMap<K, V> {
        AgedMap {
            entries: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
            ttl_us: u64::try_from(ttl.as_micros()).unwrap_or(u64::MAX),
            epoch: Instant::now(),
            next_stamp: 0,
        }
    }

    /// [`AgedMap::new`] with its memory taken at once. A map that steady traffic fills to its
    /// bound (delivery records: about 11 minutes at 100 alerts a second) then costs its memory
    /// from the start instead of a little more every minute, and its table never grows by
    /// doubling (a copy of the whole table each time). The table has room for twice the bound:
    /// std's map cleans up removed entries in place only while at most half full, and grows
    /// otherwise, which a full map losing its oldest entry at every insert would make it do.
    pub fn reserved(cap: usize, ttl: Duration) -> AgedMap<K, V> {
        let mut map = AgedMap::new(cap, ttl);
        map.entries.reserve(map.cap.saturating_mul(2));
        map.order.reserve(map.cap);
        map
    }

    /// Entries held (some may be due and not removed yet; no call returns them).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// `key`'s value, unless it is older than the TTL.
    pub fn get(&mut self, key: &K, now: Instant) -> Option<&V> {
        self.prune(now, 0);
        self.entries.get(key).map(|(v, _)| v)
    }

    /// `key`'s value, inserting `make()` first when it has none.
    pub fn get_or_insert_with(&mut self, key: K, now: Instant, make: impl FnOnce() -> V) -> &mut V {
        self.prune(now, 0);
        if !self.entries.contains_key(&key) {
            self.prune(now, 1);
            let stamp = self.stamp(now);
            self.order.push_back((stamp, key.clone()));
            self.entries.insert(key.clone(), (make(), stamp));
        }
        let (v, _) = self.entries.get_mut(&key).expect("present: inserted above");
        v
    }

    /// Sets `key`'s value (a new entry, or a new value keeping the entry's age).
    pub fn insert(&mut self, key: K, value: V, now: Instant) {
        let mut value = Some(value);
        let slot = self.get_or_insert_with(key, now, || value.take().expect("taken once"));
        if let Some(v) = value {
            *slot = v;
        }
    }

    /// Forgets `key`; true when it was there.
    pub fn remove(&mut self, key: &K) -> bool {
        self.entries.remove(key).is_some()
    }

    /// Microseconds from the epoch to `now`, or the next free stamp after the last one.
    fn stamp(&mut self, now: Instant) -> u64 {
        let us = u64::try_from(now.saturating_duration_since(self.epoch).as_micros())
            .unwrap_or(u64::MAX);
        let stamp = us.max(self.next_stamp);
        self.next_stamp = stamp.saturating_add(1);
        stamp
    }

    /// Removes, from the front, what is older than the TTL, then what leaves no room for
    /// `room` more. The queue itself is held to `cap` too (stale pairs count), so a key
    /// removed and inserted again and again cannot grow it.
    fn prune(&mut self, now: Instant, room: usize) {
        let now_us = u64::try_from(now.saturating_duration_since(self.epoch).as_micros())
            .unwrap_or(u64::MAX);
        while let Some((stamp, key)) = self.order.front() {
            let expired = now_us.saturating_sub(*stamp) >= self.ttl_us;
            let full = self.order.len() + room > self.cap;
            if !expired && !full {
                break;
            }
            if self.entries.get(key).is_some_and(|(_, s)| s == stamp) {
                self.entries.remove(key);
            }
            self.order.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ms` after `start` (taken after the map was made: its clock starts then).
    fn at(start: Instant, ms: u64) -> Instant {
        start + Duration::from_millis(ms)
    }

    #[test]
    fn never_holds_more_than_its_bound_and_drops_the_oldest_first() {
        let mut map = AgedMap::new(100, Duration::from_secs(3600));
        let start = Instant::now();
        for i in 0..1000u32 {
            map.insert(i, i, at(start, u64::from(i)));
            assert!(map.len() <= 100, "{}", map.len());
            assert!(map.order.len() <= 100, "{}", map.order.len());
        }
        let now = at(start, 1000);
        assert_eq!(map.get(&899, now), None, "the oldest went");
        assert_eq!(map.get(&900, now), Some(&900));
        assert_eq!(map.get(&999, now), Some(&999));
    }

    #[test]
    fn entries_older_than_the_ttl_are_gone_well_below_the_bound() {
        let mut map = AgedMap::new(1000, Duration::from_secs(60));
        let start = Instant::now();
        for i in 0..100u64 {
            // One a second: after 100 s only the last minute's remain.
            map.insert(i, (), at(start, i * 1000));
        }
        let now = at(start, 99_999);
        assert_eq!(map.get(&39, now), None);
        assert_eq!(map.len(), 60, "pruned by age on the way");
        assert_eq!(map.get(&40, now), Some(&()));
        assert_eq!(map.get(&40, at(start, 100_000)), None, "60 s old");
    }

    #[test]
    fn a_new_value_keeps_the_age_and_a_reinserted_key_gets_a_new_one() {
        let ttl = Duration::from_secs(10);
        let mut map = AgedMap::new(10, ttl);
        let start = Instant::now();
        map.insert("a", 1, start);
        map.insert("a", 2, at(start, 5_000));
        assert_eq!(map.get(&"a", at(start, 9_999)), Some(&2));
        assert_eq!(
            map.get(&"a", at(start, 10_000)),
            None,
            "aged from the first insert"
        );
        map.insert("b", 1, at(start, 11_000));
        map.remove(&"b");
        map.insert("b", 2, at(start, 15_000));
        // b's first pair (11 s) is stale: its expiry must not take the second insert along.
        assert_eq!(map.get(&"b", at(start, 24_000)), Some(&2));
        assert_eq!(map.get(&"b", at(start, 25_000)), None);
    }

    #[test]
    fn a_reserved_map_never_grows_its_table() {
        let mut map = AgedMap::reserved(1000, Duration::from_secs(3600));
        let (entries, order) = (map.entries.capacity(), map.order.capacity());
        assert!(entries >= 1000 && order >= 1000);
        let start = Instant::now();
        for i in 0..50_000u32 {
            map.insert(i, (), at(start, u64::from(i)));
        }
        assert_eq!(map.len(), 1000);
        // Removed entries' slots count against the capacity until they are cleaned up: it may
        // read lower, never higher (a larger table).
        assert!(
            map.entries.capacity() <= entries,
            "{}",
            map.entries.capacity()
        );
        assert_eq!(map.order.capacity(), order);
    }

    #[test]
    fn removing_and_inserting_one_key_forever_stays_bounded() {
        let mut map = AgedMap::new(8, Duration::from_secs(3600));
        let start = Instant::now();
        for i in 0..1000 {
            map.insert(7u8, i, at(start, i));
            map.remove(&7);
        }
        assert!(map.order.len() <= 8, "{}", map.order.len());
        assert!(map.is_empty());
    }
}
