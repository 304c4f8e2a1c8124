//! Live triage from Prometheus (`llm_doctor::source::live::prometheus`) against real servers: each fixture is
//! backfilled into Prometheus 2.42 (and a few into VictoriaMetrics 1.79) and triaged at the
//! recording's end; the result must match what the file reader makes of the same recording.
//! A small proxy in front of Prometheus fails chosen queries (400, 422, a timeout) to check that
//! a failing query costs only its signals, and records the headers it receives.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use llm_doctor::pipeline;
use llm_doctor::prepared::{Options, Prepared};
use llm_doctor::rules::Rules;
use llm_doctor::signal::selector::Selector;
use llm_doctor::source::live::prometheus::{
    prepare_from_prometheus, LiveOptions, LiveResult, PromAuth,
};
use llm_doctor_engine::{Diagnosis, FactValue};

use crate::prom::{fixture_text, Prometheus, VictoriaMetrics};
use crate::support::{outcome, run_env};

/// The fixtures' newest sample (every fixture ends there; see their `.om` text).
const T_END_MS: i64 = 1_796_083_807_000;
const WINDOW_MS: i64 = 300_000;

/// How close live values must be to the file reader's.
#[derive(Debug, Clone, Copy)]
struct Tolerance {
    rel: f64,
    abs: f64,
}

/// Prometheus 2.42 against the file reader. Both compute `rate()` with Prometheus'
/// `extrapolatedRate` and the same `histogram_quantile`; live triage sends its window one
/// millisecond short, so that Prometheus 2's closed ranges hold the samples of the reader's
/// left-open window (before it did, exporter rates in these fixtures differed by up to 1.0 %:
/// their samples at …507 sit on the left edge of a window ending at …807). What remains is the
/// extrapolation to a range one millisecond shorter (a few parts in a million) and float noise:
/// measured here, no value differs by more than 1e-6.
const PROMETHEUS: Tolerance = Tolerance {
    rel: 1e-4,
    abs: 1e-6,
};

/// VictoriaMetrics 1.79 computes `rate()` from the last sample before the window to the last
/// inside it, without Prometheus' extrapolation, and `histogram_quantile` over such rates;
/// gauges agree exactly. Measured here: up to 7.0 % (e2e_p99_seconds, 120 s against 129 s: a
/// quantile interpolated inside a wide bucket moves with small rate changes), so values are
/// held to 15 %, and the verdict (status, top cause, symptoms) must agree.
const VICTORIA: Tolerance = Tolerance {
    rel: 0.15,
    abs: 1e-3,
};

fn rules() -> Rules {
    llm_doctor::rules::load_rules(None).unwrap()
}

fn options(engine_args: Option<&str>) -> Options {
    Options {
        engine_args: engine_args.map(str::to_string),
        at_ms: Some(T_END_MS),
        window_ms: WINDOW_MS,
        ..Default::default()
    }
}

fn from_file(fixture: &str, opts: &Options, rules: &Rules) -> Vec<Prepared> {
    let set =
        llm_doctor::source::file::parse_inputs(&[(fixture.to_string(), fixture_text(fixture))])
            .unwrap();
    pipeline::prepare(&set, rules, opts).unwrap()
}

fn live(url: &str, opts: &Options, rules: &Rules) -> LiveResult {
    prepare_from_prometheus(rules, &LiveOptions::new(url), opts)
        .unwrap_or_else(|e| panic!("live triage of {url}: {e:#}"))
}

fn diagnose(rules: &Rules, p: &Prepared) -> Diagnosis {
    let slos = rules.playbook.slo_values(&Default::default()).unwrap();
    llm_doctor_engine::diagnose(&rules.playbook, &p.snapshot, &slos)
}

fn close(a: f64, b: f64, tol: Tolerance) -> bool {
    let d = (a - b).abs();
    d <= tol.abs || d <= tol.rel * a.abs().max(b.abs())
}

/// The largest relative difference seen, and where (for the messages that set tolerances).
#[derive(Default)]
struct Worst {
    rel: f64,
    at: String,
}

/// Compares live snapshots and diagnoses with the file reader's; returns every mismatch.
/// `strict`: the ranked causes must be identical (else: status, top cause and symptoms).
fn compare(
    rules: &Rules,
    file: &[Prepared],
    live: &[Prepared],
    tol: Tolerance,
    strict: bool,
    worst: &mut Worst,
) -> Vec<String> {
    let mut problems = Vec::new();
    let targets =
        |p: &[Prepared]| -> Vec<_> { p.iter().map(|p| p.snapshot.target.clone()).collect() };
    if targets(file) != targets(live) {
        problems.push(format!(
            "targets differ:\n  file {:?}\n  live {:?}",
            targets(file),
            targets(live)
        ));
        return problems;
    }
    let catalog = &rules.catalog;
    for (f, l) in file.iter().zip(live) {
        let who = format!("{:?}", f.snapshot.target.labels);
        for (i, def) in catalog.signals().iter().enumerate() {
            let (a, b) = (f.snapshot.signal_at(i), l.snapshot.signal_at(i));
            match (a, b) {
                (None, None) => {}
                (Some(a), Some(b)) => {
                    let mut pairs = vec![("value", a.value, b.value)];
                    match (&a.stats, &b.stats) {
                        (Some(x), Some(y)) => pairs.extend([
                            ("min", x.min, y.min),
                            ("mean", x.mean, y.mean),
                            ("max", x.max, y.max),
                        ]),
                        (None, None) => {}
                        _ => problems.push(format!("{who} {}: stats on one side only", def.name)),
                    }
                    // A quantile's floor is a bucket bound: rates a little apart (VictoriaMetrics')
                    // may put the rank in the next bucket, and no tolerance says how close
                    // that is. Prometheus (strict) must give the same bound.
                    if !strict && def.name.ends_with("_floor_seconds") {
                        continue;
                    }
                    for (what, x, y) in pairs {
                        let rel = (x - y).abs() / x.abs().max(y.abs()).max(1e-300);
                        if (x - y).abs() > tol.abs && rel > worst.rel {
                            worst.rel = rel;
                            worst.at = format!("{who} {} {what}: file {x}, live {y}", def.name);
                        }
                        if !close(x, y, tol) {
                            problems.push(format!(
                                "{who} {} {what}: file {x}, live {y} (source {})",
                                def.name, b.source
                            ));
                        }
                    }
                }
                (a, b) => problems.push(format!(
                    "{who} {}: file {:?}, live {:?} (live hint {:?})",
                    def.name,
                    a.map(|s| s.value),
                    b.map(|s| s.value),
                    l.snapshot.hint_at(i)
                )),
            }
        }
        for (i, def) in catalog.facts().iter().enumerate() {
            let (a, b) = (f.snapshot.fact_at(i), l.snapshot.fact_at(i));
            let same = match (a.map(|x| &x.value), b.map(|x| &x.value)) {
                (Some(FactValue::Number(x)), Some(FactValue::Number(y))) => close(*x, *y, tol),
                (x, y) => x == y,
            };
            if !same {
                problems.push(format!(
                    "{who} fact {}: file {:?}, live {:?}",
                    def.name,
                    a.map(|x| &x.value),
                    b.map(|x| &x.value)
                ));
            }
        }
        let (df, dl) = (diagnose(rules, f), diagnose(rules, l));
        if df.status != dl.status {
            problems.push(format!(
                "{who} status: file {:?}, live {:?}",
                df.status, dl.status
            ));
        }
        let causes =
            |d: &Diagnosis| -> Vec<String> { d.causes.iter().map(|c| c.id.clone()).collect() };
        let symptoms = |d: &Diagnosis| -> BTreeSet<String> {
            d.symptoms.iter().map(|s| s.id.clone()).collect()
        };
        if causes(&df).first() != causes(&dl).first() {
            problems.push(format!(
                "{who} top cause: file {:?}, live {:?}",
                causes(&df),
                causes(&dl)
            ));
        }
        if strict && causes(&df) != causes(&dl) {
            problems.push(format!(
                "{who} ranked causes: file {:?}, live {:?}",
                causes(&df),
                causes(&dl)
            ));
        }
        if symptoms(&df) != symptoms(&dl) {
            problems.push(format!(
                "{who} symptoms: file {:?}, live {:?}",
                symptoms(&df),
                symptoms(&dl)
            ));
        }
        let unchecked = |d: &Diagnosis| -> BTreeMap<String, Vec<String>> {
            d.unchecked
                .iter()
                .map(|u| (u.rule.clone(), u.missing.clone()))
                .collect()
        };
        if strict && f.notes != l.notes {
            problems.push(format!(
                "{who} notes: file {:?}, live {:?}",
                f.notes, l.notes
            ));
        }
        if strict && unchecked(&df) != unchecked(&dl) {
            problems.push(format!(
                "{who} not checked: file {:?}, live {:?}",
                unchecked(&df),
                unchecked(&dl)
            ));
        }
    }
    problems
}

/// Backfills `fixture` into Prometheus, triages it live and compares with the file reader.
fn parity_with_prometheus(fixture: &str, engine_args: Option<&str>) -> LiveResult {
    let rules = rules();
    let opts = options(engine_args);
    let file = from_file(fixture, &opts, &rules);
    let prom = Prometheus::start_with(&fixture_text(fixture));
    let started = Instant::now();
    let result = live(&prom.url, &opts, &rules);
    let wall = started.elapsed();
    assert!(result.errors.is_empty(), "{fixture}: {:#?}", result.errors);
    let mut worst = Worst::default();
    let problems = compare(
        &rules,
        &file,
        &result.prepared,
        PROMETHEUS,
        true,
        &mut worst,
    );
    eprintln!(
        "{fixture}: {} targets, {} signals, {} queries in {wall:?} (slowest {:?}); largest difference {:.3e} ({})",
        result.prepared.len(),
        result.prepared.iter().map(|p| p.snapshot.signal_count()).sum::<usize>(),
        result.queries,
        result.slowest_query,
        worst.rel,
        worst.at
    );
    assert!(
        problems.is_empty(),
        "{fixture}: live triage differs from the file reader:\n{}",
        problems.join("\n")
    );
    result
}

#[test]
fn parity_kv_cache_exhaustion() {
    let r = parity_with_prometheus(
        "kv_cache_exhaustion",
        Some("vllm serve Qwen/Qwen2.5-7B-Instruct"),
    );
    assert_eq!(r.prepared.len(), 1);
}

#[test]
fn parity_small_batch_limit() {
    parity_with_prometheus(
        "small_batch_limit",
        Some("vllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 16"),
    );
}

#[test]
fn parity_sglang_kv_cache_exhaustion() {
    parity_with_prometheus(
        "sglang_kv_cache_exhaustion",
        Some("python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct"),
    );
}

#[test]
fn parity_tgi_queue_backlog() {
    parity_with_prometheus(
        "tgi_queue_backlog",
        Some("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct"),
    );
}

#[test]
fn parity_triton_kv_cache_exhaustion() {
    parity_with_prometheus("triton_kv_cache_exhaustion", None);
}

/// A four-model Triton repository (ensemble -> preprocessing, tensorrt_llm, postprocessing) at 4
/// client requests per second, streaming 200 tokens each: every request counts once, at the
/// ensemble; queue time is the engine model's; the tokenizer and detokenizer are their own share;
/// a replica with no failure series still has a mean end-to-end time. Live triage against real
/// Prometheus agrees with the file reader on all of it.
#[test]
fn parity_triton_ensemble_counts_each_request_once() {
    let rules = rules();
    // (fixture, e2e mean at the ensemble, frontend share range, failure series present)
    let cases = [
        ("triton_ensemble_healthy", 3.0625, (0.0, 0.05), false),
        // 4 successes and 0.01 rejections per second share the successes' request time.
        (
            "triton_ensemble_detokenizer_bottleneck",
            5.0025 * 4.0 / 4.01,
            (0.35, 0.45),
            true,
        ),
    ];
    for (fixture, e2e, (share_lo, share_hi), failures) in cases {
        let live = parity_with_prometheus(fixture, None);
        let file = from_file(fixture, &options(None), &rules);
        for (how, p) in [("file", &file[0]), ("live", &live.prepared[0])] {
            let get = |name: &str| {
                p.snapshot
                    .signal(&rules.catalog, name)
                    .unwrap_or_else(|| panic!("{fixture} {how}: no {name}"))
            };
            let within = |name: &str, want: f64, rel: f64| {
                let v = get(name).value;
                eprintln!("{fixture} {how}: {name} = {v} (want {want})");
                assert!(
                    (v - want).abs() <= rel * want,
                    "{fixture} {how}: {name} = {v}, want {want} ± {}%",
                    rel * 100.0
                );
            };
            // The client rate, not 4 + 4 + 4 + 800 calls per second summed over the models.
            within("requests_per_second", 4.0, 0.02);
            within("e2e_mean_seconds", e2e, 0.02);
            // The tensorrt_llm model's 4 ms, not the ensemble's 0.1 ms nor a mix.
            within("queue_time_mean_seconds", 0.004, 0.02);
            let share = get("frontend_time_share_ratio").value;
            assert!(
                (share_lo..share_hi).contains(&share),
                "{fixture} {how}: frontend_time_share_ratio {share}"
            );
        }
        let source = &file[0]
            .snapshot
            .signal(&rules.catalog, "e2e_mean_seconds")
            .unwrap()
            .source;
        assert!(source.contains("entry model `ensemble`"), "{source}");
        assert_eq!(
            source.contains("`nv_inference_request_failure` has no series"),
            !failures,
            "{source}"
        );
    }
}

/// `--fact triton_entry_model` names the entry model outright, in both readers.
#[test]
fn triton_entry_model_fact_names_the_model() {
    let rules = rules();
    let fixture = "triton_ensemble_healthy";
    let mut opts = options(None);
    opts.facts = vec![("triton_entry_model".into(), "tensorrt_llm".into())];
    let prom = Prometheus::start_with(&fixture_text(fixture));
    let live = live(&prom.url, &opts, &rules);
    let file = from_file(fixture, &opts, &rules);
    for p in [&file[0], &live.prepared[0]] {
        let e2e = p
            .snapshot
            .signal(&rules.catalog, "e2e_mean_seconds")
            .unwrap();
        assert!(
            (e2e.value - 3.0).abs() < 0.01,
            "{}: {}",
            e2e.value,
            e2e.source
        );
    }
}

#[test]
fn parity_llamacpp_small_batch_limit() {
    parity_with_prometheus(
        "llamacpp_small_batch_limit",
        Some("llama-server -m m.gguf -np 4 -ngl 99"),
    );
}

/// A fleet of four replicas, each with its GPU and host exporters: the same four targets, the
/// same diagnoses; with one replica or four, the same number of queries; a selector picks one
/// replica and restricts the engine's queries to it.
#[test]
fn parity_fleet_mixed_and_a_fixed_number_of_queries() {
    let rules = rules();
    let fleet = parity_with_prometheus("fleet_mixed", None);
    assert_eq!(fleet.prepared.len(), 4);
    let single = {
        let prom = Prometheus::start_with(&fixture_text("kv_cache_exhaustion"));
        live(&prom.url, &options(None), &rules)
    };
    assert_eq!(single.prepared.len(), 1);
    assert_eq!(
        single.queries, fleet.queries,
        "the number of queries depends on the adapters present, not on the fleet"
    );

    let prom = Prometheus::start_with(&fixture_text("fleet_mixed"));
    let mut opts = options(None);
    opts.selector = Some(Selector::parse(r#"pod="vllm-2""#).unwrap());
    let file = from_file("fleet_mixed", &opts, &rules);
    let picked = live(&prom.url, &opts, &rules);
    assert_eq!(picked.prepared.len(), 1);
    assert_eq!(picked.queries, fleet.queries);
    let mut worst = Worst::default();
    let problems = compare(
        &rules,
        &file,
        &picked.prepared,
        PROMETHEUS,
        true,
        &mut worst,
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let kv = picked.prepared[0]
        .snapshot
        .signal(&rules.catalog, "kv_cache_usage_ratio")
        .unwrap();
    assert!(
        kv.source.contains(r#"instance=~"gpu-node-3:8000""#),
        "engine queries are restricted to the selected replica: {}",
        kv.source
    );

    opts.selector = Some(Selector::parse(r#"pod="nowhere""#).unwrap());
    let err = prepare_from_prometheus(&rules, &LiveOptions::new(&prom.url), &opts).unwrap_err();
    assert!(
        format!("{err:#}").contains("--selector matches none of the 4 targets"),
        "{err:#}"
    );
}

/// A corpus case prepared from its recording and, backfilled into a fresh Prometheus, live,
/// with the options `eval` gives it.
fn file_and_live(rules: &Rules, path: &std::path::Path) -> (Vec<Prepared>, Vec<Prepared>) {
    let spec = llm_doctor::score::corpus::load_case(path).unwrap();
    let recording = path.with_file_name(&spec.recording);
    let text = llm_doctor::source::file::read_text(&recording).unwrap();
    let name = recording.display().to_string();
    let set = llm_doctor::source::file::parse_inputs(&[(name, text.clone())]).unwrap();
    let mut opts = llm_doctor::score::corpus::case_options(&spec, &set).unwrap();
    opts.at_ms = opts.at_ms.or(set.newest_ms());
    let file = pipeline::prepare(&set, rules, &opts).unwrap();
    let prom = Prometheus::start_with(&text);
    (file, live(&prom.url, &opts, rules).prepared)
}

/// Every corpus case, triaged live, gets the file reader's status and ranked causes for each
/// of its targets: what `eval` scores is what an on-call user triaging Prometheus sees.
#[test]
fn every_corpus_case_gets_the_file_verdict_live() {
    let rules = rules();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let cases = llm_doctor::score::corpus::discover(&root).unwrap();
    let started = Instant::now();
    let mut problems = Vec::new();
    for path in &cases {
        let (file, live) = file_and_live(&rules, path);
        let verdicts = |p: &[Prepared]| -> Vec<_> {
            p.iter()
                .map(|p| {
                    let d = diagnose(&rules, p);
                    let causes: Vec<String> = d.causes.iter().map(|c| c.id.clone()).collect();
                    (d.status, causes)
                })
                .collect()
        };
        let (f, l) = (verdicts(&file), verdicts(&live));
        if f != l {
            problems.push(format!("{}: file {f:?}, live {l:?}", path.display()));
        }
    }
    eprintln!(
        "{} corpus cases triaged live in {:?}",
        cases.len(),
        started.elapsed()
    );
    assert!(cases.len() >= 160, "{} cases", cases.len());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The signals live triage once got wrong on corpus runs equal the file reader's: the window
/// minimum and maximum of a framebuffer ratio on an engine that died holding its memory (taken
/// of the ratio at each sample, not of its parts), the queued share that tells overloads from
/// bursts, and the batch scaling that says more slots only slow each sequence (computed from
/// raw samples). And the replica's own CPU wait per CPU second, from cAdvisor series joined by
/// pod only (the neighbour's pod on the same node, far more pressed, must not join), and the
/// arrivals' dispersion that tells a burst of arrivals from random ones and the share of
/// them served at the rate they came (raw samples too).
#[test]
fn corpus_signals_live_triage_once_missed_equal_the_files() {
    let rules = rules();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    // How often each signal was compared with a value on both sides.
    let mut compared: BTreeMap<&str, usize> = BTreeMap::new();
    for case in [
        "reports/report-sglang-eagle-mem-fraction-oom",
        "reports/report-pegainfer-prefill-budget-burst",
        "llamacpp/llamacpp-fresh4-overload-long-answers",
        "llamacpp/llamacpp-fresh5-burst-np4",
        "llamacpp/llamacpp-overload-np4",
        "llamacpp/llamacpp-fresh20-pinned-apart-np2-45pct-2w",
        "vidur/vidur-fresh10-llama3-8b-a100-burst-cv5",
    ] {
        let (file, live) = file_and_live(&rules, &root.join(format!("{case}.yaml")));
        assert_eq!(file.len(), live.len(), "{case}: targets");
        for (f, l) in file.iter().zip(&live) {
            for signal in [
                "gpu_memory_used_ratio",
                "queued_share_ratio",
                "batch_scaling_efficiency_ratio",
                "replica_cpu_wait_ratio",
                "arrival_dispersion_index",
                "served_share_ratio",
                "host_cpu_pegged_core_share_ratio",
            ] {
                let value = |p: &Prepared| {
                    let v = p.snapshot.signal(&rules.catalog, signal)?;
                    Some((v.value, v.stats.as_ref().map(|s| (s.min, s.max))))
                };
                let (a, b) = (value(f), value(l));
                assert_eq!(
                    a.is_some(),
                    b.is_some(),
                    "{case} {signal}: file {a:?}, live {b:?}"
                );
                if let (Some((x, xs)), Some((y, ys))) = (a, b) {
                    *compared.entry(signal).or_default() += 1;
                    assert!((x - y).abs() <= 1e-9, "{case} {signal}: file {x}, live {y}");
                    if let (Some((x0, x1)), Some((y0, y1))) = (xs, ys) {
                        assert!(
                            (x0 - y0).abs() <= 1e-9 && (x1 - y1).abs() <= 1e-9,
                            "{case} {signal} min, max: file {x0}, {x1}, live {y0}, {y1}"
                        );
                    }
                }
            }
        }
    }
    // Absent on both sides would pass unseen: each signal must have been compared.
    assert_eq!(compared.len(), 7, "{compared:?}");
}

/// Without any engine, each exporter host is a target of its own (GPU and host checks only),
/// as in the file reader.
#[test]
fn parity_without_an_engine() {
    let rules = rules();
    let text: String = fixture_text("kv_cache_exhaustion")
        .lines()
        .filter(|l| !l.contains("vllm") && !l.starts_with("process_"))
        .map(|l| format!("{l}\n"))
        .collect();
    let opts = options(None);
    let set = llm_doctor::source::file::parse_inputs(&[("exporters.om".to_string(), text.clone())])
        .unwrap();
    let file = pipeline::prepare(&set, &rules, &opts).unwrap();
    let prom = Prometheus::start_with(&text);
    let result = live(&prom.url, &opts, &rules);
    assert!(result.errors.is_empty(), "{:#?}", result.errors);
    assert!(result
        .prepared
        .iter()
        .all(|p| p.snapshot.target.engine.is_none()));
    let mut worst = Worst::default();
    let problems = compare(
        &rules,
        &file,
        &result.prepared,
        PROMETHEUS,
        true,
        &mut worst,
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// VictoriaMetrics: the same targets and verdicts; values within its looser tolerance.
fn parity_with_victoria(fixture: &str, engine_args: Option<&str>) {
    let rules = rules();
    let opts = options(engine_args);
    let file = from_file(fixture, &opts, &rules);
    let vm = VictoriaMetrics::start_with(&fixture_text(fixture));
    let result = live(&vm.url, &opts, &rules);
    assert!(result.errors.is_empty(), "{fixture}: {:#?}", result.errors);
    let mut worst = Worst::default();
    let problems = compare(&rules, &file, &result.prepared, VICTORIA, false, &mut worst);
    eprintln!(
        "victoria-metrics {fixture}: {} queries (slowest {:?}); largest difference {:.3e} ({})",
        result.queries, result.slowest_query, worst.rel, worst.at
    );
    assert!(
        problems.is_empty(),
        "{fixture} on VictoriaMetrics differs from the file reader:\n{}",
        problems.join("\n")
    );
}

#[test]
fn victoria_metrics_kv_cache_exhaustion() {
    parity_with_victoria(
        "kv_cache_exhaustion",
        Some("vllm serve Qwen/Qwen2.5-7B-Instruct"),
    );
}

#[test]
fn victoria_metrics_fleet_mixed() {
    parity_with_victoria("fleet_mixed", None);
}

// ----- Degraded, not broken -----

/// What the proxy does with a query.
#[derive(Clone, Copy, Debug)]
enum Treatment {
    Forward,
    /// Prometheus' answer to a bad query.
    Http400,
    /// VictoriaMetrics' answer to a bad query.
    Http422,
    /// No answer for this long.
    Stall(Duration),
    /// `401 Unauthorized`, as an authenticating proxy answers.
    Http401,
}

/// A proxy in front of a real Prometheus on 127.0.0.1: each query gets the treatment `rule`
/// gives it; every request's head is kept. Stopped on drop.
struct Proxy {
    url: String,
    heads: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    fn start(upstream: u16, rule: fn(&str) -> Treatment) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (heads, stop) = (heads.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut handlers = Vec::new();
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { break };
                    let heads = heads.clone();
                    handlers.push(std::thread::spawn(move || {
                        let _ = serve(stream, upstream, rule, &heads);
                    }));
                }
                for h in handlers {
                    let _ = h.join();
                }
            })
        };
        Proxy {
            url: format!("http://{addr}"),
            heads,
            stop,
            addr,
            thread: Some(thread),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One request per connection: read it, treat it, answer, close.
fn serve(
    mut client: TcpStream,
    upstream: u16,
    rule: fn(&str) -> Treatment,
    heads: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    client.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = client.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..]).to_string();
    heads.lock().unwrap().push(head);
    let query = reqwest::Url::parse(&format!("http://x/?{body}"))
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "query")
                .map(|(_, v)| v.to_string())
        })
        .unwrap_or_default();
    let reply = |status: &str, json: &str| {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
            json.len()
        )
    };
    let answer = match rule(&query) {
        Treatment::Forward => {
            let mut up = TcpStream::connect(("127.0.0.1", upstream))?;
            write!(
                up,
                "POST /api/v1/query HTTP/1.1\r\nHost: 127.0.0.1:{upstream}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )?;
            let mut out = Vec::new();
            up.read_to_end(&mut out)?;
            out
        }
        Treatment::Http400 => reply(
            "400 Bad Request",
            r#"{"status":"error","errorType":"bad_data","error":"1:1: parse error: injected by the test"}"#,
        )
        .into_bytes(),
        Treatment::Http422 => reply(
            "422 Unprocessable Entity",
            r#"{"status":"error","errorType":"422","error":"cannot execute query: injected by the test"}"#,
        )
        .into_bytes(),
        Treatment::Stall(d) => {
            std::thread::sleep(d);
            return Ok(());
        }
        Treatment::Http401 => reply("401 Unauthorized", r#"{"status":"error","error":"unauthorized"}"#)
            .into_bytes(),
    };
    client.write_all(&answer)?;
    client.flush()
}

fn faulty(query: &str) -> Treatment {
    // Discovery names every metric the signals read: it is left alone, the signals fail.
    if query.starts_with("count by") {
        Treatment::Forward
    } else if query.contains("time_to_first_token") {
        Treatment::Http400
    } else if query.contains("kv_cache_usage_perc[") {
        Treatment::Http422
    } else if query.contains("num_requests_running[") {
        Treatment::Stall(Duration::from_secs(3))
    } else {
        Treatment::Forward
    }
}

/// Failing queries cost their signals only: they are unknown, listed in `errors`, and the
/// rest is diagnosed. Credentials and extra headers reach the server on every query.
#[test]
fn failed_queries_degrade_the_triage_without_breaking_it() {
    let rules = rules();
    let prom = Prometheus::start_with(&fixture_text("kv_cache_exhaustion"));
    let proxy = Proxy::start(prom.port, faulty);
    let live_opts = LiveOptions {
        auth: PromAuth {
            bearer: Some("s3cret".to_string()),
            headers: vec![("X-Scope-OrgID".to_string(), "team-a".to_string())],
            ..Default::default()
        },
        timeout: Duration::from_secs(1),
        ..LiveOptions::new(&proxy.url)
    };
    let opts = options(Some("vllm serve Qwen/Qwen2.5-7B-Instruct"));
    let started = Instant::now();
    let result = prepare_from_prometheus(&rules, &live_opts, &opts).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(result.prepared.len(), 1);
    let errors = result.errors.join("\n");
    for (signal, why) in [
        (
            "ttft_p99_seconds",
            "HTTP 400 bad_data: 1:1: parse error: injected by the test",
        ),
        ("ttft_mean_seconds", "HTTP 400"),
        (
            "kv_cache_usage_ratio",
            "HTTP 422 422: cannot execute query: injected by the test",
        ),
        ("running_requests", "no answer within 1s"),
    ] {
        assert!(
            result
                .errors
                .iter()
                .any(|e| e.contains(&format!("vllm signal {signal}")) && e.contains(why)),
            "{signal} ({why}) not in errors:\n{errors}"
        );
    }
    let snapshot = &result.prepared[0].snapshot;
    let c = &rules.catalog;
    for gone in [
        "ttft_p99_seconds",
        "kv_cache_usage_ratio",
        "running_requests",
    ] {
        assert!(
            snapshot.signal(c, gone).is_none(),
            "{gone} should be unknown"
        );
        let hint = snapshot
            .hint_at(c.signal(gone).unwrap())
            .unwrap_or_default();
        assert!(hint.contains("the query failed"), "{gone}: {hint}");
    }
    for kept in [
        "queue_depth",
        "preemptions_per_second",
        "gpu_memory_used_ratio",
        "e2e_p99_seconds",
    ] {
        assert!(snapshot.signal(c, kept).is_some(), "{kept} should be known");
    }
    // The diagnosis goes on: what needs the lost signals is not checked, the rest is judged.
    let d = diagnose(&rules, &result.prepared[0]);
    assert!(
        d.unchecked
            .iter()
            .any(|u| u.missing.contains(&"kv_cache_usage_ratio".to_string())),
        "{:#?}",
        d.unchecked
    );
    assert!(!d.symptoms.is_empty() || !d.causes.is_empty(), "{d:#?}");

    let heads = proxy.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), result.queries);
    for head in &heads {
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("authorization: bearer s3cret"), "{head}");
        assert!(lower.contains("x-scope-orgid: team-a"), "{head}");
    }
}

#[test]
fn basic_auth_reaches_the_server() {
    let rules = rules();
    let prom = Prometheus::start_with(&fixture_text("kv_cache_exhaustion"));
    let proxy = Proxy::start(prom.port, |_| Treatment::Forward);
    let live_opts = LiveOptions {
        auth: PromAuth {
            basic: Some(("user".to_string(), "pass".to_string())),
            ..Default::default()
        },
        ..LiveOptions::new(&proxy.url)
    };
    let result = prepare_from_prometheus(&rules, &live_opts, &options(None)).unwrap();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let heads = proxy.heads.lock().unwrap().clone();
    assert!(!heads.is_empty());
    for head in heads {
        // base64("user:pass")
        assert!(
            head.to_ascii_lowercase()
                .contains("authorization: basic dxnlcjpwyxnz"),
            "{head}"
        );
    }
}

/// A closed port, a server that refuses every query, and a bad CA file are errors that say
/// what is wrong, not empty diagnoses.
#[test]
fn unreachable_or_refusing_prometheus_is_an_error() {
    let rules = rules();
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let err = prepare_from_prometheus(&rules, &LiveOptions::new(&url), &options(None)).unwrap_err();
    let text = format!("{err:#}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        text.contains(&format!("Prometheus at {url} is unreachable")),
        "{text}"
    );
    assert!(text.to_ascii_lowercase().contains("connect"), "{text}");

    let prom = Prometheus::start_with(&fixture_text("kv_cache_exhaustion"));
    let proxy = Proxy::start(prom.port, |_| Treatment::Http401);
    let err =
        prepare_from_prometheus(&rules, &LiveOptions::new(&proxy.url), &options(None)).unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("answered no discovery query"), "{text}");
    assert!(text.contains("HTTP 401"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("ca.pem");
    std::fs::write(&pem, "not a certificate\n").unwrap();
    for (path, want) in [
        (pem.clone(), "holds no PEM certificate"),
        (dir.path().join("missing.pem"), "reading the CA file"),
    ] {
        let live_opts = LiveOptions {
            auth: PromAuth {
                ca_file: Some(path),
                ..Default::default()
            },
            ..LiveOptions::new("https://127.0.0.1:1")
        };
        let err = prepare_from_prometheus(&rules, &live_opts, &options(None)).unwrap_err();
        assert!(format!("{err:#}").contains(want), "{err:#}");
    }
}

/// A single replica's triage against the local Prometheus: its wall time against the slowest
/// query it issued (all queries run concurrently, so the triage should cost little more).
#[test]
fn single_replica_triage_time() {
    let rules = rules();
    let prom = Prometheus::start_with(&fixture_text("kv_cache_exhaustion"));
    let opts = options(None);
    // Warm up Prometheus' caches and the connection setup once.
    let _ = live(&prom.url, &opts, &rules);
    let mut runs = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let r = live(&prom.url, &opts, &rules);
        runs.push((started.elapsed(), r.slowest_query, r.queries));
    }
    runs.sort();
    let (wall, slowest, queries) = runs[runs.len() / 2];
    eprintln!(
        "single replica: {queries} queries, median wall {wall:?}, slowest query {slowest:?}, ratio {:.2}",
        wall.as_secs_f64() / slowest.as_secs_f64()
    );
    assert!(wall < Duration::from_secs(5), "{wall:?}");
}

// ---- The command line against real servers ----------------------------------------------------

fn cli(args: &[&str]) -> (i32, String, String) {
    crate::support::outcome(&crate::support::run(args))
}

fn top_causes(json: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["target"]["labels"]["pod"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                t["causes"][0]["id"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect()
}

#[test]
fn cli_diagnose_prometheus_matches_the_file_and_fails_cleanly_when_unreachable() {
    let prom = Prometheus::start_with(&fixture_text("fleet_mixed"));
    let (code, live_json, err) = cli(&[
        "diagnose",
        "--prometheus",
        &prom.url,
        "--at",
        "1796083807",
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "{err}");
    let (_, file_json, _) = cli(&["diagnose", "fixtures/fleet_mixed.om.gz", "--format", "json"]);
    assert_eq!(top_causes(&live_json), top_causes(&file_json));
    assert_eq!(top_causes(&live_json).len(), 4);

    let (code, json, err) = cli(&[
        "diagnose",
        "--prometheus",
        &prom.url,
        "--at",
        "2026-12-01T00:10:07Z",
        "--selector",
        r#"pod="vllm-2""#,
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        top_causes(&json),
        vec![("vllm-2".to_string(), "kv_cache_exhaustion".to_string())]
    );

    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{closed}");
    let (code, _, err) = cli(&["diagnose", "--prometheus", &url, "--at", "1796083807"]);
    assert_eq!(code, 2);
    assert!(err.contains(&closed.to_string()), "{err}");
    let (code, _, err) = cli(&[
        "diagnose",
        "fixtures/healthy_busy.om.gz",
        "--prometheus",
        &prom.url,
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot be combined"), "{err}");
}

#[test]
fn cli_record_from_prometheus_round_trips_to_the_same_diagnosis() {
    let prom = Prometheus::start_with(&fixture_text("fleet_mixed"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("vllm-3.om");
    let record = |out: &std::path::Path| {
        cli(&[
            "record",
            "--prometheus",
            &prom.url,
            "--selector",
            r#"pod="vllm-3""#,
            "--from",
            "1796083200",
            "--to",
            "1796083807",
            "--step",
            "15s",
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let (code, stdout, err) = record(&out);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.starts_with("wrote "), "{stdout}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.ends_with("# EOF\n"));
    assert!(
        text.contains(r#"Hostname="gpu-node-4""#),
        "the replica's GPU series come along"
    );
    assert!(!text.contains(r#"pod="vllm-2""#), "other replicas stay out");
    let (_, json, err) = cli(&["diagnose", out.to_str().unwrap(), "--format", "json"]);
    assert_eq!(
        top_causes(&json),
        vec![("vllm-3".to_string(), "small_batch_limit".to_string())],
        "{err}"
    );
    // The recording imports into Prometheus too.
    let again = Prometheus::start_with(&text);
    let (_, json, err) = cli(&[
        "diagnose",
        "--prometheus",
        &again.url,
        "--at",
        "1796083800",
        "--format",
        "json",
    ]);
    assert_eq!(
        top_causes(&json),
        vec![("vllm-3".to_string(), "small_batch_limit".to_string())],
        "{err}"
    );
    // Named `.gz`, the same recording is written gzip-compressed.
    let gz = dir.path().join("vllm-3.om.gz");
    let (code, _, err) = record(&gz);
    assert_eq!(code, 0, "{err}");
    let mut unzipped = String::new();
    let file = std::fs::File::open(&gz).unwrap();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut unzipped)
        .unwrap();
    assert_eq!(unzipped, text);
    assert!(!dir.path().join(".vllm-3.om.gz.partial").exists());
}

/// The hit replicas of a postmortem's JSON and their leading causes, sorted.
fn hit_causes(json: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let mut out: Vec<(String, String)> = v["fleet"]["hit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["target"].as_str().unwrap().to_string(),
                h["cause"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn cli_postmortem_from_prometheus_history_matches_the_recording() {
    let prom = Prometheus::start_with(&fixture_text("fleet_mixed"));
    let (from, to) = ("1796083500", "1796083800");
    let (code, json, err) = cli(&[
        "postmortem",
        "--prometheus",
        &prom.url,
        "--from",
        from,
        "--to",
        to,
        "--step",
        "15s",
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "incidents found: {err}");
    assert!(err.contains("range queries in"), "says what it sent: {err}");
    let from_prometheus = hit_causes(&json);
    let (_, json, err) = cli(&[
        "postmortem",
        "fixtures/fleet_mixed.om.gz",
        "--from",
        from,
        "--to",
        to,
        "--format",
        "json",
        "-q",
    ]);
    assert_eq!(hit_causes(&json), from_prometheus, "{err}");
    let pods: Vec<&str> = from_prometheus.iter().map(|(t, _)| t.as_str()).collect();
    assert!(
        pods.iter().any(|p| p.contains("vllm-2")) && pods.iter().any(|p| p.contains("vllm-3")),
        "{from_prometheus:?}"
    );
    // A Prometheus that is not there is an error naming it.
    let (code, _, err) = cli(&[
        "postmortem",
        "--prometheus",
        "http://127.0.0.1:9",
        "--from",
        from,
        "--to",
        to,
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("127.0.0.1:9"), "{err}");
}

#[test]
fn an_answer_larger_than_the_limit_is_an_error_naming_the_limit() {
    let prom = Prometheus::start_with(&fixture_text("fleet_mixed"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.om");
    let run = |limit: &str| {
        let args = [
            "record",
            "--prometheus",
            &prom.url,
            "--from",
            "1796083200",
            "--to",
            "1796083807",
            "--out",
            out.to_str().unwrap(),
        ];
        let (code, _, err) = outcome(&run_env(&args, ("LLM_DOCTOR_MAX_ANSWER_MB", limit)));
        (code, err)
    };
    let (code, err) = run("0.01");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("larger than 0.01 MiB") && err.contains("LLM_DOCTOR_MAX_ANSWER_MB"),
        "{err}"
    );
    let (code, err) = run("1024");
    assert_eq!(code, 0, "{err}");
}

/// A range too large for one answer is asked in pieces, whether the server refuses it (a real
/// Prometheus with a lower `--query.max-samples` than the whole range needs), the answer
/// budget cuts it or the answer is larger than we read: the postmortem is the one a single
/// answer gives, byte for byte (over a range that does not end on a step).
#[test]
fn a_range_too_large_for_one_answer_is_asked_in_pieces_with_the_same_result() {
    let text = fixture_text("fleet_mixed");
    let whole = Prometheus::start_with(&text);
    // fleet_mixed has 828 vLLM series: 21 steps of them are 17,388 samples, 6 are 4,968.
    let strict = Prometheus::start_with_args(&text, &["--query.max-samples=5000"], None);
    let args = |url: &str| {
        [
            "postmortem",
            "--prometheus",
            url,
            "--from",
            "1796083500",
            "--to",
            "1796083807",
            "--step",
            "15s",
            "--format",
            "json",
        ]
        .map(str::to_string)
    };
    let run = |url: &str, env: Option<(&str, &str)>| {
        let a = args(url);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        outcome(&match env {
            None => crate::support::run(&a),
            Some(var) => crate::support::run_env(&a, var),
        })
    };
    let queries = |err: &str| -> usize {
        let at = err
            .find(" range queries")
            .unwrap_or_else(|| panic!("{err}"));
        let n = err[..at].rsplit(' ').next().unwrap();
        n.parse().unwrap()
    };
    let (code, one, err) = run(&whole.url, None);
    assert_eq!(code, 1, "incidents found: {err}");
    let sent = queries(&err);
    let (code, refused, err) = run(&strict.url, None);
    assert_eq!(code, 1, "{err}");
    assert_eq!(refused, one, "halves after the server's refusal: {err}");
    assert!(
        queries(&err) > sent,
        "more, smaller queries than {sent}: {err}"
    );
    let budget = ("LLM_DOCTOR_MAX_ANSWER_POINTS", "2000");
    let (code, budgeted, err) = run(&whole.url, Some(budget));
    assert_eq!(code, 1, "{err}");
    assert_eq!(budgeted, one, "pieces of at most 2,000 points: {err}");
    assert!(queries(&err) > sent + 5, "{err}");
    // An answer larger than we read (its series miscounted, say) is asked again in halves.
    let (code, capped, err) = run(&whole.url, Some(("LLM_DOCTOR_MAX_ANSWER_MB", "0.3")));
    assert_eq!(code, 1, "{err}");
    assert_eq!(capped, one, "answers of at most 0.3 MiB: {err}");
    assert!(queries(&err) > sent, "{err}");
}

/// A large range answer is read in runs of series on several cores; the runs are cut where
/// the layout real servers write says one series ends. A real Prometheus's and a real
/// VictoriaMetrics' answers take that path, warnings and all, and give the set a whole read
/// gives.
#[test]
fn real_range_answers_read_in_pieces_equal_a_whole_read() {
    use llm_doctor::source::file::api_json::{parse_with_warnings, read_in_pieces};
    let text = fixture_text("fleet_mixed");
    let prom = Prometheus::start_with(&text);
    let vm = VictoriaMetrics::start_with(&text);
    let raw = r#"{__name__=~"vllm:.+|DCGM_.+"}"#;
    let answers = [
        (
            "prometheus",
            prom.query_range_text(raw, 1796083500.0, 1796083807.0, 15.0),
        ),
        (
            "victoria-metrics",
            vm.query_range_text(raw, 1796083500.0, 1796083807.0, 15.0),
        ),
    ];
    for (server, answer) in &answers {
        let whole = parse_with_warnings(answer, server).unwrap();
        assert!(whole.set.series.len() > 100, "{server}: {}", answer.len());
        for threads in [2, 3, 8] {
            let pieces = read_in_pieces(answer, server, threads)
                .unwrap_or_else(|| panic!("{server}'s answer is not read in pieces"));
            // As text: NaN is no value's equal, its own included.
            assert_eq!(
                format!("{pieces:?}"),
                format!("{whole:?}"),
                "{server}, {threads} threads"
            );
        }
    }
}

/// A range query the server refuses (here a real Prometheus over its sample limit) ends the
/// postmortem with the server's reason, the server and the query, not a panic or a partial
/// report: the answers are read and parsed as they arrive, each on its own.
#[test]
fn a_refused_range_query_ends_the_postmortem_with_the_servers_reason() {
    let prom = Prometheus::start_with_args(
        &fixture_text("fleet_mixed"),
        &["--query.max-samples=100"],
        None,
    );
    let (code, out, err) = cli(&[
        "postmortem",
        "--prometheus",
        &prom.url,
        "--from",
        "1796083500",
        "--to",
        "1796083807",
        "--format",
        "json",
    ]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(&prom.url) && err.contains("HTTP 422") && err.contains("too many samples"),
        "{err}"
    );
    assert!(err.contains("__name__=~"), "names the query: {err}");
}
