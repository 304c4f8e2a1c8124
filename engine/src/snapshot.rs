//! Snapshots: the signals and facts of one target at one instant.
//!
//! Adapters in the binary build a snapshot from whatever source they read; the engine evaluates
//! playbooks against it. Values are stored by catalog index, so evaluation never looks up a name.
//! Missing is not zero: a signal nobody provided, or one whose value is NaN or infinite, is absent,
//! and the adapter may leave a hint saying how to get it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::catalog::Catalog;
use crate::condition::WindowStats;

/// What is diagnosed: one replica, with its GPUs and host joined to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Target {
    /// Serving engine, when known (vllm, sglang, tgi, trtllm, llamacpp).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Identifying labels (instance, pod, model_name, ...).
    pub labels: BTreeMap<String, String>,
}

/// A signal's value with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalValue {
    /// The value conditions see.
    pub value: f64,
    /// Minimum, mean, maximum and last over the window, for gauges.
    pub stats: Option<WindowStats>,
    /// Provenance: the metric or query it was computed from.
    pub source: String,
}

/// A configuration value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FactValue {
    /// A number.
    Number(f64),
    /// A string.
    Str(String),
    /// true or false.
    Bool(bool),
}

impl std::fmt::Display for FactValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FactValue::Number(n) => write!(f, "{n}"),
            FactValue::Str(s) => write!(f, "{s}"),
            FactValue::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// A fact's value with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct FactEntry {
    /// The value.
    pub value: FactValue,
    /// Provenance: "engine args", "vllm:cache_config_info", "engine default", "--fact".
    pub source: String,
}

/// The time frame the values describe.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Window {
    /// End of the window, Unix milliseconds; None for data without timestamps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<i64>,
    /// Window length in milliseconds; None for lifetime averages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub length_ms: Option<i64>,
    /// True when the input had no timestamps, so values are averages since the process started.
    pub lifetime: bool,
}

/// Why a value could not be set.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SnapshotError {
    /// The name is not in the catalog.
    #[error("unknown signal `{0}` (not in the catalog)")]
    UnknownSignal(String),
    /// The name is not in the catalog.
    #[error("unknown fact `{0}` (not in the catalog)")]
    UnknownFact(String),
    /// The value does not have the fact's declared type.
    #[error("fact `{name}` must be a {expected}, got `{got}`")]
    FactType {
        /// Fact name.
        name: String,
        /// Declared type.
        expected: &'static str,
        /// The value given.
        got: String,
    },
}

/// Signals and facts of one target.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// What this snapshot describes.
    pub target: Target,
    /// The time frame.
    pub window: Window,
    signals: Vec<Option<SignalValue>>,
    hints: Vec<Option<String>>,
    facts: Vec<Option<FactEntry>>,
}

impl Snapshot {
    /// An empty snapshot shaped for `catalog`.
    pub fn new(catalog: &Catalog, target: Target) -> Snapshot {
        Snapshot {
            target,
            window: Window::default(),
            signals: vec![None; catalog.signals().len()],
            hints: vec![None; catalog.signals().len()],
            facts: vec![None; catalog.facts().len()],
        }
    }

    /// Sets a signal. NaN and infinite values are stored as absent: missing is not zero.
    pub fn set_signal(
        &mut self,
        catalog: &Catalog,
        name: &str,
        value: SignalValue,
    ) -> Result<(), SnapshotError> {
        let i = catalog
            .signal(name)
            .ok_or_else(|| SnapshotError::UnknownSignal(name.to_string()))?;
        self.set_signal_at(i, value);
        Ok(())
    }

    /// [`Snapshot::set_signal`] by catalog index, for a caller that already has it (a
    /// postmortem sets every signal at every step); an index past the catalog sets nothing.
    pub fn set_signal_at(&mut self, i: usize, value: SignalValue) {
        if let Some(slot) = self.signals.get_mut(i) {
            *slot = value.value.is_finite().then_some(value);
        }
    }

    /// Records how a missing signal could be obtained (shown in "not checked").
    pub fn set_hint(
        &mut self,
        catalog: &Catalog,
        name: &str,
        hint: impl Into<String>,
    ) -> Result<(), SnapshotError> {
        let i = catalog
            .signal(name)
            .ok_or_else(|| SnapshotError::UnknownSignal(name.to_string()))?;
        self.hints[i] = Some(hint.into());
        Ok(())
    }

    /// Sets a fact, checking its declared type.
    pub fn set_fact(
        &mut self,
        catalog: &Catalog,
        name: &str,
        value: FactValue,
        source: impl Into<String>,
    ) -> Result<(), SnapshotError> {
        use crate::catalog::FactType;
        let i = catalog
            .fact(name)
            .ok_or_else(|| SnapshotError::UnknownFact(name.to_string()))?;
        let expected = catalog.facts()[i].ty;
        let ok = matches!(
            (expected, &value),
            (FactType::Number, FactValue::Number(_))
                | (FactType::String, FactValue::Str(_))
                | (FactType::Bool, FactValue::Bool(_))
        );
        if !ok {
            return Err(SnapshotError::FactType {
                name: name.to_string(),
                expected: match expected {
                    FactType::Number => "number",
                    FactType::String => "string",
                    FactType::Bool => "boolean",
                },
                got: value.to_string(),
            });
        }
        if name == "engine" {
            if let FactValue::Str(e) = &value {
                self.target.engine = Some(e.clone());
            }
        }
        self.facts[i] = Some(FactEntry {
            value,
            source: source.into(),
        });
        Ok(())
    }

    /// Sets a fact from text, converting it to the declared type (`true`, `4`, `fp8`).
    pub fn set_fact_str(
        &mut self,
        catalog: &Catalog,
        name: &str,
        text: &str,
        source: impl Into<String>,
    ) -> Result<(), SnapshotError> {
        use crate::catalog::FactType;
        let i = catalog
            .fact(name)
            .ok_or_else(|| SnapshotError::UnknownFact(name.to_string()))?;
        let bad = |expected| SnapshotError::FactType {
            name: name.to_string(),
            expected,
            got: text.to_string(),
        };
        let value = match catalog.facts()[i].ty {
            FactType::Number => FactValue::Number(
                text.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite())
                    .ok_or_else(|| bad("number"))?,
            ),
            FactType::Bool => match text.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => FactValue::Bool(true),
                "false" | "0" | "no" | "off" => FactValue::Bool(false),
                _ => return Err(bad("boolean")),
            },
            FactType::String => FactValue::Str(text.to_string()),
        };
        self.set_fact(catalog, name, value, source)
    }

    /// A signal by catalog index.
    pub fn signal_at(&self, i: usize) -> Option<&SignalValue> {
        self.signals.get(i).and_then(Option::as_ref)
    }

    /// A signal by name.
    pub fn signal(&self, catalog: &Catalog, name: &str) -> Option<&SignalValue> {
        catalog.signal(name).and_then(|i| self.signal_at(i))
    }

    /// The hint for a missing signal by catalog index.
    pub fn hint_at(&self, i: usize) -> Option<&str> {
        self.hints.get(i).and_then(|h| h.as_deref())
    }

    /// A fact by catalog index.
    pub fn fact_at(&self, i: usize) -> Option<&FactEntry> {
        self.facts.get(i).and_then(Option::as_ref)
    }

    /// A fact by name.
    pub fn fact(&self, catalog: &Catalog, name: &str) -> Option<&FactEntry> {
        catalog.fact(name).and_then(|i| self.fact_at(i))
    }

    /// Number of signals present.
    pub fn signal_count(&self) -> usize {
        self.signals.iter().flatten().count()
    }
}
