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

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use llm_doctor_engine::condition::WindowStats;
use llm_doctor_engine::snapshot::SnapshotError;
use llm_doctor_engine::suggest::did_you_mean;
use llm_doctor_engine::{Catalog, FactValue, SignalValue, Snapshot, Target, Window};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::pipeline::Prepared;
use crate::time::format_duration;
use crate::time::{parse_duration, parse_time};

/// Marker value of a snapshot file.
pub const SNAPSHOT_V1: &str = "snapshot/v1";
/// Marker value of a timeline file.
pub const TIMELINE_V1: &str = "timeline/v1";
/// Provenance of values whose `source` the file leaves out.
pub const DEFAULT_SOURCE: &str = "snapshot file";

/// Cheap content check: the first key is `llm_doctor` (after blank lines, comments, a YAML
/// `---` or a byte-order mark).
pub fn looks_like(text: &str) -> bool {
    let t = text.trim_start_matches('\u{feff}').trim_start();
    if let Some(rest) = t.strip_prefix('{') {
        return rest.trim_start().starts_with("\"llm_doctor\"");
    }
    for line in t.lines().take(64) {
        let l = line.trim_end();
        if l.is_empty() || l.starts_with('#') || l == "---" {
            continue;
        }
        // `llm_doctor:x 1` would be an exposition sample; the YAML key needs a space or an end.
        return l
            .strip_prefix("llm_doctor:")
            .or_else(|| l.strip_prefix("\"llm_doctor\":"))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']));
    }
    false
}

/// Parses a snapshot or timeline file into snapshots for `catalog`, picking timeline points
/// at `at_ms` (None = the newest). Every problem is reported, one per line, each starting with
/// `file`.
pub fn parse(
    text: &str,
    file: &str,
    catalog: &Catalog,
    at_ms: Option<i64>,
) -> Result<Vec<Prepared>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let json = text.trim_start().starts_with('{');
    let peek: Peek = from_text(text, json).map_err(|e| format!("{file}: {e}"))?;
    let mut ctx = Ctx {
        file,
        text,
        catalog,
        errors: Vec::new(),
    };
    let out = match peek.llm_doctor.as_deref() {
        Some(SNAPSHOT_V1) => {
            let doc: SnapshotDoc = from_text(text, json).map_err(|e| format!("{file}: {e}"))?;
            parse_snapshot(&mut ctx, doc, at_ms)
        }
        Some(TIMELINE_V1) => {
            let doc: TimelineDoc = from_text(text, json).map_err(|e| format!("{file}: {e}"))?;
            parse_timeline(&mut ctx, doc, at_ms)
        }
        Some(other) => {
            return Err(format!(
                "{file}: unsupported format `llm_doctor: {other}`: this llm-doctor reads `{SNAPSHOT_V1}` and `{TIMELINE_V1}`"
            ))
        }
        None => {
            return Err(format!(
                "{file}: not an llm-doctor snapshot: the first key must be `llm_doctor: {SNAPSHOT_V1}` or `llm_doctor: {TIMELINE_V1}`"
            ))
        }
    };
    if ctx.errors.is_empty() {
        Ok(out)
    } else {
        Err(ctx.errors.join("\n"))
    }
}

/// Writes snapshots as a snapshot file (JSON when `json`, else YAML) that [`parse`] reads back
/// to the same snapshots and notes.
pub fn write(prepared: &[Prepared], catalog: &Catalog, json: bool) -> String {
    let doc = SnapshotDoc {
        llm_doctor: SNAPSHOT_V1.to_string(),
        targets: prepared
            .iter()
            .map(|p| {
                let s = &p.snapshot;
                SnapshotTargetDoc {
                    target: target_doc(&s.target),
                    window: window_doc(&s.window),
                    signals: signals_doc(s, catalog),
                    facts: facts_doc(s, catalog),
                    hints: hints_doc(s, catalog),
                    notes: p.notes.clone(),
                }
            })
            .collect(),
    };
    to_text(&doc, json)
}

/// Writes snapshots of several instants as a timeline file: snapshots of the same target
/// (equal [`Target`]s) become the points of one timeline target, in time order, with the facts,
/// hints and notes of its newest snapshot. Every snapshot needs a window end (its point's `at`),
/// and a target's snapshots must share one window length.
pub fn write_timeline(
    snapshots: &[Prepared],
    catalog: &Catalog,
    json: bool,
) -> Result<String, String> {
    let mut groups: Vec<(&Target, Vec<&Prepared>)> = Vec::new();
    for p in snapshots {
        match groups.iter_mut().find(|(t, _)| **t == p.snapshot.target) {
            Some((_, list)) => list.push(p),
            None => groups.push((&p.snapshot.target, vec![p])),
        }
    }
    let mut targets = Vec::new();
    for (target, mut list) in groups {
        let name = describe_target(target);
        let mut points = Vec::new();
        for p in &list {
            if p.snapshot.window.end_ms.is_none() {
                return Err(format!(
                    "{name}: a snapshot without a window end (lifetime values) cannot be a timeline point"
                ));
            }
        }
        list.sort_by_key(|p| p.snapshot.window.end_ms);
        let length = list[0].snapshot.window.length_ms;
        for pair in list.windows(2) {
            let (a, b) = (&pair[0].snapshot.window, &pair[1].snapshot.window);
            if a.end_ms == b.end_ms {
                return Err(format!(
                    "{name}: two snapshots end at {}",
                    format_time_ms(a.end_ms.unwrap_or_default())
                ));
            }
            if b.length_ms != length {
                return Err(format!(
                    "{name}: the snapshots' windows differ in length ({} and {}); a timeline has one",
                    a.length_ms.map_or("none".to_string(), format_duration),
                    b.length_ms.map_or("none".to_string(), format_duration)
                ));
            }
        }
        for p in &list {
            points.push(PointDoc {
                at: format_time_ms(p.snapshot.window.end_ms.unwrap_or_default()),
                signals: signals_doc(&p.snapshot, catalog),
            });
        }
        let newest = list[list.len() - 1];
        targets.push(TimelineTargetDoc {
            target: target_doc(target),
            window: length.map(|l| TimelineWindowDoc {
                length: format_duration(l),
            }),
            facts: facts_doc(&newest.snapshot, catalog),
            hints: hints_doc(&newest.snapshot, catalog),
            notes: newest.notes.clone(),
            points,
        });
    }
    Ok(to_text(
        &TimelineDoc {
            llm_doctor: TIMELINE_V1.to_string(),
            targets,
        },
        json,
    ))
}

/// The JSON Schema (draft 2020-12) of snapshot and timeline files. Signal, fact and hint names
/// are those of the catalog in use, so the schema leaves them open; `parse` checks them.
pub fn json_schema() -> serde_json::Value {
    let number = json!({"type": "number"});
    let scalar = json!({"type": ["number", "string", "boolean"]});
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "llm-doctor snapshot or timeline file",
        "description": "Canonical signals and facts of one or more targets, at one instant (snapshot/v1) or at several (timeline/v1). YAML files follow the same schema.",
        "oneOf": [{"$ref": "#/$defs/snapshot"}, {"$ref": "#/$defs/timeline"}],
        "$defs": {
            "snapshot": {
                "type": "object",
                "required": ["llm_doctor", "targets"],
                "properties": {
                    "llm_doctor": {"const": SNAPSHOT_V1, "description": "Format marker; the first key."},
                    "targets": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/snapshot_target"}}
                },
                "additionalProperties": false
            },
            "timeline": {
                "type": "object",
                "required": ["llm_doctor", "targets"],
                "properties": {
                    "llm_doctor": {"const": TIMELINE_V1, "description": "Format marker; the first key."},
                    "targets": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/timeline_target"}}
                },
                "additionalProperties": false
            },
            "snapshot_target": {
                "type": "object",
                "required": ["target"],
                "properties": {
                    "target": {"$ref": "#/$defs/target"},
                    "window": {"$ref": "#/$defs/window"},
                    "signals": {"$ref": "#/$defs/signals"},
                    "facts": {"$ref": "#/$defs/facts"},
                    "hints": {"$ref": "#/$defs/hints"},
                    "notes": {"$ref": "#/$defs/notes"}
                },
                "additionalProperties": false
            },
            "timeline_target": {
                "type": "object",
                "required": ["target", "points"],
                "properties": {
                    "target": {"$ref": "#/$defs/target"},
                    "window": {
                        "type": "object",
                        "description": "The length of every point's window; a point's window ends at its `at`.",
                        "required": ["length"],
                        "properties": {"length": {"$ref": "#/$defs/duration"}},
                        "additionalProperties": false
                    },
                    "facts": {"$ref": "#/$defs/facts"},
                    "hints": {"$ref": "#/$defs/hints"},
                    "notes": {"$ref": "#/$defs/notes"},
                    "points": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/point"}}
                },
                "additionalProperties": false
            },
            "point": {
                "type": "object",
                "required": ["at"],
                "properties": {
                    "at": {"$ref": "#/$defs/time"},
                    "signals": {"$ref": "#/$defs/signals"}
                },
                "additionalProperties": false
            },
            "target": {
                "type": "object",
                "description": "What is diagnosed: a replica, with its GPUs and host.",
                "properties": {
                    "engine": {"type": "string", "description": "vllm, sglang, tgi, trtllm, llamacpp"},
                    "labels": {
                        "type": "object",
                        "description": "Identifying labels; numbers and booleans are read as their text.",
                        "additionalProperties": scalar.clone()
                    }
                },
                "additionalProperties": false
            },
            "window": {
                "type": "object",
                "description": "The time frame of the values: `end` and `length`, or `lifetime: true` for averages since the server started.",
                "properties": {
                    "end": {"$ref": "#/$defs/time"},
                    "length": {"$ref": "#/$defs/duration"},
                    "lifetime": {"type": "boolean"}
                },
                "additionalProperties": false
            },
            "time": {"type": "string", "description": "RFC 3339 (2026-12-01T00:10:00Z) or Unix seconds"},
            "duration": {"type": "string", "description": "Prometheus duration: 30s, 5m, 1h30m, 250ms"},
            "signals": {
                "type": "object",
                "description": "Catalog signal name to value (`llm-doctor signals` lists the names).",
                "additionalProperties": {"$ref": "#/$defs/signal"}
            },
            "signal": {
                "oneOf": [
                    number.clone(),
                    {
                        "type": "object",
                        "description": "A value with provenance and, for gauges, window statistics (all of min, mean and max, or none).",
                        "required": ["value"],
                        "properties": {
                            "value": number.clone(),
                            "min": number.clone(),
                            "mean": number.clone(),
                            "max": number.clone(),
                            "last": number.clone(),
                            "source": {"type": "string", "description": "Provenance; default `snapshot file`."}
                        },
                        "additionalProperties": false
                    }
                ]
            },
            "facts": {
                "type": "object",
                "description": "Catalog fact name to value, of the type the catalog declares.",
                "additionalProperties": {"$ref": "#/$defs/fact"}
            },
            "fact": {
                "oneOf": [
                    scalar.clone(),
                    {
                        "type": "object",
                        "required": ["value"],
                        "properties": {
                            "value": scalar,
                            "source": {"type": "string", "description": "Provenance; default `snapshot file`."}
                        },
                        "additionalProperties": false
                    }
                ]
            },
            "hints": {
                "type": "object",
                "description": "Signal name to how a missing signal could be obtained.",
                "additionalProperties": {"type": "string"}
            },
            "notes": {"type": "array", "items": {"type": "string"}}
        }
    })
}

// ----- reading -----

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
    catalog: &'a Catalog,
    errors: Vec<String>,
}

impl Ctx<'_> {
    fn error(&mut self, place: &str, message: impl fmt::Display) {
        self.errors
            .push(format!("{}: {place}: {message}", self.file));
    }

    /// An unknown-name error with its line, when the name can be found, and a suggestion.
    fn unknown(&mut self, place: &str, kind: &str, name: &str) {
        let candidates: Vec<&str> = match kind {
            "fact" => self
                .catalog
                .facts()
                .iter()
                .map(|f| f.name.as_str())
                .collect(),
            _ => self
                .catalog
                .signals()
                .iter()
                .map(|s| s.name.as_str())
                .collect(),
        };
        let at = locate(self.text, name)
            .map(|(l, c)| format!(" at line {l} column {c}"))
            .unwrap_or_default();
        let hint = did_you_mean(name, candidates.into_iter())
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_else(|| " (`llm-doctor signals` lists the catalog)".to_string());
        self.error(place, format_args!("unknown {kind} `{name}`{at}{hint}"));
    }
}

fn parse_snapshot(ctx: &mut Ctx<'_>, doc: SnapshotDoc, at_ms: Option<i64>) -> Vec<Prepared> {
    if doc.targets.is_empty() {
        ctx.errors.push(format!(
            "{}: `targets` is empty: nothing to diagnose",
            ctx.file
        ));
    }
    let mut out = Vec::new();
    for (i, t) in doc.targets.into_iter().enumerate() {
        let place = place(i, &t.target);
        let window = match parse_window(t.window.as_ref()) {
            Ok(w) => w,
            Err(e) => {
                ctx.error(&place, e);
                Window::default()
            }
        };
        let mut snapshot = Snapshot::new(ctx.catalog, target_of(&t.target));
        snapshot.window = window;
        fill_signals(ctx, &mut snapshot, &place, &t.signals);
        fill_facts(ctx, &mut snapshot, &place, &t.target, &t.facts);
        fill_hints(ctx, &mut snapshot, &place, &t.hints);
        let mut notes = t.notes;
        if let (Some(at), Some(end)) = (at_ms, snapshot.window.end_ms) {
            if at != end {
                notes.push(format!(
                    "{} is a snapshot of one instant (window ending {}): --at {} does not move it",
                    ctx.file,
                    format_time_ms(end),
                    format_time_ms(at)
                ));
            }
        }
        out.push(Prepared { snapshot, notes });
    }
    out
}

fn parse_timeline(ctx: &mut Ctx<'_>, doc: TimelineDoc, at_ms: Option<i64>) -> Vec<Prepared> {
    if doc.targets.is_empty() {
        ctx.errors.push(format!(
            "{}: `targets` is empty: nothing to diagnose",
            ctx.file
        ));
    }
    let mut out = Vec::new();
    for (i, t) in doc.targets.into_iter().enumerate() {
        let place = place(i, &t.target);
        let length_ms = match t.window.as_ref().map(|w| parse_length(&w.length)) {
            Some(Err(e)) => {
                ctx.error(&place, format_args!("window.length: {e}"));
                None
            }
            Some(Ok(l)) => Some(l),
            None => None,
        };
        let mut points: Vec<(i64, &PointDoc)> = Vec::new();
        for (k, p) in t.points.iter().enumerate() {
            match parse_time(&p.at) {
                Ok(ms) => points.push((ms, p)),
                Err(e) => ctx.error(&place, format_args!("points[{k}].at: {e}")),
            }
        }
        if t.points.is_empty() {
            ctx.error(&place, "a timeline target needs at least one point");
            continue;
        }
        points.sort_by_key(|(ms, _)| *ms);
        if let Some(pair) = points.windows(2).find(|w| w[0].0 == w[1].0) {
            ctx.error(
                &place,
                format_args!("two points at {}", format_time_ms(pair[0].0)),
            );
            continue;
        }
        if points.len() != t.points.len() {
            continue; // a bad `at` was reported; picking another point would mislead
        }
        let chosen = match at_ms {
            None => points.len() - 1,
            Some(at) => match points.iter().rposition(|(ms, _)| *ms <= at) {
                Some(k) => k,
                None => {
                    ctx.error(
                        &place,
                        format_args!(
                            "no point at or before --at {}: the first point is at {}",
                            format_time_ms(at),
                            format_time_ms(points[0].0)
                        ),
                    );
                    continue;
                }
            },
        };
        let (end, point) = points[chosen];
        let mut snapshot = Snapshot::new(ctx.catalog, target_of(&t.target));
        snapshot.window = Window {
            end_ms: Some(end),
            length_ms,
            lifetime: false,
        };
        fill_signals(ctx, &mut snapshot, &place, &point.signals);
        fill_facts(ctx, &mut snapshot, &place, &t.target, &t.facts);
        fill_hints(ctx, &mut snapshot, &place, &t.hints);
        // Check the other points' names too, so every typo is reported in one round.
        for (k, (_, p)) in points.iter().enumerate() {
            if k != chosen {
                let mut scratch = Snapshot::new(ctx.catalog, Target::default());
                fill_signals(ctx, &mut scratch, &place, &p.signals);
            }
        }
        let mut notes = t.notes;
        notes.push(format!(
            "timeline {}: the point at {} ({} of {}, {})",
            ctx.file,
            format_time_ms(end),
            chosen + 1,
            points.len(),
            match at_ms {
                Some(at) => format!("the newest at or before --at {}", format_time_ms(at)),
                None => "the newest".to_string(),
            }
        ));
        out.push(Prepared { snapshot, notes });
    }
    out
}

/// `target 1 (vllm, instance=gpu-node-1:8000)`: how errors name a target.
fn place(i: usize, t: &TargetDoc) -> String {
    let mut parts: Vec<String> = t.engine.iter().cloned().collect();
    parts.extend(t.labels.iter().map(|(k, v)| format!("{k}={}", v.0)));
    if parts.is_empty() {
        format!("target {}", i + 1)
    } else {
        format!("target {} ({})", i + 1, parts.join(", "))
    }
}

fn describe_target(t: &Target) -> String {
    let mut parts: Vec<String> = t.engine.iter().cloned().collect();
    parts.extend(t.labels.iter().map(|(k, v)| format!("{k}={v}")));
    format!("target ({})", parts.join(", "))
}

fn target_of(t: &TargetDoc) -> Target {
    Target {
        engine: t.engine.clone(),
        labels: t
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect(),
    }
}

fn parse_window(doc: Option<&WindowDoc>) -> Result<Window, String> {
    let Some(doc) = doc else {
        return Ok(Window::default());
    };
    if doc.lifetime && (doc.end.is_some() || doc.length.is_some()) {
        return Err(
            "window: `lifetime: true` means averages since the server started, so it takes no `end` or `length`"
                .to_string(),
        );
    }
    let end_ms = match &doc.end {
        Some(s) => Some(parse_time(s).map_err(|e| format!("window.end: {e}"))?),
        None => None,
    };
    let length_ms = match &doc.length {
        Some(s) => Some(parse_length(s).map_err(|e| format!("window.length: {e}"))?),
        None => None,
    };
    Ok(Window {
        end_ms,
        length_ms,
        lifetime: doc.lifetime,
    })
}

fn parse_length(s: &str) -> Result<i64, String> {
    match parse_duration(s)? {
        0 => Err(format!("window length `{s}` must be longer than zero")),
        ms => Ok(ms),
    }
}

fn fill_signals(ctx: &mut Ctx<'_>, snap: &mut Snapshot, place: &str, signals: &Named<SignalDoc>) {
    for (name, doc) in &signals.0 {
        let value = match doc {
            SignalDoc::Plain(v) => SignalValue {
                value: v.0,
                stats: None,
                source: DEFAULT_SOURCE.to_string(),
            },
            SignalDoc::Full(o) => {
                let stats = match (o.min, o.mean, o.max) {
                    (Some(min), Some(mean), Some(max)) => Some(WindowStats {
                        min: min.0,
                        mean: mean.0,
                        max: max.0,
                        last: o.last.unwrap_or(o.value).0,
                    }),
                    (None, None, None) => {
                        if o.last.is_some() {
                            ctx.error(
                                place,
                                format_args!(
                                    "signal `{name}`: `last` is a window statistic and needs `min`, `mean` and `max`"
                                ),
                            );
                        }
                        None
                    }
                    _ => {
                        ctx.error(
                            place,
                            format_args!(
                                "signal `{name}`: give all of `min`, `mean` and `max` (window statistics), or none"
                            ),
                        );
                        None
                    }
                };
                let finite =
                    |s: &WindowStats| [s.min, s.mean, s.max, s.last].iter().all(|v| v.is_finite());
                SignalValue {
                    value: o.value.0,
                    stats: stats.filter(finite),
                    source: o
                        .source
                        .clone()
                        .unwrap_or_else(|| DEFAULT_SOURCE.to_string()),
                }
            }
        };
        if let Err(SnapshotError::UnknownSignal(_)) = snap.set_signal(ctx.catalog, name, value) {
            ctx.unknown(place, "signal", name);
        }
    }
}

fn fill_facts(
    ctx: &mut Ctx<'_>,
    snap: &mut Snapshot,
    place: &str,
    target: &TargetDoc,
    facts: &Named<FactDoc>,
) {
    let mut engine_fact = None;
    for (name, doc) in &facts.0 {
        let (value, source) = match doc {
            FactDoc::Plain(v) => (v.0.clone(), DEFAULT_SOURCE.to_string()),
            FactDoc::Full(o) => (
                o.value.0.clone(),
                o.source
                    .clone()
                    .unwrap_or_else(|| DEFAULT_SOURCE.to_string()),
            ),
        };
        if let FactValue::Number(n) = value {
            if !n.is_finite() {
                ctx.error(
                    place,
                    format_args!("fact `{name}` must be a finite number, got `{n}`"),
                );
                continue;
            }
        }
        if name == "engine" {
            engine_fact = Some(value.clone());
        }
        let quote_hint = matches!(value, FactValue::Number(_) | FactValue::Bool(_));
        match snap.set_fact(ctx.catalog, name, value, source) {
            Ok(()) => {}
            Err(SnapshotError::UnknownFact(_)) => ctx.unknown(place, "fact", name),
            Err(e @ SnapshotError::FactType { expected, .. }) => {
                let hint = if expected == "string" && quote_hint {
                    " (quote it to make it a string)"
                } else {
                    ""
                };
                ctx.error(place, format_args!("{e}{hint}"));
            }
            Err(e) => ctx.error(place, e),
        }
    }
    match (&target.engine, engine_fact) {
        (Some(t), Some(FactValue::Str(f))) if *t != f => ctx.error(
            place,
            format_args!("target.engine `{t}` and fact `engine` `{f}` disagree"),
        ),
        (Some(t), None) if ctx.catalog.fact("engine").is_some() => {
            // The playbooks' engine filters read the fact; a hand-written file may give only
            // the target's engine.
            let _ = snap.set_fact(
                ctx.catalog,
                "engine",
                FactValue::Str(t.clone()),
                DEFAULT_SOURCE,
            );
        }
        _ => {}
    }
}

fn fill_hints(ctx: &mut Ctx<'_>, snap: &mut Snapshot, place: &str, hints: &Named<String>) {
    for (name, hint) in &hints.0 {
        if snap.set_hint(ctx.catalog, name, hint.clone()).is_err() {
            ctx.unknown(place, "signal", name);
        }
    }
}

/// Line and column (1-based) of the first place `name` appears as a mapping key: preceded by
/// a non-name character and followed by an optional quote and a colon.
fn locate(text: &str, name: &str) -> Option<(usize, usize)> {
    let is_name = |c: char| c.is_alphanumeric() || c == '_' || c == ':' || c == '.';
    for (ln, line) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(off) = line[from..].find(name) {
            let start = from + off;
            let end = start + name.len();
            let before_ok = line[..start]
                .chars()
                .next_back()
                .is_none_or(|c| !is_name(c));
            let rest = line[end..].trim_start_matches(['"', '\'']).trim_start();
            if before_ok && rest.starts_with(':') {
                return Some((ln + 1, line[..start].chars().count() + 1));
            }
            from = end;
        }
    }
    None
}

fn from_text<T: de::DeserializeOwned>(text: &str, json: bool) -> Result<T, String> {
    if json {
        serde_json::from_str(text).map_err(|e| e.to_string())
    } else {
        serde_yaml::from_str(text).map_err(|e| e.to_string())
    }
}

// ----- writing -----

fn to_text<T: Serialize>(doc: &T, json: bool) -> String {
    // Maps with string keys, strings and finite numbers: serialization cannot fail.
    if json {
        let mut s = serde_json::to_string_pretty(doc).expect("a snapshot document serializes");
        s.push('\n');
        s
    } else {
        serde_yaml::to_string(doc).expect("a snapshot document serializes")
    }
}

fn target_doc(t: &Target) -> TargetDoc {
    TargetDoc {
        engine: t.engine.clone(),
        labels: t
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), LabelValue(v.clone())))
            .collect(),
    }
}

fn window_doc(w: &Window) -> Option<WindowDoc> {
    let doc = WindowDoc {
        end: w.end_ms.map(format_time_ms),
        length: w.length_ms.map(format_duration),
        lifetime: w.lifetime,
    };
    (doc.end.is_some() || doc.length.is_some() || doc.lifetime).then_some(doc)
}

fn signals_doc(s: &Snapshot, catalog: &Catalog) -> Named<SignalDoc> {
    let mut out = Vec::new();
    for (i, def) in catalog.signals().iter().enumerate() {
        let Some(sv) = s.signal_at(i) else { continue };
        // Statistics that JSON cannot carry (NaN, Inf) are left out: they read back as unknown.
        let stats = sv.stats.filter(|st| {
            [st.min, st.mean, st.max, st.last]
                .iter()
                .all(|v| v.is_finite())
        });
        let doc = if stats.is_none() && sv.source == DEFAULT_SOURCE {
            SignalDoc::Plain(Num(sv.value))
        } else {
            SignalDoc::Full(SignalObj {
                value: Num(sv.value),
                min: stats.map(|st| Num(st.min)),
                mean: stats.map(|st| Num(st.mean)),
                max: stats.map(|st| Num(st.max)),
                last: stats
                    .filter(|st| st.last.to_bits() != sv.value.to_bits())
                    .map(|st| Num(st.last)),
                source: (sv.source != DEFAULT_SOURCE).then(|| sv.source.clone()),
            })
        };
        out.push((def.name.clone(), doc));
    }
    Named(out)
}

fn facts_doc(s: &Snapshot, catalog: &Catalog) -> Named<FactDoc> {
    let mut out = Vec::new();
    for (i, def) in catalog.facts().iter().enumerate() {
        let Some(f) = s.fact_at(i) else { continue };
        let value = FactScalar(f.value.clone());
        let doc = if f.source == DEFAULT_SOURCE {
            FactDoc::Plain(value)
        } else {
            FactDoc::Full(FactObj {
                value,
                source: Some(f.source.clone()),
            })
        };
        out.push((def.name.clone(), doc));
    }
    Named(out)
}

fn hints_doc(s: &Snapshot, catalog: &Catalog) -> Named<String> {
    let mut out = Vec::new();
    for (i, def) in catalog.signals().iter().enumerate() {
        if let Some(h) = s.hint_at(i) {
            out.push((def.name.clone(), h.to_string()));
        }
    }
    Named(out)
}

/// RFC 3339 UTC with milliseconds when there are any, so times read back exactly.
pub fn format_time_ms(ms: i64) -> String {
    let base = crate::time::format_time(ms);
    let frac = ms.rem_euclid(1000);
    if frac == 0 {
        base
    } else {
        format!("{}.{frac:03}Z", base.trim_end_matches('Z'))
    }
}

// ----- the document as written -----

#[derive(Deserialize)]
struct Peek {
    #[serde(default)]
    llm_doctor: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotDoc {
    llm_doctor: String,
    targets: Vec<SnapshotTargetDoc>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotTargetDoc {
    target: TargetDoc,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window: Option<WindowDoc>,
    #[serde(default, skip_serializing_if = "Named::is_empty")]
    signals: Named<SignalDoc>,
    #[serde(default, skip_serializing_if = "Named::is_empty")]
    facts: Named<FactDoc>,
    #[serde(default, skip_serializing_if = "Named::is_empty")]
    hints: Named<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimelineDoc {
    llm_doctor: String,
    targets: Vec<TimelineTargetDoc>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimelineTargetDoc {
    target: TargetDoc,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window: Option<TimelineWindowDoc>,
    #[serde(default, skip_serializing_if = "Named::is_empty")]
    facts: Named<FactDoc>,
    #[serde(default, skip_serializing_if = "Named::is_empty")]
    hints: Named<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
    points: Vec<PointDoc>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimelineWindowDoc {
    length: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PointDoc {
    at: String,
    #[serde(default, skip_serializing_if = "Named::is_empty")]
    signals: Named<SignalDoc>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    engine: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, LabelValue>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WindowDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    length: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    lifetime: bool,
}

/// A number, written as an integer when it is one (`256`, not `256.0`).
#[derive(Clone, Copy, Deserialize)]
#[serde(transparent)]
struct Num(f64);

impl Serialize for Num {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        // Below 2^53 every integer is exact in f64, so the integer form reads back the same.
        if v.fract() == 0.0
            && v.abs() < 9_007_199_254_740_992.0
            && !(v == 0.0 && v.is_sign_negative())
        {
            s.serialize_i64(v as i64)
        } else {
            s.serialize_f64(v)
        }
    }
}

enum SignalDoc {
    Plain(Num),
    Full(SignalObj),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignalObj {
    value: Num,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min: Option<Num>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mean: Option<Num>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max: Option<Num>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last: Option<Num>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

impl Serialize for SignalDoc {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SignalDoc::Plain(n) => n.serialize(s),
            SignalDoc::Full(o) => o.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for SignalDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SignalDoc;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number, or a map with `value` and optionally `min`, `mean`, `max`, `last`, `source`")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<SignalDoc, E> {
                Ok(SignalDoc::Plain(Num(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SignalDoc, E> {
                Ok(SignalDoc::Plain(Num(v as f64)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SignalDoc, E> {
                Ok(SignalDoc::Plain(Num(v as f64)))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SignalDoc, A::Error> {
                SignalObj::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(SignalDoc::Full)
            }
        }
        d.deserialize_any(V)
    }
}

/// A fact's value as written: number, string or bool.
struct FactScalar(FactValue);

impl Serialize for FactScalar {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            FactValue::Number(n) => Num(*n).serialize(s),
            FactValue::Str(t) => s.serialize_str(t),
            FactValue::Bool(b) => s.serialize_bool(*b),
        }
    }
}

struct FactScalarVisitor;

impl FactScalarVisitor {
    const EXPECTING: &'static str = "a number, a string or a boolean";
}

impl Visitor<'_> for FactScalarVisitor {
    type Value = FactScalar;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::EXPECTING)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<FactScalar, E> {
        Ok(FactScalar(FactValue::Bool(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<FactScalar, E> {
        Ok(FactScalar(FactValue::Number(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<FactScalar, E> {
        Ok(FactScalar(FactValue::Number(v as f64)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<FactScalar, E> {
        Ok(FactScalar(FactValue::Number(v as f64)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<FactScalar, E> {
        Ok(FactScalar(FactValue::Str(v.to_string())))
    }
}

impl<'de> Deserialize<'de> for FactScalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FactScalarVisitor)
    }
}

enum FactDoc {
    Plain(FactScalar),
    Full(FactObj),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FactObj {
    value: FactScalar,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

impl Serialize for FactDoc {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FactDoc::Plain(v) => v.serialize(s),
            FactDoc::Full(o) => o.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for FactDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FactDoc;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number, a string, a boolean, or a map with `value` and `source`")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<FactDoc, E> {
                FactScalarVisitor.visit_bool(v).map(FactDoc::Plain)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<FactDoc, E> {
                FactScalarVisitor.visit_f64(v).map(FactDoc::Plain)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<FactDoc, E> {
                FactScalarVisitor.visit_i64(v).map(FactDoc::Plain)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<FactDoc, E> {
                FactScalarVisitor.visit_u64(v).map(FactDoc::Plain)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FactDoc, E> {
                FactScalarVisitor.visit_str(v).map(FactDoc::Plain)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<FactDoc, A::Error> {
                FactObj::deserialize(de::value::MapAccessDeserializer::new(map)).map(FactDoc::Full)
            }
        }
        d.deserialize_any(V)
    }
}

/// A label value; numbers and booleans written without quotes are taken as their text
/// (`gpu: 0`).
struct LabelValue(String);

impl Serialize for LabelValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for LabelValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LabelValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a label value (a string)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LabelValue, E> {
                Ok(LabelValue(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<LabelValue, E> {
                Ok(LabelValue(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LabelValue, E> {
                Ok(LabelValue(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LabelValue, E> {
                Ok(LabelValue(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LabelValue, E> {
                Ok(LabelValue(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A map kept in written order, with duplicate names rejected (JSON parsers would silently
/// keep the last one).
struct Named<T>(Vec<(String, T)>);

impl<T> Default for Named<T> {
    fn default() -> Self {
        Named(Vec::new())
    }
}

impl<T> Named<T> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<T: Serialize> Serialize for Named<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Named<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Named<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from names to values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Named<T>, A::Error> {
                let mut out: Vec<(String, T)> = Vec::new();
                while let Some(k) = map.next_key::<String>()? {
                    if out.iter().any(|(n, _)| *n == k) {
                        return Err(de::Error::custom(format!("`{k}` is given twice")));
                    }
                    let v = map.next_value::<T>()?;
                    out.push((k, v));
                }
                Ok(Named(out))
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        let (name, text) = crate::rules::CATALOG;
        Catalog::from_yaml(text, name).unwrap()
    }

    const SNAPSHOT: &str = r#"
# a hand-written snapshot
llm_doctor: snapshot/v1
targets:
  - target:
      engine: vllm
      labels: {instance: "gpu-node-1:8000", gpu: 0}
    window: {end: "2026-12-01T00:10:00.250Z", length: 5m}
    signals:
      ttft_p99_seconds: 40
      kv_cache_usage_ratio: {value: 0.995, min: 0.97, mean: 0.99, max: 1, source: "vllm: kv"}
      queue_depth: {value: 3, min: 1, mean: 2, max: 4, last: 3.5}
    facts:
      max_num_seqs: 256
      enable_prefix_caching: {value: true, source: vllm:cache_config_info}
      kv_cache_dtype: fp8
    hints:
      gpu_thermal_throttle_ratio: add the clocks-event-reasons field
    notes: [joined by host]
"#;

    #[test]
    fn detection_by_marker() {
        assert!(looks_like(SNAPSHOT));
        assert!(looks_like("---\nllm_doctor: timeline/v1\n"));
        assert!(looks_like("{\n  \"llm_doctor\": \"snapshot/v1\"}"));
        assert!(!looks_like("{\"status\": \"success\", \"llm_doctor\": 1}"));
        assert!(!looks_like("llm_doctor:requests_total 1\n"));
        assert!(!looks_like("# TYPE x gauge\nx 1\n"));
        assert!(!looks_like("targets: []\nllm_doctor: snapshot/v1\n"));
    }

    #[test]
    fn reads_every_part_of_a_snapshot() {
        let c = catalog();
        let p = parse(SNAPSHOT, "s.yaml", &c, None).unwrap();
        assert_eq!(p.len(), 1);
        let s = &p[0].snapshot;
        assert_eq!(s.target.engine.as_deref(), Some("vllm"));
        assert_eq!(s.target.labels["gpu"], "0");
        assert_eq!(
            s.window.end_ms,
            Some(parse_time("2026-12-01T00:10:00Z").unwrap() + 250)
        );
        assert_eq!(s.window.length_ms, Some(300_000));
        assert!(!s.window.lifetime);
        let ttft = s.signal(&c, "ttft_p99_seconds").unwrap();
        assert_eq!(
            (ttft.value, ttft.stats, ttft.source.as_str()),
            (40.0, None, DEFAULT_SOURCE)
        );
        let kv = s.signal(&c, "kv_cache_usage_ratio").unwrap();
        assert_eq!(kv.source, "vllm: kv");
        assert_eq!(
            kv.stats,
            Some(WindowStats {
                min: 0.97,
                mean: 0.99,
                max: 1.0,
                last: 0.995
            })
        );
        assert_eq!(
            s.signal(&c, "queue_depth").unwrap().stats.unwrap().last,
            3.5
        );
        let f = s.fact(&c, "enable_prefix_caching").unwrap();
        assert_eq!(
            (&f.value, f.source.as_str()),
            (&FactValue::Bool(true), "vllm:cache_config_info")
        );
        assert_eq!(
            s.fact(&c, "max_num_seqs").unwrap().value,
            FactValue::Number(256.0)
        );
        // target.engine fills the engine fact.
        assert_eq!(
            s.fact(&c, "engine").unwrap().value,
            FactValue::Str("vllm".into())
        );
        let i = c.signal("gpu_thermal_throttle_ratio").unwrap();
        assert_eq!(s.hint_at(i), Some("add the clocks-event-reasons field"));
        assert_eq!(p[0].notes, ["joined by host"]);
        let with_bom = parse(&format!("\u{feff}{SNAPSHOT}"), "s.yaml", &c, None).unwrap();
        assert_eq!(with_bom[0].snapshot, p[0].snapshot);
    }

    #[test]
    fn round_trips_through_yaml_and_json() {
        let c = catalog();
        let p = parse(SNAPSHOT, "s.yaml", &c, None).unwrap();
        for json in [false, true] {
            let text = write(&p, &c, json);
            assert!(looks_like(&text), "{text}");
            let back = parse(&text, "w", &c, None).unwrap();
            assert_eq!(back[0].snapshot, p[0].snapshot, "{text}");
            assert_eq!(back[0].notes, p[0].notes);
            // Written twice, the text is the same: deterministic output.
            assert_eq!(write(&back, &c, json), text);
        }
        let yaml = write(&p, &c, false);
        assert!(yaml.starts_with("llm_doctor: snapshot/v1\n"), "{yaml}");
        assert!(yaml.contains("ttft_p99_seconds: 40\n"), "{yaml}");
        assert!(yaml.contains("max_num_seqs: 256\n"), "{yaml}");
        assert!(yaml.contains("end: 2026-12-01T00:10:00.250Z"), "{yaml}");
    }

    #[test]
    fn awkward_numbers_round_trip_exactly() {
        let c = catalog();
        let mut s = Snapshot::new(&c, Target::default());
        let values = [
            0.1 + 0.2,
            1e-300,
            123_456_789.123_456_79,
            -0.0,
            2f64.powi(60),
            1.0 / 3.0,
        ];
        for (def, v) in c.signals().iter().zip(values) {
            s.set_signal(
                &c,
                &def.name,
                SignalValue {
                    value: v,
                    stats: None,
                    source: DEFAULT_SOURCE.into(),
                },
            )
            .unwrap();
        }
        let p = vec![Prepared {
            snapshot: s,
            notes: vec![],
        }];
        for json in [false, true] {
            let back = parse(&write(&p, &c, json), "w", &c, None).unwrap();
            for (i, v) in values.iter().enumerate() {
                let got = back[0].snapshot.signal_at(i).unwrap().value;
                assert_eq!(
                    got.to_bits(),
                    v.to_bits(),
                    "{v} read back as {got} (json: {json})"
                );
            }
        }
    }

    #[test]
    fn lifetime_and_missing_windows() {
        let c = catalog();
        let text =
            "llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    window: {lifetime: true}\n";
        let p = parse(text, "l.yaml", &c, Some(5)).unwrap();
        assert_eq!(
            p[0].snapshot.window,
            Window {
                end_ms: None,
                length_ms: None,
                lifetime: true
            }
        );
        assert!(p[0].notes.is_empty());
        let back = parse(&write(&p, &c, false), "w", &c, None).unwrap();
        assert_eq!(back[0].snapshot, p[0].snapshot);

        let text = "llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n";
        let p = parse(text, "n.yaml", &c, None).unwrap();
        assert_eq!(p[0].snapshot.window, Window::default());
        assert!(!write(&p, &c, false).contains("window"));
    }

    #[test]
    fn a_snapshot_does_not_move_with_at() {
        let c = catalog();
        let p = parse(SNAPSHOT, "s.yaml", &c, Some(0)).unwrap();
        assert!(
            p[0].notes[1].contains("does not move it"),
            "{:?}",
            p[0].notes
        );
    }

    fn err(text: &str) -> String {
        parse(text, "bad.yaml", &catalog(), None).unwrap_err()
    }

    #[test]
    fn names_and_types_are_checked_with_suggestions() {
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {engine: vllm}\n    signals:\n      queue_dept: 1\n      kv_cache_usage: 0.5\n    facts:\n      max_num_seq: 4\n      max_num_seqs: many\n      model: 7\n    hints:\n      zzz_unknown: x\n");
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), 6, "{e}");
        assert!(
            lines
                .iter()
                .all(|l| l.starts_with("bad.yaml: target 1 (vllm): ")),
            "{e}"
        );
        assert!(
            e.contains(
                "unknown signal `queue_dept` at line 5 column 7 (did you mean `queue_depth`?)"
            ),
            "{e}"
        );
        assert!(e.contains("(did you mean `kv_cache_usage_ratio`?)"), "{e}");
        assert!(
            e.contains(
                "unknown fact `max_num_seq` at line 8 column 7 (did you mean `max_num_seqs`?)"
            ),
            "{e}"
        );
        assert!(
            e.contains("fact `max_num_seqs` must be a number, got `many`"),
            "{e}"
        );
        assert!(
            e.contains("fact `model` must be a string, got `7` (quote it"),
            "{e}"
        );
        assert!(e.contains("unknown signal `zzz_unknown`"), "{e}");
    }

    #[test]
    fn structure_errors_carry_line_and_column() {
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signal: {}\n");
        assert!(
            e.contains("unknown field `signal`") && e.contains("line 4"),
            "{e}"
        );
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signals: {queue_depth: {value: 1, avg: 2}}\n");
        assert!(
            e.contains("unknown field `avg`") && e.contains("line 4"),
            "{e}"
        );
        let e = err(
            "llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signals: {queue_depth: [1]}\n",
        );
        assert!(
            e.contains("expected a number, or a map") && e.contains("line 4"),
            "{e}"
        );
        let e = err("llm_doctor: snapshot/v1\ntargets: [\n");
        assert!(e.contains("line"), "{e}");
        let e = parse(
            "{\"llm_doctor\": \"snapshot/v1\",\n \"targets\": [}",
            "b.json",
            &catalog(),
            None,
        )
        .unwrap_err();
        assert!(
            e.starts_with("b.json: ") && e.contains("line 2 column"),
            "{e}"
        );
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signals: {queue_depth: 1, queue_depth: 2}\n");
        assert!(e.contains("given twice") || e.contains("duplicate"), "{e}");
        let e = err("llm_doctor: snapshot/v9\ntargets: []\n");
        assert!(
            e.contains("unsupported format `llm_doctor: snapshot/v9`"),
            "{e}"
        );
        let e = err("targets: []\n");
        assert!(e.contains("first key must be"), "{e}");
        let e = err("llm_doctor: snapshot/v1\ntargets: []\n");
        assert!(e.contains("`targets` is empty"), "{e}");
    }

    #[test]
    fn window_and_stats_rules() {
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    window: {lifetime: true, length: 5m}\n");
        assert!(e.contains("takes no `end` or `length`"), "{e}");
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    window: {end: yesterday, length: 5min}\n");
        assert!(e.contains("window.end: invalid time `yesterday`"), "{e}");
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    window: {length: 0}\n");
        assert!(
            e.contains("longer than zero") || e.contains("string"),
            "{e}"
        );
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signals: {queue_depth: {value: 1, min: 0}}\n");
        assert!(e.contains("give all of `min`, `mean` and `max`"), "{e}");
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signals: {queue_depth: {value: 1, last: 0}}\n");
        assert!(e.contains("`last` is a window statistic"), "{e}");
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {engine: vllm}\n    facts: {engine: sglang}\n");
        assert!(e.contains("disagree"), "{e}");
    }

    #[test]
    fn non_finite_values_are_absent() {
        let c = catalog();
        let text = "llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signals:\n      queue_depth: .nan\n      running_requests: {value: 2, min: .nan, mean: 1, max: 2}\n";
        let p = parse(text, "n.yaml", &c, None).unwrap();
        assert!(p[0].snapshot.signal(&c, "queue_depth").is_none());
        let r = p[0].snapshot.signal(&c, "running_requests").unwrap();
        assert_eq!((r.value, r.stats), (2.0, None));
    }

    const TIMELINE: &str = r#"llm_doctor: timeline/v1
targets:
  - target: {engine: vllm, labels: {pod: vllm-0}}
    window: {length: 5m}
    facts: {max_num_seqs: 8}
    notes: [recorded]
    points:
      - {at: "2026-12-01T00:10:00Z", signals: {queue_depth: 30}}
      - {at: "2026-12-01T00:00:00Z", signals: {queue_depth: 0}}
      - {at: "1796083500", signals: {queue_depth: 4}}
"#;

    #[test]
    fn timeline_points_are_picked_by_at() {
        let c = catalog();
        let t = |s: &str| parse_time(s).unwrap();
        let depth = |at: Option<i64>| {
            let p = parse(TIMELINE, "t.yaml", &c, at).unwrap();
            let s = &p[0].snapshot;
            assert_eq!(s.window.length_ms, Some(300_000));
            assert_eq!(
                s.fact(&c, "max_num_seqs").unwrap().value,
                FactValue::Number(8.0)
            );
            (
                s.window.end_ms.unwrap(),
                s.signal(&c, "queue_depth").unwrap().value,
                p[0].notes.clone(),
            )
        };
        let (end, v, notes) = depth(None);
        assert_eq!((end, v), (t("2026-12-01T00:10:00Z"), 30.0));
        assert_eq!(notes[0], "recorded");
        assert!(notes[1].contains("(3 of 3, the newest)"), "{notes:?}");
        let (end, v, notes) = depth(Some(t("2026-12-01T00:09:59Z")));
        assert_eq!((end, v), (1_796_083_500_000, 4.0));
        assert!(
            notes[1].contains("2 of 3, the newest at or before --at 2026-12-01T00:09:59Z"),
            "{notes:?}"
        );
        assert_eq!(depth(Some(t("2026-12-01T00:00:00Z"))).1, 0.0);
        assert_eq!(depth(Some(t("2027-01-01T00:00:00Z"))).1, 30.0);
        let e = parse(TIMELINE, "t.yaml", &c, Some(t("2026-11-30T00:00:00Z"))).unwrap_err();
        assert!(e.contains("no point at or before --at 2026-11-30T00:00:00Z: the first point is at 2026-12-01T00:00:00Z"), "{e}");
    }

    #[test]
    fn timeline_errors() {
        let e = err("llm_doctor: timeline/v1\ntargets:\n  - target: {}\n    window: {end: \"2026-12-01T00:00:00Z\"}\n    points: []\n");
        assert!(e.contains("unknown field `end`"), "{e}");
        let e = err("llm_doctor: timeline/v1\ntargets:\n  - target: {}\n    points: []\n");
        assert!(e.contains("at least one point"), "{e}");
        let e = err("llm_doctor: timeline/v1\ntargets:\n  - target: {}\n    points: [{at: \"1\"}, {at: \"1.0\"}]\n");
        assert!(e.contains("two points at"), "{e}");
        let e = err("llm_doctor: timeline/v1\ntargets:\n  - target: {}\n    points: [{at: \"1\", signals: {queue_depth: 1}}, {at: \"2\", signals: {queue_dpth: 1}}]\n");
        assert!(e.contains("unknown signal `queue_dpth`"), "{e}");
        let e = err("llm_doctor: timeline/v1\ntargets:\n  - target: {}\n    signals: {}\n    points: [{at: \"1\"}]\n");
        assert!(e.contains("unknown field `signals`"), "{e}");
    }

    #[test]
    fn timeline_write_and_read_back() {
        let c = catalog();
        let mut snaps = Vec::new();
        for (k, at) in [
            "2026-12-01T00:05:00Z",
            "2026-12-01T00:00:00Z",
            "2026-12-01T00:10:00.5Z",
        ]
        .iter()
        .enumerate()
        {
            let mut s = Snapshot::new(
                &c,
                Target {
                    engine: Some("vllm".into()),
                    labels: BTreeMap::from([("pod".into(), "p".into())]),
                },
            );
            s.window = Window {
                end_ms: Some(parse_time(at).unwrap()),
                length_ms: Some(60_000),
                lifetime: false,
            };
            s.set_signal(
                &c,
                "queue_depth",
                SignalValue {
                    value: k as f64,
                    stats: None,
                    source: "x".into(),
                },
            )
            .unwrap();
            s.set_fact(&c, "engine", FactValue::Str("vllm".into()), "detected")
                .unwrap();
            snaps.push(Prepared {
                snapshot: s,
                notes: vec![format!("n{k}")],
            });
        }
        for json in [false, true] {
            let text = write_timeline(&snaps, &c, json).unwrap();
            assert!(looks_like(&text), "{text}");
            let newest = parse(&text, "t", &c, None).unwrap();
            assert_eq!(newest[0].snapshot, snaps[2].snapshot, "{text}");
            assert_eq!(newest[0].notes[0], "n2");
            let first = parse(
                &text,
                "t",
                &c,
                Some(parse_time("2026-12-01T00:04:00Z").unwrap()),
            )
            .unwrap();
            assert_eq!(
                first[0].snapshot.signal(&c, "queue_depth").unwrap().value,
                1.0
            );
        }
        let mut lifetime = snaps[0].clone();
        lifetime.snapshot.window = Window {
            end_ms: None,
            length_ms: None,
            lifetime: true,
        };
        assert!(write_timeline(&[lifetime], &c, false)
            .unwrap_err()
            .contains("cannot be a timeline point"));
        let mut other = snaps[0].clone();
        other.snapshot.window.length_ms = Some(1000);
        assert!(write_timeline(&[snaps[1].clone(), other], &c, false)
            .unwrap_err()
            .contains("differ in length"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 128, failure_persistence: None, ..Default::default() })]
        #[test]
        fn never_panics_on_mangled_files(cut in 0usize..1200, junk in "[\\[\\]{}\",: \n0-9a-z_.-]{0,12}") {
            let c = catalog();
            for base in [SNAPSHOT, TIMELINE] {
                let mut cut = cut.min(base.len());
                while !base.is_char_boundary(cut) {
                    cut -= 1;
                }
                let text = format!("{}{junk}{}", &base[..cut], &base[cut..]);
                let _ = parse(&text, "p.yaml", &c, None);
                let _ = parse(&text, "p.yaml", &c, Some(1_796_083_500_000));
            }
        }
    }

    #[test]
    fn millisecond_times_format_and_parse_back() {
        for ms in [0, 1, 999, 1_796_083_500_250, -1500] {
            assert_eq!(
                parse_time(&format_time_ms(ms)).unwrap(),
                ms,
                "{}",
                format_time_ms(ms)
            );
        }
    }

    #[test]
    fn locate_finds_keys_not_substrings() {
        let text = "a:\n  queue_depth_x: 1\n  \"queue_depth\": 2\n";
        assert_eq!(locate(text, "queue_depth"), Some((3, 4)));
        assert_eq!(locate(text, "missing"), None);
    }
}
