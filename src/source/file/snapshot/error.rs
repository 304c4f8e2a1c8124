//! What reading or writing a snapshot file can refuse.

/// A snapshot or timeline file that does not read, or snapshots that make no timeline. Every
/// message starts with the file (or the target) it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotFileError {
    /// Not YAML or JSON as the format needs (the parser's message, with its line and column).
    #[error("{file}: {detail}")]
    Syntax {
        /// The file as named.
        file: String,
        /// The parser's reason.
        detail: String,
    },
    /// Another `llm_doctor:` format than this version reads.
    #[error("{file}: unsupported format `llm_doctor: {found}`: this llm-doctor reads `snapshot/v1` and `timeline/v1`")]
    Unsupported {
        /// The file as named.
        file: String,
        /// The format it names.
        found: String,
    },
    /// No `llm_doctor:` key first.
    #[error("{0}: not an llm-doctor snapshot: the first key must be `llm_doctor: snapshot/v1` or `llm_doctor: timeline/v1`")]
    NotSnapshot(String),
    /// Problems inside the document, one per line, each with its place.
    #[error("{}", .0.join("\n"))]
    Problems(Vec<String>),
    /// Snapshots that cannot be written as one timeline (the target and why).
    #[error("{0}")]
    Timeline(String),
}

#[cfg(test)]
mod tests {
    use super::SnapshotFileError;
    use crate::source::file::snapshot::{SNAPSHOT_V1, TIMELINE_V1};

    #[test]
    fn the_messages_name_the_formats_this_version_reads() {
        let e = SnapshotFileError::NotSnapshot("f".into()).to_string();
        assert!(e.contains(SNAPSHOT_V1) && e.contains(TIMELINE_V1), "{e}");
    }
}
