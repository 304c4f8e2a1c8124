//! GPUs read directly through NVML, for hosts without dcgm-exporter (`diagnose --nvml`,
//! `record --nvml`).
//!
//! # One code path: readings become dcgm-exporter series
//!
//! The readings are not mapped onto canonical signals here. They are emitted as a
//! [`SeriesSet`] under **dcgm-exporter's metric and label names**, so the dcgm adapter
//! (`rules/signals/dcgm.yaml`) computes every GPU signal from them exactly as it does from a
//! dcgm-exporter scrape: one mapping to review and test, thresholds that mean the same whatever
//! the source, and recordings (`record --nvml`) that read back through the same adapter and
//! import into Prometheus beside real dcgm-exporter data.
//!
//! | NVML call (nvml-wrapper 0.13)                        | series (unit)                                    |
//! |------------------------------------------------------|--------------------------------------------------|
//! | `utilization_rates().gpu` / `.memory`                | `DCGM_FI_DEV_GPU_UTIL` / `DCGM_FI_DEV_MEM_COPY_UTIL` (%) |
//! | `memory_info()` used / free / reserved (bytes)       | `DCGM_FI_DEV_FB_USED` / `_FB_FREE` / `_FB_RESERVED` (MiB) |
//! | `power_usage()` / `enforced_power_limit()` (mW)      | `DCGM_FI_DEV_POWER_USAGE` / `DCGM_FI_DEV_ENFORCED_POWER_LIMIT` (W) |
//! | `temperature(Gpu)` (°C)                              | `DCGM_FI_DEV_GPU_TEMP`                           |
//! | `clock_info(SM)` / `max_clock_info(SM)` (MHz)        | `DCGM_FI_DEV_SM_CLOCK` / `DCGM_FI_DEV_MAX_SM_CLOCK` |
//! | `current_throttle_reasons_strict()` (bitmask)        | `DCGM_FI_DEV_CLOCKS_EVENT_REASONS` (same bits)   |
//! | `pcie_throughput(Send/Receive)` (KB/s)               | `DCGM_FI_PROF_PCIE_TX_BYTES` / `_RX_BYTES` (bytes/s = KB/s × 1024) |
//! | `total_ecc_errors(Uncorrected, Volatile)`            | `DCGM_FI_DEV_ECC_DBE_VOL_TOTAL` (counter)        |
//! | `pcie_replay_counter()`                              | `DCGM_FI_DEV_PCIE_REPLAY_COUNTER` (counter)      |
//! | `running_compute_processes()`                        | notes in the report (pid and memory)             |
//!
//! Labels are dcgm-exporter's: `gpu` (index), `UUID`, `pci_bus_id`, `device="nvidia<N>"`,
//! `modelName`, `Hostname` (this host's name), `DCGM_FI_DRIVER_VERSION` when known, plus
//! `job="nvml"` and `instance="<hostname>:nvml"`, so target joining (`crate::target`) attaches
//! the GPUs to the replica on this host, or to the only replica, as it does dcgm-exporter's.
//!
//! Each GPU is read [`Sampling::samples`] times spread over [`Sampling::interval`] (default
//! 5 samples in 5 s), each sample stamped with the time it was taken, so that one idle tick
//! does not decide a verdict: the throttle-reason share and the gauges' window statistics are
//! computed over all samples. Reads an older GPU or driver does not support (ECC on a GeForce,
//! say) are left out, so the adapter reports the signal as unknown with its hint; other failed
//! reads (a GPU fallen off the bus) become notes.
//!
//! # No driver, no crash
//!
//! NVML sits behind the [`GpuReader`] trait. [`NvmlReader`] loads `libnvidia-ml.so.1` at run
//! time (nvml-wrapper always compiles and links); without it [`NvmlReader::open`] returns
//! [`NvmlError::LibraryNotFound`], whose message tells the user what to do. The CLI turns that
//! into exit code 2 when NVML is the only source, and into an `errors` entry otherwise.
//! [`RecordedReader`] replays readings from a YAML or JSON file (format on
//! [`RecordedReader::from_str`]), so tests need no GPU.
//!
//! # Test and debug hook
//!
//! When the environment variable `LLM_DOCTOR_NVML_READINGS` names a readings file, [`open`]
//! (and so `--nvml` on the command line) replays that file instead of loading NVML. It is meant
//! for tests and for reproducing a user's readings; it is not a documented user feature.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::signal::series::{Labels, MetricType, Sample, Series, SeriesSet};

/// Environment variable naming a readings file that replaces NVML (test and debug hook).
pub const READINGS_ENV: &str = "LLM_DOCTOR_NVML_READINGS";

/// The `job` label of NVML series.
pub const JOB: &str = "nvml";

/// Why NVML could not be read. Messages name NVML and say what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NvmlError {
    /// `libnvidia-ml.so.1` is not on this host (no NVIDIA driver, or a container without the
    /// NVIDIA runtime).
    #[error("NVML library not found (libnvidia-ml.so.1): run on a host with the NVIDIA driver, or scrape dcgm-exporter")]
    LibraryNotFound,
    /// The library exists but could not be loaded (wrong architecture, broken install).
    #[error("NVML library libnvidia-ml.so.1 could not be loaded: {detail}; check the NVIDIA driver installation, or scrape dcgm-exporter")]
    LibraryLoad {
        /// The loader's message.
        detail: String,
    },
    /// The library loaded but the kernel driver is not running.
    #[error("NVML: the NVIDIA driver is not loaded (nvidia-smi fails the same way): load it, or scrape dcgm-exporter")]
    DriverNotLoaded,
    /// The user may not open the GPU device files.
    #[error(
        "NVML: permission denied: run as a user who may open /dev/nvidia*, or scrape dcgm-exporter"
    )]
    NoPermission,
    /// NVML works but lists no GPU.
    #[error("NVML found no GPUs on this host")]
    NoGpus,
    /// Any other NVML failure, with the call that failed.
    #[error("NVML: {call} failed: {detail}")]
    Call {
        /// The NVML call, e.g. `device_count`.
        call: String,
        /// NVML's message.
        detail: String,
    },
    /// A recorded-readings file could not be used.
    #[error("NVML readings `{path}`: {detail}")]
    Readings {
        /// The file.
        path: String,
        /// What is wrong with it.
        detail: String,
    },
}

/// What does not change while sampling: one GPU's identity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GpuInfo {
    /// NVML index (dcgm-exporter's `gpu` label, and `device="nvidia<index>"`).
    pub index: u32,
    /// `GPU-…` UUID.
    pub uuid: Option<String>,
    /// PCI bus id, e.g. `00000000:18:00.0`.
    pub pci_bus_id: Option<String>,
    /// Product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub model_name: Option<String>,
    /// Maximum SM clock (MHz).
    pub max_sm_clock_mhz: Option<u32>,
}

/// The GPUs of a host, read once before sampling.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GpuInventory {
    /// The host the GPUs are in, when the reader knows it better than this machine's name
    /// (recorded readings); None for a live reader.
    pub hostname: Option<String>,
    /// The driver version (dcgm-exporter's `DCGM_FI_DRIVER_VERSION` label).
    pub driver_version: Option<String>,
    /// The GPUs, by index.
    pub gpus: Vec<GpuInfo>,
}

/// A process using a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuProcess {
    /// Process id (as the driver sees it: the host's PID namespace).
    pub pid: u32,
    /// GPU memory it holds (bytes), when the driver reports it.
    pub used_memory_bytes: Option<u64>,
}

/// One GPU at one moment, in NVML's own units. `None` means the value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GpuReading {
    /// NVML index of the GPU.
    pub index: u32,
    /// Share of time a kernel ran (%).
    pub gpu_utilization_percent: Option<u32>,
    /// Share of time device memory was read or written (%).
    pub memory_utilization_percent: Option<u32>,
    /// Framebuffer allocated (bytes).
    pub memory_used_bytes: Option<u64>,
    /// Framebuffer free (bytes).
    pub memory_free_bytes: Option<u64>,
    /// Framebuffer reserved by the driver (bytes).
    pub memory_reserved_bytes: Option<u64>,
    /// Framebuffer installed (bytes).
    pub memory_total_bytes: Option<u64>,
    /// Power draw (mW).
    pub power_usage_mw: Option<u32>,
    /// Power limit in force (mW).
    pub enforced_power_limit_mw: Option<u32>,
    /// GPU die temperature (°C).
    pub temperature_celsius: Option<u32>,
    /// Current SM clock (MHz).
    pub sm_clock_mhz: Option<u32>,
    /// Current clock-event (throttle) reasons, NVML's bitmask (see [`ClockEventReason`]).
    pub throttle_reasons: Option<u64>,
    /// PCIe transmit throughput (KB/s).
    pub pcie_tx_kb_per_second: Option<u32>,
    /// PCIe receive throughput (KB/s).
    pub pcie_rx_kb_per_second: Option<u32>,
    /// Uncorrected ECC errors since the driver loaded.
    pub ecc_uncorrected_volatile: Option<u64>,
    /// PCIe link replays (retries) since the driver loaded.
    pub pcie_replay_counter: Option<u64>,
    /// Running compute processes.
    pub processes: Vec<GpuProcess>,
    /// Reads that failed for a reason other than "not supported", as `what: why`.
    pub failed: Vec<String>,
}

/// A source of GPU readings: NVML itself, or recorded readings in tests.
pub trait GpuReader {
    /// The GPUs and what does not change while sampling.
    fn inventory(&mut self) -> Result<GpuInventory, NvmlError>;
    /// Every GPU now, one reading each.
    fn read(&mut self) -> Result<Vec<GpuReading>, NvmlError>;
}

// ---------------------------------------------------------------------------------------------
// Clock-event (throttle) reasons

/// One bit of NVML's clock-event (throttle) reasons, named as dcgm-exporter's `clock_event`
/// label names it (reference/engine-metrics.md §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClockEventReason {
    /// 0x1: nothing is running (benign).
    GpuIdle,
    /// 0x2: limited by the applications-clocks setting.
    ClocksSetting,
    /// 0x4: the power-capping algorithm lowers clocks.
    SwPowerCap,
    /// 0x8: hardware slowdown (2× or more): temperature, power brake or fast power trigger.
    HwSlowdown,
    /// 0x10: held back by another GPU in its sync-boost group.
    SyncBoost,
    /// 0x20: software thermal slowdown.
    SwThermal,
    /// 0x40: hardware thermal slowdown (2× or more).
    HwThermal,
    /// 0x80: external power brake (2× or more).
    HwPowerBrake,
    /// 0x100: display clock setting (benign).
    DisplayClocks,
    /// A bit this version does not know (the value is the bit).
    Unknown(u64),
}

impl ClockEventReason {
    /// The known reasons, in bit order.
    pub const KNOWN: [ClockEventReason; 9] = [
        ClockEventReason::GpuIdle,
        ClockEventReason::ClocksSetting,
        ClockEventReason::SwPowerCap,
        ClockEventReason::HwSlowdown,
        ClockEventReason::SyncBoost,
        ClockEventReason::SwThermal,
        ClockEventReason::HwThermal,
        ClockEventReason::HwPowerBrake,
        ClockEventReason::DisplayClocks,
    ];

    /// The bit in NVML's mask.
    pub fn bit(self) -> u64 {
        match self {
            ClockEventReason::GpuIdle => 0x1,
            ClockEventReason::ClocksSetting => 0x2,
            ClockEventReason::SwPowerCap => 0x4,
            ClockEventReason::HwSlowdown => 0x8,
            ClockEventReason::SyncBoost => 0x10,
            ClockEventReason::SwThermal => 0x20,
            ClockEventReason::HwThermal => 0x40,
            ClockEventReason::HwPowerBrake => 0x80,
            ClockEventReason::DisplayClocks => 0x100,
            ClockEventReason::Unknown(bit) => bit,
        }
    }

    /// dcgm-exporter's `clock_event` label value (`power_cap`, `hw_thermal`, ...);
    /// `unknown_0x200` for an unknown bit.
    pub fn label(self) -> String {
        match self {
            ClockEventReason::GpuIdle => "gpu_idle".into(),
            ClockEventReason::ClocksSetting => "clocks_setting".into(),
            ClockEventReason::SwPowerCap => "power_cap".into(),
            ClockEventReason::HwSlowdown => "hw_slowdown".into(),
            ClockEventReason::SyncBoost => "sync_boost".into(),
            ClockEventReason::SwThermal => "sw_thermal".into(),
            ClockEventReason::HwThermal => "hw_thermal".into(),
            ClockEventReason::HwPowerBrake => "hw_power_brake".into(),
            ClockEventReason::DisplayClocks => "display_clocks".into(),
            ClockEventReason::Unknown(bit) => format!("unknown_{bit:#x}"),
        }
    }

    /// Every reason set in `mask`, in bit order; each unknown bit separately.
    pub fn decode(mask: u64) -> Vec<ClockEventReason> {
        (0..64)
            .map(|i| 1u64 << i)
            .filter(|bit| mask & bit != 0)
            .map(|bit| {
                Self::KNOWN
                    .into_iter()
                    .find(|r| r.bit() == bit)
                    .unwrap_or(ClockEventReason::Unknown(bit))
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Sampling

/// How many readings to take, over how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampling {
    /// Readings per GPU (at least one).
    pub samples: usize,
    /// Time from the first reading to the last; the readings are spread evenly over it.
    pub interval: Duration,
}

impl Default for Sampling {
    /// 5 readings in 5 s.
    fn default() -> Self {
        Sampling {
            samples: 5,
            interval: Duration::from_secs(5),
        }
    }
}

/// Time for the sampler: the system clock, or a fake one in tests.
pub trait Clock {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&mut self) -> i64;
    /// Waits `d`.
    fn sleep(&mut self, d: Duration);
}

/// The system clock and real sleeps.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&mut self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }

    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// What sampling produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Collected {
    /// The readings as dcgm-exporter series (see the module docs).
    pub set: SeriesSet,
    /// Processes, clock-event reasons seen, failed reads: for the report.
    pub notes: Vec<String>,
    /// The `Hostname` label given to the series.
    pub hostname: String,
    /// GPUs read.
    pub gpus: usize,
    /// Readings taken per GPU.
    pub samples: usize,
}

/// Takes `sampling.samples` readings spread evenly over `sampling.interval` (reading `k` at
/// `k × interval / (samples − 1)` after the first, on a fixed schedule so slow reads do not
/// shift later ones) and turns them into dcgm-exporter series labelled with `hostname` (or the
/// inventory's own host name). Timestamps come from `clock` and strictly increase, so even an
/// interval of zero keeps every reading.
///
/// Fails when the inventory or the first reading fails, or when there is no GPU; a later
/// reading that fails is skipped and noted.
pub fn collect(
    reader: &mut dyn GpuReader,
    sampling: &Sampling,
    clock: &mut dyn Clock,
    hostname: &str,
) -> Result<Collected, NvmlError> {
    let inventory = reader.inventory()?;
    if inventory.gpus.is_empty() {
        return Err(NvmlError::NoGpus);
    }
    let n = sampling.samples.max(1);
    let step_ms = if n > 1 {
        sampling.interval.as_millis() as i64 / (n as i64 - 1)
    } else {
        0
    };
    let mut taken: Vec<(i64, Vec<GpuReading>)> = Vec::with_capacity(n);
    let mut notes = Vec::new();
    let start = clock.now_ms();
    let mut last_t = i64::MIN;
    for k in 0..n {
        if k > 0 {
            let due = start + step_ms * k as i64;
            let now = clock.now_ms();
            if due > now {
                clock.sleep(Duration::from_millis((due - now) as u64));
            }
        }
        let result = reader.read();
        let t = clock.now_ms().max(last_t.saturating_add(1));
        last_t = t;
        match result {
            Ok(readings) => taken.push((t, readings)),
            Err(e) if k == 0 => return Err(e),
            Err(e) => notes.push(format!("NVML reading {} of {n} failed: {e}", k + 1)),
        }
    }
    let hostname = inventory
        .hostname
        .clone()
        .unwrap_or_else(|| hostname.to_string());
    let set = to_series_set(&inventory, &taken, &hostname);
    let mut all_notes = readings_notes(&inventory, &taken);
    all_notes.extend(notes);
    Ok(Collected {
        set,
        notes: all_notes,
        hostname,
        gpus: inventory.gpus.len(),
        samples: taken.len(),
    })
}

/// Opens the GPU reader the CLI uses: the readings file named by [`READINGS_ENV`] when set
/// (test and debug hook), else NVML.
pub fn open() -> Result<Box<dyn GpuReader>, NvmlError> {
    match std::env::var_os(READINGS_ENV) {
        Some(p) if !p.is_empty() => Ok(Box::new(RecordedReader::from_path(Path::new(&p))?)),
        _ => Ok(Box::new(NvmlReader::open()?)),
    }
}

/// [`open`] then [`collect`] with the system clock and this host's name: what `--nvml` does.
pub fn collect_live(sampling: &Sampling) -> Result<Collected, NvmlError> {
    let mut reader = open()?;
    collect(
        reader.as_mut(),
        sampling,
        &mut SystemClock,
        &local_hostname(),
    )
}

/// This machine's host name (Linux: `/proc/sys/kernel/hostname`), else `$HOSTNAME`, else
/// `localhost`.
pub fn local_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".to_string())
}

/// Whether a diagnosed target is the one NVML's GPUs were joined to: the only target, or the
/// one on `hostname` (its `host` label, or the host part of its `instance`).
pub fn is_local_target(labels: &BTreeMap<String, String>, hostname: &str, targets: usize) -> bool {
    if targets == 1 {
        return true;
    }
    let host = hostname.to_ascii_lowercase();
    let same = |v: &str| v.to_ascii_lowercase() == host;
    labels.get("host").is_some_and(|h| same(h))
        || labels
            .get("instance")
            .is_some_and(|i| same(i.rsplit_once(':').map_or(i.as_str(), |(h, _)| h)))
}

// ---------------------------------------------------------------------------------------------
// Readings → dcgm-exporter series

const MIB: f64 = 1024.0 * 1024.0;

/// The fields dcgm-exporter declares as counters; the rest are gauges.
const COUNTERS: [&str; 2] = [
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
];

/// Turns timestamped readings (ms since the Unix epoch) into dcgm-exporter series; see the
/// module docs for the names, units and labels. Values a reading lacks are left out. Pure.
pub fn to_series_set(
    inventory: &GpuInventory,
    readings: &[(i64, Vec<GpuReading>)],
    hostname: &str,
) -> SeriesSet {
    let mut series: BTreeMap<(&'static str, Labels), Vec<Sample>> = BTreeMap::new();
    let mut labels_of: BTreeMap<u32, Labels> = BTreeMap::new();
    for (t_ms, gpus) in readings {
        for r in gpus {
            let info = inventory.gpus.iter().find(|g| g.index == r.index);
            let labels = labels_of
                .entry(r.index)
                .or_insert_with(|| gpu_labels(r.index, info, inventory, hostname))
                .clone();
            let mut put = |name: &'static str, value: Option<f64>| {
                if let Some(value) = value {
                    series
                        .entry((name, labels.clone()))
                        .or_default()
                        .push(Sample {
                            t_ms: Some(*t_ms),
                            value,
                        });
                }
            };
            let f = |v: Option<u32>| v.map(f64::from);
            put("DCGM_FI_DEV_GPU_UTIL", f(r.gpu_utilization_percent));
            put("DCGM_FI_DEV_MEM_COPY_UTIL", f(r.memory_utilization_percent));
            let (used, free, reserved) = framebuffer(r);
            put("DCGM_FI_DEV_FB_USED", used.map(|b| b as f64 / MIB));
            put("DCGM_FI_DEV_FB_FREE", free.map(|b| b as f64 / MIB));
            put("DCGM_FI_DEV_FB_RESERVED", reserved.map(|b| b as f64 / MIB));
            put(
                "DCGM_FI_DEV_POWER_USAGE",
                f(r.power_usage_mw).map(|mw| mw / 1000.0),
            );
            put(
                "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
                f(r.enforced_power_limit_mw).map(|mw| mw / 1000.0),
            );
            put("DCGM_FI_DEV_GPU_TEMP", f(r.temperature_celsius));
            put("DCGM_FI_DEV_SM_CLOCK", f(r.sm_clock_mhz));
            put(
                "DCGM_FI_DEV_MAX_SM_CLOCK",
                f(info.and_then(|i| i.max_sm_clock_mhz)),
            );
            put(
                "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
                r.throttle_reasons.map(|m| m as f64),
            );
            put(
                "DCGM_FI_PROF_PCIE_TX_BYTES",
                f(r.pcie_tx_kb_per_second).map(|kb| kb * 1024.0),
            );
            put(
                "DCGM_FI_PROF_PCIE_RX_BYTES",
                f(r.pcie_rx_kb_per_second).map(|kb| kb * 1024.0),
            );
            put(
                "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                r.ecc_uncorrected_volatile.map(|n| n as f64),
            );
            put(
                "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
                r.pcie_replay_counter.map(|n| n as f64),
            );
        }
    }
    let mut set = SeriesSet::default();
    for ((name, labels), samples) in series {
        // dcgm-exporter declares every field a gauge except the counters.
        let ty = if COUNTERS.contains(&name) {
            MetricType::Counter
        } else {
            MetricType::Gauge
        };
        set.families.insert(name.to_string(), ty);
        set.series.push(Series {
            name: name.to_string(),
            labels,
            samples,
        });
    }
    set.normalize();
    set
}

fn gpu_labels(
    index: u32,
    info: Option<&GpuInfo>,
    inventory: &GpuInventory,
    hostname: &str,
) -> Labels {
    let mut pairs = vec![
        ("gpu".to_string(), index.to_string()),
        ("device".to_string(), format!("nvidia{index}")),
        ("Hostname".to_string(), hostname.to_string()),
        ("job".to_string(), JOB.to_string()),
        ("instance".to_string(), format!("{hostname}:{JOB}")),
    ];
    let optional = [
        ("UUID", info.and_then(|i| i.uuid.clone())),
        ("pci_bus_id", info.and_then(|i| i.pci_bus_id.clone())),
        ("modelName", info.and_then(|i| i.model_name.clone())),
        ("DCGM_FI_DRIVER_VERSION", inventory.driver_version.clone()),
    ];
    for (name, value) in optional {
        // An empty label value is the label being absent (Prometheus), so none is stored.
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            pairs.push((name.to_string(), v));
        }
    }
    Labels::new(pairs)
}

/// Used, free and reserved framebuffer bytes, deriving a missing free or reserved figure from
/// the total (`total = used + free + reserved`, NVML's `nvmlMemory_v2_t`).
fn framebuffer(r: &GpuReading) -> (Option<u64>, Option<u64>, Option<u64>) {
    let Some(used) = r.memory_used_bytes else {
        return (None, r.memory_free_bytes, r.memory_reserved_bytes);
    };
    let reserved =
        r.memory_reserved_bytes
            .or_else(|| match (r.memory_total_bytes, r.memory_free_bytes) {
                (Some(total), Some(free)) => Some(total.saturating_sub(used).saturating_sub(free)),
                (Some(_), None) => Some(0),
                _ => None,
            });
    let free = r.memory_free_bytes.or_else(|| {
        r.memory_total_bytes.map(|total| {
            total
                .saturating_sub(used)
                .saturating_sub(reserved.unwrap_or(0))
        })
    });
    (Some(used), free, reserved)
}

/// Notes for the report: per GPU, the clock-event reasons seen and in how many readings, the
/// compute processes of the last reading, and reads that failed.
pub fn readings_notes(
    inventory: &GpuInventory,
    readings: &[(i64, Vec<GpuReading>)],
) -> Vec<String> {
    let mut indices: Vec<u32> = readings
        .iter()
        .flat_map(|(_, gpus)| gpus.iter().map(|r| r.index))
        .collect();
    indices.sort_unstable();
    indices.dedup();
    let mut notes = Vec::new();
    for index in indices {
        let info = inventory.gpus.iter().find(|g| g.index == index);
        let name = match info.and_then(|i| i.model_name.as_deref()) {
            Some(m) => format!("NVML GPU {index} ({m})"),
            None => format!("NVML GPU {index}"),
        };
        let mine: Vec<&GpuReading> = readings
            .iter()
            .flat_map(|(_, gpus)| gpus.iter().filter(|r| r.index == index))
            .collect();

        let masks: Vec<u64> = mine.iter().filter_map(|r| r.throttle_reasons).collect();
        let mut counts: BTreeMap<ClockEventReason, usize> = BTreeMap::new();
        for m in &masks {
            for reason in ClockEventReason::decode(*m) {
                *counts.entry(reason).or_default() += 1;
            }
        }
        if !counts.is_empty() {
            let listed: Vec<String> = counts
                .iter()
                .map(|(r, c)| format!("{} in {c} of {}", r.label(), masks.len()))
                .collect();
            notes.push(format!("{name}: clock-event reasons {}", listed.join(", ")));
        }

        if let Some(last) = mine.last() {
            if last.processes.is_empty() {
                notes.push(format!("{name}: no compute processes"));
            } else {
                let mut procs = last.processes.clone();
                procs.sort_by(|a, b| {
                    b.used_memory_bytes
                        .cmp(&a.used_memory_bytes)
                        .then(a.pid.cmp(&b.pid))
                });
                let listed: Vec<String> = procs
                    .iter()
                    .map(|p| match p.used_memory_bytes {
                        Some(b) => format!("pid {} ({})", p.pid, human_bytes(b)),
                        None => format!("pid {} (memory not reported)", p.pid),
                    })
                    .collect();
                notes.push(format!("{name}: compute processes {}", listed.join(", ")));
            }
        }

        let mut failed: Vec<&str> = mine
            .iter()
            .flat_map(|r| r.failed.iter().map(String::as_str))
            .collect();
        failed.sort_unstable();
        failed.dedup();
        for f in failed {
            notes.push(format!("{name}: could not read {f}"));
        }
    }
    notes
}

fn human_bytes(b: u64) -> String {
    let gib = b as f64 / (MIB * 1024.0);
    if gib >= 1.0 {
        format!("{gib:.1} GiB")
    } else {
        format!("{:.0} MiB", b as f64 / MIB)
    }
}

// ---------------------------------------------------------------------------------------------
// The real reader

/// Reads the GPUs through NVML (`libnvidia-ml.so.1`, loaded at run time).
pub struct NvmlReader {
    nvml: nvml_wrapper::Nvml,
    count: u32,
}

impl std::fmt::Debug for NvmlReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlReader")
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

impl NvmlReader {
    /// Loads NVML and counts the GPUs. Without the library this is
    /// [`NvmlError::LibraryNotFound`]; see [`NvmlError`] for the others.
    pub fn open() -> Result<NvmlReader, NvmlError> {
        let nvml = nvml_wrapper::Nvml::init().map_err(|e| from_wrapper("init", e))?;
        let count = nvml
            .device_count()
            .map_err(|e| from_wrapper("device_count", e))?;
        Ok(NvmlReader { nvml, count })
    }
}

/// Maps nvml-wrapper's error to ours. nvml-wrapper 0.13 reports a missing library as
/// `LibloadingError(DlOpen { "libnvidia-ml.so.1: cannot open shared object file: ..." })`
/// (NVML's own `LibraryNotFound` is rarer), a stopped driver as `DriverNotLoaded`.
pub fn from_wrapper(call: &str, e: nvml_wrapper::error::NvmlError) -> NvmlError {
    use nvml_wrapper::error::NvmlError as W;
    match e {
        W::LibraryNotFound => NvmlError::LibraryNotFound,
        W::LibloadingError(inner) => {
            let detail = inner.to_string();
            // Other loader errors (wrong ELF class, missing symbol versions) mean the library is
            // there but broken: "not found" would send the user the wrong way.
            if detail.contains("cannot open shared object file") || detail.contains("No such file")
            {
                NvmlError::LibraryNotFound
            } else {
                NvmlError::LibraryLoad { detail }
            }
        }
        W::DriverNotLoaded => NvmlError::DriverNotLoaded,
        W::NoPermission => NvmlError::NoPermission,
        other => NvmlError::Call {
            call: call.to_string(),
            detail: other.to_string(),
        },
    }
}

/// The value of one read; "not supported" is silently absent, other failures are recorded.
fn field<T>(
    what: &str,
    r: Result<T, nvml_wrapper::error::NvmlError>,
    failed: &mut Vec<String>,
) -> Option<T> {
    use nvml_wrapper::error::NvmlError as W;
    match r {
        Ok(v) => Some(v),
        Err(W::NotSupported) => None,
        Err(e) => {
            failed.push(format!("{what}: {e}"));
            None
        }
    }
}

impl GpuReader for NvmlReader {
    fn inventory(&mut self) -> Result<GpuInventory, NvmlError> {
        use nvml_wrapper::enum_wrappers::device::Clock as NvClock;
        let mut gpus = Vec::new();
        for index in 0..self.count {
            // A GPU that cannot be opened still counts: its readings will say why.
            let Ok(d) = self.nvml.device_by_index(index) else {
                gpus.push(GpuInfo {
                    index,
                    ..GpuInfo::default()
                });
                continue;
            };
            gpus.push(GpuInfo {
                index,
                uuid: d.uuid().ok(),
                pci_bus_id: d.pci_info().ok().map(|p| p.bus_id),
                model_name: d.name().ok(),
                max_sm_clock_mhz: d.max_clock_info(NvClock::SM).ok(),
            });
        }
        Ok(GpuInventory {
            hostname: None,
            driver_version: self.nvml.sys_driver_version().ok(),
            gpus,
        })
    }

    fn read(&mut self) -> Result<Vec<GpuReading>, NvmlError> {
        use nvml_wrapper::enum_wrappers::device::{
            Clock as NvClock, EccCounter, MemoryError, PcieUtilCounter, TemperatureSensor,
        };
        use nvml_wrapper::enums::device::UsedGpuMemory;
        use nvml_wrapper::error::{Bits, NvmlError as W};

        let mut out = Vec::with_capacity(self.count as usize);
        for index in 0..self.count {
            let mut r = GpuReading {
                index,
                ..GpuReading::default()
            };
            let d = match self.nvml.device_by_index(index) {
                Ok(d) => d,
                Err(e) => {
                    r.failed.push(format!("the device: {e}"));
                    out.push(r);
                    continue;
                }
            };
            let failed = &mut r.failed;
            if let Some(u) = field("utilization", d.utilization_rates(), failed) {
                r.gpu_utilization_percent = Some(u.gpu);
                r.memory_utilization_percent = Some(u.memory);
            }
            if let Some(m) = field("memory", d.memory_info(), failed) {
                r.memory_used_bytes = Some(m.used);
                r.memory_free_bytes = Some(m.free);
                r.memory_reserved_bytes = Some(m.reserved);
                r.memory_total_bytes = Some(m.total);
            }
            r.power_usage_mw = field("power usage", d.power_usage(), failed);
            r.enforced_power_limit_mw = field("power limit", d.enforced_power_limit(), failed);
            r.temperature_celsius =
                field("temperature", d.temperature(TemperatureSensor::Gpu), failed);
            r.sm_clock_mhz = field("SM clock", d.clock_info(NvClock::SM), failed);
            // The strict call keeps bits this nvml-wrapper does not name (the lenient one drops
            // them), which a newer driver may set.
            r.throttle_reasons = match d.current_throttle_reasons_strict() {
                Ok(reasons) => Some(reasons.bits()),
                Err(W::IncorrectBits(Bits::U64(raw))) => Some(raw),
                Err(W::IncorrectBits(Bits::U32(raw))) => Some(u64::from(raw)),
                Err(e) => field::<u64>("clock-event reasons", Err(e), failed),
            };
            r.pcie_tx_kb_per_second = field(
                "PCIe TX throughput",
                d.pcie_throughput(PcieUtilCounter::Send),
                failed,
            );
            r.pcie_rx_kb_per_second = field(
                "PCIe RX throughput",
                d.pcie_throughput(PcieUtilCounter::Receive),
                failed,
            );
            r.ecc_uncorrected_volatile = field(
                "ECC errors",
                d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile),
                failed,
            );
            r.pcie_replay_counter =
                field("PCIe replays", d.pcie_replay_counter(), failed).map(u64::from);
            if let Some(procs) = field("processes", d.running_compute_processes(), failed) {
                r.processes = procs
                    .into_iter()
                    .map(|p| GpuProcess {
                        pid: p.pid,
                        used_memory_bytes: match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => Some(b),
                            UsedGpuMemory::Unavailable => None,
                        },
                    })
                    .collect();
            }
            out.push(r);
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// Recorded readings

/// Replays readings from a file: the `k`-th [`GpuReader::read`] returns each GPU's `k`-th
/// reading, and the last one again once a GPU's readings run out (so counters stay flat).
#[derive(Debug, Clone)]
pub struct RecordedReader {
    inventory: GpuInventory,
    /// Per GPU, its readings in order.
    readings: Vec<Vec<GpuReading>>,
    next: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadingsFile {
    #[serde(default)]
    hostname: Option<String>,
    #[serde(default)]
    driver_version: Option<String>,
    #[serde(default)]
    fail: Option<SimulatedFailure>,
    #[serde(default)]
    gpus: Vec<GpuFile>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SimulatedFailure {
    LibraryNotFound,
    DriverNotLoaded,
    NoPermission,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuFile {
    index: u32,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    pci_bus_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    max_sm_clock_mhz: Option<u32>,
    #[serde(default)]
    processes: Vec<ProcessFile>,
    #[serde(default)]
    readings: ColumnsFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProcessFile {
    pid: u32,
    #[serde(default)]
    used_memory_bytes: Option<u64>,
}

/// One value for every reading, or one per reading (`null` where the read failed).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Column<T> {
    One(T),
    Each(Vec<Option<T>>),
}

impl<T: Copy> Column<T> {
    fn len(&self) -> Option<usize> {
        match self {
            Column::One(_) => None,
            Column::Each(v) => Some(v.len()),
        }
    }

    fn at(&self, k: usize) -> Option<T> {
        match self {
            Column::One(v) => Some(*v),
            Column::Each(v) => v.get(k).copied().flatten(),
        }
    }
}

/// Declares the readings columns once: the file struct, their lengths and the reading at `k`.
macro_rules! columns {
    ($($field:ident: $ty:ty),* $(,)?) => {
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct ColumnsFile {
            $(#[serde(default)] $field: Option<Column<$ty>>,)*
        }

        impl ColumnsFile {
            fn lengths(&self) -> Vec<(&'static str, usize)> {
                let mut out = Vec::new();
                $(if let Some(n) = self.$field.as_ref().and_then(Column::len) {
                    out.push((stringify!($field), n));
                })*
                out
            }

            fn reading(&self, index: u32, k: usize) -> GpuReading {
                GpuReading {
                    index,
                    $($field: self.$field.as_ref().and_then(|c| c.at(k)),)*
                    ..GpuReading::default()
                }
            }
        }
    };
}

columns! {
    gpu_utilization_percent: u32,
    memory_utilization_percent: u32,
    memory_used_bytes: u64,
    memory_free_bytes: u64,
    memory_reserved_bytes: u64,
    memory_total_bytes: u64,
    power_usage_mw: u32,
    enforced_power_limit_mw: u32,
    temperature_celsius: u32,
    sm_clock_mhz: u32,
    throttle_reasons: u64,
    pcie_tx_kb_per_second: u32,
    pcie_rx_kb_per_second: u32,
    ecc_uncorrected_volatile: u64,
    pcie_replay_counter: u64,
}

impl RecordedReader {
    /// Reads a readings file (YAML or JSON, format on [`RecordedReader::from_str`]).
    pub fn from_path(path: &Path) -> Result<RecordedReader, NvmlError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| NvmlError::Readings {
            path: name.clone(),
            detail: e.to_string(),
        })?;
        RecordedReader::from_str(&text, &name)
    }

    /// Parses readings; `name` names the file in errors. The format (YAML; JSON is YAML too),
    /// in NVML's own units so that the conversions are exercised:
    ///
    /// ```yaml
    /// hostname: gpu-node-1          # optional: the Hostname label (default: this host)
    /// driver_version: "570.133.20"  # optional
    /// fail: driver_not_loaded       # optional: act as NVML failing to open
    ///                               # (library_not_found | driver_not_loaded | no_permission)
    /// gpus:
    ///   - index: 0
    ///     uuid: GPU-83fff142-51ea-2df2-9dd1-15678e8cad63
    ///     pci_bus_id: "00000000:18:00.0"
    ///     name: NVIDIA H100 80GB HBM3
    ///     max_sm_clock_mhz: 1980
    ///     processes: [{pid: 4242, used_memory_bytes: 76000000000}]
    ///     readings:                 # a value for every reading, or a list of one per reading
    ///       gpu_utilization_percent: [90, 92, 88, 91, 90]
    ///       memory_utilization_percent: 40
    ///       memory_used_bytes: 60000000000
    ///       memory_free_bytes: 24000000000
    ///       memory_reserved_bytes: 500000000
    ///       memory_total_bytes: 84500000000
    ///       power_usage_mw: 690000
    ///       enforced_power_limit_mw: 700000
    ///       temperature_celsius: 88
    ///       sm_clock_mhz: 1386
    ///       throttle_reasons: [0x40, 0x40, 0x0, 0x40, 0x40]
    ///       pcie_tx_kb_per_second: 1000
    ///       pcie_rx_kb_per_second: 2000
    ///       ecc_uncorrected_volatile: [0, 0, 1, 1, 2]
    ///       pcie_replay_counter: 0
    /// ```
    ///
    /// Lists of one GPU must have the same length; `null` in a list is a failed read. Unknown
    /// fields are errors.
    #[allow(clippy::should_implement_trait)] // it fails with NvmlError and takes a name
    pub fn from_str(text: &str, name: &str) -> Result<RecordedReader, NvmlError> {
        let err = |detail: String| NvmlError::Readings {
            path: name.to_string(),
            detail,
        };
        let file: ReadingsFile = serde_yaml::from_str(text).map_err(|e| err(e.to_string()))?;
        match file.fail {
            Some(SimulatedFailure::LibraryNotFound) => return Err(NvmlError::LibraryNotFound),
            Some(SimulatedFailure::DriverNotLoaded) => return Err(NvmlError::DriverNotLoaded),
            Some(SimulatedFailure::NoPermission) => return Err(NvmlError::NoPermission),
            None => {}
        }
        let mut gpus = Vec::new();
        let mut readings = Vec::new();
        for g in &file.gpus {
            if gpus.iter().any(|x: &GpuInfo| x.index == g.index) {
                return Err(err(format!("GPU index {} appears twice", g.index)));
            }
            let lengths = g.readings.lengths();
            let n = lengths.iter().map(|(_, n)| *n).max().unwrap_or(1);
            if let Some((field, len)) = lengths.iter().find(|(_, len)| *len != n) {
                return Err(err(format!(
                    "GPU {}: readings.{field} has {len} values, but another list has {n}",
                    g.index
                )));
            }
            if n == 0 {
                return Err(err(format!("GPU {}: readings lists are empty", g.index)));
            }
            gpus.push(GpuInfo {
                index: g.index,
                uuid: g.uuid.clone(),
                pci_bus_id: g.pci_bus_id.clone(),
                model_name: g.name.clone(),
                max_sm_clock_mhz: g.max_sm_clock_mhz,
            });
            let processes: Vec<GpuProcess> = g
                .processes
                .iter()
                .map(|p| GpuProcess {
                    pid: p.pid,
                    used_memory_bytes: p.used_memory_bytes,
                })
                .collect();
            readings.push(
                (0..n)
                    .map(|k| GpuReading {
                        processes: processes.clone(),
                        ..g.readings.reading(g.index, k)
                    })
                    .collect(),
            );
        }
        Ok(RecordedReader {
            inventory: GpuInventory {
                hostname: file.hostname.filter(|h| !h.is_empty()),
                driver_version: file.driver_version,
                gpus,
            },
            readings,
            next: 0,
        })
    }
}

impl GpuReader for RecordedReader {
    fn inventory(&mut self) -> Result<GpuInventory, NvmlError> {
        Ok(self.inventory.clone())
    }

    fn read(&mut self) -> Result<Vec<GpuReading>, NvmlError> {
        let k = self.next;
        self.next += 1;
        Ok(self
            .readings
            .iter()
            .filter_map(|per_gpu| per_gpu.get(k.min(per_gpu.len().saturating_sub(1))).cloned())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_throttle_reason_bit_decodes_to_dcgm_exporters_label() {
        let cases = [
            (0x1, "gpu_idle"),
            (0x2, "clocks_setting"),
            (0x4, "power_cap"),
            (0x8, "hw_slowdown"),
            (0x10, "sync_boost"),
            (0x20, "sw_thermal"),
            (0x40, "hw_thermal"),
            (0x80, "hw_power_brake"),
            (0x100, "display_clocks"),
        ];
        for (bit, label) in cases {
            let got = ClockEventReason::decode(bit);
            assert_eq!(got.len(), 1, "{bit:#x}");
            assert_eq!(got[0].label(), label);
            assert_eq!(got[0].bit(), bit);
        }
        let all: u64 = cases.iter().map(|(b, _)| b).sum();
        assert_eq!(all, 0x1ff);
        assert_eq!(ClockEventReason::decode(all), ClockEventReason::KNOWN);
        assert!(ClockEventReason::decode(0).is_empty());
    }

    #[test]
    fn unknown_throttle_bits_are_kept_one_by_one() {
        let got = ClockEventReason::decode(0x40 | 0x200 | (1 << 63));
        assert_eq!(
            got,
            [
                ClockEventReason::HwThermal,
                ClockEventReason::Unknown(0x200),
                ClockEventReason::Unknown(1 << 63)
            ]
        );
        let labels: Vec<String> = got.iter().map(|r| r.label()).collect();
        assert_eq!(
            labels,
            ["hw_thermal", "unknown_0x200", "unknown_0x8000000000000000"]
        );
    }

    #[test]
    fn missing_free_or_reserved_is_derived_from_the_total() {
        let r = |used, free, reserved, total| GpuReading {
            memory_used_bytes: used,
            memory_free_bytes: free,
            memory_reserved_bytes: reserved,
            memory_total_bytes: total,
            ..GpuReading::default()
        };
        assert_eq!(
            framebuffer(&r(Some(60), Some(30), Some(10), Some(100))),
            (Some(60), Some(30), Some(10))
        );
        assert_eq!(
            framebuffer(&r(Some(60), Some(30), None, Some(100))),
            (Some(60), Some(30), Some(10))
        );
        assert_eq!(
            framebuffer(&r(Some(60), None, Some(10), Some(100))),
            (Some(60), Some(30), Some(10))
        );
        assert_eq!(
            framebuffer(&r(Some(60), None, None, Some(100))),
            (Some(60), Some(40), Some(0))
        );
        assert_eq!(
            framebuffer(&r(Some(60), None, None, None)),
            (Some(60), None, None)
        );
    }

    #[test]
    fn wrapper_errors_map_to_messages_with_a_way_out() {
        use nvml_wrapper::error::NvmlError as W;
        assert_eq!(
            from_wrapper("init", W::LibraryNotFound),
            NvmlError::LibraryNotFound
        );
        assert_eq!(
            from_wrapper("init", W::DriverNotLoaded),
            NvmlError::DriverNotLoaded
        );
        assert_eq!(
            from_wrapper("init", W::NoPermission),
            NvmlError::NoPermission
        );
        assert_eq!(
            from_wrapper("device_count", W::GpuLost).to_string(),
            "NVML: device_count failed: device fell off the bus or has otherwise become inacessible"
        );
        assert_eq!(
            NvmlError::LibraryNotFound.to_string(),
            "NVML library not found (libnvidia-ml.so.1): run on a host with the NVIDIA driver, or scrape dcgm-exporter"
        );
        for e in [NvmlError::DriverNotLoaded, NvmlError::NoPermission] {
            assert!(e.to_string().contains("or scrape dcgm-exporter"), "{e}");
        }
    }

    #[test]
    fn a_library_that_is_not_there_is_library_not_found() {
        // The real loader's error for a missing file (what `Nvml::init()` gives without a driver).
        let e = nvml_wrapper::Nvml::builder()
            .lib_path(std::ffi::OsStr::new("/nonexistent/libnvidia-ml.so.1"))
            .init()
            .expect_err("no library at that path");
        assert_eq!(from_wrapper("init", e), NvmlError::LibraryNotFound);
    }

    #[test]
    fn opening_nvml_without_a_driver_fails_cleanly() {
        match NvmlReader::open() {
            // A GPU host: nothing to check here.
            Ok(_) => {}
            Err(e) => assert!(
                matches!(
                    e,
                    NvmlError::LibraryNotFound
                        | NvmlError::DriverNotLoaded
                        | NvmlError::NoPermission
                        | NvmlError::LibraryLoad { .. }
                ),
                "{e:?}"
            ),
        }
    }

    const TWO_GPUS: &str = r#"
hostname: node-a
gpus:
  - index: 1
    name: NVIDIA L4
    readings:
      gpu_utilization_percent: [10, 20, 30]
      throttle_reasons: [0x1, 0x4, 0x240]
  - index: 0
    readings:
      gpu_utilization_percent: 50
"#;

    #[test]
    fn recorded_readings_replay_and_stick_at_the_last() {
        let mut r = RecordedReader::from_str(TWO_GPUS, "two.yaml").unwrap();
        let inv = r.inventory().unwrap();
        assert_eq!(inv.hostname.as_deref(), Some("node-a"));
        assert_eq!(inv.gpus.len(), 2);
        let utils: Vec<Vec<Option<u32>>> = (0..4)
            .map(|_| {
                r.read()
                    .unwrap()
                    .iter()
                    .map(|g| g.gpu_utilization_percent)
                    .collect()
            })
            .collect();
        assert_eq!(
            utils,
            [
                [Some(10), Some(50)],
                [Some(20), Some(50)],
                [Some(30), Some(50)],
                [Some(30), Some(50)]
            ]
        );
    }

    #[test]
    fn readings_file_errors_name_the_file_and_the_field() {
        let e = RecordedReader::from_str(
            "gpus:\n  - index: 0\n    readings:\n      gpu_util: 5\n",
            "bad.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("NVML readings `bad.yaml`: ") && e.contains("gpu_util"),
            "{e}"
        );
        let e = RecordedReader::from_str(
            "gpus:\n  - index: 0\n    readings:\n      sm_clock_mhz: [1, 2]\n      temperature_celsius: [1, 2, 3]\n",
            "len.yaml",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "NVML readings `len.yaml`: GPU 0: readings.sm_clock_mhz has 2 values, but another list has 3"
        );
        assert_eq!(
            RecordedReader::from_str("fail: driver_not_loaded\n", "f.yaml").unwrap_err(),
            NvmlError::DriverNotLoaded
        );
    }

    /// A clock that only moves when slept on.
    struct FakeClock {
        now: i64,
        slept: Vec<u64>,
    }

    impl Clock for FakeClock {
        fn now_ms(&mut self) -> i64 {
            self.now
        }
        fn sleep(&mut self, d: Duration) {
            self.slept.push(d.as_millis() as u64);
            self.now += d.as_millis() as i64;
        }
    }

    fn util_samples(set: &SeriesSet, gpu: &str) -> Vec<(i64, f64)> {
        set.iter_by_name("DCGM_FI_DEV_GPU_UTIL")
            .find(|s| s.labels.get("gpu") == Some(gpu))
            .unwrap()
            .samples
            .iter()
            .map(|s| (s.t_ms.unwrap(), s.value))
            .collect()
    }

    #[test]
    fn samples_spread_over_the_interval_on_a_fake_clock() {
        let mut reader = RecordedReader::from_str(TWO_GPUS, "two.yaml").unwrap();
        let mut clock = FakeClock {
            now: 1_000_000,
            slept: Vec::new(),
        };
        let sampling = Sampling {
            samples: 3,
            interval: Duration::from_secs(4),
        };
        let c = collect(&mut reader, &sampling, &mut clock, "ignored").unwrap();
        assert_eq!(clock.slept, [2000, 2000]);
        assert_eq!(
            util_samples(&c.set, "1"),
            [(1_000_000, 10.0), (1_002_000, 20.0), (1_004_000, 30.0)]
        );
        assert_eq!((c.gpus, c.samples), (2, 3));
        assert_eq!(c.hostname, "node-a");
        assert_eq!(
            c.notes,
            [
                "NVML GPU 0: no compute processes",
                "NVML GPU 1 (NVIDIA L4): clock-event reasons gpu_idle in 1 of 3, power_cap in 1 of 3, hw_thermal in 1 of 3, unknown_0x200 in 1 of 3",
                "NVML GPU 1 (NVIDIA L4): no compute processes",
            ]
        );
    }

    #[test]
    fn interval_zero_still_keeps_every_sample() {
        let mut reader = RecordedReader::from_str(TWO_GPUS, "two.yaml").unwrap();
        let mut clock = FakeClock {
            now: 5_000,
            slept: Vec::new(),
        };
        let sampling = Sampling {
            samples: 3,
            interval: Duration::ZERO,
        };
        let c = collect(&mut reader, &sampling, &mut clock, "h").unwrap();
        assert!(clock.slept.is_empty());
        assert_eq!(
            util_samples(&c.set, "1"),
            [(5_000, 10.0), (5_001, 20.0), (5_002, 30.0)]
        );
    }

    struct Failing {
        reads: usize,
        fail_from: usize,
    }

    impl GpuReader for Failing {
        fn inventory(&mut self) -> Result<GpuInventory, NvmlError> {
            Ok(GpuInventory {
                gpus: vec![GpuInfo::default()],
                ..GpuInventory::default()
            })
        }
        fn read(&mut self) -> Result<Vec<GpuReading>, NvmlError> {
            self.reads += 1;
            if self.reads > self.fail_from {
                Err(NvmlError::Call {
                    call: "read".into(),
                    detail: "GPU is lost".into(),
                })
            } else {
                Ok(vec![GpuReading {
                    gpu_utilization_percent: Some(1),
                    ..GpuReading::default()
                }])
            }
        }
    }

    #[test]
    fn a_failing_first_read_fails_a_later_one_is_noted() {
        let sampling = Sampling {
            samples: 3,
            interval: Duration::ZERO,
        };
        let mut clock = FakeClock {
            now: 0,
            slept: Vec::new(),
        };
        let mut first = Failing {
            reads: 0,
            fail_from: 0,
        };
        assert!(collect(&mut first, &sampling, &mut clock, "h").is_err());
        let mut later = Failing {
            reads: 0,
            fail_from: 2,
        };
        let c = collect(&mut later, &sampling, &mut clock, "h").unwrap();
        assert_eq!(c.samples, 2);
        assert!(c
            .notes
            .contains(&"NVML reading 3 of 3 failed: NVML: read failed: GPU is lost".to_string()));
        let mut none = RecordedReader::from_str("gpus: []\n", "none.yaml").unwrap();
        assert_eq!(
            collect(&mut none, &sampling, &mut clock, "h").unwrap_err(),
            NvmlError::NoGpus
        );
    }

    #[test]
    fn local_target_is_the_only_one_or_the_one_on_this_host() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(is_local_target(&labels(&[]), "node-a", 1));
        assert!(is_local_target(
            &labels(&[("instance", "Node-A:8000")]),
            "node-a",
            2
        ));
        assert!(is_local_target(&labels(&[("host", "node-a")]), "node-a", 2));
        assert!(!is_local_target(
            &labels(&[("instance", "node-b:8000")]),
            "node-a",
            2
        ));
    }
}
