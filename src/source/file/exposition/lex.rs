//! Byte-level scanning shared by the line parsers: whitespace, tokens, name characters,
//! quoted strings and their escapes, and the `# EOF` check that picks the format.

use std::borrow::Cow;

/// Whether some line is exactly `# EOF` (surrounding blanks allowed). Checks only the bytes
/// next to each match, so a pathological line full of `# EOF` stays linear.
pub(super) fn has_eof_line(text: &str) -> bool {
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
pub(super) fn is_ws(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

#[inline]
pub(super) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_ws(b[i]) {
        i += 1;
    }
    i
}

/// End of the whitespace-delimited token starting at `i`.
#[inline]
pub(super) fn token_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && !is_ws(b[i]) {
        i += 1;
    }
    i
}

#[inline]
pub(super) fn is_metric_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

#[inline]
pub(super) fn is_metric_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}

#[inline]
pub(super) fn is_label_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

#[inline]
pub(super) fn is_label_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Index of the closing quote of the string opened at `open`, and whether it contains a
/// backslash escape; None when the line ends first.
#[inline]
pub(super) fn scan_quoted(b: &[u8], open: usize) -> Option<(usize, bool)> {
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
pub(super) fn unescape(raw: &str, escaped: bool) -> Cow<'_, str> {
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
pub(super) fn char_at(line: &str, pos: usize) -> String {
    match line.get(pos..).and_then(|rest| rest.chars().next()) {
        Some(c) => c.to_string(),
        None => "end of line".to_string(),
    }
}
