//! Per-request records from a gateway's access log: one JSON object per line, as nginx writes
//! with `log_format ... escape=json` (README: "Requests from a gateway"). Each line is one
//! request as the gateway saw it: when it ended, its status, the whole time the gateway held it
//! (what the client waited, short of the client's own network), and the upstream's share.
//!
//! The fields read (nginx variables; values are strings, `-` when nginx has none, and
//! comma-separated when the request was tried on several upstreams):
//! `msec` (end of the request, Unix seconds), `request_time`, `status`, `upstream_addr`,
//! `upstream_connect_time`, `upstream_header_time`, `upstream_response_time`, `request_id`.
//! Other fields are kept out of the way, never an error.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::record::{Request, RequestLogError, SeenBy, Times};

/// The fields read, each as the JSON text it was written as (borrowed from the line: a
/// million lines are read without a map or a string per field).
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow, default)]
    msec: Option<&'a RawValue>,
    #[serde(borrow, default)]
    request_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    status: Option<&'a RawValue>,
    #[serde(borrow, default)]
    request_time: Option<&'a RawValue>,
    #[serde(borrow, default)]
    upstream_addr: Option<&'a RawValue>,
    #[serde(borrow, default)]
    upstream_header_time: Option<&'a RawValue>,
    #[serde(borrow, default)]
    upstream_response_time: Option<&'a RawValue>,
}

/// A field's value as text: a string's contents (unescaped only where it has escapes) or a
/// number as written; None for `-`, an empty string, null or anything else.
fn text(raw: Option<&RawValue>) -> Option<Cow<'_, str>> {
    let json = raw?.get();
    let value = if let Some(inner) = json.strip_prefix('"').and_then(|j| j.strip_suffix('"')) {
        if inner.contains('\\') {
            Cow::Owned(serde_json::from_str::<String>(json).ok()?)
        } else {
            Cow::Borrowed(inner)
        }
    } else if json.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
        Cow::Borrowed(json)
    } else {
        return None;
    };
    (value != "-" && !value.is_empty()).then_some(value)
}

/// One line of the log (`line`: its 1-based number, for errors).
pub fn parse_line(raw: &str, file: &str, line: usize) -> Result<Request, RequestLogError> {
    let fields: Line = serde_json::from_str(raw).map_err(|e| RequestLogError::NotJson {
        file: file.to_string(),
        line,
        detail: e.to_string(),
    })?;
    request(&fields, file, line)
}

fn request(obj: &Line<'_>, file: &str, line: usize) -> Result<Request, RequestLogError> {
    let field_error = |field: &'static str, problem: String| RequestLogError::Field {
        file: file.to_string(),
        line,
        field,
        problem,
    };
    let seconds = |field: &'static str, raw| -> Result<f64, RequestLogError> {
        let v = text(raw).ok_or_else(|| field_error(field, "is missing".into()))?;
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| field_error(field, format!("is not a number of seconds: `{v}`")))
    };
    // Several upstreams tried: `0.001, 0.002`; ` : ` separates upstream groups (an internal
    // redirect): the last group's tries are the request's.
    let tries = |field: &'static str, raw| -> Result<Option<(f64, f64, usize)>, RequestLogError> {
        let Some(v) = text(raw) else {
            return Ok(None);
        };
        let last_group = v.rsplit(" : ").next().unwrap_or(&v);
        let (mut sum, mut last, mut n) = (0.0, 0.0, 0);
        for p in last_group
            .split(',')
            .map(str::trim)
            .filter(|p| *p != "-" && !p.is_empty())
        {
            let t = p
                .parse::<f64>()
                .map_err(|_| field_error(field, format!("is not a list of seconds: `{v}`")))?;
            (sum, last, n) = (sum + t, t, n + 1);
        }
        Ok((n > 0).then_some((sum, last, n)))
    };
    let end_s = seconds("msec", obj.msec)?;
    let total_s = seconds("request_time", obj.request_time)?;
    let status = text(obj.status)
        .ok_or_else(|| field_error("status", "is missing".into()))?
        .parse::<u16>()
        .map_err(|_| field_error("status", "is not an HTTP status".into()))?;
    let response = tries("upstream_response_time", obj.upstream_response_time)?;
    let header = tries("upstream_header_time", obj.upstream_header_time)?;
    // Tries are separated by `, `, upstream groups by ` : `; an address holds `:` itself.
    let upstream = text(obj.upstream_addr).map(|a| {
        let last = a.rsplit(", ").next().unwrap_or(&a);
        last.rsplit(" : ").next().unwrap_or(last).trim().into()
    });
    let mut r = Request::new(SeenBy::Gateway, (end_s * 1000.0).round() as i64);
    r.id = text(obj.request_id).map(|id| id.into());
    r.status = Some(status);
    r.replica = upstream;
    r.retries = response.map_or(0, |(_, _, n)| (n - 1).min(usize::from(u16::MAX)) as u16);
    r.times = Times {
        gateway: Some(total_s),
        upstream: response.map(|(sum, _, _)| sum),
        upstream_header: header.map(|(_, last, _)| last),
        ..Times::default()
    }
    .into();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::file::requests::read::parse_text;
    use crate::source::file::requests::RecordKind;

    const LINE: &str = r#"{"msec":"1796570000.250","request_id":"a1b2","status":"200","request_time":"2.500","upstream_addr":"127.0.0.1:8000","upstream_connect_time":"0.000","upstream_header_time":"0.010","upstream_response_time":"2.499","request_uri":"/v1/completions"}"#;

    #[test]
    fn an_nginx_line_becomes_a_request() {
        let r = parse_text(LINE, "access.log", RecordKind::Nginx, None).unwrap();
        assert_eq!(
            r,
            vec![Request {
                id: Some("a1b2".into()),
                status: Some(200),
                replica: Some("127.0.0.1:8000".into()),
                times: Times {
                    gateway: Some(2.5),
                    upstream: Some(2.499),
                    upstream_header: Some(0.01),
                    ..Times::default()
                }
                .into(),
                ..Request::new(SeenBy::Gateway, 1_796_570_000_250)
            }]
        );
    }

    #[test]
    fn retries_and_missing_upstreams_read_as_nginx_writes_them() {
        let tried = LINE
            .replace(
                r#""upstream_addr":"127.0.0.1:8000""#,
                r#""upstream_addr":"10.0.0.1:8000, 10.0.0.2:8000""#,
            )
            .replace(
                r#""upstream_response_time":"2.499""#,
                r#""upstream_response_time":"0.500, 1.999""#,
            );
        let r = &parse_text(&tried, "f", RecordKind::Nginx, None).unwrap()[0];
        assert_eq!(r.retries, 1);
        assert_eq!(r.replica.as_deref(), Some("10.0.0.2:8000"));
        assert!((r.times().upstream.unwrap() - 2.499).abs() < 1e-6);
        let refused = LINE
            .replace(r#""status":"200""#, r#""status":"502""#)
            .replace(
                r#""upstream_response_time":"2.499""#,
                r#""upstream_response_time":"-""#,
            );
        let r = &parse_text(&refused, "f", RecordKind::Nginx, None).unwrap()[0];
        assert_eq!((r.status, r.times().upstream), (Some(502), None));
    }

    #[test]
    fn bad_lines_are_named_with_file_and_line() {
        let truncated = format!("{LINE}\n{}", &LINE[..40]);
        let e = parse_text(&truncated, "access.log", RecordKind::Nginx, None).unwrap_err();
        assert!(
            e.to_string().starts_with("access.log:2: not a JSON object"),
            "{e}"
        );
        let no_time = LINE.replace(r#""request_time":"2.500","#, "");
        let e = parse_text(&no_time, "a", RecordKind::Nginx, None)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "a:1: field `request_time` is missing");
        let bad = LINE.replace(r#""request_time":"2.500""#, r#""request_time":"soon""#);
        let e = parse_text(&bad, "a", RecordKind::Nginx, None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "a:1: field `request_time` is not a number of seconds: `soon`"
        );
    }
}
