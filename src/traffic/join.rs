//! Gateway records joined to the engine spans of the same requests: by request id (the engine's
//! id holds the gateway's: vLLM takes its id from the `X-Request-Id` the gateway passes, and may
//! dress it) or trace id, each span once.

use crate::source::file::requests::{Request, SeenBy, Times};

/// Each request as completely as its records tell it, all timed the same way: the gateway's
/// records, each completed by the engine span it joins (queue, prefill, decode, tokens).
pub fn whole_records(seen: &[&Request]) -> Vec<Request> {
    let (engine, gateway): (Vec<&Request>, Vec<&Request>) =
        seen.iter().partition(|r| r.seen_by == SeenBy::Engine);
    let mut index = SpanIndex::new(&engine);
    gateway
        .iter()
        .map(|g| {
            let mut whole = (*g).clone();
            if let Some(e) = index.take(g).map(|i| engine[i]) {
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
}
