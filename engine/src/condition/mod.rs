//! The condition language: small, pure, three-valued expressions used in playbooks.
//!
//! Playbooks describe causes and evidence with conditions such as
//! `kv_cache_usage_ratio > 95% and preemptions_per_second > 0` or
//! `not known(fact.max_num_seqs) or running_requests >= fact.max_num_seqs * 0.9`.
//! This module exists so that those conditions are checked once, when a playbook
//! is loaded (every unknown name, unknown unit and type error is reported at
//! that point, with a location and a "did you mean"), and then evaluated many
//! times, quickly, against whatever the host knows about a service.
//!
//! Metrics are often missing: a signal may not be exported, a fact may be
//! unknowable, a ratio may divide by zero. The language therefore uses Kleene
//! three-valued logic: a missing or non-finite value is *unknown*, arithmetic
//! and comparisons with an unknown operand are unknown, and `and` / `or` /
//! `not` follow the usual truth tables (`false and unknown` is `false`,
//! `true or unknown` is `true`). `known(x)` tests for presence.
//!
//! # Grammar
//!
//! From lowest to highest precedence: `or`, `and`, prefix `not`, the
//! non-associative comparisons `< <= > >= == !=`, `+ -`, `* /`, unary `-`,
//! and primaries: numbers with an optional unit (`500ms`, `2s`, `1.5m`, `1h`,
//! `250us`, `90%`, `1e-3`), double-quoted strings (with `\"` and `\\`
//! escapes), `true`, `false`, names (`queue_depth`, `fact.engine`,
//! `slo.ttft_p99_seconds`), function calls and parenthesised expressions.
//!
//! Functions: `min(x, y, ...)`, `max(x, y, ...)`, `abs(x)`,
//! `avg_over_time(signal)`, `max_over_time(signal)`, `min_over_time(signal)`
//! and `known(x)`.
//!
//! # Pipeline
//!
//! [`Condition::compile`] lexes (`lexer`), parses with a precedence-climbing
//! parser into an AST with byte spans (`parser`), then resolves names through
//! the host's [`Scope`] and type-checks (`check`), producing a typed tree that
//! refers to values by [`Slot`]. [`Condition::eval`] walks that tree (`eval`)
//! reading values from an [`Env`]; it never looks up strings and never
//! allocates.

mod check;
mod error;
mod eval;
mod lexer;
mod parser;
pub mod promql;
mod types;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod testutil;

pub use error::{ConditionError, ErrorKind};
pub use types::{Env, Input, Scope, Slot, Type, WindowStats};

use check::Checker;
use eval::{BoolExpr, NumExpr, Root};
use types::Mode;

/// The result of evaluating an expression.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// A finite number.
    Number(f64),
    /// A string.
    Str(&'a str),
    /// A boolean.
    Bool(bool),
    /// Unknown: some input was absent or not finite.
    Unknown,
}

/// A single comparison `name OP threshold`, see [`Condition::simple_comparison`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimpleComparison {
    /// The slot of the compared name.
    pub slot: Slot,
    /// The operator, oriented so that the name is on the left: `<`, `<=`, `>`, `>=`, `==` or `!=`.
    pub op: &'static str,
    /// What the name is compared with.
    pub threshold: Threshold,
}

/// The right-hand side of a [`SimpleComparison`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Threshold {
    /// A constant (units already applied, so `500ms` is `0.5`).
    Number(f64),
    /// Another slot: an SLO or a fact.
    Slot(Slot),
}

/// A threshold a condition compares a signal with, see [`Condition::threshold_lines`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThresholdLine {
    /// The signal compared.
    pub signal: Slot,
    /// The operator, oriented so that the signal is on the left.
    pub op: &'static str,
    /// The threshold's value.
    pub value: f64,
    /// The SLO or fact the threshold is, when it is one alone.
    pub slot: Option<Slot>,
}

/// A compiled condition or number expression, ready to evaluate.
#[derive(Clone, Debug)]
pub struct Condition {
    src: String,
    root: Root,
    slots: Vec<Slot>,
}

impl Condition {
    /// Compiles a boolean condition. Returns ALL errors found in one pass (lexing errors, parse errors with recovery where reasonable, every unknown name, every type error), not just the first.
    ///
    /// Errors are sorted by their position in `src`.
    pub fn compile(src: &str, scope: &dyn Scope) -> Result<Condition, Vec<ConditionError>> {
        compile(src, scope, Mode::Condition)
    }

    /// Compiles a numeric expression (same language, must type to Number).
    pub fn compile_number(src: &str, scope: &dyn Scope) -> Result<Condition, Vec<ConditionError>> {
        compile(src, scope, Mode::Number)
    }

    /// Evaluates the expression: a [`Value::Bool`] for conditions, a
    /// [`Value::Number`] for number expressions, or [`Value::Unknown`].
    pub fn eval<'a>(&'a self, env: &'a dyn Env) -> Value<'a> {
        match &self.root {
            Root::Bool(b) => b.eval(env).map_or(Value::Unknown, Value::Bool),
            Root::Number(n) => n.eval(env).map_or(Value::Unknown, Value::Number),
        }
    }

    /// Tri-state helper for boolean conditions: Some(true/false) or None for unknown.
    ///
    /// Always `None` for a number expression.
    pub fn eval_bool(&self, env: &dyn Env) -> Option<bool> {
        match &self.root {
            Root::Bool(b) => b.eval(env),
            Root::Number(_) => None,
        }
    }

    /// Evaluates a number expression: `Some(x)` (always finite) or `None` when
    /// unknown. Always `None` for a condition.
    pub fn eval_number(&self, env: &dyn Env) -> Option<f64> {
        match &self.root {
            Root::Number(n) => n.eval(env),
            Root::Bool(_) => None,
        }
    }

    /// Every slot the expression reads, deduplicated, in order of first appearance.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// When the condition is a single comparison `name OP literal` (or `literal OP name`, or `name OP slo.x`), the name's slot, the operator text and the threshold slot-or-number; used to print "0.99 (> 0.95)". None otherwise.
    ///
    /// The operator is flipped when the name is on the right (`0.5 < x` gives
    /// `x > 0.5`). Constant arithmetic is folded (`x > 2 * 60` has threshold
    /// 120), and facts count as thresholds like SLOs (`x >= fact.max_num_seqs`).
    /// Only numeric comparisons qualify.
    pub fn simple_comparison(&self) -> Option<SimpleComparison> {
        let Root::Bool(BoolExpr::CmpNum(op, lhs, rhs)) = &self.root else {
            return None;
        };
        let is_threshold_slot = |s: &Slot| matches!(s, Slot::Slo(_) | Slot::Fact(_));
        let (slot, op, threshold) = match (lhs, rhs) {
            (NumExpr::Load(s), NumExpr::Const(v)) => (*s, *op, Threshold::Number(*v)),
            (NumExpr::Const(v), NumExpr::Load(s)) => (*s, op.flipped(), Threshold::Number(*v)),
            (NumExpr::Load(s), NumExpr::Load(t)) if is_threshold_slot(t) => {
                (*s, *op, Threshold::Slot(*t))
            }
            (NumExpr::Load(t), NumExpr::Load(s)) if is_threshold_slot(t) => {
                (*s, op.flipped(), Threshold::Slot(*t))
            }
            _ => return None,
        };
        Some(SimpleComparison {
            slot,
            op: op.text(),
            threshold,
        })
    }

    /// The lines a chart of the condition's signals can draw: each top-level conjunct (`a > 1
    /// and (b or c) and d >= 2 * slo.x` gives `a > 1` and `d >= 2 * slo.x`) that compares a
    /// signal, or a `*_over_time` of one, with an expression of no signal, that expression
    /// valued with `env`'s SLOs and facts. Empty for a number expression.
    pub fn threshold_lines(&self, env: &dyn Env) -> Vec<ThresholdLine> {
        let Root::Bool(b) = &self.root else {
            return Vec::new();
        };
        let env = WithoutSignals(env);
        let mut out = Vec::new();
        let mut stack = vec![b];
        while let Some(e) = stack.pop() {
            match e {
                BoolExpr::And(l, r) => {
                    stack.push(r);
                    stack.push(l);
                }
                BoolExpr::CmpNum(op, lhs, rhs) => {
                    let line = match (signal_of(lhs), signal_of(rhs)) {
                        (Some(s), None) => rhs.eval(&env).map(|v| (s, *op, v, rhs)),
                        (None, Some(s)) => lhs.eval(&env).map(|v| (s, op.flipped(), v, lhs)),
                        _ => None,
                    };
                    out.extend(line.map(|(signal, op, value, other)| ThresholdLine {
                        signal,
                        op: op.text(),
                        value,
                        slot: match other {
                            NumExpr::Load(s) => Some(*s),
                            _ => None,
                        },
                    }));
                }
                _ => {}
            }
        }
        out
    }

    /// The source text the expression was compiled from.
    pub fn source(&self) -> &str {
        &self.src
    }

    /// Whether this was compiled with [`Condition::compile_number`].
    pub fn is_number(&self) -> bool {
        matches!(self.root, Root::Number(_))
    }
}

/// The signal a comparison's side names: the signal itself or a `*_over_time` of it.
fn signal_of(e: &NumExpr) -> Option<Slot> {
    match e {
        NumExpr::Load(s @ Slot::Signal(_)) | NumExpr::OverTime(_, s @ Slot::Signal(_)) => Some(*s),
        _ => None,
    }
}

/// An environment's SLOs and facts without its signals: what a threshold may read.
struct WithoutSignals<'a>(&'a dyn Env);

impl Env for WithoutSignals<'_> {
    fn get(&self, slot: Slot) -> Option<Input<'_>> {
        match slot {
            Slot::Signal(_) => None,
            s => self.0.get(s),
        }
    }

    fn stats(&self, _: Slot) -> Option<WindowStats> {
        None
    }
}

fn compile(src: &str, scope: &dyn Scope, mode: Mode) -> Result<Condition, Vec<ConditionError>> {
    let mut errors = Vec::new();
    let tokens = lexer::lex(src, &mut errors);
    let ast = parser::parse(src, &tokens, mode, &mut errors);
    let mut checker = Checker::new(src, scope);
    let root = ast.and_then(|ast| {
        let typed = checker.check(&ast);
        checker.finish(typed, &ast, mode)
    });
    let (slots, check_errors) = checker.into_parts();
    errors.extend(check_errors);
    match root {
        Some(root) if errors.is_empty() => Ok(Condition {
            src: src.to_owned(),
            root,
            slots,
        }),
        _ => {
            errors.sort_by_key(|e| (e.span.start, e.span.end));
            errors.dedup();
            if errors.is_empty() {
                // Unreachable in practice: a missing root always comes with an error.
                errors.push(ConditionError::new(
                    ErrorKind::Parse,
                    "invalid expression",
                    0..src.len(),
                ));
            }
            Err(errors)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::{give, scope, Want::*};
    use super::*;

    #[test]
    fn compile_reports_source_and_kind() {
        let c = Condition::compile("queue_depth > 10", &scope()).unwrap();
        assert_eq!(c.source(), "queue_depth > 10");
        assert!(!c.is_number());
        let n = Condition::compile_number("queue_depth / 2", &scope()).unwrap();
        assert!(n.is_number());
    }

    #[test]
    fn slots_are_deduplicated_in_order_of_first_appearance() {
        let c = Condition::compile(
            "running_requests >= fact.max_num_seqs * 0.9 or queue_depth > 1 \
             and running_requests > fact.max_num_seqs or known(slo.ttft_p99_seconds)",
            &scope(),
        )
        .unwrap();
        assert_eq!(
            c.slots(),
            &[
                Slot::Signal(3),
                Slot::Fact(2),
                Slot::Signal(0),
                Slot::Slo(0)
            ]
        );
        let c = Condition::compile("true", &scope()).unwrap();
        assert!(c.slots().is_empty());
    }

    fn simple(src: &str) -> Option<SimpleComparison> {
        Condition::compile(src, &scope())
            .unwrap()
            .simple_comparison()
    }

    #[test]
    fn simple_comparison_shapes() {
        assert_eq!(
            simple("kv_cache_usage_ratio > 95%"),
            Some(SimpleComparison {
                slot: Slot::Signal(1),
                op: ">",
                threshold: Threshold::Number(0.95)
            })
        );
        assert_eq!(
            simple("0.5 < queue_depth"),
            Some(SimpleComparison {
                slot: Slot::Signal(0),
                op: ">",
                threshold: Threshold::Number(0.5)
            })
        );
        assert_eq!(
            simple("10 >= queue_depth"),
            Some(SimpleComparison {
                slot: Slot::Signal(0),
                op: "<=",
                threshold: Threshold::Number(10.0)
            })
        );
        assert_eq!(
            simple("ttft_p99_seconds > slo.ttft_p99_seconds"),
            Some(SimpleComparison {
                slot: Slot::Signal(10),
                op: ">",
                threshold: Threshold::Slot(Slot::Slo(0))
            })
        );
        assert_eq!(
            simple("slo.ttft_p99_seconds <= ttft_p99_seconds"),
            Some(SimpleComparison {
                slot: Slot::Signal(10),
                op: ">=",
                threshold: Threshold::Slot(Slot::Slo(0))
            })
        );
        assert_eq!(
            simple("(queue_depth == -2 * 60)"),
            Some(SimpleComparison {
                slot: Slot::Signal(0),
                op: "==",
                threshold: Threshold::Number(-120.0)
            })
        );
        assert_eq!(
            simple("queue_time_mean_seconds > 500ms"),
            Some(SimpleComparison {
                slot: Slot::Signal(7),
                op: ">",
                threshold: Threshold::Number(0.5)
            })
        );
        assert_eq!(simple("queue_depth > 1 and queue_depth < 5"), None);
        assert_eq!(simple("queue_depth > running_requests"), None);
        assert_eq!(simple("queue_depth + 1 > 5"), None);
        assert_eq!(simple("fact.engine == \"vllm\""), None);
        assert_eq!(simple("not queue_depth > 5"), None);
        assert_eq!(simple("max_over_time(queue_depth) > 5"), None);
        let n = Condition::compile_number("queue_depth", &scope()).unwrap();
        assert_eq!(n.simple_comparison(), None);
    }

    #[test]
    fn threshold_lines_are_the_top_level_conjuncts_valued() {
        struct Slos;
        impl Env for Slos {
            fn get(&self, slot: Slot) -> Option<Input<'_>> {
                match slot {
                    Slot::Slo(0) => Some(Input::Number(2.0)),
                    Slot::Signal(_) => Some(Input::Number(1.0)),
                    _ => None,
                }
            }
            fn stats(&self, _: Slot) -> Option<WindowStats> {
                None
            }
        }
        let c = Condition::compile(
            "max_over_time(kv_cache_usage_ratio) > 95% and (queue_depth > 1 or queue_depth < 0) and 4 * slo.ttft_p99_seconds < ttft_p99_seconds and queue_depth > running_requests and not queue_depth > 5",
            &scope(),
        )
        .unwrap();
        let lines: Vec<(Slot, &str, f64, Option<Slot>)> = c
            .threshold_lines(&Slos)
            .iter()
            .map(|l| (l.signal, l.op, l.value, l.slot))
            .collect();
        assert_eq!(
            lines,
            vec![
                (Slot::Signal(1), ">", 0.95, None),
                (Slot::Signal(10), ">", 8.0, None),
            ]
        );
        let c = Condition::compile("ttft_p99_seconds > slo.ttft_p99_seconds", &scope()).unwrap();
        assert_eq!(c.threshold_lines(&Slos)[0].slot, Some(Slot::Slo(0)));
        let c = Condition::compile("queue_depth > 1 or queue_depth < 0", &scope()).unwrap();
        assert!(c.threshold_lines(&Slos).is_empty());
    }

    #[test]
    fn eval_returns_value_and_helpers_agree() {
        let env = testutil::env();
        let c = Condition::compile("queue_depth > 10", &scope()).unwrap();
        assert_eq!(c.eval(&env), Value::Bool(true));
        assert_eq!(c.eval_bool(&env), Some(true));
        assert_eq!(c.eval_number(&env), None);
        let n = Condition::compile_number("queue_time_mean_seconds / ttft_mean_seconds", &scope())
            .unwrap();
        assert_eq!(n.eval(&env), Value::Number(0.6));
        assert_eq!(n.eval_number(&env), Some(0.6));
        assert_eq!(n.eval_bool(&env), None);
        let u = Condition::compile_number("queue_depth / zero_signal", &scope()).unwrap();
        assert_eq!(u.eval(&env), Value::Unknown);
    }

    #[test]
    fn compile_number_rejects_conditions_and_compile_rejects_numbers() {
        let errs = Condition::compile_number("queue_depth > 1", &scope()).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].kind, ErrorKind::Type);
        assert_eq!(
            errs[0].message,
            "expression must be a number, this is a boolean"
        );
        let errs = Condition::compile("queue_depth + 1", &scope()).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].message,
            "condition must be true or false, this is a number"
        );
        assert_eq!(errs[0].span, 0..15);
        assert_eq!(
            errs[0].help.as_deref(),
            Some("compare it with something, e.g. `queue_depth + 1 > 0`")
        );
        let errs = Condition::compile("fact.engine", &scope()).unwrap_err();
        assert_eq!(
            errs[0].message,
            "condition must be true or false, this is a string"
        );
    }

    #[test]
    fn all_errors_in_one_pass() {
        let src = "queue_dept > 10 and kv_cache_usag > 0.9 and fact.enginee == \"vllm\"";
        let errs = Condition::compile(src, &scope()).unwrap_err();
        let messages: Vec<_> = errs.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "unknown signal `queue_dept`",
                "unknown signal `kv_cache_usag`",
                "unknown fact `fact.enginee`",
            ]
        );
        assert_eq!(errs[0].help.as_deref(), Some("did you mean `queue_depth`?"));
        assert_eq!(
            errs[1].help.as_deref(),
            Some("did you mean `kv_cache_usage_ratio`?")
        );
        assert_eq!(errs[2].help.as_deref(), Some("did you mean `fact.engine`?"));
        assert_eq!(&src[errs[2].span.clone()], "fact.enginee");
    }

    #[test]
    fn mixed_error_kinds_in_one_pass_are_sorted_by_position() {
        let src = "queue_dept > 5kb or mean(queue_depth) > 1 or fact.engine < 3 or abs(1, 2) > 0 @";
        let errs = Condition::compile(src, &scope()).unwrap_err();
        let kinds: Vec<_> = errs.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                ErrorKind::UnknownName,
                ErrorKind::UnknownUnit,
                ErrorKind::UnknownFunction,
                ErrorKind::Type,
                ErrorKind::Arity,
                ErrorKind::Lex,
            ]
        );
    }

    #[test]
    fn playbook_examples_compile() {
        for (src, want) in [
            (
                "kv_cache_usage_ratio > 95% and preemptions_per_second > 0",
                True,
            ),
            ("ttft_p99_seconds > slo.ttft_p99_seconds", True),
            ("fact.enforce_eager == true", True),
            ("queue_time_mean_seconds / ttft_mean_seconds > 0.5", True),
            ("max_over_time(queue_depth) >= 10", True),
            (
                "not known(fact.max_num_seqs) or running_requests >= fact.max_num_seqs * 0.9",
                False,
            ),
        ] {
            give(src, want);
        }
    }
}
