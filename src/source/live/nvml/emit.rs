//! Readings become series under dcgm-exporter's metric and label names (the table in the
//! folder's docs), and notes for the report: processes, clock-event reasons seen, failed reads.

use std::collections::BTreeMap;

use super::reading::{ClockEventReason, GpuInfo, GpuInventory, GpuReading};
use crate::signal::series::{Labels, MetricType, Sample, Series, SeriesSet};

/// The `job` label of NVML series.
pub const JOB: &str = "nvml";

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
            for (name, value) in dcgm_fields(r, info) {
                if let Some(value) = value {
                    series
                        .entry((name, labels.clone()))
                        .or_default()
                        .push(Sample {
                            t_ms: Some(*t_ms),
                            value,
                        });
                }
            }
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
            samples: samples.into(),
        });
    }
    set.normalize();
    set
}

/// One reading as dcgm-exporter's fields, in its units (the table in the folder's docs); None
/// where the reading lacks the value.
fn dcgm_fields(r: &GpuReading, info: Option<&GpuInfo>) -> [(&'static str, Option<f64>); 15] {
    let f = |v: Option<u32>| v.map(f64::from);
    let (used, free, reserved) = framebuffer(r);
    [
        ("DCGM_FI_DEV_GPU_UTIL", f(r.gpu_utilization_percent)),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", f(r.memory_utilization_percent)),
        ("DCGM_FI_DEV_FB_USED", used.map(|b| b as f64 / MIB)),
        ("DCGM_FI_DEV_FB_FREE", free.map(|b| b as f64 / MIB)),
        ("DCGM_FI_DEV_FB_RESERVED", reserved.map(|b| b as f64 / MIB)),
        (
            "DCGM_FI_DEV_POWER_USAGE",
            f(r.power_usage_mw).map(|mw| mw / 1000.0),
        ),
        (
            "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
            f(r.enforced_power_limit_mw).map(|mw| mw / 1000.0),
        ),
        ("DCGM_FI_DEV_GPU_TEMP", f(r.temperature_celsius)),
        ("DCGM_FI_DEV_SM_CLOCK", f(r.sm_clock_mhz)),
        (
            "DCGM_FI_DEV_MAX_SM_CLOCK",
            f(info.and_then(|i| i.max_sm_clock_mhz)),
        ),
        (
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
            r.throttle_reasons.map(|m| m as f64),
        ),
        (
            "DCGM_FI_PROF_PCIE_TX_BYTES",
            f(r.pcie_tx_kb_per_second).map(|kb| kb * 1024.0),
        ),
        (
            "DCGM_FI_PROF_PCIE_RX_BYTES",
            f(r.pcie_rx_kb_per_second).map(|kb| kb * 1024.0),
        ),
        (
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            r.ecc_uncorrected_volatile.map(|n| n as f64),
        ),
        (
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
            r.pcie_replay_counter.map(|n| n as f64),
        ),
    ]
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
