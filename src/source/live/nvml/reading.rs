//! What a GPU reader gives: the inventory, one reading per GPU, the errors, and the
//! clock-event (throttle) reasons decoded from their bitmask, named as dcgm-exporter names them.

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
}
