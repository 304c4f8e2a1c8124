//! Live triage from Prometheus (`diagnose --prometheus URL`): the same snapshots the file reader
//! builds, computed by Prometheus (or Thanos, Mimir, VictoriaMetrics) over its own data.
//!
//! Every signal comes from its one definition in `rules/signals/*.yaml`, compiled to PromQL by
//! [`crate::signal::promql::compile`]; nothing here knows a metric name. The number of queries is fixed by
//! the adapters, never by the size of the fleet: each query aggregates `by` the labels that
//! identify a target, so one answer serves every replica at once, and its series are mapped
//! back to targets afterwards.
//!
//! One triage is:
//!
//! 1. **Discovery**, one instant query per adapter at the evaluation time:
//!    `count by (instance, pod, …) ({__name__=~"vllm:num_requests_running|…"})` over the metrics
//!    the adapter's signals read (not every name under its prefix: node_exporter alone has
//!    hundreds per host) says which replicas exist and their identity labels; exporters (dcgm,
//!    node) likewise by their join labels. Alongside, one query
//!    for the version-revealing metric names and one per info metric (`vllm:cache_config_info`).
//! 2. **Signals**: as soon as an adapter's discovery says it is present, every signal it defines
//!    is queried, plus its gauge facts. A gauge's last value and window mean, maximum and
//!    minimum are four compiled expressions sent as one query (see [`STAT_LABEL`]). Engines'
//!    queries aggregate `by (pod, instance)`, exporters' by their join labels (`pod`,
//!    `Hostname`, `hostname`, `instance`). Constants need no query. The window is sent one
//!    millisecond short, so that Prometheus 2 (whose ranges include their left edge) reads the
//!    samples of the reader's left-open window. A signal with no PromQL form (a batch scaling,
//!    which pairs counter growth with the batch interval by interval), and the statistics of a
//!    window's samples one by one (a gauge ratio's or difference's minimum, mean and maximum,
//!    the share of samples with a bit set), are one range-vector query of their metrics' raw
//!    samples, evaluated per target by the file reader's own code: as subqueries stepping a
//!    second apart over the window they were the costliest queries of a triage.
//!
//!    `--selector` is matched, as for files, against each replica's identity labels, which
//!    needs all of a replica's series: a matcher pushed into the discovery query would drop
//!    series that lack its label (`vllm:cache_config_info` has no `model_name`) and change what
//!    a negative matcher selects. So discovery is fleet-wide, and the selected replicas' engine
//!    queries are then restricted to their `instance`s; exporters' queries stay fleet-wide.
//! 3. **Assembly**: replicas become targets and exporter groups are joined to them with the file
//!    reader's own rules (`crate::target::join`: pod, host label, host part of `instance`, a
//!    single replica by elimination, ambiguity noted); signals, hints and facts go through the
//!    file reader's code (`fill_missing_hints`, `prepared::add_facts`), so precedence and hints
//!    cannot drift apart.
//!
//! All queries run concurrently on a current-thread tokio runtime (at most
//! [`LiveOptions::concurrency`] in flight), each with its own timeout, at an explicit `time`
//! (old data stays visible). A query that fails (HTTP 400 or 422, a timeout) costs only its
//! signals: they become unknown and the failure is listed in [`LiveResult::errors`]. A
//! Prometheus that cannot be reached at all (refused, DNS, timeout of the discovery) is an
//! error naming the address.
//!
//! Semantics match the file reader except at the edges: Prometheus 2.x range selectors include
//! a sample exactly on the window's left edge where the file reader's are left-open, and
//! VictoriaMetrics extrapolates `rate()` differently; discovery sees series with a sample in the
//! last 5 minutes before the evaluation time (the instant-query lookback). When several groups
//! of one adapter's series are
//! joined to one target (a pod exporting on two ports, say), values are combined where the
//! expression allows it (sums, maxima, minima) and otherwise left unknown with a hint.

mod answer;
mod assemble;
mod http;
mod labels;
mod plan;
mod prepare;
mod record;
mod targets;

pub use assemble::LiveResult;
pub use http::{split_credentials, LiveOptions, PromAuth, DEFAULT_CONCURRENCY};
pub use plan::{discovery_selector, gauge_fact_query, signal_query, SignalQuery};
pub use prepare::{prepare_from_prometheus, triage_window};
pub use record::{
    coarse_range, range_from_prometheus, range_of_replica, raw_points, record_from_prometheus,
    CoarseSeries, RangeSet, ReplicaKey,
};
