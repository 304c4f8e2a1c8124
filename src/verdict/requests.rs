//! A gateway's requests joined to the targets they went to, as the client-side signals the
//! playbooks already read (`client_e2e_p99_seconds`): what users waited, measured at the gateway,
//! beside what the engine measured. A request goes to the target whose `instance` is its
//! upstream; to the only target when the request names no upstream or that target names no
//! instance (a recording relabelled by hand). Requests that match no target are counted in a
//! note, never dropped silently.

use llm_doctor_engine::{Catalog, SignalValue};

use crate::prepared::Prepared;
use crate::source::file::requests::{quantile, Request};

/// Fewest answered requests in a window for a p99 that is not simply the slowest one: below 100
/// the nearest-rank p99 is the maximum.
const MIN_FOR_P99: usize = 100;

/// Sets each target's client-side signals from the requests of its window (a `--signal` the
/// user gave wins) and returns notes about the requests as a whole.
pub fn attach(prepared: &mut [Prepared], requests: &[Request], catalog: &Catalog) -> Vec<String> {
    let instances: Vec<Option<&str>> = prepared
        .iter()
        .map(|p| p.snapshot.target.labels.get("instance").map(String::as_str))
        .collect();
    let target_of = |r: &Request| -> Option<usize> {
        let by_upstream = r
            .upstream
            .as_deref()
            .and_then(|u| instances.iter().position(|i| *i == Some(u)));
        match by_upstream {
            Some(i) => Some(i),
            None if prepared.len() == 1 && (r.upstream.is_none() || instances[0].is_none()) => {
                Some(0)
            }
            None => None,
        }
    };
    let mut matched = vec![Vec::new(); prepared.len()];
    let mut unmatched = 0usize;
    for r in requests {
        match target_of(r) {
            Some(i) => matched[i].push(r),
            None => unmatched += 1,
        }
    }
    for (p, mine) in prepared.iter_mut().zip(&matched) {
        if let Some(note) = set_signals(p, mine, catalog) {
            p.notes.push(note);
        }
    }
    let mut notes = Vec::new();
    if unmatched > 0 {
        notes.push(format!(
            "{unmatched} of {} requests in the gateway log went to no target read here (their upstream matched no target's instance)",
            requests.len()
        ));
    }
    notes
}

/// The signals of one target from its requests inside its window; a note saying what was read.
fn set_signals(p: &mut Prepared, requests: &[&Request], catalog: &Catalog) -> Option<String> {
    let w = &p.snapshot.window;
    let span = if w.end_ms.is_some() {
        "in the window"
    } else {
        "in the log (the metrics have no timestamps: the whole log counts)"
    };
    let in_window: Vec<&Request> = requests
        .iter()
        .copied()
        .filter(|r| match (w.end_ms, w.length_ms) {
            (Some(end), Some(len)) => r.end_ms > end - len && r.end_ms <= end,
            _ => true,
        })
        .collect();
    if in_window.is_empty() {
        return (!requests.is_empty()).then(|| {
            format!(
                "the gateway log's {} requests for this target all fall outside the window",
                requests.len()
            )
        });
    }
    let mut answered: Vec<f64> = in_window
        .iter()
        .filter(|r| r.status < 500)
        .map(|r| r.total_s)
        .collect();
    let failed = in_window.iter().filter(|r| r.status >= 500).count();
    let retried = in_window.iter().filter(|r| r.retries > 0).count();
    let n = answered.len();
    let p99 = quantile(&mut answered, 0.99);
    let mut note = format!(
        "gateway log: {} requests {span} ({failed} answered 5xx, {retried} retried upstream)",
        in_window.len()
    );
    match p99 {
        Some(v) if n >= MIN_FOR_P99 => {
            let given = p
                .snapshot
                .signal(catalog, "client_e2e_p99_seconds")
                .is_some();
            let set = !given
                && p.snapshot
                    .set_signal(
                        catalog,
                        "client_e2e_p99_seconds",
                        SignalValue {
                            value: v,
                            stats: None,
                            source: "gateway log".to_string(),
                        },
                    )
                    .is_ok();
            note.push_str(&format!(", p99 of the whole request {}", fmt_s(v)));
            if !set {
                note.push_str(" (not used: client_e2e_p99_seconds was given)");
            }
        }
        _ => note.push_str(&format!(
            "; {n} answered is too few for a p99 (at least {MIN_FOR_P99})"
        )),
    }
    Some(note)
}

fn fmt_s(v: f64) -> String {
    crate::report::with_unit("x_seconds", v)
}
