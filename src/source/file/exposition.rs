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

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

use crate::signal::series::{Labels, MetricType, Sample, Series, SeriesSet};

/// A syntax error, located by 1-based line and 1-based column (in characters).
///
/// Displays as `file:line:column: message`, then the offending line and a caret under the
/// column, compiler style.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}\n  | {line_text}\n  | {}^", CaretPad(line_text, *column))]
pub struct ParseError {
    /// The file name as given to [`parse`].
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// What is wrong, quoting the input.
    pub message: String,
    /// The offending line, without its line ending.
    pub line_text: String,
}

/// Whitespace under the line up to the caret; tabs are copied so the caret stays aligned in a
/// terminal.
struct CaretPad<'a>(&'a str, usize);

impl fmt::Display for CaretPad<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut chars = self.0.chars();
        for _ in 1..self.1 {
            let pad = if chars.next() == Some('\t') {
                '\t'
            } else {
                ' '
            };
            write!(f, "{pad}")?;
        }
        Ok(())
    }
}

/// Parses one exposition file. `file` only labels errors.
///
/// Empty input, or input with only comments, gives an empty [`SeriesSet`]: "no samples" is for
/// the caller to report, with more context than a parser has.
pub fn parse(text: &str, file: &str) -> Result<SeriesSet, ParseError> {
    let mut p = Parser {
        file,
        openmetrics: has_eof_line(text),
        series: Vec::new(),
        by_raw: FastMap::default(),
        families: Default::default(),
        spans: Vec::new(),
        last_key: None,
    };
    let mut seen_eof = false;
    for (idx, raw_line) in text.split('\n').enumerate() {
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
        let lineno = idx + 1;
        if seen_eof {
            return Err(p.error(lineno, line, start, "content after `# EOF`".to_string()));
        }
        if b[start] == b'#' {
            seen_eof = p.comment(line, start, end, lineno)?;
        } else {
            p.sample(line, start, end, lineno)?;
        }
    }
    let mut set = SeriesSet {
        series: p.series,
        families: p.families,
        has_timestamps: false,
    };
    set.normalize();
    Ok(set)
}

/// Whether some line is exactly `# EOF` (surrounding blanks allowed). Checks only the bytes
/// next to each match, so a pathological line full of `# EOF` stays linear.
fn has_eof_line(text: &str) -> bool {
    let b = text.as_bytes();
    text.match_indices("# EOF").any(|(at, m)| {
        let mut i = at;
        while i > 0 && is_ws(b[i - 1]) {
            i -= 1;
        }
        let mut j = skip_ws(b, at + m.len());
        if b.get(j) == Some(&b'\r') {
            j += 1;
        }
        (i == 0 || b[i - 1] == b'\n') && (j == b.len() || b[j] == b'\n')
    })
}

#[inline]
fn is_ws(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

#[inline]
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_ws(b[i]) {
        i += 1;
    }
    i
}

/// End of the whitespace-delimited token starting at `i`.
#[inline]
fn token_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && !is_ws(b[i]) {
        i += 1;
    }
    i
}

#[inline]
fn is_metric_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

#[inline]
fn is_metric_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}

#[inline]
fn is_label_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

#[inline]
fn is_label_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Index of the closing quote of the string opened at `open`, and whether it contains a
/// backslash escape; None when the line ends first.
#[inline]
fn scan_quoted(b: &[u8], open: usize) -> Option<(usize, bool)> {
    let mut j = open + 1;
    let mut escaped = false;
    while j < b.len() {
        match b[j] {
            b'"' => return Some((j, escaped)),
            b'\\' => {
                escaped = true;
                j += 2;
            }
            _ => j += 1,
        }
    }
    None
}

/// Undoes `\\`, `\"` and `\n`; any other backslash sequence is kept verbatim, as Prometheus'
/// text parser does.
fn unescape(raw: &str, escaped: bool) -> Cow<'_, str> {
    if !escaped {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some('n') => out.push('\n'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    Cow::Owned(out)
}

/// The character at byte `pos` (for messages), or a description of the line end.
fn char_at(line: &str, pos: usize) -> String {
    match line.get(pos..).and_then(|rest| rest.chars().next()) {
        Some(c) => c.to_string(),
        None => "end of line".to_string(),
    }
}

/// A small multiplicative hash (FxHash's mixing step) for the raw-key map: SipHash's DoS
/// resistance buys nothing for a local file, and hashing is on the per-line hot path.
#[derive(Default, Clone, Copy)]
struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes([
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
            ]));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(buf));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The multiply leaves the low bits weak and the table indexes by them: avalanche them.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// One `name="value"` of the sample being parsed, as slices of the input.
#[derive(Clone, Copy)]
struct Span<'a> {
    name: &'a str,
    name_escaped: bool,
    value: &'a str,
    value_escaped: bool,
    /// Byte offset of the label name in the line, for the duplicate-label error.
    pos: usize,
}

/// A quoted metric name found inside the braces: `{"my.metric"}`.
type QuotedName<'a> = Option<(&'a str, bool)>;

struct Parser<'a> {
    file: &'a str,
    openmetrics: bool,
    /// Series in order of first appearance; sorted and joined by `normalize` at the end.
    series: Vec<Series>,
    /// Raw `name{labels}` text -> index into `series`.
    by_raw: FastMap<&'a str, usize>,
    families: std::collections::BTreeMap<String, MetricType>,
    /// Scratch for the current line's labels, reused to avoid per-line allocation.
    spans: Vec<Span<'a>>,
    /// The previous line's key, which often repeats (histogram buckets aside, consecutive
    /// scrapes of a gauge-only exporter) and then skips the hash lookup.
    last_key: Option<(&'a str, usize)>,
}

impl<'a> Parser<'a> {
    fn error(&self, lineno: usize, line: &str, pos: usize, message: String) -> ParseError {
        let mut pos = pos.min(line.len());
        while !line.is_char_boundary(pos) {
            pos -= 1;
        }
        ParseError {
            file: self.file.to_string(),
            line: lineno,
            column: line[..pos].chars().count() + 1,
            message,
            line_text: line.to_string(),
        }
    }

    /// Handles a line starting with `#`; returns true for the `# EOF` line.
    fn comment(
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

    fn sample(
        &mut self,
        line: &'a str,
        start: usize,
        end: usize,
        lineno: usize,
    ) -> Result<(), ParseError> {
        let b = &line.as_bytes()[..end];
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

        let idx = self.resolve(key, bare_name, quoted_name, line, lineno)?;
        self.series[idx].samples.push(Sample { t_ms, value });
        Ok(())
    }

    fn timestamp(&self, text: &str) -> Option<i64> {
        if self.openmetrics {
            crate::time::seconds_to_ms(text)
        } else {
            text.parse::<i64>().ok()
        }
    }

    /// Parses `{...}` starting at `open`; returns the index after `}`. With `store`, label
    /// pairs go to `self.spans`. `quoted_name` is Some where a quoted metric name may appear.
    fn label_set(
        &mut self,
        line: &'a str,
        b: &[u8],
        open: usize,
        lineno: usize,
        store: bool,
        mut quoted_name: Option<&mut QuotedName<'a>>,
    ) -> Result<usize, ParseError> {
        let mut i = open + 1;
        loop {
            i = skip_ws(b, i);
            if i >= b.len() {
                return Err(self.error(lineno, line, i, "unterminated label set".to_string()));
            }
            if b[i] == b'}' {
                return Ok(i + 1);
            }
            let name_pos = i;
            let (name, name_escaped) = if b[i] == b'"' {
                let Some((close, escaped)) = scan_quoted(b, i) else {
                    return Err(self.error(
                        lineno,
                        line,
                        i,
                        "unterminated quoted name".to_string(),
                    ));
                };
                let name = &line[i + 1..close];
                i = skip_ws(b, close + 1);
                if i >= b.len() || b[i] != b'=' {
                    // Not followed by `=`: the Prometheus 3 quoted metric name.
                    if let Some(slot) = quoted_name.as_deref_mut() {
                        if slot.is_none() {
                            *slot = Some((name, escaped));
                            match b.get(i) {
                                Some(b',') => {
                                    i += 1;
                                    continue;
                                }
                                Some(b'}') => return Ok(i + 1),
                                _ => {}
                            }
                        }
                    }
                }
                (name, escaped)
            } else if is_label_start(b[i]) {
                let s = i;
                while i < b.len() && is_label_char(b[i]) {
                    i += 1;
                }
                let name = &line[s..i];
                i = skip_ws(b, i);
                (name, false)
            } else {
                return Err(self.error(
                    lineno,
                    line,
                    i,
                    format!("invalid label name starting with `{}`", char_at(line, i)),
                ));
            };
            if i >= b.len() || b[i] != b'=' {
                return Err(self.error(
                    lineno,
                    line,
                    i,
                    format!(
                        "expected `=` after label name `{}`",
                        unescape(name, name_escaped)
                    ),
                ));
            }
            i = skip_ws(b, i + 1);
            if i >= b.len() || b[i] != b'"' {
                return Err(self.error(
                    lineno,
                    line,
                    i,
                    format!(
                        "expected `\"` to open the value of label `{}`",
                        unescape(name, name_escaped)
                    ),
                ));
            }
            let Some((close, value_escaped)) = scan_quoted(b, i) else {
                return Err(self.error(lineno, line, i, "unterminated label value".to_string()));
            };
            if store {
                self.spans.push(Span {
                    name,
                    name_escaped,
                    value: &line[i + 1..close],
                    value_escaped,
                    pos: name_pos,
                });
            }
            i = skip_ws(b, close + 1);
            match b.get(i) {
                Some(b',') => i += 1,
                Some(b'}') => return Ok(i + 1),
                None => {
                    return Err(self.error(lineno, line, i, "unterminated label set".to_string()))
                }
                Some(_) => {
                    return Err(self.error(
                        lineno,
                        line,
                        i,
                        format!(
                            "expected `,` or `}}` after label value, found `{}`",
                            char_at(line, i)
                        ),
                    ))
                }
            }
        }
    }

    /// Checks an OpenMetrics exemplar ` # {labels} value [timestamp]`; its content is not
    /// kept (the diagnosis does not use traces).
    fn exemplar(
        &mut self,
        line: &'a str,
        b: &[u8],
        hash: usize,
        lineno: usize,
    ) -> Result<(), ParseError> {
        let mut i = skip_ws(b, hash + 1);
        if i >= b.len() || b[i] != b'{' {
            return Err(self.error(
                lineno,
                line,
                i,
                format!(
                    "expected `{{` to start the exemplar labels, found `{}`",
                    char_at(line, i)
                ),
            ));
        }
        i = self.label_set(line, b, i, lineno, false, None)?;
        i = skip_ws(b, i);
        let value_start = i;
        i = token_end(b, i);
        let value_text = &line[value_start..i];
        if value_text.parse::<f64>().is_err() {
            return Err(self.error(
                lineno,
                line,
                value_start,
                format!("invalid exemplar value `{value_text}`"),
            ));
        }
        i = skip_ws(b, i);
        if i < b.len() {
            let ts_start = i;
            i = token_end(b, i);
            let ts_text = &line[ts_start..i];
            if crate::time::seconds_to_ms(ts_text).is_none() {
                return Err(self.error(
                    lineno,
                    line,
                    ts_start,
                    format!("invalid exemplar timestamp `{ts_text}`"),
                ));
            }
            i = skip_ws(b, i);
            if i < b.len() {
                let extra = &line[i..token_end(b, i)];
                return Err(self.error(
                    lineno,
                    line,
                    i,
                    format!("unexpected `{extra}` after exemplar"),
                ));
            }
        }
        Ok(())
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
        if let Some((last, idx)) = self.last_key {
            if last == key {
                return Ok(idx);
            }
        }
        if let Some(&idx) = self.by_raw.get(key) {
            self.last_key = Some((key, idx));
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
            samples: Vec::new(),
        });
        self.by_raw.insert(key, idx);
        self.last_key = Some((key, idx));
        Ok(idx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(text: &str) -> SeriesSet {
        parse(text, "t.prom").unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(text: &str) -> String {
        parse(text, "t.prom").unwrap_err().to_string()
    }

    fn values(set: &SeriesSet, name: &str) -> Vec<(Option<i64>, f64)> {
        set.iter_by_name(name)
            .flat_map(|s| s.samples.iter().map(|x| (x.t_ms, x.value)))
            .collect()
    }

    #[test]
    fn vllm_text_scrape() {
        let text = "\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B\"} 3.0
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B\"} 12.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.001\",model_name=\"m\"} 0.0
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 7.0
vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"m\"} 7.0
vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"m\"} 1.25
";
        let set = ok(text);
        assert_eq!(set.series.len(), 6);
        assert!(!set.has_timestamps);
        let running: Vec<_> = set.iter_by_name("vllm:num_requests_running").collect();
        assert_eq!(running.len(), 1);
        assert_eq!(
            running[0].labels.get("model_name"),
            Some("meta-llama/Llama-3.1-8B")
        );
        assert_eq!(running[0].labels.get("engine"), Some("0"));
        assert_eq!(
            running[0].samples,
            [Sample {
                t_ms: None,
                value: 3.0
            }]
        );
        assert_eq!(
            set.family_type("vllm:num_preemptions_total"),
            MetricType::Counter
        );
        assert_eq!(
            set.family_type("vllm:time_to_first_token_seconds_bucket"),
            MetricType::Histogram
        );
        assert_eq!(
            set.family_type("vllm:time_to_first_token_seconds_sum"),
            MetricType::Histogram
        );
        let buckets: Vec<_> = set
            .iter_by_name("vllm:time_to_first_token_seconds_bucket")
            .map(|s| s.labels.get("le").unwrap().to_string())
            .collect();
        assert_eq!(buckets, ["+Inf", "0.001"]);
    }

    #[test]
    fn escaped_label_values_and_leniencies() {
        let set = ok(concat!(
            "a{path=\"C:\\\\x\",q=\"say \\\"hi\\\"\",nl=\"1\\n2\",odd=\"\\d\"} 1\n",
            "b { x = \"1\" , y=\"2\", } 2\n",
            "c{} 3\n",
            "d{empty=\"\",k=\"v\"}\t4\n",
            "  e\t5  \r\n",
        ));
        let a = set.iter_by_name("a").next().unwrap();
        assert_eq!(a.labels.get("path"), Some("C:\\x"));
        assert_eq!(a.labels.get("q"), Some("say \"hi\""));
        assert_eq!(a.labels.get("nl"), Some("1\n2"));
        assert_eq!(a.labels.get("odd"), Some("\\d"));
        assert_eq!(
            a.labels.to_string(),
            r#"{nl="1\n2",odd="\\d",path="C:\\x",q="say \"hi\""}"#
        );
        let b = set.iter_by_name("b").next().unwrap();
        assert_eq!(b.labels.to_string(), r#"{x="1",y="2"}"#);
        assert!(set.iter_by_name("c").next().unwrap().labels.is_empty());
        assert_eq!(
            set.iter_by_name("d").next().unwrap().labels.to_string(),
            r#"{k="v"}"#
        );
        assert_eq!(values(&set, "e"), [(None, 5.0)]);
    }

    #[test]
    fn special_values() {
        let set = ok("a NaN\nb +Inf\nc -Inf\nd Inf\ne 1e3\nf -0.5\ng inf\nh 12\n");
        assert!(values(&set, "a")[0].1.is_nan());
        assert_eq!(values(&set, "b")[0].1, f64::INFINITY);
        assert_eq!(values(&set, "c")[0].1, f64::NEG_INFINITY);
        assert_eq!(values(&set, "d")[0].1, f64::INFINITY);
        assert_eq!(values(&set, "e")[0].1, 1000.0);
        assert_eq!(values(&set, "f")[0].1, -0.5);
        assert_eq!(values(&set, "g")[0].1, f64::INFINITY);
        assert_eq!(values(&set, "h")[0].1, 12.0);
    }

    #[test]
    fn openmetrics_with_eof_unit_exemplars_and_second_timestamps() {
        let text = "\
# TYPE vllm:num_preemptions counter
# HELP vllm:num_preemptions Cumulative number of preemption from the engine.
vllm:num_preemptions_total{model_name=\"m\"} 1 1717000000.123
vllm:num_preemptions_total{model_name=\"m\"} 4 1717000015
vllm:num_preemptions_created{model_name=\"m\"} 1716999000 1717000000.123
# TYPE vllm:e2e_request_latency_seconds histogram
# UNIT vllm:e2e_request_latency_seconds seconds
vllm:e2e_request_latency_seconds_bucket{le=\"1.0\"} 2 1717000000 # {trace_id=\"abc\"} 0.7 1717000000.5
vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 3 1717000000 # {} 9
vllm:e2e_request_latency_seconds_count 3 # {trace_id=\"x\"} 1.0
# EOF
";
        let set = ok(text);
        assert_eq!(
            values(&set, "vllm:num_preemptions_total"),
            [
                (Some(1_717_000_000_123), 1.0),
                (Some(1_717_000_015_000), 4.0)
            ]
        );
        assert_eq!(
            set.family_type("vllm:num_preemptions_total"),
            MetricType::Counter
        );
        assert_eq!(
            set.family_type("vllm:num_preemptions_created"),
            MetricType::Counter
        );
        assert_eq!(
            set.family_type("vllm:e2e_request_latency_seconds_count"),
            MetricType::Histogram
        );
        // The `_count` line has no timestamp, so not every sample has one.
        assert!(!set.has_timestamps);
        assert_eq!(set.newest_ms(), Some(1_717_000_015_000));
        assert_eq!(set.oldest_ms(), Some(1_717_000_000_000));
        // Trailing blank lines after `# EOF` are fine.
        ok("a 1 1\n# EOF\n\n  \n");
    }

    #[test]
    fn text_format_millisecond_recording() {
        let text = "\
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name=\"m\"} 0 1717000000000
vllm:num_requests_waiting{model_name=\"m\"} 5 1717000015000
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name=\"m\"} 9 1717000030000
vllm:num_requests_waiting{model_name=\"other\"} 1 1717000030000
";
        let set = ok(text);
        assert!(set.has_timestamps);
        assert_eq!(set.series.len(), 2);
        assert_eq!(
            values(&set, "vllm:num_requests_waiting")[..3],
            [
                (Some(1_717_000_000_000), 0.0),
                (Some(1_717_000_015_000), 5.0),
                (Some(1_717_000_030_000), 9.0)
            ]
        );
    }

    #[test]
    fn samples_are_sorted_and_differently_spelled_series_joined() {
        let set = ok("\
x{a=\"1\",b=\"2\"} 3 3000
x{b=\"2\", a=\"1\"} 1 1000
x{a=\"1\",b=\"2\"} 2 2000
x{a=\"1\",b=\"2\"} 20 2000
");
        assert_eq!(set.series.len(), 1);
        assert_eq!(
            values(&set, "x"),
            [(Some(1000), 1.0), (Some(2000), 20.0), (Some(3000), 3.0)]
        );
    }

    #[test]
    fn merge_two_files() {
        let mut a = ok("# TYPE c counter\nc_total{p=\"x\"} 1 1000\nc_total{p=\"x\"} 2 2000\n");
        let b = ok("# TYPE g gauge\nc_total{p=\"x\"} 3 3000\nc_total{p=\"x\"} 22 2000\ng 1 2000\n");
        a.merge(b);
        assert_eq!(
            values(&a, "c_total"),
            [(Some(1000), 1.0), (Some(2000), 22.0), (Some(3000), 3.0)]
        );
        assert_eq!(a.family_type("c_total"), MetricType::Counter);
        assert_eq!(a.family_type("g"), MetricType::Gauge);
        assert!(a.has_timestamps);
    }

    #[test]
    fn quoted_names() {
        let set = ok(concat!(
            "# TYPE \"my.metric\" gauge\n",
            "{\"my.metric\",\"my.label\"=\"v\",l=\"w\"} 1\n",
            "{\"other.metric\"} 2\n",
        ));
        let s = set.iter_by_name("my.metric").next().unwrap();
        assert_eq!(s.labels.get("my.label"), Some("v"));
        assert_eq!(s.labels.get("l"), Some("w"));
        assert_eq!(set.family_type("my.metric"), MetricType::Gauge);
        assert_eq!(values(&set, "other.metric"), [(None, 2.0)]);
    }

    #[test]
    fn empty_and_comment_only_input() {
        for text in [
            "",
            "\n\n",
            "# just a comment\n# HELP x y\n# TYPE x gauge\n",
            "# EOF\n",
        ] {
            let set = ok(text);
            assert!(set.series.is_empty());
            assert!(!set.has_timestamps);
        }
        assert_eq!(ok("# TYPE x gauge\n").families["x"], MetricType::Gauge);
    }

    #[test]
    fn error_display_format() {
        assert_eq!(
            err("ok 1\nvllm:x{model_name \"m\"} 1\n"),
            "t.prom:2:19: expected `=` after label name `model_name`\n  \
             | vllm:x{model_name \"m\"} 1\n  \
             |                   ^"
        );
    }

    #[test]
    fn every_error_kind_is_located() {
        // (input, line, column, message)
        let cases: &[(&str, usize, usize, &str)] = &[
            ("x{model_name=\"m\"} 12a", 1, 19, "invalid value `12a`"),
            ("x{a=\"unterminated} 1", 1, 5, "unterminated label value"),
            ("9x 1", 1, 1, "invalid metric name starting with `9`"),
            ("a 1\n# EOF\nb 2\n", 3, 1, "content after `# EOF`"),
            ("a 1\n# EOF\n  # EOF\n", 3, 3, "content after `# EOF`"),
            (
                "x{pod=\"a\",ns=\"b\",pod=\"c\"} 1",
                1,
                18,
                "duplicate label `pod`",
            ),
            ("x 1 abc", 1, 5, "invalid timestamp `abc`"),
            (
                "x 1 1717000000.5",
                1,
                5,
                "invalid timestamp `1717000000.5` (Prometheus text format timestamps are \
                 integer milliseconds; an OpenMetrics file must end with `# EOF`)",
            ),
            ("x 1 abc\n# EOF", 1, 5, "invalid timestamp `abc`"),
            ("x", 1, 2, "missing value after `x`"),
            ("x{a=\"b\"}", 1, 9, "missing value after `x{a=\"b\"}`"),
            ("x 1 2 3", 1, 7, "unexpected `3` after timestamp"),
            ("x 1 # {a=\"b\"} zz", 1, 15, "invalid exemplar value `zz`"),
            (
                "x 1 # {a=\"b\"} 1 t",
                1,
                17,
                "invalid exemplar timestamp `t`",
            ),
            (
                "x 1 # a",
                1,
                7,
                "expected `{` to start the exemplar labels, found `a`",
            ),
            (
                "x{a=\"b\" c=\"d\"} 1",
                1,
                9,
                "expected `,` or `}` after label value, found `c`",
            ),
            ("x{a=\"b\"", 1, 8, "unterminated label set"),
            (
                "x{a=b} 1",
                1,
                5,
                "expected `\"` to open the value of label `a`",
            ),
            (
                "x{1a=\"b\"} 1",
                1,
                3,
                "invalid label name starting with `1`",
            ),
            ("x{,} 1", 1, 3, "invalid label name starting with `,`"),
            ("{a=\"b\"} 1", 1, 1, "missing metric name"),
            ("x-y 1", 1, 2, "unexpected `-` after metric name `x`"),
            ("x{\"q\"} 1", 1, 6, "expected `=` after label name `q`"),
            ("# TYPE x countr", 1, 10, "invalid metric type `countr`"),
            ("# TYPE x", 1, 9, "missing metric type after `# TYPE x`"),
            ("# TYPE", 1, 7, "missing metric name after `# TYPE`"),
            (
                "# TYPE 1x gauge",
                1,
                8,
                "invalid metric name starting with `1`",
            ),
            ("é 1", 1, 1, "invalid metric name starting with `é`"),
            // Columns count characters, not bytes.
            ("x{a=\"é\"} 1 bad", 1, 12, "invalid timestamp `bad`"),
        ];
        for &(input, line, column, message) in cases {
            let e = parse(input, "f.om").unwrap_err();
            assert_eq!(
                (e.line, e.column, e.message.as_str()),
                (line, column, message),
                "input {input:?}"
            );
            assert_eq!(e.file, "f.om");
        }
    }

    #[test]
    fn caret_follows_tabs_and_columns() {
        let e = parse("x\t1\tzz", "f").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f:1:5: invalid timestamp `zz`\n  | x\t1\tzz\n  |  \t \t^"
        );
        let e = parse("9", "f").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f:1:1: invalid metric name starting with `9`\n  | 9\n  | ^"
        );
    }

    #[test]
    fn eof_detection_needs_a_whole_line() {
        // `# EOF` inside a comment or a label does not switch to OpenMetrics: ms stay ms.
        let set = ok("# not # EOF\nx{a=\"# EOF\"} 1 1500\n");
        assert_eq!(values(&set, "x"), [(Some(1500), 1.0)]);
        let set = ok("x 1 1500\n# EOF\r\n");
        assert_eq!(values(&set, "x"), [(Some(1_500_000), 1.0)]);
    }

    /// Invariants every successful parse must keep.
    fn check_invariants(set: &SeriesSet) {
        for w in set.series.windows(2) {
            assert_eq!(w[0].key_cmp(&w[1]), std::cmp::Ordering::Less);
        }
        for s in &set.series {
            for w in s.samples.windows(2) {
                assert!(w[0].t_ms < w[1].t_ms);
            }
        }
    }

    const FRAGMENTS: &[&str] = &[
        "vllm:x",
        "x_total",
        "{",
        "}",
        "=",
        ",",
        "\"",
        "\\",
        "\\\"",
        "\\n",
        "a",
        "le",
        "\"v\"",
        " ",
        "\t",
        "\n",
        "\r\n",
        "#",
        "# TYPE ",
        "# HELP ",
        "# UNIT ",
        "# EOF",
        "counter",
        "histogram",
        "gauge",
        "1",
        "1.5",
        "-3",
        "1e3",
        "NaN",
        "+Inf",
        "-Inf",
        "1717000000.123",
        "1717000000000",
        "é",
        "\u{10FFFF}",
        "\0",
        "9",
        "{\"q.n\"",
        ":",
        "_",
        "00000000000000000000",
    ];

    fn soup() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(FRAGMENTS), 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let text = String::from_utf8_lossy(&bytes);
            if let Ok(set) = parse(&text, "fuzz") {
                check_invariants(&set);
            }
        }

        #[test]
        fn exposition_like_soup_never_panics(text in soup()) {
            match parse(&text, "fuzz") {
                Ok(set) => check_invariants(&set),
                Err(e) => {
                    prop_assert!(e.line >= 1 && e.column >= 1);
                    let _ = e.to_string();
                }
            }
        }
    }

    /// Throughput check, run by hand: `cargo test --release --lib -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn throughput() {
        use std::fmt::Write;
        let mut recording = String::new();
        let mut t = 1_717_000_000_000i64;
        while recording.len() < 3_000_000 {
            for engine in 0..4 {
                for le in ["0.001", "0.01", "0.1", "1.0", "10.0", "+Inf"] {
                    writeln!(
                        recording,
                        "vllm:time_to_first_token_seconds_bucket{{engine=\"{engine}\",le=\"{le}\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}} {} {t}",
                        t % 9973
                    )
                    .unwrap();
                }
                writeln!(
                    recording,
                    "vllm:num_requests_running{{engine=\"{engine}\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}} 3.5 {t}"
                )
                .unwrap();
            }
            t += 15_000;
        }
        let mut scrape = String::new();
        let mut i = 0;
        while scrape.len() < 3_000_000 {
            writeln!(
                scrape,
                "vllm:some_metric_total{{engine=\"0\",pod=\"pod-{i}\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}} {}.25",
                i * 7
            )
            .unwrap();
            i += 1;
        }
        for (what, text) in [("recording", &recording), ("distinct series", &scrape)] {
            let started = std::time::Instant::now();
            let rounds = 5;
            for _ in 0..rounds {
                std::hint::black_box(parse(text, "bench").unwrap());
            }
            let secs = started.elapsed().as_secs_f64() / rounds as f64;
            println!(
                "{what}: {:.1} MB in {:.1} ms = {:.0} MB/s",
                text.len() as f64 / 1e6,
                secs * 1e3,
                text.len() as f64 / 1e6 / secs
            );
        }
    }
}
