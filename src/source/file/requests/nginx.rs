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

use serde_json::{Map, Value};

use super::record::{json_object, Request, RequestLogError, SeenBy, Times};

/// One line of the log (`line`: its 1-based number, for errors).
pub fn parse_line(raw: &str, file: &str, line: usize) -> Result<Request, RequestLogError> {
    let obj = json_object(raw, file, line)?;
    request(&obj, file, line)
}

fn request(obj: &Map<String, Value>, file: &str, line: usize) -> Result<Request, RequestLogError> {
    let field_error = |field: &'static str, problem: String| RequestLogError::Field {
        file: file.to_string(),
        line,
        field,
        problem,
    };
    let text = |field: &'static str| -> Option<String> {
        match obj.get(field)? {
            Value::String(s) if s != "-" && !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let seconds = |field: &'static str| -> Result<f64, RequestLogError> {
        let v = text(field).ok_or_else(|| field_error(field, "is missing".into()))?;
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| field_error(field, format!("is not a number of seconds: `{v}`")))
    };
    // Several upstreams tried: `0.001, 0.002`; ` : ` separates upstream groups (an internal
    // redirect): the last group's tries are the request's.
    let tries = |field: &'static str| -> Result<Option<Vec<f64>>, RequestLogError> {
        let Some(v) = text(field) else {
            return Ok(None);
        };
        let last_group = v.rsplit(" : ").next().unwrap_or(&v);
        let parts: Result<Vec<f64>, _> = last_group
            .split(',')
            .map(str::trim)
            .filter(|p| *p != "-" && !p.is_empty())
            .map(|p| p.parse::<f64>())
            .collect();
        match parts {
            Ok(p) if p.is_empty() => Ok(None),
            Ok(p) => Ok(Some(p)),
            Err(_) => Err(field_error(
                field,
                format!("is not a list of seconds: `{v}`"),
            )),
        }
    };
    let end_s = seconds("msec")?;
    let total_s = seconds("request_time")?;
    let status = text("status")
        .ok_or_else(|| field_error("status", "is missing".into()))?
        .parse::<u16>()
        .map_err(|_| field_error("status", "is not an HTTP status".into()))?;
    let response = tries("upstream_response_time")?;
    let header = tries("upstream_header_time")?;
    // Tries are separated by `, `, upstream groups by ` : `; an address holds `:` itself.
    let upstream = text("upstream_addr").map(|a| {
        let last = a.rsplit(", ").next().unwrap_or(&a);
        last.rsplit(" : ").next().unwrap_or(last).trim().to_string()
    });
    let mut r = Request::new(SeenBy::Gateway, (end_s * 1000.0).round() as i64);
    r.id = text("request_id");
    r.status = Some(status);
    r.replica = upstream;
    r.retries = response
        .as_ref()
        .map_or(0, |t| t.len().saturating_sub(1) as u32);
    r.times = Times {
        gateway: Some(total_s),
        upstream: response.map(|t| t.iter().sum()),
        upstream_header: header.and_then(|h| h.last().copied()),
        ..Times::default()
    };
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
                },
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
        assert!((r.times.upstream.unwrap() - 2.499).abs() < 1e-9);
        let refused = LINE
            .replace(r#""status":"200""#, r#""status":"502""#)
            .replace(
                r#""upstream_response_time":"2.499""#,
                r#""upstream_response_time":"-""#,
            );
        let r = &parse_text(&refused, "f", RecordKind::Nginx, None).unwrap()[0];
        assert_eq!((r.status, r.times.upstream), (Some(502), None));
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
