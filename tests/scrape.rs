//! Live scrape and recording (filled in by their implementer).
