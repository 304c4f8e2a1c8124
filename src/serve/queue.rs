//! The in-memory queue of `receiver.ack: on_receipt`: notifications answered 202 and not yet
//! delivered. Bounded by a count (a full queue answers 503, so Alertmanager resends later), and
//! it knows what it holds while a worker delivers it too, so `/metrics` can show the depth and
//! the oldest item's age and a shutdown can say what it left undelivered.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::payload::Notification;

/// One accepted notification.
#[derive(Debug)]
pub struct Item {
    /// The payload as received (the webhook sink hands it on).
    pub raw: Value,
    /// Its typed view.
    pub group: Notification,
    /// When it was accepted.
    pub accepted: Instant,
    id: u64,
}

/// Notifications waiting for a worker, and those a worker is delivering.
#[derive(Debug)]
pub struct Queue {
    capacity: usize,
    inner: Mutex<Inner>,
    ready: Notify,
    /// Signalled whenever an item is finished, for a drain to look again.
    finished: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    waiting: VecDeque<Item>,
    /// id → (accepted, fingerprints) of the items being delivered.
    working: BTreeMap<u64, (Instant, Vec<String>)>,
    next_id: u64,
}

/// What is left, for `/metrics` and the shutdown log.
#[derive(Debug, Clone, PartialEq)]
pub struct Depth {
    /// Items accepted and not delivered (waiting or being delivered).
    pub items: usize,
    /// Age of the oldest of them (zero when empty).
    pub oldest: Duration,
}

impl Queue {
    /// An empty queue holding at most `capacity` undelivered notifications.
    pub fn new(capacity: usize) -> Queue {
        Queue {
            capacity,
            inner: Mutex::new(Inner::default()),
            ready: Notify::new(),
            finished: Notify::new(),
        }
    }

    /// The bound it was made with.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a notification; false when the queue already holds `capacity` (counting those
    /// being delivered: they hold memory too).
    pub fn push(&self, raw: Value, group: Notification) -> bool {
        let mut q = self.lock();
        if q.waiting.len() + q.working.len() >= self.capacity {
            return false;
        }
        let id = q.next_id;
        q.next_id += 1;
        q.waiting.push_back(Item {
            raw,
            group,
            accepted: Instant::now(),
            id,
        });
        drop(q);
        self.ready.notify_one();
        true
    }

    /// The next notification to deliver, waiting for one; it counts as queued until
    /// [`Queue::done`].
    pub async fn pop(&self) -> Item {
        loop {
            // Registered before looking, so a push between the look and the wait is not missed.
            let ready = self.ready.notified();
            {
                let mut q = self.lock();
                if let Some(item) = q.waiting.pop_front() {
                    let fingerprints = fingerprints(&item.group);
                    q.working.insert(item.id, (item.accepted, fingerprints));
                    // Another worker may take the next one.
                    if !q.waiting.is_empty() {
                        self.ready.notify_one();
                    }
                    return item;
                }
            }
            ready.await;
        }
    }

    /// `item` is delivered (or given up): it leaves the queue.
    pub fn done(&self, item: &Item) {
        self.lock().working.remove(&item.id);
        self.finished.notify_waiters();
    }

    /// How many are undelivered and how old the oldest is.
    pub fn depth(&self) -> Depth {
        let q = self.lock();
        let oldest = q
            .waiting
            .front()
            .map(|i| i.accepted)
            .into_iter()
            .chain(q.working.values().map(|w| w.0))
            .min();
        Depth {
            items: q.waiting.len() + q.working.len(),
            oldest: oldest.map_or(Duration::ZERO, |t| t.elapsed()),
        }
    }

    /// The fingerprints of every undelivered notification, sorted.
    pub fn undelivered(&self) -> Vec<String> {
        let q = self.lock();
        let mut out: Vec<String> = q
            .waiting
            .iter()
            .flat_map(|i| fingerprints(&i.group))
            .chain(q.working.values().flat_map(|w| w.1.iter().cloned()))
            .collect();
        out.sort();
        out
    }

    /// Waits until nothing is undelivered or `deadline` passes; true when empty.
    pub async fn drain(&self, deadline: Instant) -> bool {
        loop {
            let finished = self.finished.notified();
            if self.depth().items == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, finished).await.is_err() {
                return self.depth().items == 0;
            }
        }
    }
}

fn fingerprints(group: &Notification) -> Vec<String> {
    group.alerts.iter().map(|a| a.fingerprint.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(fp: &str) -> (Value, Notification) {
        let raw = serde_json::json!({"version": "4", "groupKey": "g", "alerts": [
            {"status": "firing", "startsAt": "2026-12-01T00:00:00Z", "fingerprint": fp}
        ]});
        let group = serde_json::from_value(raw.clone()).unwrap();
        (raw, group)
    }

    #[tokio::test]
    async fn bounded_counting_items_being_delivered_and_drained_when_done() {
        let q = Queue::new(2);
        let (r, g) = group("a");
        assert!(q.push(r, g));
        let (r, g) = group("b");
        assert!(q.push(r, g));
        let (r, g) = group("c");
        assert!(!q.push(r, g), "full");
        let a = q.pop().await;
        assert_eq!(a.group.alerts[0].fingerprint, "a");
        let (r, g) = group("c");
        assert!(!q.push(r, g), "still full: a is being delivered");
        assert_eq!(q.depth().items, 2);
        assert_eq!(q.undelivered(), ["a", "b"]);
        q.done(&a);
        let b = q.pop().await;
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(!q.drain(soon).await, "b is not done");
        q.done(&b);
        assert!(q.drain(Instant::now()).await);
        assert_eq!(
            q.depth(),
            Depth {
                items: 0,
                oldest: Duration::ZERO
            }
        );
    }
}
