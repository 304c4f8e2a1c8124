//! An engine's request spans: `record --otlp` receives what an engine posts over OTLP/HTTP
//! (protobuf and JSON) into a JSON-lines file, and `diagnose` reads that file beside the
//! metrics, taking from the spans the latencies an engine's metrics lack.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use crate::prom::{end_recording_at, fixture_text};
use crate::support::{outcome, run};

/// An OTLP/JSON export (written by hand from the specification's encoding) of `n` vLLM-style
/// request spans ending one second apart before `end_ms`, each with `ttft` seconds to the first
/// token, and one start-up span that is not a request.
fn export_json(n: usize, end_ms: i64, ttft: f64) -> String {
    let spans: Vec<String> = (0..n)
        .map(|i| {
            let end_ns = (end_ms - 1000 * i as i64) as i128 * 1_000_000;
            let start_ns = end_ns - 3_000_000_000;
            format!(
                r#"{{"traceId":"{:032x}","spanId":"{:016x}","name":"llm_request","startTimeUnixNano":"{start_ns}","endTimeUnixNano":"{end_ns}","attributes":[{{"key":"gen_ai.request.id","value":{{"stringValue":"cmpl-{i}-0"}}}},{{"key":"gen_ai.usage.prompt_tokens","value":{{"intValue":"200"}}}},{{"key":"gen_ai.usage.completion_tokens","value":{{"intValue":"64"}}}},{{"key":"gen_ai.latency.time_in_queue","value":{{"doubleValue":0.05}}}},{{"key":"gen_ai.latency.time_to_first_token","value":{{"doubleValue":{ttft}}}}},{{"key":"gen_ai.latency.e2e","value":{{"doubleValue":3.0}}}}],"status":{{}}}}"#,
                i + 1,
                i + 1
            )
        })
        .collect();
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"vllm"}}}}]}},"scopeSpans":[{{"scope":{{"name":"vllm"}},"spans":[{},{{"traceId":"00000000000000000000000000000fff","spanId":"0000000000000fff","name":"EngineCoreProc init","startTimeUnixNano":"1","endTimeUnixNano":"2"}}]}}]}}]}}"#,
        spans.join(",")
    )
}

/// POSTs `body` to `/v1/traces` on `port`; the status line and the body of the answer.
fn post(port: u16, content_type: &str, body: &[u8]) -> (String, String) {
    post_to(
        port,
        "/v1/traces",
        &format!("Content-Type: {content_type}"),
        body,
    )
}

/// POSTs `body` to `path` with the header lines `headers`.
fn post_to(port: u16, path: &str, headers: &str, body: &[u8]) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: collector\r\n{headers}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out).to_string();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

#[test]
fn record_otlp_keeps_what_an_engine_posts_and_diagnose_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("traces.jsonl");
    let mut child = Killed(
        Command::new(env!("CARGO_BIN_EXE_llm-doctor"))
            .args([
                "record",
                "--otlp",
                "127.0.0.1:0",
                "--duration",
                "60s",
                "--out",
            ])
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let child = &mut child.0;
    // The address it bound, from its first line.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let port: u16 = line
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no address in `{line}`"));

    let end_ms = 1_800_000_000_000;
    let json = export_json(2, end_ms, 0.5);
    let export: ExportTraceServiceRequest = serde_json::from_str(&json).unwrap();
    let (status, body) = post(port, "application/x-protobuf", &export.encode_to_vec());
    assert!(status.contains(" 200 "), "{status} {body}");
    let (status, body) = post(
        port,
        "application/json",
        export_json(1, end_ms, 0.5).as_bytes(),
    );
    assert!(status.contains(" 200 "), "{status}");
    assert_eq!(body, "{}");
    let (status, body) = post(port, "application/x-protobuf", b"\x0a\xff\xff\xff");
    assert!(status.contains(" 400 "), "{status}");
    assert!(body.contains("not an OTLP trace export"), "{body}");
    let (status, _) = post(port, "text/plain", b"hello");
    assert!(status.contains(" 415 "), "{status}");
    let (status, body) = post_to(port, "/v1/metrics", "Content-Type: application/json", b"{}");
    assert!(
        status.contains(" 404 ") && body.contains("POST /v1/traces"),
        "{status} {body}"
    );
    // Compressed, as the Collector's otlphttp exporter sends by default.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&export.encode_to_vec()).unwrap();
    let zipped = gz.finish().unwrap();
    let headers = "Content-Type: application/x-protobuf\r\nContent-Encoding: gzip";
    let (status, _) = post_to(port, "/v1/traces", headers, &zipped);
    assert!(status.contains(" 200 "), "{status}");

    // Stopped as a service manager stops it: what came is kept.
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{rest}");
    assert!(
        stdout.contains("(3 exports, 5 request spans)"),
        "{stdout}{rest}"
    );
    assert!(rest.contains("3 posts refused"), "{rest}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");

    // The file reads beside an engine's metrics whose window holds the spans.
    let (om, _) = end_recording_at(&fixture_text("healthy_idle"), end_ms);
    let metrics = dir.path().join("engine.om");
    std::fs::write(&metrics, om).unwrap();
    let (code, json, err) = outcome(&run(&[
        "diagnose",
        metrics.to_str().unwrap(),
        out.to_str().unwrap(),
        "--format",
        "json",
        "-q",
    ]));
    assert_eq!(code, 0, "{json}{err}");
    let notes = serde_json::from_str::<serde_json::Value>(&json).unwrap()["targets"][0]["notes"]
        .to_string();
    assert!(
        notes.contains("engine spans: 5 requests in the window (0 failed)"),
        "{notes}"
    );
}

/// llama.cpp exports no time to first token: 120 request spans whose first tokens came after
/// 6 s give the p99 its metrics lack, and high_ttft fires. An engine whose metrics hold the
/// histogram keeps its own p99.
#[test]
fn spans_give_the_latencies_an_engines_metrics_lack() {
    let dir = tempfile::tempdir().unwrap();
    let end_ms = 1_800_000_000_000;
    let spans = dir.path().join("spans.jsonl");
    std::fs::write(&spans, export_json(120, end_ms, 6.0) + "\n").unwrap();
    let diagnose = |fixture: &str| {
        let (om, _) = end_recording_at(&fixture_text(fixture), end_ms);
        let metrics = dir.path().join(format!("{fixture}.om"));
        std::fs::write(&metrics, om).unwrap();
        let (code, json, err) = outcome(&run(&[
            "diagnose",
            metrics.to_str().unwrap(),
            spans.to_str().unwrap(),
            "--format",
            "json",
            "-q",
        ]));
        let v: serde_json::Value =
            serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}{err}"));
        (code, v["targets"][0].clone())
    };
    let (code, t) = diagnose("llamacpp_healthy");
    let symptoms = t["symptoms"].to_string();
    assert_eq!(code, 1, "{t}");
    assert!(symptoms.contains("high_ttft"), "{symptoms}");
    assert!(
        t["notes"]
            .to_string()
            .contains("from them: ttft_p99_seconds 6"),
        "{}",
        t["notes"]
    );
    let (_, t) = diagnose("healthy_idle");
    let notes = t["notes"].to_string();
    let kept = notes
        .split("; ")
        .find(|part| part.contains("already known (from the metrics or --signal) and kept"))
        .unwrap_or_else(|| panic!("{notes}"));
    assert!(kept.contains("ttft_p99_seconds"), "{notes}");

    // Spans of another hour are read, counted and left out: nothing of theirs is judged.
    std::fs::write(&spans, export_json(120, end_ms - 3_600_000, 6.0) + "\n").unwrap();
    let (code, t) = diagnose("llamacpp_healthy");
    assert_eq!(code, 0, "{t}");
    let (_, json, _) = outcome(&run(&[
        "diagnose",
        dir.path().join("llamacpp_healthy.om").to_str().unwrap(),
        spans.to_str().unwrap(),
        "--format",
        "json",
        "-q",
    ]));
    assert!(
        json.contains("120 of 120 request records in")
            && json.contains("end outside the windows read"),
        "{json}"
    );
}

/// A child process killed when the test ends, passed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A recording that received nothing says so and exits 1: the engine was not pointed here.
#[test]
fn a_recording_that_received_nothing_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl.gz");
    let (code, stdout, err) = outcome(&run(&[
        "record",
        "--otlp",
        "127.0.0.1:0",
        "--duration",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]));
    assert_eq!(code, 1, "{stdout}{err}");
    assert!(err.contains("no traces came"), "{err}");
    // Even empty, the gzip file is whole.
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&out).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, "");
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    let (code, _, err) = outcome(&run(&[
        "record",
        "--otlp",
        &addr,
        "--duration",
        "2s",
        "--out",
        out.to_str().unwrap(),
    ]));
    assert_ne!(code, 0);
    assert!(err.contains(&format!("listening on {addr}")), "{err}");
}

/// A real vLLM's spans (corpus/vllm/traces: posted by vLLM over OTLP/HTTP protobuf during the
/// run, received by `record --otlp`) read beside the same run's metrics: one span for each
/// request the load generator saw answered, all inside the recording's window.
#[test]
fn a_real_vllm_runs_spans_match_what_its_client_saw() {
    let id = "vllm-healthy-long-answers";
    let answered = ground_truth(id, "completed_ok");
    let (code, v) = diagnose_corpus_run(id, &["traces"]);
    assert_eq!(code, 0, "{v}");
    let notes = v["targets"][0]["notes"].to_string();
    assert!(
        notes.contains(&format!(
            "engine spans: {answered} requests in the window (0 failed)"
        )),
        "{notes}"
    );
}

/// Real nginx in front of a real vLLM (a corpus run): nginx passed its `$request_id` as
/// `X-Request-Id`, vLLM took it as the request's id, and its access log joins vLLM's own spans
/// request by request: every request the client sent, with milliseconds outside the engine.
#[test]
fn a_real_nginx_log_joins_a_real_vllms_spans_by_request_id() {
    let id = "vllm-max-num-seqs-4-heavy";
    let sent = ground_truth(id, "sent");
    let (_, v) = diagnose_corpus_run(id, &["requests", "traces"]);
    let json = v.to_string();
    let notes = v["targets"][0]["notes"].to_string();
    assert!(
        notes.contains(&format!(
            "joined by request or trace id: {sent} of {sent} gateway requests answered ({sent} engine spans)"
        )),
        "{notes}"
    );
    // The hop from nginx to vLLM on one machine: milliseconds, judged (enough joined) and so
    // network_latency stays out.
    assert!(notes.contains("time outside the engine p50 0.0"), "{notes}");
    assert!(!notes.contains("too few to judge by"), "{notes}");
    assert!(
        !crate::support::cause_ids(&v["targets"][0]).contains(&"network_latency".to_string()),
        "{json}"
    );
    assert!(
        notes.contains(&format!("slowest 5 of {sent} requests: cmpl-")),
        "{notes}"
    );
}

/// One vLLM-style request span as OTLP/JSON: `start_s` its arrival, with its prompt length and
/// queue, prefill and e2e times.
fn span_json(i: usize, start_s: f64, prompt: u64, queue: f64, prefill: f64, e2e: f64) -> String {
    let start = (start_s * 1e9) as i128;
    let end = start + (e2e * 1e9) as i128;
    format!(
        r#"{{"traceId":"{i:032x}","spanId":"{i:016x}","name":"llm_request","startTimeUnixNano":"{start}","endTimeUnixNano":"{end}","attributes":[{{"key":"gen_ai.usage.prompt_tokens","value":{{"intValue":"{prompt}"}}}},{{"key":"gen_ai.latency.time_in_queue","value":{{"doubleValue":{queue}}}}},{{"key":"gen_ai.latency.time_in_model_prefill","value":{{"doubleValue":{prefill}}}}},{{"key":"gen_ai.latency.time_to_first_token","value":{{"doubleValue":{}}}}},{{"key":"gen_ai.latency.e2e","value":{{"doubleValue":{e2e}}}}}]}}"#,
        queue + prefill
    )
}

/// Short requests queued while a long prompt prefilled, measured from the spans, decide
/// long_prompt_prefill on a llama.cpp replica whose metrics could not.
#[test]
fn short_requests_waiting_behind_a_long_prefill_are_measured() {
    let dir = tempfile::tempdir().unwrap();
    let end_s = 1_800_000_000.0;
    // 150 short requests a second apart in the window's last 200 s; a 6,000-token prompt
    // prefills for 40 s from 120 s before the end; the short ones arriving meanwhile wait.
    let long_from = end_s - 120.0;
    let mut spans: Vec<String> = (0..150)
        .map(|i| {
            let t = end_s - 190.0 + i as f64;
            let queue = if t >= long_from && t < long_from + 40.0 {
                long_from + 40.0 - t
            } else {
                0.02
            };
            span_json(i + 1, t, 250, queue, 0.1, queue + 2.0)
        })
        .collect();
    spans.push(span_json(999, long_from, 6000, 0.0, 40.0, 45.0));
    let export = format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[]}},"scopeSpans":[{{"spans":[{}]}}]}}]}}"#,
        spans.join(",")
    );
    let path = dir.path().join("spans.jsonl");
    std::fs::write(&path, export + "\n").unwrap();
    let (om, _) = end_recording_at(&fixture_text("llamacpp_healthy"), end_s as i64 * 1000);
    let metrics = dir.path().join("llamacpp.om");
    std::fs::write(&metrics, om).unwrap();
    let (code, json, err) = outcome(&run(&[
        "diagnose",
        metrics.to_str().unwrap(),
        path.to_str().unwrap(),
        "--format",
        "json",
        "-q",
    ]));
    assert_eq!(code, 1, "{json}{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let t = &v["targets"][0];
    assert!(
        t["notes"]
            .to_string()
            .contains("head-of-line: 40 of 150 short requests"),
        "{}",
        t["notes"]
    );
    assert!(
        crate::support::cause_ids(t).contains(&"long_prompt_prefill".to_string()),
        "{json}"
    );
}

/// A number of a real vLLM corpus case's ground truth (the client's own count).
fn ground_truth(id: &str, key: &str) -> u64 {
    let path = crate::support::root().join(format!("corpus/vllm/{id}.yaml"));
    let case: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    case["ground_truth"][key].as_u64().unwrap()
}

/// `diagnose` of a real vLLM corpus run's recording beside its request records in `beside`
/// (`requests`, `traces`): the exit code and the JSON answer.
fn diagnose_corpus_run(id: &str, beside: &[&str]) -> (i32, serde_json::Value) {
    let files: Vec<String> = std::iter::once(format!("corpus/vllm/{id}.om.gz"))
        .chain(
            beside
                .iter()
                .map(|d| format!("corpus/vllm/{d}/{id}.jsonl.gz")),
        )
        .collect();
    let mut args: Vec<&str> = vec!["diagnose"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--format", "json", "-q"]);
    let (code, json, err) = outcome(&run(&args));
    let v = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}{err}"));
    (code, v)
}
