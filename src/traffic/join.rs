//! Gateway records joined to the engine spans of the same requests: by request id (the engine's
//! id holds the gateway's: vLLM takes its id from the `X-Request-Id` the gateway passes, and may
//! dress it) or trace id, each span once; a record no id joins is joined by time to a span of
//! the same replica no id took (the caller passes one replica's records), the one that ended
//! last before the gateway's end, within [`END_SLACK_MS`].

use crate::source::file::requests::{Request, SeenBy, Times};

/// Each request as completely as its records tell it, all timed the same way: the gateway's
/// records, each completed by the engine span it joins (queue, prefill, decode, tokens).
pub fn whole_records(seen: &[&Request]) -> Vec<Request> {
    let (engine, gateway): (Vec<&Request>, Vec<&Request>) =
        seen.iter().partition(|r| r.seen_by == SeenBy::Engine);
    let joined = join(&gateway, &engine);
    gateway
        .iter()
        .zip(joined)
        .map(|(g, j)| {
            let mut whole = (*g).clone();
            if let Some(e) = j.map(|(i, _)| engine[i]) {
                let gt = g.times();
                whole.times = Times {
                    gateway: gt.gateway,
                    upstream: gt.upstream,
                    upstream_header: gt.upstream_header,
                    ..e.times()
                }
                .into();
                whole.prompt_tokens = e.prompt_tokens;
                whole.output_tokens = e.output_tokens;
                whole.model = g.model.clone().or_else(|| e.model.clone());
                whole.id = e.id.clone().or(whole.id);
            }
            whole
        })
        .collect()
}

/// How long before a gateway's end the engine's span of the same request may end: the gateway
/// logs the request when its last byte is sent, a moment after the engine's last token.
pub const END_SLACK_MS: i64 = 1_000;

/// How a gateway record found its engine span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinedBy {
    /// Its request id or trace id.
    Id,
    /// Its end time: the untaken span that ended last within [`END_SLACK_MS`] before it.
    EndTime,
}

/// Each gateway record's engine span (an index into `engine`): by id first, for every record;
/// then, for the records no id joined, by end time among the spans no id took.
pub fn join(gateway: &[&Request], engine: &[&Request]) -> Vec<Option<(usize, JoinedBy)>> {
    let mut index = SpanIndex::new(engine);
    let mut out: Vec<Option<(usize, JoinedBy)>> = gateway
        .iter()
        .map(|g| index.take(g).map(|i| (i, JoinedBy::Id)))
        .collect();
    let mut free: std::collections::BTreeSet<(i64, usize)> = (0..engine.len())
        .filter(|i| !index.taken.contains(i))
        .map(|i| (engine[i].end_ms, i))
        .collect();
    if free.is_empty() {
        return out;
    }
    let mut order: Vec<usize> = (0..gateway.len()).filter(|&k| out[k].is_none()).collect();
    order.sort_by_key(|&k| gateway[k].end_ms);
    for k in order {
        let g = gateway[k];
        let whole = g.times().gateway;
        // The latest span ending in the slack before the gateway's end that fits in its time.
        let found = free
            .range((g.end_ms - END_SLACK_MS, 0)..=(g.end_ms, usize::MAX))
            .rev()
            .find(|(_, i)| match (engine[*i].times().e2e, whole) {
                (Some(e2e), Some(total)) => e2e <= total + 0.05,
                _ => true,
            })
            .copied();
        if let Some(key) = found {
            free.remove(&key);
            out[k] = Some((key.1, JoinedBy::EndTime));
        }
    }
    out
}

/// Engine spans by request id and trace id, each joined once. An engine may dress the id it was
/// given: vLLM makes `cmpl-<id>-0` of an `X-Request-Id`, so each span is also found by its id
/// without a leading `word-` and a trailing `-digits`, after every exact id.
pub struct SpanIndex {
    by_key: std::collections::HashMap<String, usize>,
    taken: std::collections::HashSet<usize>,
}

impl SpanIndex {
    pub fn new(engine: &[&Request]) -> SpanIndex {
        let mut by_key = std::collections::HashMap::new();
        for (i, e) in engine.iter().enumerate() {
            if let Some(id) = &e.id {
                by_key.entry(format!("id:{id}")).or_insert(i);
            }
            if let Some(t) = &e.trace_id {
                by_key.entry(format!("trace:{t}")).or_insert(i);
            }
        }
        for (i, e) in engine.iter().enumerate() {
            if let Some(id) = &e.id {
                by_key.entry(format!("id:{}", bare(id))).or_insert(i);
            }
        }
        SpanIndex {
            by_key,
            taken: Default::default(),
        }
    }

    /// The span of gateway record `g`, by its id or its trace id, unless another record took it.
    pub fn take(&mut self, g: &Request) -> Option<usize> {
        let by_id =
            g.id.as_ref()
                .and_then(|id| self.by_key.get(&format!("id:{id}")));
        let by_trace = (g.trace_id.as_ref()).and_then(|t| self.by_key.get(&format!("trace:{t}")));
        let i = *by_id.or(by_trace)?;
        self.taken.insert(i).then_some(i)
    }
}

/// `cmpl-abc-0` → `abc`; an id without such dressing is itself.
fn bare(id: &str) -> &str {
    let id = match id.split_once('-') {
        Some((head, rest)) if !head.is_empty() && head.chars().all(|c| c.is_ascii_alphabetic()) => {
            rest
        }
        _ => id,
    };
    match id.rsplit_once('-') {
        Some((rest, tail)) if !tail.is_empty() && tail.chars().all(|c| c.is_ascii_digit()) => rest,
        _ => id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_join_once_by_exact_id_first_then_without_vllms_dressing() {
        assert_eq!(bare("cmpl-0f25-0"), "0f25");
        assert_eq!(bare("chatcmpl-1b4e-2fa1-0"), "1b4e-2fa1");
        assert_eq!(bare("abc"), "abc");
        let span = |id: &str| Request {
            id: Some(id.into()),
            ..Request::new(SeenBy::Engine, 0)
        };
        let gw = |id: &str| Request {
            id: Some(id.into()),
            ..Request::new(SeenBy::Gateway, 0)
        };
        // `x-0`'s bare form is `x`, but a span whose exact id is `x` wins it.
        let spans = [span("cmpl-x-0"), span("x")];
        let refs: Vec<&Request> = spans.iter().collect();
        let mut index = SpanIndex::new(&refs);
        assert_eq!(index.take(&gw("x")), Some(1));
        assert_eq!(index.take(&gw("cmpl-x-0")), Some(0));
        // A reused id joins once.
        assert_eq!(index.take(&gw("x")), None);
    }

    #[test]
    fn records_no_id_joins_go_to_the_span_that_ended_just_before() {
        let at = |seen_by, id: Option<&str>, end_ms: i64, secs: f64| {
            let mut r = Request::new(seen_by, end_ms);
            r.id = id.map(Into::into);
            let mut t = Times::default();
            if seen_by == SeenBy::Gateway {
                t.gateway = Some(secs);
            } else {
                t.e2e = Some(secs);
            }
            r.times = t.into();
            r
        };
        let spans = [
            at(SeenBy::Engine, Some("cmpl-a-0"), 10_000, 2.0),
            at(SeenBy::Engine, None, 10_990, 1.0),
            at(SeenBy::Engine, None, 20_000, 1.0),
            at(SeenBy::Engine, None, 30_000, 9.0),
        ];
        let gateway = [
            // No id: the span that ended 10 ms before, not the one `a` takes by id.
            at(SeenBy::Gateway, None, 11_000, 1.1),
            at(SeenBy::Gateway, Some("a"), 10_005, 2.1),
            // Its span ended 1.5 s before: too far.
            at(SeenBy::Gateway, None, 21_500, 1.2),
            // The span in time is longer than the whole request: not its own.
            at(SeenBy::Gateway, None, 30_010, 1.0),
        ];
        let e: Vec<&Request> = spans.iter().collect();
        let g: Vec<&Request> = gateway.iter().collect();
        assert_eq!(
            join(&g, &e),
            vec![
                Some((1, JoinedBy::EndTime)),
                Some((0, JoinedBy::Id)),
                None,
                None
            ]
        );
    }
}
