//! The document as written: serde types for snapshot and timeline files (the shortest form
//! that reads back the same, strict on unknown fields), their format markers, and the text
//! (YAML or JSON) they are read from and written to.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use llm_doctor_engine::{FactValue, Target};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use super::error::SnapshotFileError;

/// Marker value of a snapshot file.
pub const SNAPSHOT_V1: &str = "snapshot/v1";
/// Marker value of a timeline file.
pub const TIMELINE_V1: &str = "timeline/v1";
/// Provenance of values whose `source` the file leaves out.
pub const DEFAULT_SOURCE: &str = "snapshot file";

/// The document in `text` of `file`, JSON when `json`, else YAML; errors carry line and column.
pub(super) fn from_text<T: de::DeserializeOwned>(
    text: &str,
    json: bool,
    file: &str,
) -> Result<T, SnapshotFileError> {
    let parsed = if json {
        serde_json::from_str(text).map_err(|e| e.to_string())
    } else {
        llm_doctor_engine::yaml_guard::check_depth(text)
            .map_err(|e| e.to_string())
            .and_then(|()| serde_yaml::from_str(text).map_err(|e| e.to_string()))
    };
    parsed.map_err(|detail| SnapshotFileError::Syntax {
        file: file.to_string(),
        detail,
    })
}

/// The document as text, JSON when `json`, else YAML.
pub(super) fn to_text<T: Serialize>(doc: &T, json: bool) -> String {
    // Maps with string keys, strings and finite numbers: serialization cannot fail.
    if json {
        let mut s = serde_json::to_string_pretty(doc).expect("a snapshot document serializes");
        s.push('\n');
        s
    } else {
        serde_yaml::to_string(doc).expect("a snapshot document serializes")
    }
}

/// A target as errors and notes name it: `target (vllm, instance=…)`.
pub(super) fn describe_target(t: &Target) -> String {
    let mut parts: Vec<String> = t.engine.iter().cloned().collect();
    parts.extend(t.labels.iter().map(|(k, v)| format!("{k}={v}")));
    format!("target ({})", parts.join(", "))
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

#[derive(Deserialize)]
pub(super) struct Peek {
    #[serde(default)]
    pub(super) llm_doctor: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SnapshotDoc {
    pub(super) llm_doctor: String,
    pub(super) targets: Vec<SnapshotTargetDoc>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SnapshotTargetDoc {
    pub(super) target: TargetDoc,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) window: Option<WindowDoc>,
    #[serde(default, skip_serializing_if = "Named::is_empty")]
    pub(super) signals: Named<SignalDoc>,
    #[serde(default, skip_serializing_if = "Named::is_empty")]
    pub(super) facts: Named<FactDoc>,
    #[serde(default, skip_serializing_if = "Named::is_empty")]
    pub(super) hints: Named<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) notes: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TimelineDoc {
    pub(super) llm_doctor: String,
    pub(super) targets: Vec<TimelineTargetDoc>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TimelineTargetDoc {
    pub(super) target: TargetDoc,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) window: Option<TimelineWindowDoc>,
    #[serde(default, skip_serializing_if = "Named::is_empty")]
    pub(super) facts: Named<FactDoc>,
    #[serde(default, skip_serializing_if = "Named::is_empty")]
    pub(super) hints: Named<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) notes: Vec<String>,
    pub(super) points: Vec<PointDoc>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TimelineWindowDoc {
    pub(super) length: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PointDoc {
    pub(super) at: String,
    #[serde(default, skip_serializing_if = "Named::is_empty")]
    pub(super) signals: Named<SignalDoc>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TargetDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) engine: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) labels: BTreeMap<String, LabelValue>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WindowDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) end: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) length: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) lifetime: bool,
}

/// A number, written as an integer when it is one (`256`, not `256.0`).
#[derive(Clone, Copy, Deserialize)]
#[serde(transparent)]
pub(super) struct Num(pub(super) f64);

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

pub(super) enum SignalDoc {
    Plain(Num),
    Full(SignalObj),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SignalObj {
    pub(super) value: Num,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) min: Option<Num>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) mean: Option<Num>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) max: Option<Num>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) last: Option<Num>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) source: Option<String>,
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
pub(super) struct FactScalar(pub(super) FactValue);

impl Serialize for FactScalar {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            FactValue::Number(n) => Num(*n).serialize(s),
            FactValue::Str(t) => s.serialize_str(t),
            FactValue::Bool(b) => s.serialize_bool(*b),
        }
    }
}

pub(super) struct FactScalarVisitor;

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

pub(super) enum FactDoc {
    Plain(FactScalar),
    Full(FactObj),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FactObj {
    pub(super) value: FactScalar,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) source: Option<String>,
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
pub(super) struct LabelValue(pub(super) String);

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
pub(super) struct Named<T>(pub(super) Vec<(String, T)>);

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
    use crate::time::parse_time;

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
}
