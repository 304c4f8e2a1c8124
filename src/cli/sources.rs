//! The flags and helpers that `diagnose` and `record` share to reach running systems: a
//! Prometheus-compatible API (where it is, how to authenticate) and the local GPUs through NVML
//! (how to sample them, on a thread beside the other work).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::parse;
use crate::source::live::nvml::Sampling;
use crate::source::live::prometheus::{LiveOptions, PromAuth, DEFAULT_CONCURRENCY};

/// Where a Prometheus-compatible API is and how to authenticate.
#[derive(Debug, clap::Args)]
pub struct PrometheusArgs {
    /// Read from a Prometheus-compatible API (Prometheus, Thanos, Mimir, VictoriaMetrics) instead
    /// of files: every target it knows, or those `--selector` picks.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// Bearer token for --prometheus (or the LLM_DOCTOR_BEARER_TOKEN environment variable).
    #[arg(long, value_name = "TOKEN", conflicts_with = "bearer_token_file")]
    pub bearer_token: Option<String>,
    /// File holding the bearer token for --prometheus.
    #[arg(long, value_name = "FILE")]
    pub bearer_token_file: Option<PathBuf>,
    /// Basic authentication for --prometheus, `USER:PASSWORD` (or LLM_DOCTOR_BASIC_AUTH).
    // Split after parsing, not by a value parser: clap would quote a malformed value, a
    // password, in its error message.
    #[arg(long, value_name = "USER:PASSWORD")]
    pub basic_auth: Option<String>,
    /// A PEM file of CA certificates to trust for --prometheus (a private CA).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
}

impl PrometheusArgs {
    /// How to query the API at `url`: credentials from the flags first, then the environment.
    pub fn live_options(
        &self,
        url: &str,
        timeout: Duration,
        headers: &[(String, String)],
    ) -> Result<LiveOptions> {
        let (url, url_basic) = crate::source::live::prometheus::split_credentials(url);
        let mut auth = self.auth(headers)?;
        if let Some(b) = url_basic {
            if auth.basic.is_some() {
                bail!("--prometheus carries a user and password and --basic-auth is given too: keep one");
            }
            auth.basic = Some(b);
        }
        Ok(LiveOptions {
            url,
            auth,
            timeout,
            concurrency: DEFAULT_CONCURRENCY,
        })
    }

    fn auth(&self, headers: &[(String, String)]) -> Result<PromAuth> {
        let bearer = match (&self.bearer_token, &self.bearer_token_file) {
            (Some(t), _) => Some(t.clone()),
            (None, Some(f)) => Some(
                std::fs::read_to_string(f)
                    .with_context(|| format!("reading --bearer-token-file `{}`", f.display()))?
                    .trim()
                    .to_string(),
            ),
            (None, None) => std::env::var("LLM_DOCTOR_BEARER_TOKEN")
                .ok()
                .filter(|t| !t.is_empty()),
        };
        let basic = match self.basic_auth.clone().or_else(|| {
            std::env::var("LLM_DOCTOR_BASIC_AUTH")
                .ok()
                .filter(|t| !t.is_empty())
        }) {
            Some(pair) => match pair.split_once(':') {
                Some((user, pass)) => Some((user.to_string(), pass.to_string())),
                None => bail!("--basic-auth expects USER:PASSWORD"),
            },
            None => None,
        };
        Ok(PromAuth {
            bearer,
            basic,
            headers: headers.to_vec(),
            ca_file: self.ca_file.clone(),
        })
    }
}

/// How `--nvml` samples the GPUs (`diagnose` and `record`).
#[derive(Debug, clap::Args)]
pub struct NvmlSamplingArgs {
    /// NVML readings per GPU, spread over --nvml-interval (diagnose: 5; record: one per
    /// --interval over --duration).
    #[arg(long, value_name = "N")]
    pub nvml_samples: Option<usize>,
    /// Time from the first NVML reading to the last, a Prometheus duration; 0 reads back to back
    /// (diagnose: 5s; record: --duration).
    #[arg(long, value_name = "DURATION", value_parser = parse::duration)]
    pub nvml_interval: Option<Duration>,
}

impl NvmlSamplingArgs {
    /// The flags as a sampling plan, `default` filling what they leave out.
    pub fn sampling(&self, default: Sampling) -> Result<Sampling> {
        let samples = self.nvml_samples.unwrap_or(default.samples);
        // Checked here rather than by a value parser, to keep the message the tests assert.
        if samples == 0 {
            bail!("--nvml-samples must be at least 1");
        }
        Ok(Sampling {
            samples,
            interval: self.nvml_interval.unwrap_or(default.interval),
        })
    }
}
