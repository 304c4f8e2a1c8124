//! API JSON and snapshot-file inputs (filled in by their implementer).
