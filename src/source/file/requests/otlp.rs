//! An engine's own per-request records: the OpenTelemetry span it exports for each request it
//! serves (vLLM with `--otlp-traces-endpoint`: one `llm_request` span with `gen_ai.latency.*`
//! and `gen_ai.usage.*` attributes; SGLang's per-stage spans are not read yet). Read from OTLP trace exports, as JSON
//! lines (what the OpenTelemetry Collector's file exporter and `llm-doctor record --otlp` write)
//! or as the protobuf an OTLP/HTTP exporter posts. Spans that are not requests (an engine's
//! start-up spans, a gateway's own) are skipped.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{status::StatusCode, Span};
use prost::Message;

use super::record::{Request, RequestLogError, SeenBy, Times};

/// The span an engine writes per request.
const REQUEST_SPAN: &str = "llm_request";

/// The request spans of one line: one JSON export (`line`: its 1-based number, for errors).
pub fn parse_line(raw: &str, file: &str, line: usize) -> Result<Vec<Request>, RequestLogError> {
    let value: serde_json::Value =
        serde_json::from_str(raw).map_err(|e| RequestLogError::NotJson {
            file: file.to_string(),
            line,
            detail: e.to_string(),
        })?;
    let export: ExportTraceServiceRequest =
        serde_json::from_value(value).map_err(|e| RequestLogError::NotOtlp {
            file: file.to_string(),
            line,
            detail: e.to_string(),
        })?;
    Ok(requests_of(&export))
}

/// One OTLP/HTTP protobuf body (an `ExportTraceServiceRequest`).
pub fn decode_protobuf(body: &[u8]) -> Result<ExportTraceServiceRequest, prost::DecodeError> {
    ExportTraceServiceRequest::decode(body)
}

/// One export as a JSON line (no newline), the form [`parse_line`] reads.
pub fn to_json_line(export: &ExportTraceServiceRequest) -> Result<String, serde_json::Error> {
    serde_json::to_string(export)
}

/// The request spans of one export.
pub fn requests_of(export: &ExportTraceServiceRequest) -> Vec<Request> {
    let mut out = Vec::new();
    for rs in &export.resource_spans {
        let resource = rs.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        let replica: Option<std::sync::Arc<str>> = ["service.instance.id", "host.name"]
            .iter()
            .find_map(|k| text(resource, k))
            .map(Into::into);
        for ss in &rs.scope_spans {
            for span in ss.spans.iter().filter(|s| is_request(s)) {
                let mut r = request_of(span);
                r.replica = replica.clone();
                out.push(r);
            }
        }
    }
    out
}

fn is_request(span: &Span) -> bool {
    span.name == REQUEST_SPAN || attr(&span.attributes, "gen_ai.latency.e2e").is_some()
}

fn request_of(span: &Span) -> Request {
    let a = &span.attributes[..];
    let ms = |nanos: u64| (nanos / 1_000_000) as i64;
    let mut r = Request::new(SeenBy::Engine, ms(span.end_time_unix_nano));
    r.start_ms = (span.start_time_unix_nano > 0).then(|| ms(span.start_time_unix_nano));
    r.id = text(a, "gen_ai.request.id").map(Into::into);
    r.trace_id = (!span.trace_id.is_empty()).then(|| hex(&span.trace_id).into());
    r.model = text(a, "gen_ai.response.model")
        .or_else(|| text(a, "gen_ai.request.model"))
        .map(Into::into);
    r.prompt_tokens =
        count(a, "gen_ai.usage.prompt_tokens").or(count(a, "gen_ai.usage.input_tokens"));
    r.output_tokens =
        count(a, "gen_ai.usage.completion_tokens").or(count(a, "gen_ai.usage.output_tokens"));
    r.finish_reason = first_text(a, "gen_ai.response.finish_reasons").map(Into::into);
    r.failed = span
        .status
        .as_ref()
        .is_some_and(|s| s.code == StatusCode::Error as i32);
    r.times = Times {
        queue: seconds(a, "gen_ai.latency.time_in_queue"),
        prefill: seconds(a, "gen_ai.latency.time_in_model_prefill"),
        ttft: seconds(a, "gen_ai.latency.time_to_first_token"),
        decode: seconds(a, "gen_ai.latency.time_in_model_decode"),
        e2e: seconds(a, "gen_ai.latency.e2e"),
        ..Times::default()
    }
    .into();
    r
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

fn text(attrs: &[KeyValue], key: &str) -> Option<String> {
    match attr(attrs, key)? {
        any_value::Value::StringValue(s) if !s.is_empty() => Some(s.clone()),
        any_value::Value::IntValue(i) => Some(i.to_string()),
        _ => None,
    }
}

/// A string attribute, or the first string of an array attribute.
fn first_text(attrs: &[KeyValue], key: &str) -> Option<String> {
    match attr(attrs, key)? {
        any_value::Value::ArrayValue(a) => a.values.iter().find_map(|v| match &v.value {
            Some(any_value::Value::StringValue(s)) => Some(s.clone()),
            _ => None,
        }),
        _ => text(attrs, key),
    }
}

/// A non-negative, finite number of seconds (an exporter may write it as a double or an int).
fn seconds(attrs: &[KeyValue], key: &str) -> Option<f64> {
    let v = match attr(attrs, key)? {
        any_value::Value::DoubleValue(d) => *d,
        any_value::Value::IntValue(i) => *i as f64,
        any_value::Value::StringValue(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    (v.is_finite() && v >= 0.0).then_some(v)
}

fn count(attrs: &[KeyValue], key: &str) -> Option<u32> {
    match attr(attrs, key)? {
        any_value::Value::IntValue(i) => u32::try_from(*i).ok(),
        any_value::Value::DoubleValue(d)
            if *d >= 0.0 && d.fract() == 0.0 && *d <= f64::from(u32::MAX) =>
        {
            Some(*d as u32)
        }
        any_value::Value::StringValue(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::file::requests::read::parse_text;
    use crate::source::file::requests::RecordKind;

    /// One export as the OTLP/JSON encoding writes it (camelCase fields, hex ids, 64-bit
    /// integers as strings), written here by hand from the OTLP specification, not by the
    /// serializer under test: one request span of vLLM's and one start-up span to skip.
    const EXPORT: &str = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"vllm"}},{"key":"service.instance.id","value":{"stringValue":"10.0.0.7:8000"}}]},"scopeSpans":[{"scope":{"name":"vllm.llm_engine"},"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"llm_request","kind":3,"startTimeUnixNano":"1796570000000000000","endTimeUnixNano":"1796570002500000000","attributes":[{"key":"gen_ai.request.id","value":{"stringValue":"cmpl-a1b2-0"}},{"key":"gen_ai.response.model","value":{"stringValue":"llama-270m"}},{"key":"gen_ai.usage.prompt_tokens","value":{"intValue":"312"}},{"key":"gen_ai.usage.completion_tokens","value":{"intValue":"128"}},{"key":"gen_ai.response.finish_reasons","value":{"arrayValue":{"values":[{"stringValue":"length"}]}}},{"key":"gen_ai.latency.time_in_queue","value":{"doubleValue":0.25}},{"key":"gen_ai.latency.time_to_first_token","value":{"doubleValue":0.75}},{"key":"gen_ai.latency.e2e","value":{"doubleValue":2.5}},{"key":"gen_ai.latency.time_in_model_prefill","value":{"doubleValue":0.5}},{"key":"gen_ai.latency.time_in_model_decode","value":{"doubleValue":1.75}}],"status":{}},{"traceId":"5b8efff798038103d269b633813fc60d","spanId":"eee19b7ec3c1b175","name":"EngineCoreProc init","startTimeUnixNano":"1796569990000000000","endTimeUnixNano":"1796569995000000000","status":{}}]}]}]}"#;

    fn the_request() -> Request {
        Request {
            id: Some("cmpl-a1b2-0".into()),
            trace_id: Some("5b8efff798038103d269b633813fc60c".into()),
            replica: Some("10.0.0.7:8000".into()),
            model: Some("llama-270m".into()),
            start_ms: Some(1_796_570_000_000),
            prompt_tokens: Some(312),
            output_tokens: Some(128),
            finish_reason: Some("length".into()),
            times: Times {
                queue: Some(0.25),
                prefill: Some(0.5),
                ttft: Some(0.75),
                decode: Some(1.75),
                e2e: Some(2.5),
                ..Times::default()
            }
            .into(),
            ..Request::new(SeenBy::Engine, 1_796_570_002_500)
        }
    }

    #[test]
    fn a_request_span_becomes_a_request_and_other_spans_are_skipped() {
        let got = parse_text(
            &format!("{EXPORT}\n\n{EXPORT}\n"),
            "traces.jsonl",
            RecordKind::OtlpJson,
            None,
        )
        .unwrap();
        assert_eq!(got, vec![the_request(), the_request()]);
    }

    #[test]
    fn protobuf_and_json_lines_carry_the_same_requests() {
        let export: ExportTraceServiceRequest = serde_json::from_str(EXPORT).unwrap();
        let body = export.encode_to_vec();
        let back = decode_protobuf(&body).unwrap();
        assert_eq!(requests_of(&back), vec![the_request()]);
        // What `record --otlp` writes reads back the same.
        let line = to_json_line(&back).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(
            parse_text(&line, "f", RecordKind::OtlpJson, None).unwrap(),
            vec![the_request()]
        );
        assert!(decode_protobuf(b"\xff\xff\xff").is_err());
    }

    #[test]
    fn a_failed_span_and_bad_lines_are_told() {
        let failed = EXPORT.replacen(r#""status":{}"#, r#""status":{"code":2}"#, 1);
        assert!(parse_text(&failed, "f", RecordKind::OtlpJson, None).unwrap()[0].server_error());
        let e = parse_text(
            &format!("{EXPORT}\n{}", &EXPORT[..50]),
            "t.jsonl",
            RecordKind::OtlpJson,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("t.jsonl:2: not a JSON object"), "{e}");
        let e = parse_text(
            r#"{"resourceSpans":7}"#,
            "t.jsonl",
            RecordKind::OtlpJson,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("t.jsonl:1: not an OTLP trace export"), "{e}");
    }
}
