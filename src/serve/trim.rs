//! Hands freed heap back to the operating system now and then. glibc keeps the pages a burst
//! freed (the backlog of notifications piled up while a sink was down) as a high-water mark, so
//! serve's resident memory would only ever grow with its worst burst; `malloc_trim` returns the
//! free ones.

use std::time::Duration;

/// How often the heap is trimmed.
pub const EVERY: Duration = Duration::from_secs(30);

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
