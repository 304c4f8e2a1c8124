//! Command-line interface (clap derive). Parsing only; `commands` does the work.

pub mod commands;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Diagnoses LLM inference services from their metrics: ranked root causes, evidence, fixes.
#[derive(Debug, Parser)]
#[command(name = "llm-doctor", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table for the terminal.
    Table,
    /// The JSON output contract.
    Json,
    /// Markdown, for tickets and postmortems.
    Markdown,
}

/// Rule export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Prometheus alerting rules (YAML, for `rule_files`).
    Prometheus,
}

/// Graph formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// Graphviz.
    Dot,
    /// Mermaid flowchart.
    Mermaid,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
// Built once per process: boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Diagnose recorded metrics (Prometheus text or OpenMetrics files).
    Diagnose(DiagnoseArgs),
    /// Check, test and explain playbooks.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// Record /metrics endpoints to an OpenMetrics file for later diagnosis or Prometheus import.
    Record(RecordArgs),
    /// Receive Alertmanager webhooks, diagnose each firing alert and hand it on with its diagnosis.
    Serve(ServeArgs),
    /// Score the diagnosis on a corpus of labelled runs (see corpus/README.md).
    Eval(EvalArgs),
    /// List the canonical signals and facts.
    Signals {
        /// Output format (table or json).
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
}

/// Arguments of `eval`.
#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// The corpus: a directory of cases (`<id>.yaml` beside its recording), searched recursively.
    #[arg(default_value = "corpus")]
    pub dir: PathBuf,
    /// Which cases to score: `train`, `test` (held out while rules change) or `all`.
    #[arg(long, value_enum, default_value_t = crate::score::corpus::Split::All)]
    pub split: crate::score::corpus::Split,
    /// Output format (default: Markdown tables; json for tools).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Fail (exit 1) when the top-1 share of fault cases is below this (0..1).
    #[arg(long, value_name = "RATIO")]
    pub min_top1: Option<f64>,
    /// Fail (exit 1) when the top-3 share of fault cases is below this (0..1).
    #[arg(long, value_name = "RATIO")]
    pub min_top3: Option<f64>,
    /// Fail (exit 1) when more healthy or near-miss cases than this raise an alarm.
    #[arg(long, value_name = "N")]
    pub max_false_alarms: Option<usize>,
    /// A directory of playbooks (and `signals/` adapters) that add to or override the shipped ones.
    #[arg(long)]
    pub rules: Option<PathBuf>,
}

/// Arguments of `serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The server's configuration (YAML; see examples/doctor.yaml).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// A directory of playbooks (and `signals/` adapters) that add to or override the shipped ones.
    #[arg(long)]
    pub rules: Option<PathBuf>,
}

/// Arguments of `diagnose`.
#[derive(Debug, clap::Args)]
pub struct DiagnoseArgs {
    /// Recorded metrics, joined: Prometheus text or OpenMetrics (plain or gzip), Prometheus API
    /// JSON answers, or llm-doctor snapshot/timeline files.
    #[arg(required_unless_present_any = ["scrape", "nvml", "prometheus"])]
    pub files: Vec<PathBuf>,
    /// Query a Prometheus-compatible API instead of files (see the Prometheus options).
    #[command(flatten)]
    pub prom: PrometheusArgs,
    /// Scrape a /metrics endpoint twice, `--interval` apart, and diagnose the time between. Repeatable.
    #[arg(long, value_name = "URL")]
    pub scrape: Vec<String>,
    /// Time between the two scrapes (a Prometheus duration).
    #[arg(long, default_value = "15s")]
    pub interval: String,
    /// Per-request timeout for --scrape.
    #[arg(long, default_value = "10s")]
    pub timeout: String,
    /// An HTTP header for --scrape, `Name: value` (e.g. 'Authorization: Bearer TOKEN'). Repeatable.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Also write the snapshots that were diagnosed (YAML, or JSON for a .json name).
    #[arg(long, value_name = "FILE")]
    pub save_snapshot: Option<PathBuf>,
    /// The serve command line (`vllm serve MODEL --max-num-seqs 4`), or `@FILE` to read it.
    #[arg(long)]
    pub engine_args: Option<String>,
    /// A fact about the deployment, `key=value` (see `llm-doctor signals`). Repeatable.
    #[arg(long = "fact", value_name = "KEY=VALUE")]
    pub facts: Vec<String>,
    /// A measurement the metrics lack, `signal=value` (e.g. a gateway's client_ttft_p99_seconds=3.2). Repeatable.
    #[arg(long = "signal", value_name = "NAME=VALUE")]
    pub signals: Vec<String>,
    /// Override an SLO, `name=value` (e.g. ttft_p99_seconds=2). Repeatable.
    #[arg(long = "slo", value_name = "NAME=VALUE")]
    pub slos: Vec<String>,
    /// End of the window: RFC 3339 or Unix seconds (default: the newest sample).
    #[arg(long)]
    pub at: Option<String>,
    /// Window length, a Prometheus duration (30s, 5m, 1h); default 5m, or 1.5 × --interval with --scrape.
    #[arg(long)]
    pub window: Option<String>,
    /// Output format (default: table on a terminal, JSON otherwise).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// A directory of playbooks (and `signals/` adapters) that add to or override the shipped ones.
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Only diagnose targets whose labels match these PromQL matchers, e.g. 'model_name="x",pod=~"vllm-.*"'.
    #[arg(long)]
    pub selector: Option<String>,
    /// Read the metrics as this engine's (vllm, sglang, tgi, trtllm, llamacpp) when names alone mislead.
    #[arg(long)]
    pub engine: Option<String>,
    /// Also read this host's GPUs through NVML (no dcgm-exporter needed); needs the NVIDIA driver.
    #[arg(long)]
    pub nvml: bool,
    /// How --nvml samples.
    #[command(flatten)]
    pub nvml_sampling: NvmlSamplingArgs,
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
    #[arg(long, value_name = "DURATION")]
    pub nvml_interval: Option<String>,
}

/// Where a Prometheus-compatible API is and how to authenticate.
#[derive(Debug, clap::Args)]
pub struct PrometheusArgs {
    /// Query a Prometheus-compatible API (Prometheus, Thanos, Mimir, VictoriaMetrics) at `--at`
    /// (default now) and diagnose every target it knows, or those `--selector` picks.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// Bearer token for --prometheus (or the LLM_DOCTOR_BEARER_TOKEN environment variable).
    #[arg(long, value_name = "TOKEN", conflicts_with = "bearer_token_file")]
    pub bearer_token: Option<String>,
    /// File holding the bearer token for --prometheus.
    #[arg(long, value_name = "FILE")]
    pub bearer_token_file: Option<PathBuf>,
    /// Basic authentication for --prometheus, `USER:PASSWORD` (or LLM_DOCTOR_BASIC_AUTH).
    #[arg(long, value_name = "USER:PASSWORD")]
    pub basic_auth: Option<String>,
    /// A PEM file of CA certificates to trust for --prometheus (a private CA).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
}

/// Arguments of `record`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).multiple(true).args(["scrape", "nvml", "prometheus"])))]
pub struct RecordArgs {
    /// Endpoints to scrape. Repeatable.
    #[arg(long, value_name = "URL")]
    pub scrape: Vec<String>,
    /// Also record this host's GPUs through NVML, under dcgm-exporter's metric names.
    #[arg(long)]
    pub nvml: bool,
    /// How --nvml samples.
    #[command(flatten)]
    pub nvml_sampling: NvmlSamplingArgs,
    /// How long to record.
    #[arg(long, default_value = "10m")]
    pub duration: String,
    /// Time between scrapes.
    #[arg(long, default_value = "15s")]
    pub interval: String,
    /// Per-request timeout.
    #[arg(long, default_value = "10s")]
    pub timeout: String,
    /// An HTTP header, `Name: value`. Repeatable.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Record from a Prometheus-compatible API instead (see the Prometheus options).
    #[command(flatten)]
    pub prom: PrometheusArgs,
    /// With --prometheus: only replicas whose labels match these PromQL matchers.
    #[arg(long)]
    pub selector: Option<String>,
    /// With --prometheus: start of the range (RFC 3339 or Unix seconds).
    #[arg(long, requires = "prometheus")]
    pub from: Option<String>,
    /// With --prometheus: end of the range (RFC 3339 or Unix seconds).
    #[arg(long, requires = "prometheus")]
    pub to: Option<String>,
    /// With --prometheus: resolution of the recording.
    #[arg(long, default_value = "15s")]
    pub step: String,
    /// Output file (OpenMetrics with timestamps in seconds and `# EOF`).
    #[arg(long)]
    pub out: PathBuf,
}

/// `rules` subcommands.
#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Validate playbooks: schema, names, types, graph.
    Check {
        /// Extra or overriding rules directory.
        dir: Option<PathBuf>,
    },
    /// Run fixture tests (`*.test.yaml`): expected causes and symptoms for recorded inputs.
    Test {
        /// Fixture directory.
        #[arg(default_value = "fixtures")]
        dir: PathBuf,
        /// Extra or overriding rules directory.
        #[arg(long)]
        rules: Option<PathBuf>,
    },
    /// Explain a symptom, cause, remediation, signal or fact.
    Explain {
        /// The id.
        id: String,
        /// Extra or overriding rules directory.
        #[arg(long)]
        rules: Option<PathBuf>,
    },
    /// Export alerting rules for every symptom, per engine (only `prometheus` for now).
    Export {
        /// Rule format.
        #[arg(value_enum)]
        format: ExportFormat,
        /// Only this engine (vllm, sglang, tgi, trtllm, llamacpp).
        #[arg(long)]
        engine: Option<String>,
        /// Range of rates and window functions in the rules.
        #[arg(long, default_value = "5m")]
        window: String,
        /// How long a condition must hold before the alert fires.
        #[arg(long = "for", default_value = "2m")]
        for_: String,
        /// Extra or overriding rules directory.
        #[arg(long)]
        rules: Option<PathBuf>,
    },
    /// Print the diagnosis graph.
    Graph {
        /// dot or mermaid.
        #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
        format: GraphFormat,
        /// Extra or overriding rules directory.
        #[arg(long)]
        rules: Option<PathBuf>,
    },
}
