//! The requests of a postmortem's range, read from the gateway logs and engine traces given
//! beside the recording: the slowest with where their time went, what they share, and each
//! request's split for the chart ("which requests failed, and when").

use std::path::PathBuf;

use serde::Serialize;

use crate::source::file::requests::{self, RecordKind, Request, SeenBy};
use crate::traffic::slowest::{self, Slowest};

/// At most this many requests are drawn; the slowest when there are more.
pub const MAX_DRAWN: usize = 2_000;

/// What the request records of the range show.
#[derive(Debug, Clone, Serialize)]
pub struct RequestsView {
    /// Records read in the range, by who wrote them.
    pub gateway_records: usize,
    pub engine_records: usize,
    /// Records that ended outside the range (left out).
    pub outside: usize,
    /// Gateway records that answered 5xx, and those the client gave up on (nginx's 499).
    pub failed: usize,
    pub aborted: usize,
    /// The slowest requests, each with its split, and what they share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowest: Option<Slowest>,
    /// The slowest upstream against the others, in words, where the gateway used several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstreams: Option<String>,
    /// Each request's split, oldest first, for the chart (not in the JSON: the records are).
    #[serde(skip)]
    pub drawn: Vec<slowest::SlowRequest>,
    /// Requests not drawn (more than [`MAX_DRAWN`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub not_drawn: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Reads `files` for the requests that ended in `from_ms..=to_ms`: what they show (None when
/// there are none) and, for each file that did not read, why (file and line): the postmortem
/// of the metrics goes on without it.
pub fn view(
    files: &[(PathBuf, RecordKind)],
    from_ms: i64,
    to_ms: i64,
) -> (Option<RequestsView>, Vec<String>) {
    let read = requests::read_paths(files, None, requests::Keep::Ending { from_ms, to_ms });
    let outside = read.outside.iter().map(|(_, n, _)| n).sum();
    if read.requests.is_empty() {
        return (None, read.errors);
    }
    let gateway: Vec<&Request> = read
        .requests
        .iter()
        .filter(|r| r.seen_by == SeenBy::Gateway)
        .collect();
    let engine_records = read.requests.len() - gateway.len();
    // Gateway records completed by the engine spans they join, when both were read; else the
    // records as they are.
    let whole: Option<Vec<Request>> = (!gateway.is_empty() && engine_records > 0).then(|| {
        let all: Vec<&Request> = read.requests.iter().collect();
        crate::traffic::join::whole_records(&all)
    });
    let refs: Vec<&Request> = whole.as_ref().unwrap_or(&read.requests).iter().collect();
    let mut timed: Vec<(&Request, f64)> = refs
        .iter()
        .filter_map(|r| slowest::whole(r).map(|t| (*r, t)))
        .collect();
    // The slowest when there are more than are drawn; their order is the chart's, by time.
    let not_drawn = timed.len().saturating_sub(MAX_DRAWN);
    if not_drawn > 0 {
        timed.select_nth_unstable_by(MAX_DRAWN - 1, |a, b| b.1.total_cmp(&a.1));
        timed.truncate(MAX_DRAWN);
    }
    let mut drawn: Vec<slowest::SlowRequest> = timed
        .iter()
        .map(|(r, t)| slowest::SlowRequest::of(r, *t))
        .collect();
    drawn.sort_by_key(|r| r.end_ms);
    let view = RequestsView {
        gateway_records: gateway.len(),
        engine_records,
        outside,
        failed: gateway.iter().filter(|r| r.server_error()).count(),
        aborted: gateway.iter().filter(|r| r.status == Some(499)).count(),
        slowest: slowest::measure(&refs),
        upstreams: crate::traffic::upstreams::measure(&gateway).map(|s| s.note()),
        drawn,
        not_drawn,
    };
    (Some(view), read.errors)
}

impl RequestsView {
    /// One line on what was read.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "requests in the range: {} gateway records ({} answered 5xx, {} given up by the client), {} engine spans",
            self.gateway_records, self.failed, self.aborted, self.engine_records
        );
        if self.outside > 0 {
            s.push_str(&format!("; {} records ended outside it", self.outside));
        }
        s
    }
}
