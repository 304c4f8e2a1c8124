//! Turns source text into tokens with byte spans.
//!
//! The lexer never stops at the first problem: it records an error and, where
//! the intent is clear (`=` for `==`, `&&` for `and`, `'text'` for `"text"`,
//! `5kb` for a number), emits the token that was probably meant so that the
//! parser and checker can still report later mistakes.

use std::ops::Range;

use super::error::{ConditionError, ErrorKind};

/// A token kind, with its value where it has one.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// A number literal, unit already applied.
    Number(f64),
    /// A string literal, escapes already resolved.
    Str(String),
    /// A name (its text is the token's span in the source).
    Ident,
    True,
    False,
    And,
    Or,
    Not,
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    Star,
    Slash,
    Lt,
    Le,
    Gt,
    Ge,
    EqEq,
    Ne,
    /// Something that is not part of the language; the lexer already reported it.
    Invalid,
    /// The end of input; its span is empty and sits at `src.len()`.
    Eof,
}

/// A token and where it is in the source.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub span: Range<usize>,
}

/// Splits `src` into tokens, always ending with [`Tok::Eof`]. Problems are appended to `errors`.
pub(crate) fn lex(src: &str, errors: &mut Vec<ConditionError>) -> Vec<Token> {
    let mut lexer = Lexer {
        src,
        pos: 0,
        tokens: Vec::new(),
        errors,
    };
    lexer.run();
    lexer.tokens.push(Token {
        tok: Tok::Eof,
        span: src.len()..src.len(),
    });
    lexer.tokens
}

struct Lexer<'s, 'e> {
    src: &'s str,
    pos: usize,
    tokens: Vec<Token>,
    errors: &'e mut Vec<ConditionError>,
}

impl Lexer<'_, '_> {
    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn peek_second(&self) -> Option<char> {
        let mut chars = self.src[self.pos..].chars();
        chars.next();
        chars.next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn eat_while(&mut self, f: impl Fn(char) -> bool) {
        while let Some(c) = self.peek() {
            if !f(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
    }

    fn push(&mut self, tok: Tok, start: usize) {
        self.tokens.push(Token {
            tok,
            span: start..self.pos,
        });
    }

    fn error(&mut self, kind: ErrorKind, message: String, span: Range<usize>, help: Option<&str>) {
        let mut e = ConditionError::new(kind, message, span);
        e.help = help.map(str::to_owned);
        self.errors.push(e);
    }

    fn run(&mut self) {
        while let Some(c) = self.peek() {
            let start = self.pos;
            if c.is_whitespace() {
                self.pos += c.len_utf8();
            } else if c.is_ascii_digit() {
                self.number();
            } else if c.is_ascii_alphabetic() || c == '_' {
                self.ident();
            } else if c == '"' || c == '\'' {
                self.string(c);
            } else {
                self.pos += c.len_utf8();
                let tok = self.symbol(c, start);
                self.push(tok, start);
            }
        }
    }

    /// An operator or punctuation character `c` (already consumed).
    fn symbol(&mut self, c: char, start: usize) -> Tok {
        let suggest = |lexer: &mut Self, tok: Tok, message: String, help: &str| {
            lexer.error(ErrorKind::Lex, message, start..lexer.pos, Some(help));
            tok
        };
        match c {
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            ',' => Tok::Comma,
            '+' => Tok::Plus,
            '-' => Tok::Minus,
            '*' => Tok::Star,
            '/' => Tok::Slash,
            '<' if self.eat('=') => Tok::Le,
            '<' => Tok::Lt,
            '>' if self.eat('=') => Tok::Ge,
            '>' => Tok::Gt,
            '=' if self.eat('=') => Tok::EqEq,
            '!' if self.eat('=') => Tok::Ne,
            '=' => suggest(
                self,
                Tok::EqEq,
                "unexpected `=`".into(),
                "use `==` to compare",
            ),
            '!' => suggest(
                self,
                Tok::Not,
                "unexpected `!`".into(),
                "use `not` to negate a condition",
            ),
            '&' => {
                self.eat('&');
                let text = self.src[start..self.pos].to_owned();
                suggest(self, Tok::And, format!("unexpected `{text}`"), "use `and`")
            }
            '|' => {
                self.eat('|');
                let text = self.src[start..self.pos].to_owned();
                suggest(self, Tok::Or, format!("unexpected `{text}`"), "use `or`")
            }
            '≤' => suggest(self, Tok::Le, "unexpected `≤`".into(), "use `<=`"),
            '≥' => suggest(self, Tok::Ge, "unexpected `≥`".into(), "use `>=`"),
            '≠' => suggest(self, Tok::Ne, "unexpected `≠`".into(), "use `!=`"),
            '%' => suggest(
                self,
                Tok::Invalid,
                "unexpected `%`".into(),
                "`%` is a unit and must follow a number directly, as in `90%`",
            ),
            _ => {
                let shown = if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                };
                self.error(
                    ErrorKind::Lex,
                    format!("unexpected character `{shown}`"),
                    start..self.pos,
                    None,
                );
                Tok::Invalid
            }
        }
    }

    /// A number with an optional exponent and unit suffix.
    fn number(&mut self) {
        let start = self.pos;
        self.eat_while(|c| c.is_ascii_digit());
        if self.peek() == Some('.') && self.peek_second().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
            self.eat_while(|c| c.is_ascii_digit());
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let rest = &self.src.as_bytes()[self.pos + 1..];
            let digits_at = usize::from(matches!(rest.first(), Some(b'+' | b'-')));
            if rest.get(digits_at).is_some_and(u8::is_ascii_digit) {
                self.pos += 1 + digits_at;
                self.eat_while(|c| c.is_ascii_digit());
            }
        }
        let digits_end = self.pos;
        let text = &self.src[start..digits_end];
        let mut value: f64 = text.parse().unwrap_or(f64::INFINITY);

        if self.eat('%') {
            value /= 100.0;
        } else if self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.eat_while(|c| c.is_ascii_alphanumeric() || c == '_');
            match &self.src[digits_end..self.pos] {
                "us" => value /= 1e6,
                "ms" => value /= 1e3,
                "s" => {}
                "m" => value *= 60.0,
                "h" => value *= 3600.0,
                unit => {
                    let message = format!("unknown unit `{unit}` (use us, ms, s, m, h or %)");
                    self.error(ErrorKind::UnknownUnit, message, digits_end..self.pos, None);
                }
            }
        }
        if !value.is_finite() {
            let message = format!("number `{}` is too large", &self.src[start..self.pos]);
            self.error(ErrorKind::Lex, message, start..self.pos, None);
            value = 0.0;
        }
        self.push(Tok::Number(value), start);
    }

    /// A name or keyword. Names may contain dots for namespaces (`fact.engine`).
    fn ident(&mut self) {
        let start = self.pos;
        self.eat_while(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        let text = &self.src[start..self.pos];
        let keyword = |word: &str| match word {
            "and" => Some(Tok::And),
            "or" => Some(Tok::Or),
            "not" => Some(Tok::Not),
            "true" => Some(Tok::True),
            "false" => Some(Tok::False),
            _ => None,
        };
        let tok = if let Some(tok) = keyword(text) {
            tok
        } else if let Some(tok) = keyword(&text.to_ascii_lowercase()) {
            let lower = text.to_ascii_lowercase();
            let message = format!("unexpected `{text}`");
            let help = format!("keywords are lowercase: write `{lower}`");
            self.error(ErrorKind::Lex, message, start..self.pos, Some(&help));
            tok
        } else {
            Tok::Ident
        };
        self.push(tok, start);
    }

    /// A string literal opened by `quote` (a single quote is reported but accepted).
    fn string(&mut self, quote: char) {
        let start = self.pos;
        self.pos += quote.len_utf8();
        let mut text = String::new();
        let mut closed = false;
        while let Some(c) = self.peek() {
            let at = self.pos;
            self.pos += c.len_utf8();
            if c == quote {
                closed = true;
                break;
            }
            if c != '\\' {
                text.push(c);
                continue;
            }
            match self.peek() {
                Some(e) if e == '"' || e == '\\' || e == quote => {
                    self.pos += e.len_utf8();
                    text.push(e);
                }
                Some(e) => {
                    self.pos += e.len_utf8();
                    let shown = e.escape_default();
                    self.error(
                        ErrorKind::Lex,
                        format!("unknown escape `\\{shown}` in string"),
                        at..self.pos,
                        Some("only `\\\"` and `\\\\` are escapes"),
                    );
                    text.push(e);
                }
                None => {}
            }
        }
        if !closed {
            self.error(
                ErrorKind::Lex,
                "unterminated string".into(),
                start..self.pos,
                Some("close it with `\"`"),
            );
        } else if quote == '\'' {
            let help = format!(
                "write \"{}\"",
                text.replace('\\', "\\\\").replace('"', "\\\"")
            );
            self.error(
                ErrorKind::Lex,
                "strings use double quotes".into(),
                start..self.pos,
                Some(&help),
            );
        }
        self.push(Tok::Str(text), start);
    }
}

/// How a token is shown in messages.
pub(crate) fn describe(src: &str, token: &Token) -> String {
    if token.tok == Tok::Eof {
        "end of input".to_owned()
    } else {
        format!("`{}`", &src[token.span.clone()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        let mut errors = Vec::new();
        let tokens = lex(src, &mut errors);
        assert!(errors.is_empty(), "{src}: {errors:?}");
        tokens.into_iter().map(|t| t.tok).collect()
    }

    fn errs(src: &str) -> Vec<ConditionError> {
        let mut errors = Vec::new();
        lex(src, &mut errors);
        errors
    }

    fn number(src: &str) -> f64 {
        match toks(src).as_slice() {
            [Tok::Number(v), Tok::Eof] => *v,
            other => panic!("{src}: {other:?}"),
        }
    }

    #[test]
    fn operators_and_punctuation() {
        use Tok::*;
        assert_eq!(
            toks("( ) , + - * / < <= > >= == !="),
            [LParen, RParen, Comma, Plus, Minus, Star, Slash, Lt, Le, Gt, Ge, EqEq, Ne, Eof]
        );
        assert_eq!(toks("a<=b"), [Ident, Le, Ident, Eof]);
    }

    #[test]
    fn keywords_names_and_spans() {
        use Tok::*;
        let mut errors = Vec::new();
        let tokens = lex("not fact.max_num_seqs and true or false_x", &mut errors);
        assert!(errors.is_empty());
        let kinds: Vec<_> = tokens.iter().map(|t| t.tok.clone()).collect();
        assert_eq!(kinds, [Not, Ident, And, True, Or, Ident, Eof]);
        assert_eq!(tokens[1].span, 4..21);
        assert_eq!(tokens[5].span, 34..41);
        assert_eq!(tokens[6].span, 41..41);
    }

    #[test]
    fn numbers_and_units() {
        assert_eq!(number("4096"), 4096.0);
        assert_eq!(number("0.95"), 0.95);
        assert_eq!(number("1e-3"), 1e-3);
        assert_eq!(number("2E+2"), 200.0);
        assert_eq!(number("500ms"), 0.5);
        assert_eq!(number("250us"), 0.00025);
        assert_eq!(number("2s"), 2.0);
        assert_eq!(number("1.5m"), 90.0);
        assert_eq!(number("1h"), 3600.0);
        assert_eq!(number("90%"), 0.9);
        assert_eq!(number("95%"), 0.95);
        assert_eq!(number("1e3ms"), 1.0);
    }

    #[test]
    fn a_dot_without_digits_is_not_part_of_a_number() {
        let mut errors = Vec::new();
        let tokens = lex("1.x", &mut errors);
        assert_eq!(tokens[0].tok, Tok::Number(1.0));
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].message, "unexpected character `.`");
    }

    #[test]
    fn unknown_units_point_at_the_suffix() {
        let e = errs("x > 5kb");
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].kind, ErrorKind::UnknownUnit);
        assert_eq!(e[0].message, "unknown unit `kb` (use us, ms, s, m, h or %)");
        assert_eq!(e[0].span, 5..7);
        // `e` without exponent digits is a suffix, not an exponent.
        assert_eq!(
            errs("5e")[0].message,
            "unknown unit `e` (use us, ms, s, m, h or %)"
        );
        assert_eq!(errs("5sec")[0].span, 1..4);
    }

    #[test]
    fn huge_numbers_are_errors() {
        let e = errs("1e999");
        assert_eq!(e[0].message, "number `1e999` is too large");
        assert_eq!(e[0].kind, ErrorKind::Lex);
        assert_eq!(errs("1e308h")[0].message, "number `1e308h` is too large");
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(toks(r#""vllm""#), [Tok::Str("vllm".into()), Tok::Eof]);
        assert_eq!(toks(r#""a\"b\\c""#), [Tok::Str("a\"b\\c".into()), Tok::Eof]);
        assert_eq!(toks(r#""""#), [Tok::Str(String::new()), Tok::Eof]);
        let e = errs(r#""a\nb""#);
        assert_eq!(e[0].message, "unknown escape `\\n` in string");
        assert_eq!(e[0].span, 2..4);
    }

    #[test]
    fn unterminated_and_single_quoted_strings() {
        let e = errs(r#"fact.engine == "vllm"#);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].message, "unterminated string");
        assert_eq!(e[0].span, 15..20);
        let e = errs(r#""ab\"#);
        assert_eq!(e[0].message, "unterminated string");
        let mut errors = Vec::new();
        let tokens = lex("'vllm'", &mut errors);
        assert_eq!(tokens[0].tok, Tok::Str("vllm".into()));
        assert_eq!(errors[0].message, "strings use double quotes");
        assert_eq!(errors[0].help.as_deref(), Some("write \"vllm\""));
    }

    #[test]
    fn likely_intents_are_recovered() {
        for (src, tok, help) in [
            ("=", Tok::EqEq, "use `==` to compare"),
            ("!", Tok::Not, "use `not` to negate a condition"),
            ("&&", Tok::And, "use `and`"),
            ("&", Tok::And, "use `and`"),
            ("||", Tok::Or, "use `or`"),
            ("≥", Tok::Ge, "use `>=`"),
            ("≤", Tok::Le, "use `<=`"),
            ("≠", Tok::Ne, "use `!=`"),
            ("AND", Tok::And, "keywords are lowercase: write `and`"),
            ("True", Tok::True, "keywords are lowercase: write `true`"),
        ] {
            let mut errors = Vec::new();
            let tokens = lex(src, &mut errors);
            assert_eq!(tokens[0].tok, tok, "{src}");
            assert_eq!(tokens[0].span, 0..src.len(), "{src}");
            assert_eq!(errors.len(), 1, "{src}");
            assert_eq!(errors[0].kind, ErrorKind::Lex);
            assert_eq!(errors[0].help.as_deref(), Some(help), "{src}");
        }
    }

    #[test]
    fn unexpected_characters_become_invalid_tokens() {
        let mut errors = Vec::new();
        let tokens = lex("a @ é", &mut errors);
        assert_eq!(tokens[1].tok, Tok::Invalid);
        assert_eq!(tokens[2].tok, Tok::Invalid);
        assert_eq!(tokens[2].span, 4..6);
        assert_eq!(errors[0].message, "unexpected character `@`");
        assert_eq!(errors[1].message, "unexpected character `é`");
        assert_eq!(errs("\u{1}")[0].message, "unexpected character `\\u{1}`");
        assert_eq!(errs("%")[0].message, "unexpected `%`");
    }

    #[test]
    fn describe_tokens() {
        let mut errors = Vec::new();
        let tokens = lex("a >", &mut errors);
        assert_eq!(describe("a >", &tokens[1]), "`>`");
        assert_eq!(describe("a >", &tokens[2]), "end of input");
    }
}
