//! The vocabulary shared by every stage of the condition language: value types, the slots
//! that names resolve to, the host's `Scope` (compile time) and `Env` (evaluation time), and
//! the compile mode. The stages (`parser`, `check`, `eval`, `promql`) depend on it and
//! `mod.rs` ties them together, so nothing here names a stage.

/// Value types of the language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// A finite floating-point number (durations are in seconds, ratios in 0..1).
    Number,
    /// Text, written in double quotes.
    String,
    /// `true` or `false`.
    Bool,
}

/// Where a name's value lives at evaluation time; the host decides the numbering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Slot {
    /// A signal (always a number), e.g. `queue_depth`.
    Signal(usize),
    /// A fact about the deployment, e.g. `fact.engine`; any type.
    Fact(usize),
    /// A service-level objective, e.g. `slo.ttft_p99_seconds`; a number.
    Slo(usize),
}

/// Resolves names while compiling.
pub trait Scope {
    /// The slot and type of a name such as `queue_depth`, `fact.engine` or `slo.ttft_p99_seconds`.
    fn resolve(&self, name: &str) -> Option<(Slot, Type)>;
    /// Every name that resolves, used for "did you mean" suggestions.
    fn names(&self) -> Vec<String>;
}

/// Window statistics of a signal (gauges over a time window).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct WindowStats {
    /// Smallest value in the window.
    pub min: f64,
    /// Mean value over the window.
    pub mean: f64,
    /// Largest value in the window.
    pub max: f64,
    /// Most recent value.
    pub last: f64,
}

/// A value read from the environment at evaluation time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Input<'a> {
    /// A number; NaN and infinities are treated as unknown.
    Number(f64),
    /// A string.
    Str(&'a str),
    /// A boolean.
    Bool(bool),
}

/// Supplies values while evaluating. `None` means absent (unknown).
pub trait Env {
    /// The value of a slot, or None when absent.
    fn get(&self, slot: Slot) -> Option<Input<'_>>;
    /// Window statistics of a signal slot, None when the signal has no window (then the *_over_time functions fall back to the plain value).
    fn stats(&self, slot: Slot) -> Option<WindowStats>;
}

/// What a compiled expression must produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    Condition,
    Number,
}
