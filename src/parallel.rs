//! Work over independent items on as many threads as the machine has cores, results in order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Fewest targets worth a thread of their own (preparing or judging one takes tens of
/// microseconds).
pub const TARGETS_PER_THREAD: usize = 16;

/// `f(0) .. f(n - 1)` on up to one thread per core (threads take the next index as they
/// finish, so uneven items balance), in index order. Fewer than `min_per_thread` items per
/// thread run on the calling thread alone: a thread costs more than small work saves.
pub fn map_indexed<R: Send>(
    n: usize,
    min_per_thread: usize,
    f: impl Fn(usize) -> R + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |c| c.get())
        .min(n / min_per_thread.max(1))
        .max(1);
    if threads == 1 {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = f(i);
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every index was taken by a thread")
        })
        .collect()
}

/// `f` over each of `items` as [`map_indexed`] does, each item moved into its call.
pub fn map_owned<T: Send, R: Send>(
    items: Vec<T>,
    min_per_thread: usize,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let items: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    map_indexed(items.len(), min_per_thread, |i| {
        let item = items[i]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .expect("each index is taken once");
        f(item)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_index_order_on_any_number_of_threads() {
        for (n, min) in [(0, 1), (1, 1), (7, 1), (1000, 1), (1000, 2000)] {
            let got = map_indexed(n, min, |i| i * i);
            assert_eq!(got, (0..n).map(|i| i * i).collect::<Vec<_>>());
            let owned = map_owned((0..n).map(|i| i.to_string()).collect(), min, |s| s.len());
            assert_eq!(
                owned,
                (0..n).map(|i| i.to_string().len()).collect::<Vec<_>>()
            );
        }
    }
}
