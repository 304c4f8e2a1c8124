//! `llm-doctor serve`: an Alertmanager webhook receiver that diagnoses each firing alert against
//! Prometheus at the moment it started and hands the alert on, diagnosis attached, to the
//! configured sinks (a generic webhook, Slack, an Alertmanager).
//!
//! Nothing is lost: the receiver answers 2xx only once every sink accepted the notification,
//! retries a failing sink with backoff until `retry.deadline`, and otherwise answers 503 so
//! Alertmanager resends; once a sink is known to be failing, requests do not each wait out the
//! deadline against it ([`sink_health`]). Resends are deduplicated by (fingerprint, startsAt) for `dedupe_ttl`:
//! an alert is diagnosed once, a group already delivered is answered 200 at once, and a group
//! delivered to some sinks only is retried on the others. Dedupe state lives in memory: a
//! restart forgets it, which at worst repeats a notification.
//!
//! With `receiver.ack: on_receipt` the answer comes before all that: a notification that
//! passes authentication, validation and dedupe is put on a bounded in-memory queue
//! ([`queue`]) and answered 202 (503 when the queue is full); workers triage and deliver it,
//! retrying a failing sink until it accepts, and a shutdown drains the queue within
//! `receiver.shutdown_timeout`. What is still queued when the process dies is lost: Alertmanager
//! already had its 202.
//!
//! Several receivers side by side (two replicas behind one Service) share deliveries through
//! each other: every notification has an owner among them ([`peers`]), so a resend that lands
//! on another receiver is passed to the one that knows it.
//!
//! The triage itself ([`crate::source::live::prometheus`]) is blocking and builds its own runtime, so it runs on a
//! plain thread of its own, at most [`TRIAGE_SLOTS`] at once; alerts that need a triage already
//! running wait for its result without a slot.

mod alerts;
mod app;
pub mod bounded;
pub mod config;
pub mod deliveries;
pub mod listen;
pub mod metrics;
mod pages;
pub mod payload;
pub mod peers;
pub mod queue;
mod routes;
mod server;
pub mod sink_health;
pub mod sinks;
pub mod triage;
mod trim;
mod webhook;
mod workers;

pub use app::{App, TRIAGE_SLOTS};
pub use routes::router;
pub use server::{run, shutdown_signal};
