//! Benchmarks (`cargo bench`): evaluating the full playbook set on one snapshot, and reading and
//! diagnosing a 10-minute recording of a vLLM replica with 8 GPUs (about 3 MB).
//!
//! The recording is generated on first use by `scripts/gen_fixtures.py --bench` into
//! `target/bench/replica-8gpu.om` (deterministic), so it need not live in git.

use std::path::PathBuf;
use std::process::Command;

use divan::counter::BytesCount;
use divan::Bencher;
use llm_doctor::pipeline;
use llm_doctor::prepared::Options;
use llm_doctor::rules::load_rules;

fn main() {
    divan::main();
}

/// Where generated inputs live: `bench/` in the build's target directory (`CARGO_TARGET_DIR`
/// when set, else `target/` of the repository), never elsewhere in the tree.
fn bench_dir() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root.join(dir).join("bench"),
        None => root.join("target/bench"),
    }
}

/// A generated input under the target directory's `bench/`, made once by the fixture
/// generator with `args`.
fn generated(file: &str, args: &[&str]) -> (String, String) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path = bench_dir().join(file);
    if !path.exists() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let status = Command::new("python3")
            .arg(root.join("scripts/gen_fixtures.py"))
            .args(args)
            .arg(&path)
            .current_dir(&root)
            .status()
            .expect("python3 runs the fixture generator");
        assert!(status.success(), "generating {file} failed");
    }
    (
        path.display().to_string(),
        std::fs::read_to_string(&path).unwrap(),
    )
}

fn recording() -> (String, String) {
    generated("replica-8gpu.om", &["--bench"])
}

fn options() -> Options {
    Options {
        engine_args: Some(
            "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 8".into(),
        ),
        window_ms: 300_000,
        ..Options::default()
    }
}

/// (a) The engine alone: every symptom and cause evaluated and ranked on one snapshot.
#[divan::bench]
fn evaluate_playbooks(bencher: Bencher) {
    let rules = load_rules(None).unwrap();
    let input = recording();
    let set = llm_doctor::source::file::parse_inputs(&[input]).unwrap();
    let prepared = pipeline::prepare(&set, &rules, &options()).unwrap();
    let snapshot = &prepared[0].snapshot;
    let slos = rules.playbook.slo_values(&Default::default()).unwrap();
    bencher
        .bench(|| llm_doctor_engine::diagnose(&rules.playbook, divan::black_box(snapshot), &slos));
}

/// (a') The same on an incident: the kv_cache_exhaustion fixture, where causes fire and the
/// report carries evidence, chains and remediations.
#[divan::bench]
fn evaluate_playbooks_incident(bencher: Bencher) {
    let rules = load_rules(None).unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("fixtures/kv_cache_exhaustion.om.gz");
    let text = llm_doctor::source::file::read_text(&path).unwrap();
    let set =
        llm_doctor::source::file::parse_inputs(&[(path.display().to_string(), text)]).unwrap();
    let prepared = pipeline::prepare(
        &set,
        &rules,
        &Options {
            window_ms: 300_000,
            ..Options::default()
        },
    )
    .unwrap();
    let snapshot = &prepared[0].snapshot;
    let slos = rules.playbook.slo_values(&Default::default()).unwrap();
    let d = llm_doctor_engine::diagnose(&rules.playbook, snapshot, &slos);
    assert_eq!(d.causes[0].id, "kv_cache_exhaustion");
    bencher
        .bench(|| llm_doctor_engine::diagnose(&rules.playbook, divan::black_box(snapshot), &slos));
}

/// (b) End to end without I/O: parse the recording, compute signals, diagnose.
#[divan::bench(sample_count = 20)]
fn read_and_diagnose_recording(bencher: Bencher) {
    let rules = load_rules(None).unwrap();
    let input = recording();
    let bytes = input.1.len();
    let slos = rules.playbook.slo_values(&Default::default()).unwrap();
    bencher.counter(BytesCount::new(bytes)).bench(|| {
        let set = llm_doctor::source::file::parse_inputs(std::slice::from_ref(&input)).unwrap();
        let prepared = pipeline::prepare(&set, &rules, &options()).unwrap();
        llm_doctor_engine::diagnose(&rules.playbook, &prepared[0].snapshot, &slos)
    });
}

/// Parsing alone, to show where (b)'s time goes.
#[divan::bench(sample_count = 20)]
fn parse_recording(bencher: Bencher) {
    let input = recording();
    bencher
        .counter(BytesCount::new(input.1.len()))
        .bench(|| llm_doctor::source::file::parse_inputs(std::slice::from_ref(&input)).unwrap());
}

/// A fleet: one file with 100 vLLM replicas (each with its GPU and host), every one diagnosed.
#[divan::bench(sample_count = 10)]
fn read_and_diagnose_fleet_100(bencher: Bencher) {
    let rules = load_rules(None).unwrap();
    let input = generated("fleet-100.om", &["--fleet-bench", "100"]);
    let bytes = input.1.len();
    let slos = rules.playbook.slo_values(&Default::default()).unwrap();
    let opts = Options {
        window_ms: 300_000,
        ..Options::default()
    };
    bencher.counter(BytesCount::new(bytes)).bench(|| {
        let set = llm_doctor::source::file::parse_inputs(std::slice::from_ref(&input)).unwrap();
        let prepared = pipeline::prepare(&set, &rules, &opts).unwrap();
        assert_eq!(prepared.len(), 100);
        prepared
            .iter()
            .map(|p| llm_doctor_engine::diagnose(&rules.playbook, &p.snapshot, &slos))
            .collect::<Vec<_>>()
    });
}

/// A fleet of `n` replicas, 10 minutes at 15 s, gzip, streamed by the generator on first use.
fn fleet_file(n: usize) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path = bench_dir().join(format!("fleet-{n}-10m.om.gz"));
    if !path.exists() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let status = Command::new("python3")
            .arg(root.join("scripts/gen_fixtures.py"))
            .args(["--fleet-bench", &n.to_string()])
            .arg(&path)
            .args(["--hours", "0.1666667"])
            .current_dir(&root)
            .status()
            .expect("python3 runs the fixture generator");
        assert!(status.success(), "generating {} failed", path.display());
    }
    path
}

/// Fleets of 1 to 3,000 replicas after reading (as `diagnose` reads: two windows kept): split
/// into targets, join GPUs and hosts, compute signals, diagnose every replica. Divide by `n` for
/// the cost per replica.
#[divan::bench(args = [1, 100, 1000, 3000], sample_count = 5, sample_size = 1)]
fn prepare_and_diagnose_fleet(bencher: Bencher, n: usize) {
    use llm_doctor::source::file::{read_files, ReadOptions, Retention};
    // `cargo test --all-targets` runs each bench once in the unoptimised test profile: the
    // large fleets would take minutes there (and their files minutes to generate) and prove
    // nothing the small ones do not.
    if cfg!(debug_assertions) && n > 100 {
        bencher.bench(|| ());
        return;
    }
    let rules = load_rules(None).unwrap();
    let opts = Options {
        window_ms: 300_000,
        ..Options::default()
    };
    let read = read_files(
        &[fleet_file(n)],
        &ReadOptions {
            retention: Retention::LastWindow { keep_ms: 600_000 },
            ..ReadOptions::default()
        },
    )
    .unwrap();
    let slos = rules.playbook.slo_values(&Default::default()).unwrap();
    bencher.bench(|| {
        let prepared = pipeline::prepare(&read.set, &rules, &opts).unwrap();
        assert_eq!(prepared.len(), n);
        prepared
            .iter()
            .map(|p| llm_doctor_engine::diagnose(&rules.playbook, &p.snapshot, &slos))
            .collect::<Vec<_>>()
    });
}

/// What `diagnose FILE` does short of rendering, through the road every entry point shares:
/// `verdict::gather` streams the file into prepared targets, `verdict::judge_all` judges them
/// (a fleet on every core, worst first). A fleet of 100 replicas, 10 minutes at 15 s, gzip.
#[divan::bench(sample_count = 10)]
fn gather_and_judge_fleet_100(bencher: Bencher) {
    use llm_doctor::verdict;
    let rules = load_rules(None).unwrap();
    let files = [fleet_file(100)];
    let slos = rules.playbook.slo_values(&Default::default()).unwrap();
    let opts = Options {
        window_ms: 300_000,
        ..Options::default()
    };
    let sources = verdict::Sources {
        files: &files,
        scrape: &[],
        interval: std::time::Duration::from_secs(15),
        scrape_options: Default::default(),
        nvml: None,
        prometheus: None,
        quiet: true,
        request_fields: None,
    };
    bencher.bench(|| {
        let got = verdict::gather(&sources, &rules, &opts).unwrap();
        assert_eq!(got.prepared.len(), 100);
        verdict::judge_all(&rules.playbook, got.prepared, &slos, &[], &got.warnings)
    });
}
