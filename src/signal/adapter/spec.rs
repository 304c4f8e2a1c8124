//! Adapter definitions as written in `rules/signals/*.yaml`.
//!
//! An adapter says how one engine's or exporter's metrics become canonical signals and facts.
//! Definitions are data so that the file reader and the PromQL generator share one source of
//! truth: a signal is defined once per engine.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

/// What an adapter describes.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum AdapterKind {
    /// A serving engine: defines targets.
    Engine,
    /// GPU exporter (dcgm-exporter): joined to an engine target by host.
    Gpu,
    /// Host exporter (node_exporter): joined to an engine target by host.
    Host,
    /// Container exporter (cAdvisor, as the kubelet serves it): one series set per container on
    /// the node, the replica's neighbours too, so joined to an engine target by its pod only.
    Container,
}

/// One adapter file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterSpec {
    /// Adapter name, e.g. `vllm`, `dcgm`, `node`.
    pub name: String,
    /// The engine it describes (`vllm`, `sglang`, `tgi`, `trtllm`, `llamacpp`); default: the name.
    /// Triton with the TensorRT-LLM backend and trtllm-serve are two adapters of engine `trtllm`.
    #[serde(default)]
    pub engine: Option<String>,
    /// Engine, host, GPU or container.
    pub kind: AdapterKind,
    /// What it reads, in plain words.
    pub description: String,
    /// Metric-name prefixes that identify this adapter's series.
    pub detect: Vec<String>,
    /// Signal definitions: canonical name → how to compute it.
    #[serde(default, deserialize_with = "super::unique_keys::unique_keys")]
    pub signals: BTreeMap<String, Expr>,
    /// Per-target choices of one label's value, which selectors name with `pick` (Triton's
    /// entry model: the ensemble or BLS model that clients call, among the models it calls).
    #[serde(default)]
    pub picks: BTreeMap<String, PickSpec>,
    /// Facts read from info metrics' labels.
    #[serde(default)]
    pub info_facts: Vec<InfoFacts>,
    /// Facts read from a gauge's value (e.g. the maximum batch size Triton reports).
    #[serde(default, deserialize_with = "super::unique_keys::unique_keys")]
    pub gauge_facts: BTreeMap<String, SeriesSelector>,
    /// Versions recognised by the presence of a metric name, newest first.
    #[serde(default)]
    pub versions: Vec<VersionHint>,
    /// Facts taken from a label of the engine's series (e.g. `model` from `model_name`).
    #[serde(default)]
    pub label_facts: BTreeMap<String, String>,
    /// Engine defaults for facts, applied when nothing else sets them.
    #[serde(default)]
    pub defaults: BTreeMap<String, serde_yaml::Value>,
    /// Defaults that hold only when the serve command line is known (`--engine-args`): without
    /// it the operator may have set the flag, and the default would be a guess (a batch pinned
    /// at 16 says more about `--max-num-seqs` than vLLM's 256 does).
    #[serde(default)]
    pub command_line_defaults: BTreeMap<String, serde_yaml::Value>,
    /// How to obtain a signal when it is missing: for signals this adapter defines but whose
    /// metrics were absent, and for catalog signals it cannot provide.
    #[serde(default)]
    pub hints: BTreeMap<String, String>,
    /// Serve command line: how flags map onto facts.
    #[serde(default)]
    pub command_line: Option<CommandLineSpec>,
    /// A model configuration file (Triton's `config.pbtxt`): how its fields map onto facts.
    #[serde(default)]
    pub model_config: Option<ModelConfigSpec>,
    /// What each of `signals` needs known once, in their order (filled at load, against the
    /// catalog): a postmortem reads them at every step of every replica.
    #[serde(skip)]
    pub planned: Vec<PlannedSignal>,
}

/// What evaluating one of an adapter's signals needs known before it is evaluated: where it
/// goes in the catalog, and the shape of its expression.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlannedSignal {
    /// Its index in the catalog (None: not a catalog signal, which validation reports).
    pub index: Option<usize>,
    /// Whether a selector has a `pick` ([`Expr::has_picks`]).
    pub has_picks: bool,
    /// Whether it reads a gauge, so window statistics are meaningful
    /// ([`super::eval::reads_gauge`]).
    pub reads_gauge: bool,
}

/// A label value chosen per target: the one a fact names, else the one whose series of a counter
/// grow fastest. A caller holds each request for as long as the models it calls together, so
/// of a replica's models the entry model has the most request time.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PickSpec {
    /// The label whose value is chosen (`model`).
    pub label: String,
    /// A fact that names the value outright (`--fact triton_entry_model=ensemble`).
    #[serde(default)]
    pub fact: Option<String>,
    /// The counter whose rate, summed per value of `label`, is largest for the chosen value.
    pub largest_rate: SeriesSelector,
    /// Why this value is the right one, in plain words (shown with the signals that use it).
    pub why: String,
}

/// How a Triton model configuration (protobuf text) maps onto facts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfigSpec {
    /// Numeric field name (anywhere in the file) → fact, with a scale to the fact's unit.
    pub fields: BTreeMap<String, ScaledFact>,
    /// `parameters { key: "K" value { string_value: "V" } }` key → fact.
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
}

/// A fact with a scale factor from the source unit.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaledFact {
    /// The fact.
    pub fact: String,
    /// Multiplier to the fact's unit (e.g. 1e-6 from microseconds to seconds).
    #[serde(default = "one")]
    pub scale: f64,
}

fn one() -> f64 {
    1.0
}

/// A version recognised by a metric that only it exports.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionHint {
    /// The sample name that identifies it.
    pub metric: String,
    /// The version range, in words (`V1, 0.9 or newer`).
    pub version: String,
}

/// Facts from the labels of an info metric such as `vllm:cache_config_info`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InfoFacts {
    /// The info metric's sample name.
    pub metric: String,
    /// Label → fact.
    pub labels: BTreeMap<String, String>,
}

/// How a serve command line maps onto facts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandLineSpec {
    /// Words that identify the command (`vllm serve`, `vllm.entrypoints.openai.api_server`).
    pub commands: Vec<String>,
    /// Flag (with leading dashes; aliases allowed) → fact. Boolean facts become switches with `--no-` twins.
    pub flags: BTreeMap<String, String>,
    /// Switch whose presence sets a boolean fact to false (e.g. SGLang's `--disable-radix-cache`).
    #[serde(default)]
    pub inverted: BTreeMap<String, String>,
    /// Flag whose presence alone sets a boolean fact to true (e.g. `--speculative-config`).
    #[serde(default)]
    pub presence: BTreeMap<String, String>,
    /// Environment variable → fact.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Flag giving the model when it is not positional (e.g. `--model`).
    #[serde(default)]
    pub model_flags: Vec<String>,
}

/// A label filter: label → accepted values.
pub type Matchers = BTreeMap<String, OneOrMany>;

/// One string or a list.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum OneOrMany {
    /// One value.
    One(String),
    /// Any of these.
    Many(Vec<String>),
}

impl AdapterSpec {
    /// The engine this adapter describes.
    pub fn engine_name(&self) -> &str {
        self.engine.as_deref().unwrap_or(&self.name)
    }
}

impl OneOrMany {
    /// The values as a slice-like list.
    pub fn values(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(s) => vec![s.as_str()],
            OneOrMany::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// A series selector: metric name (alternatives: the first with series wins) and label filters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesSelector {
    /// Sample name(s); older names after newer ones.
    pub metric: OneOrMany,
    /// Labels that must match.
    #[serde(
        default,
        rename = "where",
        deserialize_with = "super::unique_keys::unique_keys"
    )]
    pub matchers: Matchers,
    /// Labels that must not match.
    #[serde(default, deserialize_with = "super::unique_keys::unique_keys")]
    pub where_not: Matchers,
    /// The quantile, for `quantile` only.
    #[serde(default)]
    pub q: Option<f64>,
    /// The bits of interest, for `bit_share` only.
    #[serde(default)]
    pub mask: Option<u64>,
    /// The per-second growth under which an interval counts, for `share_below` only.
    #[serde(default)]
    pub below: Option<f64>,
    /// Only series whose label is the value the adapter's pick of this name chose for the
    /// target (see [`PickSpec`]).
    #[serde(default)]
    pub pick: Option<String>,
    /// Its number among the loaded adapters' selectors ([`Adapters::load`] numbers them), under
    /// which a target keeps what it selects: a postmortem asks at every step. None for one made
    /// while evaluating (a pick resolved, a suffix appended): those are found by content.
    ///
    /// [`Adapters::load`]: super::Adapters::load
    #[serde(skip)]
    pub slot: Option<u32>,
}

/// Equal when they select alike and read alike; the slot is where a selection is kept, not
/// what it is.
impl PartialEq for SeriesSelector {
    fn eq(&self, other: &Self) -> bool {
        self.metric == other.metric
            && self.matchers == other.matchers
            && self.where_not == other.where_not
            && self.q == other.q
            && self.mask == other.mask
            && self.below == other.below
            && self.pick == other.pick
    }
}

/// An expression over series, evaluated per target. Leaves yield one value per series (a
/// vector); binary operators match series with identical labels; aggregations reduce a vector
/// to one value. The same tree compiles to PromQL for live Prometheus.
///
/// Read from YAML by [`super::expr_yaml`].
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A gauge's value: last (or window mean/max/min for statistics).
    Gauge(SeriesSelector),
    /// Per-second rate of a counter over the window.
    Rate(SeriesSelector),
    /// Increase of a counter over the window.
    Increase(SeriesSelector),
    /// How many times a gauge's value changed within the window (PromQL `changes`): a
    /// process start time that changes is a restart.
    Changes(SeriesSelector),
    /// How many times a counter went down within the window (PromQL `resets`): a counter that
    /// starts over is a process that restarted, where no start time is exported.
    Resets(SeriesSelector),
    /// Share of the window during which a bitmask gauge had any of the selector's `mask` bits set.
    BitShare(SeriesSelector),
    /// Share of the window's scrape intervals in which a counter grew more slowly than the
    /// selector's `below` per second (intervals with a reset left out): the share of time a
    /// core's idle time stood still is the share of time it was pegged, which a mean over the
    /// window hides when the window also holds calm seconds. No PromQL form in one query: live
    /// triage reads the counter's raw samples.
    ShareBelow(SeriesSelector),
    /// `histogram_quantile` of the selector's `q` over the window (bucket rates summed by `le`);
    /// the metric is the histogram's base name, without `_bucket`.
    Quantile(SeriesSelector),
    /// The lower edge of the bucket holding that quantile: the least the quantile can be (see
    /// [`window::histogram_quantile_floor`]). PromQL cannot turn a bucket's `le` into a value:
    /// live triage fetches the buckets' rates and evaluates it as the file reader does.
    ///
    /// [`window::histogram_quantile_floor`]: crate::signal::window::histogram_quantile_floor
    QuantileFloor(SeriesSelector),
    /// Histogram (or summary) mean over the window: rate(_sum) / rate(_count).
    HistMean(SeriesSelector),
    /// Sum over series.
    Sum(Box<Expr>),
    /// Maximum over series.
    Max(Box<Expr>),
    /// Minimum over series.
    Min(Box<Expr>),
    /// Mean over series.
    Avg(Box<Expr>),
    /// Number of series.
    Count(Box<Expr>),
    /// Division; undefined (absent) where the denominator is zero.
    Div(Box<Expr>, Box<Expr>),
    /// Subtraction.
    Sub(Box<Expr>, Box<Expr>),
    /// Addition of several terms.
    Add(Vec<Expr>),
    /// Multiplication by a constant.
    Scale(Box<Expr>, f64),
    /// A constant.
    Const(f64),
    /// Values on a 0-100 scale become 0-1; values already at most 1 are kept (dcgm-exporter
    /// fields changed scale across versions).
    PercentToRatio(Box<Expr>),
    /// The first alternative that yields a value.
    First(Vec<Expr>),
    /// A sum of counters (the first), taken as zero when it has no series but its sibling (the
    /// second) has: Triton creates `nv_inference_request_failure` only at the first failure, so
    /// a replica that never failed has successes and no failure series at all.
    ZeroWhenAbsent(Box<Expr>, Box<Expr>),
    /// How throughput grew with the running batch inside the window (see [`Scaling`]). It pairs
    /// the window's samples interval by interval and has no PromQL form: live triage fetches
    /// the raw samples and evaluates it as the file reader does.
    Scaling(Box<Scaling>),
    /// The share of the replica's busy time in which requests waited (see [`QueuedShare`]).
    QueuedShare(Box<QueuedShare>),
    /// How much more the arrivals varied from interval to interval than random arrivals would
    /// (see [`Arrivals`]). Like a scaling, it pairs the window's samples and has no PromQL
    /// form.
    Dispersion(Box<Arrivals>),
    /// Requests finished per second over arrivals per second in the window (see [`Arrivals`]).
    /// Like a scaling, it pairs the window's samples and has no PromQL form.
    Served(Box<Arrivals>),
    /// The longest stretch of the window in which requests ran and no work was done (see
    /// [`Stall`]). Like a scaling, it pairs the window's samples and has no PromQL form.
    Stall(Box<Stall>),
}

/// A hung engine: the longest stretch, in seconds, between sample instants of the window at
/// which requests were `busy` (running) all along and the cumulative `work` (tokens computed)
/// did not grow. An engine that steps advances every running request each step, so a stretch
/// of scrapes with requests running and no token made is no step finishing: a stuck collective,
/// a wedged device, a paused process. A scrape that failed, or a sample missing, ends the
/// stretch: a replica that is gone is a crash, not a hang. 0 when the replica never stalled.
/// Samples only bound a stall (the last token came after the sample before the stretch, the
/// next one before the sample after it): half a scrape interval is added at each end that was
/// seen (one interval in all, with both ends seen), so a stall is not read short by an
/// interval. A scrape gap of more than two intervals is a replica gone, like a failed sample.
/// At a coarse scrape the estimate is as coarse: at 15 s a stall reads 0, 30 s, 45 s and so on.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Stall {
    /// A cumulative count of work read at each instant (a counter's value, e.g. tokens).
    pub work: Expr,
    /// Requests running at each instant (a gauge).
    pub busy: Expr,
}

/// Arrivals read from two counts: requests that arrived in each interval between the window's
/// consecutive samples are those that finished (`done`'s growth) plus the growth of those still
/// `present`, waiting or running. Preemption moves requests between waiting and running and
/// leaves the count alone. Two statistics of the window read them:
///
/// - `dispersion`, their index of dispersion: the variance over the mean of arrivals per
///   interval, the variance read from neighbouring intervals (half the mean square successive
///   difference), so a change of rate inside the window counts once rather than as a spread
///   over every interval. Random (Poisson) arrivals give about 1 at any interval length and any
///   rate, so the index says how bursty demand was without a threshold tied to the workload;
///   bursts of arrivals give many times that.
/// - `served`, the rate at which requests finished (from the first arrival to the last finish)
///   over the rate at which they arrived (from the first arrival to the last): about 1 where
///   the replica keeps up with demand, below it where arrivals outpace what it serves, whether
///   the backlog is still there at the window's end or drains after arrivals stop. In a window
///   inside steady load both spans are the window, and it is finished over arrived.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Arrivals {
    /// Requests finished so far (a counter's value, read at each instant).
    pub done: Expr,
    /// Requests in the replica (waiting plus running) at each instant.
    pub present: Expr,
}

impl Arrivals {
    /// The same counts with every selector passed through `f` (see [`Expr::map_selectors`]).
    fn map_selectors<E>(
        &self,
        f: &mut impl FnMut(&SeriesSelector) -> Result<SeriesSelector, E>,
    ) -> Result<Arrivals, E> {
        Ok(Arrivals {
            done: self.done.map_selectors(f)?,
            present: self.present.map_selectors(f)?,
        })
    }
}

/// Of the sample instants in the window at which the replica was busy (requests running or
/// queued), the share at which requests were queued. A burst fills the queue for a moment and
/// leaves the replica working through it with nothing waiting; load above capacity keeps
/// requests waiting whenever the replica works. Instants are the queue's samples; each reads
/// the newest sample of both since the instant before.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QueuedShare {
    /// Requests waiting (a gauge).
    pub queue: Expr,
    /// Requests running (a gauge).
    pub running: Expr,
}

/// Batch scaling: between consecutive samples of `batch`, each sequence's speed (the growth of
/// the cumulative `work` per second, divided by the batch unless `per_step`) is compared at the
/// window's fullest batch and at half of it or less. The value is the throughput one more
/// sequence added, as a share of one sequence's throughput at the small batch: about 1 when
/// sequences decode as fast in a full batch (a larger batch would add throughput), about 0 when
/// a fuller batch only slows each one (the hardware is saturated).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scaling {
    /// A cumulative count read at each instant (a counter's value, e.g. generated tokens).
    pub work: Expr,
    /// The running batch at each instant (a gauge).
    pub batch: Expr,
    /// `work` counts engine steps, each advancing every running sequence by one token (so a
    /// sequence's speed is the step rate itself).
    #[serde(default)]
    pub per_step: bool,
    /// How long a sequence stays in the running batch, in seconds (a mean decode time). The
    /// gauge shows the batch only at the instants it was sampled: where sequences come and go
    /// within two samples' spacing, an interval's ends say little of the batch it held, and
    /// the smaller batches are the ones read low by chance. The scaling is then unknown.
    #[serde(default)]
    pub lifetime: Option<Expr>,
}

/// An expression's operands, inline: every step of a postmortem walks the adapters'
/// expressions, and a vector allocated per node was a few percent of it.
pub type Children<'a> = smallvec::SmallVec<[&'a Expr; 3]>;

impl Expr {
    /// The expressions directly below this one.
    pub fn children(&self) -> Children<'_> {
        match self {
            Expr::Sum(e)
            | Expr::Max(e)
            | Expr::Min(e)
            | Expr::Avg(e)
            | Expr::Count(e)
            | Expr::Scale(e, _)
            | Expr::PercentToRatio(e) => smallvec::smallvec![&**e],
            Expr::Div(a, b) | Expr::Sub(a, b) | Expr::ZeroWhenAbsent(a, b) => {
                smallvec::smallvec![&**a, &**b]
            }
            Expr::Add(v) | Expr::First(v) => v.iter().collect(),
            Expr::Scaling(s) => [&s.work, &s.batch]
                .into_iter()
                .chain(s.lifetime.as_ref())
                .collect(),
            Expr::QueuedShare(s) => smallvec::smallvec![&s.queue, &s.running],
            Expr::Dispersion(s) | Expr::Served(s) => smallvec::smallvec![&s.done, &s.present],
            Expr::Stall(s) => smallvec::smallvec![&s.work, &s.busy],
            Expr::Gauge(_)
            | Expr::Rate(_)
            | Expr::Increase(_)
            | Expr::Changes(_)
            | Expr::Resets(_)
            | Expr::BitShare(_)
            | Expr::ShareBelow(_)
            | Expr::Quantile(_)
            | Expr::QuantileFloor(_)
            | Expr::HistMean(_)
            | Expr::Const(_) => Children::new(),
        }
    }

    /// The series selector of a leaf.
    pub fn selector(&self) -> Option<&SeriesSelector> {
        match self {
            Expr::Gauge(s)
            | Expr::Rate(s)
            | Expr::Increase(s)
            | Expr::Changes(s)
            | Expr::Resets(s)
            | Expr::BitShare(s)
            | Expr::ShareBelow(s)
            | Expr::Quantile(s)
            | Expr::QuantileFloor(s)
            | Expr::HistMean(s) => Some(s),
            _ => None,
        }
    }

    /// Calls `f` on this node and every node below it, parents first, left to right.
    pub fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        for c in self.children() {
            c.visit(f);
        }
    }

    /// True when `pred` holds for this node or any node below it.
    pub fn any(&self, pred: &dyn Fn(&Expr) -> bool) -> bool {
        pred(self) || self.children().iter().any(|c| c.any(pred))
    }

    /// True when the expression's window statistics must be taken of its value at each
    /// instant: it divides or subtracts, and the statistic of a ratio is not the ratio of the
    /// statistics (a framebuffer whose total drops when the process dies would show a maximum
    /// below its minimum). Elsewhere each leaf's statistic gives the same answer.
    pub fn stats_per_instant(&self) -> bool {
        self.any(&|e| matches!(e, Expr::Div(..) | Expr::Sub(..)))
    }

    /// Every metric name the expression reads, alternatives included, in order of appearance.
    pub fn metric_names(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        self.visit(&mut |e| {
            for n in e.selector().map(|s| s.metric.values()).unwrap_or_default() {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        });
        out
    }

    /// The same expression with every selector passed through `f` (which may fail).
    pub fn map_selectors<E>(
        &self,
        f: &mut impl FnMut(&SeriesSelector) -> Result<SeriesSelector, E>,
    ) -> Result<Expr, E> {
        let b = |e: &Expr, f: &mut _| e.map_selectors(f).map(Box::new);
        Ok(match self {
            Expr::Gauge(s) => Expr::Gauge(f(s)?),
            Expr::Rate(s) => Expr::Rate(f(s)?),
            Expr::Increase(s) => Expr::Increase(f(s)?),
            Expr::Changes(s) => Expr::Changes(f(s)?),
            Expr::Resets(s) => Expr::Resets(f(s)?),
            Expr::BitShare(s) => Expr::BitShare(f(s)?),
            Expr::ShareBelow(s) => Expr::ShareBelow(f(s)?),
            Expr::Quantile(s) => Expr::Quantile(f(s)?),
            Expr::QuantileFloor(s) => Expr::QuantileFloor(f(s)?),
            Expr::HistMean(s) => Expr::HistMean(f(s)?),
            Expr::Sum(e) => Expr::Sum(b(e, f)?),
            Expr::Max(e) => Expr::Max(b(e, f)?),
            Expr::Min(e) => Expr::Min(b(e, f)?),
            Expr::Avg(e) => Expr::Avg(b(e, f)?),
            Expr::Count(e) => Expr::Count(b(e, f)?),
            Expr::PercentToRatio(e) => Expr::PercentToRatio(b(e, f)?),
            Expr::Scale(e, k) => Expr::Scale(b(e, f)?, *k),
            Expr::Div(x, y) => Expr::Div(b(x, f)?, b(y, f)?),
            Expr::Sub(x, y) => Expr::Sub(b(x, f)?, b(y, f)?),
            Expr::ZeroWhenAbsent(x, y) => Expr::ZeroWhenAbsent(b(x, f)?, b(y, f)?),
            Expr::Add(v) => Expr::Add(
                v.iter()
                    .map(|e| e.map_selectors(f))
                    .collect::<Result<_, _>>()?,
            ),
            Expr::First(v) => Expr::First(
                v.iter()
                    .map(|e| e.map_selectors(f))
                    .collect::<Result<_, _>>()?,
            ),
            Expr::Const(c) => Expr::Const(*c),
            Expr::Scaling(s) => Expr::Scaling(Box::new(Scaling {
                work: s.work.map_selectors(f)?,
                batch: s.batch.map_selectors(f)?,
                per_step: s.per_step,
                lifetime: s
                    .lifetime
                    .as_ref()
                    .map(|e| e.map_selectors(f))
                    .transpose()?,
            })),
            Expr::QueuedShare(s) => Expr::QueuedShare(Box::new(QueuedShare {
                queue: s.queue.map_selectors(f)?,
                running: s.running.map_selectors(f)?,
            })),
            Expr::Dispersion(s) => Expr::Dispersion(Box::new(s.map_selectors(f)?)),
            Expr::Served(s) => Expr::Served(Box::new(s.map_selectors(f)?)),
            Expr::Stall(s) => Expr::Stall(Box::new(Stall {
                work: s.work.map_selectors(f)?,
                busy: s.busy.map_selectors(f)?,
            })),
        })
    }

    /// Whether any selector has a `pick` ([`Expr::picks`] without collecting them).
    pub fn has_picks(&self) -> bool {
        self.any(&|e| e.selector().is_some_and(|s| s.pick.is_some()))
    }

    /// The names of the picks the expression's selectors use.
    pub fn picks(&self) -> BTreeSet<&str> {
        let mut out = BTreeSet::new();
        self.visit(&mut |e| out.extend(e.selector().and_then(|s| s.pick.as_deref())));
        out
    }

    /// The expression with each `pick` replaced by a matcher on the value `chosen` gives it
    /// (label, value), or why a pick has none.
    pub fn with_picks(&self, chosen: &Picks) -> Result<Expr, NoPick> {
        self.map_selectors(&mut |s: &SeriesSelector| {
            let Some(name) = &s.pick else {
                return Ok(s.clone());
            };
            match chosen.get(name) {
                Some(Ok((label, value))) => {
                    let mut out = s.clone();
                    out.pick = None;
                    out.slot = None;
                    out.matchers
                        .insert(label.clone(), OneOrMany::One(value.clone()));
                    Ok(out)
                }
                Some(Err(why)) => Err(why.clone()),
                None => Ok(s.clone()),
            }
        })
    }
}

/// Why a pick has no value for a target (no series to choose from, say), with the fact that
/// would name it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoPick(pub String);

/// Per pick name, the (label, value) it chose for a target, or why it chose none.
pub type Picks = BTreeMap<String, Result<(String, String), NoPick>>;
