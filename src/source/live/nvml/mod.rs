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

mod emit;
mod reader;
mod reading;
mod recorded;
mod sampler;

pub use emit::{readings_notes, to_series_set, JOB};
pub use reader::{from_wrapper, NvmlReader};
pub use reading::{
    ClockEventReason, GpuInfo, GpuInventory, GpuProcess, GpuReader, GpuReading, NvmlError,
};
pub use recorded::RecordedReader;
pub use sampler::{
    collect, collect_live, is_local_target, local_hostname, open, sample_beside, Clock, Collected,
    Sampling, SystemClock, READINGS_ENV,
};
