//! Per-request records: what a gateway logged of each request it passed on (`nginx`, Envoy and
//! any JSON log through a field map: `mapped`), and what the engine itself recorded of each
//! request it served (its OpenTelemetry spans, `otlp`). All read into one [`Request`]
//! (`record`): whichever times, token counts and identities the record carries, the rest `None`.

pub mod mapped;
pub mod nginx;
pub mod otlp;
pub mod read;
mod record;

pub use mapped::FieldMap;
pub use read::{read_path, read_paths, FileRead, Keep, RequestFilesRead};
pub use record::{
    quantile, Interner, PackedTimes, Request, RequestLogError, SeenBy, Times, MAX_LINE_BYTES,
};

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
    } else if mapped
        && !has("resultType")
        && serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(first).is_ok()
    {
        // Any JSON-lines log (a first line that is a whole object) but a Prometheus API
        // answer saved with curl.
        Some(RecordKind::Mapped)
    } else if has("request_time") {
        Some(RecordKind::Nginx)
    } else if has("start_time") && has("duration") && has("response_code") {
        Some(RecordKind::Envoy)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
