//! The live-HTTP pieces every network path shares (scrapes, a Prometheus API, `serve` and its
//! sinks): one client builder, one header map, one error chain, one stop signal, and the one
//! place that builds Tokio runtimes.

use std::path::Path;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

/// What can go wrong before a request is sent. Each message quotes the input at fault.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The CA file could not be read.
    #[error("reading the CA file `{path}`: {detail}")]
    CaFileUnreadable {
        /// The file as given.
        path: String,
        /// The system's reason.
        detail: String,
    },
    /// The CA file holds something that is not a PEM certificate.
    #[error("the CA file `{path}` holds no usable PEM certificate: {detail}")]
    CaFileUnusable {
        /// The file as given.
        path: String,
        /// The TLS library's reason.
        detail: String,
    },
    /// The CA file holds no certificate at all.
    #[error("the CA file `{path}` holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)")]
    CaFileEmpty {
        /// The file as given.
        path: String,
    },
    /// The client itself could not be built.
    #[error("cannot set up the HTTP client: {0}")]
    Client(String),
    /// A header name that HTTP does not allow.
    #[error("invalid header name {0:?}")]
    HeaderName(String),
    /// A header value that HTTP does not allow (the value is not quoted: it may be a secret).
    #[error("invalid value for header `{0}`")]
    HeaderValue(String),
    /// The runtime could not start, or was asked for from inside another.
    #[error("cannot start the {what} runtime: {detail}")]
    Runtime {
        /// `HTTP` or `server`.
        what: &'static str,
        /// Why.
        detail: String,
    },
}

/// Which certificates a client trusts.
#[derive(Debug, Clone, Copy, Default)]
pub enum Trust<'a> {
    /// None: for plain-HTTP URLs only. The platform verifier loads the system's CA
    /// certificates when the client is built, which costs time and fails on hosts without any.
    #[default]
    PlainHttpOnly,
    /// The system's CA certificates.
    System,
    /// This PEM file's certificates alone (a private CA).
    CaFile(&'a Path),
}

impl Trust<'_> {
    /// The system's certificates when some URL is https, none otherwise.
    pub fn for_https(any_https: bool) -> Trust<'static> {
        if any_https {
            Trust::System
        } else {
            Trust::PlainHttpOnly
        }
    }
}

/// The HTTP client: HTTP/1.1 over rustls on ring, no proxy from the environment, llm-doctor's
/// user agent, trusting what `trust` says. Timeouts and credentials are per request.
pub fn client(trust: Trust<'_>) -> Result<reqwest::Client, HttpError> {
    // Another part of the process may have installed a provider already; either is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = reqwest::Client::builder()
        .no_proxy()
        .user_agent(concat!("llm-doctor/", env!("CARGO_PKG_VERSION")));
    let builder = match trust {
        Trust::PlainHttpOnly => builder.tls_certs_only([]),
        Trust::System => builder,
        Trust::CaFile(path) => {
            let shown = path.display().to_string();
            let pem = std::fs::read(path).map_err(|e| HttpError::CaFileUnreadable {
                path: shown.clone(),
                detail: e.to_string(),
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                HttpError::CaFileUnusable {
                    path: shown.clone(),
                    detail: error_chain(&e),
                }
            })?;
            if certs.is_empty() {
                return Err(HttpError::CaFileEmpty { path: shown });
            }
            builder.tls_certs_only(certs)
        }
    };
    builder
        .build()
        .map_err(|e| HttpError::Client(error_chain(&e)))
}

/// `Name: value` pairs as request headers, names and values trimmed.
pub fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, HttpError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let n = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| HttpError::HeaderName(name.clone()))?;
        let v = HeaderValue::from_str(value.trim())
            .map_err(|_| HttpError::HeaderValue(name.clone()))?;
        map.append(n, v);
    }
    Ok(map)
}

/// All messages of an error chain, `a: b: c`, a message equal to the one before left out.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(next) = cur {
        let msg = next.to_string();
        if parts.last() != Some(&msg) {
            parts.push(msg);
        }
        cur = next.source();
    }
    parts.join(": ")
}

/// A runtime on the calling thread, for a client's requests (a scrape, Prometheus queries).
/// Refused inside another runtime, where blocking on it would panic.
pub fn client_runtime() -> Result<tokio::runtime::Runtime, HttpError> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(HttpError::Runtime {
            what: "HTTP",
            detail: "called from inside an async runtime".to_string(),
        });
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| HttpError::Runtime {
            what: "HTTP",
            detail: e.to_string(),
        })
}

/// A runtime on every core, for `serve`.
pub fn server_runtime() -> Result<tokio::runtime::Runtime, HttpError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| HttpError::Runtime {
            what: "server",
            detail: e.to_string(),
        })
}

/// SIGINT (Ctrl-C) or, on Unix, SIGTERM: what stops a recording, and `serve`.
pub async fn stop_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = interrupt => {}
            () = terminate => {}
        }
    }
    #[cfg(not(unix))]
    interrupt.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_headers_and_ca_files_are_named() {
        let bad = header_map(&[("bad name".into(), "x".into())]).unwrap_err();
        assert_eq!(bad.to_string(), "invalid header name \"bad name\"");
        let bad = header_map(&[("X-Token".into(), "a\nb".into())]).unwrap_err();
        assert_eq!(bad.to_string(), "invalid value for header `X-Token`");
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("ca.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = client(Trust::CaFile(&empty)).unwrap_err().to_string();
        assert!(e.contains("holds no PEM certificate"), "{e}");
        let missing = dir.path().join("nope.pem");
        let e = client(Trust::CaFile(&missing)).unwrap_err().to_string();
        assert!(e.starts_with("reading the CA file `"), "{e}");
    }

    #[test]
    fn a_client_runtime_is_refused_inside_a_runtime() {
        let rt = client_runtime().unwrap();
        let inside = rt.block_on(async { client_runtime().map(|_| ()) });
        assert!(inside
            .unwrap_err()
            .to_string()
            .contains("inside an async runtime"));
    }
}
