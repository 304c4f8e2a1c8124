//! `llm-doctor serve` (`llm_doctor::serve`): the handler without a socket (auth, limits, bad
//! payloads, health and metrics pages) through `tower::ServiceExt::oneshot`, then end to end on
//! 127.0.0.1: a real Prometheus over a backfilled fixture, the receiver on a random port, and
//! sinks played by small HTTP servers in the test that can refuse a few deliveries.

use std::net::TcpListener as StdListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Request, StatusCode, Uri};
use axum::Router;
use llm_doctor::serve::{self, config, App};
use serde_json::Value;
use tower::ServiceExt;

use crate::prom::{fixture_text, Prometheus};

/// The reference firing payload (Alertmanager 0.25), pointed at the kv_cache_exhaustion
/// fixture's replica and at the fixture's last sample (2026-12-01T00:10:07Z).
const FIRING: &str = r#"{
  "receiver": "diagnoser",
  "status": "firing",
  "alerts": [
    {
      "status": "firing",
      "labels": {"alertname": "HighTTFT", "instance": "gpu-node-1:8000", "job": "vllm", "severity": "warning"},
      "annotations": {"summary": "p99 TTFT high on gpu-node-1:8000"},
      "startsAt": "2026-12-01T00:10:07Z",
      "endsAt": "0001-01-01T00:00:00Z",
      "generatorURL": "http://127.0.0.1:19092/graph?g0.expr=x",
      "fingerprint": "6c3ca8b93f573832"
    }
  ],
  "groupLabels": {"alertname": "HighTTFT"},
  "commonLabels": {"alertname": "HighTTFT", "instance": "gpu-node-1:8000", "job": "vllm", "severity": "warning"},
  "commonAnnotations": {"summary": "p99 TTFT high on gpu-node-1:8000"},
  "externalURL": "http://127.0.0.1:19093",
  "version": "4",
  "groupKey": "{}:{alertname=\"HighTTFT\"}",
  "truncatedAlerts": 0
}"#;

fn resolved() -> String {
    FIRING
        .replace("\"status\": \"firing\"", "\"status\": \"resolved\"")
        .replace("0001-01-01T00:00:00Z", "2026-12-01T00:20:07Z")
}

fn rules() -> Arc<llm_doctor::rules::Rules> {
    Arc::new(llm_doctor::rules::load_rules(None).unwrap())
}

fn settings(yaml: &str) -> config::Settings {
    let rules = rules();
    let ids = rules.playbook.symptom_ids();
    config::parse(yaml, "test.yaml", &ids).unwrap_or_else(|e| panic!("{e:#}"))
}

fn app(yaml: &str) -> Arc<App> {
    App::new(settings(yaml), rules()).unwrap()
}

/// A URL where nothing listens.
fn closed_url() -> String {
    let l = StdListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn oneshot(router: Router, req: Request<Body>) -> (StatusCode, String) {
    let r = tokio::time::timeout(Duration::from_secs(30), router.oneshot(req))
        .await
        .expect("answered in time")
        .unwrap();
    let status = r.status();
    let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn post(body: &str, auth: Option<&str>) -> Request<Body> {
    let mut b = Request::post("/alertmanager").header("content-type", "application/json");
    if let Some(a) = auth {
        b = b.header("authorization", a);
    }
    b.body(Body::from(body.to_string())).unwrap()
}

fn minimal(extra: &str, prom: &str, sinks: &str) -> String {
    format!(
        "listen: 127.0.0.1:0\nprometheus:\n  url: {prom}\n  timeout: 5s\nsinks:\n{sinks}{extra}"
    )
}

#[test]
fn example_config_parses() {
    let rules = rules();
    let ids = rules.playbook.symptom_ids();
    let path = crate::support::root().join("examples/doctor.yaml");
    let s = config::load(&path, &ids, None).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(s.listen.to_string(), "127.0.0.1:9095");
    assert_eq!(s.sinks.len(), 1);
    assert_eq!(s.sinks[0].url, "http://127.0.0.1:8080/hook");
}

#[test]
fn bad_config_names_file_and_field() {
    let rules = rules();
    let ids = rules.playbook.symptom_ids();
    let e = config::parse(
        "listen: 127.0.0.1:1\nprometheus: {url: 'http://x'}\nsinks: [{type: pager, url: 'http://y'}]\n",
        "doctor.yaml",
        &ids,
    )
    .unwrap_err();
    let e = format!("{e:#}");
    assert!(e.starts_with("doctor.yaml: "), "{e}");
    assert!(e.contains("pager"), "{e}");
}

#[test]
fn auth_limits_and_bad_payloads_without_a_socket() {
    let sinks = "  - type: webhook\n    url: http://127.0.0.1:9/hook\n";
    let yaml = minimal(
        "receiver:\n  bearer_token: s3cret\n  max_body_bytes: 2000\n",
        &closed_url(),
        sinks,
    );
    let app = app(&yaml);
    let rt = runtime();
    rt.block_on(async {
        let r = || serve::router(app.clone());
        let (code, _) = oneshot(r(), post("{}", None)).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED);
        let (code, _) = oneshot(r(), post("{}", Some("Bearer wrong"))).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED);
        let (code, _) = oneshot(r(), post("{}", Some("Basic czNjcmV0"))).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED);
        // Authorized, but the body is not JSON.
        let (code, body) = oneshot(r(), post("{not json", Some("Bearer s3cret"))).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
        // The scheme is case-insensitive (RFC 9110): `bearer` is let in, the token is not.
        let (code, body) = oneshot(r(), post("{not json", Some("bearer s3cret"))).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
        let (code, _) = oneshot(r(), post("{not json", Some("bearer S3CRET"))).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED);
        let (code, body) = oneshot(r(), post("{not json", Some("BEARER  s3cret"))).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.contains("malformed JSON"), "{body}");
        // JSON, but not a webhook payload.
        let (code, body) = oneshot(r(), post(r#"{"version": "4"}"#, Some("Bearer s3cret"))).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.contains("alerts"), "{body}");
        let (code, body) = oneshot(
            r(),
            post(&FIRING.replace("\"4\"", "\"3\""), Some("Bearer s3cret")),
        )
        .await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
        // Too large.
        let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(3000));
        let (code, _) = oneshot(r(), post(&big, Some("Bearer s3cret"))).await;
        assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE);

        let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
        let (code, body) = oneshot(r(), get("/healthz")).await;
        assert_eq!((code, body.as_str()), (StatusCode::OK, "ok\n"));
        // Prometheus is not there.
        let (code, body) = oneshot(r(), get("/readyz")).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        let (code, text) = oneshot(r(), get("/metrics")).await;
        assert_eq!(code, StatusCode::OK);
        for family in [
            "# TYPE llm_doctor_alerts_received_total counter",
            "# TYPE llm_doctor_diagnoses_total counter",
            "# TYPE llm_doctor_sink_failures_total counter",
            "# TYPE llm_doctor_sink_retries_total counter",
            "# TYPE llm_doctor_handling_seconds histogram",
            "llm_doctor_webhook_requests_total{code=\"401\"} 4\n",
            "llm_doctor_webhook_requests_total{code=\"413\"} 1\n",
            "llm_doctor_handling_seconds_count 10\n",
        ] {
            assert!(text.contains(family), "{family} missing:\n{text}");
        }
        // The token never shows.
        assert!(!text.contains("s3cret"));
    });
}

#[test]
fn basic_auth_is_accepted() {
    let yaml = minimal(
        "receiver:\n  basic_auth: {username: am, password: pw}\n",
        &closed_url(),
        "  - type: webhook\n    url: http://127.0.0.1:9/hook\n",
    );
    let app = app(&yaml);
    runtime().block_on(async {
        let (code, _) = oneshot(
            serve::router(app.clone()),
            post("[", Some("Basic YW06cHc=")),
        )
        .await;
        assert_eq!(code, StatusCode::BAD_REQUEST);
        let (code, _) = oneshot(
            serve::router(app.clone()),
            post("[", Some("Basic YW06cHg=")),
        )
        .await;
        assert_eq!(code, StatusCode::UNAUTHORIZED);
    });
}

/// A sink: records what it is sent, refusing (500) the first `fail_first` requests or, with
/// `fail_first == usize::MAX`, all of them until `accept` is set.
#[derive(Clone, Default)]
struct Sink {
    received: Arc<Mutex<Vec<(String, Value)>>>,
    hits: Arc<AtomicUsize>,
    fail_first: Arc<AtomicUsize>,
}

impl Sink {
    async fn start(fail_first: usize) -> (Sink, String) {
        let sink = Sink::default();
        sink.fail_first.store(fail_first, Ordering::SeqCst);
        let router = Router::new()
            .fallback(|State(s): State<Sink>, uri: Uri, body: Bytes| async move {
                let n = s.hits.fetch_add(1, Ordering::SeqCst);
                if n < s.fail_first.load(Ordering::SeqCst) {
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                s.received.lock().unwrap().push((uri.path().to_string(), v));
                StatusCode::OK
            })
            .with_state(sink.clone());
        let url = spawn_server(router).await;
        (sink, url)
    }

    fn received(&self) -> Vec<(String, Value)> {
        self.received.lock().unwrap().clone()
    }
}

async fn spawn_server(router: Router) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, router).await });
    url
}

async fn send(url: &str, body: &str) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(format!("{url}/alertmanager"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[test]
fn firing_alert_is_diagnosed_retried_and_deduplicated() {
    let prom = Prometheus::start_with(&fixture_text("kv_cache_exhaustion"));
    runtime().block_on(async {
        let (hook, hook_url) = Sink::start(2).await;
        let (am, am_url) = Sink::start(0).await;
        let (slack, slack_url) = Sink::start(0).await;
        let yaml = minimal(
            "symptoms:\n  HighTTFT: high_ttft\nretry:\n  initial_backoff: 50ms\n",
            &prom.url,
            &format!("  - type: webhook\n    url: {hook_url}/hook\n  - type: alertmanager\n    url: {am_url}\n  - type: slack\n    url: {slack_url}\n"),
        );
        let app = app(&yaml);
        let url = spawn_server(serve::router(app.clone())).await;

        let (code, body) = send(&url, FIRING).await;
        assert_eq!(code, 200, "{body}");
        let got = hook.received();
        assert_eq!(got.len(), 1, "one notification despite two refusals");
        assert_eq!(hook.hits.load(Ordering::SeqCst), 3);
        let (path, payload) = &got[0];
        assert_eq!(path, "/hook");
        assert_eq!(payload["groupKey"], "{}:{alertname=\"HighTTFT\"}");
        assert_eq!(payload["truncatedAlerts"], 0);
        assert_eq!(payload["receiver"], "diagnoser");
        let d = &payload["alerts"][0]["diagnosis"];
        assert_eq!(d["causes"][0]["id"], "kv_cache_exhaustion", "{d:#}");
        assert_eq!(d["target"]["labels"]["instance"], "gpu-node-1:8000", "{d:#}");
        assert_eq!(d["symptom"], "high_ttft");
        assert_ne!(d["status"], "unavailable");

        let alerts = am.received();
        assert_eq!(alerts.len(), 1);
        assert_eq!(alerts[0].0, "/api/v2/alerts");
        let a = &alerts[0].1[0];
        assert_eq!(a["labels"]["diagnosed"], "true");
        assert_eq!(a["labels"]["alertname"], "HighTTFT");
        assert_eq!(a["annotations"]["llm_doctor_top_cause"], "kv_cache_exhaustion");
        assert!(a["annotations"]["llm_doctor_summary"]
            .as_str()
            .unwrap()
            .contains("kv_cache_exhaustion"));
        assert!(!a["annotations"]["llm_doctor_fix"].as_str().unwrap().is_empty());
        assert_eq!(a["annotations"]["summary"], "p99 TTFT high on gpu-node-1:8000");

        let text = slack.received()[0].1["text"].as_str().unwrap().to_string();
        for part in ["[FIRING] HighTTFT", "symptom: high_ttft", "1. `kv_cache_exhaustion`", "fix: "] {
            assert!(text.contains(part), "{part} missing:\n{text}");
        }
        eprintln!("{text}");

        // Alertmanager resends: nothing is diagnosed or sent again.
        let (code, body) = send(&url, FIRING).await;
        assert_eq!(code, 200, "{body}");
        assert_eq!(hook.received().len(), 1);
        assert_eq!(am.received().len(), 1);
        assert_eq!(slack.received().len(), 1);

        let text = serve::router(app.clone())
            .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
            .await
            .unwrap();
        let text = axum::body::to_bytes(text.into_body(), 1 << 20).await.unwrap();
        let text = String::from_utf8_lossy(&text);
        for line in [
            "llm_doctor_alerts_received_total{status=\"firing\"} 2\n",
            "llm_doctor_diagnoses_total{outcome=\"diagnosed\"} 1\n",
            "llm_doctor_sink_retries_total{sink=\"webhook[0]\"} 2\n",
        ] {
            assert!(text.contains(line), "{line} missing:\n{text}");
        }
        let (code, _) = oneshot(serve::router(app.clone()), Request::get("/readyz").body(Body::empty()).unwrap()).await;
        assert_eq!(code, StatusCode::OK);
    });
}

#[test]
fn prometheus_down_still_delivers_and_resolved_passes_through() {
    runtime().block_on(async {
        let (hook, hook_url) = Sink::start(0).await;
        let (slack, slack_url) = Sink::start(0).await;
        let yaml = minimal(
            "",
            &closed_url(),
            &format!("  - type: webhook\n    url: {hook_url}/hook\n  - type: slack\n    url: {slack_url}/slack\n"),
        );
        let url = spawn_server(serve::router(app(&yaml))).await;
        let (code, body) = send(&url, FIRING).await;
        assert_eq!(code, 200, "{body}");
        let got = hook.received();
        assert_eq!(got.len(), 1);
        let d = &got[0].1["alerts"][0]["diagnosis"];
        assert_eq!(d["status"], "unavailable", "{d:#}");
        assert!(d["reason"].as_str().unwrap().contains("127.0.0.1"), "{d:#}");
        let text = slack.received()[0].1["text"].as_str().unwrap().to_string();
        assert!(text.contains("[FIRING] HighTTFT"), "{text}");
        assert!(text.contains("diagnosis unavailable"), "{text}");

        let (code, body) = send(&url, &resolved()).await;
        assert_eq!(code, 200, "{body}");
        let got = hook.received();
        assert_eq!(got.len(), 2, "a resolved alert is a new notification");
        assert_eq!(got[1].1["alerts"][0]["status"], "resolved");
        assert!(got[1].1["alerts"][0].get("diagnosis").is_none(), "{:#}", got[1].1);
        assert!(slack.received()[1].1["text"].as_str().unwrap().contains("[RESOLVED] HighTTFT"));
    });
}

#[test]
fn failing_sink_gets_503_then_only_it_is_retried() {
    runtime().block_on(async {
        let (good, good_url) = Sink::start(0).await;
        let (bad, bad_url) = Sink::start(usize::MAX).await;
        let yaml = minimal(
            "retry:\n  deadline: 400ms\n  initial_backoff: 50ms\n",
            &closed_url(),
            &format!("  - type: webhook\n    url: {good_url}/a\n  - type: webhook\n    url: {bad_url}/b\n"),
        );
        let url = spawn_server(serve::router(app(&yaml))).await;
        let (code, body) = send(&url, FIRING).await;
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("webhook[1]"), "{body}");
        assert!(bad.hits.load(Ordering::SeqCst) >= 2, "retried within the deadline");
        assert_eq!(good.received().len(), 1);

        bad.fail_first.store(0, Ordering::SeqCst);
        // The failing sink is probed at most once per initial_backoff.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (code, body) = send(&url, FIRING).await;
        assert_eq!(code, 200, "{body}");
        assert_eq!(good.received().len(), 1, "the sink that accepted is not sent it again");
        assert_eq!(bad.received().len(), 1);
        let (code, _) = send(&url, FIRING).await;
        assert_eq!(code, 200);
        assert_eq!(bad.received().len(), 1);
    });
}

/// A sink that is down: concurrent requests do not each retry it until the deadline (one at a
/// time probes it), a request arriving while it is known to be down makes one attempt and no
/// retry, and once it is back the next notification goes through.
#[test]
fn a_sink_known_to_be_down_is_probed_not_hammered() {
    runtime().block_on(async {
        let (bad, bad_url) = Sink::start(usize::MAX).await;
        let yaml = minimal(
            "retry:\n  deadline: 2s\n  initial_backoff: 100ms\n",
            &closed_url(),
            &format!("  - type: webhook\n    url: {bad_url}/b\n"),
        );
        let app = app(&yaml);
        let url = spawn_server(serve::router(app.clone())).await;
        let sends: Vec<_> = (0..20)
            .map(|i| {
                let (url, body) = (url.clone(), fingerprint(i));
                tokio::spawn(async move { send(&url, &body).await })
            })
            .collect();
        let mut refused_at_once = 0;
        for s in sends {
            let (code, body) = s.await.unwrap();
            assert_eq!(code, 503, "{body}");
            refused_at_once += usize::from(body.contains("until a probe succeeds"));
        }
        let hits = bad.hits.load(Ordering::SeqCst);
        // Without the breaker each of the 20 retries about five times within 2 s (~100 hits).
        assert!(hits <= 32, "{hits} attempts for 20 requests");
        assert!(
            refused_at_once >= 15,
            "{refused_at_once} of 20 refused by the breaker"
        );

        tokio::time::sleep(Duration::from_millis(150)).await;
        let before = bad.hits.load(Ordering::SeqCst);
        let (code, body) = send(&url, &fingerprint(100)).await;
        assert_eq!(code, 503, "{body}");
        assert_eq!(
            bad.hits.load(Ordering::SeqCst),
            before + 1,
            "one probe, no retry"
        );
        let failing = |text: &str| {
            text.lines()
                .find_map(|l| {
                    l.strip_prefix("llm_doctor_sink_failing_seconds{sink=\"webhook[0]\"} ")
                })
                .and_then(|v| v.parse::<f64>().ok())
        };
        let text = metrics_text(&app).await;
        assert!(failing(&text).unwrap() > 0.2, "{text}");

        bad.fail_first.store(0, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(150)).await;
        let (code, body) = send(&url, &fingerprint(100)).await;
        assert_eq!(code, 200, "{body}");
        let (code, body) = send(&url, &fingerprint(101)).await;
        assert_eq!(code, 200, "{body}");
        assert_eq!(bad.received().len(), 2);
        assert_eq!(failing(&metrics_text(&app).await), Some(0.0));
    });
}

#[test]
fn busy_server_queues_within_a_bound_then_answers_503() {
    // One slot, and room for waiting bodies of one max_body_bytes (1,500): one request
    // (counted as at least 1 KiB) waits, more are refused at once.
    assert!(FIRING.len() < 1024, "{}", FIRING.len());
    let yaml = minimal(
        "receiver:\n  max_in_flight: 1\n  max_body_bytes: 1500\nretry:\n  deadline: 2s\n  initial_backoff: 100ms\n",
        &closed_url(),
        &format!("  - type: webhook\n    url: {}/hook\n", closed_url()),
    );
    let app = app(&yaml);
    runtime().block_on(async {
        let url = spawn_server(serve::router(app)).await;
        // The first request retries an unreachable sink for about 2 s, holding the slot.
        let first = tokio::spawn({
            let url = url.clone();
            async move { send(&url, FIRING).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut others = tokio::task::JoinSet::new();
        for i in 0..3 {
            let url = url.clone();
            others.spawn(async move {
                let t = std::time::Instant::now();
                let body = FIRING.replace("6c3ca8b93f573832", &format!("other{i:010}"));
                let (code, body) = send(&url, &body).await;
                (code, body, t.elapsed())
            });
        }
        let (mut busy, mut waited) = (0, 0);
        while let Some(r) = others.join_next().await {
            let (code, body, took) = r.unwrap();
            assert_eq!(code, 503, "{body}");
            if body.contains("busy") {
                busy += 1;
                assert!(took < Duration::from_secs(1), "refused after {took:?}");
            } else {
                // It waited for the slot (the first request gives up about 1.5 s in), then
                // met the same unreachable sink, by then known to be down.
                waited += 1;
                assert!(body.contains("did not accept"), "{body}");
                assert!(took > Duration::from_millis(900), "served after {took:?}");
            }
        }
        assert_eq!((busy, waited), (2, 1));
        let (code, _) = first.await.unwrap();
        assert_eq!(code, 503);
    });
}

#[test]
fn credentials_and_sink_paths_never_show_in_answers() {
    let closed = closed_url();
    let prom = closed.replace("http://", "http://ops:pw-s3cret@");
    let sink = format!("{}/services/T000/B000/XSECRETX", closed_url());
    let yaml = minimal(
        "retry:\n  deadline: 200ms\n  initial_backoff: 50ms\n",
        &prom,
        &format!("  - type: webhook\n    url: {sink}\n"),
    );
    let s = settings(&yaml);
    assert_eq!(s.prometheus_url, closed, "the URL keeps no credentials");
    assert_eq!(
        s.prometheus_auth.basic,
        Some(("ops".to_string(), "pw-s3cret".to_string())),
        "they become basic auth"
    );
    runtime().block_on(async {
        let r = || serve::router(app(&yaml));
        let (code, body) = oneshot(r(), Request::get("/readyz").body(Body::empty()).unwrap()).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(!body.contains("s3cret") && !body.contains("ops:"), "{body}");
        let url = spawn_server(r()).await;
        let (code, body) = send(&url, FIRING).await;
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("webhook[0]"), "{body}");
        assert!(
            !body.contains("XSECRETX") && !body.contains("s3cret"),
            "{body}"
        );
    });
    // Both at once is refused rather than guessed.
    let both = minimal(
        "",
        &prom,
        "  - type: webhook\n    url: http://127.0.0.1:9/x\n",
    )
    .replace(
        "  timeout: 5s\n",
        "  timeout: 5s\n  basic_auth:\n    username: a\n    password: b\n",
    );
    let rules = rules();
    let ids = rules.playbook.symptom_ids();
    let e = config::parse(&both, "test.yaml", &ids)
        .unwrap_err()
        .to_string();
    assert!(e.contains("prometheus.url") && !e.contains("s3cret"), "{e}");
}

#[test]
fn the_example_payload_is_what_the_receiver_reads() {
    let body =
        std::fs::read(crate::support::root().join("examples/alertmanager-webhook.json")).unwrap();
    let (_, n) = llm_doctor::serve::payload::parse(&body).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(n.version, "4");
    assert_eq!(n.alerts.len(), 1);
    assert!(n.alerts[0].is_firing());
    assert_eq!(n.alerts[0].labels["alertname"], "HighTTFT");
}

/// Clients that send headers and then trickle the body hold no slot: others are served, and
/// the slow ones get 408 at the deadline.
#[test]
fn slow_bodies_take_no_slot_and_get_408() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    runtime().block_on(async {
        let (sink, sink_url) = Sink::start(0).await;
        let yaml = minimal(
            "receiver:\n  max_in_flight: 2\n  timeout: 1s\n",
            &closed_url(),
            &format!("  - type: webhook\n    url: {sink_url}/hook\n"),
        );
        let url = spawn_server(serve::router(app(&yaml))).await;
        let addr = url.trim_start_matches("http://").to_string();
        let mut slow = Vec::new();
        for _ in 0..4 {
            let mut c = tokio::net::TcpStream::connect(&addr).await.unwrap();
            c.write_all(
                b"POST /alertmanager HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
            )
            .await
            .unwrap();
            slow.push(c);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Four slow clients, two slots: a resolved alert (no triage) is still answered.
        let (code, body) = send(&url, &resolved()).await;
        assert_eq!(code, 200, "{body}");
        assert_eq!(sink.received().len(), 1);
        for mut c in slow {
            let mut answer = String::new();
            tokio::time::timeout(Duration::from_secs(5), c.read_to_string(&mut answer))
                .await
                .expect("answered before 5 s")
                .unwrap();
            assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        }
    });
}

/// `llm-doctor serve` on a free port with `receiver` settings; returns it, its port and its
/// stderr lines after the "is listening" line.
fn start_serve(
    dir: &std::path::Path,
    receiver: &str,
) -> (
    std::process::Child,
    u16,
    std::io::Lines<std::io::BufReader<std::process::ChildStderr>>,
) {
    start_serve_to(dir, receiver, "", &closed_url())
}

/// [`start_serve`] with more settings after `receiver` (`extra`) and a sink at `sink_url`.
fn start_serve_to(
    dir: &std::path::Path,
    receiver: &str,
    extra: &str,
    sink_url: &str,
) -> (
    std::process::Child,
    u16,
    std::io::Lines<std::io::BufReader<std::process::ChildStderr>>,
) {
    let (child, port, _, lines) = start_serve_with(dir, receiver, extra, sink_url, &[]);
    (child, port, lines)
}

/// [`start_serve_to`] with more command-line arguments for `serve` (`--log-format json`); also
/// returns the "is listening" line itself.
fn start_serve_with(
    dir: &std::path::Path,
    receiver: &str,
    extra: &str,
    sink_url: &str,
    args: &[&str],
) -> (
    std::process::Child,
    u16,
    String,
    std::io::Lines<std::io::BufReader<std::process::ChildStderr>>,
) {
    use std::io::BufRead;
    let port = StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = dir.join("doctor.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:{port}\nprometheus:\n  url: {}\nreceiver:\n{receiver}{extra}sinks:\n  - type: webhook\n    url: {sink_url}/hook\n",
            closed_url(),
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_llm-doctor"))
        .arg("serve")
        .args(args)
        .arg("--config")
        .arg(&config)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("is listening"), "{first}");
    (child, port, first, lines)
}

/// Sends SIGTERM and returns how long the process took to exit successfully.
fn terminate(child: &mut std::process::Child) -> Duration {
    let started = std::time::Instant::now();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            panic!("serve still running 15 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit:?}");
    started.elapsed()
}

/// A client that never finishes its request headers cannot hold up a shutdown beyond
/// `receiver.shutdown_timeout`, even when the header deadline is far away.
#[test]
fn sigterm_finishes_within_the_shutdown_timeout_despite_a_half_sent_request() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let (mut child, port, lines) = start_serve(
        dir.path(),
        "  shutdown_timeout: 1s\n  header_timeout: 60s\n",
    );
    let mut half = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    half.write_all(b"POST /alertmanager HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let took = terminate(&mut child);
    // 1 s of grace, and slack for a loaded machine.
    assert!(took < Duration::from_secs(4), "exit took {took:?}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l.contains("were dropped")), "{rest:?}");
    drop(half);
}

/// A connection that sends half a header is closed at `receiver.header_timeout`; a shutdown
/// afterwards has nothing left to wait for.
#[test]
fn half_sent_headers_are_closed_at_the_header_deadline() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let (mut child, port, lines) = start_serve(
        dir.path(),
        "  shutdown_timeout: 30s\n  header_timeout: 500ms\n",
    );
    let mut half = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    half.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let sent = std::time::Instant::now();
    half.write_all(b"POST /alertmanager HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut answer = Vec::new();
    // EOF (or a reset): the server closed it; a read timeout would be an error here.
    match half.read_to_end(&mut answer) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("connection still open after {:?}: {e}", sent.elapsed()),
    }
    let closed_after = sent.elapsed();
    assert!(
        closed_after >= Duration::from_millis(400) && closed_after < Duration::from_secs(3),
        "closed after {closed_after:?}"
    );
    // A complete request is still served on a fresh connection.
    let mut full = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    full.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    full.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    // Well under the 30 s shutdown_timeout: nothing is left open.
    let took = terminate(&mut child);
    assert!(took < Duration::from_secs(3), "exit took {took:?}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        rest.iter()
            .any(|l| l.contains("after finishing the requests")),
        "{rest:?}"
    );
}

/// Triage threads stay bounded when Prometheus accepts and never answers: a request that times
/// out gives up its answer, not its triage slot, so new requests wait instead of starting
/// more threads.
#[test]
fn triage_threads_stay_bounded_when_prometheus_never_answers() {
    // A Prometheus that accepts connections and says nothing.
    let hole = StdListener::bind("127.0.0.1:0").unwrap();
    let hole_url = format!("http://{}", hole.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in hole.incoming().flatten() {
            held.push(c);
        }
    });
    let triage_threads = || {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| t.ok())
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.starts_with("llm-doctor-tria"))
            })
            .count()
    };
    let before = triage_threads();
    runtime().block_on(async {
        let (_sink, sink_url) = Sink::start(0).await;
        let yaml = minimal(
            "receiver:\n  timeout: 1s\n",
            &hole_url,
            &format!("  - type: webhook\n    url: {sink_url}/hook\n"),
        )
        .replace("  timeout: 5s\n", "  timeout: 4s\n");
        let url = spawn_server(serve::router(app(&yaml))).await;
        let mut requests = tokio::task::JoinSet::new();
        for i in 0..20 {
            let body = FIRING
                .replace("gpu-node-1:8000", &format!("gpu-node-{i}:8000"))
                .replace("6c3ca8b93f573832", &format!("fp{i}"));
            let url = url.clone();
            requests.spawn(async move { send(&url, &body).await });
        }
        while let Some(r) = requests.join_next().await {
            let (code, body) = r.unwrap();
            assert_eq!(code, 503, "{body}");
        }
        let running = triage_threads() - before;
        assert!(
            running <= serve::TRIAGE_SLOTS,
            "{running} triage threads for 20 timed-out requests"
        );
    });
}

fn fingerprint(i: usize) -> String {
    FIRING.replace("6c3ca8b93f573832", &format!("queued{i:08}"))
}

async fn metrics_text(app: &Arc<App>) -> String {
    let (_, text) = oneshot(
        serve::router(app.clone()),
        Request::get("/metrics").body(Body::empty()).unwrap(),
    )
    .await;
    text
}

/// `ack: on_receipt`: answered 202 at once while the only sink is down, resends are not queued
/// twice, and once the sink is back the notification is delivered exactly once (a later
/// resend is answered 200 from the dedupe store).
#[test]
fn on_receipt_answers_202_while_the_sink_is_down_then_delivers_once() {
    runtime().block_on(async {
        let (hook, hook_url) = Sink::start(usize::MAX).await;
        let yaml = minimal(
            "receiver:\n  ack: on_receipt\nretry:\n  deadline: 200ms\n  initial_backoff: 20ms\n",
            &closed_url(),
            &format!("  - type: webhook\n    url: {hook_url}/hook\n"),
        );
        let app = app(&yaml);
        let url = spawn_server(serve::router(app.clone())).await;
        let t = std::time::Instant::now();
        let (code, body) = send(&url, FIRING).await;
        let took = t.elapsed();
        assert_eq!(code, 202, "{body}");
        assert!(took < Duration::from_millis(500), "answered after {took:?}");
        // Alertmanager resends while the sink is still down: queued once, not twice.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let (code, body) = send(&url, FIRING).await;
        assert_eq!(code, 202, "{body}");
        assert!(hook.hits.load(Ordering::SeqCst) >= 2, "retried while down");
        let text = metrics_text(&app).await;
        assert!(text.contains("llm_doctor_queue_depth 1\n"), "{text}");
        let oldest = text
            .lines()
            .find_map(|l| l.strip_prefix("llm_doctor_queue_oldest_seconds "))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap();
        assert!(oldest >= 0.3, "{text}");

        hook.fail_first.store(0, Ordering::SeqCst);
        let t = std::time::Instant::now();
        while hook.received().is_empty() {
            assert!(t.elapsed() < Duration::from_secs(10), "never delivered");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let got = hook.received();
        assert_eq!(got[0].1["alerts"][0]["fingerprint"], "6c3ca8b93f573832");
        assert_eq!(got[0].1["alerts"][0]["diagnosis"]["status"], "unavailable");
        let (code, body) = send(&url, FIRING).await;
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("duplicate"), "{body}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(hook.received().len(), 1, "delivered exactly once");
        let text = metrics_text(&app).await;
        assert!(text.contains("llm_doctor_queue_depth 0\n"), "{text}");
        assert!(
            text.contains("llm_doctor_queue_oldest_seconds 0\n"),
            "{text}"
        );
    });
}

/// `ack: on_receipt` with a full queue (counting notifications being delivered): 503 with the
/// reason, and bad input still gets its 4xx.
#[test]
fn on_receipt_full_queue_answers_503_with_a_reason() {
    runtime().block_on(async {
        let (_hook, hook_url) = Sink::start(usize::MAX).await;
        let yaml = minimal(
            "receiver:\n  ack: on_receipt\n  queue_capacity: 2\nretry:\n  deadline: 200ms\n  initial_backoff: 20ms\n",
            &closed_url(),
            &format!("  - type: webhook\n    url: {hook_url}/hook\n"),
        );
        let url = spawn_server(serve::router(app(&yaml))).await;
        for i in 0..2 {
            let (code, body) = send(&url, &fingerprint(i)).await;
            assert_eq!(code, 202, "{body}");
        }
        let (code, body) = send(&url, &fingerprint(2)).await;
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("delivery queue holds 2"), "{body}");
        let (code, body) = send(&url, "{\"version\": \"3\", \"alerts\": []}").await;
        assert_eq!(code, 400, "{body}");
    });
}

/// SIGTERM with notifications queued for a sink that is down: once the sink is back within
/// `shutdown_timeout` they are all delivered before the process exits; with the sink down
/// throughout, the process exits at the timeout and logs what it left undelivered.
#[test]
fn sigterm_drains_the_queue_within_the_shutdown_timeout() {
    let rt = runtime();
    let (hook, hook_url) = rt.block_on(Sink::start(usize::MAX));
    let dir = tempfile::tempdir().unwrap();
    let retry = "retry:\n  deadline: 200ms\n  initial_backoff: 20ms\n";
    let (mut child, port, lines) = start_serve_to(
        dir.path(),
        "  ack: on_receipt\n  shutdown_timeout: 5s\n",
        retry,
        &hook_url,
    );
    let url = format!("http://127.0.0.1:{port}");
    for i in 0..3 {
        let (code, body) = rt.block_on(send(&url, &fingerprint(i)));
        assert_eq!(code, 202, "{body}");
    }
    let sink = hook.clone();
    let back = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        sink.fail_first.store(0, Ordering::SeqCst);
    });
    let took = terminate(&mut child);
    back.join().unwrap();
    assert!(took < Duration::from_secs(5), "exit took {took:?}");
    let mut got: Vec<String> = hook
        .received()
        .iter()
        .map(|(_, v)| v["alerts"][0]["fingerprint"].as_str().unwrap().to_string())
        .collect();
    got.sort();
    assert_eq!(got, ["queued00000000", "queued00000001", "queued00000002"]);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        rest.iter()
            .any(|l| l.contains("every queued notification was delivered")),
        "{rest:?}"
    );

    // The sink never comes back: the exit waits for the timeout and says what was lost.
    hook.fail_first.store(usize::MAX, Ordering::SeqCst);
    hook.hits.store(0, Ordering::SeqCst);
    let (mut child, port, lines) = start_serve_to(
        dir.path(),
        "  ack: on_receipt\n  shutdown_timeout: 1s\n",
        retry,
        &hook_url,
    );
    let url = format!("http://127.0.0.1:{port}");
    let (code, body) = rt.block_on(send(&url, &fingerprint(7)));
    assert_eq!(code, 202, "{body}");
    let took = terminate(&mut child);
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "exit took {took:?}"
    );
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        rest.iter()
            .any(|l| l.contains("undelivered=1") && l.contains("queued00000007")),
        "{rest:?}"
    );
}

#[test]
fn the_log_is_json_lines_with_log_format_json() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, port, first, lines) = start_serve_with(
        dir.path(),
        "  ack: after_delivery\n",
        "",
        &closed_url(),
        &["--log-format", "json"],
    );
    let v: serde_json::Value =
        serde_json::from_str(&first).unwrap_or_else(|e| panic!("{e}: {first}"));
    assert_eq!(v["level"], "INFO", "{first}");
    assert!(
        v["message"].as_str().unwrap().contains("is listening"),
        "{first}"
    );
    assert_eq!(v["listen"], format!("127.0.0.1:{port}"), "{first}");
    assert_eq!(v["sinks"], 1, "{first}");
    // The signal handler is installed once the server runs: wait for an answer first.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        use std::io::{Read, Write};
        if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let mut out = String::new();
            let _ = c.read_to_string(&mut out);
            if out.contains("200 OK") {
                break;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "serve never answered /healthz"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    terminate(&mut child);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        rest.iter()
            .any(|l| l.contains("\"message\":\"shutting down: finishing the requests in flight\"")),
        "{rest:?}"
    );
}

/// `FIRING` with its group key changed to `key`.
fn firing_in_group(key: &str) -> String {
    FIRING.replace(
        "\"groupKey\": \"{}:{alertname=\\\"HighTTFT\\\"}\"",
        &format!("\"groupKey\": \"{key}\""),
    )
}

/// A group key of `FIRING` whose owner among `peers` is `owner`.
fn group_owned_by(owner: &str, peers: &[String]) -> String {
    (0..)
        .map(|i| format!("group-{i}"))
        .find(|key| {
            let (_, group) =
                serve::payload::parse(firing_in_group(key).as_bytes()).expect("payload");
            serve::peers::order(&group.identity(), peers)[0] == owner
        })
        .unwrap()
}

/// A receiver among peers: a notification owned by a peer that cannot be reached is handled
/// here (the next in the order); one forwarded here is handled here, whoever owns it; one this
/// receiver owns is never sent anywhere.
#[test]
fn peers_fall_back_to_the_next_when_the_owner_is_unreachable() {
    runtime().block_on(async {
        let (sink, sink_url) = Sink::start(0).await;
        let down = closed_url();
        let own = "http://this-receiver.invalid:9095".to_string();
        let peers = vec![own.clone(), down.clone()];
        let yaml = minimal(
            &format!("peers:\n  urls: [{own}, {down}]\n  self: {own}\n  timeout: 2s\n"),
            &closed_url(),
            &format!("  - type: webhook\n    url: {sink_url}/hook\n"),
        );
        let app = app(&yaml);
        let r = || serve::router(app.clone());
        let metric = |text: &str, outcome: &str| {
            text.lines()
                .find(|l| {
                    l.starts_with(&format!(
                        "llm_doctor_peer_forwards_total{{outcome=\"{outcome}\"}}"
                    ))
                })
                .map(|l| l.rsplit(' ').next().unwrap().to_string())
                .unwrap_or_default()
        };
        let metrics = || async {
            let get = Request::get("/metrics").body(Body::empty()).unwrap();
            oneshot(r(), get).await.1
        };

        let theirs = firing_in_group(&group_owned_by(&down, &peers));
        let (code, body) = oneshot(r(), post(&theirs, None)).await;
        assert_eq!(code, StatusCode::OK, "{body}");
        assert_eq!(sink.received().len(), 1);
        assert_eq!(metric(&metrics().await, "unreachable"), "1");

        let ours = firing_in_group(&group_owned_by(&own, &peers));
        let (code, body) = oneshot(r(), post(&ours, None)).await;
        assert_eq!(code, StatusCode::OK, "{body}");
        assert_eq!(sink.received().len(), 2);
        assert_eq!(
            metric(&metrics().await, "unreachable"),
            "1",
            "not forwarded"
        );

        // Forwarded by another receiver: handled here, not passed on again.
        let other = firing_in_group(&group_owned_by(&down, &peers).replace("group", "other"));
        let mut forwarded = post(&other, None);
        forwarded.headers_mut().insert(
            serve::peers::FORWARDED_HEADER,
            axum::http::HeaderValue::from_static("1"),
        );
        let (code, body) = oneshot(r(), forwarded).await;
        assert_eq!(code, StatusCode::OK, "{body}");
        assert_eq!(sink.received().len(), 3);
        assert_eq!(
            metric(&metrics().await, "unreachable"),
            "1",
            "not forwarded"
        );
    });
}

#[test]
fn peers_configuration_errors_name_the_field() {
    let rules = rules();
    let ids = rules.playbook.symptom_ids();
    let base = "listen: 127.0.0.1:1\nprometheus: {url: 'http://x'}\nsinks: [{type: webhook, url: 'http://y'}]\n";
    for (peers, problem) in [
        (
            "peers: {urls: ['http://a:1']}",
            "`peers.self`: this receiver's own URL",
        ),
        (
            "peers: {urls: ['http://a:1'], dns: 'a:1', self: 'http://a:1'}",
            "`peers`: give `urls` or `dns`, one of them",
        ),
        (
            "peers: {dns: 'llm-doctor-peers', self: 'http://a:1'}",
            "`peers.dns`: `llm-doctor-peers` is not HOST:PORT",
        ),
        (
            "peers: {urls: ['ftp://a:1'], self: 'http://a:1'}",
            "`peers.urls[0]`: `ftp://a:1`: scheme `ftp`",
        ),
    ] {
        let e = config::parse(&format!("{base}{peers}\n"), "doctor.yaml", &ids).unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains(problem), "{peers}: {e}");
    }
    let ok = config::parse(
        &format!("{base}peers: {{dns: 'llm-doctor-peers.monitoring.svc:9095', self: 'http://10.0.0.7:9095/'}}\n"),
        "doctor.yaml",
        &ids,
    )
    .unwrap();
    let peers = ok.peers.unwrap();
    assert_eq!(peers.self_url, "http://10.0.0.7:9095");
    assert_eq!(
        peers.list,
        config::PeerList::Dns {
            host: "llm-doctor-peers.monitoring.svc".to_string(),
            port: 9095
        }
    );
}

/// `serve --advertise URL` names this receiver among its peers over `peers.self`, and needs
/// `peers:`.
#[test]
fn advertise_sets_this_receivers_url_among_its_peers() {
    let rules = rules();
    let ids = rules.playbook.symptom_ids();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("doctor.yaml");
    let base = "listen: 127.0.0.1:1\nprometheus: {url: 'http://x'}\nsinks: [{type: webhook, url: 'http://y'}]\n";
    std::fs::write(&path, format!("{base}peers: {{dns: 'peers:9095'}}\n")).unwrap();
    let s = config::load(&path, &ids, Some("http://10.1.2.3:9095")).unwrap();
    assert_eq!(s.peers.unwrap().self_url, "http://10.1.2.3:9095");
    std::fs::write(&path, base).unwrap();
    let e = format!(
        "{:#}",
        config::load(&path, &ids, Some("http://10.1.2.3:9095")).unwrap_err()
    );
    assert!(e.contains("has no `peers:`"), "{e}");
}
