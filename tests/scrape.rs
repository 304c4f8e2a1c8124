//! Live scrapes and recordings against real HTTP servers on 127.0.0.1 (no mocked client):
//! a tiny HTTP/1.1 server in a thread serves canned vLLM and TGI pages whose counters grow
//! with every request, or misbehaves on purpose (500, HTML, slow, one failed round).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use llm_doctor::signal::series::{MetricType, SeriesSet};
use llm_doctor::signal::window;
use llm_doctor::source::file::exposition;
use llm_doctor::source::live::scrape::{parse_header, record, scrape, ScrapeOptions, Scraped};

/// Connections one test server accepts before it stops listening.
const MAX_CONNECTIONS: usize = 500;
/// How long the slow server waits before answering (well beyond the 300 ms timeout).
const SLOW_DELAY: Duration = Duration::from_secs(3);
const MODEL: &str = "Qwen/Qwen2.5-7B-Instruct";

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    /// vLLM's page in the Prometheus text format, whatever the client accepts.
    VllmText,
    /// vLLM's page in OpenMetrics when the client accepts it (as prometheus_client does).
    VllmNegotiated,
    /// The text page gzip-compressed when the client accepts gzip.
    VllmGzip,
    /// TGI's page: a counter without `_total`, which OpenMetrics must not call a counter.
    Tgi,
    /// `500 Internal Server Error`.
    Status500,
    /// `200 OK` with an HTML page.
    Html,
    /// Answers after [`SLOW_DELAY`].
    Slow,
    /// The text page, except for the second request, which gets a 503.
    FlakySecond,
    /// A text page with `n` series, for the benchmark.
    Big(usize),
}

/// A test HTTP server on 127.0.0.1, stopped (and its threads joined) on drop.
struct Server {
    addr: SocketAddr,
    /// Each request's head (request line and headers), in arrival order.
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(mode: Mode) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut handlers = Vec::new();
                for _ in 0..MAX_CONNECTIONS {
                    let Ok((stream, _)) = listener.accept() else {
                        break;
                    };
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let (seen, stop, hits) = (seen.clone(), stop.clone(), hits.clone());
                    handlers.push(std::thread::spawn(move || {
                        handle(stream, mode, &seen, &stop, &hits)
                    }));
                }
                for h in handlers {
                    let _ = h.join();
                }
            })
        };
        Server {
            addr,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop; it sees the flag and ends.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn handle(
    mut stream: TcpStream,
    mode: Mode,
    seen: &Mutex<Vec<String>>,
    stop: &AtomicBool,
    hits: &AtomicUsize,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let has_header = |name: &str, needle: &str| {
        head.lines().any(|l| {
            l.split_once(':')
                .is_some_and(|(n, v)| n.trim().eq_ignore_ascii_case(name) && v.contains(needle))
        })
    };
    let wants_om = has_header("accept", "application/openmetrics-text");
    let wants_gzip = has_header("accept-encoding", "gzip");
    seen.lock().unwrap().push(head);
    let n = hits.fetch_add(1, Ordering::SeqCst);

    let text = "text/plain; version=0.0.4; charset=utf-8";
    let (status, content_type, mut body, mut extra) = match mode {
        Mode::VllmText | Mode::VllmGzip => ("200 OK", text, vllm_text(n), ""),
        Mode::VllmNegotiated if wants_om => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            vllm_openmetrics(n),
            "",
        ),
        Mode::VllmNegotiated => ("200 OK", text, vllm_text(n), ""),
        Mode::Tgi => ("200 OK", text, tgi_text(n), ""),
        Mode::Status500 => (
            "500 Internal Server Error",
            "text/plain",
            "engine is restarting\n".to_string(),
            "",
        ),
        Mode::Html => (
            "200 OK",
            "text/html; charset=utf-8",
            "<!DOCTYPE html>\n<html><body><h1>Welcome to the model server</h1></body></html>\n"
                .to_string(),
            "",
        ),
        Mode::Slow => {
            let until = Instant::now() + SLOW_DELAY;
            while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            ("200 OK", text, vllm_text(n), "")
        }
        Mode::FlakySecond if n == 1 => (
            "503 Service Unavailable",
            "text/plain",
            "busy\n".to_string(),
            "",
        ),
        Mode::FlakySecond => ("200 OK", text, vllm_text(n), ""),
        Mode::Big(series) => ("200 OK", text, big_text(n, series), ""),
    };
    let mut body_bytes = std::mem::take(&mut body).into_bytes();
    if mode == Mode::VllmGzip && wants_gzip {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&body_bytes).unwrap();
        body_bytes = gz.finish().unwrap();
        extra = "Content-Encoding: gzip\r\n";
    }
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body_bytes.len()
    );
    // The client may have given up (timeout test): write errors are expected then.
    let _ = stream.write_all(response.as_bytes());
    let _ = stream.write_all(&body_bytes);
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// vLLM's `/metrics` in the text format (prometheus_client's spelling: counters declared
/// with `_total`, `_created` as gauges). Counters grow by 500 per request.
fn vllm_text(n: usize) -> String {
    let l = format!("engine=\"0\",model_name=\"{MODEL}\"");
    let prompt = 1000 + 500 * n;
    let count = 10 + 2 * n;
    format!(
        "\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{{l}}} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{{l}}} {n}.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{{l}}} 0.42
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{{l}}} {prompt}.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{{{l}}} 1.7960832e+09
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{{engine=\"0\",le=\"0.3\",model_name=\"{MODEL}\"}} 1.0
vllm:e2e_request_latency_seconds_bucket{{engine=\"0\",le=\"5.0\",model_name=\"{MODEL}\"}} {count}.0
vllm:e2e_request_latency_seconds_bucket{{engine=\"0\",le=\"+Inf\",model_name=\"{MODEL}\"}} {count}.0
vllm:e2e_request_latency_seconds_count{{{l}}} {count}.0
vllm:e2e_request_latency_seconds_sum{{{l}}} {}.5
",
        3 * count
    )
}

/// The same page as prometheus_client writes it for an OpenMetrics client.
fn vllm_openmetrics(n: usize) -> String {
    let l = format!("engine=\"0\",model_name=\"{MODEL}\"");
    let prompt = 1000 + 500 * n;
    let count = 10 + 2 * n;
    format!(
        "\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{{l}}} 3.0
# HELP vllm:prompt_tokens Number of prefill tokens processed.
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{{{l}}} {prompt}.0
vllm:prompt_tokens_created{{{l}}} 1.7960832e+09
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{{engine=\"0\",le=\"0.3\",model_name=\"{MODEL}\"}} 1.0
vllm:e2e_request_latency_seconds_bucket{{engine=\"0\",le=\"+Inf\",model_name=\"{MODEL}\"}} {count}.0
vllm:e2e_request_latency_seconds_count{{{l}}} {count}.0
vllm:e2e_request_latency_seconds_sum{{{l}}} {}.5
vllm:e2e_request_latency_seconds_created{{{l}}} 1.7960832e+09
# EOF
",
        3 * count
    )
}

/// TGI's page: `tgi_request_count` is declared a counter but has no `_total`.
fn tgi_text(n: usize) -> String {
    format!(
        "\
# TYPE tgi_request_count counter
tgi_request_count{{method=\"POST\"}} {}
# TYPE tgi_queue_size gauge
tgi_queue_size 2
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{{le=\"0.5\"}} {n}
tgi_request_duration_bucket{{le=\"+Inf\"}} {}
tgi_request_duration_sum {}
tgi_request_duration_count {}
",
        7 + 3 * n,
        2 * n + 1,
        0.25 * n as f64,
        2 * n + 1
    )
}

/// `series` counters with model/pod labels, about 130 bytes each.
fn big_text(n: usize, series: usize) -> String {
    let mut s = String::from("# TYPE vllm:request_success_total counter\n");
    for i in 0..series {
        s.push_str(&format!(
            "vllm:request_success_total{{engine=\"0\",finished_reason=\"stop\",model_name=\"{MODEL}\",pod=\"pod-{i}\"}} {}.0\n",
            i * 7 + n
        ));
    }
    s
}

/// An address nobody listens on: bound once, then released.
fn dead_url() -> (String, String) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    (format!("http://{addr}/metrics"), addr)
}

fn opts(timeout_ms: u64) -> ScrapeOptions {
    ScrapeOptions {
        timeout: Duration::from_millis(timeout_ms),
        headers: Vec::new(),
    }
}

fn ok(s: &Scraped) -> &SeriesSet {
    s.result
        .as_ref()
        .unwrap_or_else(|e| panic!("{} failed: {e}", s.url))
}

fn err(s: &Scraped) -> &str {
    match &s.result {
        Ok(set) => panic!("{} should fail, got {} series", s.url, set.series.len()),
        Err(e) => &e.0,
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn scrape_two_rounds_gives_rates_and_prometheus_labels() {
    let server = Server::start(Mode::VllmText);
    let mut lines = Vec::new();
    let before = now_ms();
    let out = scrape(
        &[server.url()],
        2,
        Duration::from_millis(200),
        &opts(5000),
        &mut |l| lines.push(l.to_string()),
    );
    let after = now_ms();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].url, server.url());
    let set = ok(&out[0]);
    assert!(set.has_timestamps);
    assert_eq!(set.series.len(), 10, "{:#?}", set.series);
    let instance = server.addr.to_string();
    for s in &set.series {
        assert_eq!(s.samples.len(), 2, "{s}");
        assert_eq!(s.labels.get("instance"), Some(instance.as_str()), "{s}");
        assert_eq!(s.labels.get("job"), Some("scrape"), "{s}");
        let (t0, t1) = (
            s.samples.to_vec()[0].t_ms.unwrap(),
            s.samples.to_vec()[1].t_ms.unwrap(),
        );
        assert!(
            before <= t0 && t1 <= after,
            "{s}: {t0} {t1} outside {before}..{after}"
        );
        assert!(
            (150..2000).contains(&(t1 - t0)),
            "rounds {} ms apart",
            t1 - t0
        );
    }
    assert_eq!(
        set.family_type("vllm:prompt_tokens_total"),
        MetricType::Counter
    );

    let prompt = set.iter_by_name("vllm:prompt_tokens_total").next().unwrap();
    assert_eq!(
        prompt.samples.to_vec()[1].value - prompt.samples.to_vec()[0].value,
        500.0
    );
    let (t0, t1) = (
        prompt.samples.to_vec()[0].t_ms.unwrap(),
        prompt.samples.to_vec()[1].t_ms.unwrap(),
    );
    let rate = window::rate(&prompt.samples, t1, t1 - t0 + 1).expect("a rate from two samples");
    let expected = 500.0 / ((t1 - t0) as f64 / 1000.0);
    assert!(
        (rate - expected).abs() < 1e-6 * expected,
        "rate {rate}, expected {expected}"
    );

    let scraped = format!("scraped {} (10 series)", server.url());
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], scraped);
    assert_eq!(lines[2], scraped);
    assert!(lines[1].starts_with("round 2/2 in "), "{lines:?}");
}

#[test]
fn scrape_dead_endpoint_fails_alone() {
    let server = Server::start(Mode::VllmText);
    let (dead, addr) = dead_url();
    let out = scrape(
        &[dead.clone(), server.url()],
        1,
        Duration::ZERO,
        &opts(5000),
        &mut |_| {},
    );
    assert_eq!(out[0].url, dead);
    let e = err(&out[0]);
    assert!(e.contains(&addr) && e.contains("cannot connect"), "{e}");
    assert!(e.to_lowercase().contains("refused"), "{e}");
    assert_eq!(ok(&out[1]).series.len(), 10);
}

#[test]
fn scrape_endpoint_failing_one_round_fails() {
    let flaky = Server::start(Mode::FlakySecond);
    let out = scrape(&[flaky.url()], 3, Duration::ZERO, &opts(5000), &mut |_| {});
    let e = err(&out[0]);
    assert!(
        e.starts_with("round 2/3: HTTP 503 Service Unavailable"),
        "{e}"
    );
    assert_eq!(flaky.requests().len(), 3);
}

#[test]
fn scrape_http_500_and_html_give_clear_errors() {
    let failing = Server::start(Mode::Status500);
    let html = Server::start(Mode::Html);
    let good = Server::start(Mode::VllmText);
    let out = scrape(
        &[failing.url(), html.url(), good.url()],
        1,
        Duration::ZERO,
        &opts(5000),
        &mut |_| {},
    );
    let e = err(&out[0]);
    assert!(
        e.contains("HTTP 500 Internal Server Error")
            && e.contains(&failing.addr.to_string())
            && e.contains("engine is restarting"),
        "{e}"
    );
    let e = err(&out[1]);
    assert!(
        e.contains("not exposition text") && e.contains("text/html"),
        "{e}"
    );
    // The parser's own message, located in the page.
    assert!(
        e.contains(":1:1: invalid metric name starting with `<`"),
        "{e}"
    );
    ok(&out[2]);
}

#[test]
fn scrape_slow_endpoint_times_out() {
    let slow = Server::start(Mode::Slow);
    let good = Server::start(Mode::VllmText);
    let started = Instant::now();
    let out = scrape(
        &[slow.url(), good.url()],
        1,
        Duration::ZERO,
        &opts(300),
        &mut |_| {},
    );
    let took = started.elapsed();
    let e = err(&out[0]);
    assert!(e.contains("timed out") && e.contains("300ms"), "{e}");
    assert!(e.contains(&slow.addr.to_string()), "{e}");
    ok(&out[1]);
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[test]
fn scrape_sends_headers_and_negotiates() {
    let server = Server::start(Mode::VllmNegotiated);
    let gz = Server::start(Mode::VllmGzip);
    let options = ScrapeOptions {
        timeout: Duration::from_secs(5),
        headers: vec![parse_header("Authorization: Bearer x").unwrap()],
    };
    let out = scrape(
        &[server.url(), gz.url()],
        1,
        Duration::ZERO,
        &options,
        &mut |_| {},
    );
    // OpenMetrics was asked for and served: the counter family has its OpenMetrics name.
    let om = ok(&out[0]);
    assert_eq!(
        om.family_type("vllm:prompt_tokens_total"),
        MetricType::Counter
    );
    assert!(om.families.contains_key("vllm:prompt_tokens"));
    assert!(om.has_timestamps);
    // The gzip page decompressed to the same series as the plain one.
    assert_eq!(ok(&out[1]).series.len(), 10);

    for req in server.requests().iter().chain(gz.requests().iter()) {
        let header = |name: &str| {
            req.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim().to_string())
        };
        assert_eq!(
            header("authorization").as_deref(),
            Some("Bearer x"),
            "{req}"
        );
        assert_eq!(
            header("accept").as_deref(),
            Some("application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1"),
            "{req}"
        );
        assert_eq!(header("accept-encoding").as_deref(), Some("gzip"), "{req}");
        assert!(
            header("user-agent").is_some_and(|ua| ua.starts_with("llm-doctor/")),
            "{req}"
        );
        assert!(req.starts_with("GET /metrics HTTP/1.1\r\n"), "{req}");
    }
}

#[test]
fn record_writes_openmetrics_that_reads_back_and_imports() {
    let text_server = Server::start(Mode::VllmText);
    let om_server = Server::start(Mode::VllmNegotiated);
    let tgi = Server::start(Mode::Tgi);
    let flaky = Server::start(Mode::FlakySecond);
    let (dead, dead_addr) = dead_url();
    let urls = [
        text_server.url(),
        om_server.url(),
        tgi.url(),
        flaky.url(),
        dead.clone(),
    ];
    let started_ms = now_ms();
    let started = Instant::now();
    let mut lines = Vec::new();
    let (text, errors) = record(
        &urls,
        Duration::from_secs(1),
        Duration::from_millis(250),
        &opts(5000),
        &mut |l| lines.push(l.to_string()),
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(950) && took < Duration::from_secs(5),
        "took {took:?}"
    );
    assert_eq!(lines.iter().filter(|l| l.starts_with("round ")).count(), 4);

    // One error per failing endpoint: the dead one (every round), the flaky one (round 2).
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors[0].starts_with(&flaky.url())
            && errors[0].contains("1 of 5 rounds failed")
            && errors[0].contains("round 2: HTTP 503"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].starts_with(&dead)
            && errors[1].contains("all 5 rounds failed")
            && errors[1].contains(&dead_addr),
        "{}",
        errors[1]
    );

    assert!(text.ends_with("# EOF\n"));
    let set = exposition::parse(&text, "recording.om").unwrap_or_else(|e| panic!("{e}"));
    assert!(set.has_timestamps);
    let instances: std::collections::BTreeSet<_> = set
        .series
        .iter()
        .filter_map(|s| s.labels.get("instance"))
        .collect();
    assert_eq!(instances.len(), 4, "{instances:?}");
    for s in &set.series {
        let from_flaky = s.labels.get("instance") == Some(&flaky.addr.to_string());
        let want = if from_flaky { 4 } else { 5 };
        assert_eq!(s.samples.len(), want, "{s}");
        assert!(
            s.samples.to_vec().windows(2).all(|w| w[0].t_ms < w[1].t_ms),
            "{s}"
        );
    }
    // Timestamps are seconds since the epoch, near now.
    let lo = started_ms as f64 / 1000.0 - 1.0;
    let hi = now_ms() as f64 / 1000.0 + 1.0;
    let mut sample_lines = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let ts: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(
            lo <= ts && ts <= hi,
            "timestamp {ts} not in seconds: {line}"
        );
        sample_lines += 1;
    }
    assert_eq!(sample_lines, set.sample_count());
    // Family declarations as OpenMetrics wants them.
    for decl in [
        "# TYPE vllm:prompt_tokens counter\n",
        "# TYPE tgi_request_count unknown\n",
        "# TYPE tgi_request_duration histogram\n",
        "# TYPE vllm:e2e_request_latency_seconds histogram\n",
    ] {
        assert!(text.contains(decl), "missing {decl:?} in\n{text}");
    }
    assert!(!text.contains("# TYPE vllm:prompt_tokens_total"), "{text}");

    // And Prometheus' own importer takes it, every sample of it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("recording.om");
    std::fs::write(&file, &text).unwrap();
    let blocks = dir.path().join("blocks");
    let out = promtool(&[
        "tsdb",
        "create-blocks-from",
        "openmetrics",
        file.to_str().unwrap(),
        blocks.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "promtool failed\n{stdout}\n{stderr}");
    let written: Vec<_> = std::fs::read_dir(&blocks)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("meta.json").is_file())
        .collect();
    assert!(!written.is_empty(), "no block written\n{stdout}\n{stderr}");
    // The table promtool prints: ULID, min time, max time, duration, samples, chunks, ...
    let imported: usize = stdout
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.len() >= 5 && cols[0].len() == 26)
                .then(|| cols[4].parse::<usize>().ok())
                .flatten()
        })
        .sum();
    assert_eq!(imported, set.sample_count(), "promtool said\n{stdout}");
}

/// Runs Debian's `promtool`; a missing one fails the test (never a silent skip).
fn promtool(args: &[&str]) -> std::process::Output {
    match std::process::Command::new("promtool").args(args).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "promtool is not on PATH: install the `prometheus` package \
             (apt-get install prometheus; scripts/test.sh installs it)"
        ),
        Err(e) => panic!("cannot run promtool: {e}"),
    }
}

/// Benchmark, not a test: `cargo test --release --test integration -- --ignored --nocapture
/// scrape_vs_get`. Compares a whole `scrape` call (2 rounds, interval 0: runtime, client,
/// two GETs, parsing, stamping, merging) with one plain GET of the same page by an
/// already-built client.
#[test]
#[ignore]
fn scrape_vs_get() {
    let series = 400;
    let server = Server::start(Mode::Big(series));
    let runs = 30;
    let url = server.url();

    let mut scrape_times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let out = scrape(
            std::slice::from_ref(&url),
            2,
            Duration::ZERO,
            &opts(5000),
            &mut |_| {},
        );
        scrape_times.push(t.elapsed());
        assert_eq!(ok(&out[0]).series.len(), series);
    }

    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let t = Instant::now();
    let client = reqwest::Client::builder()
        .no_proxy()
        .tls_certs_only([])
        .build()
        .unwrap();
    let client_build = t.elapsed();
    let mut get_times = Vec::new();
    let mut page_len = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let body = rt.block_on(async {
            client
                .get(&url)
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
        });
        get_times.push(t.elapsed());
        page_len = body.len();
    }
    let t = Instant::now();
    let _ = reqwest::Client::builder().no_proxy().build().unwrap();
    let client_build_with_roots = t.elapsed();

    let mut one_round = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let out = scrape(
            std::slice::from_ref(&url),
            1,
            Duration::ZERO,
            &opts(5000),
            &mut |_| {},
        );
        one_round.push(t.elapsed());
        ok(&out[0]);
    }
    let page = big_text(0, series);
    let t = Instant::now();
    for _ in 0..runs {
        std::hint::black_box(exposition::parse(&page, "bench").unwrap());
    }
    let parse = t.elapsed() / runs;

    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    println!(
        "page: {series} series, {page_len} bytes; {runs} runs each\n\
         scrape (2 rounds, interval 0, new runtime + client per call): median {:?}, min {:?}\n\
         plain GET (client reused):                                    median {:?}, min {:?}\n\
         scrape (1 round):                                             median {:?}\n\
         parse of the page alone: {parse:?}; client build without CA roots {client_build:?}, \
         with the system's roots {client_build_with_roots:?}",
        median(&mut scrape_times),
        scrape_times[0],
        median(&mut get_times),
        get_times[0],
        median(&mut one_round),
    );
}

// ---- The same paths through the command line ------------------------------------------------

fn cli(args: &[&str]) -> (i32, String, String) {
    crate::support::outcome(&crate::support::run(args))
}

#[test]
fn cli_diagnose_scrape_reads_two_scrapes_and_reports_a_dead_endpoint() {
    let live = Server::start(Mode::VllmText);
    let (dead, dead_addr) = dead_url();
    let url = live.url();
    let (code, out, err) = cli(&[
        "diagnose",
        "--scrape",
        &url,
        "--scrape",
        &dead,
        "--interval",
        "300ms",
        "--timeout",
        "2s",
        "--format",
        "json",
    ]);
    assert_eq!(
        code, 1,
        "a failed endpoint makes the run not healthy: {err}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let targets = v["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 1, "{out}");
    let t = &targets[0];
    assert_eq!(t["target"]["engine"], "vllm");
    assert_eq!(t["target"]["labels"]["instance"], live.addr.to_string());
    assert_eq!(t["window"]["length_ms"], 450, "1.5 x the interval");
    assert_eq!(t["facts"]["model"], MODEL);
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].as_str().unwrap().contains(&dead_addr),
        "{errors:?}"
    );
    assert!(live.requests().len() >= 2, "two scrapes");
}

#[test]
fn cli_diagnose_scrape_with_every_endpoint_dead_exits_2() {
    let (dead, dead_addr) = dead_url();
    let (code, _, err) = cli(&[
        "diagnose",
        "--scrape",
        &dead,
        "--interval",
        "100ms",
        "--timeout",
        "1s",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no endpoint could be scraped") && err.contains(&dead_addr),
        "{err}"
    );
    let (code, _, err) = cli(&["diagnose", "--scrape", &dead, "--header", "no colon here"]);
    assert_eq!(code, 2);
    assert!(err.contains("header"), "{err}");
}

#[test]
fn cli_record_writes_a_file_that_diagnose_reads() {
    let live = Server::start(Mode::VllmNegotiated);
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("rec.om");
    let url = live.url();
    let (code, out, err) = cli(&[
        "record",
        "--scrape",
        &url,
        "--duration",
        "1s",
        "--interval",
        "250ms",
        "--out",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("wrote "), "{out}");
    let text = std::fs::read_to_string(&out_file).unwrap();
    assert!(text.ends_with("# EOF\n"));
    let (code, json, err) = cli(&[
        "diagnose",
        out_file.to_str().unwrap(),
        "--window",
        "2s",
        "--format",
        "json",
    ]);
    assert!(code == 0 || code == 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["targets"][0]["target"]["engine"], "vllm");
}

/// `record --scrape URL --duration 1h --interval INTERVAL --out OUT`, started and left running,
/// its output captured.
fn spawn_record(url: &str, interval: &str, out: &std::path::Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_llm-doctor"))
        .args([
            "record",
            "--scrape",
            url,
            "--duration",
            "1h",
            "--interval",
            interval,
        ])
        .arg("--out")
        .arg(out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn cli_record_keeps_a_valid_file_as_it_goes_and_stops_cleanly_on_sigint() {
    let live = Server::start(Mode::VllmText);
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("rec.om");
    let mut child = spawn_record(&live.url(), "300ms", &out_file);
    // A complete file exists after the first rounds, long before the hour is over.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let rounds = |text: &str| {
        let mut times = round_times(text);
        times.dedup();
        times.len()
    };
    loop {
        let text = std::fs::read_to_string(&out_file).unwrap_or_default();
        // Past round 5: `--out` was saved whole after round 4 and a part holds round 5 on.
        let parts = dir.path().join("rec.om.parts");
        if text.ends_with("# EOF\n") && rounds(&text) >= 3 && parts.exists() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no file after 20 s: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "record did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(exit.code(), Some(0), "{err}");
    assert!(err.contains("recording stopped after"), "{err}");
    let text = std::fs::read_to_string(&out_file).unwrap();
    assert!(text.ends_with("# EOF\n") && rounds(&text) >= 3, "{text}");
    // Written whole at the end: the parts kept between whole saves are gone.
    assert!(!dir.path().join("rec.om.parts").exists());
    let (code, _, err) = cli(&["diagnose", out_file.to_str().unwrap(), "--window", "2s"]);
    assert!(code == 0 || code == 1, "{err}");
}

/// The instants of one series' samples in an OpenMetrics text, in file order.
fn round_times(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with("vllm:num_requests_running"))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}

#[test]
fn cli_record_killed_keeps_every_round_in_the_file_and_its_parts() {
    let live = Server::start(Mode::VllmText);
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("rec.om.gz");
    let parts = dir.path().join("rec.om.gz.parts");
    let mut child = spawn_record(&live.url(), "200ms", &out_file);
    let read_gz = |path: &std::path::Path| -> String {
        let mut text = String::new();
        if let Ok(file) = std::fs::File::open(path) {
            let mut gz = flate2::read::GzDecoder::new(file);
            std::io::Read::read_to_string(&mut gz, &mut text).unwrap();
        }
        text
    };
    // Past round 10: `--out` was saved whole after round 8 (or, were a save still being written
    // then, after the first round that one was done by), and parts hold the rounds since.
    let on_disk = || -> usize {
        let names = std::fs::read_dir(&parts).map(|d| d.map(|e| e.unwrap().path()).collect());
        let mut names: Vec<std::path::PathBuf> = names.unwrap_or_default();
        // A part being written is hidden (and may be half written).
        names.retain(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'));
        let mut all = round_times(&read_gz(&out_file));
        all.extend(names.iter().flat_map(|p| round_times(&read_gz(p))));
        all.sort_by(f64::total_cmp);
        all.dedup();
        all.len()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while round_times(&read_gz(&out_file)).len() < 8 || on_disk() < 10 {
        assert!(
            std::time::Instant::now() < deadline,
            "no whole save of 8 rounds and parts after 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // No chance to finish: what is on disk is what a crash leaves.
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let scraped = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("scraped "))
        .count();
    // Saved whole after round 8 (or, were a save still being written then, after the round
    // it was done by).
    let whole = round_times(&read_gz(&out_file));
    assert!(whole.len() >= 8, "{whole:?}");
    // What `OUT.parts/*` names: a part being written is hidden.
    let mut names: Vec<_> = std::fs::read_dir(&parts)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    names.retain(|p: &std::path::PathBuf| {
        !p.file_name().unwrap().to_string_lossy().starts_with('.')
    });
    names.sort();
    let mut all = whole.clone();
    for part in &names {
        all.extend(round_times(&read_gz(part)));
    }
    // Every round scraped is in the file or a part (the last one scraped may have been killed
    // before its save); a kill between a whole save and the parts' removal repeats rounds.
    all.sort_by(f64::total_cmp);
    all.dedup();
    assert!(
        all.len() + 1 >= scraped && all.len() <= scraped,
        "{} rounds on disk of {scraped} scraped: {all:?}",
        all.len()
    );
    // The file and its parts read back together.
    let mut args = vec![
        "diagnose".to_string(),
        out_file.to_string_lossy().into_owned(),
    ];
    args.extend(names.iter().map(|p| p.to_string_lossy().into_owned()));
    args.extend([
        "--window".into(),
        "2s".into(),
        "--format".into(),
        "json".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, json, err) = cli(&args);
    assert!(code == 0 || code == 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["targets"][0]["target"]["engine"], "vllm");
    if names.is_empty() {
        return;
    }
    // A new recording to the same name would mix its parts with these, or remove them: refused
    // before anything is scraped.
    let scraped = live.requests().len();
    let (code, _, err) = record_one_second(&live.url(), &out_file);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds parts of an earlier recording"), "{err}");
    assert_eq!(live.requests().len(), scraped, "it scraped first");
    assert!(
        names.iter().all(|p| p.exists()),
        "the earlier parts are kept"
    );
}

/// `record --scrape URL --duration 1s --out OUT`: (exit code, stdout, stderr).
fn record_one_second(url: &str, out: &std::path::Path) -> (i32, String, String) {
    let out = out.to_str().unwrap();
    cli(&["record", "--scrape", url, "--duration", "1s", "--out", out])
}

#[test]
fn cli_record_refuses_a_parts_name_that_is_not_a_folder() {
    let live = Server::start(Mode::VllmText);
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("rec.om");
    std::fs::write(dir.path().join("rec.om.parts"), "mine").unwrap();
    let (code, _, err) = record_one_second(&live.url(), &out_file);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("rec.om.parts` is where the rounds"), "{err}");
    assert!(live.requests().is_empty(), "nothing was scraped");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("rec.om.parts")).unwrap(),
        "mine"
    );
}

#[test]
fn cli_record_refuses_an_unwritable_out_before_it_starts() {
    let live = Server::start(Mode::VllmText);
    let started = std::time::Instant::now();
    let (code, _, err) = cli(&[
        "record",
        "--scrape",
        &live.url(),
        "--duration",
        "1h",
        "--out",
        "/nonexistent-dir/rec.om",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--out `/nonexistent-dir/rec.om` cannot be written"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "it scraped first"
    );
    assert!(live.requests().is_empty(), "nothing was scraped");
}

#[test]
fn cli_diagnose_quiet_prints_no_progress() {
    let live = Server::start(Mode::VllmText);
    let url = live.url();
    let args = [
        "diagnose",
        "--scrape",
        &url,
        "--interval",
        "100ms",
        "--format",
        "json",
    ];
    let (_, _, err) = cli(&args);
    assert!(err.contains("scraped "), "progress by default: {err}");
    let mut quiet = args.to_vec();
    quiet.push("-q");
    let (code, out, err) = cli(&quiet);
    assert!(code == 0 || code == 1, "{err}");
    assert!(err.is_empty(), "{err}");
    assert!(out.contains("\"targets\""));
}
