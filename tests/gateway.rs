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
        "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{\n  {LOG_FORMAT}\n  access_log {d}/access.log llm_doctor;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  server {{\n    listen 127.0.0.1:{port};\n    location / {{ proxy_pass http://127.0.0.1:{upstream}; proxy_read_timeout 60s; }}\n  }}\n}}\n"
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
    let (mut nginx, port) = start_nginx(dir.path(), upstream);
    let senders: Vec<_> = (0..120)
        .map(|_| std::thread::spawn(move || post(port)))
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    // nginx writes a request's line once it has sent the answer: wait for the last ones.
    let log = dir.path().join("access.log");
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() >= 120 || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = nginx.kill();
    let _ = nginx.wait();
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
fn a_broken_log_line_is_named_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    std::fs::write(
        &log,
        "{\"msec\":\"1796570000.250\",\"status\":\"200\",\"request_time\":\"0.5\"}\n{\"msec\":\"17965\n",
    )
    .unwrap();
    let (code, _, err) = outcome(&run(&[
        "diagnose",
        "fixtures/healthy_idle.om.gz",
        log.to_str().unwrap(),
        "-q",
    ]));
    assert_ne!(code, 0);
    assert!(err.contains("access.log:2: not a JSON object"), "{err}");
}
