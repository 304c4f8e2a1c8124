//! Two `llm-doctor serve` receivers behind one address, with a real Alertmanager and a real
//! Prometheus (for the diagnoses): a small load balancer in the test hands each notification
//! to one receiver, round robin, and for every third loses the receiver's answer (502), so
//! Alertmanager resends it, and the balancer hands each resend to the other receiver. With
//! `peers:`, every alert reaches the sink exactly once, diagnosed; without, the resends are
//! delivered twice (which shows the test can tell).

use std::collections::{BTreeMap, HashMap};
use std::net::TcpListener as StdListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Router;
use serde_json::{json, Value};

use crate::prom::{end_recording_at, fixture_text, now_ms, Alertmanager, Prometheus};
use crate::serve_e2e::{alerts_of, client, rfc3339, runtime, wait_for, Serve, Sink};

/// What the balancer did.
#[derive(Default)]
struct Balanced {
    /// groupKey → the receiver its last attempt went to, and attempts so far.
    groups: HashMap<String, (usize, usize)>,
    /// New groups seen (the round robin's counter).
    new_groups: usize,
    /// First attempts per receiver.
    firsts: [usize; 2],
    /// Answers lost on purpose (Alertmanager resends those).
    lost: usize,
    /// Resends, each handed to the other receiver than the attempt before.
    resends: usize,
}

/// The balancer's state, the receivers' URLs and its client.
type Shared = (Arc<Mutex<Balanced>>, Arc<[String; 2]>, reqwest::Client);

struct Balancer {
    url: String,
    state: Arc<Mutex<Balanced>>,
}

impl Balancer {
    fn start(rt: &tokio::runtime::Runtime, receivers: [String; 2]) -> Balancer {
        let state = Arc::new(Mutex::new(Balanced::default()));
        let shared = (state.clone(), Arc::new(receivers), client());
        let router = Router::new()
            .fallback(
                |State((state, receivers, client)): State<Shared>, body: Bytes| async move {
                    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let key = v["groupKey"].as_str().unwrap_or("").to_string();
                    let (to, lose) = {
                        let mut b = state.lock().unwrap();
                        let seen = b.groups.get(&key).copied();
                        let (to, lose) = match seen {
                            // A resend: to the other receiver.
                            Some((last, _)) => {
                                b.resends += 1;
                                (1 - last, false)
                            }
                            None => {
                                let n = b.new_groups;
                                b.new_groups += 1;
                                b.firsts[n % 2] += 1;
                                (n % 2, n % 3 == 0)
                            }
                        };
                        let attempts = seen.map_or(0, |(_, a)| a) + 1;
                        b.groups.insert(key, (to, attempts));
                        if lose {
                            b.lost += 1;
                        }
                        (to, lose)
                    };
                    let answer = client
                        .post(format!("{}/alertmanager", receivers[to]))
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await;
                    match answer {
                        Ok(r) if !lose => StatusCode::from_u16(r.status().as_u16()).unwrap(),
                        _ => StatusCode::BAD_GATEWAY,
                    }
                },
            )
            .with_state(shared);
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        rt.spawn(async move { axum::serve(listener, router).await });
        Balancer { url, state }
    }
}

/// Alertmanager sending each alert as its own group to the balancer.
fn alertmanager_config(balancer: &str) -> String {
    format!(
        r#"route:
  receiver: llm-doctor
  group_by: ['...']
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 1h
receivers:
  - name: llm-doctor
    webhook_configs:
      - url: {balancer}/alertmanager
        send_resolved: false
        max_alerts: 0
"#
    )
}

/// What one run delivered: per alert `n`, its firing deliveries' diagnoses' top causes.
struct Delivered {
    by_alert: BTreeMap<usize, Vec<String>>,
    lost: usize,
    resends: usize,
    firsts: [usize; 2],
    forwarded: f64,
}

/// Posts `count` alerts through Alertmanager to two receivers behind the balancer, with or
/// without `peers:`, and waits until every alert reached the sink, then a little longer for
/// any second delivery.
fn two_receivers(count: usize, with_peers: bool) -> Delivered {
    let rt = runtime();
    let sink = Sink::start(&rt, 0);
    let end_ms = (now_ms() / 1000 - 5) * 1000;
    let (om, _) = end_recording_at(&fixture_text("kv_cache_exhaustion"), end_ms);
    let prom = Prometheus::start_with(&om);

    let ports: Vec<u16> = (0..2)
        .map(|_| StdListener::bind("127.0.0.1:0").unwrap())
        .collect::<Vec<_>>()
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    let urls: Vec<String> = ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();
    let serves: Vec<Serve> = ports
        .iter()
        .zip(&urls)
        .map(|(port, own)| {
            let peers = if with_peers {
                format!(
                    "peers:\n  urls: [{}]\n  self: {own}\n",
                    urls.join(", ")
                )
            } else {
                String::new()
            };
            Serve::start(
                Path::new(env!("CARGO_BIN_EXE_llm-doctor")),
                *port,
                &format!(
                    "listen: 127.0.0.1:{port}\nprometheus:\n  url: {}\n  timeout: 5s\nsinks:\n  - type: webhook\n    url: {}/hook\n{peers}",
                    prom.url, sink.url
                ),
            )
        })
        .collect();
    let balancer = Balancer::start(&rt, [urls[0].clone(), urls[1].clone()]);
    let am = Alertmanager::start(&alertmanager_config(&balancer.url));

    let starts = now_ms();
    let alerts: Vec<Value> = (0..count)
        .map(|n| {
            json!({
                "labels": {
                    "alertname": "LLMDoctorHighTtft",
                    "llm_doctor_symptom": "high_ttft",
                    "instance": "gpu-node-1:8000",
                    "severity": "warning",
                    "n": n.to_string(),
                },
                "annotations": {"summary": "posted by the test"},
                "startsAt": rfc3339(starts),
                "endsAt": rfc3339(starts + 600_000),
            })
        })
        .collect();
    for chunk in alerts.chunks(200) {
        let posted = am.post_alerts(&json!(chunk));
        assert!(matches!(posted, Ok((200, _))), "{posted:?}");
    }
    let context = || {
        let logs: Vec<String> = serves.iter().map(Serve::log).collect();
        format!("{}\n{}", logs.join("\n"), am.log())
    };
    let by_alert = || {
        let mut by: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (_, a) in alerts_of(&sink.accepted()) {
            let n: usize = a["labels"]["n"].as_str().unwrap().parse().unwrap();
            let top = a["diagnosis"]["causes"][0]["id"]
                .as_str()
                .unwrap_or("none")
                .to_string();
            by.entry(n).or_default().push(top);
        }
        by
    };
    wait_for(
        &format!("all {count} alerts at the sink"),
        Duration::from_secs(180),
        || (by_alert().len() == count).then_some(()),
        context,
    );
    // Every lost answer resent and settled: a second delivery would have arrived by now.
    wait_for(
        "every lost answer resent",
        Duration::from_secs(60),
        || {
            let b = balancer.state.lock().unwrap();
            (b.resends >= b.lost).then_some(())
        },
        context,
    );
    std::thread::sleep(Duration::from_secs(3));
    let forwarded: f64 = serves
        .iter()
        .map(|s| {
            let page = rt
                .block_on(async {
                    client()
                        .get(format!("{}/metrics", s.url))
                        .send()
                        .await?
                        .text()
                        .await
                })
                .unwrap();
            page.lines()
                .filter(|l| l.starts_with("llm_doctor_peer_forwards_total{outcome=\"answered\"}"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        })
        .sum();
    let b = balancer.state.lock().unwrap();
    let delivered = Delivered {
        by_alert: by_alert(),
        lost: b.lost,
        resends: b.resends,
        firsts: b.firsts,
        forwarded,
    };
    drop(b);
    drop(am);
    drop(serves);
    drop(prom);
    drop(rt);
    delivered
}

#[test]
fn two_receivers_with_peers_deliver_each_of_1000_alerts_once_through_resends() {
    let d = two_receivers(1000, true);
    let twice: Vec<(&usize, &Vec<String>)> =
        d.by_alert.iter().filter(|(_, v)| v.len() != 1).collect();
    eprintln!(
        "1000 alerts: {} answers lost and {} resends (each to the other receiver), first attempts {:?}, {} notifications passed to their owner; {} alerts delivered more than once",
        d.lost,
        d.resends,
        d.firsts,
        d.forwarded,
        twice.len()
    );
    assert_eq!(d.by_alert.len(), 1000);
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    // The resends happened, both receivers took first attempts, and notifications were passed on.
    assert!(
        d.lost >= 300 && d.resends >= d.lost,
        "{} lost, {} resends",
        d.lost,
        d.resends
    );
    assert!(d.firsts.iter().all(|&f| f >= 400), "{:?}", d.firsts);
    assert!(d.forwarded >= 400.0, "{} forwarded", d.forwarded);
    // Enrichment holds wherever a notification was handled.
    let wrong: Vec<_> = d
        .by_alert
        .iter()
        .filter(|(_, v)| v[0] != "kv_cache_exhaustion")
        .collect();
    assert!(wrong.is_empty(), "{wrong:?}");
}

#[test]
fn two_receivers_without_peers_deliver_resends_twice() {
    let d = two_receivers(60, false);
    let twice = d.by_alert.values().filter(|v| v.len() > 1).count();
    eprintln!(
        "60 alerts without peers: {} answers lost, {} resends, {twice} alerts delivered twice",
        d.lost, d.resends
    );
    assert!(d.lost >= 15, "{} lost", d.lost);
    // Each lost answer's resend went to the receiver that had not delivered it.
    assert_eq!(twice, d.lost, "{:?}", d.by_alert);
}
