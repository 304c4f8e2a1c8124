//! The JSON Schema of snapshot and timeline files; `schema/snapshot.schema.json` is its
//! committed copy, kept current by a test.

use serde_json::json;

use super::doc::{SNAPSHOT_V1, TIMELINE_V1};

/// The JSON Schema (draft 2020-12) of snapshot and timeline files. Signal, fact and hint names
/// are those of the catalog in use, so the schema leaves them open; `parse` checks them.
// Long on purpose: the schema is one JSON literal, read top to bottom like the files it
// describes; split up, its parts would no longer read as a schema.
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
