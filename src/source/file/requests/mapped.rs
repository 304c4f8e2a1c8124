//! JSON request logs whose fields are named by a map: Envoy's JSON access log in the format the
//! README gives, or any gateway's log with `--request-fields` naming which field holds what
//! (`id=req_id,end=ts,status=code,total=latency:ms,upstream=backend`).
//!
//! Roles: `id`, `trace_id`, `start` and `end` (an instant: Unix seconds or RFC 3339; `:ms` for
//! Unix milliseconds), `status`, `total` (the whole time at the gateway), `upstream` (the
//! replica's address), `upstream_time`, `ttft`, `model`, `prompt_tokens`, `output_tokens`,
//! `finish_reason`. Times are seconds unless the role says `:ms` or `:us`. A log needs `total`
//! and one of `end` or `start` (the end is then start + total).

use serde_json::{Map, Value};

use super::record::{json_object, Request, RequestLogError, SeenBy, Times};

/// How a number of a field reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds (times) or Unix seconds and RFC 3339 (instants).
    Seconds,
    /// Milliseconds, or Unix milliseconds.
    Millis,
    /// Microseconds.
    Micros,
    /// Nanoseconds (Traefik's `Duration`).
    Nanos,
}

impl Unit {
    fn per_second(self) -> f64 {
        match self {
            Unit::Seconds => 1.0,
            Unit::Millis => 1e3,
            Unit::Micros => 1e6,
            Unit::Nanos => 1e9,
        }
    }
}

/// A field and how to read its number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The JSON key.
    pub key: String,
    /// Its unit.
    pub unit: Unit,
}

/// Which field holds what.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldMap {
    /// The request id.
    pub id: Option<Field>,
    /// The trace id.
    pub trace_id: Option<Field>,
    /// When the request started.
    pub start: Option<Field>,
    /// When it ended.
    pub end: Option<Field>,
    /// The HTTP status answered.
    pub status: Option<Field>,
    /// The whole time at the gateway.
    pub total: Option<Field>,
    /// The replica's address.
    pub upstream: Option<Field>,
    /// The upstream's time.
    pub upstream_time: Option<Field>,
    /// Time to the first token.
    pub ttft: Option<Field>,
    /// The model.
    pub model: Option<Field>,
    /// Prompt tokens.
    pub prompt_tokens: Option<Field>,
    /// Generated tokens.
    pub output_tokens: Option<Field>,
    /// Why generation stopped.
    pub finish_reason: Option<Field>,
}

/// A `--request-fields` that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldMapError {
    /// An item that is not `role=field[:unit]`.
    #[error("`{0}` is not role=field (or role=field:ms)")]
    Item(String),
    /// A role not among those known.
    #[error("unknown role `{role}`; the roles are: {known}")]
    Role {
        /// As given.
        role: String,
        /// The list.
        known: String,
    },
    /// A unit not among s, ms, us, ns.
    #[error("unknown unit `{0}` (s, ms, us or ns)")]
    Unit(String),
    /// A role named twice.
    #[error("role `{0}` is named twice")]
    Twice(String),
    /// What the log needs is not mapped.
    #[error("a request log needs `total` and one of `end` or `start` mapped")]
    Incomplete,
}

const ROLES: &[&str] = &[
    "id",
    "trace_id",
    "start",
    "end",
    "status",
    "total",
    "upstream",
    "upstream_time",
    "ttft",
    "model",
    "prompt_tokens",
    "output_tokens",
    "finish_reason",
];

impl FieldMap {
    /// Parses `role=field[:unit],...`.
    pub fn parse(spec: &str) -> Result<FieldMap, FieldMapError> {
        let mut map = FieldMap::default();
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (role, field) = item
                .split_once('=')
                .filter(|(r, f)| !r.trim().is_empty() && !f.trim().is_empty())
                .ok_or_else(|| FieldMapError::Item(item.to_string()))?;
            // A key may hold `:` itself: only a known unit after the last one is a unit.
            let (key, unit) = match field.rsplit_once(':') {
                Some((k, u)) if unit(u).is_ok() => (k, unit(u)?),
                // A short word after it is a unit misspelled (`:sec`), a longer one part of
                // the key (`log:time`).
                Some((_, u))
                    if (1..=3).contains(&u.trim().len())
                        && u.trim().chars().all(|c| c.is_ascii_alphabetic()) =>
                {
                    return Err(FieldMapError::Unit(u.trim().to_string()))
                }
                _ => (field, Unit::Seconds),
            };
            let f = Some(Field {
                key: key.trim().to_string(),
                unit,
            });
            let slot = map.slot(role.trim()).ok_or_else(|| FieldMapError::Role {
                role: role.trim().to_string(),
                known: ROLES.join(", "),
            })?;
            if slot.is_some() {
                return Err(FieldMapError::Twice(role.trim().to_string()));
            }
            *slot = f;
        }
        if map.total.is_none() || (map.end.is_none() && map.start.is_none()) {
            return Err(FieldMapError::Incomplete);
        }
        Ok(map)
    }

    /// Envoy's JSON access log in the README's `json_format`.
    pub fn envoy() -> FieldMap {
        FieldMap::parse(
            "id=request_id,start=start_time,status=response_code,total=duration:ms,\
             upstream=upstream_host,upstream_time=upstream_service_time:ms",
        )
        .expect("the Envoy map reads")
    }

    fn slot(&mut self, role: &str) -> Option<&mut Option<Field>> {
        Some(match role {
            "id" => &mut self.id,
            "trace_id" => &mut self.trace_id,
            "start" => &mut self.start,
            "end" => &mut self.end,
            "status" => &mut self.status,
            "total" => &mut self.total,
            "upstream" => &mut self.upstream,
            "upstream_time" => &mut self.upstream_time,
            "ttft" => &mut self.ttft,
            "model" => &mut self.model,
            "prompt_tokens" => &mut self.prompt_tokens,
            "output_tokens" => &mut self.output_tokens,
            "finish_reason" => &mut self.finish_reason,
            _ => return None,
        })
    }
}

fn unit(u: &str) -> Result<Unit, FieldMapError> {
    match u.trim() {
        "s" => Ok(Unit::Seconds),
        "ms" => Ok(Unit::Millis),
        "us" => Ok(Unit::Micros),
        "ns" => Ok(Unit::Nanos),
        other => Err(FieldMapError::Unit(other.to_string())),
    }
}

/// One line of the log, read through `map` (`line`: its 1-based number, for errors).
pub fn parse_line(
    map: &FieldMap,
    raw: &str,
    file: &str,
    line: usize,
) -> Result<Request, RequestLogError> {
    let obj = json_object(raw, file, line)?;
    request(map, &obj, file, line)
}

fn request(
    map: &FieldMap,
    obj: &Map<String, Value>,
    file: &str,
    line: usize,
) -> Result<Request, RequestLogError> {
    let error = |role: &'static str, problem: String| RequestLogError::Field {
        file: file.to_string(),
        line,
        field: role,
        problem,
    };
    // A value as text; `-`, empty and null are absent (what gateways write for "none").
    let text = |f: &Option<Field>| -> Option<String> {
        match obj.get(&f.as_ref()?.key)? {
            Value::String(s) if s != "-" && !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let number = |role: &'static str, f: &Option<Field>| -> Result<Option<f64>, RequestLogError> {
        let Some(v) = text(f) else {
            return Ok(None);
        };
        let x: f64 = v
            .trim()
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| {
                error(
                    role,
                    format!(
                        "(`{}`) is not a number: `{v}`",
                        f.as_ref().map_or("", |f| &f.key)
                    ),
                )
            })?;
        Ok(Some(x))
    };
    let time = |role: &'static str, f: &Option<Field>| -> Result<Option<f64>, RequestLogError> {
        Ok(number(role, f)?.map(|x| x / f.as_ref().map_or(1.0, |f| f.unit.per_second())))
    };
    let instant = |role: &'static str, f: &Option<Field>| -> Result<Option<i64>, RequestLogError> {
        let Some(v) = text(f) else {
            return Ok(None);
        };
        let unit = f.as_ref().map_or(Unit::Seconds, |f| f.unit);
        match unit {
            Unit::Seconds => crate::time::parse_time(&v)
                .map(Some)
                .map_err(|e| error(role, format!("is not a time: {e}"))),
            _ => v
                .trim()
                .parse::<f64>()
                .ok()
                .map(|x| x * 1e3 / unit.per_second())
                .filter(|ms| ms.is_finite() && ms.abs() < 253_402_300_800_000.0)
                .map(|ms| Some(ms.round() as i64))
                .ok_or_else(|| error(role, format!("is not a Unix time in its unit: `{v}`"))),
        }
    };
    let total = time("total", &map.total)?
        .ok_or_else(|| error("total", format!("(`{}`) is missing", key(&map.total))))?;
    let start = instant("start", &map.start)?;
    let end = match (instant("end", &map.end)?, start) {
        (Some(e), _) => e,
        (None, Some(s)) => s
            .checked_add((total * 1000.0).round() as i64)
            .filter(|e| *e < 253_402_300_800_000)
            .ok_or_else(|| error("total", format!("is too long a time: {total} s")))?,
        (None, None) => {
            let which = if map.end.is_some() {
                &map.end
            } else {
                &map.start
            };
            return Err(error("end", format!("(`{}`) is missing", key(which))));
        }
    };
    let status = match number("status", &map.status)? {
        // Envoy writes 0 when no response was sent (the client went away, a reset).
        Some(s) if s.fract() == 0.0 && s <= 999.0 => Some(s as u16),
        Some(s) => return Err(error("status", format!("is not an HTTP status: `{s}`"))),
        None => None,
    };
    let mut r = Request::new(SeenBy::Gateway, end);
    r.start_ms = start;
    r.id = text(&map.id).map(Into::into);
    r.trace_id = text(&map.trace_id).map(Into::into);
    r.replica = text(&map.upstream).map(Into::into);
    r.model = text(&map.model).map(Into::into);
    r.status = status;
    r.prompt_tokens = number("prompt_tokens", &map.prompt_tokens)?.map(|x| x as u32);
    r.output_tokens = number("output_tokens", &map.output_tokens)?.map(|x| x as u32);
    r.finish_reason = text(&map.finish_reason).map(Into::into);
    r.times = Times {
        gateway: Some(total),
        upstream: time("upstream_time", &map.upstream_time)?,
        ttft: time("ttft", &map.ttft)?,
        ..Times::default()
    }
    .into();
    Ok(r)
}

fn key(f: &Option<Field>) -> &str {
    f.as_ref().map_or("", |f| &f.key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::file::requests::read::parse_text;
    use crate::source::file::requests::RecordKind;

    /// A line of Envoy's JSON access log in the README's format (as Envoy writes it: numbers
    /// for %DURATION% and %RESPONSE_CODE%, a string for a header).
    const ENVOY: &str = r#"{"start_time":"2026-12-06T19:00:00.250Z","duration":2500,"response_code":200,"upstream_host":"10.0.0.7:8000","request_id":"a1b2","upstream_service_time":"2480","response_flags":"-"}"#;

    #[test]
    fn an_envoy_line_becomes_a_request() {
        let r = parse_text(
            ENVOY,
            "envoy.log",
            RecordKind::Mapped,
            Some(&FieldMap::envoy()),
        )
        .unwrap();
        let start = crate::time::parse_time("2026-12-06T19:00:00.250Z").unwrap();
        assert_eq!(
            r,
            vec![Request {
                id: Some("a1b2".into()),
                replica: Some("10.0.0.7:8000".into()),
                start_ms: Some(start),
                status: Some(200),
                times: Times {
                    gateway: Some(2.5),
                    upstream: Some(2.48),
                    ..Times::default()
                }
                .into(),
                ..Request::new(SeenBy::Gateway, start + 2500)
            }]
        );
    }

    #[test]
    fn a_map_names_any_gateways_fields() {
        let map = FieldMap::parse(
            "end=ts:ms, total=latency_ms:ms ,status=code,id=rid,prompt_tokens=in_tok",
        )
        .unwrap();
        let line = r#"{"ts":1796570000250,"latency_ms":1500,"code":"503","rid":"x","in_tok":812}"#;
        let r = &parse_text(line, "f", RecordKind::Mapped, Some(&map)).unwrap()[0];
        assert_eq!(
            (r.end_ms, r.times().gateway, r.status, r.prompt_tokens),
            (1_796_570_000_250, Some(1.5), Some(503), Some(812))
        );
        assert!(r.server_error());
    }

    #[test]
    fn a_bad_map_or_line_says_what_is_wrong() {
        assert_eq!(
            FieldMap::parse("total=t").unwrap_err(),
            FieldMapError::Incomplete
        );
        assert!(matches!(
            FieldMap::parse("end=t,total=d,lateness=x").unwrap_err(),
            FieldMapError::Role { .. }
        ));
        assert_eq!(
            FieldMap::parse("end=t,total=d:min").unwrap_err(),
            FieldMapError::Unit("min".into())
        );
        assert_eq!(
            FieldMap::parse("end=t,total=d,end=u").unwrap_err(),
            FieldMapError::Twice("end".into())
        );
        // A key with `:` in it, and nanoseconds.
        let map = FieldMap::parse("end=log:time,total=Duration:ns").unwrap();
        assert_eq!(map.end.as_ref().unwrap().key, "log:time");
        let r = &parse_text(
            r#"{"log:time":"1796570000","Duration":2500000000}"#,
            "f",
            RecordKind::Mapped,
            Some(&map),
        )
        .unwrap()[0];
        assert_eq!(r.times().gateway, Some(2.5));
        let huge = parse_text(
            &ENVOY.replace("2500", "1e20"),
            "e",
            RecordKind::Mapped,
            Some(&FieldMap::envoy()),
        );
        assert!(huge.unwrap_err().to_string().contains("too long a time"));
        assert_eq!(
            FieldMap::parse("end=t,total").unwrap_err(),
            FieldMapError::Item("total".into())
        );
        let e = parse_text(
            &ENVOY.replace("2500", "\"soon\""),
            "envoy.log",
            RecordKind::Mapped,
            Some(&FieldMap::envoy()),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "envoy.log:1: field `total` (`duration`) is not a number: `soon`"
        );
        let e = parse_text(
            r#"{"duration":5}"#,
            "envoy.log",
            RecordKind::Mapped,
            Some(&FieldMap::envoy()),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "envoy.log:1: field `end` (`start_time`) is missing");
    }
}
