//! Hands freed heap back to the operating system now and then. glibc keeps the pages a burst
//! freed (the backlog of notifications piled up while a sink was down) as a high-water mark, so
//! serve's resident memory would only ever grow with its worst burst; `malloc_trim` returns the
//! free ones. It also keeps the number of heaps (arenas) small: see [`limit_arenas`].

use std::time::Duration;

/// How often the heap is trimmed.
pub const EVERY: Duration = Duration::from_secs(30);

/// Heaps glibc may create, unless `MALLOC_ARENA_MAX` says otherwise. Its default is up to 8 per
/// core, and every triage runs on a new thread, so the triages spread over many heaps, each
/// keeping its own high-water of pages that small surviving blocks pin and a trim cannot
/// return. With 2, the 10-minute on_receipt soak peaked at 72.7 MiB instead of 90.0 and ended
/// within 13 % of its 60 s figure (docs/benchmarks-history.md); serve's threads mostly wait on
/// the network, so two heaps are not a point of contention.
pub const ARENAS: i32 = 2;

/// Applies [`ARENAS`]; call before any thread is started.
pub fn limit_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        set_arena_max(ARENAS);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_arena_max(n: i32) {
    // SAFETY: mallopt only sets an allocator parameter; called before other threads run.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, n);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_: i32) {}

/// Trims the heap every [`EVERY`] on a blocking thread, for as long as the runtime runs.
pub fn spawn() {
    tokio::spawn(async {
        let mut tick = tokio::time::interval(EVERY);
        tick.tick().await;
        loop {
            tick.tick().await;
            let _ = tokio::task::spawn_blocking(release).await;
        }
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release() {
    // SAFETY: malloc_trim takes each arena's lock itself and only returns free pages; it is
    // safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators (musl, macOS) return memory on their own terms.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release() {}
