//! The line parser: `# TYPE` lines, samples and their timestamps, each series found once by
//! its raw text; then the set is normalized.

use std::borrow::Cow;

use super::error::ParseError;
use super::hash::FastMap;
use super::lex::{
    char_at, has_eof_line, is_metric_char, is_metric_start, is_ws, scan_quoted, skip_ws, token_end,
    unescape,
};
use crate::signal::series::{Labels, MetricType, Sample, Series, SeriesSet};

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
        conflicts: Default::default(),
    };
    set.normalize();
    Ok(set)
}

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
    /// The previous line's key, which often repeats (histogram buckets aside, consecutive
    /// scrapes of a gauge-only exporter) and then skips the hash lookup.
    last_key: Option<(&'a str, usize)>,
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
        ParseError {
            file: self.file.to_string(),
            line: lineno,
            column: line[..pos].chars().count() + 1,
            message,
            line_text: line.to_string(),
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
