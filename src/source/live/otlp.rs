//! An OTLP/HTTP trace receiver: an engine started with `--otlp-traces-endpoint
//! http://ADDR/v1/traces` posts its spans here (protobuf, or OTLP/JSON), and each export is
//! written out as one JSON line, the form `diagnose` reads beside the metrics
//! (`source::file::requests::otlp`). Exports are written and flushed as they come; the file is
//! finished (a gzip trailer) when the receiver stops.

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

/// A file the exports are written to, finished (a gzip trailer) when the receiver stops.
pub trait Output: Write + Send {
    /// Completes the file; an error says the file is not whole.
    fn finish(self: Box<Self>) -> std::io::Result<()>;
}

impl Output for std::fs::File {
    fn finish(mut self: Box<Self>) -> std::io::Result<()> {
        self.flush()?;
        self.sync_all()
    }
}

impl Output for flate2::write::GzEncoder<std::fs::File> {
    fn finish(self: Box<Self>) -> std::io::Result<()> {
        let file = flate2::write::GzEncoder::finish(*self)?;
        file.sync_all()
    }
}

/// The largest body taken (an export of some thousands of spans is a few megabytes).
const MAX_BODY_BYTES: usize = 64 << 20;

/// Where the exports go and what came so far.
struct Sink {
    out: Option<Box<dyn Output>>,
    counts: Received,
}

/// What a receiver took in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// Exports written.
    pub exports: usize,
    /// Request spans among them.
    pub requests: usize,
    /// Posts refused (not an OTLP trace export, another path), answered 4xx.
    pub refused: usize,
}

type Shared = Arc<Mutex<Sink>>;

/// Receives on `listener` until `stop` completes, writing each export to `out` as a JSON line;
/// returns what was received. `out` is flushed after every export.
pub async fn receive(
    listener: tokio::net::TcpListener,
    out: Box<dyn Output>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<Received> {
    let sink: Shared = Arc::new(Mutex::new(Sink {
        out: Some(out),
        counts: Received::default(),
    }));
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .fallback(elsewhere)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(sink.clone());
    axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await?;
    let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(out) = s.out.take() {
        out.finish()?;
    }
    Ok(s.counts)
}

/// Any other path or method: counted, and told where traces go.
async fn elsewhere(State(sink): State<Shared>) -> Response {
    refuse(&sink);
    (
        StatusCode::NOT_FOUND,
        "this receiver takes OTLP/HTTP traces: POST /v1/traces\n",
    )
        .into_response()
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
    // OTLP exporters may compress (the Collector's otlphttp exporter does by default).
    let gzip = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("gzip"));
    let body = if gzip {
        match gunzip(&body) {
            Ok(plain) => Bytes::from(plain),
            Err((status, why)) => {
                refuse(&sink);
                return (status, why).into_response();
            }
        }
    } else {
        body
    };
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
    let line = match otlp::to_json_line(&export) {
        Ok(line) => line,
        Err(e) => {
            refuse(&sink);
            return (
                StatusCode::BAD_REQUEST,
                format!("the export cannot be written as OTLP/JSON: {e}\n"),
            )
                .into_response();
        }
    };
    let written = {
        let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
        let r = match s.out.as_mut() {
            Some(out) => writeln!(out, "{line}").and_then(|()| out.flush()),
            None => Err(std::io::Error::other("the receiver is stopping")),
        };
        if r.is_ok() {
            s.counts.exports += 1;
            s.counts.requests += requests;
        }
        r
    };
    if let Err(e) = written {
        tracing::error!(error = %e, "cannot write the traces");
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

/// A gzip body, decompressed to at most [`MAX_BODY_BYTES`].
fn gunzip(body: &[u8]) -> Result<Vec<u8>, (StatusCode, String)> {
    use std::io::Read;
    let mut plain = Vec::new();
    let n = flate2::read::MultiGzDecoder::new(body)
        .take(MAX_BODY_BYTES as u64 + 1)
        .read_to_end(&mut plain)
        .map_err(|e| (StatusCode::BAD_REQUEST, format!("not gzip: {e}\n")))?;
    if n > MAX_BODY_BYTES {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body decompresses to more than {MAX_BODY_BYTES} bytes\n"),
        ));
    }
    Ok(plain)
}

fn refuse(sink: &Shared) {
    sink.lock()
        .unwrap_or_else(|e| e.into_inner())
        .counts
        .refused += 1;
}
