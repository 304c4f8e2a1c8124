//! The catalog of canonical signals and facts.
//!
//! Playbooks may only name what the catalog declares, and adapters may only produce what it
//! declares, so the catalog is the contract between the two. It is data (`rules/catalog.yaml`,
//! embedded by the binary); this module parses it and gives every name a dense index so that
//! evaluation reads values by position, never by string.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::condition::Type;

/// Why a catalog could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The YAML did not match the catalog schema.
    #[error("{file}: {source}")]
    Yaml {
        /// Where the catalog came from.
        file: String,
        /// The parser's error, with line and column.
        source: serde_yaml::Error,
    },
    /// Nested deeper than any catalog needs (the YAML scanner is slow on such input).
    #[error("{file}:{detail}")]
    TooDeep {
        /// Where the catalog came from.
        file: String,
        /// Where and how deep.
        detail: String,
    },
    /// A name was declared twice.
    #[error("{file}: {kind} `{name}` is declared twice")]
    Duplicate {
        /// Where the catalog came from.
        file: String,
        /// "signal" or "fact".
        kind: &'static str,
        /// The repeated name.
        name: String,
    },
}

/// One canonical signal.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SignalDef {
    /// Canonical name with the unit in it, e.g. `ttft_p99_seconds`.
    pub name: String,
    /// Unit of the value.
    pub unit: String,
    /// Family for listing (latency, load, memory, gpu, cpu, errors).
    pub group: String,
    /// What the value means, in plain words.
    pub description: String,
}

/// Type of a fact as written in the catalog.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FactType {
    /// A number.
    Number,
    /// A string.
    String,
    /// true or false.
    Bool,
}

impl FactType {
    /// The condition-language type of this fact.
    pub fn condition_type(self) -> Type {
        match self {
            FactType::Number => Type::Number,
            FactType::String => Type::String,
            FactType::Bool => Type::Bool,
        }
    }
}

/// One fact about the deployment's configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FactDef {
    /// Name, e.g. `max_num_seqs`.
    pub name: String,
    /// Value type.
    #[serde(rename = "type")]
    pub ty: FactType,
    /// What the fact means.
    pub description: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogSpec {
    signals: Vec<SignalDef>,
    facts: Vec<FactDef>,
}

/// The loaded catalog with name → index maps.
#[derive(Debug, Clone)]
pub struct Catalog {
    signals: Vec<SignalDef>,
    facts: Vec<FactDef>,
    signal_index: NameIndex,
    fact_index: NameIndex,
}

/// Name → index. Looked up for every signal and fact at every step of a postmortem, with
/// names from the rules (a few hundred, none chosen by an adversary): FNV-1a, where the
/// standard library's SipHash (built against flooding) was a few percent of a fleet's run.
type NameIndex = HashMap<String, usize, std::hash::BuildHasherDefault<Fnv1a>>;

/// The 64-bit FNV-1a hash.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Catalog {
    /// Parses a catalog from YAML text; `file` names it in errors.
    pub fn from_yaml(text: &str, file: &str) -> Result<Catalog, CatalogError> {
        crate::yaml_guard::check_depth(text).map_err(|detail| CatalogError::TooDeep {
            file: file.to_string(),
            detail: detail.to_string(),
        })?;
        let spec: CatalogSpec =
            serde_yaml::from_str(text).map_err(|source| CatalogError::Yaml {
                file: file.to_string(),
                source,
            })?;
        let mut signal_index = NameIndex::default();
        for (i, s) in spec.signals.iter().enumerate() {
            if signal_index.insert(s.name.clone(), i).is_some() {
                return Err(CatalogError::Duplicate {
                    file: file.to_string(),
                    kind: "signal",
                    name: s.name.clone(),
                });
            }
        }
        let mut fact_index = NameIndex::default();
        for (i, f) in spec.facts.iter().enumerate() {
            if fact_index.insert(f.name.clone(), i).is_some() {
                return Err(CatalogError::Duplicate {
                    file: file.to_string(),
                    kind: "fact",
                    name: f.name.clone(),
                });
            }
        }
        Ok(Catalog {
            signals: spec.signals,
            facts: spec.facts,
            signal_index,
            fact_index,
        })
    }

    /// Every signal, in catalog order.
    pub fn signals(&self) -> &[SignalDef] {
        &self.signals
    }

    /// Every fact, in catalog order.
    pub fn facts(&self) -> &[FactDef] {
        &self.facts
    }

    /// Index of a signal by name.
    pub fn signal(&self, name: &str) -> Option<usize> {
        self.signal_index.get(name).copied()
    }

    /// Index of a fact by name.
    pub fn fact(&self, name: &str) -> Option<usize> {
        self.fact_index.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Renderers print a value with the unit its name ends in (`_seconds` as s or ms, `_ratio`
    /// as %), so a name and its declared unit must agree, both ways.
    #[test]
    fn every_shipped_signal_name_carries_its_unit() {
        let cat = Catalog::from_yaml(include_str!("../../rules/catalog.yaml"), "catalog.yaml")
            .expect("the shipped catalog loads");
        let mut wrong = Vec::new();
        for s in cat.signals() {
            for (unit, suffix) in [
                ("seconds", "_seconds"),
                ("ratio", "_ratio"),
                ("celsius", "_celsius"),
            ] {
                if (s.unit == unit) != s.name.ends_with(suffix) {
                    wrong.push(format!("{} (unit {})", s.name, s.unit));
                }
            }
        }
        assert!(wrong.is_empty(), "name and unit disagree: {wrong:?}");
    }
}
