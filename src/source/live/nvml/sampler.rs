//! Sampling: a reader read `samples` times over `interval` on a clock (the system's, or a fake
//! in tests), the readings turned into dcgm-exporter series and notes; and where the CLI's GPU
//! readings come from (NVML, or a readings file named by [`READINGS_ENV`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::emit::{readings_notes, to_series_set};
use super::reader::NvmlReader;
use super::reading::{GpuReader, GpuReading, NvmlError};
use super::recorded::RecordedReader;
use crate::signal::series::SeriesSet;

/// Environment variable naming a readings file that replaces NVML (test and debug hook).
pub const READINGS_ENV: &str = "LLM_DOCTOR_NVML_READINGS";

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

/// Runs `work` while, when `sampling` is given, the GPUs are sampled through NVML on another
/// thread; returns both results.
pub fn sample_beside<T>(
    sampling: Option<Sampling>,
    work: impl FnOnce() -> T,
) -> (T, Option<Result<Collected, NvmlError>>) {
    std::thread::scope(|scope| {
        let gpus = sampling.map(|s| scope.spawn(move || collect_live(&s)));
        let out = work();
        let gpus = gpus.map(|h| {
            h.join().unwrap_or_else(|_| {
                Err(NvmlError::Call {
                    call: "sampling".to_string(),
                    detail: "the NVML thread panicked".to_string(),
                })
            })
        });
        if let Some(Ok(c)) = &gpus {
            eprintln!(
                "read {} GPU{} through NVML ({} readings each)",
                c.gpus,
                if c.gpus == 1 { "" } else { "s" },
                c.samples
            );
        }
        (out, gpus)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::live::nvml::reading::{GpuInfo, GpuInventory};
    use crate::source::live::nvml::recorded::tests::TWO_GPUS;

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
