//! Live sources: a /metrics endpoint, a Prometheus-compatible API, the local GPUs, an OTLP
//! trace receiver.

pub mod nvml;
pub mod otlp;
pub mod prometheus;
pub mod scrape;
