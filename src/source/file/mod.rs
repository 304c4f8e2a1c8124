//! Recorded metrics: one parser per file format.

pub mod api_json;
pub mod exposition;
pub mod openmetrics;
pub mod snapshot;
