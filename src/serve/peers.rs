//! Several receivers side by side (the replicas of one Deployment behind one Service): every
//! notification has one owner among them, and a receiver that is handed a notification it does
//! not own passes it to the owner, whose answer it returns.
//!
//! Alertmanager resends a notification it got no 2xx for, and the load balancer may hand the
//! resend to another receiver than the first. Each receiver's delivery records
//! ([`super::deliveries`]) know what it delivered; with an owner per notification, every resend
//! reaches the receiver whose records know it, so nothing is delivered twice to a sink that
//! cannot tell (a Slack channel, a plain webhook). The receivers share nothing but each other's
//! address: no store to run, and nothing to give them rights to. A key the sink sees (an
//! idempotency header) would help only sinks that deduplicate by it, which those do not.
//!
//! The owner is chosen by rendezvous hashing: every peer's score is a fixed hash (FNV-1a, the same
//! in every build) of the notification's identity (group key and alerts, as its delivery record
//! is keyed) and the peer's URL, and the highest scores first. A receiver that cannot connect to the
//! owner tries the next, down to itself; a peer that joins or leaves moves only the
//! notifications it owns. A forwarded notification is handled where it lands, never forwarded again.
//!
//! Where a notification can still be delivered twice: its owner delivered it and died before
//! answering (its records died with it; the next peer delivers it again), or the receivers
//! disagree on who the peers are (during a rollout, for as long as their DNS answers differ).

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use tokio::sync::Mutex;

use super::config::{base_url, PeerList, PeerSettings};
use super::metrics::Metrics;
use super::payload::Notification;

/// Marks a notification one receiver passed to another: it is handled where it lands.
pub const FORWARDED_HEADER: &str = "x-llm-doctor-forwarded";

/// The counter of notifications passed to their owner, by outcome.
const FORWARDS: &str = "llm_doctor_peer_forwards_total";

/// How long a DNS answer for the peers is used.
const DNS_TTL: Duration = Duration::from_secs(5);

/// The receivers of the group and how to reach them.
pub struct Peers {
    settings: PeerSettings,
    /// The last DNS answer, and when it came.
    resolved: Mutex<Option<(Instant, Vec<String>)>>,
}

impl Peers {
    /// The group of `settings`.
    pub fn new(settings: PeerSettings) -> Peers {
        Peers {
            settings,
            resolved: Mutex::new(None),
        }
    }

    /// The peers' base URLs, this receiver's among them even when DNS does not list it (yet).
    async fn urls(&self) -> Vec<String> {
        let mut urls = match &self.settings.list {
            PeerList::Urls(urls) => urls.clone(),
            PeerList::Dns { host, port } => self.resolve(host, *port).await,
        };
        if !urls.contains(&self.settings.self_url) {
            urls.push(self.settings.self_url.clone());
        }
        urls
    }

    /// `host`'s addresses as `http://ADDRESS:port`, cached for [`DNS_TTL`]; the last answer
    /// when the name does not resolve now.
    async fn resolve(&self, host: &str, port: u16) -> Vec<String> {
        let mut cached = self.resolved.lock().await;
        if let Some((at, urls)) = cached.as_ref() {
            if at.elapsed() < DNS_TTL {
                return urls.clone();
            }
        }
        match tokio::net::lookup_host((host, port)).await {
            Ok(addrs) => {
                let mut urls: Vec<String> = addrs.map(|a| format!("http://{a}")).collect();
                urls.sort();
                urls.dedup();
                *cached = Some((Instant::now(), urls.clone()));
                urls
            }
            Err(e) => {
                tracing::warn!(host, error = %e, "cannot resolve the peers");
                cached.as_ref().map(|(_, u)| u.clone()).unwrap_or_default()
            }
        }
    }

    /// The receivers that come before this one in `group`'s order: its owner first. Empty
    /// when this receiver owns it, or when the notification was forwarded here (it is handled
    /// where it lands).
    pub async fn ahead(&self, headers: &HeaderMap, group: &Notification) -> Vec<String> {
        if headers.contains_key(FORWARDED_HEADER) {
            return Vec::new();
        }
        order(&group.identity(), &self.urls().await)
            .into_iter()
            .take_while(|p| *p != self.settings.self_url)
            .collect()
    }

    /// Hands `body` to the first of `ahead` that can be reached and returns its answer; None
    /// when none can (this receiver then handles it).
    pub async fn forward(
        &self,
        client: &reqwest::Client,
        metrics: &Metrics,
        headers: &HeaderMap,
        body: &Bytes,
        group: &Notification,
        ahead: &[String],
    ) -> Option<Response> {
        for peer in ahead {
            let mut request = client
                .post(format!("{peer}/alertmanager"))
                .timeout(self.settings.timeout)
                .header(header::CONTENT_TYPE, "application/json")
                .header(FORWARDED_HEADER, "1")
                .body(body.clone());
            if let Some(auth) = headers.get(header::AUTHORIZATION) {
                request = request.header(header::AUTHORIZATION, auth.clone());
            }
            match request.send().await {
                Ok(r) => {
                    metrics.inc(FORWARDS, "answered");
                    let status = StatusCode::from_u16(r.status().as_u16())
                        .unwrap_or(StatusCode::BAD_GATEWAY);
                    let text = r.bytes().await.unwrap_or_default();
                    tracing::debug!(group_key = ?group.group_key, peer, %status, "forwarded to its owner");
                    return Some(
                        (status, [(header::CONTENT_TYPE, "application/json")], text)
                            .into_response(),
                    );
                }
                // Down or not there: the next in the order owns it now.
                Err(e) if e.is_connect() => {
                    metrics.inc(FORWARDS, "unreachable");
                    tracing::warn!(group_key = ?group.group_key, peer, error = %e, "owner unreachable; trying the next peer");
                }
                // It may have the notification and be delivering it: answer 503, and the resend
                // goes to it again.
                Err(e) => {
                    metrics.inc(FORWARDS, "no_answer");
                    tracing::warn!(group_key = ?group.group_key, peer, error = %e, "owner did not answer");
                    return Some(
                        (
                            StatusCode::SERVICE_UNAVAILABLE,
                            Json(json!({"error": format!("the receiver owning this notification ({peer}) did not answer: {e}")})),
                        )
                            .into_response(),
                    );
                }
            }
        }
        None
    }
}

/// `peers` by their score for `identity`, highest first (rendezvous hashing).
pub fn order(identity: &str, peers: &[String]) -> Vec<String> {
    let mut scored: Vec<(u64, String)> = peers
        .iter()
        .map(|p| {
            let p = base_url(p);
            (fnv1a(&[identity.as_bytes(), b"\n", p.as_bytes()]), p)
        })
        .collect();
    scored.sort_by(|a, b| b.cmp(a));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().map(|(_, p)| p).collect()
}

/// 64-bit FNV-1a: fixed, so every receiver, whatever its build, computes the same owner.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    // FNV's last bytes move its high bits little; mixed so that the ranking uses them all.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("http://10.0.0.{i}:9095")).collect()
    }

    #[test]
    fn every_peer_computes_the_same_order_whatever_its_list_order() {
        let mut a = urls(3);
        let order_a = order("g\nfp|t|firing", &a);
        a.reverse();
        assert_eq!(order("g\nfp|t|firing", &a), order_a);
        assert_eq!(order_a.len(), 3);
        // A trailing slash is the same peer.
        a.push("http://10.0.0.1:9095/".to_string());
        assert_eq!(order("g\nfp|t|firing", &a), order_a);
    }

    #[test]
    fn owners_spread_evenly_and_a_leaving_peer_moves_only_its_own() {
        let peers = urls(3);
        let mut owned = [0usize; 3];
        let mut moved = 0;
        for i in 0..3000 {
            let id = format!("group-{i}\nfp-{i}|t|firing");
            let owner = order(&id, &peers)[0].clone();
            let k = peers.iter().position(|p| *p == owner).unwrap();
            owned[k] += 1;
            // Without peer 2, only what it owned moves, to its second choice.
            let without = order(&id, &peers[..2])[0].clone();
            if without != owner {
                assert_eq!(k, 2);
                assert_eq!(without, order(&id, &peers)[1]);
                moved += 1;
            }
        }
        assert!(owned.iter().all(|&n| (850..1150).contains(&n)), "{owned:?}");
        assert_eq!(moved, owned[2]);
    }

    #[test]
    fn a_dns_name_gives_its_addresses_and_this_receiver_is_always_one() {
        let peers = Peers::new(PeerSettings {
            list: PeerList::Dns {
                host: "localhost".to_string(),
                port: 9095,
            },
            self_url: "http://10.0.0.7:9095".to_string(),
            timeout: Duration::from_secs(1),
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let urls = rt.block_on(peers.urls());
        assert!(
            urls.contains(&"http://127.0.0.1:9095".to_string()),
            "{urls:?}"
        );
        assert!(
            urls.contains(&"http://10.0.0.7:9095".to_string()),
            "{urls:?}"
        );
    }

    #[test]
    fn the_hash_is_fixed() {
        // Pinned: receivers of different builds must agree (FNV-1a 64 of "llm-doctor", mixed;
        // computed apart, in Python).
        assert_eq!(fnv1a(&[b"llm-doctor"]), 0xfd8a_132e_8516_c60e);
        assert_eq!(fnv1a(&[b"llm-doctor"]), fnv1a(&[b"llm-", b"doctor"]));
    }
}
