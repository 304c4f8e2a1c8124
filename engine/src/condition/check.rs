//! Name resolution and type checking: from the AST to the typed tree of `eval`.
//!
//! The checker visits the whole tree even after a mistake, so every unknown
//! name and every type error is reported in one pass. A subtree with an error
//! has the "error" type, which is accepted everywhere without further
//! messages, so one mistake is reported once.

use crate::suggest::did_you_mean;
use std::ops::Range;

use super::error::{ConditionError, ErrorKind};
use super::eval::{AnyExpr, ArithOp, BoolExpr, CmpOp, NumExpr, Root, Stat, StrExpr, UnaryFn};
use super::parser::{BinOp, Expr, ExprKind};
use super::types::{Mode, Scope, Slot, Type};

/// The functions of the language, sorted, for messages.
const FUNCTIONS: [&str; 8] = [
    "abs",
    "avg_over_time",
    "ceil",
    "known",
    "max",
    "max_over_time",
    "min",
    "min_over_time",
];

/// A checked subtree.
#[derive(Debug)]
pub(crate) enum Typed {
    Num(NumExpr),
    Str(StrExpr),
    Bool(BoolExpr),
    /// Something already reported.
    Error,
}

impl Typed {
    /// The type as a noun phrase for messages; None for the error type.
    fn noun(&self) -> Option<&'static str> {
        match self {
            Typed::Num(_) => Some("a number"),
            Typed::Str(_) => Some("a string"),
            Typed::Bool(_) => Some("a boolean"),
            Typed::Error => None,
        }
    }
}

/// Resolves names and checks types, collecting errors and slots.
pub(crate) struct Checker<'s> {
    src: &'s str,
    scope: &'s dyn Scope,
    errors: Vec<ConditionError>,
    slots: Vec<Slot>,
    names: Option<Vec<String>>,
}

impl<'s> Checker<'s> {
    pub(crate) fn new(src: &'s str, scope: &'s dyn Scope) -> Self {
        Checker {
            src,
            scope,
            errors: Vec::new(),
            slots: Vec::new(),
            names: None,
        }
    }

    /// The slots read (deduplicated, in order of first appearance) and the errors found.
    pub(crate) fn into_parts(self) -> (Vec<Slot>, Vec<ConditionError>) {
        (self.slots, self.errors)
    }

    /// Checks that the whole expression has the type `mode` asks for.
    pub(crate) fn finish(&mut self, typed: Typed, ast: &Expr, mode: Mode) -> Option<Root> {
        match (mode, typed) {
            (Mode::Condition, Typed::Bool(b)) => Some(Root::Bool(b)),
            (Mode::Number, Typed::Num(n)) => Some(Root::Number(n)),
            (_, Typed::Error) => None,
            (mode, other) => {
                let noun = other.noun().unwrap_or("something else");
                let (message, help) = match mode {
                    Mode::Condition => (
                        format!("condition must be true or false, this is {noun}"),
                        matches!(other, Typed::Num(_)).then(|| {
                            let text = self.src[ast.span.clone()].trim();
                            format!("compare it with something, e.g. `{text} > 0`")
                        }),
                    ),
                    Mode::Number => (format!("expression must be a number, this is {noun}"), None),
                };
                let mut e = ConditionError::new(ErrorKind::Type, message, ast.span.clone());
                e.help = help;
                self.errors.push(e);
                None
            }
        }
    }

    fn error(
        &mut self,
        kind: ErrorKind,
        message: String,
        span: Range<usize>,
    ) -> &mut ConditionError {
        self.errors.push(ConditionError::new(kind, message, span));
        let last = self.errors.len() - 1;
        &mut self.errors[last]
    }

    /// How an expression is quoted in messages: its source text, or "this
    /// expression" when that is long.
    fn quote(&self, e: &Expr) -> String {
        let text = self.src[e.span.clone()].trim();
        if text.chars().count() <= 40 && !text.contains('\n') {
            format!("`{text}`")
        } else {
            "this expression".to_owned()
        }
    }

    fn use_slot(&mut self, slot: Slot) {
        if !self.slots.contains(&slot) {
            self.slots.push(slot);
        }
    }

    /// Checks a subtree.
    pub(crate) fn check(&mut self, e: &Expr) -> Typed {
        match &e.kind {
            ExprKind::Number(v) => Typed::Num(NumExpr::Const(*v)),
            ExprKind::Str(s) => Typed::Str(StrExpr::Const(s.as_str().into())),
            ExprKind::Bool(b) => Typed::Bool(BoolExpr::Const(*b)),
            ExprKind::Name => self.name(e.span.clone()),
            ExprKind::Paren(inner) => self.check(inner),
            ExprKind::Neg(x) => match self.check(x) {
                Typed::Num(NumExpr::Const(v)) => Typed::Num(NumExpr::Const(-v)),
                Typed::Num(n) => Typed::Num(NumExpr::Neg(Box::new(n))),
                Typed::Error => Typed::Error,
                other => {
                    self.operand_error("`-` negates numbers", x, &other);
                    Typed::Error
                }
            },
            ExprKind::Not(x) => match self.check(x) {
                Typed::Bool(BoolExpr::Const(b)) => Typed::Bool(BoolExpr::Const(!b)),
                Typed::Bool(b) => Typed::Bool(BoolExpr::Not(Box::new(b))),
                Typed::Error => Typed::Error,
                other => {
                    self.operand_error("`not` negates a condition (true or false)", x, &other);
                    Typed::Error
                }
            },
            ExprKind::Binary(op, l, r) => self.binary(e, *op, l, r),
            ExprKind::Call { name, args } => self.call(e, name.clone(), args),
            ExprKind::Error(parts) => {
                for part in parts {
                    self.check(part);
                }
                Typed::Error
            }
        }
    }

    /// Reports that `operand` has the wrong type for `what` ("`-` negates numbers").
    fn operand_error(&mut self, what: &str, operand: &Expr, typed: &Typed) {
        let Some(noun) = typed.noun() else { return };
        let message = format!("{what}, but {} is {noun}", self.quote(operand));
        let suggest_comparison = matches!(typed, Typed::Num(_)) && what.contains("condition");
        let text = self.src[operand.span.clone()].trim().to_owned();
        let e = self.error(ErrorKind::Type, message, operand.span.clone());
        if suggest_comparison {
            e.help = Some(format!("compare it with something, e.g. `{text} > 0`"));
        }
    }

    fn name(&mut self, span: Range<usize>) -> Typed {
        let src = self.src;
        let name = &src[span.clone()];
        match self.scope.resolve(name) {
            Some((slot, ty)) => {
                self.use_slot(slot);
                match ty {
                    Type::Number => Typed::Num(NumExpr::Load(slot)),
                    Type::String => Typed::Str(StrExpr::Load(slot)),
                    Type::Bool => Typed::Bool(BoolExpr::Load(slot)),
                }
            }
            None => {
                let what = if name.starts_with("fact.") {
                    "fact"
                } else if name.starts_with("slo.") {
                    "SLO"
                } else {
                    "signal"
                };
                let names = self.names.get_or_insert_with(|| self.scope.names());
                let help = did_you_mean(name, names.iter().map(String::as_str))
                    .map(|s| format!("did you mean `{s}`?"));
                let message = format!("unknown {what} `{name}`");
                self.error(ErrorKind::UnknownName, message, span).help = help;
                Typed::Error
            }
        }
    }

    // Long on purpose: one arm per operator family, each with its type rule and its message.
    fn binary(&mut self, whole: &Expr, op: BinOp, l: &Expr, r: &Expr) -> Typed {
        let a = self.check(l);
        let b = self.check(r);
        match op {
            BinOp::And | BinOp::Or => {
                let what = format!("`{}` combines conditions (true or false)", op.text());
                match (a, b) {
                    (Typed::Bool(a), Typed::Bool(b)) => {
                        let (a, b) = (Box::new(a), Box::new(b));
                        Typed::Bool(if op == BinOp::And {
                            BoolExpr::And(a, b)
                        } else {
                            BoolExpr::Or(a, b)
                        })
                    }
                    (a, b) => {
                        for (typed, e) in [(&a, l), (&b, r)] {
                            if !matches!(typed, Typed::Bool(_)) {
                                self.operand_error(&what, e, typed);
                            }
                        }
                        Typed::Error
                    }
                }
            }
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => {
                let (arith, what) = match op {
                    BinOp::Add => (ArithOp::Add, "`+` adds numbers"),
                    BinOp::Sub => (ArithOp::Sub, "`-` subtracts numbers"),
                    BinOp::Mul => (ArithOp::Mul, "`*` multiplies numbers"),
                    _ => (ArithOp::Div, "`/` divides numbers"),
                };
                match (a, b) {
                    (Typed::Num(NumExpr::Const(x)), Typed::Num(NumExpr::Const(y)))
                        if arith.apply(x, y).is_finite() =>
                    {
                        Typed::Num(NumExpr::Const(arith.apply(x, y)))
                    }
                    (Typed::Num(a), Typed::Num(b)) => {
                        Typed::Num(NumExpr::Arith(arith, Box::new(a), Box::new(b)))
                    }
                    (a, b) => {
                        self.numbers_expected(what, [(&a, l), (&b, r)]);
                        Typed::Error
                    }
                }
            }
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let cmp = match op {
                    BinOp::Lt => CmpOp::Lt,
                    BinOp::Le => CmpOp::Le,
                    BinOp::Gt => CmpOp::Gt,
                    _ => CmpOp::Ge,
                };
                match (a, b) {
                    (Typed::Num(a), Typed::Num(b)) => Typed::Bool(BoolExpr::CmpNum(cmp, a, b)),
                    (a, b) => {
                        let what = format!("`{}` compares numbers", op.text());
                        self.numbers_expected(&what, [(&a, l), (&b, r)]);
                        Typed::Error
                    }
                }
            }
            BinOp::Eq | BinOp::Ne => {
                let negated = op == BinOp::Ne;
                let cmp = if negated { CmpOp::Ne } else { CmpOp::Eq };
                match (a, b) {
                    (Typed::Num(a), Typed::Num(b)) => Typed::Bool(BoolExpr::CmpNum(cmp, a, b)),
                    (Typed::Str(a), Typed::Str(b)) => Typed::Bool(BoolExpr::EqStr(negated, a, b)),
                    (Typed::Bool(a), Typed::Bool(b)) => {
                        Typed::Bool(BoolExpr::EqBool(negated, Box::new(a), Box::new(b)))
                    }
                    (Typed::Error, other) | (other, Typed::Error) => {
                        if matches!(other, Typed::Str(_)) {
                            self.suggest_quotes(l);
                            self.suggest_quotes(r);
                        }
                        Typed::Error
                    }
                    (a, b) => {
                        let message = format!(
                            "`{}` compares values of the same type, but {} is {} and {} is {}",
                            op.text(),
                            self.quote(l),
                            a.noun().unwrap_or_default(),
                            self.quote(r),
                            b.noun().unwrap_or_default(),
                        );
                        self.error(ErrorKind::Type, message, whole.span.clone());
                        Typed::Error
                    }
                }
            }
        }
    }

    /// Reports each operand that is not a number.
    fn numbers_expected(&mut self, what: &str, operands: [(&Typed, &Expr); 2]) {
        for (typed, e) in operands {
            if !matches!(typed, Typed::Num(_)) {
                self.operand_error(what, e, typed);
            }
        }
    }

    /// When `e` is an unknown bare name compared with a string and no
    /// spelling suggestion was found, suggests quoting it.
    fn suggest_quotes(&mut self, e: &Expr) {
        if e.kind != ExprKind::Name {
            return;
        }
        let src = self.src;
        let text = &src[e.span.clone()];
        if let Some(err) = self
            .errors
            .iter_mut()
            .find(|err| err.kind == ErrorKind::UnknownName && err.span == e.span)
        {
            if err.help.is_none() {
                err.help = Some(format!("to compare with text, quote it: `\"{text}\"`"));
            }
        }
    }

    // Long on purpose: every function's arity and typing in one match, with the help for an
    // unknown or misspelt function.
    fn call(&mut self, whole: &Expr, name: Range<usize>, args: &[Expr]) -> Typed {
        let src = self.src;
        let function = &src[name.clone()];
        let (min, max) = match function {
            "min" | "max" => (2, usize::MAX),
            "abs" | "ceil" | "avg_over_time" | "max_over_time" | "min_over_time" | "known" => {
                (1, 1)
            }
            _ => {
                let message = format!(
                    "unknown function `{function}` (functions: {})",
                    FUNCTIONS.join(", ")
                );
                let alias = match function {
                    "mean" | "avg" | "average" => Some("avg_over_time"),
                    "maximum" | "peak" => Some("max_over_time"),
                    "minimum" => Some("min_over_time"),
                    _ => None,
                };
                let help = alias
                    .or_else(|| did_you_mean(function, FUNCTIONS.iter().copied()))
                    .map(|s| format!("did you mean `{s}`?"));
                self.error(ErrorKind::UnknownFunction, message, name).help = help;
                for arg in args {
                    self.check(arg);
                }
                return Typed::Error;
            }
        };
        if args.len() < min || args.len() > max {
            let expected = if max == usize::MAX {
                format!("at least {min} arguments")
            } else if min == 1 {
                "1 argument".to_owned()
            } else {
                format!("{min} arguments")
            };
            let given = match args.len() {
                0 => "none was given".to_owned(),
                1 => "1 was given".to_owned(),
                n => format!("{n} were given"),
            };
            let message = format!("`{function}` takes {expected}, but {given}");
            self.error(ErrorKind::Arity, message, whole.span.clone());
            for arg in args {
                self.check(arg);
            }
            return Typed::Error;
        }
        if let Some(f) = UnaryFn::named(function) {
            return match self.check(&args[0]) {
                Typed::Num(NumExpr::Const(v)) => Typed::Num(NumExpr::Const(f.apply(v))),
                Typed::Num(n) => Typed::Num(NumExpr::Unary(f, Box::new(n))),
                other => {
                    let what = format!("`{function}` takes a number");
                    self.operand_error(&what, &args[0], &other);
                    Typed::Error
                }
            };
        }
        match function {
            "min" | "max" => {
                let mut checked = Vec::with_capacity(args.len());
                let mut ok = true;
                for arg in args {
                    match self.check(arg) {
                        Typed::Num(n) => checked.push(n),
                        other => {
                            let what = format!("`{function}` takes numbers");
                            self.operand_error(&what, arg, &other);
                            ok = false;
                        }
                    }
                }
                if !ok {
                    return Typed::Error;
                }
                Typed::Num(NumExpr::MinMax(function == "max", checked.into()))
            }
            "known" => match self.check(&args[0]) {
                Typed::Num(n) => Typed::Bool(BoolExpr::Known(Box::new(AnyExpr::Num(n)))),
                Typed::Str(s) => Typed::Bool(BoolExpr::Known(Box::new(AnyExpr::Str(s)))),
                Typed::Bool(b) => Typed::Bool(BoolExpr::Known(Box::new(AnyExpr::Bool(b)))),
                Typed::Error => Typed::Error,
            },
            _ => {
                let stat = match function {
                    "avg_over_time" => Stat::Avg,
                    "max_over_time" => Stat::Max,
                    _ => Stat::Min,
                };
                let arg = &args[0];
                let typed = self.check(arg);
                match (typed, &arg.kind) {
                    (Typed::Num(NumExpr::Load(slot @ Slot::Signal(_))), ExprKind::Name) => {
                        Typed::Num(NumExpr::OverTime(stat, slot))
                    }
                    (Typed::Error, _) => Typed::Error,
                    (typed, kind) => {
                        let what = match (kind, typed) {
                            (ExprKind::Name, Typed::Num(NumExpr::Load(Slot::Fact(_)))) => {
                                "a fact".to_owned()
                            }
                            (ExprKind::Name, Typed::Num(NumExpr::Load(Slot::Slo(_)))) => {
                                "an SLO".to_owned()
                            }
                            (ExprKind::Name, typed) => typed.noun().unwrap_or_default().to_owned(),
                            _ => "an expression".to_owned(),
                        };
                        let message = format!(
                            "`{function}` expects a signal name, but {} is {what}",
                            self.quote(arg)
                        );
                        self.error(ErrorKind::Type, message, arg.span.clone()).help =
                            Some(format!("write e.g. `{function}(queue_depth)`"));
                        Typed::Error
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::scope;
    use super::super::{Condition, ConditionError, ErrorKind};
    use super::*;
    use crate::suggest::levenshtein;

    fn errors(src: &str) -> Vec<ConditionError> {
        match Condition::compile(src, &scope()) {
            Ok(_) => panic!("`{src}` compiled"),
            Err(errors) => errors,
        }
    }

    /// The single error of `src`: kind, message, the quoted span, help.
    fn one(src: &str) -> (ErrorKind, String, String, Option<String>) {
        let errs = errors(src);
        assert_eq!(errs.len(), 1, "{src}: {errs:#?}");
        let e = errs.into_iter().next().unwrap();
        let quoted = src[e.span.clone()].to_owned();
        (e.kind, e.message, quoted, e.help)
    }

    #[test]
    fn levenshtein_distances() {
        assert_eq!(levenshtein("", ""), 0);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("abc", ""), 3);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("queue_dept", "queue_depth"), 1);
        assert_eq!(levenshtein("flaw", "lawn"), 2);
        assert_eq!(levenshtein("é", "e"), 1);
    }

    #[test]
    fn suggestions() {
        let names = [
            "queue_depth",
            "queue_time_mean_seconds",
            "fact.engine",
            "kv_cache_usage_ratio",
        ];
        let dym = |n: &str| did_you_mean(n, names.iter().copied());
        assert_eq!(dym("queue_dept"), Some("queue_depth"));
        assert_eq!(dym("queue_deptth"), Some("queue_depth"));
        assert_eq!(dym("engine"), Some("fact.engine"));
        assert_eq!(dym("kv_cache_usage"), Some("kv_cache_usage_ratio"));
        assert_eq!(dym("queue"), Some("queue_depth"));
        assert_eq!(dym("zzz"), None);
        assert_eq!(dym("q"), None);
        assert_eq!(dym("queue_depth"), None);
    }

    #[test]
    fn unknown_names_by_namespace() {
        assert_eq!(
            one("queue_dept > 10"),
            (
                ErrorKind::UnknownName,
                "unknown signal `queue_dept`".into(),
                "queue_dept".into(),
                Some("did you mean `queue_depth`?".into())
            )
        );
        let (_, message, quoted, help) = one("fact.enginee == \"vllm\"");
        assert_eq!(message, "unknown fact `fact.enginee`");
        assert_eq!(quoted, "fact.enginee");
        assert_eq!(help.as_deref(), Some("did you mean `fact.engine`?"));
        let (_, message, _, help) = one("ttft_p99 > slo.ttft_p99_seconds");
        assert_eq!(message, "unknown signal `ttft_p99`");
        assert_eq!(help.as_deref(), Some("did you mean `ttft_p99_seconds`?"));
        let errs = errors("slo.ttft_p99 > 1");
        assert_eq!(errs[0].message, "unknown SLO `slo.ttft_p99`");
        assert_eq!(
            errs[0].help.as_deref(),
            Some("did you mean `slo.ttft_p99_seconds`?")
        );
        let (_, message, _, help) = one("xyzzy > 1");
        assert_eq!(message, "unknown signal `xyzzy`");
        assert_eq!(help, None);
    }

    #[test]
    fn every_unknown_name_is_reported_even_in_broken_input() {
        let errs = errors("bogus1 > 1 bogus2 > ) and mean(bogus3) > 1 and abs(bogus4, 1) > 0");
        let names: Vec<_> = errs
            .iter()
            .filter(|e| e.kind == ErrorKind::UnknownName)
            .map(|e| e.message.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "unknown signal `bogus1`",
                "unknown signal `bogus2`",
                "unknown signal `bogus3`",
                "unknown signal `bogus4`"
            ]
        );
    }

    #[test]
    fn unquoted_text_compared_with_a_string_gets_a_hint() {
        let (_, message, _, help) = one("fact.engine == vllm");
        assert_eq!(message, "unknown signal `vllm`");
        assert_eq!(
            help.as_deref(),
            Some("to compare with text, quote it: `\"vllm\"`")
        );
        let (_, _, _, help) = one("sglang != fact.engine");
        assert_eq!(
            help.as_deref(),
            Some("to compare with text, quote it: `\"sglang\"`")
        );
    }

    #[test]
    // Long on purpose: a table of cases, one per type error.
    fn type_errors() {
        let cases = [
            (
                "fact.engine < 3",
                "`<` compares numbers, but `fact.engine` is a string",
                "fact.engine",
            ),
            (
                "1 >= fact.enforce_eager",
                "`>=` compares numbers, but `fact.enforce_eager` is a boolean",
                "fact.enforce_eager",
            ),
            (
                "fact.engine + 1 > 0",
                "`+` adds numbers, but `fact.engine` is a string",
                "fact.engine",
            ),
            (
                "queue_depth - true > 0",
                "`-` subtracts numbers, but `true` is a boolean",
                "true",
            ),
            (
                "queue_depth * \"x\" > 0",
                "`*` multiplies numbers, but `\"x\"` is a string",
                "\"x\"",
            ),
            (
                "1 / (queue_depth > 1) > 0",
                "`/` divides numbers, but `(queue_depth > 1)` is a boolean",
                "(queue_depth > 1)",
            ),
            (
                "-fact.engine > 0",
                "`-` negates numbers, but `fact.engine` is a string",
                "fact.engine",
            ),
            (
                "not fact.engine",
                "`not` negates a condition (true or false), but `fact.engine` is a string",
                "fact.engine",
            ),
            (
                "fact.engine == 5",
                "`==` compares values of the same type, but `fact.engine` is a string and `5` is a number",
                "fact.engine == 5",
            ),
            (
                "fact.enforce_eager != \"true\"",
                "`!=` compares values of the same type, but `fact.enforce_eager` is a boolean and `\"true\"` is a string",
                "fact.enforce_eager != \"true\"",
            ),
            (
                "abs(fact.engine) > 1",
                "`abs` takes a number, but `fact.engine` is a string",
                "fact.engine",
            ),
            (
                "max(1, fact.enforce_eager) > 1",
                "`max` takes numbers, but `fact.enforce_eager` is a boolean",
                "fact.enforce_eager",
            ),
            (
                "avg_over_time(queue_depth * 2) > 1",
                "`avg_over_time` expects a signal name, but `queue_depth * 2` is an expression",
                "queue_depth * 2",
            ),
            (
                "max_over_time(fact.max_num_seqs) > 1",
                "`max_over_time` expects a signal name, but `fact.max_num_seqs` is a fact",
                "fact.max_num_seqs",
            ),
            (
                "min_over_time(slo.ttft_p99_seconds) > 1",
                "`min_over_time` expects a signal name, but `slo.ttft_p99_seconds` is an SLO",
                "slo.ttft_p99_seconds",
            ),
            (
                "min_over_time(fact.engine) == \"x\"",
                "`min_over_time` expects a signal name, but `fact.engine` is a string",
                "fact.engine",
            ),
            (
                "max_over_time(3) > 1",
                "`max_over_time` expects a signal name, but `3` is an expression",
                "3",
            ),
            (
                "queue_depth",
                "condition must be true or false, this is a number",
                "queue_depth",
            ),
        ];
        for (src, message, quoted) in cases {
            let (kind, got, got_quoted, _) = one(src);
            assert_eq!(kind, ErrorKind::Type, "{src}");
            assert_eq!(got, message, "{src}");
            assert_eq!(got_quoted, quoted, "{src}");
        }
    }

    #[test]
    fn and_or_operands_must_be_conditions() {
        let (kind, message, quoted, help) = one("queue_depth and true");
        assert_eq!(kind, ErrorKind::Type);
        assert_eq!(
            message,
            "`and` combines conditions (true or false), but `queue_depth` is a number"
        );
        assert_eq!(quoted, "queue_depth");
        assert_eq!(
            help.as_deref(),
            Some("compare it with something, e.g. `queue_depth > 0`")
        );
        let errs = errors("1 or \"x\"");
        assert_eq!(errs.len(), 2);
        assert_eq!(
            errs[1].message,
            "`or` combines conditions (true or false), but `\"x\"` is a string"
        );
        assert_eq!(errs[1].help, None);
    }

    #[test]
    fn long_operands_are_not_quoted() {
        let src = "fact.engine + (queue_depth + queue_depth + queue_depth + 1) > 0";
        let errs = errors(src);
        assert_eq!(
            errs[0].message,
            "`+` adds numbers, but `fact.engine` is a string"
        );
        let src = "not (queue_depth + queue_depth + queue_depth + queue_depth + 1)";
        let (_, message, _, _) = one(src);
        assert_eq!(
            message,
            "`not` negates a condition (true or false), but this expression is a number"
        );
    }

    #[test]
    fn one_mistake_is_reported_once() {
        // The unknown name poisons the comparison and the `and`, silently.
        let (kind, _, _, _) = one("(bogus + 1 > 2) and queue_depth > 1");
        assert_eq!(kind, ErrorKind::UnknownName);
        let (kind, _, _, _) = one("bogus");
        assert_eq!(kind, ErrorKind::UnknownName);
        let (kind, _, _, _) = one("known(bogus)");
        assert_eq!(kind, ErrorKind::UnknownName);
        // A type error inside poisons its parents too.
        let (kind, _, _, _) = one("(fact.engine + 1) * 2 > 0 and true");
        assert_eq!(kind, ErrorKind::Type);
    }

    #[test]
    fn unknown_functions() {
        let (kind, message, quoted, help) = one("mean(queue_depth) > 1");
        assert_eq!(kind, ErrorKind::UnknownFunction);
        assert_eq!(
            message,
            "unknown function `mean` (functions: abs, avg_over_time, ceil, known, max, max_over_time, min, min_over_time)"
        );
        assert_eq!(quoted, "mean");
        assert_eq!(help.as_deref(), Some("did you mean `avg_over_time`?"));
        let (_, _, _, help) = one("median(queue_depth) > 1");
        assert_eq!(help, None);
        let (_, _, _, help) = one("avg_overtime(queue_depth) > 1");
        assert_eq!(help.as_deref(), Some("did you mean `avg_over_time`?"));
        let (_, _, _, help) = one("mx(1, 2) > 1");
        assert_eq!(help.as_deref(), Some("did you mean `max`?"));
        // Arguments of unknown functions are still checked.
        assert_eq!(errors("avg(bogus) > 1").len(), 2);
    }

    #[test]
    fn arity() {
        let cases = [
            (
                "abs() > 1",
                "`abs` takes 1 argument, but none was given",
                "abs()",
            ),
            (
                "abs(1, 2) > 1",
                "`abs` takes 1 argument, but 2 were given",
                "abs(1, 2)",
            ),
            (
                "max(1) > 1",
                "`max` takes at least 2 arguments, but 1 was given",
                "max(1)",
            ),
            (
                "min() > 1",
                "`min` takes at least 2 arguments, but none was given",
                "min()",
            ),
            (
                "known()",
                "`known` takes 1 argument, but none was given",
                "known()",
            ),
            (
                "avg_over_time(queue_depth, running_requests) > 1",
                "`avg_over_time` takes 1 argument, but 2 were given",
                "avg_over_time(queue_depth, running_requests)",
            ),
        ];
        for (src, message, quoted) in cases {
            let (kind, got, got_quoted, _) = one(src);
            assert_eq!(kind, ErrorKind::Arity, "{src}");
            assert_eq!(got, message, "{src}");
            assert_eq!(got_quoted, quoted, "{src}");
        }
    }

    #[test]
    fn constant_folding() {
        let c = Condition::compile("queue_depth > -(2 * 60) + abs(-3)", &scope()).unwrap();
        assert_eq!(
            c.simple_comparison().map(|s| s.threshold),
            Some(super::super::Threshold::Number(-117.0))
        );
        // Non-finite constant results are not folded; they evaluate to unknown.
        let c = Condition::compile("queue_depth > 1 / 0", &scope()).unwrap();
        assert_eq!(c.simple_comparison(), None);
    }
}
