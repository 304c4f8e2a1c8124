//! Recorded metrics: one parser per file format, and `read`, which reads a file and picks the
//! parser.

pub mod api_json;
pub mod exposition;
pub mod limit;
pub mod openmetrics;
mod read;
pub mod requests;
pub mod snapshot;
pub mod stream;

pub use read::{
    not_metrics, parse_inputs, parse_inputs_with_warnings, read_files, read_text, FilesRead,
    ACCEPTED_INPUTS,
};
pub use stream::{ReadOptions, Retention};
