//! `serve`: the arguments of the Alertmanager webhook receiver; the server is `crate::serve`.

use std::path::PathBuf;

use anyhow::Result;

use super::outcome::Outcome;
use crate::log::LogFormat;

/// Arguments of `serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The server's configuration (YAML; see examples/doctor.yaml).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// A directory of playbooks (and `signals/` adapters) that add to or override the shipped ones.
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// How the log on stderr is written: `key=value: message` lines, or one JSON object per line.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// This receiver's own base URL among its `peers:` (over `peers.self`; in Kubernetes,
    /// `http://$(POD_IP):9095`).
    #[arg(long, value_name = "URL")]
    pub advertise: Option<String>,
}

/// Runs `serve` until the server stops.
pub fn run(args: ServeArgs) -> Result<Outcome> {
    crate::log::init(args.log_format);
    crate::serve::run(
        &args.config,
        args.rules.as_deref(),
        args.advertise.as_deref(),
    )?;
    Ok(Outcome {
        stdout: String::new(),
        code: 0,
    })
}
