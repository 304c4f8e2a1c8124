//! Per-request records: what a gateway logged of each request it passed on (`nginx`), and
//! what the engine itself recorded of each request it served (its OpenTelemetry spans, `otlp`).
//! Both read into one [`Request`]: whichever times, token counts and identities the record
//! carries, the rest `None`.

pub mod mapped;
pub mod nginx;
pub mod otlp;

pub use mapped::FieldMap;
pub use nginx::parse_nginx_json;

/// Who wrote the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeenBy {
    /// A gateway or proxy in front of the engine: what the client waited, short of its network.
    Gateway,
    /// The engine: its own account of the request's queue, prefill and decode.
    Engine,
}

/// One request as its record tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Who recorded it.
    pub seen_by: SeenBy,
    /// The request id (nginx `$request_id`, vLLM's `gen_ai.request.id`), when recorded.
    pub id: Option<String>,
    /// The trace id (hex), when recorded.
    pub trace_id: Option<String>,
    /// The replica that served it: the gateway's upstream (`host:port`), the engine's
    /// `service.instance.id` or host.
    pub replica: Option<String>,
    /// The model asked for or answered by.
    pub model: Option<String>,
    /// Start, Unix milliseconds, when recorded.
    pub start_ms: Option<i64>,
    /// End, Unix milliseconds.
    pub end_ms: i64,
    /// HTTP status answered (a gateway's record); an engine's span records none.
    pub status: Option<u16>,
    /// Whether the engine recorded the request as failed (a span with status ERROR).
    pub failed: bool,
    /// Prompt tokens.
    pub prompt_tokens: Option<u64>,
    /// Generated tokens.
    pub output_tokens: Option<u64>,
    /// Why generation stopped (`length`, `stop`, `abort`...).
    pub finish_reason: Option<String>,
    /// The times the record carries, seconds.
    pub times: Times,
    /// Upstreams tried beyond the first (nginx's `proxy_next_upstream`).
    pub retries: u32,
}

/// The times of one request, seconds; each `None` where the record has none.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Times {
    /// Waiting in the engine's queue.
    pub queue: Option<f64>,
    /// The engine's prefill.
    pub prefill: Option<f64>,
    /// Arrival to first token, as the engine measured it.
    pub ttft: Option<f64>,
    /// The engine's decode.
    pub decode: Option<f64>,
    /// Arrival to last token, as the engine measured it.
    pub e2e: Option<f64>,
    /// The whole time the gateway held the request.
    pub gateway: Option<f64>,
    /// Time the upstream(s) took to answer completely, as the gateway measured it.
    pub upstream: Option<f64>,
    /// Time to the upstream's response headers, as the gateway measured it.
    pub upstream_header: Option<f64>,
}

impl Request {
    /// An empty record of `seen_by` ending at `end_ms`, to fill in.
    pub fn new(seen_by: SeenBy, end_ms: i64) -> Request {
        Request {
            seen_by,
            id: None,
            trace_id: None,
            replica: None,
            model: None,
            start_ms: None,
            end_ms,
            status: None,
            failed: false,
            prompt_tokens: None,
            output_tokens: None,
            finish_reason: None,
            times: Times::default(),
            retries: 0,
        }
    }

    /// Whether the server failed it: a 5xx from the gateway, an error status on the span.
    pub fn server_error(&self) -> bool {
        self.failed || self.status.is_some_and(|s| s >= 500)
    }
}

/// A request record that does not read. Each message names the file and the line (or batch).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestLogError {
    /// A line that is not a JSON object (a truncated line, a plain-text log line).
    #[error("{file}:{line}: not a JSON object: {detail}")]
    NotJson {
        /// The file as named.
        file: String,
        /// 1-based.
        line: usize,
        /// The JSON parser's reason.
        detail: String,
    },
    /// A field the reader needs is missing or not what the writer writes.
    #[error("{file}:{line}: field `{field}` {problem}")]
    Field {
        /// The file as named.
        file: String,
        /// 1-based.
        line: usize,
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A line that is JSON but not an OTLP trace export (`resourceSpans`).
    #[error("{file}:{line}: not an OTLP trace export: {detail}")]
    NotOtlp {
        /// The file as named.
        file: String,
        /// 1-based.
        line: usize,
        /// The decoder's reason.
        detail: String,
    },
}

/// What kind of request record a file's first bytes begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// nginx's JSON access log (the README's `log_format`).
    Nginx,
    /// Envoy's JSON access log (the README's `json_format`).
    Envoy,
    /// A JSON request log read through the user's `--request-fields`.
    Mapped,
    /// OTLP trace exports as JSON lines (the OpenTelemetry Collector's file exporter).
    OtlpJson,
}

/// Which request record `head` (a file's first bytes) begins, if any, from its first line: a
/// JSON object with OTLP's `resourceSpans`; with a field map (`mapped`), any other JSON object;
/// else one with nginx's `request_time`, or Envoy's `start_time`, `duration` and
/// `response_code`.
pub fn record_kind(head: &str, mapped: bool) -> Option<RecordKind> {
    let first = head
        .trim_start_matches('\u{feff}')
        .lines()
        .find(|l| !l.trim().is_empty())?
        .trim_start();
    if !first.starts_with('{') {
        return None;
    }
    let has = |k: &str| first.contains(&format!("\"{k}\""));
    if has("resourceSpans") || has("resource_spans") {
        Some(RecordKind::OtlpJson)
    } else if mapped && !has("resultType") {
        // Any JSON line but a Prometheus API answer saved with curl.
        Some(RecordKind::Mapped)
    } else if has("request_time") {
        Some(RecordKind::Nginx)
    } else if has("start_time") && has("duration") && has("response_code") {
        Some(RecordKind::Envoy)
    } else {
        None
    }
}

/// Every request of a request-record file of `kind`, in file order (`map`: the user's
/// `--request-fields`, for [`RecordKind::Mapped`]).
pub fn parse(
    kind: RecordKind,
    map: Option<&FieldMap>,
    text: &str,
    file: &str,
) -> Result<Vec<Request>, RequestLogError> {
    match (kind, map) {
        (RecordKind::Nginx, _) => nginx::parse_nginx_json(text, file),
        (RecordKind::Envoy, _) => mapped::parse_mapped(&FieldMap::envoy(), text, file),
        (RecordKind::Mapped, Some(map)) => mapped::parse_mapped(map, text, file),
        (RecordKind::Mapped, None) => Err(RequestLogError::Field {
            file: file.to_string(),
            line: 1,
            field: "request-fields",
            problem: "is needed to read this log: no field map was given".into(),
        }),
        (RecordKind::OtlpJson, _) => otlp::parse_json_lines(text, file),
    }
}

/// The `q` quantile (0..1) of `values` by the nearest-rank method; None when empty.
pub fn quantile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&mut v, 0.99), Some(99.0));
        assert_eq!(quantile(&mut v, 0.5), Some(50.0));
        assert_eq!(quantile(&mut [], 0.5), None);
    }

    #[test]
    fn a_record_is_known_by_its_first_line() {
        let nginx = "{\"msec\":\"1.0\",\"request_time\":\"0.1\"}\n";
        assert_eq!(record_kind(nginx, false), Some(RecordKind::Nginx));
        assert_eq!(record_kind(nginx, true), Some(RecordKind::Mapped));
        let envoy =
            "{\"start_time\":\"2026-12-06T19:00:00Z\",\"duration\":5,\"response_code\":200}";
        assert_eq!(record_kind(envoy, false), Some(RecordKind::Envoy));
        let otlp = "\u{feff}\n{\"resourceSpans\":[]}\n";
        assert_eq!(record_kind(otlp, false), Some(RecordKind::OtlpJson));
        assert_eq!(record_kind(otlp, true), Some(RecordKind::OtlpJson));
        assert_eq!(record_kind("vllm:num_requests_running 1\n", true), None);
        let api = "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\"}}";
        assert_eq!(record_kind(api, false), None);
        assert_eq!(record_kind(api, true), None);
    }
}
