//! The parse error: file, line, column, message, and the line with a caret under the column.

use std::fmt;

/// A syntax error, located by 1-based line and 1-based column (in characters).
///
/// Displays as `file:line:column: message`, then the offending line and a caret under the
/// column, compiler style.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}\n  | {line_text}\n  | {}^", CaretPad(line_text, *caret))]
pub struct ParseError {
    /// The file name as given to [`parse`].
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// What is wrong, quoting the input.
    pub message: String,
    /// The offending line, without its line ending; a long line is cut to
    /// [`SHOWN_CHARS`] around the column, the cuts marked `…`.
    pub line_text: String,
    /// Where the caret goes under `line_text` (1-based, in characters).
    pub caret: usize,
}

/// At most this many characters of the offending line are shown: a 2 GB line must not become
/// a 2 GB error message.
pub const SHOWN_CHARS: usize = 160;

impl ParseError {
    /// `line` as shown under the message, and the caret's column in it, for an error at byte
    /// `pos` (a char boundary).
    pub fn shown(line: &str, pos: usize) -> (String, usize) {
        let column = line[..pos].chars().count() + 1;
        if line.len() <= SHOWN_CHARS {
            return (line.to_string(), column);
        }
        let half = SHOWN_CHARS / 2;
        let skip = column.saturating_sub(half + 1);
        let kept: String = line.chars().skip(skip).take(SHOWN_CHARS).collect();
        let more_after = line.chars().nth(skip + SHOWN_CHARS).is_some();
        let (lead, caret) = if skip > 0 {
            ("…", column - skip + 1)
        } else {
            ("", column)
        };
        let tail = if more_after { "…" } else { "" };
        (format!("{lead}{kept}{tail}"), caret)
    }
}

/// Whitespace under the line up to the caret; tabs are copied so the caret stays aligned in a
/// terminal.
struct CaretPad<'a>(pub(super) &'a str, usize);

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
