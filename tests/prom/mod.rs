//! Real Prometheus and VictoriaMetrics servers for integration tests, loaded with a recording.
//!
//! A diagnosis is only as good as the PromQL it is checked against, so tests compare with the
//! real servers rather than a mock: Debian's `prometheus` 2.42 (with `promtool`) and
//! `victoria-metrics` 1.79, installed by `scripts/install-test-servers.sh`. Each server runs on
//! 127.0.0.1 at a free port, keeps its data in a temporary directory, and is stopped (SIGTERM,
//! then SIGKILL after a short grace, always reaped) and its directory removed when the value is
//! dropped, which also happens when the test panics. A missing binary is a panic that names
//! the install script: a test that needs a real server never skips silently.
//!
//! Loading follows shared/reference/real-servers.md: Prometheus gets the OpenMetrics text
//! backfilled by `promtool tsdb create-blocks-from openmetrics` before it starts (timestamps in
//! seconds); VictoriaMetrics gets the same samples in the Prometheus text format with
//! millisecond timestamps, POSTed to `/api/v1/import/prometheus` and flushed. Recordings lie in
//! the past (or the future) of the clock, so queries always name their evaluation time.
//!
//! HTTP goes through the reqwest client the crate already uses, driven by a current-thread
//! tokio runtime per server (as `src/source/live/scrape.rs` does); every request is bounded in time.

use std::fmt::Write as _;
use std::fs::File;
use std::future::Future;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::Url;
use serde_json::Value;

use crate::support::root;

/// How long a server may take to answer its readiness endpoint.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long imported data may take to become visible to VictoriaMetrics' queries.
const VISIBLE_TIMEOUT: Duration = Duration::from_secs(10);
/// The bound on one HTTP request, body included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Between SIGTERM and SIGKILL. Both servers exit cleanly in well under this; the data is
/// thrown away anyway, so a server that lingers is simply killed.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// Poll interval while waiting for a server.
const POLL: Duration = Duration::from_millis(10);
/// Attempts at a free port: another process may take the one we found before the server binds.
const PORT_ATTEMPTS: usize = 3;
/// VictoriaMetrics 1.79 refuses samples more than two days ahead of its clock (`cannot insert
/// row with too big timestamp`); checked before the import, so the failure says why.
const VM_MAX_FUTURE: Duration = Duration::from_secs(2 * 24 * 3600);

const INSTALL_HINT: &str = "run scripts/install-test-servers.sh";

/// The Prometheus configuration used when the caller gives none: it scrapes nothing, so the
/// backfilled data is all there is.
const EMPTY_CONFIG: &str =
    "global:\n  scrape_interval: 1m\n  evaluation_interval: 1m\nscrape_configs: []\n";

/// A real Prometheus on 127.0.0.1 over a backfilled recording; stopped on drop.
pub struct Prometheus {
    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub url: String,
    /// The port it listens on (refused again once the value is dropped).
    pub port: u16,
    // Field order matters: the process stops before its data directory is removed.
    process: ServerProcess,
    http: Http,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Backfills `om_text` (OpenMetrics, timestamps in seconds, ending in `# EOF`) and starts
    /// Prometheus over it with a configuration that scrapes nothing; returns once
    /// `GET /-/ready` answers 200. Panics with the server's log if it does not come up.
    pub fn start_with(om_text: &str) -> Prometheus {
        Prometheus::start_with_args(om_text, &[], None)
    }

    /// As [`Prometheus::start_with`], with `extra_args` appended to the command line (for
    /// example `--rules.alert.resend-delay=2s`) and `config_yaml` instead of the empty
    /// configuration. Extra flags take the `--name=value` form; one that the harness also sets
    /// (`--storage.tsdb.retention.time=…`) replaces the harness's. The configuration file,
    /// data path and listen address are the harness's own (a panic says so). Files the
    /// configuration names (rule files) need absolute paths: the configuration is written
    /// into the server's own temporary directory.
    pub fn start_with_args(
        om_text: &str,
        extra_args: &[&str],
        config_yaml: Option<&str>,
    ) -> Prometheus {
        for own in [
            "--config.file",
            "--storage.tsdb.path",
            "--web.listen-address",
        ] {
            assert!(
                !extra_args.iter().any(|a| a.split('=').next() == Some(own)),
                "{own} is set by the harness; pass the configuration as `config_yaml`"
            );
        }
        let prometheus = binary("prometheus");
        let promtool = binary("promtool");
        let dir = temp_dir("prometheus");
        let data = dir.path().join("data");
        let om_path = dir.path().join("backfill.om");
        std::fs::write(&om_path, om_text).expect("write the OpenMetrics file");
        let out = Command::new(&promtool)
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(&om_path)
            .arg(&data)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", promtool.display()));
        if !out.status.success() {
            panic!(
                "promtool could not backfill the recording ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // The blocks are written; the text is not needed any more.
        let _ = std::fs::remove_file(&om_path);
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, config_yaml.unwrap_or(EMPTY_CONFIG)).expect("write prometheus.yml");

        let http = Http::new();
        let (process, port) = start_on_free_port("prometheus", dir.path(), |port| {
            let mut args = vec![
                format!("--config.file={}", config.display()),
                format!("--storage.tsdb.path={}", data.display()),
                "--storage.tsdb.retention.time=100y".to_string(),
            ];
            for extra in extra_args {
                let name = extra.split('=').next().unwrap_or(extra);
                args.retain(|a| a.split('=').next() != Some(name));
                args.push(extra.to_string());
            }
            args.push(format!("--web.listen-address=127.0.0.1:{port}"));
            let mut cmd = Command::new(&prometheus);
            cmd.args(args);
            cmd
        });
        let url = format!("http://127.0.0.1:{port}");
        let mut server = Prometheus {
            url,
            port,
            process,
            http,
            _dir: dir,
        };
        let ready = format!("{}/-/ready", server.url);
        server
            .process
            .wait_until("/-/ready answers 200", READY_TIMEOUT, || {
                matches!(server.http.get(&ready), Ok((200, _)))
            });
        // Another process could have won the port between our probe and the bind: make sure
        // the server that answers is this one, by its data path.
        let flags = server
            .http
            .get(&format!("{}/api/v1/status/flags", server.url));
        let ours = flags.as_ref().is_ok_and(|(status, body)| {
            *status == 200 && body.contains(&format!("\"{}\"", data.display()))
        });
        if !ours {
            panic!(
                "the Prometheus answering on port {port} is not the one just started: {flags:?}\n{}",
                server.process.log()
            );
        }
        server
    }

    /// Instant query at `time_s` (seconds since the epoch); the raw JSON answer, also when
    /// Prometheus reports an error (`"status": "error"`, HTTP 400 or 422).
    pub fn query(&self, promql: &str, time_s: f64) -> Value {
        query(&self.http, &self.url, promql, time_s)
    }

    /// Range query from `start_s` to `end_s` every `step_s` seconds; the raw JSON answer.
    pub fn query_range(&self, promql: &str, start_s: f64, end_s: f64, step_s: f64) -> Value {
        query_range(&self.http, &self.url, promql, start_s, end_s, step_s)
    }

    /// [`Self::query_range`]'s answer as the server wrote it.
    pub fn query_range_text(&self, promql: &str, start_s: f64, end_s: f64, step_s: f64) -> String {
        query_range_text(&self.http, &self.url, promql, start_s, end_s, step_s)
    }

    /// `GET` of an API path (`/api/v1/rules`, `/api/v1/status/flags`), parsed as JSON
    /// whatever the HTTP status.
    pub fn api(&self, path: &str) -> Value {
        api_json(&self.http, &format!("{}{path}", self.url), &[])
    }

    /// What the server has logged so far (stdout and stderr), for assertion messages.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// A real VictoriaMetrics on 127.0.0.1 loaded with a recording; stopped on drop.
pub struct VictoriaMetrics {
    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub url: String,
    /// The port it listens on (refused again once the value is dropped).
    pub port: u16,
    // Field order matters: the process stops before its data directory is removed.
    process: ServerProcess,
    http: Http,
    _dir: tempfile::TempDir,
}

impl VictoriaMetrics {
    /// Starts VictoriaMetrics (`-retentionPeriod=100y -search.disableCache
    /// -search.latencyOffset=0s`), imports `om_text` (OpenMetrics, seconds) as the Prometheus
    /// text format with millisecond timestamps, flushes, and returns once a query sees the
    /// newest sample. NaN samples are dropped by VictoriaMetrics. Panics with the server's log
    /// if it does not come up or the data does not appear.
    pub fn start_with(om_text: &str) -> VictoriaMetrics {
        let victoria = binary("victoria-metrics");
        let converted = openmetrics_to_text_ms(om_text);
        if let Some(probe) = &converted.probe {
            let now_ms = now_ms();
            let limit = now_ms + VM_MAX_FUTURE.as_millis() as i64;
            assert!(
                probe.t_ms < limit,
                "the recording's newest sample ({} ms) lies more than two days after this \
                 machine's clock ({now_ms} ms): VictoriaMetrics 1.79 refuses such samples \
                 (`too big timestamp`), so it cannot load this recording here",
                probe.t_ms
            );
        }
        let dir = temp_dir("victoria-metrics");
        let data = dir.path().join("data");
        let http = Http::new();
        let (process, port) = start_on_free_port("victoria-metrics", dir.path(), |port| {
            let mut cmd = Command::new(&victoria);
            cmd.arg(format!("-storageDataPath={}", data.display()))
                .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
                .args([
                    "-retentionPeriod=100y",
                    "-search.disableCache",
                    "-search.latencyOffset=0s",
                    // No lingering on SIGTERM for connections a test left open.
                    "-http.maxGracefulShutdownDuration=1s",
                ]);
            cmd
        });
        let url = format!("http://127.0.0.1:{port}");
        let mut server = VictoriaMetrics {
            url,
            port,
            process,
            http,
            _dir: dir,
        };
        let health = format!("{}/health", server.url);
        server
            .process
            .wait_until("/health answers 200", READY_TIMEOUT, || {
                matches!(server.http.get(&health), Ok((200, _)))
            });
        let flags = server.http.get(&format!("{}/flags", server.url));
        let ours = flags.as_ref().is_ok_and(|(status, body)| {
            *status == 200 && body.contains(&format!("-storageDataPath=\"{}\"", data.display()))
        });
        if !ours {
            panic!(
                "the VictoriaMetrics answering on port {port} is not the one just started: {flags:?}\n{}",
                server.process.log()
            );
        }

        let import = format!("{}/api/v1/import/prometheus", server.url);
        match server.http.post(&import, converted.text) {
            Ok((204 | 200, _)) => {}
            other => panic!(
                "VictoriaMetrics refused the import: {other:?}\n{}",
                server.process.log()
            ),
        }
        let flush = format!("{}/internal/force_flush", server.url);
        match server.http.get(&flush) {
            Ok((200, _)) => {}
            other => panic!(
                "VictoriaMetrics could not flush: {other:?}\n{}",
                server.process.log()
            ),
        }
        if let Some(probe) = converted.probe {
            let t_s = probe.t_ms as f64 / 1000.0;
            server.process.wait_until(
                &format!("a query sees {} at {t_s}", probe.selector),
                VISIBLE_TIMEOUT,
                || {
                    let answer = query(&server.http, &server.url, &probe.selector, t_s);
                    answer["data"]["result"]
                        .as_array()
                        .is_some_and(|r| !r.is_empty())
                },
            );
        }
        server
    }

    /// Instant query at `time_s` (seconds since the epoch); the raw JSON answer, also when
    /// VictoriaMetrics reports an error (HTTP 422 with `"status": "error"`).
    pub fn query(&self, promql: &str, time_s: f64) -> Value {
        query(&self.http, &self.url, promql, time_s)
    }

    /// Range query from `start_s` to `end_s` every `step_s` seconds; the raw JSON answer.
    pub fn query_range(&self, promql: &str, start_s: f64, end_s: f64, step_s: f64) -> Value {
        query_range(&self.http, &self.url, promql, start_s, end_s, step_s)
    }

    /// [`Self::query_range`]'s answer as the server wrote it.
    pub fn query_range_text(&self, promql: &str, start_s: f64, end_s: f64, step_s: f64) -> String {
        query_range_text(&self.http, &self.url, promql, start_s, end_s, step_s)
    }

    /// `GET` of an API path (`/api/v1/rules`, `/api/v1/status/flags`), parsed as JSON
    /// whatever the HTTP status.
    pub fn api(&self, path: &str) -> Value {
        api_json(&self.http, &format!("{}{path}", self.url), &[])
    }

    /// What the server has logged so far (stdout and stderr), for assertion messages.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// The text of `fixtures/NAME.om.gz` (NAME may also be given with its `.om.gz`).
pub fn fixture_text(name: &str) -> String {
    let file = if name.ends_with(".gz") || name.ends_with(".om") {
        name.to_string()
    } else {
        format!("{name}.om.gz")
    };
    let path = root().join("fixtures").join(file);
    llm_doctor::source::file::read_text(&path).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The samples of an instant-query answer as (labels, value), in the server's order. A scalar
/// answer gives one sample without labels, so Prometheus' `scalar()` and VictoriaMetrics'
/// one-element vector read the same. Panics when the answer is an error.
pub fn samples(answer: &Value) -> Vec<(serde_json::Map<String, Value>, f64)> {
    assert_eq!(answer["status"], "success", "query failed: {answer}");
    let data = &answer["data"];
    let parse = |pair: &Value| -> f64 {
        let text = pair[1]
            .as_str()
            .unwrap_or_else(|| panic!("no value in {pair}"));
        text.parse()
            .unwrap_or_else(|e| panic!("value {text:?} is not a number: {e}"))
    };
    match data["resultType"].as_str() {
        Some("scalar") => vec![(serde_json::Map::new(), parse(&data["result"]))],
        Some("vector") => data["result"]
            .as_array()
            .expect("a vector result is an array")
            .iter()
            .map(|s| {
                let labels = s["metric"].as_object().cloned().unwrap_or_default();
                (labels, parse(&s["value"]))
            })
            .collect(),
        other => panic!("expected a vector or scalar answer, got {other:?}: {answer}"),
    }
}

/// The single value of an instant-query answer; panics unless there is exactly one sample.
pub fn single_value(answer: &Value) -> f64 {
    let s = samples(answer);
    assert_eq!(s.len(), 1, "expected one sample: {answer}");
    s[0].1
}

/// A sample the import must make visible: the newest non-NaN one.
struct Probe {
    /// `name{labels}` as written, which is also a PromQL selector.
    selector: String,
    t_ms: i64,
}

struct Converted {
    text: String,
    probe: Option<Probe>,
}

/// OpenMetrics (seconds) to the Prometheus text format (integer milliseconds), line by line:
/// comments and `# EOF` go (VictoriaMetrics' import ignores types), exemplars go, a sample
/// without a timestamp keeps none. The series text is copied verbatim, so what
/// VictoriaMetrics stores is spelled as promtool read it.
fn openmetrics_to_text_ms(om: &str) -> Converted {
    let mut text = String::with_capacity(om.len() + om.len() / 8);
    let mut probe: Option<Probe> = None;
    for (n, line) in om.lines().enumerate() {
        let Some(sample) = sample_line(n, line) else {
            continue;
        };
        let SampleLine {
            series,
            value,
            t_ms,
            ..
        } = sample;
        match t_ms {
            Some(t_ms) => writeln!(text, "{series} {value} {t_ms}").unwrap(),
            None => writeln!(text, "{series} {value}").unwrap(),
        }
        let is_number = value.parse::<f64>().is_ok_and(|v| !v.is_nan());
        if let (Some(t_ms), true) = (t_ms, is_number) {
            if probe.as_ref().is_none_or(|p| t_ms > p.t_ms) {
                probe = Some(Probe {
                    selector: series.to_string(),
                    t_ms,
                });
            }
        }
    }
    Converted { text, probe }
}

/// Moves every sample of an OpenMetrics recording in time so that its newest sample lies at
/// `end_ms`; returns the shifted text and the shift in milliseconds (add it to a time of the
/// original recording to find the same instant in the shifted one).
///
/// Prometheus evaluates rules at its wall clock, and a backfilled block newer than the clock
/// makes every rule result "out of bounds"; a test of alerting rules therefore loads the
/// recording shifted to end just before now. Comments are kept; exemplars keep their own
/// timestamps (promtool ignores them).
pub fn end_recording_at(om: &str, end_ms: i64) -> (String, i64) {
    let newest = om
        .lines()
        .enumerate()
        .filter_map(|(n, l)| sample_line(n, l)?.t_ms)
        .max();
    let Some(newest) = newest else {
        return (om.to_string(), 0);
    };
    let delta = end_ms - newest;
    let mut out = String::with_capacity(om.len() + 64);
    for (n, line) in om.lines().enumerate() {
        match sample_line(n, line) {
            Some(SampleLine {
                series,
                value,
                t_ms: Some(t_ms),
                exemplar,
            }) => {
                let t = t_ms + delta;
                let (s, ms) = (t.div_euclid(1000), t.rem_euclid(1000));
                write!(out, "{series} {value} {s}").unwrap();
                if ms != 0 {
                    let fraction = format!("{ms:03}");
                    write!(out, ".{}", fraction.trim_end_matches('0')).unwrap();
                }
                match exemplar {
                    Some(e) => writeln!(out, " {e}").unwrap(),
                    None => out.push('\n'),
                }
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    (out, delta)
}

/// One sample line of an OpenMetrics text, split; `None` for comments and blank lines.
struct SampleLine<'a> {
    /// `name` or `name{labels}`, verbatim.
    series: &'a str,
    value: &'a str,
    /// The timestamp (seconds in the text) in milliseconds.
    t_ms: Option<i64>,
    /// `# {labels} value [timestamp]`, verbatim.
    exemplar: Option<&'a str>,
}

/// Splits line `n` (0-based) of an OpenMetrics text; panics on a line that is not a sample.
fn sample_line(n: usize, line: &str) -> Option<SampleLine<'_>> {
    let line = line.trim_end();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let split = series_end(line)
        .unwrap_or_else(|| panic!("line {}: no value after the series: {line}", n + 1));
    let (series, rest) = line.split_at(split);
    let (rest, exemplar) = match rest.find(" # ") {
        Some(i) => (&rest[..i], Some(rest[i + 1..].trim())),
        None => (rest, None),
    };
    let mut fields = rest.split_whitespace();
    let value = fields
        .next()
        .unwrap_or_else(|| panic!("line {}: no value: {line}", n + 1));
    let t_ms = fields.next().map(|t| {
        let seconds: f64 = t
            .parse()
            .unwrap_or_else(|e| panic!("line {}: timestamp {t:?}: {e}", n + 1));
        (seconds * 1000.0).round() as i64
    });
    Some(SampleLine {
        series,
        value,
        t_ms,
        exemplar,
    })
}

/// The byte offset where the series (`name` or `name{labels}`) ends: the first blank outside
/// the braces and outside quoted label values (which may hold blanks, braces and `\"`).
fn series_end(line: &str) -> Option<usize> {
    let (mut in_braces, mut in_quotes, mut escaped) = (false, false, false);
    for (i, c) in line.char_indices() {
        if in_quotes {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_quotes = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_quotes = true,
            '{' => in_braces = true,
            '}' => in_braces = false,
            ' ' | '\t' if !in_braces => return Some(i),
            _ => {}
        }
    }
    None
}

/// A running server process, its output going to a log file; stopped and reaped on drop.
struct ServerProcess {
    name: &'static str,
    child: Child,
    log_path: PathBuf,
}

impl ServerProcess {
    /// The log so far; the last 8 KiB of it when longer.
    fn log(&self) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let cut = text.len().saturating_sub(8 * 1024);
        let start = (cut..=text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        format!(
            "--- {} log ({}) ---\n{}",
            self.name,
            self.log_path.display(),
            &text[start..]
        )
    }

    /// Polls `ready` until it holds; panics with the log when the process exits first or
    /// `timeout` passes.
    fn wait_until(&mut self, what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            if ready() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "{} exited ({status}) before {what}\n{}",
                    self.name,
                    self.log()
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "{} did not get ready within {timeout:?}: waiting until {what}\n{}",
                    self.name,
                    self.log()
                );
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // std has no SIGTERM and the crate no libc: ask kill(1). If that fails, SIGKILL.
            let termed = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            let deadline = Instant::now() + if termed { STOP_GRACE } else { Duration::ZERO };
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(POLL);
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Starts `name` on a free 127.0.0.1 port, retrying with another port when the one found was
/// taken before the server could bind it. Returns once the process is running (not ready).
fn start_on_free_port(
    name: &'static str,
    dir: &Path,
    command: impl Fn(u16) -> Command,
) -> (ServerProcess, u16) {
    for attempt in 1..=PORT_ATTEMPTS {
        let port = free_port();
        let log_path = dir.join(format!("{name}.{attempt}.log"));
        let log = File::create(&log_path).expect("create the server log");
        let child = command(port)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e} ({INSTALL_HINT}?)"));
        let mut process = ServerProcess {
            name,
            child,
            log_path,
        };
        // A bind conflict ends the process within milliseconds; give it that long to show.
        let until = Instant::now() + Duration::from_millis(100);
        let mut conflict = false;
        while Instant::now() < until {
            if let Ok(Some(_)) = process.child.try_wait() {
                conflict = process.log().contains("address already in use");
                if !conflict {
                    panic!("{name} exited at once\n{}", process.log());
                }
                break;
            }
            std::thread::sleep(POLL);
        }
        if !conflict {
            return (process, port);
        }
        let _ = process.child.wait();
    }
    panic!("{name}: no free port after {PORT_ATTEMPTS} attempts")
}

/// A port that was free a moment ago: bound on 127.0.0.1:0, then released.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// The path of `name` on PATH; panics with the install hint when it is missing.
fn binary(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` is not installed: {INSTALL_HINT}"))
}

fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("llm-doctor-{name}-"))
        .tempdir()
        .expect("create a temporary directory")
}

/// The wall clock in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn query(http: &Http, base: &str, promql: &str, time_s: f64) -> Value {
    let time = time_s.to_string();
    api_json(
        http,
        &format!("{base}/api/v1/query"),
        &[("query", promql), ("time", &time)],
    )
}

fn query_range(
    http: &Http,
    base: &str,
    promql: &str,
    start_s: f64,
    end_s: f64,
    step_s: f64,
) -> Value {
    let body = query_range_text(http, base, promql, start_s, end_s, step_s);
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{promql}: not JSON ({e}): {body}"))
}

/// A range query's answer as the server wrote it.
fn query_range_text(
    http: &Http,
    base: &str,
    promql: &str,
    start_s: f64,
    end_s: f64,
    step_s: f64,
) -> String {
    let (start, end, step) = (start_s.to_string(), end_s.to_string(), step_s.to_string());
    let params = [
        ("query", promql),
        ("start", start.as_str()),
        ("end", end.as_str()),
        ("step", step.as_str()),
    ];
    let url = Url::parse_with_params(&format!("{base}/api/v1/query_range"), params)
        .expect("a valid API URL");
    http.get(url.as_str())
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .1
}

/// GETs an API URL and parses the body as JSON whatever the status; panics when the request
/// fails or the body is not JSON.
fn api_json(http: &Http, url: &str, params: &[(&str, &str)]) -> Value {
    let url = Url::parse_with_params(url, params).expect("a valid API URL");
    let (status, body) = http
        .get(url.as_str())
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    serde_json::from_str(&body)
        .unwrap_or_else(|e| panic!("GET {url}: HTTP {status}, not JSON ({e}): {body}"))
}

/// A blocking HTTP client: reqwest on a current-thread tokio runtime.
struct Http {
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
}

impl Http {
    fn new() -> Http {
        // Another test may have installed the provider already; either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let client = reqwest::Client::builder()
            .no_proxy()
            .tls_certs_only([])
            .build()
            .expect("an HTTP client");
        Http { runtime, client }
    }

    /// `(status, body)`, or the error as text.
    fn get(&self, url: &str) -> Result<(u16, String), String> {
        self.send(self.client.get(url))
    }

    fn post(&self, url: &str, body: String) -> Result<(u16, String), String> {
        self.send(self.client.post(url).body(body))
    }

    fn send(&self, request: reqwest::RequestBuilder) -> Result<(u16, String), String> {
        self.block_on(async {
            let response = request.send().await.map_err(|e| error_chain(&e))?;
            let status = response.status().as_u16();
            let body = response.text().await.map_err(|e| error_chain(&e))?;
            Ok((status, body))
        })
    }

    fn block_on<T>(&self, f: impl Future<Output = Result<T, String>>) -> Result<T, String> {
        self.runtime
            .block_on(async { tokio::time::timeout(REQUEST_TIMEOUT, f).await })
            .unwrap_or_else(|_| Err(format!("no answer within {REQUEST_TIMEOUT:?}")))
    }
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(next) = cur {
        parts.push(next.to_string());
        cur = next.source();
    }
    parts.join(": ")
}

/// A real Alertmanager (Debian's `prometheus-alertmanager` 0.25) on 127.0.0.1 with the given
/// configuration, clustering off (`--cluster.listen-address=`); stopped on drop, like the
/// other servers here.
pub struct Alertmanager {
    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub url: String,
    /// The port it listens on.
    pub port: u16,
    // Field order matters: the process stops before its data directory is removed.
    process: ServerProcess,
    http: Http,
    _dir: tempfile::TempDir,
}

impl Alertmanager {
    /// Writes `config_yaml` (checked by Alertmanager itself at start) and starts the server;
    /// returns once `GET /-/ready` answers 200. Panics with the server's log otherwise.
    pub fn start(config_yaml: &str) -> Alertmanager {
        let alertmanager = binary("prometheus-alertmanager");
        let dir = temp_dir("alertmanager");
        let config = dir.path().join("alertmanager.yml");
        std::fs::write(&config, config_yaml).expect("write alertmanager.yml");
        let data = dir.path().join("data");
        let (process, port) = start_on_free_port("alertmanager", dir.path(), |port| {
            let mut cmd = Command::new(&alertmanager);
            cmd.arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.path={}", data.display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                // No gossip: a lone instance, and no port of its own to collide on.
                .arg("--cluster.listen-address=");
            cmd
        });
        let mut server = Alertmanager {
            url: format!("http://127.0.0.1:{port}"),
            port,
            process,
            http: Http::new(),
            _dir: dir,
        };
        let ready = format!("{}/-/ready", server.url);
        server
            .process
            .wait_until("/-/ready answers 200", READY_TIMEOUT, || {
                matches!(server.http.get(&ready), Ok((200, _)))
            });
        server
    }

    /// `POST /api/v2/alerts` with `alerts` (a JSON array of postable alerts); the status and
    /// body of the answer.
    pub fn post_alerts(&self, alerts: &Value) -> Result<(u16, String), String> {
        let request = self
            .http
            .client
            .post(format!("{}/api/v2/alerts", self.url))
            .header("content-type", "application/json")
            .body(alerts.to_string());
        self.http.send(request)
    }

    /// `GET` of an API path (`/api/v2/alerts`), parsed as JSON whatever the HTTP status.
    pub fn api(&self, path: &str) -> Value {
        api_json(&self.http, &format!("{}{path}", self.url), &[])
    }

    /// What the server has logged so far, for assertion messages.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_becomes_text_with_milliseconds() {
        let om = "\
# TYPE a counter
a_total{l=\"x y\",m=\"} {\\\" #\"} 3 1796083200
b 1.5 1796083200.25 # {trace_id=\"t\"} 1 1796083200
c NaN 1796083300
d 7
# EOF
";
        let c = openmetrics_to_text_ms(om);
        assert_eq!(
            c.text,
            "a_total{l=\"x y\",m=\"} {\\\" #\"} 3 1796083200000\nb 1.5 1796083200250\nc NaN 1796083300000\nd 7\n"
        );
        // NaN is dropped by VictoriaMetrics, so it cannot be the probe.
        let probe = c.probe.unwrap();
        assert_eq!((probe.selector.as_str(), probe.t_ms), ("b", 1796083200250));
    }

    #[test]
    fn recordings_shift_to_a_new_end() {
        let om = "# TYPE b gauge\nb{l=\"1 2\"} 1 1796083200\nb{l=\"1 2\"} 2 1796083215.5 # {t=\"x\"} 1\n# EOF\n";
        let (shifted, delta) = end_recording_at(om, 1_000_000_000_000);
        assert_eq!(delta, 1_000_000_000_000 - 1796083215500);
        assert_eq!(
            shifted,
            "# TYPE b gauge\nb{l=\"1 2\"} 1 999999984.5\nb{l=\"1 2\"} 2 1000000000 # {t=\"x\"} 1\n# EOF\n"
        );
        assert_eq!(end_recording_at("# EOF\n", 5), ("# EOF\n".to_string(), 0));
    }
}
