//! Recorded readings: a YAML or JSON readings file replayed as if NVML read it, so tests (and
//! a user's readings, reproduced) need no GPU.

use std::path::Path;

use serde::Deserialize;

use super::reading::{GpuInfo, GpuInventory, GpuProcess, GpuReader, GpuReading, NvmlError};

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
        llm_doctor_engine::yaml_guard::check_depth(text).map_err(|e| err(e.to_string()))?;
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
pub(crate) mod tests {
    use super::*;

    pub(crate) const TWO_GPUS: &str = r#"
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
}
