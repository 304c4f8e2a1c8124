//! The dedupe store of deliveries: which sinks accepted each group notification, remembered
//! for `dedupe_ttl` (at most [`MAX_DELIVERIES`] of them), and who is delivering a group right
//! now, so a concurrent resend waits for that delivery instead of making its own.
//!
//! One record is kept per notification, up to the bound, at 100 alerts a second for about 11
//! minutes: records are fixed-size values inside the map's own table, with no allocation of
//! their own. Small allocations that outlive the bursts around them keep the allocator's pages
//! resident after the bursts are freed; two per record (a shared lock and a list of sinks) made
//! serve's resident memory climb for as long as records accumulated.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::bounded::{AgedMap, MAX_DELIVERIES};
use super::payload::Notification;

/// Sinks a record can track: one bit each.
pub const MAX_SINKS: usize = 32;

/// A 128-bit keyed digest of a notification's identity: its text would cost memory per record,
/// and with keys unknown outside the process nobody can make two notifications collide.
pub type Digest = [u64; 2];

/// Digest → (its lock, claimants holding or waiting for it).
type Claims = HashMap<Digest, (Arc<tokio::sync::Mutex<()>>, usize)>;

/// What one group's delivery has achieved so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Record {
    /// Bit `i`: sink `i` accepted it (or had nothing to send).
    done: u32,
    /// Put on the queue (`ack: on_receipt`): a resend is answered 202 and not queued again.
    pub queued: bool,
}

impl Record {
    /// Whether sink `sink` accepted it.
    pub fn accepted(&self, sink: usize) -> bool {
        sink < MAX_SINKS && self.done & (1 << sink) != 0
    }

    /// Sink `sink` accepted it (or had nothing to send). Sinks beyond [`MAX_SINKS`] are refused
    /// by the configuration.
    pub fn accept(&mut self, sink: usize) {
        if sink < MAX_SINKS {
            self.done |= 1 << sink;
        }
    }

    /// Whether each of the first `sinks` sinks accepted it.
    pub fn all_accepted(&self, sinks: usize) -> bool {
        (0..sinks).all(|i| self.accepted(i))
    }
}

/// Delivery records and the groups being delivered.
#[derive(Debug)]
pub struct Deliveries {
    records: Mutex<AgedMap<Digest, Record>>,
    /// An entry lives while someone delivers or waits for the group, so there are at most as
    /// many as requests in flight and delivery workers.
    claims: Mutex<Claims>,
    keys: (RandomState, RandomState),
}

impl Deliveries {
    /// An empty store keeping records for `ttl`, with room for [`MAX_DELIVERIES`] of them
    /// taken at once (about 10 MiB).
    pub fn new(ttl: Duration) -> Deliveries {
        Deliveries::with_bound(MAX_DELIVERIES, ttl)
    }

    fn with_bound(cap: usize, ttl: Duration) -> Deliveries {
        Deliveries {
            records: Mutex::new(AgedMap::reserved(cap, ttl)),
            claims: Mutex::default(),
            keys: (RandomState::new(), RandomState::new()),
        }
    }

    /// The digest of a group's identity: the group and each alert's (fingerprint, startsAt,
    /// status). A resend of the same alerts has the same digest.
    pub fn digest(&self, group: &Notification) -> Digest {
        let identity = group.identity();
        [
            self.keys.0.hash_one(&identity),
            self.keys.1.hash_one(&identity),
        ]
    }

    fn records(&self) -> std::sync::MutexGuard<'_, AgedMap<Digest, Record>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn claims(&self) -> std::sync::MutexGuard<'_, Claims> {
        self.claims.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `digest`'s delivery achieved so far (nothing when it is new or forgotten).
    pub fn get(&self, digest: Digest) -> Record {
        self.records()
            .get(&digest, Instant::now())
            .copied()
            .unwrap_or_default()
    }

    /// Records `record` for `digest` (its age counts from the first record).
    pub fn put(&self, digest: Digest, record: Record) {
        self.records().insert(digest, record, Instant::now());
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.records().len()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The right to deliver `digest`, once whoever holds it now lets go.
    pub async fn claim(&self, digest: Digest) -> Claim<'_> {
        let lock = {
            let mut claims = self.claims();
            let (lock, claimants) = claims.entry(digest).or_default();
            *claimants += 1;
            lock.clone()
        };
        // Made before waiting: a waiter dropped while it waits (a request that timed out) still
        // counts itself out.
        let mut claim = Claim {
            store: self,
            digest,
            guard: None,
        };
        claim.guard = Some(lock.lock_owned().await);
        claim
    }

    /// The right to deliver `digest` if nobody delivers it or waits for it now.
    pub fn try_claim(&self, digest: Digest) -> Option<Claim<'_>> {
        let mut claims = self.claims();
        if claims.contains_key(&digest) {
            return None;
        }
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        let guard = lock.clone().try_lock_owned().ok()?;
        claims.insert(digest, (lock, 1));
        Some(Claim {
            store: self,
            digest,
            guard: Some(guard),
        })
    }

    /// Groups being delivered or waited for.
    #[cfg(test)]
    fn claimed(&self) -> usize {
        self.claims().len()
    }
}

/// Held while delivering one group; the last claimant to go removes the group's lock.
#[derive(Debug)]
pub struct Claim<'a> {
    store: &'a Deliveries,
    digest: Digest,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.guard.take();
        let mut claims = self.store.claims();
        if let Some((_, claimants)) = claims.get_mut(&self.digest) {
            *claimants -= 1;
            if *claimants == 0 {
                claims.remove(&self.digest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(fingerprint: &str) -> Notification {
        serde_json::from_value(
            serde_json::json!({"version": "4", "groupKey": "g", "alerts": [
                {"status": "firing", "startsAt": "2026-12-01T00:00:00Z", "fingerprint": fingerprint}
            ]}),
        )
        .unwrap()
    }

    /// A record is a small value with nothing on the heap (`Copy` could not hold a pointer it
    /// owns): 65,536 of them cost the map's table and nothing more.
    #[test]
    fn records_are_small_values() {
        fn copy<T: Copy>() {}
        copy::<Record>();
        copy::<Digest>();
        assert!(std::mem::size_of::<Record>() <= 8);
    }

    #[test]
    fn records_are_bounded_and_resends_match() {
        let store = Deliveries::with_bound(100, Duration::from_secs(3600));
        let mut first = Record::default();
        first.accept(0);
        store.put(store.digest(&group("first")), first);
        for i in 0..1000 {
            let mut r = Record::default();
            r.accept(1);
            store.put(store.digest(&group(&format!("{i:016x}"))), r);
            assert!(store.len() <= 100);
        }
        assert_eq!(
            store.get(store.digest(&group("first"))),
            Record::default(),
            "the oldest record went"
        );
        let resent = store.get(store.digest(&group(&format!("{:016x}", 999))));
        assert!(resent.accepted(1) && !resent.accepted(0));
        assert!(resent.all_accepted(0) && !resent.all_accepted(2));
    }

    #[test]
    fn records_are_forgotten_after_the_ttl() {
        let store = Deliveries::with_bound(100, Duration::from_millis(20));
        let digest = store.digest(&group("a"));
        let mut r = Record::default();
        r.accept(0);
        store.put(digest, r);
        assert_eq!(store.get(digest), r);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(store.get(digest), Record::default());
        assert!(store.is_empty());
    }

    #[tokio::test]
    async fn a_group_has_one_deliverer_and_its_lock_goes_with_the_last_claimant() {
        let store = Deliveries::new(Duration::from_secs(60));
        let digest = store.digest(&group("a"));
        let held = store.claim(digest).await;
        assert!(store.try_claim(digest).is_none(), "held");
        // A waiter given up (a request that timed out) counts itself out.
        let waited = tokio::time::timeout(Duration::from_millis(10), store.claim(digest)).await;
        assert!(waited.is_err());
        assert_eq!(store.claimed(), 1);
        drop(held);
        assert_eq!(
            store.claimed(),
            0,
            "nobody holds or waits: the lock is gone"
        );
        let again = store.try_claim(digest).expect("free");
        let other = store.try_claim(store.digest(&group("b")));
        assert!(other.is_some(), "other groups are not held up");
        drop((again, other));
        assert_eq!(store.claimed(), 0);
    }
}
