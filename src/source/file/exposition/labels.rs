//! Label sets (`{a="x",b="y"}`, with a quoted metric name where allowed) and exemplars, read
//! as slices of the input: the `Parser` methods for what sits inside braces.

use super::error::ParseError;
use super::lex::{
    char_at, is_label_char, is_label_start, scan_quoted, skip_ws, token_end, unescape,
};
use super::parser::{Parser, QuotedName, Span};

impl<'a> Parser<'a> {
    /// Parses `{...}` starting at `open`; returns the index after `}`. With `store`, label
    /// pairs go to `self.spans`. `quoted_name` is Some where a quoted metric name may appear.
    // Long on purpose: one pass over a line's bytes with one cursor, on the parser's per-line hot
    // path; helpers would hand the cursor, the line and the error position back and forth.
    pub(super) fn label_set(
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
    pub(super) fn exemplar(
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
}
