//! An OTLP/HTTP trace receiver: an engine started with `--otlp-traces-endpoint
//! http://ADDR/v1/traces` posts its spans here (protobuf, or OTLP/JSON), and each export is
//! written out as one JSON line, the form `diagnose` reads beside the metrics
//! (`source::file::requests::otlp`). Exports are written as they come, so what was received
//! before a stop is kept.

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use crate::source::file::requests::otlp;

/// Where the exports go and what came so far.
struct Sink {
    out: Box<dyn Write + Send>,
    counts: Received,
}

/// What a receiver took in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// Exports written.
    pub exports: usize,
    /// Request spans among them.
    pub requests: usize,
    /// Posts refused (not an OTLP trace export), answered 400 or 415.
    pub refused: usize,
}

type Shared = Arc<Mutex<Sink>>;

/// Receives on `listener` until `stop` completes, writing each export to `out` as a JSON line;
/// returns what was received. `out` is flushed after every export.
pub async fn receive(
    listener: tokio::net::TcpListener,
    out: Box<dyn Write + Send>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<Received> {
    let sink: Shared = Arc::new(Mutex::new(Sink {
        out,
        counts: Received::default(),
    }));
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .with_state(sink.clone());
    axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await?;
    let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
    s.out.flush()?;
    Ok(s.counts)
}

/// POST /v1/traces: an `ExportTraceServiceRequest` as protobuf or JSON, by its content type.
async fn traces(State(sink): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let kind = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let decoded: Result<ExportTraceServiceRequest, String> = match kind.as_str() {
        "application/x-protobuf" => otlp::decode_protobuf(&body).map_err(|e| e.to_string()),
        "application/json" => serde_json::from_slice(&body).map_err(|e| e.to_string()),
        other => {
            refuse(&sink);
            return (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("content type `{other}`: OTLP/HTTP takes application/x-protobuf or application/json\n"),
            )
                .into_response();
        }
    };
    let export = match decoded {
        Ok(e) => e,
        Err(e) => {
            refuse(&sink);
            return (
                StatusCode::BAD_REQUEST,
                format!("not an OTLP trace export: {e}\n"),
            )
                .into_response();
        }
    };
    let requests = otlp::requests_of(&export).len();
    let line = otlp::to_json_line(&export);
    let written = {
        let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
        let r = writeln!(s.out, "{line}").and_then(|()| s.out.flush());
        if r.is_ok() {
            s.counts.exports += 1;
            s.counts.requests += requests;
        }
        r
    };
    if let Err(e) = written {
        tracing::error!("cannot write the traces: {e}");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cannot write the traces: {e}\n"),
        )
            .into_response();
    }
    // An empty ExportTraceServiceResponse: zero bytes in protobuf, `{}` in JSON.
    if kind == "application/json" {
        ([(header::CONTENT_TYPE, "application/json")], "{}").into_response()
    } else {
        (
            [(header::CONTENT_TYPE, "application/x-protobuf")],
            Vec::new(),
        )
            .into_response()
    }
}

fn refuse(sink: &Shared) {
    sink.lock()
        .unwrap_or_else(|e| e.into_inner())
        .counts
        .refused += 1;
}
