//! Compile errors of the condition language and their rendering for humans.

use std::ops::Range;

/// What kind of mistake a [`ConditionError`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A character or string that is not part of the language.
    Lex,
    /// Tokens in an order the grammar does not allow (including an empty expression).
    Parse,
    /// A signal, fact or SLO name the scope does not know.
    UnknownName,
    /// An operand or argument of the wrong type.
    Type,
    /// A number with a suffix other than `us`, `ms`, `s`, `m`, `h` or `%`.
    UnknownUnit,
    /// A call to a function the language does not have.
    UnknownFunction,
    /// A function called with the wrong number of arguments.
    Arity,
}

impl ErrorKind {
    /// A short lowercase name, e.g. `unknown_name`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Lex => "lex",
            ErrorKind::Parse => "parse",
            ErrorKind::UnknownName => "unknown_name",
            ErrorKind::Type => "type",
            ErrorKind::UnknownUnit => "unknown_unit",
            ErrorKind::UnknownFunction => "unknown_function",
            ErrorKind::Arity => "arity",
        }
    }
}

/// One problem found while compiling an expression.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ConditionError {
    /// What kind of problem this is.
    pub kind: ErrorKind,
    /// A one-line description that quotes the offending input.
    pub message: String,
    /// Byte range in the source the error points at; empty at the end of input.
    pub span: Range<usize>,
    /// An optional hint, e.g. "did you mean `queue_depth`?".
    pub help: Option<String>,
}

impl ConditionError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>, span: Range<usize>) -> Self {
        ConditionError {
            kind,
            message: message.into(),
            span,
            help: None,
        }
    }

    pub(crate) fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Renders the error with its location. `origin` is e.g. "rules/latency.yaml:42:11" (file:line:column of where the expression starts, or just the file name when unknown), `rule` e.g. "cause `queue_backlog`", `field` e.g. `evidence[0].when`.
    ///
    /// The result has no trailing newline:
    ///
    /// ```text
    /// error: unknown signal `queue_dept`
    ///   --> rules/latency.yaml:42:11, cause `queue_backlog`, field `evidence[0].when`
    ///    |
    ///    | queue_dept > 10
    ///    | ^^^^^^^^^^
    ///    = help: did you mean `queue_depth`?
    /// ```
    ///
    /// Empty `rule` or `field` parts are left out. Carets are placed by
    /// characters, not bytes; when `src` spans several lines only the line
    /// holding the start of the span is shown.
    pub fn render(&self, src: &str, origin: &str, rule: &str, field: &str) -> String {
        let mut out = format!("error: {}\n  --> {origin}", self.message);
        if !rule.is_empty() {
            out.push_str(", ");
            out.push_str(rule);
        }
        if !field.is_empty() {
            out.push_str(", field `");
            out.push_str(field);
            out.push('`');
        }
        out.push_str("\n   |\n");

        let start = floor_char_boundary(src, self.span.start);
        let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = src[start..].find('\n').map_or(src.len(), |i| start + i);
        let end = floor_char_boundary(src, self.span.end.clamp(start, line_end));
        let line: String = src[line_start..line_end]
            .trim_end_matches('\r')
            .chars()
            .map(|c| if c == '\t' { ' ' } else { c })
            .collect();
        let column = src[line_start..start].chars().count();
        let width = src[start..end].chars().count().max(1);

        let source_line = format!("   | {line}");
        out.push_str(source_line.trim_end());
        out.push_str("\n   | ");
        out.extend(std::iter::repeat_n(' ', column));
        out.extend(std::iter::repeat_n('^', width));
        if let Some(help) = &self.help {
            out.push_str("\n   = help: ");
            out.push_str(help);
        }
        out
    }
}

/// The largest char boundary of `s` that is `<= i` (and `<= s.len()`).
fn floor_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(span: Range<usize>, help: Option<&str>) -> ConditionError {
        ConditionError {
            kind: ErrorKind::UnknownName,
            message: "unknown signal `queue_dept`".into(),
            span,
            help: help.map(str::to_owned),
        }
    }

    #[test]
    fn renders_the_documented_example() {
        let e = err(0..10, Some("did you mean `queue_depth`?"));
        let got = e.render(
            "queue_dept > 10",
            "rules/latency.yaml:42:11",
            "cause `queue_backlog`",
            "evidence[0].when",
        );
        let want = "error: unknown signal `queue_dept`
  --> rules/latency.yaml:42:11, cause `queue_backlog`, field `evidence[0].when`
   |
   | queue_dept > 10
   | ^^^^^^^^^^
   = help: did you mean `queue_depth`?";
        assert_eq!(got, want);
    }

    #[test]
    fn no_help_line_without_help_and_empty_parts_are_left_out() {
        let got = err(13..15, None).render("queue_dept > 10", "rules/a.yaml", "", "");
        assert_eq!(
            got,
            "error: unknown signal `queue_dept`\n  --> rules/a.yaml\n   |\n   | queue_dept > 10\n   |              ^^"
        );
    }

    #[test]
    fn end_of_input_gets_one_caret_after_the_last_char() {
        let got = err(3..3, None).render("a >", "f", "r", "x");
        assert!(got.ends_with("   | a >\n   |    ^"), "{got}");
        let got = err(0..0, None).render("", "f", "r", "x");
        assert!(got.ends_with("   |\n   |\n   | ^"), "{got}");
    }

    #[test]
    fn carets_count_chars_not_bytes() {
        // "é" and "≥" are multi-byte; the caret must still sit under `x`.
        let src = "\"é\" ≥ x";
        let x = src.find('x').unwrap();
        let got = err(x..x + 1, None).render(src, "f", "", "");
        assert!(got.ends_with("   | \"é\" ≥ x\n   |       ^"), "{got}");
        let ge = src.find('≥').unwrap();
        let got = err(ge..ge + '≥'.len_utf8(), None).render(src, "f", "", "");
        assert!(got.ends_with("   |     ^"), "{got}");
    }

    #[test]
    fn multi_line_sources_show_the_line_of_the_span_start() {
        let src = "queue_depth > 1 and\n  bogus > 2\nor x";
        let b = src.find("bogus").unwrap();
        let got = err(b..b + 5, None).render(src, "f", "", "");
        assert!(got.ends_with("   |   bogus > 2\n   |   ^^^^^"), "{got}");
        // A span running past the end of its line is clipped to the line.
        let got = err(b..src.len(), None).render(src, "f", "", "");
        assert!(got.ends_with("   |   ^^^^^^^^^"), "{got}");
    }

    #[test]
    fn out_of_range_spans_do_not_panic() {
        let src = "é";
        let got = err(1..40, None).render(src, "f", "", "");
        assert!(got.ends_with("   | é\n   | ^"), "{got}");
        let got = err(Range { start: 9, end: 3 }, None).render(src, "f", "", "");
        assert!(got.ends_with("   |  ^"), "{got}");
    }

    #[test]
    fn tabs_are_shown_as_spaces_so_carets_align() {
        let got = err(1..2, None).render("\tx", "f", "", "");
        assert!(got.ends_with("   |  x\n   |  ^"), "{got}");
    }

    #[test]
    fn display_is_the_message() {
        assert_eq!(err(0..1, None).to_string(), "unknown signal `queue_dept`");
    }
}
