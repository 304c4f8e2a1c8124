//! Head-of-line waits, measured request by request from an engine's spans: short requests that
//! sat in the queue while a long prompt was being prefilled. Long and short are relative to the
//! workload's own prompts (four times the median and at most the median), so the measure means
//! the same on a chat service and on a RAG service.

use crate::source::file::requests::{quantile, Request};

/// Fewest short requests to give a share of.
const MIN_SHORT: usize = 100;

/// A long prompt is at least this many times the median prompt.
const LONG_TIMES_MEDIAN: f64 = 4.0;

/// A wait shorter than this is a step or two, not a wait behind anything.
const MIN_WAIT_S: f64 = 0.1;

/// Bounds the pairs compared (short × long), so a million spans cost a bounded time.
const MAX_PAIRS: usize = 50_000_000;

/// What the spans show: how many short requests waited behind a long prefill, of how many.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadOfLine {
    /// Short requests (prompt at most the median) with a queue time.
    pub short: usize,
    /// Of those, the ones whose wait overlapped a long prompt's prefill.
    pub blocked: usize,
    /// Their median wait, seconds.
    pub wait_p50_s: f64,
    /// Prompts at least this long count as long.
    pub long_from_tokens: f64,
}

/// The head-of-line measure of `spans` (engine records with start, queue and prefill times and
/// prompt lengths); None when too few records carry them or no prompt is long.
pub fn measure(spans: &[&Request]) -> Option<HeadOfLine> {
    let timed: Vec<(&Request, f64, f64)> = spans
        .iter()
        .filter_map(|r| {
            let start = r.start_ms? as f64 / 1000.0;
            Some((*r, start, r.prompt_tokens? as f64))
        })
        .collect();
    let mut lengths: Vec<f64> = timed.iter().map(|t| t.2).collect();
    let median = quantile(&mut lengths, 0.5)?;
    let long_from = (LONG_TIMES_MEDIAN * median).max(1.0);
    // Each long prompt's prefill, as an interval of wall time.
    let prefills: Vec<(f64, f64)> = timed
        .iter()
        .filter(|t| t.2 >= long_from)
        .filter_map(|(r, start, _)| {
            let from = start + r.times().queue.unwrap_or(0.0);
            Some((from, from + r.times().prefill?))
        })
        .collect();
    let short: Vec<(f64, f64)> = timed
        .iter()
        .filter(|t| t.2 <= median)
        .filter_map(|(r, start, _)| Some((*start, start + r.times().queue?)))
        .collect();
    if short.len() < MIN_SHORT || prefills.is_empty() || short.len() * prefills.len() > MAX_PAIRS {
        return None;
    }
    let mut waits: Vec<f64> = short
        .iter()
        .filter(|(from, to)| to - from >= MIN_WAIT_S)
        .filter(|(from, to)| prefills.iter().any(|(a, b)| a < to && b > from))
        .map(|(from, to)| to - from)
        .collect();
    Some(HeadOfLine {
        short: short.len(),
        blocked: waits.len(),
        wait_p50_s: quantile(&mut waits, 0.5).unwrap_or(0.0),
        long_from_tokens: long_from,
    })
}

impl HeadOfLine {
    /// The share of short requests that waited behind a long prefill.
    pub fn share(&self) -> f64 {
        self.blocked as f64 / self.short as f64
    }

    /// The note that says so.
    pub fn note(&self) -> String {
        format!(
            "head-of-line: {} of {} short requests (prompts at most the median) waited in the queue while a long prompt (at least {:.0} tokens) was prefilling, {:.2} s at the median",
            self.blocked, self.short, self.long_from_tokens, self.wait_p50_s
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::file::requests::{SeenBy, Times};

    fn span(start_s: f64, prompt: u32, queue: f64, prefill: f64) -> Request {
        Request {
            start_ms: Some((start_s * 1000.0) as i64),
            prompt_tokens: Some(prompt),
            times: Times {
                queue: Some(queue),
                prefill: Some(prefill),
                ..Times::default()
            }
            .into(),
            ..Request::new(SeenBy::Engine, 0)
        }
    }

    #[test]
    fn short_requests_queued_during_a_long_prefill_are_counted() {
        // 150 short requests a second apart; a 4,000-token prompt prefilling from 50 s to 60 s;
        // the ten short ones that arrived meanwhile waited for it.
        let mut spans: Vec<Request> = (0..150)
            .map(|i| {
                let t = i as f64;
                let queue = if (50.0..60.0).contains(&t) {
                    60.0 - t
                } else {
                    0.01
                };
                span(t, 200, queue, 0.05)
            })
            .collect();
        spans.push(span(50.0, 4000, 0.0, 10.0));
        let refs: Vec<&Request> = spans.iter().collect();
        let h = measure(&refs).unwrap();
        assert_eq!((h.short, h.blocked), (150, 10));
        assert_eq!(h.long_from_tokens, 800.0);
        assert!(h
            .note()
            .starts_with("head-of-line: 10 of 150 short requests"));
        // Without the long prompt nothing is long: no measure.
        assert_eq!(measure(&refs[..150]), None);
    }
}
