//! The slowest requests, one by one: where each lost its time (gateway, queue, prefill,
//! decode) and what they share that the others do not (a replica, a band of long prompts, a
//! model). A p99 says that a few requests were slow; these say which, and why they may be.

use crate::source::file::requests::{quantile, Request};

/// Fewest requests to speak of a slowest share at all.
const MIN_REQUESTS: usize = 100;

/// At least this many slowest requests are compared with the rest, so that "all of them" is
/// not one request.
const MIN_SLOW: usize = 5;

/// Share of the slow requests a trait must cover to be named.
const SHARED: f64 = 0.8;

/// How many of the slowest are written out one by one.
const SHOWN: usize = 3;

/// A request's whole time: the gateway's where logged, else the engine's end-to-end.
fn whole(r: &Request) -> Option<f64> {
    r.times.gateway.or(r.times.e2e)
}

/// Notes on the slowest 1 % of `requests` (at least five): the three slowest with their time
/// split, and each trait most of them share beyond its share of all. None under 100 timed
/// requests.
pub fn notes(requests: &[&Request]) -> Vec<String> {
    let mut timed: Vec<(&Request, f64)> = requests
        .iter()
        .filter_map(|r| whole(r).map(|t| (*r, t)))
        .collect();
    if timed.len() < MIN_REQUESTS {
        return Vec::new();
    }
    timed.sort_by(|a, b| b.1.total_cmp(&a.1));
    let k = timed.len().div_ceil(100).max(MIN_SLOW);
    let slow: Vec<&Request> = timed[..k].iter().map(|(r, _)| *r).collect();
    let all: Vec<&Request> = timed.iter().map(|(r, _)| *r).collect();
    let mut notes = vec![format!(
        "slowest {k} of {} requests: {}",
        all.len(),
        timed[..SHOWN.min(k)]
            .iter()
            .map(|(r, t)| split(r, *t))
            .collect::<Vec<_>>()
            .join("; ")
    )];
    let shared: Vec<String> = [
        shared_value(&slow, &all, |r| r.replica.clone(), "on replica"),
        shared_value(&slow, &all, |r| r.model.clone(), "for model"),
        long_prompts(&slow, &all),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !shared.is_empty() {
        notes.push(format!("the slowest {k}: {}", shared.join("; ")));
    } else if let Some(compared) = comparable(&all) {
        notes.push(format!(
            "the slowest {k} share no {compared} beyond the others"
        ));
    }
    notes
}

/// The traits the records let one compare ("replica, prompt-length band"), None when none.
fn comparable(all: &[&Request]) -> Option<String> {
    let distinct = |of: &dyn Fn(&Request) -> Option<&str>| {
        let mut v: Vec<&str> = all.iter().filter_map(|r| of(r)).collect();
        v.sort_unstable();
        v.dedup();
        v.len() >= 2
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

/// `id 12.3 s (gateway 0.1 s, queue 9 s, prefill 2 s, decode 1.2 s)`, the parts it records.
fn split(r: &Request, total: f64) -> String {
    let t = &r.times;
    let outside = match (t.gateway, t.e2e) {
        (Some(g), Some(e)) => Some((g - e).max(0.0)),
        _ => None,
    };
    let parts: Vec<String> = [
        ("outside the engine", outside),
        ("queue", t.queue),
        ("prefill", t.prefill),
        ("decode", t.decode),
    ]
    .iter()
    .filter_map(|(name, v)| v.map(|v| format!("{name} {v:.2} s")))
    .collect();
    let mut s = format!("{} {total:.2} s", r.id.as_deref().unwrap_or("(no id)"));
    if !parts.is_empty() {
        s.push_str(&format!(" ({})", parts.join(", ")));
    }
    if let Some(p) = r.prompt_tokens {
        s.push_str(&format!(", {p} prompt tokens"));
    }
    s
}

/// The most common value among the slow requests, when it covers most of them and clearly
/// more of them than of all requests (two values at least among all).
fn shared_value(
    slow: &[&Request],
    all: &[&Request],
    of: impl Fn(&Request) -> Option<String>,
    what: &str,
) -> Option<String> {
    let count =
        |set: &[&Request], v: &str| set.iter().filter(|r| of(r).as_deref() == Some(v)).count();
    let mut values: Vec<String> = all.iter().filter_map(|r| of(r)).collect();
    values.sort();
    values.dedup();
    if values.len() < 2 {
        return None;
    }
    let (top, n) = values
        .iter()
        .map(|v| (v, count(slow, v)))
        .max_by_key(|(_, n)| *n)?;
    let in_slow = n as f64 / slow.len() as f64;
    let in_all = count(all, top) as f64 / all.len() as f64;
    (in_slow >= SHARED && in_slow >= in_all + 0.25).then(|| {
        format!(
            "{n} of {} {what} {top}, which served {:.0} % of all",
            slow.len(),
            100.0 * in_all
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

    fn request(i: usize, replica: &str, prompt: u64, e2e: f64) -> Request {
        Request {
            id: Some(format!("r{i}")),
            replica: Some(replica.into()),
            prompt_tokens: Some(prompt),
            times: Times {
                e2e: Some(e2e),
                queue: Some(e2e / 2.0),
                ..Times::default()
            },
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
                    300 + (i as u64 % 50),
                    2.0,
                )
            })
            .collect();
        for (n, i) in [1usize, 3, 5, 7, 9, 11].iter().enumerate() {
            rs[*i] = request(*i, "b", 4000, 20.0 + n as f64);
        }
        let refs: Vec<&Request> = rs.iter().collect();
        let notes = notes(&refs);
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
        let n = notes(&refs);
        assert!(
            n[1].contains("share no replica, prompt-length band beyond"),
            "{n:?}"
        );
        assert!(notes(&refs[..99]).is_empty());
    }
}
