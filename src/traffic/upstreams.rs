//! One upstream against the others behind the same gateway: a gateway balances requests
//! without regard to how fast each upstream answers, so a slow replica (or a slow path to it)
//! shows as the requests sent there taking longer than those sent elsewhere.

use crate::source::file::requests::{quantile, Request, SeenBy};

/// Fewest answered requests an upstream needs before its median is compared.
const MIN_PER_UPSTREAM: usize = 20;

/// The gateway's slowest upstream against the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct Spread {
    /// The slowest upstream, as the gateway names it.
    pub slowest: String,
    /// Its answered requests and their median gateway time.
    pub slow_requests: usize,
    pub slow_median_s: f64,
    /// The other upstreams compared, their answered requests and the median over all of them.
    pub others: usize,
    pub other_requests: usize,
    pub other_median_s: f64,
}

impl Spread {
    /// How many times as long the slowest upstream takes as the others.
    pub fn ratio(&self) -> f64 {
        self.slow_median_s / self.other_median_s.max(1e-3)
    }

    pub fn note(&self) -> String {
        format!(
            "gateway upstreams: {} answered in a median {:.2} s ({} requests), the other {} in {:.2} s ({} requests): {:.1}x",
            self.slowest,
            self.slow_median_s,
            self.slow_requests,
            self.others,
            self.other_median_s,
            self.other_requests,
            self.ratio()
        )
    }
}

/// The slowest upstream of the gateway records in `requests` against the others, each with at
/// least [`MIN_PER_UPSTREAM`] answered requests; None with fewer than two such upstreams.
pub fn measure(requests: &[&Request]) -> Option<Spread> {
    let mut by: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for r in requests {
        if r.seen_by != SeenBy::Gateway || !r.answered() {
            continue;
        }
        if let (Some(up), Some(t)) = (r.replica.as_deref(), r.times().gateway) {
            by.entry(up).or_default().push(t);
        }
    }
    by.retain(|_, v| v.len() >= MIN_PER_UPSTREAM);
    if by.len() < 2 {
        return None;
    }
    let medians: Vec<(&str, f64)> = by
        .iter_mut()
        .filter_map(|(k, v)| quantile(v, 0.5).map(|m| (*k, m)))
        .collect();
    let (slowest, slow_median_s) = medians
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(a.0)))?;
    let mut rest: Vec<f64> = by
        .iter()
        .filter(|(k, _)| **k != slowest)
        .flat_map(|(_, v)| v.iter().copied())
        .collect();
    let other_requests = rest.len();
    Some(Spread {
        slowest: slowest.to_string(),
        slow_requests: by[slowest].len(),
        slow_median_s,
        others: by.len() - 1,
        other_requests,
        other_median_s: quantile(&mut rest, 0.5)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::file::requests::Times;

    fn req(upstream: &str, secs: f64, status: u16) -> Request {
        Request {
            replica: Some(upstream.into()),
            status: Some(status),
            times: Times {
                gateway: Some(secs),
                ..Times::default()
            }
            .into(),
            ..Request::new(SeenBy::Gateway, 1_000)
        }
    }

    fn run(spec: &[(&str, usize, f64)]) -> Option<Spread> {
        let reqs: Vec<Request> = spec
            .iter()
            .flat_map(|(u, n, t)| (0..*n).map(move |i| req(u, t + i as f64 * 0.001, 200)))
            .collect();
        measure(&reqs.iter().collect::<Vec<_>>())
    }

    #[test]
    fn the_slow_upstream_is_named_with_its_ratio() {
        let s = run(&[
            ("a:8000", 50, 1.0),
            ("b:8000", 50, 4.0),
            ("c:8000", 30, 1.2),
        ])
        .unwrap();
        assert_eq!(s.slowest, "b:8000");
        assert_eq!((s.others, s.other_requests), (2, 80));
        assert!((s.ratio() - 4.0 / 1.02).abs() < 0.1, "{}", s.ratio());
        assert!(s.note().contains("b:8000"), "{}", s.note());
    }

    #[test]
    fn one_upstream_or_too_few_requests_compare_nothing() {
        assert_eq!(run(&[("a:8000", 200, 1.0)]), None);
        assert_eq!(run(&[("a:8000", 200, 1.0), ("b:8000", 19, 9.0)]), None);
    }

    #[test]
    fn failed_requests_are_not_timed() {
        let mut reqs: Vec<Request> = (0..30).map(|_| req("a:8000", 1.0, 200)).collect();
        reqs.extend((0..30).map(|_| req("b:8000", 60.0, 504)));
        reqs.extend((0..30).map(|_| req("b:8000", 1.1, 200)));
        let s = measure(&reqs.iter().collect::<Vec<_>>()).unwrap();
        assert!(s.ratio() < 1.2, "{}", s.ratio());
    }
}
