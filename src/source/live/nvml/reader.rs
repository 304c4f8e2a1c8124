//! The real reader: NVML through nvml-wrapper, `libnvidia-ml.so.1` loaded at run time, its
//! errors turned into [`NvmlError`]s that say what to do instead.

use super::reading::{GpuInfo, GpuInventory, GpuProcess, GpuReader, GpuReading, NvmlError};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
