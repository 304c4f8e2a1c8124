//! The one record every request source reads into, and what the readers share.

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
    /// A line too long to be one record.
    #[error("{file}:{line}: a line of {bytes} bytes, longer than a request record may be ({} MiB): is a newline missing?", MAX_LINE_BYTES >> 20)]
    LineTooLong {
        /// The file as named.
        file: String,
        /// 1-based.
        line: usize,
        /// Its length.
        bytes: usize,
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

/// The longest line a request record may be: an OTLP export of a few thousand spans is a few
/// megabytes; a line past this is a broken file (a missing newline), refused with its place.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// One line of a JSON-lines log as an object, or an error naming the file and the line.
pub(crate) fn json_object(
    raw: &str,
    file: &str,
    line: usize,
) -> Result<serde_json::Map<String, serde_json::Value>, RequestLogError> {
    serde_json::from_str(raw).map_err(|e| RequestLogError::NotJson {
        file: file.to_string(),
        line,
        detail: e.to_string(),
    })
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
}
