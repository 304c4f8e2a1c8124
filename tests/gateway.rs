//! A real nginx in front of an upstream, writing the JSON access log the README documents, read
//! by `diagnose` beside the engine's metrics: time lost between the gateway and the engine is
//! measured from the log (`client_e2e_p99_seconds`), and `network_latency` decided by it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::prom::{end_recording_at, fixture_text, now_ms};
use crate::support::{outcome, run};

/// The log format of the README, word for word.
const LOG_FORMAT: &str = r#"log_format llm_doctor escape=json '{"msec":"$msec","request_id":"$request_id","status":"$status",'
    '"request_time":"$request_time","upstream_addr":"$upstream_addr",'
    '"upstream_connect_time":"$upstream_connect_time","upstream_header_time":"$upstream_header_time",'
    '"upstream_response_time":"$upstream_response_time","request_uri":"$request_uri"}';"#;

/// An upstream that answers every request after `delay`, each on a thread of its own.
fn slow_upstream(delay: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer_after(stream, delay));
        }
    });
    port
}

fn answer_after(mut stream: TcpStream, delay: Duration) {
    let mut buf = [0u8; 4096];
    let _ = stream.read(&mut buf);
    std::thread::sleep(delay);
    let body = "{\"choices\":[{\"text\":\"ok\"}]}";
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// nginx in the foreground, one process as the test's user, everything under `dir`.
fn start_nginx(dir: &Path, upstream: u16) -> (Child, u16) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{\n  {LOG_FORMAT}\n  access_log {d}/access.log llm_doctor;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  server {{\n    listen 127.0.0.1:{port};\n    location / {{ proxy_pass http://127.0.0.1:{upstream}; proxy_set_header X-Request-Id $request_id; proxy_read_timeout 60s; }}\n  }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let child = Command::new("nginx")
        .args(["-e", &format!("{d}/error.log"), "-p"])
        .arg(dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx runs (scripts/install-test-servers.sh installs it)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nginx did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port)
}

/// `n` requests at once through a real nginx in front of `upstream`, nginx stopped once its
/// access log holds them: the log's path and text.
fn through_nginx(dir: &Path, upstream: u16, n: usize) -> (std::path::PathBuf, String) {
    let (mut nginx, port) = start_nginx(dir, upstream);
    let senders: Vec<_> = (0..n)
        .map(|_| std::thread::spawn(move || post(port)))
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let log = dir.join("access.log");
    let text = wait_for_lines(&log, n);
    let _ = nginx.kill();
    let _ = nginx.wait();
    (log, text)
}

/// The log's text once it has `n` lines (nginx writes a request's line once it has sent the
/// answer), or after 10 s.
fn wait_for_lines(log: &Path, n: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.lines().count() >= n || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn post(port: u16) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let body = "{\"prompt\":\"hi\",\"max_tokens\":4}";
    write!(
        s,
        "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
}

#[test]
fn a_slow_hop_behind_nginx_is_measured_from_its_access_log() {
    let dir = tempfile::tempdir().unwrap();
    // The replica's own e2e p99 is about 4.9 s (healthy_idle); the hop adds 8 s to each request.
    let upstream = slow_upstream(Duration::from_secs(8));
    let (log, text) = through_nginx(dir.path(), upstream, 120);
    assert_eq!(text.lines().count(), 120, "{text}");

    // The engine's metrics, moved to end now (the requests lie inside their window) and scraped
    // at the address nginx proxies to, as Prometheus would find the replica.
    let (om, _) = end_recording_at(&fixture_text("healthy_idle"), (now_ms() / 1000 + 1) * 1000);
    let om = om.replace(
        "instance=\"gpu-node-1:8000\"",
        &format!("instance=\"127.0.0.1:{upstream}\""),
    );
    let metrics = dir.path().join("engine.om");
    std::fs::write(&metrics, om).unwrap();
    let m = metrics.to_str().unwrap();
    let l = log.to_str().unwrap();

    let (code, json, err) = outcome(&run(&["diagnose", m, l, "--format", "json", "-q"]));
    assert_eq!(code, 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let t = &v["targets"][0];
    assert_eq!(
        crate::support::cause_ids(t).first().map(String::as_str),
        Some("network_latency"),
        "{json}"
    );
    let notes = t["notes"].to_string();
    assert!(
        notes.contains("gateway log: 120 requests in the window"),
        "{notes}"
    );

    // Without the log the same metrics are healthy and the cause is unchecked.
    let (code, json, _) = outcome(&run(&["diagnose", m, "--format", "json", "-q"]));
    assert_eq!(code, 0, "{json}");

    // A replica scraped at another address is not charged with these requests: they are
    // counted as going to no target read here.
    let (other, _) = end_recording_at(&fixture_text("healthy_idle"), (now_ms() / 1000 + 1) * 1000);
    std::fs::write(&metrics, other).unwrap();
    let (code, json, _) = outcome(&run(&["diagnose", m, l, "--format", "json", "-q"]));
    assert_eq!(code, 0, "{json}");
    assert!(
        json.contains("120 of 120 requests in the gateway log went to no target read here"),
        "{json}"
    );
}

#[test]
fn a_broken_log_line_is_named_with_file_and_line_beside_the_diagnosis() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    std::fs::write(
        &log,
        "{\"msec\":\"1796570000.250\",\"status\":\"200\",\"request_time\":\"0.5\"}\n{\"msec\":\"17965\n",
    )
    .unwrap();
    let (code, out, err) = outcome(&run(&[
        "diagnose",
        "fixtures/healthy_idle.om.gz",
        log.to_str().unwrap(),
        "--format",
        "json",
        "-q",
    ]));
    // The file is an error beside the diagnosis, as a failed source is: the metrics are still
    // judged, and the exit code says the picture is incomplete.
    assert_eq!(code, 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["errors"][0]
            .as_str()
            .unwrap()
            .contains("access.log:2: not a JSON object"),
        "{out}"
    );
    assert_eq!(v["targets"][0]["status"], "healthy", "{out}");
}

/// 120 requests of `seconds` each, ending one second apart before `end_ms`, to `upstream`, as
/// `line` writes each (its arguments: index, end in ms, duration in ms).
fn log_of(line: impl Fn(usize, i64, i64) -> String, end_ms: i64, seconds: f64) -> String {
    (0..120)
        .map(|i| line(i, end_ms - 1000 * i as i64, (seconds * 1000.0) as i64) + "\n")
        .collect()
}

/// Envoy's JSON access log in the README's `json_format`, and a gateway we do not name read
/// through `--request-fields`: each gives the replica what its users waited, as nginx's does.
#[test]
fn envoy_and_a_mapped_log_measure_the_hop_as_nginx_does() {
    let dir = tempfile::tempdir().unwrap();
    let end_ms = 1_800_000_000_000;
    let (om, _) = end_recording_at(&fixture_text("healthy_idle"), end_ms);
    let metrics = dir.path().join("engine.om");
    std::fs::write(&metrics, om).unwrap();
    let diagnose = |log: &str, extra: &[&str]| {
        let path = dir.path().join("requests.log");
        std::fs::write(&path, log).unwrap();
        let mut args = vec![
            "diagnose",
            metrics.to_str().unwrap(),
            path.to_str().unwrap(),
            "--format",
            "json",
            "-q",
        ];
        args.extend_from_slice(extra);
        outcome(&run(&args))
    };
    let first_cause = |json: &str| {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        crate::support::cause_ids(&v["targets"][0]).first().cloned()
    };

    // Envoy writes the start (RFC 3339, milliseconds) and the duration in milliseconds.
    let envoy = log_of(
        |i, end, dur| {
            let start = end - dur;
            format!(
                r#"{{"start_time":"{}","duration":{dur},"response_code":200,"upstream_host":"gpu-node-1:8000","request_id":"r{i}","upstream_service_time":"{}","response_flags":"-"}}"#,
                rfc3339(start),
                dur - 5
            )
        },
        end_ms,
        13.0,
    );
    let (code, json, err) = diagnose(&envoy, &[]);
    assert_eq!(code, 1, "{json}{err}");
    assert_eq!(
        first_cause(&json).as_deref(),
        Some("network_latency"),
        "{json}"
    );
    assert!(
        json.contains("gateway log: 120 requests in the window"),
        "{json}"
    );

    // The same requests in a log of another shape, its fields named on the command line.
    let other = log_of(
        |i, end, dur| format!(r#"{{"ts":{end},"latency_ms":{dur},"code":"200","rid":"r{i}"}}"#),
        end_ms,
        13.0,
    );
    let map = "end=ts:ms,total=latency_ms:ms,status=code,id=rid";
    let (code, json, _) = diagnose(&other, &["--request-fields", map]);
    assert_eq!(code, 1, "{json}");
    assert_eq!(
        first_cause(&json).as_deref(),
        Some("network_latency"),
        "{json}"
    );
    // Without the map it is no input llm-doctor knows; a map it cannot read is refused.
    let (code, _, err) = diagnose(&other, &[]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = diagnose(&other, &["--request-fields", "total=latency_ms"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("needs `total` and one of `end` or `start`"),
        "{err}"
    );
}

/// Unix milliseconds as RFC 3339 with milliseconds, as Envoy's %START_TIME% writes them.
fn rfc3339(ms: i64) -> String {
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{}", ms / 1000), "+%Y-%m-%dT%H:%M:%S"])
        .output()
        .unwrap();
    format!(
        "{}.{:03}Z",
        String::from_utf8(out.stdout).unwrap().trim(),
        ms % 1000
    )
}

/// The ids an "engine" saw (from the `X-Request-Id` nginx passes) with its own start and end.
type Served = std::sync::Arc<std::sync::Mutex<Vec<(String, i64, i64)>>>;

/// An upstream that holds each request `hop` before its engine part starts (a slow path to the
/// engine: a queueing proxy, a congested link), then `engine` in its engine part, which it
/// records as the engine's span would.
fn engine_behind_hop(hop: Duration, engine: Duration, served: Served) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let served = served.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let n = stream.read(&mut buf).unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                let id = head
                    .lines()
                    .find_map(|l| l.strip_prefix("X-Request-Id: "))
                    .unwrap_or("")
                    .trim()
                    .to_string();
                std::thread::sleep(hop);
                let start = now_ms();
                std::thread::sleep(engine);
                let body = "{\"choices\":[{\"text\":\"ok\"}]}";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                served.lock().unwrap().push((id, start, now_ms()));
            });
        }
    });
    port
}

/// The OTLP/JSON export of the engine's spans, one per request it served.
fn spans_of(served: &[(String, i64, i64)]) -> String {
    let spans: Vec<String> = served
        .iter()
        .enumerate()
        .map(|(i, (id, start, end))| {
            format!(
                r#"{{"traceId":"{:032x}","spanId":"{:016x}","name":"llm_request","startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[{{"key":"gen_ai.request.id","value":{{"stringValue":"cmpl-{id}"}}}},{{"key":"gen_ai.latency.e2e","value":{{"doubleValue":{}}}}}]}}"#,
                i + 1,
                i + 1,
                *start as i128 * 1_000_000,
                *end as i128 * 1_000_000,
                (end - start) as f64 / 1000.0
            )
        })
        .collect();
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[]}},"scopeSpans":[{{"scope":{{"name":"engine"}},"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    ) + "\n"
}

/// Real nginx passes its request id to the engine; the engine's spans joined to nginx's log by
/// it measure each request's time outside the engine. A 5 s hop before a 1 s engine part is
/// too little to show in the p99s alone (the replica's own e2e p99 is ~4.9 s), and plain once
/// measured request by request.
#[test]
fn time_outside_the_engine_is_measured_request_by_request() {
    let dir = tempfile::tempdir().unwrap();
    let served: Served = Default::default();
    let upstream = engine_behind_hop(
        Duration::from_secs(5),
        Duration::from_millis(1000),
        served.clone(),
    );
    let (log, _) = through_nginx(dir.path(), upstream, 120);
    let served = served.lock().unwrap().clone();
    assert_eq!(served.len(), 120);
    assert!(served.iter().all(|(id, _, _)| id.len() == 32), "{served:?}");
    let spans = dir.path().join("spans.jsonl");
    std::fs::write(&spans, spans_of(&served)).unwrap();

    let (om, _) = end_recording_at(&fixture_text("healthy_idle"), (now_ms() / 1000 + 1) * 1000);
    let om = om.replace(
        "instance=\"gpu-node-1:8000\"",
        &format!("instance=\"127.0.0.1:{upstream}\""),
    );
    let metrics = dir.path().join("engine.om");
    std::fs::write(&metrics, om).unwrap();
    let (m, l, sp) = (
        metrics.to_str().unwrap(),
        log.to_str().unwrap(),
        spans.to_str().unwrap(),
    );
    let diagnose = |files: &[&str]| {
        let mut args = vec!["diagnose"];
        args.extend_from_slice(files);
        args.extend_from_slice(&["--format", "json", "-q"]);
        let (code, json, err) = outcome(&run(&args));
        let v: serde_json::Value =
            serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}{err}"));
        (code, v["targets"][0].clone())
    };
    // The log alone: ~6 s at the gateway against a 4.9 s engine p99 decides nothing.
    let (code, t) = diagnose(&[m, l]);
    assert_eq!(code, 0, "{t}");
    // With the engine's spans: 120 of 120 joined, ~5 s of each outside the engine.
    let (code, t) = diagnose(&[m, l, sp]);
    assert_eq!(code, 1, "{t}");
    assert_eq!(
        crate::support::cause_ids(&t).first().map(String::as_str),
        Some("network_latency"),
        "{t}"
    );
    let notes = t["notes"].to_string();
    assert!(
        notes.contains("joined by request or trace id: 120 of 120 gateway requests answered"),
        "{notes}"
    );
    // The slowest, one by one, with the time each spent outside the engine.
    let (_, json, _) = outcome(&run(&["diagnose", m, l, sp, "--format", "json", "-q"]));
    assert!(json.contains("slowest 5 of 120 requests: "), "{json}");
    assert!(json.contains("outside the engine 5."), "{json}");
}
