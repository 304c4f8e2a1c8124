//! `--nvml`: GPU readings taken through NVML become dcgm-exporter series, which the dcgm adapter
//! and the real pipeline diagnose. No GPU is needed: recorded readings (tests/data/nvml/*.yaml)
//! replay through the same `GpuReader` trait as NVML, with a clock that only moves when slept
//! on; the CLI replays them through the `LLM_DOCTOR_NVML_READINGS` hook. The tests of the real
//! no-driver path skip themselves on a host where NVML loads.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use llm_doctor::pipeline;
use llm_doctor::prepared::{Options, Prepared};
use llm_doctor::signal::series::{MetricType, SeriesSet};
use llm_doctor::source::live::nvml::{
    collect, to_series_set, Clock, ClockEventReason, Collected, GpuInfo, GpuInventory, GpuProcess,
    GpuReader, GpuReading, NvmlError, NvmlReader, RecordedReader, Sampling, READINGS_ENV,
};
use llm_doctor_engine::report::{Diagnosis, Status};

use crate::support::{cause_ids, outcome, root};

/// 2026-12-01T00:00:00Z, where the fake clock starts.
const T0: i64 = 1_796_083_200_000;
const NO_DRIVER: &str = "NVML library not found (libnvidia-ml.so.1): run on a host with the NVIDIA driver, or scrape dcgm-exporter";

/// A clock that moves only when slept on: sampling takes no real time.
struct StepClock(i64);

impl Clock for StepClock {
    fn now_ms(&mut self) -> i64 {
        self.0
    }
    fn sleep(&mut self, d: Duration) {
        self.0 += d.as_millis() as i64;
    }
}

fn data(name: &str) -> PathBuf {
    root().join("tests/data/nvml").join(name)
}

/// Five readings of a recorded file, one second apart on the fake clock.
fn collect_file(name: &str) -> Collected {
    let mut reader = RecordedReader::from_path(&data(name)).unwrap();
    collect_from(&mut reader)
}

fn collect_from(reader: &mut dyn GpuReader) -> Collected {
    let sampling = Sampling {
        samples: 5,
        interval: Duration::from_secs(4),
    };
    collect(reader, &sampling, &mut StepClock(T0), "this-host").unwrap()
}

fn rules() -> llm_doctor::rules::Rules {
    llm_doctor::rules::load_rules(None).unwrap()
}

/// The real pipeline: targets, adapters (dcgm for these series), engine.
fn diagnose(set: &SeriesSet) -> Vec<(Prepared, Diagnosis)> {
    let rules = rules();
    let opts = Options {
        window_ms: 300_000,
        ..Default::default()
    };
    let slos = rules.playbook.slo_values(&BTreeMap::new()).unwrap();
    pipeline::prepare(set, &rules, &opts)
        .unwrap()
        .into_iter()
        .map(|p| {
            let d = llm_doctor_engine::diagnose(&rules.playbook, &p.snapshot, &slos);
            (p, d)
        })
        .collect()
}

fn only(set: &SeriesSet) -> (Prepared, Diagnosis) {
    let mut all = diagnose(set);
    assert_eq!(all.len(), 1, "one target expected");
    all.pop().unwrap()
}

fn signal(p: &Prepared, name: &str) -> Option<f64> {
    p.snapshot.signal(&rules().catalog, name).map(|v| v.value)
}

fn causes(d: &Diagnosis) -> Vec<&str> {
    d.causes.iter().map(|c| c.id.as_str()).collect()
}

fn held_notes(d: &Diagnosis, cause: &str) -> Vec<String> {
    d.causes
        .iter()
        .find(|c| c.id == cause)
        .unwrap()
        .evidence
        .iter()
        .filter(|e| e.result == Some(true))
        .filter_map(|e| e.note.clone())
        .collect()
}

fn close(got: Option<f64>, want: f64) -> bool {
    got.is_some_and(|g| (g - want).abs() < 1e-9)
}

// ---------------------------------------------------------------------------------------------
// Readings through the dcgm adapter and the playbooks

#[test]
fn thermal_throttling_fires_gpu_throttling() {
    let c = collect_file("thermal_throttle.yaml");
    let (p, d) = only(&c.set);
    assert!(close(signal(&p, "gpu_thermal_throttle_ratio"), 0.8));
    assert!(close(signal(&p, "gpu_power_throttle_ratio"), 0.0));
    assert!(close(signal(&p, "sm_clock_ratio"), 1386.0 / 1980.0));
    assert!(close(signal(&p, "gpu_utilization_ratio"), 0.9));
    // Conditions see the last reading; the window statistics keep the peak.
    assert!(close(signal(&p, "gpu_temperature_celsius"), 89.0));
    assert_eq!(causes(&d), ["gpu_throttling"]);
    let held = held_notes(&d, "gpu_throttling");
    for note in [
        "thermal slowdown",
        "the GPU runs hot",
        "SM clock well below its maximum",
    ] {
        assert!(held.iter().any(|n| n == note), "{note}: {held:?}");
    }
    assert!(!held.iter().any(|n| n == "power capping"), "{held:?}");
    // The GPU-only target is named after the host in the readings.
    assert_eq!(d.target.labels["host"], "gpu-node-7");
    assert_eq!(d.target.engine, None);
}

#[test]
fn power_capping_fires_gpu_throttling() {
    let c = collect_file("power_cap.yaml");
    let (p, d) = only(&c.set);
    assert!(close(signal(&p, "gpu_power_throttle_ratio"), 1.0));
    assert!(close(signal(&p, "gpu_thermal_throttle_ratio"), 0.0));
    assert!(close(signal(&p, "gpu_power_ratio"), 1.0));
    assert!(causes(&d).contains(&"gpu_throttling"), "{:?}", causes(&d));
    let held = held_notes(&d, "gpu_throttling");
    assert!(held.iter().any(|n| n == "power capping"), "{held:?}");
    assert!(
        held.iter().any(|n| n == "drawing its full power limit"),
        "{held:?}"
    );
    assert!(!held.iter().any(|n| n == "thermal slowdown"), "{held:?}");
}

#[test]
fn memory_near_full_fires_gpu_memory_pressure_and_oom() {
    let c = collect_file("memory_full.yaml");
    let (p, d) = only(&c.set);
    let ratio = signal(&p, "gpu_memory_used_ratio").unwrap();
    assert!((0.97..0.98).contains(&ratio), "{ratio}");
    assert!(
        causes(&d).contains(&"gpu_memory_pressure"),
        "{:?}",
        causes(&d)
    );
    assert!(!causes(&d).contains(&"gpu_throttling"));
    assert!(d.symptoms.iter().any(|s| s.id == "oom"), "{:?}", d.symptoms);
    assert_eq!(d.status, Status::Critical);
    assert!(
        c.notes.contains(
            &"NVML GPU 0 (NVIDIA H100 80GB HBM3): compute processes pid 5150 (76.4 GiB), pid 5151 (1.3 GiB)"
                .to_string()
        ),
        "{:?}",
        c.notes
    );
}

#[test]
fn an_uncorrectable_ecc_error_fires_gpu_fault() {
    let c = collect_file("ecc_error.yaml");
    let (p, d) = only(&c.set);
    // 2 new errors over 4 s of readings, extrapolated as Prometheus' increase() does.
    assert!(signal(&p, "gpu_ecc_uncorrectable_errors").unwrap() >= 2.0);
    assert!(causes(&d).contains(&"gpu_fault"), "{:?}", causes(&d));
    assert!(held_notes(&d, "gpu_fault").contains(&"uncorrectable ECC errors".to_string()));
    assert!(!causes(&d).contains(&"gpu_throttling"));
}

#[test]
fn a_flat_ecc_counter_is_no_fault() {
    // The thermal readings have 0 errors throughout: checked, and clear.
    let (p, d) = only(&collect_file("thermal_throttle.yaml").set);
    assert!(close(signal(&p, "gpu_ecc_uncorrectable_errors"), 0.0));
    assert!(!causes(&d).contains(&"gpu_fault"));
}

#[test]
fn an_idle_card_is_not_throttling() {
    let c = collect_file("idle.yaml");
    let (p, d) = only(&c.set);
    // Down-clocked to 17% with GPU_IDLE set, but nothing runs: not throttling, and decided so
    // (not merely unknown).
    assert!(signal(&p, "sm_clock_ratio").unwrap() < 0.2);
    assert!(close(signal(&p, "gpu_utilization_ratio"), 0.0));
    assert!(causes(&d).is_empty(), "{:?}", causes(&d));
    assert!(d.symptoms.is_empty());
    assert!(
        !d.unchecked.iter().any(|u| u.rule == "gpu_throttling"),
        "{:?}",
        d.unchecked
    );
    // No engine metrics: the serving symptoms stay unknown, so the verdict is not "healthy".
    assert_eq!(d.status, Status::Unknown);
    assert!(c.notes.contains(
        &"NVML GPU 0 (NVIDIA H100 80GB HBM3): clock-event reasons gpu_idle in 5 of 5".to_string()
    ));
    assert!(c
        .notes
        .contains(&"NVML GPU 0 (NVIDIA H100 80GB HBM3): no compute processes".to_string()));
}

/// One busy GPU whose every reading carries `mask`.
struct OneMask(u64);

impl GpuReader for OneMask {
    fn inventory(&mut self) -> Result<GpuInventory, NvmlError> {
        Ok(GpuInventory {
            hostname: Some("gpu-node-7".into()),
            driver_version: None,
            gpus: vec![GpuInfo {
                index: 0,
                max_sm_clock_mhz: Some(1980),
                ..GpuInfo::default()
            }],
        })
    }
    fn read(&mut self) -> Result<Vec<GpuReading>, NvmlError> {
        Ok(vec![GpuReading {
            gpu_utilization_percent: Some(90),
            sm_clock_mhz: Some(1980),
            throttle_reasons: Some(self.0),
            ..GpuReading::default()
        }])
    }
}

#[test]
fn every_throttle_reason_bit_reaches_the_dcgm_adapter() {
    // (bit, dcgm-exporter's clock_event label, counts as power throttling, as thermal)
    let cases = [
        (0x1, "gpu_idle", false, false),
        (0x2, "clocks_setting", false, false),
        (0x4, "power_cap", true, false),
        (0x8, "hw_slowdown", false, true),
        (0x10, "sync_boost", false, false),
        (0x20, "sw_thermal", false, true),
        (0x40, "hw_thermal", false, true),
        (0x80, "hw_power_brake", true, false),
        (0x100, "display_clocks", false, false),
        (0x200, "unknown_0x200", false, false),
        (1 << 40, "unknown_0x10000000000", false, false),
    ];
    for (bit, label, power, thermal) in cases {
        let reasons = ClockEventReason::decode(bit);
        assert_eq!(reasons.len(), 1);
        assert_eq!(reasons[0].label(), label);
        let c = collect_from(&mut OneMask(bit));
        assert_eq!(
            c.notes[0],
            format!("NVML GPU 0: clock-event reasons {label} in 5 of 5")
        );
        let (p, d) = only(&c.set);
        let share = |yes: bool| if yes { 1.0 } else { 0.0 };
        assert!(
            close(signal(&p, "gpu_power_throttle_ratio"), share(power)),
            "{label}"
        );
        assert!(
            close(signal(&p, "gpu_thermal_throttle_ratio"), share(thermal)),
            "{label}"
        );
        // Power capping alone, with the clocks at their maximum, is the GPU's regime under
        // load and costs nothing: only heat (or clocks well below their maximum) is throttling.
        let _ = power;
        assert_eq!(causes(&d).contains(&"gpu_throttling"), thermal, "{label}");
    }
    // Every reason at once, unknown bits included, in one bitmask series.
    let c = collect_from(&mut OneMask(0x3ff));
    let mask = c
        .set
        .iter_by_name("DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
        .next()
        .unwrap();
    assert!(mask.samples.iter().all(|s| s.value == 1023.0));
    assert_eq!(ClockEventReason::decode(0x3ff).len(), 10);
}

// ---------------------------------------------------------------------------------------------
// The mapping itself

#[test]
fn readings_map_to_dcgm_exporter_names_labels_and_units() {
    let inventory = GpuInventory {
        hostname: None,
        driver_version: Some("570.133.20".into()),
        gpus: vec![GpuInfo {
            index: 3,
            uuid: Some("GPU-aaaa".into()),
            pci_bus_id: Some("00000000:3B:00.0".into()),
            model_name: Some("NVIDIA L40S".into()),
            max_sm_clock_mhz: Some(2520),
        }],
    };
    let reading = GpuReading {
        index: 3,
        gpu_utilization_percent: Some(87),
        memory_utilization_percent: Some(41),
        memory_used_bytes: Some(3 << 30),
        memory_free_bytes: Some(1 << 30),
        memory_reserved_bytes: Some(512 << 20),
        memory_total_bytes: Some((4 << 30) + (512 << 20)),
        power_usage_mw: Some(300_500),
        enforced_power_limit_mw: Some(350_000),
        temperature_celsius: Some(77),
        sm_clock_mhz: Some(2100),
        throttle_reasons: Some(0x24),
        pcie_tx_kb_per_second: Some(1000),
        pcie_rx_kb_per_second: Some(250),
        ecc_uncorrected_volatile: Some(7),
        pcie_replay_counter: Some(3),
        processes: vec![GpuProcess {
            pid: 1,
            used_memory_bytes: Some(1),
        }],
        failed: Vec::new(),
    };
    let set = to_series_set(&inventory, &[(T0, vec![reading])], "node-b");
    let want = [
        ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 36.0),
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 7.0),
        ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 350.0),
        ("DCGM_FI_DEV_FB_FREE", 1024.0),
        ("DCGM_FI_DEV_FB_RESERVED", 512.0),
        ("DCGM_FI_DEV_FB_USED", 3072.0),
        ("DCGM_FI_DEV_GPU_TEMP", 77.0),
        ("DCGM_FI_DEV_GPU_UTIL", 87.0),
        ("DCGM_FI_DEV_MAX_SM_CLOCK", 2520.0),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", 41.0),
        ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 3.0),
        ("DCGM_FI_DEV_POWER_USAGE", 300.5),
        ("DCGM_FI_DEV_SM_CLOCK", 2100.0),
        ("DCGM_FI_PROF_PCIE_RX_BYTES", 256_000.0),
        ("DCGM_FI_PROF_PCIE_TX_BYTES", 1_024_000.0),
    ];
    let got: Vec<(&str, f64)> = set
        .series
        .iter()
        .map(|s| (s.name.as_str(), s.samples.to_vec()[0].value))
        .collect();
    assert_eq!(got, want);
    let labels = set.series[0].labels.to_string();
    assert_eq!(
        labels,
        r#"{DCGM_FI_DRIVER_VERSION="570.133.20",Hostname="node-b",UUID="GPU-aaaa",device="nvidia3",gpu="3",instance="node-b:nvml",job="nvml",modelName="NVIDIA L40S",pci_bus_id="00000000:3B:00.0"}"#
    );
    assert!(set
        .series
        .iter()
        .all(|s| s.samples.to_vec()[0].t_ms == Some(T0)));
    assert_eq!(
        set.family_type("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
        MetricType::Counter
    );
    assert_eq!(set.family_type("DCGM_FI_DEV_GPU_UTIL"), MetricType::Gauge);
    assert_eq!(
        set.family_type("DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
        MetricType::Counter
    );
    // Every name belongs to the dcgm adapter: one mapping, no second path.
    let rules = rules();
    for s in &set.series {
        assert_eq!(
            rules.adapters.owner(&s.name).map(|a| a.name.as_str()),
            Some("dcgm"),
            "{}",
            s.name
        );
    }
}

#[test]
fn a_recording_reads_back_to_the_same_series_and_diagnosis() {
    let c = collect_file("thermal_throttle.yaml");
    let text = llm_doctor::source::file::openmetrics::write(&c.set);
    assert!(text.ends_with("# EOF\n"));
    assert!(text.contains("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"));
    let back = llm_doctor::source::file::exposition::parse(&text, "nvml.om").unwrap();
    assert_eq!(back.series, c.set.series);
    let (_, before) = only(&c.set);
    let (_, after) = only(&back);
    assert_eq!(causes(&before), causes(&after));
    assert_eq!(before.status, after.status);
}

#[test]
fn local_gpus_join_the_local_replica() {
    // A vLLM replica scraped at 127.0.0.1:8000 while the GPUs were read: the host names differ
    // (an address against a host name), so the only replica takes the GPUs by elimination.
    let c = collect_file("thermal_throttle.yaml");
    let mut page = String::new();
    for k in 0..5 {
        let t = T0 + 1000 * k;
        let l = r#"{model_name="m",instance="127.0.0.1:8000",job="vllm"}"#;
        page.push_str(&format!(
            "vllm:num_requests_running{l} 8 {t}\nvllm:num_requests_waiting{l} 0 {t}\nvllm:kv_cache_usage_perc{l} 0.4 {t}\n"
        ));
    }
    let mut set = llm_doctor::source::file::exposition::parse(&page, "vllm.prom").unwrap();
    set.merge(c.set);
    let (p, d) = only(&set);
    assert_eq!(d.target.engine.as_deref(), Some("vllm"));
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("joined to the only replica")),
        "{:?}",
        p.notes
    );
    assert!(close(signal(&p, "gpu_thermal_throttle_ratio"), 0.8));
    assert!(causes(&d).contains(&"gpu_throttling"));
}

// ---------------------------------------------------------------------------------------------
// The command line

/// Runs `llm-doctor` from the repository root with the readings hook set (or unset for None).
fn run_with(readings: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_llm-doctor"));
    cmd.args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null());
    match readings {
        Some(p) => cmd.env(READINGS_ENV, p),
        None => cmd.env_remove(READINGS_ENV),
    };
    cmd.output().expect("the binary runs")
}

/// True (and says so) when this host has a working NVML, where the no-driver tests do not apply.
fn nvml_loads_here() -> bool {
    if NvmlReader::open().is_ok() {
        eprintln!("NVML loads on this host: skipping a no-driver test");
        return true;
    }
    false
}

fn json(out: &Output) -> (i32, serde_json::Value, String) {
    let (code, stdout, stderr) = outcome(out);
    let v = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"));
    (code, v, stderr)
}

#[test]
fn diagnose_nvml_without_a_driver_exits_2_and_says_what_to_do() {
    if nvml_loads_here() {
        return;
    }
    let (code, out, err) = outcome(&run_with(None, &["diagnose", "--nvml"]));
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(err, format!("error: {NO_DRIVER}\n"));
    assert!(out.is_empty());
}

#[test]
fn a_file_with_nvml_without_a_driver_is_still_diagnosed() {
    if nvml_loads_here() {
        return;
    }
    let (code, v, err) = json(&run_with(
        None,
        &[
            "diagnose",
            "fixtures/healthy_busy.om.gz",
            "--engine-args",
            "vllm serve Qwen/Qwen2.5-7B-Instruct",
            "--nvml",
            "--format",
            "json",
        ],
    ));
    // Healthy, but a source failed: exit 1, as for a failed scrape.
    assert_eq!(code, 1, "{err}");
    assert_eq!(v["errors"], serde_json::json!([NO_DRIVER]));
    assert_eq!(v["targets"][0]["status"], "healthy");
    assert_eq!(v["targets"][0]["target"]["engine"], "vllm");
}

#[test]
fn record_nvml_without_a_driver_exits_2() {
    if nvml_loads_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("gpus.om");
    let (code, _, err) = outcome(&run_with(
        None,
        &["record", "--nvml", "--out", out_file.to_str().unwrap()],
    ));
    assert_eq!(code, 2, "{err}");
    assert_eq!(err, format!("error: {NO_DRIVER}\n"));
    assert!(!out_file.exists());
}

#[test]
fn diagnose_nvml_on_recorded_readings_end_to_end() {
    let (code, v, err) = json(&run_with(
        Some(&data("thermal_throttle.yaml")),
        &[
            "diagnose",
            "--nvml",
            "--nvml-samples",
            "5",
            "--nvml-interval",
            "0",
            "--format",
            "json",
        ],
    ));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("read 1 GPU through NVML (5 readings each)"),
        "{err}"
    );
    assert_eq!(v["errors"], serde_json::json!([]));
    let t = &v["targets"][0];
    assert_eq!(t["target"]["labels"]["host"], "gpu-node-7");
    assert_eq!(cause_ids(t), ["gpu_throttling"]);
    let notes: Vec<&str> = t["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    for want in [
        "NVML GPU 0 (NVIDIA H100 80GB HBM3): clock-event reasons sw_thermal in 4 of 5, hw_thermal in 4 of 5",
        "NVML GPU 0 (NVIDIA H100 80GB HBM3): compute processes pid 4242 (71.0 GiB)",
        "dcgm: released dcgm-exporter field names (before DCGM 4.6)",
    ] {
        assert!(notes.contains(&want), "{want}: {notes:#?}");
    }
}

#[test]
fn a_failing_nvml_beside_a_file_goes_to_errors_and_gpu_checks_become_unknown() {
    // A curl'd vLLM page (no GPU series) and NVML failing to open.
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("vllm.prom");
    std::fs::write(
        &page,
        "vllm:num_requests_running{model_name=\"m\"} 8\nvllm:num_requests_waiting{model_name=\"m\"} 0\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.4\n",
    )
    .unwrap();
    let (code, v, err) = json(&run_with(
        Some(&data("driver_not_loaded.yaml")),
        &[
            "diagnose",
            page.to_str().unwrap(),
            "--nvml",
            "--format",
            "json",
        ],
    ));
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        v["errors"],
        serde_json::json!([NvmlError::DriverNotLoaded.to_string()])
    );
    let t = &v["targets"][0];
    assert_eq!(t["target"]["engine"], "vllm");
    let unchecked: Vec<&str> = t["unchecked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["rule"].as_str().unwrap())
        .collect();
    for rule in ["gpu_throttling", "gpu_fault"] {
        assert!(unchecked.contains(&rule), "{rule}: {unchecked:?}");
    }
    // NVML alone failing the same way is a usage error.
    let (code, _, err) = outcome(&run_with(
        Some(&data("driver_not_loaded.yaml")),
        &["diagnose", "--nvml"],
    ));
    assert_eq!(code, 2);
    assert_eq!(err, format!("error: {}\n", NvmlError::DriverNotLoaded));
}

#[test]
fn live_gpus_beside_an_old_recording_are_flagged() {
    let (_, v, err) = json(&run_with(
        Some(&data("thermal_throttle.yaml")),
        &[
            "diagnose",
            "fixtures/healthy_busy.om.gz",
            "--nvml",
            "--nvml-interval",
            "0",
            "--format",
            "json",
        ],
    ));
    let notes = v["targets"][0]["notes"].to_string();
    assert!(
        notes.contains("they do not describe the same time"),
        "{notes}{err}"
    );
}

#[test]
fn record_nvml_writes_dcgm_series_that_diagnose_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let om = dir.path().join("gpus.om");
    let (code, out, err) = outcome(&run_with(
        Some(&data("power_cap.yaml")),
        &[
            "record",
            "--nvml",
            // One reading per --interval (15 s) over the minute: 5, taken back to back here.
            "--duration",
            "1m",
            "--nvml-interval",
            "0",
            "--out",
            om.to_str().unwrap(),
        ],
    ));
    assert_eq!(code, 0, "{out}{err}");
    let text = std::fs::read_to_string(&om).unwrap();
    assert!(text.ends_with("# EOF\n"));
    assert!(text.contains("# TYPE DCGM_FI_DEV_CLOCKS_EVENT_REASONS gauge\n"));
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("DCGM_FI_DEV_POWER_USAGE{"))
            .count(),
        5
    );
    assert!(text.contains(r#"Hostname="gpu-node-7""#));
    assert!(text.contains(r#"job="nvml""#));

    let (code, v, err) = json(&run_with(
        None,
        &["diagnose", om.to_str().unwrap(), "--format", "json"],
    ));
    assert_eq!(code, 1, "{err}");
    assert!(cause_ids(&v["targets"][0]).contains(&"gpu_throttling".to_string()));
}

#[test]
fn record_needs_scrape_or_nvml() {
    let (code, _, err) = outcome(&run_with(None, &["record", "--out", "/dev/null"]));
    assert_eq!(code, 2);
    assert!(err.contains("--scrape") && err.contains("--nvml"), "{err}");
}

#[test]
fn bad_nvml_sampling_flags_are_refused() {
    let (code, _, err) = outcome(&run_with(
        Some(&data("idle.yaml")),
        &["diagnose", "--nvml", "--nvml-samples", "0"],
    ));
    assert_eq!(code, 2);
    assert!(err.contains("--nvml-samples must be at least 1"), "{err}");
    let (code, _, err) = outcome(&run_with(
        Some(&data("idle.yaml")),
        &["diagnose", "--nvml", "--nvml-interval", "soon"],
    ));
    assert_eq!(code, 2);
    assert!(err.contains("--nvml-interval"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// --scrape and --nvml together, against a real HTTP server on 127.0.0.1

/// Serves a small vLLM page, its generation counter growing with every request; stopped on drop.
struct VllmServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl VllmServer {
    fn start() -> VllmServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(AtomicUsize::new(0));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming().take(50) {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(s) = stream {
                        answer(s, hits.fetch_add(1, Ordering::SeqCst));
                    }
                }
            })
        };
        VllmServer {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for VllmServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn answer(mut stream: TcpStream, n: usize) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(k) => head.extend_from_slice(&buf[..k]),
        }
    }
    let l = r#"{model_name="m"}"#;
    let body = format!(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{l} 8\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{l} 0\n\
         # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{l} 0.4\n\
         # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{l} {}\n",
        1000 + 500 * n
    );
    let _ = stream.write_all(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
}

#[test]
fn scrape_and_nvml_diagnose_the_replica_with_its_gpus() {
    let server = VllmServer::start();
    let url = format!("http://{}/metrics", server.addr);
    let (code, v, err) = json(&run_with(
        Some(&data("thermal_throttle.yaml")),
        &[
            "diagnose",
            "--scrape",
            &url,
            "--interval",
            "1s",
            "--nvml",
            "--nvml-interval",
            "0",
            "--format",
            "json",
        ],
    ));
    assert_eq!(code, 1, "{err}");
    assert_eq!(v["errors"], serde_json::json!([]));
    let targets = v["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 1, "{v:#}");
    let t = &targets[0];
    assert_eq!(t["target"]["engine"], "vllm");
    assert!(
        cause_ids(t).contains(&"gpu_throttling".to_string()),
        "{t:#}"
    );
    let notes = t["notes"].to_string();
    assert!(notes.contains("joined to the only replica"), "{notes}");
    assert!(notes.contains("compute processes pid 4242"), "{notes}");
}

#[test]
fn record_scrape_and_nvml_into_one_file() {
    let server = VllmServer::start();
    let url = format!("http://{}/metrics", server.addr);
    let dir = tempfile::tempdir().unwrap();
    let om = dir.path().join("both.om");
    let (code, out, err) = outcome(&run_with(
        Some(&data("idle.yaml")),
        &[
            "record",
            "--scrape",
            &url,
            "--duration",
            "1s",
            "--interval",
            "1s",
            "--nvml",
            "--nvml-interval",
            "0",
            "--out",
            om.to_str().unwrap(),
        ],
    ));
    assert_eq!(code, 0, "{out}{err}");
    let text = std::fs::read_to_string(&om).unwrap();
    assert!(text.contains("vllm:generation_tokens_total{"), "{text}");
    assert!(text.contains("DCGM_FI_DEV_GPU_UTIL{"), "{text}");
    assert!(text.ends_with("# EOF\n"));
    let set = llm_doctor::source::file::exposition::parse(&text, "both.om").unwrap();
    assert!(set.has_timestamps);
}
