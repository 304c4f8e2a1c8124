//! Across targets: which replicas were hit, when, and whether they share a cause.

use super::model::{Fleet, Hit, TargetPostmortem};

/// The fleet summary of per-target postmortems.
pub fn fleet(targets: &[TargetPostmortem]) -> Fleet {
    fleet_of(targets, targets.len())
}

/// The fleet summary of a fleet of `n` targets of which `targets` were judged in full (the
/// others were healthy in a coarser view).
pub fn fleet_of(targets: &[TargetPostmortem], n: usize) -> Fleet {
    let mut hit: Vec<Hit> = targets
        .iter()
        .filter(|t| !t.incidents.is_empty())
        .map(|t| {
            let longest = t
                .incidents
                .iter()
                .max_by_key(|i| i.end_ms - i.start_ms)
                .expect("non-empty");
            Hit {
                target: t.name(),
                first_ms: t.incidents[0].start_ms,
                unhealthy_ms: t
                    .incidents
                    .iter()
                    .map(|i| i.end_ms - i.start_ms + t.step_ms)
                    .sum(),
                cause: longest.causes.first().map(|c| c.id.clone()),
            }
        })
        .collect();
    hit.sort_by(|a, b| {
        a.first_ms
            .cmp(&b.first_ms)
            .then_with(|| a.target.cmp(&b.target))
    });
    let shared_cause = match hit.first().and_then(|h| h.cause.clone()) {
        Some(c) if hit.len() >= 2 && hit.iter().all(|h| h.cause.as_deref() == Some(&c)) => Some(c),
        _ => None,
    };
    let scope = match (hit.len(), &shared_cause) {
        (0, _) => format!("no target was hit ({n} analysed)"),
        (1, _) if n == 1 => "the target was hit".to_string(),
        (1, _) => format!(
            "one of {n} targets was hit ({}): a problem of that replica or its node, not of the service",
            hit[0].target
        ),
        (k, Some(c)) if k == n => {
            format!("every target ({n}) was hit, all with {c} first: the whole service")
        }
        (k, Some(c)) => format!(
            "{k} of {n} targets were hit, all with {c} first: a cause they share (their model, version, traffic or a common dependency)"
        ),
        (k, None) => {
            let mut causes: Vec<&str> = hit.iter().filter_map(|h| h.cause.as_deref()).collect();
            causes.sort_unstable();
            causes.dedup();
            format!(
                "{k} of {n} targets were hit, with different leading causes ({})",
                causes.join(", ")
            )
        }
    };
    Fleet {
        targets: n,
        hit,
        scope,
        shared_cause,
    }
}
