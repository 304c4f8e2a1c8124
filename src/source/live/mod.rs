//! Live sources: a /metrics endpoint, a Prometheus-compatible API, the local GPUs.

pub mod nvml;
pub mod prometheus;
pub mod scrape;
