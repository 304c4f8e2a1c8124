//! A hand-written precedence-climbing (Pratt) parser from tokens to an AST with byte spans.
//!
//! Binding powers, lowest first: `or` 1, `and` 2, prefix `not` 3, comparisons 4
//! (non-associative), `+ -` 5, `* /` 6, unary `-` 7.
//!
//! The parser recovers from mistakes so that one pass reports as much as
//! possible: a missing operand becomes an [`ExprKind::Error`] node, stray
//! operators and closing parentheses are skipped, and juxtaposed expressions
//! are both parsed (so the names in both are still checked). Error nodes keep
//! their children; the checker resolves names inside them but reports no type
//! errors about them.

use std::ops::Range;

use super::error::{ConditionError, ErrorKind};
use super::lexer::{describe, Tok, Token};
use super::types::Mode;

/// Deepest allowed nesting of the AST; deeper input is rejected, which keeps
/// the recursive checker and evaluator far from the stack limit.
pub(crate) const MAX_DEPTH: usize = 100;

const NOT_BP: u8 = 3;
const UNARY_MINUS_BP: u8 = 7;
/// An invalid character between two expressions is parsed like a `+` so
/// that the expression after it is still checked.
const INVALID_BP: u8 = 5;

/// A node of the syntax tree.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    /// Byte range in the source.
    pub span: Range<usize>,
    depth: usize,
}

/// The shape of a syntax tree node.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ExprKind {
    Number(f64),
    Str(String),
    Bool(bool),
    /// A name; its text is the node's span.
    Name,
    /// A function call; `name` is the span of the function's name.
    Call {
        name: Range<usize>,
        args: Vec<Expr>,
    },
    Paren(Box<Expr>),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// Something that did not parse (already reported), with whatever parsed around it.
    Error(Vec<Expr>),
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    Or,
    And,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    Add,
    Sub,
    Mul,
    Div,
}

impl BinOp {
    /// The operator as written.
    pub(crate) fn text(self) -> &'static str {
        match self {
            BinOp::Or => "or",
            BinOp::And => "and",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
        }
    }

    fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
        )
    }

    /// The operator a token stands for in infix position, with its binding power.
    fn of(tok: &Tok) -> Option<(BinOp, u8)> {
        Some(match tok {
            Tok::Or => (BinOp::Or, 1),
            Tok::And => (BinOp::And, 2),
            Tok::Lt => (BinOp::Lt, 4),
            Tok::Le => (BinOp::Le, 4),
            Tok::Gt => (BinOp::Gt, 4),
            Tok::Ge => (BinOp::Ge, 4),
            Tok::EqEq => (BinOp::Eq, 4),
            Tok::Ne => (BinOp::Ne, 4),
            Tok::Plus => (BinOp::Add, 5),
            Tok::Minus => (BinOp::Sub, 5),
            Tok::Star => (BinOp::Mul, 6),
            Tok::Slash => (BinOp::Div, 6),
            _ => return None,
        })
    }
}

/// Whether a token can begin an expression.
fn starts_expr(tok: &Tok) -> bool {
    matches!(
        tok,
        Tok::Number(_)
            | Tok::Str(_)
            | Tok::Ident
            | Tok::True
            | Tok::False
            | Tok::LParen
            | Tok::Minus
            | Tok::Not
            | Tok::Invalid
    )
}

/// Parses `tokens` (which end with [`Tok::Eof`]). Returns `None` only for an
/// empty expression; otherwise a tree, possibly containing error nodes.
pub(crate) fn parse(
    src: &str,
    tokens: &[Token],
    mode: Mode,
    errors: &mut Vec<ConditionError>,
) -> Option<Expr> {
    debug_assert!(tokens.last().is_some_and(|t| t.tok == Tok::Eof));
    if tokens.len() <= 1 {
        let example = match mode {
            Mode::Condition => "write a condition, e.g. `queue_depth > 10`",
            Mode::Number => "write a number expression, e.g. `queue_depth / 2`",
        };
        errors.push(
            ConditionError::new(ErrorKind::Parse, "empty expression", 0..src.len())
                .with_help(example),
        );
        return None;
    }
    let mut parser = Parser {
        src,
        tokens,
        pos: 0,
        errors,
        depth: 0,
        open_parens: 0,
        gave_up: false,
    };
    Some(parser.top())
}

struct Parser<'s, 'e> {
    src: &'s str,
    tokens: &'s [Token],
    pos: usize,
    errors: &'e mut Vec<ConditionError>,
    /// Current recursion depth of `expr`.
    depth: usize,
    /// How many `(` (groups and calls) are open around the current position.
    open_parens: usize,
    /// Set once the input was found too deeply nested; further errors are suppressed.
    gave_up: bool,
}

impl Parser<'_, '_> {
    fn peek(&self) -> &Token {
        &self.tokens[self.pos]
    }

    fn bump(&mut self) -> Token {
        let token = self.tokens[self.pos].clone();
        if token.tok != Tok::Eof {
            self.pos += 1;
        }
        token
    }

    fn text(&self, token: &Token) -> String {
        describe(self.src, token)
    }

    fn error(&mut self, message: String, span: Range<usize>, help: Option<&str>) {
        if self.gave_up {
            return;
        }
        let mut e = ConditionError::new(ErrorKind::Parse, message, span);
        e.help = help.map(str::to_owned);
        self.errors.push(e);
    }

    fn give_up(&mut self, span: Range<usize>) {
        self.error(
            format!("expression is nested too deeply (the limit is {MAX_DEPTH} levels)"),
            span,
            Some("split it into simpler conditions"),
        );
        self.gave_up = true;
        self.pos = self.tokens.len() - 1;
    }

    fn leaf(kind: ExprKind, span: Range<usize>) -> Expr {
        Expr {
            kind,
            span,
            depth: 1,
        }
    }

    /// Builds an inner node, or gives up when it would be too deep.
    fn node(&mut self, kind: ExprKind, span: Range<usize>) -> Expr {
        let children = match &kind {
            ExprKind::Call { args, .. } | ExprKind::Error(args) => {
                args.iter().map(|e| e.depth).max()
            }
            ExprKind::Paren(e) | ExprKind::Neg(e) | ExprKind::Not(e) => Some(e.depth),
            ExprKind::Binary(_, l, r) => Some(l.depth.max(r.depth)),
            _ => None,
        };
        let depth = children.unwrap_or(0) + 1;
        if depth > MAX_DEPTH {
            self.give_up(span.clone());
            return Self::leaf(ExprKind::Error(Vec::new()), span);
        }
        Expr { kind, span, depth }
    }

    /// The whole input.
    fn top(&mut self) -> Expr {
        let mut expr = self.expr(0);
        while self.peek().tok != Tok::Eof {
            let token = self.peek().clone();
            let text = self.text(&token);
            if matches!(token.tok, Tok::RParen | Tok::Comma) {
                // Closes nothing: skip it and carry on with the operators after it.
                self.error(format!("unexpected {text}"), token.span, None);
                self.bump();
                expr = self.infix(expr, 0);
                if !starts_expr(&self.peek().tok) {
                    continue;
                }
            } else {
                self.error(
                    format!("unexpected {text}"),
                    token.span,
                    Some("an operator such as `and`, `or`, `>` or `+` is missing before it"),
                );
            }
            // Two expressions side by side: parse the second one too, so that
            // its names are still checked.
            let extra = self.expr(0);
            let span = expr.span.start..extra.span.end;
            expr = self.node(ExprKind::Error(vec![expr, extra]), span);
        }
        expr
    }

    /// An expression whose infix operators all bind at least as tightly as `min_bp`.
    fn expr(&mut self, min_bp: u8) -> Expr {
        self.depth += 1;
        let expr = if self.depth > MAX_DEPTH {
            let span = self.peek().span.clone();
            self.give_up(span.clone());
            Self::leaf(ExprKind::Error(Vec::new()), span)
        } else {
            let lhs = self.prefix();
            self.infix(lhs, min_bp)
        };
        self.depth -= 1;
        expr
    }

    /// Reports a missing operand in front of `token`.
    fn expected_expression(&mut self, token: &Token) {
        let message = match self.pos.checked_sub(1) {
            Some(prev) => format!(
                "expected an expression after {}",
                self.text(&self.tokens[prev])
            ),
            None => format!("expected an expression before {}", self.text(token)),
        };
        self.error(message, token.span.clone(), None);
    }

    /// A primary or prefix-operator expression.
    // Long on purpose: one arm per token that can start an expression, with the recovery that
    // reports a run of misplaced tokens once.
    fn prefix(&mut self) -> Expr {
        // Report a run of misplaced tokens only once.
        let mut reported = false;
        loop {
            let token = self.peek().clone();
            let start = token.span.start;
            match token.tok {
                Tok::Number(v) => {
                    self.bump();
                    return Self::leaf(ExprKind::Number(v), token.span);
                }
                Tok::Str(s) => {
                    self.bump();
                    return Self::leaf(ExprKind::Str(s), token.span);
                }
                Tok::True | Tok::False => {
                    self.bump();
                    return Self::leaf(ExprKind::Bool(token.tok == Tok::True), token.span);
                }
                Tok::Ident => {
                    self.bump();
                    if self.peek().tok == Tok::LParen {
                        return self.call(token.span);
                    }
                    return Self::leaf(ExprKind::Name, token.span);
                }
                Tok::LParen => {
                    self.bump();
                    self.open_parens += 1;
                    let inner = self.expr(0);
                    let end = self.close_paren(token.span);
                    self.open_parens -= 1;
                    return self.node(ExprKind::Paren(Box::new(inner)), start..end);
                }
                Tok::Minus => {
                    self.bump();
                    let operand = self.expr(UNARY_MINUS_BP);
                    let span = start..operand.span.end;
                    return self.node(ExprKind::Neg(Box::new(operand)), span);
                }
                Tok::Not => {
                    self.bump();
                    let operand = self.expr(NOT_BP);
                    let span = start..operand.span.end;
                    return self.node(ExprKind::Not(Box::new(operand)), span);
                }
                Tok::Invalid => {
                    // Already reported by the lexer.
                    self.bump();
                    return Self::leaf(ExprKind::Error(Vec::new()), token.span);
                }
                Tok::Eof => {
                    if !reported {
                        self.expected_expression(&token);
                    }
                    return Self::leaf(ExprKind::Error(Vec::new()), token.span);
                }
                Tok::RParen | Tok::Comma if self.open_parens > 0 => {
                    // Probably closes a group or call: leave it to that.
                    if !reported {
                        self.expected_expression(&token);
                    }
                    return Self::leaf(ExprKind::Error(Vec::new()), start..start);
                }
                Tok::RParen | Tok::Comma if self.pos == 0 => {
                    let text = self.text(&token);
                    self.error(format!("unexpected {text}"), token.span, None);
                    reported = true;
                    self.bump();
                }
                _ => {
                    // A binary operator, or `)` / `,` that closes nothing: skip it.
                    if !reported {
                        self.expected_expression(&token);
                        reported = true;
                    }
                    self.bump();
                }
            }
        }
    }

    /// Binary operators after `lhs`.
    fn infix(&mut self, mut lhs: Expr, min_bp: u8) -> Expr {
        let mut after_comparison = false;
        loop {
            let token = self.peek().clone();
            if token.tok == Tok::Invalid {
                if INVALID_BP < min_bp {
                    break;
                }
                self.bump();
                let mut parts = vec![lhs];
                if starts_expr(&self.peek().tok) {
                    parts.push(self.expr(INVALID_BP + 1));
                }
                let span = parts[0].span.start..parts[parts.len() - 1].span.end.max(token.span.end);
                lhs = self.node(ExprKind::Error(parts), span);
                after_comparison = false;
                continue;
            }
            let Some((op, bp)) = BinOp::of(&token.tok) else {
                break;
            };
            if bp < min_bp {
                break;
            }
            self.bump();
            let rhs = self.expr(bp + 1);
            let span = lhs.span.start..rhs.span.end.max(token.span.end);
            if op.is_comparison() && after_comparison {
                self.error(
                    format!("comparisons cannot be chained: unexpected `{}`", op.text()),
                    token.span,
                    Some("combine comparisons with `and`, e.g. `a < b and b < c`"),
                );
                lhs = self.node(ExprKind::Error(vec![lhs, rhs]), span);
                continue;
            }
            lhs = self.node(ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span);
            after_comparison = op.is_comparison();
        }
        lhs
    }

    /// The arguments of a call to the function named at `name`; the next token is `(`.
    fn call(&mut self, name: Range<usize>) -> Expr {
        let open = self.bump();
        self.open_parens += 1;
        let mut args = Vec::new();
        let end = if self.peek().tok == Tok::RParen {
            self.bump().span.end
        } else {
            loop {
                args.push(self.expr(0));
                let token = self.peek().clone();
                match token.tok {
                    Tok::Comma => {
                        self.bump();
                    }
                    Tok::RParen => break self.bump().span.end,
                    Tok::Eof => {
                        let function = &self.src[name.clone()];
                        let help = format!("add `)` to close the call to `{function}`");
                        self.error("unclosed `(`".into(), open.span.clone(), Some(&help));
                        break token.span.start;
                    }
                    _ => {
                        let message = format!(
                            "expected `,` or `)` after an argument of `{}`, found {}",
                            &self.src[name.clone()],
                            self.text(&token)
                        );
                        self.error(message, token.span, None);
                        break self.skip_to_close();
                    }
                }
            }
        };
        self.open_parens -= 1;
        let span = name.start..end;
        self.node(ExprKind::Call { name, args }, span)
    }

    /// Expects the `)` matching the `(` at `open`; returns the end of the group.
    fn close_paren(&mut self, open: Range<usize>) -> usize {
        let token = self.peek().clone();
        match token.tok {
            Tok::RParen => self.bump().span.end,
            Tok::Eof => {
                self.error("unclosed `(`".into(), open, Some("add a matching `)`"));
                token.span.start
            }
            _ => {
                let message = format!("expected `)`, found {}", self.text(&token));
                self.error(message, token.span, None);
                self.skip_to_close()
            }
        }
    }

    /// Skips to just after the `)` that closes the current group (or to the
    /// end); returns the end of the last skipped token.
    fn skip_to_close(&mut self) -> usize {
        let mut nested = 0usize;
        loop {
            let token = self.bump();
            match token.tok {
                Tok::Eof => return token.span.start,
                Tok::LParen => nested += 1,
                Tok::RParen if nested == 0 => return token.span.end,
                Tok::RParen => nested -= 1,
                _ => {}
            }
        }
    }
}

/// Renders a tree with explicit parentheses around every operation, for tests.
#[cfg(test)]
pub(crate) fn sexpr(src: &str, e: &Expr) -> String {
    match &e.kind {
        ExprKind::Number(v) => format!("{v}"),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Bool(b) => format!("{b}"),
        ExprKind::Name => src[e.span.clone()].to_owned(),
        ExprKind::Call { name, args } => {
            let args: Vec<_> = args.iter().map(|a| sexpr(src, a)).collect();
            format!("{}({})", &src[name.clone()], args.join(", "))
        }
        ExprKind::Paren(inner) => sexpr(src, inner),
        ExprKind::Neg(x) => format!("(- {})", sexpr(src, x)),
        ExprKind::Not(x) => format!("(not {})", sexpr(src, x)),
        ExprKind::Binary(op, l, r) => {
            format!("({} {} {})", op.text(), sexpr(src, l), sexpr(src, r))
        }
        ExprKind::Error(parts) => {
            let parts: Vec<_> = parts.iter().map(|a| sexpr(src, a)).collect();
            format!("(error {})", parts.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lexer::lex;
    use super::*;

    fn parse_all(src: &str) -> (Option<Expr>, Vec<ConditionError>) {
        let mut errors = Vec::new();
        let tokens = lex(src, &mut errors);
        let expr = parse(src, &tokens, Mode::Condition, &mut errors);
        (expr, errors)
    }

    /// The tree as an s-expression; the input must parse without errors.
    fn tree(src: &str) -> String {
        let (expr, errors) = parse_all(src);
        assert!(errors.is_empty(), "{src}: {errors:?}");
        sexpr(src, &expr.unwrap())
    }

    /// The messages and spans of the errors of `src`.
    fn errors(src: &str) -> Vec<(String, Range<usize>)> {
        let (_, errors) = parse_all(src);
        errors.into_iter().map(|e| (e.message, e.span)).collect()
    }

    fn one_error(src: &str) -> (String, Range<usize>) {
        let errs = errors(src);
        assert_eq!(errs.len(), 1, "{src}: {errs:?}");
        errs.into_iter().next().unwrap()
    }

    #[test]
    fn precedence() {
        assert_eq!(tree("1 + 2 * 3"), "(+ 1 (* 2 3))");
        assert_eq!(tree("1 * 2 + 3"), "(+ (* 1 2) 3)");
        assert_eq!(tree("1 - 2 - 3"), "(- (- 1 2) 3)");
        assert_eq!(tree("8 / 4 / 2"), "(/ (/ 8 4) 2)");
        assert_eq!(tree("-a * b"), "(* (- a) b)");
        assert_eq!(tree("- - a"), "(- (- a))");
        assert_eq!(tree("a + b > c * d"), "(> (+ a b) (* c d))");
        assert_eq!(tree("a or b and c"), "(or a (and b c))");
        assert_eq!(tree("a and b or c"), "(or (and a b) c)");
        assert_eq!(tree("not a > 1 and b"), "(and (not (> a 1)) b)");
        assert_eq!(tree("not not a"), "(not (not a))");
        assert_eq!(tree("a == not b"), "(== a (not b))");
        assert_eq!(tree("(a or b) and c"), "(and (or a b) c)");
        assert_eq!(tree("a and b and c"), "(and (and a b) c)");
        assert_eq!(tree("(a < b) == (c < d)"), "(== (< a b) (< c d))");
    }

    #[test]
    fn primaries_and_calls() {
        assert_eq!(tree("max(a, b * 2, 3)"), "max(a, (* b 2), 3)");
        assert_eq!(tree("known()"), "known()");
        assert_eq!(tree("abs((a))"), "abs(a)");
        assert_eq!(
            tree(r#"fact.engine != "vllm""#),
            r#"(!= fact.engine "vllm")"#
        );
        assert_eq!(tree("true == false"), "(== true false)");
        assert_eq!(tree("500ms"), "0.5");
    }

    #[test]
    fn spans() {
        let src = "x and (a + 1) > max(b, c)";
        let (expr, _) = parse_all(src);
        let expr = expr.unwrap();
        assert_eq!(expr.span, 0..src.len());
        let ExprKind::Binary(BinOp::And, _, rhs) = &expr.kind else {
            panic!("{expr:?}")
        };
        assert_eq!(&src[rhs.span.clone()], "(a + 1) > max(b, c)");
        let ExprKind::Binary(BinOp::Gt, l, r) = &rhs.kind else {
            panic!("{rhs:?}")
        };
        assert_eq!(&src[l.span.clone()], "(a + 1)");
        assert_eq!(&src[r.span.clone()], "max(b, c)");
    }

    #[test]
    fn missing_operands() {
        assert_eq!(
            one_error("a >"),
            ("expected an expression after `>`".into(), 3..3)
        );
        assert_eq!(
            one_error("a > and b"),
            ("expected an expression after `>`".into(), 4..7)
        );
        assert_eq!(
            one_error("a > > 1"),
            ("expected an expression after `>`".into(), 4..5)
        );
        assert_eq!(
            one_error("> 1"),
            ("expected an expression before `>`".into(), 0..1)
        );
        assert_eq!(
            one_error("(a >)"),
            ("expected an expression after `>`".into(), 4..5)
        );
        assert_eq!(
            one_error("a > )"),
            ("expected an expression after `>`".into(), 4..5)
        );
        assert_eq!(
            one_error("()"),
            ("expected an expression after `(`".into(), 1..2)
        );
        assert_eq!(
            one_error("not"),
            ("expected an expression after `not`".into(), 3..3)
        );
        assert_eq!(
            one_error("max(a,)"),
            ("expected an expression after `,`".into(), 6..7)
        );
        assert_eq!(
            one_error("max(,a)"),
            ("expected an expression after `(`".into(), 4..5)
        );
        // The expression after the mistake is still parsed.
        let (expr, _) = parse_all("a > > 1");
        assert_eq!(sexpr("a > > 1", &expr.unwrap()), "(> a 1)");
    }

    #[test]
    fn stray_closing_parens_and_commas() {
        assert_eq!(one_error(")"), ("unexpected `)`".into(), 0..1));
        assert_eq!(one_error("a > 1)"), ("unexpected `)`".into(), 5..6));
        assert_eq!(one_error("a > 1, b"), ("unexpected `,`".into(), 5..6));
        let src = "a > 1) and b";
        let (expr, errs) = parse_all(src);
        assert_eq!(errs.len(), 1);
        assert_eq!(sexpr(src, &expr.unwrap()), "(and (> a 1) b)");
    }

    #[test]
    fn unclosed_groups_and_calls() {
        assert_eq!(one_error("(a > 1"), ("unclosed `(`".into(), 0..1));
        let (message, span) = one_error("max(a, b");
        assert_eq!((message.as_str(), span), ("unclosed `(`", 3..4));
        assert_eq!(
            one_error("(a > 1 b) and c"),
            ("expected `)`, found `b`".into(), 7..8)
        );
        assert_eq!(
            one_error("max(a b) > 1"),
            (
                "expected `,` or `)` after an argument of `max`, found `b`".into(),
                6..7
            )
        );
        let src = "(a > 1 b (c)) and d";
        let (expr, errs) = parse_all(src);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(sexpr(src, &expr.unwrap()), "(and (> a 1) d)");
    }

    #[test]
    fn juxtaposed_expressions_are_both_kept() {
        let src = "a > 1 b > 2";
        let (expr, errs) = parse_all(src);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].message, "unexpected `b`");
        assert_eq!(errs[0].span, 6..7);
        assert_eq!(sexpr(src, &expr.unwrap()), "(error (> a 1) (> b 2))");
    }

    #[test]
    fn comparisons_do_not_chain() {
        let (message, span) = one_error("a < b < c");
        assert_eq!(message, "comparisons cannot be chained: unexpected `<`");
        assert_eq!(span, 6..7);
        assert_eq!(one_error("a == b != c").1, 7..9);
        assert_eq!(one_error("not a < b + 1 >= c").1, 14..16);
        assert!(errors("(a < b) < c").is_empty());
        assert!(errors("a < b and b < c").is_empty());
    }

    #[test]
    fn empty_expressions() {
        let (expr, errs) = parse_all("");
        assert!(expr.is_none());
        assert_eq!(errs[0].message, "empty expression");
        assert_eq!(errs[0].span, 0..0);
        let (expr, errs) = parse_all("  \n ");
        assert!(expr.is_none());
        assert_eq!(errs[0].span, 0..4);
    }

    #[test]
    fn invalid_characters_do_not_cascade() {
        // Only the lexer's error; the parser keeps both sides.
        let src = "a @ b > 1";
        let (expr, errs) = parse_all(src);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].kind, ErrorKind::Lex);
        assert_eq!(sexpr(src, &expr.unwrap()), "(> (error a b) 1)");
        assert_eq!(errors("a > @").len(), 1);
        assert_eq!(errors("@").len(), 1);
    }

    #[test]
    fn deep_nesting_is_rejected_once() {
        let deep = format!("{}a{}", "(".repeat(500), ")".repeat(500));
        let errs = errors(&deep);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].0.starts_with("expression is nested too deeply"));
        let long = vec!["a"; 300].join(" + ");
        assert_eq!(errors(&long).len(), 1);
        let nots = format!("{}a", "not ".repeat(300));
        assert_eq!(errors(&nots).len(), 1);
        let fine = format!("{}a{}", "(".repeat(40), ")".repeat(40));
        assert!(errors(&fine).is_empty());
    }
}
