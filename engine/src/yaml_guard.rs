//! A depth check run before the YAML parser: its scanner takes quadratic time on deeply nested
//! input (200 KB of `[` took minutes), and no rule, snapshot or config needs more than a few
//! levels. Counted without parsing: flow brackets outside quotes, and block indentation.

/// Deepest nesting allowed, in flow brackets (`[`, `{`).
pub const MAX_FLOW_DEPTH: usize = 64;
/// Widest indentation allowed, in columns (block nesting).
pub const MAX_INDENT: usize = 256;

/// Text nested deeper than the YAML parser is let to read; the message starts with
/// `line:column`, for the caller to put its file in front.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TooDeep {
    /// A line indented past [`MAX_INDENT`].
    #[error("{line}:1: indented {columns} columns: nested deeper than {MAX_INDENT} columns allow")]
    Indented {
        /// 1-based.
        line: usize,
        /// Its indentation.
        columns: usize,
    },
    /// Flow brackets nested past [`MAX_FLOW_DEPTH`].
    #[error("{line}:{column}: nested deeper than {MAX_FLOW_DEPTH} levels of `[` and `{{`")]
    Brackets {
        /// 1-based.
        line: usize,
        /// 1-based, of the bracket one too deep.
        column: usize,
    },
}

/// Refuses `text` nested deeper than the limits, saying where (`line:column`).
pub fn check_depth(text: &str) -> Result<(), TooDeep> {
    let mut depth = 0usize;
    for (n, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        if indent > MAX_INDENT {
            return Err(TooDeep::Indented {
                line: n + 1,
                columns: indent,
            });
        }
        let mut quote: Option<char> = None;
        let mut escaped = false;
        let mut prev = ' ';
        for (col, c) in line.chars().enumerate() {
            let before = std::mem::replace(&mut prev, c);
            match quote {
                Some(q) => {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' && q == '"' {
                        escaped = true;
                    } else if c == q {
                        quote = None;
                    }
                }
                None => match c {
                    // A comment starts at a `#` after a space (or at the line's start).
                    '#' if before == ' ' || before == '\t' => break,
                    '"' | '\'' => quote = Some(c),
                    '[' | '{' => {
                        depth += 1;
                        if depth > MAX_FLOW_DEPTH {
                            return Err(TooDeep::Brackets {
                                line: n + 1,
                                column: col + 1,
                            });
                        }
                    }
                    ']' | '}' => depth = depth.saturating_sub(1),
                    _ => {}
                },
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_input_is_refused_with_its_place_and_ordinary_yaml_passes() {
        let deep = "[".repeat(100_000);
        let e = check_depth(&deep).unwrap_err().to_string();
        assert!(e.starts_with("1:65: nested deeper than 64"), "{e}");
        let indented = format!("a:\n{}b: 1\n", " ".repeat(1000));
        assert!(check_depth(&indented)
            .unwrap_err()
            .to_string()
            .starts_with("2:1: indented 1000"));
        let ok = "a: [1, [2, {b: \"[[[[[[\"}]]\n# [[[[[[[\nc: '{{{{'\n";
        assert_eq!(check_depth(ok), Ok(()));
        assert_eq!(check_depth(&"[1]\n".repeat(10_000)), Ok(()));
    }
}
