//! The slowest requests, one by one: where each lost its time (gateway, queue, prefill,
//! decode) and what they share that the others do not (a replica, a band of long prompts, a
//! model). A p99 says that a few requests were slow; these say which, and why they may be.

use serde::Serialize;

use crate::source::file::requests::{quantile, Request};

/// Fewest requests to speak of a slowest share at all.
const MIN_REQUESTS: usize = 100;

/// At least this many slowest requests are compared with the rest, so that "all of them" is
/// not one request.
const MIN_SLOW: usize = 5;

/// Share of the slow requests a trait must cover to be named.
const SHARED: f64 = 0.8;

/// How many of the slowest are written out one by one in the notes.
const SHOWN: usize = 3;

/// How many of the slowest a report lists with their split.
const LISTED: usize = 10;

/// The slowest 1 % of the requests read (at least five), and what most of them share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Slowest {
    /// Requests compared: those with a whole time.
    pub requests: usize,
    /// How many count as the slowest.
    pub slow: usize,
    /// The slowest first, at most ten, each with its time split.
    pub listed: Vec<SlowRequest>,
    /// Traits most of the slowest share beyond their share of all, in words.
    pub shared: Vec<String>,
    /// The traits the records let one compare, when none is shared ("replica, model").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compared: Option<String>,
}

/// One slow request and where its time went, seconds; a part is absent where no record
/// timed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlowRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// When it ended, Unix milliseconds.
    pub end_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The gateway's whole time where logged, else the engine's end-to-end.
    pub total_seconds: f64,
    /// The gateway's time less the engine's end-to-end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outside_engine_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
}

/// The columns of a table of slow requests (times in seconds).
pub const COLUMNS: [&str; 9] = [
    "request",
    "ended",
    "replica",
    "total s",
    "outside the engine s",
    "queue s",
    "prefill s",
    "decode s",
    "prompt tokens",
];

impl SlowRequest {
    /// Its row under [`COLUMNS`], empty where a part was not timed.
    pub fn cells(&self) -> [String; 9] {
        let secs = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.2}"));
        [
            self.id.clone().unwrap_or_else(|| "(no id)".into()),
            crate::time::format_time(self.end_ms),
            self.replica.clone().unwrap_or_default(),
            format!("{:.2}", self.total_seconds),
            secs(self.outside_engine_seconds),
            secs(self.queue_seconds),
            secs(self.prefill_seconds),
            secs(self.decode_seconds),
            self.prompt_tokens
                .map_or_else(String::new, |p| p.to_string()),
        ]
    }

    pub fn of(r: &Request, total: f64) -> SlowRequest {
        let t = r.times();
        SlowRequest {
            id: r.id.as_deref().map(String::from),
            end_ms: r.end_ms,
            replica: r.replica.as_deref().map(String::from),
            status: r.status,
            total_seconds: total,
            outside_engine_seconds: match (t.gateway, t.e2e) {
                (Some(g), Some(e)) => Some((g - e).max(0.0)),
                _ => None,
            },
            queue_seconds: t.queue,
            prefill_seconds: t.prefill,
            decode_seconds: t.decode,
            prompt_tokens: r.prompt_tokens.map(u64::from),
            output_tokens: r.output_tokens.map(u64::from),
        }
    }

    /// `id 12.3 s (outside the engine 0.1 s, queue 9 s, prefill 2 s, decode 1.2 s)`, the
    /// parts it records.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = [
            ("outside the engine", self.outside_engine_seconds),
            ("queue", self.queue_seconds),
            ("prefill", self.prefill_seconds),
            ("decode", self.decode_seconds),
        ]
        .iter()
        .filter_map(|(name, v)| v.map(|v| format!("{name} {v:.2} s")))
        .collect();
        let mut s = format!(
            "{} {:.2} s",
            self.id.as_deref().unwrap_or("(no id)"),
            self.total_seconds
        );
        if !parts.is_empty() {
            s.push_str(&format!(" ({})", parts.join(", ")));
        }
        if let Some(p) = self.prompt_tokens {
            s.push_str(&format!(", {p} prompt tokens"));
        }
        s
    }
}

impl Slowest {
    /// The notes a diagnosis shows: the three slowest with their split, then what they share.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = vec![format!(
            "slowest {} of {} requests: {}",
            self.slow,
            self.requests,
            self.listed
                .iter()
                .take(SHOWN)
                .map(SlowRequest::describe)
                .collect::<Vec<_>>()
                .join("; ")
        )];
        if !self.shared.is_empty() {
            notes.push(format!(
                "the slowest {}: {}",
                self.slow,
                self.shared.join("; ")
            ));
        } else if let Some(compared) = &self.compared {
            notes.push(format!(
                "the slowest {} share no {compared} beyond the others",
                self.slow
            ));
        }
        notes
    }
}

/// A request's whole time: the gateway's where logged, else the engine's end-to-end.
pub fn whole(r: &Request) -> Option<f64> {
    let t = r.times();
    t.gateway.or(t.e2e)
}

/// The slowest 1 % of `requests` (at least five) and what most of them share beyond their
/// share of all; None under 100 timed requests.
pub fn measure(requests: &[&Request]) -> Option<Slowest> {
    let mut timed: Vec<(&Request, f64)> = requests
        .iter()
        .filter_map(|r| whole(r).map(|t| (*r, t)))
        .collect();
    if timed.len() < MIN_REQUESTS {
        return None;
    }
    // The slowest k first; the rest need no order.
    let k = timed.len().div_ceil(100).max(MIN_SLOW);
    timed.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
    timed[..k].sort_by(|a, b| b.1.total_cmp(&a.1));
    let slow: Vec<&Request> = timed[..k].iter().map(|(r, _)| *r).collect();
    let all: Vec<&Request> = timed.iter().map(|(r, _)| *r).collect();
    let shared: Vec<String> = [
        shared_value(&slow, &all, |r| r.replica.as_deref(), "on replica"),
        shared_value(&slow, &all, |r| r.model.as_deref(), "for model"),
        long_prompts(&slow, &all),
    ]
    .into_iter()
    .flatten()
    .collect();
    Some(Slowest {
        requests: all.len(),
        slow: k,
        listed: timed[..LISTED.min(k)]
            .iter()
            .map(|(r, t)| SlowRequest::of(r, *t))
            .collect(),
        compared: if shared.is_empty() {
            comparable(&all)
        } else {
            None
        },
        shared,
    })
}

/// The traits the records let one compare ("replica, prompt-length band"), None when none.
fn comparable(all: &[&Request]) -> Option<String> {
    // Two values at least: stops at the second one seen.
    let distinct = |of: &dyn Fn(&Request) -> Option<&str>| {
        let mut values = all.iter().filter_map(|r| of(r));
        values
            .next()
            .is_some_and(|first| values.any(|v| v != first))
    };
    let traits: Vec<&str> = [
        (distinct(&|r| r.replica.as_deref()), "replica"),
        (distinct(&|r| r.model.as_deref()), "model"),
        (
            all.iter().any(|r| r.prompt_tokens.is_some()),
            "prompt-length band",
        ),
    ]
    .into_iter()
    .filter_map(|(can, name)| can.then_some(name))
    .collect();
    (!traits.is_empty()).then(|| traits.join(", "))
}

/// The most common value among the slow requests, when it covers most of them and clearly
/// more of them than of all requests (two values at least among all).
fn shared_value(
    slow: &[&Request],
    all: &[&Request],
    of: impl Fn(&Request) -> Option<&str>,
    what: &str,
) -> Option<String> {
    // Counted without a string per request: a window may hold a million.
    let mut in_all: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in all {
        if let Some(v) = of(r) {
            *in_all.entry(v).or_default() += 1;
        }
    }
    if in_all.len() < 2 {
        return None;
    }
    let mut in_slow: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in slow {
        if let Some(v) = of(r) {
            *in_slow.entry(v).or_default() += 1;
        }
    }
    let (top, n) = in_slow
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(v, n)| (*v, *n))?;
    let share_slow = n as f64 / slow.len() as f64;
    let share_all = in_all.get(top).copied().unwrap_or(0) as f64 / all.len() as f64;
    (share_slow >= SHARED && share_slow >= share_all + 0.25).then(|| {
        format!(
            "{n} of {} {what} {top}, which served {:.0} % of all",
            slow.len(),
            100.0 * share_all
        )
    })
}

/// Whether most slow requests had prompts in the longest quarter of all prompts.
fn long_prompts(slow: &[&Request], all: &[&Request]) -> Option<String> {
    let mut lengths: Vec<f64> = all
        .iter()
        .filter_map(|r| r.prompt_tokens.map(|p| p as f64))
        .collect();
    if lengths.len() < all.len() / 2 {
        return None;
    }
    let q3 = quantile(&mut lengths, 0.75)?;
    let top = lengths.iter().copied().fold(f64::MIN, f64::max);
    if q3 >= top {
        return None;
    }
    let n = slow
        .iter()
        .filter(|r| r.prompt_tokens.is_some_and(|p| p as f64 > q3))
        .count();
    (n as f64 / slow.len() as f64 >= SHARED).then(|| {
        format!(
            "{n} of {} with prompts in the longest quarter (over {q3:.0} tokens)",
            slow.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::file::requests::{SeenBy, Times};

    fn request(i: usize, replica: &str, prompt: u32, e2e: f64) -> Request {
        Request {
            id: Some(format!("r{i}").into()),
            replica: Some(replica.into()),
            prompt_tokens: Some(prompt),
            times: Times {
                e2e: Some(e2e),
                queue: Some(e2e / 2.0),
                ..Times::default()
            }
            .into(),
            ..Request::new(SeenBy::Engine, i as i64)
        }
    }

    #[test]
    fn the_slowest_are_named_with_what_they_share() {
        // 200 requests on two replicas; the six slowest all on b with long prompts.
        let mut rs: Vec<Request> = (0..200)
            .map(|i| {
                request(
                    i,
                    if i % 2 == 0 { "a" } else { "b" },
                    300 + (i as u32 % 50),
                    2.0,
                )
            })
            .collect();
        for (n, i) in [1usize, 3, 5, 7, 9, 11].iter().enumerate() {
            rs[*i] = request(*i, "b", 4000, 20.0 + n as f64);
        }
        let refs: Vec<&Request> = rs.iter().collect();
        let notes = measure(&refs).unwrap().notes();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].starts_with(
                "slowest 5 of 200 requests: r11 25.00 s (queue 12.50 s), 4000 prompt tokens"
            ),
            "{notes:?}"
        );
        assert!(
            notes[1].contains("5 of 5 on replica b, which served 50 % of all"),
            "{notes:?}"
        );
        assert!(
            notes[1].contains("5 of 5 with prompts in the longest quarter"),
            "{notes:?}"
        );
    }

    #[test]
    fn nothing_shared_is_said_so_and_few_requests_say_nothing() {
        let rs: Vec<Request> = (0..120)
            .map(|i| {
                request(
                    i,
                    if i % 2 == 0 { "a" } else { "b" },
                    300,
                    1.0 + i as f64 / 100.0,
                )
            })
            .collect();
        let refs: Vec<&Request> = rs.iter().collect();
        let n = measure(&refs).unwrap().notes();
        assert!(
            n[1].contains("share no replica, prompt-length band beyond"),
            "{n:?}"
        );
        assert!(measure(&refs[..99]).is_none());
    }
}
