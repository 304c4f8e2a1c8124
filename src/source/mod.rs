//! Sources: where metrics come from. `file` parses recordings (Prometheus text, OpenMetrics,
//! Prometheus API JSON, llm-doctor snapshots); `live` reads running systems (scraping /metrics,
//! querying Prometheus, sampling GPUs through NVML). Each yields raw series or, for sources that
//! already speak in signals, prepared snapshots.

pub mod file;
pub mod live;
