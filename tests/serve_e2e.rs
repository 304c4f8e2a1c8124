//! `llm-doctor serve` end to end with real servers, all on 127.0.0.1: a real Prometheus
//! evaluating the exported vLLM rules over the kv_cache_exhaustion recording (shifted to end
//! just before now, since rules are evaluated at the wall clock), a real Alertmanager routing
//! the exported alerts to the real `llm-doctor` binary, and a sink played by a small HTTP
//! server in the test. Then a load test (ignored by default: `cargo test --release --test
//! integration -- --ignored --nocapture serve_load`) posting 2,000 alerts straight to the
//! receiver.
//!
//! Every server is stopped when its value is dropped, also when an assertion panics; every wait
//! polls against a deadline.

use std::collections::BTreeMap;
use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Router;
use serde_json::{json, Value};

use crate::prom::{end_recording_at, fixture_text, now_ms, Alertmanager, Prometheus};
use crate::support::{outcome, run};

/// Between polls of a condition.
const POLL: Duration = Duration::from_millis(100);
/// How long `llm-doctor serve` may take to answer `/healthz`.
const SERVE_READY: Duration = Duration::from_secs(20);

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Polls `check` until it gives a value; panics with `what` and `context()` past `timeout`.
pub(crate) fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Option<T>,
    context: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("waited {timeout:?} for {what}\n{}", context());
        }
        std::thread::sleep(POLL);
    }
}

/// A webhook sink: refuses (500) the first `refusals` requests of each group (by `groupKey`),
/// accepts the rest, and records what it accepted.
#[derive(Default)]
struct SinkState {
    refusals: usize,
    hits: Mutex<BTreeMap<String, usize>>,
    accepted: Mutex<Vec<Value>>,
}

pub(crate) struct Sink {
    pub(crate) url: String,
    state: Arc<SinkState>,
}

impl Sink {
    /// Serves on a free port of 127.0.0.1 within `rt`; stops when `rt` is dropped.
    pub(crate) fn start(rt: &tokio::runtime::Runtime, refusals: usize) -> Sink {
        let state = Arc::new(SinkState {
            refusals,
            ..SinkState::default()
        });
        let router = Router::new()
            .fallback(|State(s): State<Arc<SinkState>>, body: Bytes| async move {
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let key = v["groupKey"].as_str().unwrap_or("").to_string();
                let n = {
                    let mut hits = s.hits.lock().unwrap();
                    let n = hits.entry(key).or_default();
                    *n += 1;
                    *n
                };
                if n <= s.refusals {
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                s.accepted.lock().unwrap().push(v);
                StatusCode::OK
            })
            .with_state(state.clone());
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        rt.spawn(async move { axum::serve(listener, router).await });
        Sink { url, state }
    }

    pub(crate) fn accepted(&self) -> Vec<Value> {
        self.state.accepted.lock().unwrap().clone()
    }

    fn hits(&self, group_key: &str) -> usize {
        self.state
            .hits
            .lock()
            .unwrap()
            .get(group_key)
            .copied()
            .unwrap_or(0)
    }
}

/// The real `llm-doctor serve` on 127.0.0.1; SIGTERM (then SIGKILL) and reaped on drop.
pub(crate) struct Serve {
    pub(crate) url: String,
    child: Child,
    log_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Serve {
    /// Starts `binary serve` with `config` (a YAML whose `listen` is `127.0.0.1:{port}`) and
    /// waits until `/healthz` answers.
    pub(crate) fn start(binary: &Path, port: u16, config: &str) -> Serve {
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("doctor.yaml");
        std::fs::write(&config_path, config).unwrap();
        let log_path = dir.path().join("serve.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new(binary)
            .arg("serve")
            .arg("--config")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let mut serve = Serve {
            url: format!("http://127.0.0.1:{port}"),
            child,
            log_path,
            _dir: dir,
        };
        let healthz = format!("{}/healthz", serve.url);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = client();
        let deadline = Instant::now() + SERVE_READY;
        loop {
            let ok = rt.block_on(async {
                client
                    .get(&healthz)
                    .timeout(Duration::from_secs(2))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success())
            });
            if ok {
                return serve;
            }
            if let Ok(Some(status)) = serve.child.try_wait() {
                panic!("llm-doctor serve exited ({status})\n{}", serve.log());
            }
            if Instant::now() >= deadline {
                panic!(
                    "llm-doctor serve not healthy within {SERVE_READY:?}\n{}",
                    serve.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last 8 KiB of its log.
    pub(crate) fn log(&self) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let cut = text.len().saturating_sub(8 * 1024);
        let start = (cut..=text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        format!("--- llm-doctor serve log ---\n{}", &text[start..])
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

pub(crate) fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .tls_certs_only([])
        .build()
        .unwrap()
}

/// RFC 3339 (UTC, seconds) of `ms` since the epoch.
pub(crate) fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Alertmanager routing the exported alerts (label `llm_doctor_symptom`) to the receiver at
/// `port`, each alert its own group, notified about 1 s after it arrives.
fn alertmanager_config(port: u16) -> String {
    format!(
        r#"route:
  receiver: nobody
  group_by: ['...']
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
  routes:
    - matchers: ['llm_doctor_symptom=~".+"']
      receiver: llm-doctor
receivers:
  - name: nobody
  - name: llm-doctor
    webhook_configs:
      - url: http://127.0.0.1:{port}/alertmanager
        send_resolved: true
        max_alerts: 0
"#
    )
}

/// The accepted notifications' alerts with their `groupKey`, in arrival order.
pub(crate) fn alerts_of(notifications: &[Value]) -> Vec<(String, Value)> {
    notifications
        .iter()
        .flat_map(|n| {
            let key = n["groupKey"].as_str().unwrap_or("").to_string();
            n["alerts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |a| (key.clone(), a))
        })
        .collect()
}

#[test]
fn alertmanager_delivers_diagnosed_alerts_through_the_real_servers() {
    let started = Instant::now();
    let rt = runtime();
    // Two refusals per group: the receiver must retry them and deliver once.
    let sink = Sink::start(&rt, 2);

    // Alertmanager needs the receiver's address before the receiver (which needs Prometheus,
    // which needs Alertmanager) starts: hold a port until then, so no server here takes it.
    let reserved = StdListener::bind("127.0.0.1:0").unwrap();
    let serve_port = reserved.local_addr().unwrap().port();
    let am = Alertmanager::start(&alertmanager_config(serve_port));

    let dir = tempfile::tempdir().unwrap();
    let (code, rules, err) = outcome(&run(&[
        "rules",
        "export",
        "prometheus",
        "--engine",
        "vllm",
        "--for",
        "0s",
    ]));
    assert_eq!(code, 0, "{err}");
    let rule_file = dir.path().join("rules.yml");
    std::fs::write(&rule_file, rules).unwrap();
    let prom_config = format!(
        "global:\n  evaluation_interval: 1s\nrule_files:\n- {}\nalerting:\n  alertmanagers:\n  - static_configs:\n    - targets: ['127.0.0.1:{}']\nscrape_configs: []\n",
        rule_file.display(),
        am.port
    );
    // Rules are evaluated at the wall clock: the recording must end just before now.
    let end_ms = (now_ms() / 1000 - 5) * 1000;
    let (om, _) = end_recording_at(&fixture_text("kv_cache_exhaustion"), end_ms);
    let prom =
        Prometheus::start_with_args(&om, &["--rules.alert.resend-delay=2s"], Some(&prom_config));

    drop(reserved);
    let serve = Serve::start(
        Path::new(env!("CARGO_BIN_EXE_llm-doctor")),
        serve_port,
        &format!(
            "listen: 127.0.0.1:{serve_port}\nprometheus:\n  url: {}\n  timeout: 5s\nsinks:\n  - type: webhook\n    url: {}/hook\n",
            prom.url, sink.url
        ),
    );
    let servers_up = started.elapsed();
    let context = || format!("{}\n{}\n{}", serve.log(), am.log(), prom.log());

    // (a) Prometheus fires, Alertmanager notifies, the receiver diagnoses, the sink gets it.
    let (group_key, ttft) = wait_for(
        "a diagnosed LLMDoctorHighTtft notification at the sink",
        Duration::from_secs(30),
        || {
            alerts_of(&sink.accepted()).into_iter().find(|(_, a)| {
                a["status"] == "firing"
                    && a["labels"]["alertname"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("LLMDoctorHighTtft"))
            })
        },
        context,
    );
    let first_notification = started.elapsed();
    let d = &ttft["diagnosis"];
    assert_eq!(d["causes"][0]["id"], "kv_cache_exhaustion", "{d:#}");
    assert_eq!(d["symptom"], "high_ttft", "{d:#}");
    assert_eq!(
        d["target"]["labels"]["instance"], "gpu-node-1:8000",
        "{d:#}"
    );
    assert_eq!(ttft["labels"]["llm_doctor_symptom"], "high_ttft");

    // (c) Prometheus goes away; Alertmanager keeps delivering, the receiver still hands the
    // alert on, saying the diagnosis is unavailable.
    drop(prom);
    let context = || {
        format!(
            "{}\nAlertmanager holds: {}\n{}",
            serve.log(),
            am.api("/api/v2/alerts"),
            am.log()
        )
    };
    let starts_ms = now_ms();
    let mut alert = json!({
        "labels": {
            "alertname": "LLMDoctorHighTtft",
            "llm_doctor_symptom": "high_ttft",
            "instance": "gpu-node-1:8000",
            "severity": "warning",
            "e2e": "prometheus-down",
        },
        "annotations": {"summary": "posted by the test while Prometheus is down"},
        "startsAt": rfc3339(starts_ms),
        "endsAt": rfc3339(starts_ms + 600_000),
    });
    let posted = am.post_alerts(&json!([alert.clone()]));
    assert!(matches!(posted, Ok((200, _))), "{posted:?}");
    let (down_key, down) = wait_for(
        "the alert posted while Prometheus is down, at the sink",
        Duration::from_secs(20),
        || {
            alerts_of(&sink.accepted())
                .into_iter()
                .find(|(_, a)| a["labels"]["e2e"] == "prometheus-down" && a["status"] == "firing")
        },
        context,
    );
    let d = &down["diagnosis"];
    assert_eq!(d["status"], "unavailable", "{d:#}");
    assert!(d["reason"].as_str().is_some_and(|r| !r.is_empty()), "{d:#}");

    // (d) The same alert resolved: passed through, no diagnosis.
    alert["endsAt"] = json!(rfc3339(now_ms() - 1000));
    let posted = am.post_alerts(&json!([alert]));
    assert!(matches!(posted, Ok((200, _))), "{posted:?}");
    let (resolved_key, resolved) = wait_for(
        "the resolved alert at the sink",
        Duration::from_secs(20),
        || {
            alerts_of(&sink.accepted())
                .into_iter()
                .find(|(_, a)| a["labels"]["e2e"] == "prometheus-down" && a["status"] == "resolved")
        },
        context,
    );
    assert_eq!(resolved_key, down_key);
    assert!(resolved.get("diagnosis").is_none(), "{resolved:#}");

    // (b) The group refused twice was delivered, and once only: its firing notification was
    // accepted exactly once, after two refusals (retried by the receiver, not by Alertmanager,
    // or else the receiver's dedupe kept it from the sink).
    let accepted = sink.accepted();
    let firing_deliveries = accepted
        .iter()
        .filter(|n| n["groupKey"] == group_key.as_str() && n["status"] == "firing")
        .count();
    assert_eq!(firing_deliveries, 1, "{accepted:#?}");
    assert!(sink.hits(&group_key) >= 3, "two refusals, then accepted");
    let down_deliveries = accepted
        .iter()
        .filter(|n| n["groupKey"] == down_key.as_str() && n["status"] == "firing")
        .count();
    assert_eq!(down_deliveries, 1, "{accepted:#?}");
    eprintln!(
        "servers up after {servers_up:?}; first diagnosed notification after {first_notification:?}; done after {:?}; {} notifications accepted",
        started.elapsed(),
        accepted.len()
    );
    drop(serve);
    drop(am);
    drop(rt);
}

/// The `q` quantile of sorted `values` (nearest rank).
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The `q` quantile of the histogram `name` in a Prometheus text page, interpolated within
/// its bucket as `histogram_quantile` does; with the bucket's upper bound.
fn histogram_quantile(page: &str, name: &str, q: f64) -> (f64, String) {
    let prefix = format!("{name}_bucket{{le=\"");
    let buckets: Vec<(f64, String, f64)> = page
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&prefix)?;
            let (le, count) = rest.split_once("\"} ")?;
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((bound, le.to_string(), count.trim().parse().ok()?))
        })
        .collect();
    let total = buckets.last().map_or(0.0, |b| b.2);
    let want = q * total;
    let mut lower = (0.0, 0.0);
    for (bound, le, count) in &buckets {
        if *count >= want {
            if bound.is_infinite() {
                return (lower.0, le.clone());
            }
            let share = if count > &lower.1 {
                (want - lower.1) / (count - lower.1)
            } else {
                1.0
            };
            return (lower.0 + (bound - lower.0) * share, le.clone());
        }
        lower = (*bound, *count);
    }
    (f64::NAN, "?".to_string())
}

/// A webhook payload of `size` firing alerts of group `g`, pointed at the fixture's replica and
/// at its last sample.
fn load_group(g: usize, size: usize) -> Value {
    let alerts: Vec<Value> = (0..size)
        .map(|i| {
            json!({
                "status": "firing",
                "labels": {
                    "alertname": "LLMDoctorHighTtft",
                    "llm_doctor_symptom": "high_ttft",
                    "instance": "gpu-node-1:8000",
                    "job": "vllm",
                    "load_group": format!("g{g:03}"),
                    "load_alert": format!("a{i:02}"),
                },
                "annotations": {"summary": "load test"},
                "startsAt": "2026-12-01T00:10:07Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://127.0.0.1:9/graph",
                "fingerprint": format!("{g:08x}{i:08x}"),
            })
        })
        .collect();
    json!({
        "receiver": "llm-doctor",
        "status": "firing",
        "alerts": alerts,
        "groupLabels": {"load_group": format!("g{g:03}")},
        "commonLabels": {"alertname": "LLMDoctorHighTtft"},
        "commonAnnotations": {},
        "externalURL": "http://127.0.0.1:9",
        "version": "4",
        "groupKey": format!("{{}}:{{load_group=\"g{g:03}\"}}"),
        "truncatedAlerts": 0
    })
}

/// What posting a list of groups gave: per request (latency, status, body), in no order.
type Answers = Vec<(Duration, u16, String)>;

/// POSTs `groups` to `url` with at most `concurrency` requests in flight; a 5xx is resent
/// after 200 ms (as Alertmanager would), at most 20 times. Every request is answered or the
/// test fails.
async fn post_groups(url: &str, groups: &[usize], concurrency: usize) -> Answers {
    let client = client();
    let bodies: Arc<Vec<String>> = Arc::new(
        groups
            .iter()
            .map(|&g| load_group(g, 10).to_string())
            .collect(),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, bodies, next) = (client.clone(), bodies.clone(), next.clone());
        let url = format!("{url}/alertmanager");
        workers.spawn(async move {
            let mut answers = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(body) = bodies.get(i) else {
                    return answers;
                };
                for attempt in 1.. {
                    let t = Instant::now();
                    let r = client
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body.clone())
                        .timeout(Duration::from_secs(120))
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("request {i}: {e}"));
                    let status = r.status().as_u16();
                    let text = r.text().await.unwrap_or_default();
                    answers.push((t.elapsed(), status, text));
                    if status < 500 {
                        break;
                    }
                    assert!(attempt < 20, "request {i} refused 20 times: {answers:?}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        });
    }
    let mut all = Vec::new();
    while let Some(w) = workers.join_next().await {
        all.extend(w.unwrap());
    }
    all
}

/// Load test: 2,000 firing alerts in 200 groups of 10 against the real binary, a real
/// Prometheus over the backfilled fixture and a sink in the test; then 20 of the groups again.
/// Prints throughput and latency percentiles (recorded in BENCHMARKS.md).
#[test]
#[ignore = "load test: cargo test --release --test integration -- --ignored --nocapture serve_load"]
fn serve_load_2000_alerts() {
    const GROUPS: usize = 200;
    const PER_GROUP: usize = 10;
    const CONCURRENCY: usize = 16;
    const DUPLICATES: usize = 20;
    let rt = runtime();
    let sink = Sink::start(&rt, 0);
    let prom = Prometheus::start_with(&fixture_text("kv_cache_exhaustion"));
    let port = StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    // The binary is built in the test's own profile: release under `cargo test --release`.
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let serve = Serve::start(
        Path::new(env!("CARGO_BIN_EXE_llm-doctor")),
        port,
        &format!(
            "listen: 127.0.0.1:{port}\nprometheus:\n  url: {}\nsinks:\n  - type: webhook\n    url: {}/hook\n",
            prom.url, sink.url
        ),
    );

    let all: Vec<usize> = (0..GROUPS).collect();
    let t = Instant::now();
    let answers = rt.block_on(post_groups(&serve.url, &all, CONCURRENCY));
    let elapsed = t.elapsed();
    let refused = answers.iter().filter(|a| a.1 >= 500).count();
    assert!(
        answers.iter().all(|a| a.1 < 500 || a.1 == 503),
        "only 503 may refuse: {answers:?}"
    );
    assert_eq!(answers.iter().filter(|a| a.1 == 200).count(), GROUPS);

    // None lost, none twice.
    let mut per_fingerprint: BTreeMap<String, usize> = BTreeMap::new();
    let mut diagnosed = 0;
    for (_, a) in alerts_of(&sink.accepted()) {
        *per_fingerprint
            .entry(a["fingerprint"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
        if a["diagnosis"]["causes"][0]["id"] == "kv_cache_exhaustion" {
            diagnosed += 1;
        }
    }
    assert_eq!(per_fingerprint.len(), GROUPS * PER_GROUP, "{}", serve.log());
    assert!(
        per_fingerprint.values().all(|&n| n == 1),
        "{per_fingerprint:?}"
    );
    assert_eq!(
        diagnosed,
        GROUPS * PER_GROUP,
        "every alert diagnosed kv_cache_exhaustion"
    );

    // Alertmanager resends: answered at once, not delivered again.
    let again: Vec<usize> = (0..DUPLICATES).map(|i| i * (GROUPS / DUPLICATES)).collect();
    let t = Instant::now();
    let dup_answers = rt.block_on(post_groups(&serve.url, &again, CONCURRENCY));
    let dup_elapsed = t.elapsed();
    let duplicates = dup_answers
        .iter()
        .filter(|a| a.1 == 200 && a.2.contains("duplicate"))
        .count();
    assert_eq!(duplicates, DUPLICATES, "{dup_answers:?}");
    let delivered_again = alerts_of(&sink.accepted()).len() - GROUPS * PER_GROUP;
    assert_eq!(delivered_again, 0, "duplicates re-delivered");

    let page = rt.block_on(async {
        client()
            .get(format!("{}/metrics", serve.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    let mut latencies: Vec<Duration> = answers.iter().map(|a| a.0).collect();
    latencies.sort();
    let (p50, p99) = (quantile(&latencies, 0.5), quantile(&latencies, 0.99));
    let (s50, b50) = histogram_quantile(&page, "llm_doctor_handling_seconds", 0.5);
    let (s99, b99) = histogram_quantile(&page, "llm_doctor_handling_seconds", 0.99);
    let mut dup: Vec<Duration> = dup_answers.iter().map(|a| a.0).collect();
    dup.sort();
    println!(
        "serve_load ({profile} binary, {CONCURRENCY} concurrent, {} cores): {} alerts in {GROUPS} requests in {:.2} s = {:.0} alerts/s; {refused} requests answered 5xx and resent",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        GROUPS * PER_GROUP,
        elapsed.as_secs_f64(),
        (GROUPS * PER_GROUP) as f64 / elapsed.as_secs_f64()
    );
    println!(
        "serve_load client latency per request: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        latencies.last().unwrap().as_secs_f64() * 1e3
    );
    println!(
        "serve_load server llm_doctor_handling_seconds: p50 ~{:.1} ms (bucket le={b50}), p99 ~{:.1} ms (bucket le={b99})",
        s50 * 1e3,
        s99 * 1e3
    );
    println!(
        "serve_load duplicates: {DUPLICATES} groups ({} alerts) resent, {duplicates} answered `duplicate`, {delivered_again} re-delivered; p99 {:.1} ms, all in {:.0} ms",
        DUPLICATES * PER_GROUP,
        quantile(&dup, 0.99).as_secs_f64() * 1e3,
        dup_elapsed.as_secs_f64() * 1e3
    );
    for line in page.lines().filter(|l| {
        l.starts_with("llm_doctor_handling_seconds")
            || l.starts_with("llm_doctor_diagnoses_total")
            || l.starts_with("llm_doctor_webhook_requests_total")
    }) {
        println!("  {line}");
    }
    drop(serve);
    drop(prom);
    drop(rt);
}
