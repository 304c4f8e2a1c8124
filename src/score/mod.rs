//! Scoring the diagnosis against what it should say: fixture tests (`rules test`) and the
//! labelled corpus (`eval`).

pub mod case;
pub mod corpus;
pub mod fixtures;
