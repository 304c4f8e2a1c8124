//! The accept loop: HTTP/1 connections served by hyper with a deadline on request headers.
//!
//! `axum::serve` gives hyper no timer, so hyper's header deadline never runs there: a client
//! that sends half a header (or nothing) kept its connection, and held up a graceful shutdown,
//! for as long as it liked. Here every connection gets the timer and `header_timeout`; one
//! without complete headers by then is closed. Idle kept-alive connections wait for their next
//! request's headers, so they too close after `header_timeout`.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Serves `router` on `listener` until `shutdown` resolves, then lets each open connection
/// finish its request and waits for all of them. The caller bounds that wait.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    // Dropping `stop` tells connections to finish; each holds a `done` receiver, so
    // `done.closed()` resolves once the last connection is gone.
    let (stop, stopping) = watch::channel(());
    let (done, open) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: pause instead of spinning.
                    tracing::warn!(error = %e, "cannot accept a connection; retrying in 100 ms");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let (mut stopping, open) = (stopping.clone(), open.clone());
        tokio::spawn(async move {
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                // Errors are the client's (reset, header deadline): nothing to do but close.
                _ = conn.as_mut() => return drop(open),
                _ = stopping.changed() => conn.as_mut().graceful_shutdown(),
            }
            let _ = conn.await;
            drop(open);
        });
    }
    drop(listener);
    drop(stop);
    drop(open);
    done.closed().await;
}
