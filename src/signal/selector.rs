//! `--selector 'model_name="x",pod=~"vllm-.*"'`: PromQL label matchers that pick targets.
//!
//! The syntax is PromQL's (`=`, `!=`, `=~`, `!~`, double- or single-quoted values with
//! backslash escapes, optional surrounding braces); regular expressions are fully anchored, as in
//! Prometheus. A label a target does not have matches as the empty string, as in PromQL.

use std::collections::BTreeMap;

/// One matcher.
#[derive(Debug, Clone)]
pub struct Matcher {
    /// Label name.
    pub label: String,
    op: Op,
    value: String,
    regex: Option<regex_lite::Regex>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Re,
    Nre,
}

/// A selector that does not read; each message quotes the selector and, where it can, the column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// `{` without `}`.
    #[error("selector `{0}`: missing closing `}}`")]
    MissingBrace(String),
    /// Something else than what the grammar expects at a place.
    #[error("selector `{text}`: {what} at column {column}")]
    At {
        /// The selector as given.
        text: String,
        /// What was expected.
        what: String,
        /// 1-based.
        column: usize,
    },
    /// A `=~` or `!~` value that is not a regular expression.
    #[error("selector `{text}`: bad regular expression `{value}`: {detail}")]
    Regex {
        /// The selector as given.
        text: String,
        /// The value.
        value: String,
        /// The regex library's reason.
        detail: String,
    },
    /// Nothing to match.
    #[error("selector `{0}` has no matchers")]
    Empty(String),
}

/// A parsed selector: every matcher must hold.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    /// The matchers.
    pub matchers: Vec<Matcher>,
}

impl Selector {
    /// Parses matchers such as `model_name="x",pod=~"vllm-.*"`; errors quote the position.
    // Long on purpose: one cursor over the matcher text, so every error can quote its position.
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        let mut s = text.trim();
        if let Some(inner) = s.strip_prefix('{') {
            s = inner
                .strip_suffix('}')
                .ok_or_else(|| SelectorError::MissingBrace(text.to_string()))?;
        }
        let chars: Vec<char> = s.chars().collect();
        let mut i = 0;
        let mut matchers = Vec::new();
        let err = |i: usize, what: &str| SelectorError::At {
            text: text.to_string(),
            what: what.to_string(),
            column: i + 1,
        };
        let skip_ws = |i: &mut usize| {
            while *i < chars.len() && chars[*i].is_whitespace() {
                *i += 1;
            }
        };
        loop {
            skip_ws(&mut i);
            if i >= chars.len() {
                break;
            }
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            if start == i || chars[start].is_ascii_digit() {
                return Err(err(start, "expected a label name"));
            }
            let label: String = chars[start..i].iter().collect();
            skip_ws(&mut i);
            let op = match (chars.get(i), chars.get(i + 1)) {
                (Some('='), Some('~')) => (Op::Re, 2),
                (Some('!'), Some('=')) => (Op::Ne, 2),
                (Some('!'), Some('~')) => (Op::Nre, 2),
                (Some('='), _) => (Op::Eq, 1),
                _ => return Err(err(i, &format!("expected =, !=, =~ or !~ after `{label}`"))),
            };
            i += op.1;
            skip_ws(&mut i);
            let quote = match chars.get(i) {
                Some(q @ ('"' | '\'')) => *q,
                _ => return Err(err(i, "expected a quoted value")),
            };
            i += 1;
            let mut value = String::new();
            loop {
                match chars.get(i) {
                    None => return Err(err(i, "unterminated value")),
                    Some('\\') => {
                        match chars.get(i + 1) {
                            Some('n') => value.push('\n'),
                            Some(c) => value.push(*c),
                            None => return Err(err(i, "unterminated value")),
                        }
                        i += 2;
                    }
                    Some(c) if *c == quote => {
                        i += 1;
                        break;
                    }
                    Some(c) => {
                        value.push(*c);
                        i += 1;
                    }
                }
            }
            let regex = match op.0 {
                Op::Re | Op::Nre => Some(
                    regex_lite::Regex::new(&format!("^(?:{value})$")).map_err(|e| {
                        SelectorError::Regex {
                            text: text.to_string(),
                            value: value.clone(),
                            detail: e.to_string(),
                        }
                    })?,
                ),
                _ => None,
            };
            matchers.push(Matcher {
                label,
                op: op.0,
                value,
                regex,
            });
            skip_ws(&mut i);
            match chars.get(i) {
                Some(',') => i += 1,
                None => break,
                Some(_) => return Err(err(i, "expected `,` between matchers")),
            }
        }
        if matchers.is_empty() {
            return Err(SelectorError::Empty(text.to_string()));
        }
        Ok(Selector { matchers })
    }

    /// Whether labels satisfy every matcher.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matchers.iter().all(|m| {
            let v = labels.get(&m.label).map(String::as_str).unwrap_or("");
            match m.op {
                Op::Eq => v == m.value,
                Op::Ne => v != m.value,
                Op::Re => m.regex.as_ref().is_some_and(|r| r.is_match(v)),
                Op::Nre => !m.regex.as_ref().is_some_and(|r| r.is_match(v)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn promql_matchers() {
        let s = Selector::parse(
            r#"model_name="llama", pod=~"vllm-.*",namespace!="dev",job!~"test|canary""#,
        )
        .unwrap();
        assert!(s.matches(&labels(&[
            ("model_name", "llama"),
            ("pod", "vllm-3"),
            ("job", "vllm")
        ])));
        assert!(
            !s.matches(&labels(&[("model_name", "llama"), ("pod", "xvllm-3")])),
            "regex is anchored"
        );
        assert!(!s.matches(&labels(&[
            ("model_name", "llama"),
            ("pod", "vllm-1"),
            ("namespace", "dev")
        ])));
        assert!(!s.matches(&labels(&[
            ("model_name", "llama"),
            ("pod", "vllm-1"),
            ("job", "canary")
        ])));
        assert!(
            !s.matches(&labels(&[("pod", "vllm-1")])),
            "a missing label is the empty string"
        );
        let braces = Selector::parse(r#"{instance='a:1'}"#).unwrap();
        assert!(braces.matches(&labels(&[("instance", "a:1")])));
        let esc = Selector::parse(r#"x="a\"b""#).unwrap();
        assert!(esc.matches(&labels(&[("x", "a\"b")])));
    }

    #[test]
    fn errors_say_where() {
        for (bad, want) in [
            (
                "model_name",
                "expected =, !=, =~ or !~ after `model_name` at column 11",
            ),
            ("a=b", "expected a quoted value at column 3"),
            ("a=\"b", "unterminated value"),
            (
                "a=\"b\" c=\"d\"",
                "expected `,` between matchers at column 7",
            ),
            ("a=~\"(\"", "bad regular expression"),
            ("", "no matchers"),
            ("{a=\"b\"", "missing closing"),
            ("9a=\"b\"", "expected a label name at column 1"),
        ] {
            let e = Selector::parse(bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
