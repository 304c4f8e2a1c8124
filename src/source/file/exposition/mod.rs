//! Parser for the Prometheus text exposition format 0.0.4 and OpenMetrics 1.0.
//!
//! A user hands llm-doctor either one scrape (`curl .../metrics > x.prom`) or a recording of
//! many scrapes (an OpenMetrics backfill file, or a text file with millisecond timestamps).
//! Both become a [`SeriesSet`] here; nothing downstream needs to know which format it was.
//!
//! The format is detected by content: a line `# EOF` makes the file OpenMetrics (then it must
//! be the last non-empty line), anything else is the Prometheus text format. The difference
//! that matters is the timestamp unit: OpenMetrics timestamps are seconds (fractions allowed),
//! the text format's are integer milliseconds. Reading one as the other silently shifts the
//! data by a factor of 1000, so a float timestamp in a text-format file is an error with a hint.
//!
//! Recordings repeat the same series text thousands of times, so the parser is written for
//! speed: it works on bytes, keys series by the raw text of `name{labels}` (a hash lookup on a
//! slice of the input, no allocation) and only builds owned names and labels for a label text
//! it has not seen. Differently spelled label sets of one series (other order, spacing) become
//! separate entries first and are joined by [`SeriesSet::normalize`] at the end.
//!
//! Deliberate leniencies: `# HELP`, `# UNIT` and other comments are ignored in both formats,
//! repeated `# TYPE` lines are accepted (recordings repeat them), unknown escapes in label
//! values are kept verbatim (as Prometheus does), spaces are allowed inside label sets,
//! exemplars are accepted in either format and checked for syntax only, and labels with an
//! empty value are dropped (Prometheus treats `l=""` as no label). The Prometheus 3 quoted-name
//! form `{"my.metric","my.label"="v"} 1` is accepted, as are quoted names in `# TYPE` lines.

mod error;
mod hash;
mod labels;
mod lex;
mod parser;
#[cfg(test)]
// The tests exercise `parse` as a whole (formats, leniencies, every error located, fuzzing),
// not one file of this folder, so they sit beside them.
mod tests;

pub use error::ParseError;
pub(crate) use hash::FastMap;
pub use parser::{first_content_error, parse, parse_chunk, Chunk};

/// Whether some line of `text` is exactly `# EOF` (blanks around it allowed): what makes a file
/// OpenMetrics rather than the Prometheus text format.
pub fn has_eof_line(text: &str) -> bool {
    lex::has_eof_line(text)
}
