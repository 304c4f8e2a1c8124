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
            let shown = crate::report::with_unit("client_e2e_p99_seconds", v);
            note.push_str(&format!(", p99 of the whole request {shown}"));
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use llm_doctor_engine::{Snapshot, Target, Window};

    use super::*;

    fn target(instance: Option<&str>, catalog: &Catalog) -> Prepared {
        let labels: BTreeMap<String, String> = instance
            .map(|i| ("instance".to_string(), i.to_string()))
            .into_iter()
            .collect();
        let mut snapshot = Snapshot::new(
            catalog,
            Target {
                engine: Some("vllm".into()),
                labels,
            },
        );
        snapshot.window = Window {
            end_ms: Some(1_000_000),
            length_ms: Some(300_000),
            lifetime: false,
        };
        Prepared {
            snapshot,
            notes: Vec::new(),
        }
    }

    fn requests(n: usize, upstream: Option<&str>, seconds: f64) -> Vec<Request> {
        (0..n)
            .map(|i| Request {
                id: None,
                end_ms: 900_000 + i as i64,
                status: 200,
                total_s: seconds,
                upstream: upstream.map(str::to_string),
                upstream_s: None,
                upstream_header_s: None,
                retries: 0,
            })
            .collect()
    }

    fn client_e2e(p: &Prepared, catalog: &Catalog) -> Option<f64> {
        p.snapshot
            .signal(catalog, "client_e2e_p99_seconds")
            .map(|s| s.value)
    }

    #[test]
    fn requests_go_to_the_replica_they_were_sent_to() {
        let rules = crate::rules::load_rules(None).unwrap();
        let c = &rules.catalog;
        let mut two = vec![target(Some("a:8000"), c), target(Some("b:8000"), c)];
        let mut log = requests(100, Some("a:8000"), 2.0);
        log.extend(requests(100, Some("b:8000"), 9.0));
        log.extend(requests(5, Some("c:8000"), 1.0));
        let notes = attach(&mut two, &log, c);
        assert_eq!(client_e2e(&two[0], c), Some(2.0));
        assert_eq!(client_e2e(&two[1], c), Some(9.0));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("5 of 205 requests"), "{notes:?}");

        // One replica: requests naming another upstream are not its own.
        let mut one = vec![target(Some("a:8000"), c)];
        let notes = attach(&mut one, &requests(100, Some("b:8000"), 9.0), c);
        assert_eq!(client_e2e(&one[0], c), None);
        assert!(notes[0].starts_with("100 of 100"), "{notes:?}");
        // ...but requests that name none are.
        let mut one = vec![target(Some("a:8000"), c)];
        attach(&mut one, &requests(100, None, 3.0), c);
        assert_eq!(client_e2e(&one[0], c), Some(3.0));
    }

    #[test]
    fn a_p99_needs_a_hundred_answers_in_the_window() {
        let rules = crate::rules::load_rules(None).unwrap();
        let c = &rules.catalog;
        let mut one = vec![target(None, c)];
        attach(&mut one, &requests(99, None, 3.0), c);
        assert_eq!(client_e2e(&one[0], c), None);
        assert!(
            one[0].notes[0].contains("99 answered is too few"),
            "{:?}",
            one[0].notes
        );
        // Outside the window: not counted.
        let mut late = requests(100, None, 3.0);
        for r in &mut late {
            r.end_ms += 200_000;
        }
        let mut one = vec![target(None, c)];
        attach(&mut one, &late, c);
        assert_eq!(client_e2e(&one[0], c), None);
        assert!(
            one[0].notes[0].contains("outside the window"),
            "{:?}",
            one[0].notes
        );
    }
}
