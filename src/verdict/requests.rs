//! Per-request records joined to the targets they went to. A gateway's requests become the
//! client-side signals the playbooks already read (`client_e2e_p99_seconds`): what users waited,
//! measured at the gateway, beside what the engine measured. An engine's own request spans give
//! the latencies its metrics lack (an engine that exports no histogram), and joined to the
//! gateway's records by request id or trace id, each request's time outside the engine.
//!
//! A record goes to the target whose `instance` is its replica; to the only target when the
//! record names no replica or that target names no instance (a recording relabelled by hand).
//! Records that match no target, and gateway records no engine span matches, are counted in a
//! note, never dropped silently.

use llm_doctor_engine::{Catalog, SignalValue};

use crate::prepared::Prepared;
use crate::source::file::requests::{quantile, Request, SeenBy};
use crate::traffic::join::{whole_records, JoinedBy};

/// Fewest requests in a window for a p99 that is not simply the slowest one: below 100 the
/// nearest-rank p99 is the maximum.
const MIN_FOR_P99: usize = 100;

/// What the requests said as a whole, beside the signals they set on each target.
pub struct Attached {
    /// Notes about the requests read (the slowest among them, what could not be matched).
    pub notes: Vec<String>,
    /// The slowest requests of the targets' windows, each with its time split.
    pub slowest: Option<crate::traffic::slowest::Slowest>,
}

/// Sets each target's signals from the requests of its window (a `--signal` the user gave, or
/// a value the metrics hold, wins) and says what the requests show as a whole.
pub fn attach(prepared: &mut [Prepared], requests: &[Request], catalog: &Catalog) -> Attached {
    let instances: Vec<Option<&str>> = prepared
        .iter()
        .map(|p| p.snapshot.target.labels.get("instance").map(String::as_str))
        .collect();
    let target_of = |r: &Request| -> Option<usize> {
        let by_replica = r
            .replica
            .as_deref()
            .and_then(|u| instances.iter().position(|i| *i == Some(u)));
        // A gateway's upstream is an address, as a scrape's instance is: one that matches no
        // target went elsewhere. An engine's `service.instance.id` is whatever id its exporter
        // chose (vLLM's is a random UUID), comparable only where a deployment sets it to the
        // address: with one target, an engine's span is that target's.
        let opaque = r.seen_by == SeenBy::Engine;
        match by_replica {
            Some(i) => Some(i),
            None if prepared.len() == 1
                && (r.replica.is_none() || instances[0].is_none() || opaque) =>
            {
                Some(0)
            }
            None => None,
        }
    };
    let mut matched = vec![Vec::new(); prepared.len()];
    let mut elsewhere = Vec::new();
    let mut lost_engine = 0usize;
    for r in requests {
        match (target_of(r), r.seen_by) {
            (Some(i), _) => matched[i].push(r),
            (None, SeenBy::Gateway) => elsewhere.push(r),
            (None, SeenBy::Engine) => lost_engine += 1,
        }
    }
    let lost_gateway = elsewhere.len();
    let mut seen = Vec::new();
    let mut spreads: Vec<(_, Option<crate::traffic::upstreams::Spread>)> = Vec::new();
    for (p, mine) in prepared.iter_mut().zip(&matched) {
        let (notes, kept) = set_signals(p, mine, catalog);
        p.notes.extend(notes);
        seen.extend(kept);
        // The gateway's whole pool in this window, whichever upstream each request went to:
        // one upstream slower than the rest is the pool's fault, seen from every replica.
        // Measured once per window (a fleet's targets share one), not once per target.
        let window = (p.snapshot.window.end_ms, p.snapshot.window.length_ms);
        let spread = match spreads.iter().find(|(w, _)| *w == window) {
            Some((_, s)) => s.clone(),
            None => {
                let pool: Vec<&Request> = requests
                    .iter()
                    .filter(|r| r.seen_by == SeenBy::Gateway && in_window(p, r))
                    .collect();
                let s = crate::traffic::upstreams::measure(&pool);
                spreads.push((window, s.clone()));
                s
            }
        };
        if let Some(spread) = spread {
            p.notes.push(spread.note());
            let ratio = spread.ratio();
            set_if_absent(
                p,
                catalog,
                "upstream_time_spread_ratio",
                ratio,
                "gateway log",
            );
        }
    }
    // Requests the gateway sent to upstreams read here as no target still count among the
    // slowest: what the slow ones share may be exactly that upstream.
    seen.extend(
        elsewhere
            .iter()
            .copied()
            .filter(|r| prepared.iter().any(|p| in_window(p, r))),
    );
    // Records of one kind are whole as they are (a million gateway lines are not copied); gateway
    // records are completed by the spans they join.
    let both = [SeenBy::Gateway, SeenBy::Engine].map(|by| seen.iter().any(|r| r.seen_by == by));
    let slowest = if both == [true, true] {
        crate::traffic::slowest::measure(&whole_records(&seen).iter().collect::<Vec<_>>())
    } else {
        crate::traffic::slowest::measure(&seen)
    };
    let mut notes = slowest.as_ref().map_or_else(Vec::new, |s| s.notes());
    let of = |by: SeenBy| requests.iter().filter(|r| r.seen_by == by).count();
    if lost_gateway > 0 {
        notes.push(format!(
            "{lost_gateway} of {} requests in the gateway log went to no target read here (their upstream matched no target's instance)",
            of(SeenBy::Gateway)
        ));
    }
    if lost_engine > 0 {
        notes.push(format!(
            "{lost_engine} of {} engine request spans went to no target read here (with several targets a span needs its replica's address as service.instance.id: OTEL_RESOURCE_ATTRIBUTES=service.instance.id=host:port)",
            of(SeenBy::Engine)
        ));
    }
    Attached { notes, slowest }
}

/// The signals of one target from its requests inside its window; notes saying what was read,
/// and those requests.
fn set_signals<'a>(
    p: &mut Prepared,
    requests: &[&'a Request],
    catalog: &Catalog,
) -> (Vec<String>, Vec<&'a Request>) {
    let span = if p.snapshot.window.end_ms.is_some() {
        "in the window"
    } else {
        "in the log (the metrics have no timestamps: the whole log counts)"
    };
    let (in_window, outside): (Vec<&Request>, Vec<&Request>) =
        requests.iter().partition(|r| in_window(p, r));
    let gateway: Vec<&Request> = in_window
        .iter()
        .copied()
        .filter(|r| r.seen_by == SeenBy::Gateway)
        .collect();
    let engine: Vec<&Request> = in_window
        .iter()
        .copied()
        .filter(|r| r.seen_by == SeenBy::Engine)
        .collect();
    let mut notes = Vec::new();
    if in_window.is_empty() && !outside.is_empty() {
        notes.push(format!(
            "the {} request records for this target all fall outside the window",
            outside.len()
        ));
        return (notes, in_window);
    }
    if !gateway.is_empty() {
        notes.push(gateway_note(p, &gateway, span, catalog));
    }
    if !engine.is_empty() {
        notes.push(engine_note(p, &engine, span, catalog));
        if let Some(h) = super::head_of_line::measure(&engine) {
            notes.push(h.note());
            set_if_absent(
                p,
                catalog,
                "head_of_line_share_ratio",
                h.share(),
                "engine spans",
            );
        }
    }
    if !gateway.is_empty() && !engine.is_empty() {
        notes.push(joined_note(p, &gateway, &engine, catalog));
    }
    (notes, in_window)
}

/// Whether `r` ended inside the target's window (every request, when the metrics have no
/// timestamps and so no window).
fn in_window(p: &Prepared, r: &Request) -> bool {
    let w = &p.snapshot.window;
    match (w.end_ms, w.length_ms) {
        (Some(end), Some(len)) => r.end_ms > end - len && r.end_ms <= end,
        _ => true,
    }
}

/// Sets `name` to `value` unless the target already holds it (the user's `--signal`, or the
/// metrics); whether it was set.
fn set_if_absent(
    p: &mut Prepared,
    catalog: &Catalog,
    name: &str,
    value: f64,
    source: &str,
) -> bool {
    p.snapshot.signal(catalog, name).is_none()
        && p.snapshot
            .set_signal(
                catalog,
                name,
                SignalValue {
                    value,
                    stats: None,
                    source: source.to_string(),
                },
            )
            .is_ok()
}

fn gateway_note(p: &mut Prepared, gateway: &[&Request], span: &str, catalog: &Catalog) -> String {
    let mut answered: Vec<f64> = gateway
        .iter()
        .filter(|r| r.answered())
        .filter_map(|r| r.times().gateway)
        .collect();
    let failed = gateway.iter().filter(|r| r.server_error()).count();
    let retried = gateway.iter().filter(|r| r.retries > 0).count();
    let n = answered.len();
    let mut note = format!(
        "gateway log: {} requests {span} ({failed} answered 5xx, {retried} retried upstream)",
        gateway.len()
    );
    match quantile(&mut answered, 0.99) {
        Some(v) if n >= MIN_FOR_P99 => {
            let set = set_if_absent(p, catalog, "client_e2e_p99_seconds", v, "gateway log");
            let shown = crate::report::with_unit("client_e2e_p99_seconds", v);
            note.push_str(&format!(", p99 of the whole request {shown}"));
            if !set {
                note.push_str(" (not used: already known from the metrics or --signal)");
            }
        }
        _ => note.push_str(&format!(
            "; {n} answered is too few for a p99 (at least {MIN_FOR_P99})"
        )),
    }
    // Shares of the requests, for an engine whose metrics count none (llama.cpp counts no
    // errors): 5xx as failed on the server, nginx's 499 (the client closed the connection
    // first) as given up by the client, which is not a server error. Server errors are
    // counted where requests are answered: the gateway also counts those the engine never
    // saw (it was down, restarting or unreachable, and its counters start again from zero),
    // so a larger share there is what users got and replaces the metrics'.
    if gateway.len() >= MIN_FOR_P99 {
        let all = gateway.len() as f64;
        let aborted = gateway.iter().filter(|r| r.status == Some(499)).count();
        let mut used = Vec::new();
        let errors = failed as f64 / all;
        let before = p.snapshot.signal(catalog, "error_ratio");
        match before.map(|v| (v.value, v.source == crate::prepared::GIVEN_SIGNAL)) {
            // Absent: the gateway's share is the only one.
            None if set_if_absent(p, catalog, "error_ratio", errors, "gateway log") => {
                used.push(format!("error_ratio {:.1} %", 100.0 * errors));
            }
            Some((metrics, false)) if errors > metrics => {
                let raised = SignalValue {
                    value: errors,
                    stats: None,
                    source: "gateway log (more server errors than the engine counted)".to_string(),
                };
                if p.snapshot
                    .set_signal(catalog, "error_ratio", raised)
                    .is_ok()
                {
                    used.push(format!(
                        "error_ratio {:.1} % (the engine's metrics counted {:.1} %: requests it never saw failed at the gateway)",
                        100.0 * errors,
                        100.0 * metrics
                    ));
                }
            }
            _ => {}
        }
        if set_if_absent(
            p,
            catalog,
            "abort_ratio",
            aborted as f64 / all,
            "gateway log",
        ) {
            used.push(format!("abort_ratio {:.1} %", 100.0 * aborted as f64 / all));
        }
        if !used.is_empty() {
            note.push_str(&format!("; from it: {}", used.join(", ")));
        }
    }
    note
}

/// Which of a request's times a signal is the p99 of.
type TimeOf = fn(&Request) -> Option<f64>;

/// The engine's own p99s from its spans, for the signals its metrics do not hold.
fn engine_note(p: &mut Prepared, engine: &[&Request], span: &str, catalog: &Catalog) -> String {
    let failed = engine.iter().filter(|r| r.server_error()).count();
    let mut note = format!(
        "engine spans: {} requests {span} ({failed} failed)",
        engine.len()
    );
    let pick: [(&str, TimeOf); 3] = [
        ("ttft_p99_seconds", |r| r.times().ttft),
        ("e2e_p99_seconds", |r| r.times().e2e),
        ("queue_time_p99_seconds", |r| r.times().queue),
    ];
    let mut used = Vec::new();
    let mut kept = Vec::new();
    for (name, of) in pick {
        let mut values: Vec<f64> = engine.iter().filter_map(|r| of(r)).collect();
        let n = values.len();
        let Some(v) = quantile(&mut values, 0.99).filter(|_| n >= MIN_FOR_P99) else {
            continue;
        };
        let shown = crate::report::with_unit(name, v);
        if set_if_absent(p, catalog, name, v, "engine spans") {
            used.push(format!("{name} {shown}"));
        } else {
            kept.push(name);
        }
    }
    if !used.is_empty() {
        note.push_str(&format!("; from them: {}", used.join(", ")));
    }
    if !kept.is_empty() {
        note.push_str(&format!(
            "; {} already known (from the metrics or --signal) and kept",
            kept.join(", ")
        ));
    }
    if used.is_empty() && kept.is_empty() {
        note.push_str(&format!("; too few for a p99 (at least {MIN_FOR_P99})"));
    }
    note
}

/// Gateway records joined to engine spans by request id (the engine's id holds the gateway's:
/// vLLM takes its id from the `X-Request-Id` the gateway passes, and may prefix it) or trace
/// id; each pair's time outside the engine is the gateway's time less the engine's end-to-end.
fn joined_note(
    p: &mut Prepared,
    gateway: &[&Request],
    engine: &[&Request],
    catalog: &Catalog,
) -> String {
    let pairs = crate::traffic::join::join(gateway, engine);
    let mut by_time = 0;
    // A failed request's gateway time is how long the gateway waited for nothing (a 504 after
    // its timeout), not time its answer spent on the way: answered requests only.
    let mut outside: Vec<f64> = gateway
        .iter()
        .zip(&pairs)
        .filter(|(g, _)| !g.server_error())
        .filter_map(|(g, j)| {
            let (i, how) = (*j)?;
            let v = (g.times().gateway? - engine[i].times().e2e?).max(0.0);
            by_time += usize::from(how == JoinedBy::EndTime);
            Some(v)
        })
        .collect();
    let joined = outside.len();
    let mut note = format!(
        "joined by request or trace id: {} of {} gateway requests answered ({} engine spans)",
        joined.saturating_sub(by_time),
        gateway.len(),
        engine.len()
    );
    if by_time > 0 {
        note.push_str(&format!(
            "; {by_time} more by end time (no id joined them: each to the span of this replica that ended last within {} s before the gateway's end)",
            crate::traffic::join::END_SLACK_MS / 1000
        ));
    }
    if let (Some(p50), Some(p99)) = (quantile(&mut outside, 0.5), quantile(&mut outside, 0.99)) {
        note.push_str(&format!(
            "; time outside the engine p50 {p50:.3} s, p99 {p99:.3} s"
        ));
        if joined >= MIN_FOR_P99 {
            let source = "gateway log joined to engine spans";
            set_if_absent(p, catalog, "gateway_time_p99_seconds", p99, source);
        } else {
            note.push_str(&format!(
                " ({joined} joined is too few to judge by, at least {MIN_FOR_P99})"
            ));
        }
    }
    note
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use llm_doctor_engine::{Snapshot, Target, Window};

    use super::*;
    use crate::source::file::requests::Times;

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
                status: Some(200),
                replica: upstream.map(Into::into),
                times: Times {
                    gateway: Some(seconds),
                    ..Times::default()
                }
                .into(),
                ..Request::new(SeenBy::Gateway, 900_000 + i as i64)
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
        let notes = attach(&mut two, &log, c).notes;
        assert_eq!(client_e2e(&two[0], c), Some(2.0));
        assert_eq!(client_e2e(&two[1], c), Some(9.0));
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[2].starts_with("5 of 205 requests"), "{notes:?}");
        // The slow replica behind the same gateway is named by what its requests share.
        assert!(
            notes[1].contains("5 of 5 on replica b:8000, which served 49 % of all"),
            "{notes:?}"
        );

        // The gateway's pool compared upstream by upstream (c:8000 has too few to count): b
        // answers in four and a half times a's time, seen from either replica.
        for p in &two {
            let spread = p
                .snapshot
                .signal(c, "upstream_time_spread_ratio")
                .map(|s| s.value);
            assert!((spread.unwrap() - 4.5).abs() < 0.01, "{spread:?}");
        }
        // One replica: requests naming another upstream are not its own.
        let mut one = vec![target(Some("a:8000"), c)];
        let notes = attach(&mut one, &requests(100, Some("b:8000"), 9.0), c).notes;
        assert_eq!(client_e2e(&one[0], c), None);
        assert!(notes[1].starts_with("100 of 100"), "{notes:?}");
        // They still count among the gateway's slowest.
        assert!(notes[0].starts_with("slowest 5 of 100"), "{notes:?}");
        // ...but requests that name none are.
        let mut one = vec![target(Some("a:8000"), c)];
        attach(&mut one, &requests(100, None, 3.0), c);
        assert_eq!(client_e2e(&one[0], c), Some(3.0));
    }

    /// llama.cpp counts no errors: a gateway's 5xx answers give the error ratio, and the
    /// requests its clients gave up on (499) the abort ratio, never an error.
    #[test]
    fn a_gateway_log_gives_the_shares_an_engine_does_not_count() {
        let rules = crate::rules::load_rules(None).unwrap();
        let c = &rules.catalog;
        let mut log = requests(100, None, 1.0);
        for (i, r) in log.iter_mut().enumerate().take(30) {
            r.status = Some(if i < 20 { 502 } else { 499 });
        }
        let mut one = vec![target(None, c)];
        attach(&mut one, &log, c);
        let share = |name: &str| one[0].snapshot.signal(c, name).map(|s| s.value);
        assert_eq!(share("error_ratio"), Some(0.2));
        assert_eq!(share("abort_ratio"), Some(0.1));
        assert!(
            one[0].notes[0].contains("from it: error_ratio 20.0 %, abort_ratio 10.0 %"),
            "{:?}",
            one[0].notes
        );
    }

    /// A replica that died answered nothing and counted nothing: the gateway's larger share of
    /// server errors replaces the engine's, a smaller one leaves it, and a value the user gave
    /// stays.
    #[test]
    fn the_gateway_counts_the_errors_an_engine_never_saw() {
        let rules = crate::rules::load_rules(None).unwrap();
        let c = &rules.catalog;
        let mut log = requests(100, None, 1.0);
        for r in log.iter_mut().take(30) {
            r.status = Some(502);
        }
        let with = |value: f64, source: &str| {
            let mut t = target(None, c);
            let v = SignalValue {
                value,
                stats: None,
                source: source.to_string(),
            };
            t.snapshot.set_signal(c, "error_ratio", v).unwrap();
            let mut one = vec![t];
            attach(&mut one, &log, c);
            let got = one[0].snapshot.signal(c, "error_ratio").map(|s| s.value);
            (got, one.remove(0).notes)
        };
        let (got, notes) = with(0.0, "");
        assert_eq!(got, Some(0.3));
        assert!(
            notes[0].contains("error_ratio 30.0 % (the engine's metrics counted 0.0 %"),
            "{notes:?}"
        );
        assert_eq!(with(0.5, "").0, Some(0.5));
        assert_eq!(with(0.0, crate::prepared::GIVEN_SIGNAL).0, Some(0.0));
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
