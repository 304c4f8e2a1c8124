//! The line parser: `# TYPE` lines, samples and their timestamps, each series found once by
//! its raw text; then the set is normalized.

use std::borrow::Cow;

use super::error::ParseError;
use super::hash::FastMap;
use super::lex::{
    char_at, has_eof_line, is_metric_char, is_metric_start, is_ws, scan_quoted, skip_ws, token_end,
    unescape,
};
use crate::signal::series::{Labels, MetricType, Sample, Samples, Series, SeriesSet};

/// Parses one exposition file. `file` only labels errors.
///
/// Empty input, or input with only comments, gives an empty [`SeriesSet`]: "no samples" is for
/// the caller to report, with more context than a parser has.
pub fn parse(text: &str, file: &str) -> Result<SeriesSet, ParseError> {
    let chunk = parse_chunk(text, file, has_eof_line(text), 1)?;
    let mut set = SeriesSet {
        series: chunk.series.into_iter().map(|(_, s)| s).collect(),
        families: chunk.families,
        has_timestamps: false,
        conflicts: Default::default(),
    };
    set.normalize();
    Ok(set)
}

/// What one piece of a file (whole lines) holds, before series of other pieces are joined.
#[derive(Debug, Default)]
pub struct Chunk {
    /// Series in order of first appearance in the piece, each with the raw `name{labels}` text
    /// it was keyed by (differently spelled label sets of one series are separate entries, as
    /// in [`parse`], until [`SeriesSet::normalize`] joins them).
    pub series: Vec<(String, Series)>,
    /// Family types declared in the piece (a later known type wins, as in [`parse`]).
    pub families: std::collections::BTreeMap<String, MetricType>,
    /// Whether a line of the piece is `# EOF`: in OpenMetrics mode the end of the file, in text
    /// mode a sign that the file was OpenMetrics after all.
    pub saw_eof: bool,
    /// How many newlines the piece has: the next piece starts that many lines further on.
    pub newlines: usize,
}

/// The first non-blank line of a piece: where "content after `# EOF`" points when an earlier
/// piece ended the file.
pub fn first_content_error(text: &str, file: &str, first_line: usize) -> Option<ParseError> {
    for (idx, raw_line) in text.split('\n').enumerate() {
        let line = raw_line.strip_suffix('\r').unwrap_or(raw_line);
        let b = line.as_bytes();
        let mut end = b.len();
        while end > 0 && is_ws(b[end - 1]) {
            end -= 1;
        }
        let start = skip_ws(&b[..end], 0);
        if start < end {
            let mut pos = start;
            while !line.is_char_boundary(pos) {
                pos -= 1;
            }
            let (line_text, caret) = ParseError::shown(line, pos);
            return Some(ParseError {
                file: file.to_string(),
                line: first_line + idx,
                column: line[..pos].chars().count() + 1,
                message: "content after `# EOF`".to_string(),
                line_text,
                caret,
            });
        }
    }
    None
}

/// Parses whole lines of a file, the first being line `first_line`, in the format given
/// (`openmetrics`: timestamps in seconds, `# EOF` ends the file). The streaming reader
/// (`source::file::stream`) parses a file piece by piece with this and joins the pieces; the
/// result is the same as [`parse`] on the whole text.
pub fn parse_chunk(
    text: &str,
    file: &str,
    openmetrics: bool,
    first_line: usize,
) -> Result<Chunk, ParseError> {
    let mut p = Parser {
        file,
        openmetrics,
        series: Vec::new(),
        by_raw: FastMap::default(),
        families: Default::default(),
        spans: Vec::new(),
        raw_of: Vec::new(),
        next_of: Vec::new(),
        last_idx: None,
        pending: Sample::default(),
    };
    let mut seen_eof = false;
    let mut saw_eof = false;
    let mut newlines = 0;
    for (idx, raw_line) in text.split('\n').enumerate() {
        newlines = idx;
        let line = raw_line.strip_suffix('\r').unwrap_or(raw_line);
        let b = line.as_bytes();
        let mut end = b.len();
        while end > 0 && is_ws(b[end - 1]) {
            end -= 1;
        }
        let start = skip_ws(&b[..end], 0);
        if start == end {
            continue;
        }
        let lineno = first_line + idx;
        if seen_eof {
            return Err(p.error(lineno, line, start, "content after `# EOF`".to_string()));
        }
        if b[start] == b'#' {
            saw_eof |= &line[start..end] == "# EOF";
            seen_eof = p.comment(line, start, end, lineno)?;
        } else {
            p.sample(line, start, end, lineno)?;
        }
    }
    // Samples were pushed one by one: a 41-sample series has room for 64. Over a fleet's
    // 790,000 series that slack was a fifth of the memory.
    for s in &mut p.series {
        s.samples.shrink_slack();
    }
    Ok(Chunk {
        series: p
            .raw_of
            .into_iter()
            .map(str::to_string)
            .zip(p.series)
            .collect(),
        families: p.families,
        saw_eof,
        newlines,
    })
}

/// `Parser::next_of` before a series has been followed by another.
const NO_SERIES: usize = usize::MAX;

/// One `name="value"` of the sample being parsed, as slices of the input.
#[derive(Clone, Copy)]
pub(super) struct Span<'a> {
    pub(super) name: &'a str,
    pub(super) name_escaped: bool,
    pub(super) value: &'a str,
    pub(super) value_escaped: bool,
    /// Byte offset of the label name in the line, for the duplicate-label error.
    pub(super) pos: usize,
}

/// A quoted metric name found inside the braces: `{"my.metric"}`.
pub(super) type QuotedName<'a> = Option<(&'a str, bool)>;

pub(super) struct Parser<'a> {
    pub(super) file: &'a str,
    openmetrics: bool,
    /// Series in order of first appearance; sorted and joined by `normalize` at the end.
    pub(super) series: Vec<Series>,
    /// Raw `name{labels}` text -> index into `series`.
    by_raw: FastMap<&'a str, usize>,
    pub(super) families: std::collections::BTreeMap<String, MetricType>,
    /// Scratch for the current line's labels, reused to avoid per-line allocation.
    pub(super) spans: Vec<Span<'a>>,
    /// Per series: its raw `name{labels}` text, and the series of the line that followed its
    /// last line (`NO_SERIES` if none yet). Lines come in a repeating order (a series' samples
    /// together, a histogram's buckets in turn, the same order in every scrape), so the series
    /// that followed last time is tried first: a match is a comparison of bytes, without
    /// scanning labels or hashing.
    raw_of: Vec<&'a str>,
    next_of: Vec<usize>,
    /// The series of the previous sample line.
    last_idx: Option<usize>,
    /// The sample of the line being parsed, until its series is resolved.
    pending: Sample,
}

impl<'a> Parser<'a> {
    pub(super) fn error(
        &self,
        lineno: usize,
        line: &str,
        pos: usize,
        message: String,
    ) -> ParseError {
        let mut pos = pos.min(line.len());
        while !line.is_char_boundary(pos) {
            pos -= 1;
        }
        let (line_text, caret) = ParseError::shown(line, pos);
        ParseError {
            file: self.file.to_string(),
            line: lineno,
            column: line[..pos].chars().count() + 1,
            message,
            line_text,
            caret,
        }
    }

    /// Handles a line starting with `#`; returns true for the `# EOF` line.
    pub(super) fn comment(
        &mut self,
        line: &'a str,
        start: usize,
        end: usize,
        lineno: usize,
    ) -> Result<bool, ParseError> {
        if self.openmetrics && &line[start..end] == "# EOF" {
            return Ok(true);
        }
        let b = &line.as_bytes()[..end];
        let i = start + 1;
        // `#TYPE` without the space is just a comment, in both formats.
        if i >= b.len() || !is_ws(b[i]) {
            return Ok(false);
        }
        let word_start = skip_ws(b, i);
        let word_end = token_end(b, word_start);
        match &line[word_start..word_end] {
            "TYPE" => {
                self.type_line(line, b, word_end, lineno)?;
                Ok(false)
            }
            // HELP and UNIT carry nothing the diagnosis uses.
            _ => Ok(false),
        }
    }

    // Long on purpose: one pass over a line's bytes with one cursor, on the parser's per-line hot
    // path; helpers would hand the cursor, the line and the error position back and forth.
    fn type_line(
        &mut self,
        line: &'a str,
        b: &[u8],
        after_word: usize,
        lineno: usize,
    ) -> Result<(), ParseError> {
        let mut i = skip_ws(b, after_word);
        if i >= b.len() {
            return Err(self.error(
                lineno,
                line,
                i,
                "missing metric name after `# TYPE`".to_string(),
            ));
        }
        let name: Cow<'a, str> = if b[i] == b'"' {
            let Some((close, escaped)) = scan_quoted(b, i) else {
                return Err(self.error(lineno, line, i, "unterminated quoted name".to_string()));
            };
            let name = unescape(&line[i + 1..close], escaped);
            i = close + 1;
            name
        } else if is_metric_start(b[i]) {
            let s = i;
            while i < b.len() && is_metric_char(b[i]) {
                i += 1;
            }
            Cow::Borrowed(&line[s..i])
        } else {
            return Err(self.error(
                lineno,
                line,
                i,
                format!("invalid metric name starting with `{}`", char_at(line, i)),
            ));
        };
        if i < b.len() && !is_ws(b[i]) {
            return Err(self.error(
                lineno,
                line,
                i,
                format!(
                    "unexpected `{}` after metric name `{name}`",
                    char_at(line, i)
                ),
            ));
        }
        let ty_start = skip_ws(b, i);
        let ty_end = token_end(b, ty_start);
        if ty_start == ty_end {
            return Err(self.error(
                lineno,
                line,
                ty_start,
                format!("missing metric type after `# TYPE {name}`"),
            ));
        }
        let word = &line[ty_start..ty_end];
        let Some(ty) = MetricType::from_type_word(word) else {
            return Err(self.error(
                lineno,
                line,
                ty_start,
                format!("invalid metric type `{word}`"),
            ));
        };
        // Recordings repeat TYPE lines: update in place instead of allocating a key each time.
        // A later `unknown` does not erase a known type.
        match self.families.get_mut(name.as_ref()) {
            Some(existing) => {
                if ty != MetricType::Unknown {
                    *existing = ty;
                }
            }
            None => {
                self.families.insert(name.into_owned(), ty);
            }
        }
        Ok(())
    }

    // Long on purpose: one pass over a line's bytes with one cursor, on the parser's per-line hot
    // path; helpers would hand the cursor, the line and the error position back and forth.
    pub(super) fn sample(
        &mut self,
        line: &'a str,
        start: usize,
        end: usize,
        lineno: usize,
    ) -> Result<(), ParseError> {
        let b = &line.as_bytes()[..end];
        if let Some((idx, i)) = self.predicted_key(b, start) {
            self.value_and_rest(line, b, i, start, lineno, Some(idx))?;
            self.last_idx = Some(idx);
            return Ok(());
        }
        let mut i = start;
        let mut bare_name = None;
        if is_metric_start(b[i]) {
            while i < b.len() && is_metric_char(b[i]) {
                i += 1;
            }
            bare_name = Some(&line[start..i]);
            // The text format (expfmt) allows blanks between the name and its labels.
            let j = skip_ws(b, i);
            if j > i && b.get(j) == Some(&b'{') {
                i = j;
            }
        } else if b[i] != b'{' {
            return Err(self.error(
                lineno,
                line,
                i,
                format!("invalid metric name starting with `{}`", char_at(line, i)),
            ));
        }
        self.spans.clear();
        let mut quoted_name: QuotedName<'a> = None;
        if i < b.len() && b[i] == b'{' {
            let slot = if bare_name.is_none() {
                Some(&mut quoted_name)
            } else {
                None
            };
            i = self.label_set(line, b, i, lineno, true, slot)?;
        } else if i < b.len() && !is_ws(b[i]) {
            return Err(self.error(
                lineno,
                line,
                i,
                format!(
                    "unexpected `{}` after metric name `{}`",
                    char_at(line, i),
                    &line[start..i]
                ),
            ));
        }
        let key = &line[start..i];
        if bare_name.is_none() && quoted_name.is_none() {
            return Err(self.error(lineno, line, start, "missing metric name".to_string()));
        }
        self.value_and_rest(line, b, i, start, lineno, None)?;
        let idx = self.resolve(key, bare_name, quoted_name, line, lineno)?;
        self.push_sample(idx, self.pending, line, lineno, start)?;
        if let Some(prev) = self.last_idx {
            self.next_of[prev] = idx;
        }
        self.last_idx = Some(idx);
        Ok(())
    }

    /// When the line starts with the `name{labels}` text of the series that followed the
    /// previous line's series last time, that series and the index after the text: the labels
    /// were checked when the text was first seen, so they are not scanned again.
    #[inline]
    fn predicted_key(&self, b: &[u8], start: usize) -> Option<(usize, usize)> {
        let idx = *self.next_of.get(self.last_idx?)?;
        let k = self.raw_of.get(idx)?.as_bytes();
        let after = start + k.len();
        if !b[start..].starts_with(k) || !b.get(after).is_some_and(|&c| is_ws(c)) {
            return None;
        }
        // A bare name followed by blanks and `{` is a longer key (`foo {a="b"}`).
        if k.last() != Some(&b'}') && b.get(skip_ws(b, after)) == Some(&b'{') {
            return None;
        }
        Some((idx, after))
    }

    /// The value, timestamp and exemplar after the key ending at `i`; with `idx`, the sample is
    /// pushed to that series, else it is left in `self.pending`.
    // Long on purpose: one pass over a line's bytes with one cursor, on the parser's per-line hot
    // path; helpers would hand the cursor, the line and the error position back and forth.
    fn value_and_rest(
        &mut self,
        line: &'a str,
        b: &[u8],
        mut i: usize,
        start: usize,
        lineno: usize,
        idx: Option<usize>,
    ) -> Result<(), ParseError> {
        let key = &line[start..i];
        i = skip_ws(b, i);
        if i >= b.len() {
            return Err(self.error(lineno, line, i, format!("missing value after `{key}`")));
        }
        let value_start = i;
        i = token_end(b, i);
        let value_text = &line[value_start..i];
        let Ok(value) = value_text.parse::<f64>() else {
            return Err(self.error(
                lineno,
                line,
                value_start,
                format!("invalid value `{value_text}`"),
            ));
        };

        i = skip_ws(b, i);
        let mut t_ms = None;
        let mut last_token = "value";
        if i < b.len() && b[i] != b'#' {
            let ts_start = i;
            i = token_end(b, i);
            let ts_text = &line[ts_start..i];
            t_ms = Some(self.timestamp(ts_text).ok_or_else(|| {
                let hint = if !self.openmetrics && ts_text.contains('.') {
                    " (Prometheus text format timestamps are integer milliseconds; \
                     an OpenMetrics file must end with `# EOF`)"
                } else {
                    ""
                };
                self.error(
                    lineno,
                    line,
                    ts_start,
                    format!("invalid timestamp `{ts_text}`{hint}"),
                )
            })?);
            last_token = "timestamp";
            i = skip_ws(b, i);
        }
        if i < b.len() {
            if b[i] == b'#' {
                self.exemplar(line, b, i, lineno)?;
            } else {
                let extra = &line[i..token_end(b, i)];
                return Err(self.error(
                    lineno,
                    line,
                    i,
                    format!("unexpected `{extra}` after {last_token}"),
                ));
            }
        }

        let sample = Sample { t_ms, value };
        match idx {
            Some(idx) => self.push_sample(idx, sample, line, lineno, start)?,
            None => self.pending = sample,
        }
        Ok(())
    }

    /// Adds a sample to series `idx`. A second sample without a timestamp is the same series
    /// at the same instant, which Prometheus refuses (a duplicate sample): so is it here, at
    /// once, rather than holding a file of one line repeated gigabytes deep.
    fn push_sample(
        &mut self,
        idx: usize,
        sample: Sample,
        line: &str,
        lineno: usize,
        start: usize,
    ) -> Result<(), ParseError> {
        let samples = &mut self.series[idx].samples;
        if sample.t_ms.is_none() && samples.last().is_some_and(|s| s.t_ms.is_none()) {
            return Err(self.error(
                lineno,
                line,
                start,
                format!(
                    "`{}` again without a timestamp: a series has one sample per instant (give each sample its timestamp, or one scrape per file)",
                    self.raw_of[idx]
                ),
            ));
        }
        samples.push(sample);
        Ok(())
    }

    pub(super) fn timestamp(&self, text: &str) -> Option<i64> {
        if self.openmetrics {
            crate::time::seconds_to_ms(text)
        } else {
            text.parse::<i64>().ok()
        }
    }
    /// The series index for this line's `name{labels}` text, creating the series on first
    /// sight. Duplicate label names are checked only then: a text seen before was valid.
    fn resolve(
        &mut self,
        key: &'a str,
        bare_name: Option<&'a str>,
        quoted_name: QuotedName<'a>,
        line: &str,
        lineno: usize,
    ) -> Result<usize, ParseError> {
        if let Some(&idx) = self.by_raw.get(key) {
            return Ok(idx);
        }
        let name = match (bare_name, quoted_name) {
            (Some(n), _) => n.to_string(),
            (None, Some((n, escaped))) => unescape(n, escaped).into_owned(),
            (None, None) => String::new(),
        };
        let mut pairs: Vec<(String, String)> = self
            .spans
            .iter()
            .map(|s| {
                (
                    unescape(s.name, s.name_escaped).into_owned(),
                    unescape(s.value, s.value_escaped).into_owned(),
                )
            })
            .collect();
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(dup) = pairs.windows(2).find(|w| w[0].0 == w[1].0) {
            let dup = dup[0].0.clone();
            // Point at the second occurrence in the line.
            let pos = self
                .spans
                .iter()
                .filter(|s| unescape(s.name, s.name_escaped) == dup.as_str())
                .nth(1)
                .map_or(0, |s| s.pos);
            return Err(self.error(lineno, line, pos, format!("duplicate label `{dup}`")));
        }
        pairs.retain(|(_, v)| !v.is_empty());
        let idx = self.series.len();
        self.series.push(Series {
            name,
            labels: Labels(pairs),
            samples: Samples::new(),
        });
        self.by_raw.insert(key, idx);
        self.raw_of.push(key);
        self.next_of.push(NO_SERIES);
        Ok(idx)
    }
}
