//! The one record every request source reads into, and what the readers share.

use std::sync::Arc;

/// Who wrote the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeenBy {
    /// A gateway or proxy in front of the engine: what the client waited, short of its network.
    Gateway,
    /// The engine: its own account of the request's queue, prefill and decode.
    Engine,
}

/// One request as its record tells it. Compact, since a window may hold a million: times
/// packed as `f32` (a millisecond's precision over hours), ids boxed, the replica, model and
/// finish reason shared between the records that name the same one (see [`Interner`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Who recorded it.
    pub seen_by: SeenBy,
    /// The request id (nginx `$request_id`, vLLM's `gen_ai.request.id`), when recorded.
    pub id: Option<Box<str>>,
    /// The trace id (hex), when recorded.
    pub trace_id: Option<Box<str>>,
    /// The replica that served it: the gateway's upstream (`host:port`), the engine's
    /// `service.instance.id` or host.
    pub replica: Option<Arc<str>>,
    /// The model asked for or answered by.
    pub model: Option<Arc<str>>,
    /// Start, Unix milliseconds, when recorded.
    pub start_ms: Option<i64>,
    /// End, Unix milliseconds.
    pub end_ms: i64,
    /// HTTP status answered (a gateway's record); an engine's span records none.
    pub status: Option<u16>,
    /// Whether the engine recorded the request as failed (a span with status ERROR).
    pub failed: bool,
    /// Upstreams tried beyond the first (nginx's `proxy_next_upstream`).
    pub retries: u16,
    /// Prompt tokens.
    pub prompt_tokens: Option<u32>,
    /// Generated tokens.
    pub output_tokens: Option<u32>,
    /// Why generation stopped (`length`, `stop`, `abort`...).
    pub finish_reason: Option<Arc<str>>,
    /// The times the record carries (read them with [`Request::times`]).
    pub times: PackedTimes,
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

/// [`Times`] as a record keeps them: eight `f32`, NaN where there is none (32 bytes, not 128).
#[derive(Debug, Clone, Copy)]
pub struct PackedTimes([f32; 8]);

impl Default for PackedTimes {
    fn default() -> Self {
        PackedTimes([f32::NAN; 8])
    }
}

impl PartialEq for PackedTimes {
    fn eq(&self, other: &Self) -> bool {
        self.0
            .iter()
            .zip(&other.0)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    }
}

impl From<Times> for PackedTimes {
    fn from(t: Times) -> Self {
        let pack = |v: Option<f64>| v.map_or(f32::NAN, |v| v as f32);
        PackedTimes([
            pack(t.queue),
            pack(t.prefill),
            pack(t.ttft),
            pack(t.decode),
            pack(t.e2e),
            pack(t.gateway),
            pack(t.upstream),
            pack(t.upstream_header),
        ])
    }
}

impl From<PackedTimes> for Times {
    fn from(p: PackedTimes) -> Self {
        let get = |i: usize| Some(f64::from(p.0[i])).filter(|v| !v.is_nan());
        Times {
            queue: get(0),
            prefill: get(1),
            ttft: get(2),
            decode: get(3),
            e2e: get(4),
            gateway: get(5),
            upstream: get(6),
            upstream_header: get(7),
        }
    }
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
            retries: 0,
            prompt_tokens: None,
            output_tokens: None,
            finish_reason: None,
            times: PackedTimes::default(),
        }
    }

    /// The times the record carries.
    pub fn times(&self) -> Times {
        self.times.into()
    }

    /// Whether the server failed it: a 5xx from the gateway, an error status on the span.
    pub fn server_error(&self) -> bool {
        self.failed || self.status.is_some_and(|s| s >= 500)
    }

    /// Whether the server answered it: no server error, and an answer was sent at all (Envoy
    /// writes status 0 when none was: the client left, a reset).
    pub fn answered(&self) -> bool {
        !self.server_error() && self.status != Some(0)
    }
}

/// Shares the replica, model and finish-reason strings of a file's records: a million
/// requests name a handful of replicas, kept once each.
#[derive(Default)]
pub struct Interner {
    seen: std::collections::HashSet<Arc<str>>,
}

/// Distinct strings an interner keeps; past it, new ones are kept per record.
const MAX_INTERNED: usize = 100_000;

impl Interner {
    /// `r`'s shared strings, each replaced by the one kept for its text.
    pub fn share(&mut self, r: &mut Request) {
        for s in [&mut r.replica, &mut r.model, &mut r.finish_reason]
            .into_iter()
            .flatten()
        {
            match self.seen.get(&**s) {
                Some(kept) => *s = kept.clone(),
                None if self.seen.len() < MAX_INTERNED => {
                    self.seen.insert(s.clone());
                }
                None => {}
            }
        }
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
