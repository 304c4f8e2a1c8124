//! llm-doctor's own snapshot and timeline files: what the engine consumes, written down.
//!
//! A snapshot file stores, per target, the canonical signals and facts a diagnosis reads, so a
//! diagnosis can be repeated without the metrics it came from (a `record`ed incident, a bug
//! report, a hand-written what-if). A timeline file stores several points in time per target,
//! so a postmortem can diagnose any of them. Both are YAML or JSON (JSON when the text starts
//! with `{`), detected by a marker key that must come first: `llm_doctor: snapshot/v1` or
//! `llm_doctor: timeline/v1`. Parsing is strict: unknown fields, unknown signal, fact and hint
//! names (with "did you mean"), facts of the wrong type and malformed times are errors, all of
//! them reported at once; YAML and JSON syntax errors carry line and column.
//!
//! ```yaml
//! llm_doctor: snapshot/v1
//! targets:
//!   - target:
//!       engine: vllm
//!       labels: {instance: "gpu-node-1:8000", model_name: Qwen/Qwen2.5-7B-Instruct}
//!     window: {end: "2026-12-01T00:10:00Z", length: 5m}   # or {lifetime: true}
//!     signals:
//!       ttft_p99_seconds: 40                  # a number...
//!       kv_cache_usage_ratio:                 # ...or a value with window statistics
//!         {value: 0.995, min: 0.97, mean: 0.99, max: 1, source: "vllm: max(vllm:kv_cache_usage_perc)"}
//!       preemptions_per_second: 0.29
//!     facts:
//!       engine: vllm
//!       max_num_seqs: 256                     # number, string or bool, as the catalog declares
//!       enable_prefix_caching: {value: true, source: vllm:cache_config_info}
//!     hints:                                  # how to get a signal that is missing
//!       gpu_thermal_throttle_ratio: add DCGM_FI_DEV_CLOCKS_EVENT_REASONS to dcgm-exporter's counters
//!     notes: [dcgm-exporter joined by host gpu-node-1]
//! ```
//!
//! ```yaml
//! llm_doctor: timeline/v1
//! targets:
//!   - target: {engine: vllm, labels: {instance: "gpu-node-1:8000"}}
//!     window: {length: 5m}                    # each point's window ends at its `at`
//!     facts: {max_num_seqs: 256}
//!     points:
//!       - {at: "2026-12-01T00:05:00Z", signals: {queue_depth: 0, kv_cache_usage_ratio: 0.41}}
//!       - {at: "2026-12-01T00:10:00Z", signals: {queue_depth: 184, kv_cache_usage_ratio: 0.995}}
//! ```
//!
//! Decisions:
//! - `window.end` and `at` are RFC 3339 or Unix seconds (strings); `window.length` is a
//!   Prometheus duration. `lifetime: true` (values since the server started) excludes both.
//! - A signal's `source` and a fact's `source` (provenance) default to `snapshot file`. Window
//!   statistics come as all of `min`, `mean` and `max` or none; `last` defaults to `value`.
//!   Non-finite values (YAML `.nan`) make a signal absent and statistics unknown, as anywhere
//!   else: missing is not zero.
//! - `target.engine` also sets the `engine` fact when the file gives none; when both are given
//!   they must agree.
//! - A timeline's facts, hints and notes hold for every point; [`parse`] picks, per target, the
//!   newest point at or before `at_ms` (or the newest point) and notes which one it used.
//!   A snapshot file holds one instant: `at_ms` does not move it, and a note says so when the
//!   two differ.
//! - [`write`] puts signals, facts and hints in catalog order and writes the shortest form that
//!   reads back the same (a bare number when the source is the default and there are no
//!   statistics), so `parse(write(x)) == x`.
//!
//! [`json_schema`] gives the JSON Schema of both forms; `schema/snapshot.schema.json` is its
//! committed copy, kept current by a test.

mod doc;
mod error;
mod read;
mod schema;
mod write;

pub use doc::{format_time_ms, DEFAULT_SOURCE, SNAPSHOT_V1, TIMELINE_V1};
pub use error::SnapshotFileError;
pub use read::{looks_like, parse};
pub use schema::json_schema;
pub use write::{write, write_timeline};
