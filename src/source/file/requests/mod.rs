//! Per-request records: what a gateway logged of each request it passed on (`nginx`), and
//! what the engine itself recorded of each request it served (its OpenTelemetry spans, `otlp`).
//! Both read into one [`Request`]: whichever times, token counts and identities the record
//! carries, the rest `None`.

pub mod nginx;
pub mod otlp;

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
    /// A gateway's JSON access log (nginx's field names).
    Gateway,
    /// OTLP trace exports as JSON lines (the OpenTelemetry Collector's file exporter).
    OtlpJson,
}

/// Which request record `head` (a file's first bytes) begins, if any: its first line a JSON
/// object with nginx's `request_time`, or one with OTLP's `resourceSpans`.
pub fn record_kind(head: &str) -> Option<RecordKind> {
    let first = head
        .trim_start_matches('\u{feff}')
        .lines()
        .find(|l| !l.trim().is_empty())?
        .trim_start();
    if !first.starts_with('{') {
        return None;
    }
    if first.contains("\"resourceSpans\"") || first.contains("\"resource_spans\"") {
        Some(RecordKind::OtlpJson)
    } else if first.contains("\"request_time\"") {
        Some(RecordKind::Gateway)
    } else {
        None
    }
}

/// Every request of a request-record file of `kind`, in file order.
pub fn parse(kind: RecordKind, text: &str, file: &str) -> Result<Vec<Request>, RequestLogError> {
    match kind {
        RecordKind::Gateway => nginx::parse_nginx_json(text, file),
        RecordKind::OtlpJson => otlp::parse_json_lines(text, file),
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
        assert_eq!(
            record_kind("{\"msec\":\"1.0\",\"request_time\":\"0.1\"}\n"),
            Some(RecordKind::Gateway)
        );
        assert_eq!(
            record_kind("\u{feff}\n{\"resourceSpans\":[]}\n"),
            Some(RecordKind::OtlpJson)
        );
        assert_eq!(record_kind("vllm:num_requests_running 1\n"), None);
        assert_eq!(record_kind("{\"status\":\"success\",\"data\":{}}"), None);
    }
}
