//! The compiled, typed expression tree and its evaluator.
//!
//! The checker produces one tree per type (numbers, strings, booleans), so
//! evaluation needs no type tests: numbers evaluate to `Option<f64>` (None is
//! unknown, and every `Some` is finite), booleans to `Option<bool>` with
//! Kleene logic, strings to `Option<&str>`. Names were replaced by [`Slot`]s;
//! nothing is looked up by string and nothing is allocated. A condition with
//! three comparisons evaluates in about 20-25 ns in a release build.

use super::types::{Env, Input, Slot};

/// A number-valued expression.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NumExpr {
    /// A finite constant.
    Const(f64),
    Load(Slot),
    Neg(Box<NumExpr>),
    /// A function of one number (`abs`, `ceil`).
    Unary(UnaryFn, Box<NumExpr>),
    Arith(ArithOp, Box<NumExpr>, Box<NumExpr>),
    /// `min(...)` (false) or `max(...)` (true) over at least two arguments.
    MinMax(bool, Box<[NumExpr]>),
    /// A `*_over_time` function of a signal.
    OverTime(Stat, Slot),
}

/// A string-valued expression.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum StrExpr {
    Const(Box<str>),
    Load(Slot),
}

/// A boolean-valued expression.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum BoolExpr {
    Const(bool),
    Load(Slot),
    Not(Box<BoolExpr>),
    And(Box<BoolExpr>, Box<BoolExpr>),
    Or(Box<BoolExpr>, Box<BoolExpr>),
    /// A comparison of numbers (including `==` and `!=`).
    CmpNum(CmpOp, NumExpr, NumExpr),
    /// `==` (false) or `!=` (true) on strings.
    EqStr(bool, StrExpr, StrExpr),
    /// `==` (false) or `!=` (true) on booleans.
    EqBool(bool, Box<BoolExpr>, Box<BoolExpr>),
    /// `known(x)`.
    Known(Box<AnyExpr>),
}

/// An expression of any type, the argument of `known`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum AnyExpr {
    Num(NumExpr),
    Str(StrExpr),
    Bool(BoolExpr),
}

/// An arithmetic operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl ArithOp {
    pub(crate) fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            ArithOp::Add => a + b,
            ArithOp::Sub => a - b,
            ArithOp::Mul => a * b,
            ArithOp::Div => a / b,
        }
    }
}

/// A function of one number, named as in PromQL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnaryFn {
    Abs,
    /// The smallest integer not below it (rounding up to a unit: `ceil(x / u) * u`).
    Ceil,
}

impl UnaryFn {
    /// The function called `name`, if it is one.
    pub(crate) fn named(name: &str) -> Option<UnaryFn> {
        match name {
            "abs" => Some(UnaryFn::Abs),
            "ceil" => Some(UnaryFn::Ceil),
            _ => None,
        }
    }

    /// Its name in conditions and in PromQL.
    pub(crate) fn name(self) -> &'static str {
        match self {
            UnaryFn::Abs => "abs",
            UnaryFn::Ceil => "ceil",
        }
    }

    pub(crate) fn apply(self, x: f64) -> f64 {
        match self {
            UnaryFn::Abs => x.abs(),
            UnaryFn::Ceil => x.ceil(),
        }
    }
}

/// A comparison operator on numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl CmpOp {
    pub(crate) fn apply(self, a: f64, b: f64) -> bool {
        match self {
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
        }
    }

    /// The operator as written.
    pub(crate) fn text(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        }
    }

    /// The operator with its operands swapped: `a < b` is `b > a`.
    pub(crate) fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            CmpOp::Eq => CmpOp::Eq,
            CmpOp::Ne => CmpOp::Ne,
        }
    }
}

/// Which window statistic a `*_over_time` function reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stat {
    Avg,
    Max,
    Min,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

fn load_number(env: &dyn Env, slot: Slot) -> Option<f64> {
    match env.get(slot) {
        Some(Input::Number(x)) => finite(x),
        _ => None,
    }
}

impl NumExpr {
    /// The value, or None when unknown. Every `Some` is finite.
    pub(crate) fn eval(&self, env: &dyn Env) -> Option<f64> {
        match self {
            NumExpr::Const(v) => Some(*v),
            NumExpr::Load(slot) => load_number(env, *slot),
            NumExpr::Neg(x) => x.eval(env).map(|v| -v),
            NumExpr::Unary(f, x) => x.eval(env).map(|v| f.apply(v)),
            NumExpr::Arith(op, a, b) => {
                let a = a.eval(env)?;
                let b = b.eval(env)?;
                finite(op.apply(a, b))
            }
            NumExpr::MinMax(is_max, args) => {
                let mut acc = args.first()?.eval(env)?;
                for arg in &args[1..] {
                    let v = arg.eval(env)?;
                    acc = if *is_max { acc.max(v) } else { acc.min(v) };
                }
                Some(acc)
            }
            NumExpr::OverTime(stat, slot) => match env.stats(*slot) {
                Some(stats) => finite(match stat {
                    Stat::Avg => stats.mean,
                    Stat::Max => stats.max,
                    Stat::Min => stats.min,
                }),
                None => load_number(env, *slot),
            },
        }
    }
}

impl StrExpr {
    /// The value, or None when unknown.
    pub(crate) fn eval<'a>(&'a self, env: &'a dyn Env) -> Option<&'a str> {
        match self {
            StrExpr::Const(s) => Some(s),
            StrExpr::Load(slot) => match env.get(*slot) {
                Some(Input::Str(s)) => Some(s),
                _ => None,
            },
        }
    }
}

impl BoolExpr {
    /// The value, or None when unknown (Kleene three-valued logic).
    pub(crate) fn eval(&self, env: &dyn Env) -> Option<bool> {
        match self {
            BoolExpr::Const(b) => Some(*b),
            BoolExpr::Load(slot) => match env.get(*slot) {
                Some(Input::Bool(b)) => Some(b),
                _ => None,
            },
            BoolExpr::Not(x) => x.eval(env).map(|b| !b),
            BoolExpr::And(a, b) => match a.eval(env) {
                Some(false) => Some(false),
                a => match (a, b.eval(env)) {
                    (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                },
            },
            BoolExpr::Or(a, b) => match a.eval(env) {
                Some(true) => Some(true),
                a => match (a, b.eval(env)) {
                    (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                },
            },
            BoolExpr::CmpNum(op, a, b) => {
                let a = a.eval(env)?;
                let b = b.eval(env)?;
                Some(op.apply(a, b))
            }
            BoolExpr::EqStr(negated, a, b) => {
                let a = a.eval(env)?;
                let b = b.eval(env)?;
                Some((a == b) != *negated)
            }
            BoolExpr::EqBool(negated, a, b) => {
                let a = a.eval(env)?;
                let b = b.eval(env)?;
                Some((a == b) != *negated)
            }
            BoolExpr::Known(x) => Some(match &**x {
                AnyExpr::Num(n) => n.eval(env).is_some(),
                AnyExpr::Str(s) => s.eval(env).is_some(),
                AnyExpr::Bool(b) => b.eval(env).is_some(),
            }),
        }
    }
}

/// The compiled, typed expression tree.
#[derive(Clone, Debug)]
pub(super) enum Root {
    Bool(BoolExpr),
    Number(NumExpr),
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{env, give, scope, Want::*};
    use super::super::{Condition, Value};
    use super::*;

    #[test]
    fn arithmetic_and_precedence() {
        give("1 + 2 * 3 == 7", True);
        give("(1 + 2) * 3 == 9", True);
        give("10 - 4 - 3 == 3", True);
        give("8 / 4 / 2 == 1", True);
        give("-2 * 3 == -6", True);
        give("- -2 == 2", True);
        give("2 - -2 == 4", True);
        give("1 + 2 > 2 and 3 < 4", True);
        give("not 1 > 2", True);
        give("not 1 > 2 and false", False);
        give("true or true and false", True);
        give("(true or true) and false", False);
        give("false and false or true", True);
        give("1e-3 * 1000 == 1", True);
        give("queue_depth * 2 == 24", True);
        give("neg_signal < 0 and abs(neg_signal) == 3", True);
    }

    #[test]
    fn units() {
        give("500ms == 0.5", True);
        give("250us == 0.00025", True);
        give("2s == 2", True);
        give("1.5m == 90", True);
        give("1h == 3600", True);
        give("90% == 0.9", True);
        give("95% == 0.95", True);
        give("kv_cache_usage_ratio > 95%", True);
        give("queue_time_mean_seconds < 500ms", True);
        give("queue_time_mean_seconds < 250ms", False);
    }

    #[test]
    fn comparisons() {
        give("queue_depth > 11", True);
        give("queue_depth > 12", False);
        give("queue_depth >= 12", True);
        give("queue_depth < 12", False);
        give("queue_depth <= 12", True);
        give("queue_depth == 12", True);
        give("queue_depth != 12", False);
        give("ttft_p99_seconds > slo.ttft_p99_seconds", True);
        give("running_requests >= fact.max_num_seqs * 0.9", False);
        give("running_requests >= fact.max_num_seqs * 0.75", True);
    }

    #[test]
    fn absent_and_non_finite_values_are_unknown() {
        give("absent_signal > 1", Unknown);
        give("absent_signal < 1", Unknown);
        give("absent_signal == absent_signal", Unknown);
        give("nan_signal > 1", Unknown);
        give("nan_signal < 1", Unknown);
        give("nan_signal != nan_signal", Unknown);
        give("inf_signal > 1", Unknown);
        give("-inf_signal < 1", Unknown);
        give("absent_signal + 1 > 0", Unknown);
        give("abs(absent_signal) >= 0", Unknown);
        give("fact.missing > 1", Unknown);
        give("slo.missing > 1", Unknown);
        give("fact.unset_engine == \"vllm\"", Unknown);
        give("fact.unset_flag == true", Unknown);
        give("not fact.unset_flag", Unknown);
    }

    #[test]
    fn division_by_zero_and_overflow_are_unknown() {
        give("queue_depth / zero_signal > 0", Unknown);
        give("queue_depth / zero_signal < 0", Unknown);
        give("zero_signal / zero_signal == 0", Unknown);
        give("1 / 0 > 0", Unknown);
        give("1e300 * 1e300 > 0", Unknown);
        give("queue_depth / zero_signal > 0 or true", True);
        give("queue_depth / 4 == 3", True);
    }

    #[test]
    fn kleene_and_truth_table() {
        let (t, f, u) = ("queue_depth > 1", "queue_depth < 1", "absent_signal > 1");
        let table = [
            (t, t, True),
            (t, f, False),
            (t, u, Unknown),
            (f, t, False),
            (f, f, False),
            (f, u, False),
            (u, t, Unknown),
            (u, f, False),
            (u, u, Unknown),
        ];
        for (a, b, want) in table {
            give(&format!("({a}) and ({b})"), want);
            give(&format!("{a} and {b}"), want);
        }
    }

    #[test]
    fn kleene_or_truth_table() {
        let (t, f, u) = ("queue_depth > 1", "queue_depth < 1", "absent_signal > 1");
        let table = [
            (t, t, True),
            (t, f, True),
            (t, u, True),
            (f, t, True),
            (f, f, False),
            (f, u, Unknown),
            (u, t, True),
            (u, f, Unknown),
            (u, u, Unknown),
        ];
        for (a, b, want) in table {
            give(&format!("({a}) or ({b})"), want);
            give(&format!("{a} or {b}"), want);
        }
    }

    #[test]
    fn kleene_not_truth_table() {
        give("not queue_depth > 1", False);
        give("not queue_depth < 1", True);
        give("not absent_signal > 1", Unknown);
    }

    #[test]
    fn known_is_never_unknown() {
        give("known(queue_depth)", True);
        give("known(absent_signal)", False);
        give("known(nan_signal)", False);
        give("known(inf_signal)", False);
        give("known(fact.engine)", True);
        give("known(fact.unset_engine)", False);
        give("known(fact.enforce_eager)", True);
        give("known(fact.unset_flag)", False);
        give("known(fact.max_num_seqs)", True);
        give("known(slo.ttft_p99_seconds)", True);
        give("known(slo.missing)", False);
        give("known(queue_depth / zero_signal)", False);
        give("known(absent_signal > 1)", False);
        give("known(queue_depth > 1)", True);
        give("known(\"text\")", True);
        give("not known(absent_signal)", True);
        give(
            "not known(fact.max_num_seqs) or running_requests >= fact.max_num_seqs * 0.9",
            False,
        );
        give(
            "not known(fact.missing) or running_requests >= fact.missing * 0.9",
            True,
        );
    }

    #[test]
    fn over_time_functions() {
        // queue_depth has a window: min 2, mean 6, max 20, last 12.
        give("avg_over_time(queue_depth) == 6", True);
        give("max_over_time(queue_depth) == 20", True);
        give("min_over_time(queue_depth) == 2", True);
        give("max_over_time(queue_depth) >= 10", True);
        // Without a window, the plain value is used.
        give("avg_over_time(running_requests) == 200", True);
        give("max_over_time(running_requests) == 200", True);
        give("min_over_time(running_requests) == 200", True);
        give("max_over_time(absent_signal) > 0", Unknown);
        // A window with a NaN statistic is unknown for that statistic only.
        give("max_over_time(kv_cache_usage_ratio) > 0", Unknown);
        give("min_over_time(kv_cache_usage_ratio) == 0.5", True);
    }

    #[test]
    fn min_max_abs() {
        give("min(3, 1, 2) == 1", True);
        give("max(3, 1, 2) == 3", True);
        give("max(queue_depth, running_requests) == 200", True);
        give("min(queue_depth, running_requests) == 12", True);
        give("max(queue_depth, absent_signal) > 0", Unknown);
        give("min(absent_signal, queue_depth) > 0", Unknown);
        give("abs(-2.5) == 2.5", True);
        give("abs(2.5) == 2.5", True);
        // Rounding up to a unit: 320 tokens in 256-token steps is 512.
        give("ceil(640 / 2 / 256) * 256 == 512", True);
        give("ceil(2) == 2", True);
        give("ceil(queue_depth / 256) == 1", True);
        give("ceil(absent_signal) > 0", Unknown);
    }

    #[test]
    fn string_and_bool_equality() {
        give("fact.engine == \"vllm\"", True);
        give("fact.engine != \"vllm\"", False);
        give("fact.engine == \"sglang\"", False);
        give("\"vllm\" == fact.engine", True);
        give("\"a\\\"b\" == \"a\\\"b\"", True);
        give("fact.enforce_eager == true", True);
        give("fact.enforce_eager != true", False);
        give("fact.enforce_eager == false", False);
        give("fact.enforce_eager", True);
        give("not fact.enforce_eager", False);
        give("(queue_depth > 1) == fact.enforce_eager", True);
        give("(queue_depth > 1) != (queue_depth < 1)", True);
        give("true == true", True);
        give("true != false", True);
    }

    #[test]
    fn numbers_evaluate_to_numbers() {
        let env = env();
        let eval = |src: &str| {
            let c = Condition::compile_number(src, &scope()).unwrap();
            match c.eval(&env) {
                Value::Number(x) => Some(x),
                Value::Unknown => None,
                other => panic!("{src}: {other:?}"),
            }
        };
        assert_eq!(
            eval("queue_time_mean_seconds / ttft_mean_seconds"),
            Some(0.6)
        );
        assert_eq!(eval("2s + 500ms"), Some(2.5));
        assert_eq!(eval("queue_depth / zero_signal"), None);
        assert_eq!(eval("nan_signal"), None);
        assert_eq!(eval("max(1, absent_signal)"), None);
        assert_eq!(eval("-queue_depth"), Some(-12.0));
    }

    #[test]
    fn env_values_of_the_wrong_type_are_unknown() {
        // The scope says `fact.engine` is a string; an env that supplies a
        // number for it makes it unknown rather than panicking.
        struct Wrong;
        impl Env for Wrong {
            fn get(&self, slot: Slot) -> Option<Input<'_>> {
                Some(match slot {
                    Slot::Fact(0) => Input::Number(1.0),
                    Slot::Fact(1) => Input::Str("yes"),
                    _ => Input::Bool(true),
                })
            }
            fn stats(&self, _: Slot) -> Option<super::super::WindowStats> {
                None
            }
        }
        let eval = |src: &str| Condition::compile(src, &scope()).unwrap().eval_bool(&Wrong);
        assert_eq!(eval("fact.engine == \"vllm\""), None);
        assert_eq!(eval("fact.enforce_eager"), None);
        assert_eq!(eval("queue_depth > 1"), None);
        assert_eq!(eval("known(queue_depth)"), Some(false));
    }
}
