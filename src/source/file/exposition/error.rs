//! The parse error: file, line, column, message, and the line with a caret under the column.

use std::fmt;

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
