//! Integration tests: one binary (ripgrep's layout), running the real `llm-doctor` executable.

mod cli;
mod deploy;
mod export;
mod fixtures;
mod fuzz_replay;
mod gateway;
mod grafana;
mod inputs;
mod layout;
mod live;
mod nvml;
mod otlp;
mod prom;
mod prom_harness;
mod promql;
mod scrape;
mod serve;
mod serve_e2e;
mod serve_peers;
mod support;
mod top_down;
