//! Whether each sink is failing, so that requests answered after delivery do not all wait out
//! `retry.deadline` against a sink known to be down (a circuit breaker).
//!
//! While a sink fails, one attempt at a time, at most one per probe interval, may try it (the
//! probe); other attempts are refused at once and their requests answered 503, which
//! Alertmanager resends. A request that found the sink already failing when it started makes
//! at most that one attempt: retrying inside a request absorbs a blip, not an outage. The first
//! 2xx closes the breaker. Nothing is lost: a refused delivery is not recorded as accepted.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The breakers of all sinks, by the sink's index in the configuration.
pub struct SinkHealth {
    sinks: Vec<Mutex<State>>,
    probe_interval: Duration,
}

#[derive(Default)]
struct State {
    /// When the first failed attempt since the last success ended; None while healthy.
    failing_since: Option<Instant>,
    /// The last attempt's error while failing.
    last_error: String,
    /// When the last attempt started.
    last_attempt: Option<Instant>,
    /// A probe is in flight.
    probing: bool,
}

/// Why an attempt was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// How long the sink has been failing.
    pub failing_for: Duration,
    /// Its last error.
    pub last_error: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sink failing for {:.1} s (last error: {}); not tried again until a probe succeeds",
            self.failing_for.as_secs_f64(),
            self.last_error
        )
    }
}

/// An attempt allowed to go ahead; report its result with [`Attempt::succeeded`] or
/// [`Attempt::failed`]. A probe frees the sink for the next when it is dropped, reported or
/// not (its request cut short).
pub struct Attempt<'a> {
    health: &'a SinkHealth,
    sink: usize,
    probe: bool,
}

impl SinkHealth {
    /// Breakers for `sinks` sinks, probing a failing sink at most once per `probe_interval`.
    pub fn new(sinks: usize, probe_interval: Duration) -> SinkHealth {
        SinkHealth {
            sinks: (0..sinks).map(|_| Mutex::default()).collect(),
            probe_interval,
        }
    }

    /// May a request that started at `request_start` make its `attempt`-th (from 1) attempt on
    /// `sink` now?
    pub fn attempt(
        &self,
        sink: usize,
        request_start: Instant,
        attempt: u32,
    ) -> Result<Attempt<'_>, Refused> {
        let now = Instant::now();
        let mut s = self.lock(sink);
        let probe = match s.failing_since {
            None => false,
            Some(since) => {
                let retry_in_outage = attempt > 1 && since < request_start;
                let too_soon = s
                    .last_attempt
                    .is_some_and(|t| now.duration_since(t) < self.probe_interval);
                if s.probing || too_soon || retry_in_outage {
                    return Err(Refused {
                        failing_for: now.duration_since(since),
                        last_error: s.last_error.clone(),
                    });
                }
                true
            }
        };
        s.last_attempt = Some(now);
        s.probing = probe;
        Ok(Attempt {
            health: self,
            sink,
            probe,
        })
    }

    /// How long `sink` has been failing; None while it is healthy.
    pub fn failing_for(&self, sink: usize) -> Option<Duration> {
        let since = self.lock(sink).failing_since?;
        Some(Instant::now().duration_since(since))
    }

    fn lock(&self, sink: usize) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the state half-written; go on with it.
        self.sinks[sink]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Attempt<'_> {
    /// The sink answered 2xx: it is healthy.
    pub fn succeeded(self) {
        let mut s = self.health.lock(self.sink);
        s.failing_since = None;
        s.last_error.clear();
    }

    /// The sink refused or could not be reached.
    pub fn failed(self, error: &str) {
        let mut s = self.health.lock(self.sink);
        s.failing_since.get_or_insert_with(Instant::now);
        s.last_error = error.to_string();
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if self.probe {
            self.health.lock(self.sink).probing = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_millis(200);

    #[tokio::test(start_paused = true)]
    async fn a_healthy_sink_takes_every_attempt_at_once() {
        let h = SinkHealth::new(1, INTERVAL);
        let start = Instant::now();
        let a = h.attempt(0, start, 1).unwrap();
        let b = h.attempt(0, start, 1).unwrap();
        a.succeeded();
        b.succeeded();
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_sink_takes_one_probe_per_interval() {
        let h = SinkHealth::new(1, INTERVAL);
        let start = Instant::now();
        h.attempt(0, start, 1).unwrap().failed("HTTP 500");
        // Too soon after the failed attempt.
        let refused = h.attempt(0, Instant::now(), 1).err().unwrap();
        assert_eq!(refused.last_error, "HTTP 500");
        tokio::time::advance(INTERVAL).await;
        let probe = h.attempt(0, Instant::now(), 1).unwrap();
        // While the probe is in flight, nobody else tries, however long it takes.
        tokio::time::advance(INTERVAL * 3).await;
        assert!(h.attempt(0, Instant::now(), 1).is_err());
        assert_eq!(h.failing_for(0), Some(INTERVAL * 4));
        probe.succeeded();
        assert_eq!(h.failing_for(0), None);
        assert!(h.attempt(0, Instant::now(), 1).is_ok());
        assert!(h.attempt(0, Instant::now(), 1).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_retries_a_blip_but_not_an_outage_it_found() {
        let h = SinkHealth::new(1, INTERVAL);
        let first = Instant::now();
        h.attempt(0, first, 1).unwrap().failed("HTTP 503");
        tokio::time::advance(INTERVAL).await;
        // The request that saw the sink fail retries it.
        h.attempt(0, first, 2).unwrap().failed("HTTP 503");
        // A request that started after the sink was failing makes one attempt, no retry.
        tokio::time::advance(INTERVAL).await;
        let later = Instant::now();
        h.attempt(0, later, 1).unwrap().failed("HTTP 503");
        tokio::time::advance(INTERVAL).await;
        let refused = h.attempt(0, later, 2).err().unwrap();
        assert_eq!(refused.failing_for, INTERVAL * 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_dropped_unreported_frees_the_sink_for_the_next() {
        let h = SinkHealth::new(2, INTERVAL);
        h.attempt(0, Instant::now(), 1).unwrap().failed("timed out");
        tokio::time::advance(INTERVAL).await;
        drop(h.attempt(0, Instant::now(), 1).unwrap());
        tokio::time::advance(INTERVAL).await;
        assert!(h.attempt(0, Instant::now(), 1).is_ok());
        // The other sink is not concerned.
        assert!(h.attempt(1, Instant::now(), 1).is_ok());
    }
}
