//! Conditions as PromQL, for alerting rules generated from the playbooks.
//!
//! A condition mixes signals (which Prometheus can compute), facts and SLOs (constants at rule
//! generation time). Export is partial evaluation: facts and SLOs are folded to constants (from
//! an engine's defaults, say), signals become PromQL from the host's compiler, and what cannot be
//! expressed is dropped the way three-valued logic allows: a clause that stays unknown under
//! `and` or `or` is left out, so an alert checks what Prometheus can see. Negation is pushed down
//! to the comparisons (`not (x > 1)` becomes `x <= 1`), since PromQL comparisons filter series.

use super::eval::{AnyExpr, ArithOp, BoolExpr, CmpOp, NumExpr, Root, Stat};
use super::types::{Env, Input, Slot, WindowStats};

/// Which window statistic of a signal a query reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalStat {
    /// The current value.
    Last,
    /// Mean over the window.
    Mean,
    /// Maximum over the window.
    Max,
    /// Minimum over the window.
    Min,
}

/// What the exporter knows.
pub trait PromqlScope {
    /// PromQL computing a signal's statistic, or None when it cannot be computed.
    fn signal(&self, slot: Slot, stat: SignalStat) -> Option<String>;
    /// A signal that is a constant for this engine (llama.cpp never preempts: 0), if it is one.
    fn constant_signal(&self, _slot: Slot) -> Option<f64> {
        None
    }
    /// Facts and SLOs, as constants (None: unknown).
    fn constants(&self) -> &dyn Env;
}

/// The result of exporting a boolean condition.
#[derive(Clone, Debug, PartialEq)]
pub enum Exported {
    /// Always true whatever the metrics say.
    True,
    /// Never true.
    False,
    /// Cannot be expressed.
    Unknown,
    /// A PromQL expression whose result series are the targets where the condition holds.
    Query(String),
    /// The targets where this query has no series: a negated guard written with `known()`
    /// (`not (known(x) and x >= 99%)`), which holds where the guard is false *or unknown*.
    /// Only a conjunction can use it (`p unless q`); alone it is unexportable.
    Unless(String),
}

enum Num {
    Lit(f64),
    Query(String),
    Unknown,
}

/// A number as PromQL text: the shortest form that reads back as the value once folding noise
/// is gone (0.9 + 5% is 0.95, not 0.9500000000000001), keeping `.0` on whole numbers.
fn lit(x: f64) -> String {
    let clean: f64 = format!("{x:.12e}").parse().unwrap_or(x);
    format!("{clean:?}")
}

// Long on purpose: one arm per kind of numeric expression, each compiled to PromQL.
fn num(e: &NumExpr, s: &dyn PromqlScope) -> Num {
    match e {
        NumExpr::Const(c) => Num::Lit(*c),
        NumExpr::Load(slot) => match slot {
            Slot::Signal(_) => match s.constant_signal(*slot) {
                Some(c) => Num::Lit(c),
                None => s
                    .signal(*slot, SignalStat::Last)
                    .map_or(Num::Unknown, Num::Query),
            },
            _ => match s.constants().get(*slot) {
                Some(Input::Number(n)) if n.is_finite() => Num::Lit(n),
                _ => Num::Unknown,
            },
        },
        NumExpr::OverTime(_, slot) if s.constant_signal(*slot).is_some() => {
            s.constant_signal(*slot).map_or(Num::Unknown, Num::Lit)
        }
        NumExpr::OverTime(stat, slot) => {
            let st = match stat {
                Stat::Avg => SignalStat::Mean,
                Stat::Max => SignalStat::Max,
                Stat::Min => SignalStat::Min,
            };
            s.signal(*slot, st).map_or(Num::Unknown, Num::Query)
        }
        NumExpr::Neg(x) => match num(x, s) {
            Num::Lit(v) => Num::Lit(-v),
            Num::Query(q) => Num::Query(format!("-({q})")),
            Num::Unknown => Num::Unknown,
        },
        NumExpr::Unary(f, x) => match num(x, s) {
            Num::Lit(v) => Num::Lit(f.apply(v)),
            Num::Query(q) => Num::Query(format!("{}({q})", f.name())),
            Num::Unknown => Num::Unknown,
        },
        NumExpr::Arith(op, a, b) => {
            let sym = match op {
                ArithOp::Add => "+",
                ArithOp::Sub => "-",
                ArithOp::Mul => "*",
                ArithOp::Div => "/",
            };
            match (num(a, s), num(b, s)) {
                (Num::Lit(x), Num::Lit(y)) => {
                    let v = op.apply(x, y);
                    if v.is_finite() {
                        Num::Lit(v)
                    } else {
                        Num::Unknown
                    }
                }
                (Num::Unknown, _) | (_, Num::Unknown) => Num::Unknown,
                (Num::Query(q), Num::Lit(y)) => Num::Query(format!("({q}) {sym} {}", lit(y))),
                (Num::Lit(x), Num::Query(q)) => Num::Query(format!("{} {sym} ({q})", lit(x))),
                // A zero denominator gives no value, as in the evaluator.
                (Num::Query(p), Num::Query(q)) if *op == ArithOp::Div => {
                    Num::Query(format!("({p}) / (({q}) != 0)"))
                }
                (Num::Query(p), Num::Query(q)) => Num::Query(format!("({p}) {sym} ({q})")),
            }
        }
        NumExpr::MinMax(is_max, args) => {
            let vals: Vec<Num> = args.iter().map(|a| num(a, s)).collect();
            let lits: Option<Vec<f64>> = vals
                .iter()
                .map(|v| match v {
                    Num::Lit(x) => Some(*x),
                    _ => None,
                })
                .collect();
            match lits {
                Some(l) => Num::Lit(if *is_max {
                    l.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                } else {
                    l.iter().copied().fold(f64::INFINITY, f64::min)
                }),
                None => Num::Unknown,
            }
        }
    }
}

fn flip(op: CmpOp, negate: bool) -> CmpOp {
    if !negate {
        return op;
    }
    match op {
        CmpOp::Lt => CmpOp::Ge,
        CmpOp::Le => CmpOp::Gt,
        CmpOp::Gt => CmpOp::Le,
        CmpOp::Ge => CmpOp::Lt,
        CmpOp::Eq => CmpOp::Ne,
        CmpOp::Ne => CmpOp::Eq,
    }
}

fn constant(b: Option<bool>, negate: bool) -> Exported {
    match b {
        Some(v) if v != negate => Exported::True,
        Some(_) => Exported::False,
        None => Exported::Unknown,
    }
}

fn boolean(e: &BoolExpr, s: &dyn PromqlScope, negate: bool) -> Exported {
    match e {
        // `not (known(x) and ...)`: the author says absence leaves the guard unapplied, which is
        // what PromQL's `unless` does with a guard whose series are absent.
        BoolExpr::Not(x) if !negate && is_known_guard(x) => match guard(x, s) {
            Exported::Query(q) => Exported::Unless(q),
            Exported::True => Exported::False,
            Exported::False => Exported::True,
            _ => Exported::Unknown,
        },
        // Under an outer negation the guard holds as written.
        BoolExpr::Not(x) if negate && is_known_guard(x) => guard(x, s),
        BoolExpr::Not(x) => boolean(x, s, !negate),
        // De Morgan: under negation `and` becomes `or`.
        BoolExpr::And(a, b) if !negate => and(boolean(a, s, false), boolean(b, s, false)),
        BoolExpr::And(a, b) => or(boolean(a, s, true), boolean(b, s, true)),
        BoolExpr::Or(a, b) if !negate => or(boolean(a, s, false), boolean(b, s, false)),
        BoolExpr::Or(a, b) => and(boolean(a, s, true), boolean(b, s, true)),
        BoolExpr::CmpNum(op, a, b) => {
            let op = flip(*op, negate);
            match (num(a, s), num(b, s)) {
                (Num::Lit(x), Num::Lit(y)) => constant(Some(op.apply(x, y)), false),
                (Num::Unknown, _) | (_, Num::Unknown) => Exported::Unknown,
                (Num::Query(q), Num::Lit(y)) => {
                    Exported::Query(format!("({q}) {} {}", op.text(), lit(y)))
                }
                (Num::Lit(x), Num::Query(q)) => {
                    Exported::Query(format!("({q}) {} {}", op.flipped().text(), lit(x)))
                }
                (Num::Query(p), Num::Query(q)) => {
                    Exported::Query(format!("({p}) {} ({q})", op.text()))
                }
            }
        }
        // Strings, booleans and known() only ever involve constants here: evaluate them.
        other => constant(other.eval(s.constants()), negate),
    }
}

fn and(a: Exported, b: Exported) -> Exported {
    match (a, b) {
        (Exported::False, _) | (_, Exported::False) => Exported::False,
        (Exported::True, x) | (x, Exported::True) => x,
        (Exported::Unknown, x) | (x, Exported::Unknown) => x,
        (Exported::Query(p), Exported::Query(q)) => Exported::Query(format!("({p}) and ({q})")),
        (Exported::Query(p), Exported::Unless(q)) | (Exported::Unless(q), Exported::Query(p)) => {
            Exported::Query(format!("({p}) unless ({q})"))
        }
        (Exported::Unless(p), Exported::Unless(q)) => Exported::Unless(format!("({p}) or ({q})")),
    }
}

fn or(a: Exported, b: Exported) -> Exported {
    match (a, b) {
        (Exported::True, _) | (_, Exported::True) => Exported::True,
        (Exported::False, x) | (x, Exported::False) => x,
        (Exported::Unless(p), Exported::Unless(q)) => Exported::Unless(format!("({p}) and ({q})")),
        // "Everything but q" beside another alternative has no PromQL form: dropped, as an
        // unexportable clause is.
        (Exported::Unless(_), x) | (x, Exported::Unless(_)) => x,
        (Exported::Unknown, x) | (x, Exported::Unknown) => x,
        (Exported::Query(p), Exported::Query(q)) => Exported::Query(format!("({p}) or ({q})")),
    }
}

/// The terms of a conjunction, in order.
fn conjuncts(e: &BoolExpr) -> Vec<&BoolExpr> {
    match e {
        BoolExpr::And(a, b) => {
            let mut v = conjuncts(a);
            v.extend(conjuncts(b));
            v
        }
        other => vec![other],
    }
}

/// A guard `known(signal) and ... and <comparisons>`: a conjunction that asks for a signal's
/// presence beside tests on it.
fn is_known_guard(e: &BoolExpr) -> bool {
    let terms = conjuncts(e);
    let known = |t: &&BoolExpr| matches!(t, BoolExpr::Known(x) if reads_signal(x));
    terms.iter().any(known) && !terms.iter().all(known)
}

/// A guard exported positively: `known(signal)` is the presence of the signal's series, which
/// the comparisons beside it already require, so it drops out; the rest exports as usual. A
/// term that cannot be exported makes the whole guard unexportable: dropping it would widen the
/// guard and hide alerts the evaluator raises.
fn guard(e: &BoolExpr, s: &dyn PromqlScope) -> Exported {
    let mut out = Exported::True;
    for t in conjuncts(e) {
        let term = match t {
            BoolExpr::Known(x) if reads_signal(x) => continue,
            other => boolean(other, s, false),
        };
        if term == Exported::Unknown {
            return Exported::Unknown;
        }
        out = and(out, term);
    }
    out
}

/// Whether a `known()` argument reads a signal (not only facts, SLOs and constants).
fn reads_signal(e: &AnyExpr) -> bool {
    matches!(
        e,
        AnyExpr::Num(NumExpr::Load(Slot::Signal(_)) | NumExpr::OverTime(_, Slot::Signal(_)))
    )
}

impl super::Condition {
    /// Exports a boolean condition as PromQL (see the module docs for what is dropped).
    pub fn to_promql(&self, scope: &dyn PromqlScope) -> Exported {
        match &self.root {
            Root::Bool(b) => match boolean(b, scope, false) {
                Exported::Unless(_) => Exported::Unknown,
                other => other,
            },
            Root::Number(_) => Exported::Unknown,
        }
    }
}

/// An environment with nothing in it, for conditions without facts or SLOs.
pub struct NoConstants;

impl Env for NoConstants {
    fn get(&self, _: Slot) -> Option<Input<'_>> {
        None
    }
    fn stats(&self, _: Slot) -> Option<WindowStats> {
        None
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn literals_print_without_folding_noise() {
        assert_eq!(lit(0.9 + 0.05), "0.95");
        assert_eq!(lit(0.1 + 0.2), "0.3");
        assert_eq!(lit(1.0), "1.0");
        assert_eq!(lit(20e9), "20000000000.0");
        assert_eq!(lit(1.0 / 3.0), "0.3333333333333");
    }

    use super::super::testutil::{env, scope, TestEnv};
    use super::super::Condition;
    use super::*;

    /// Signals 0..=3 have queries `s0`..`s3`; the rest cannot be computed. Facts and SLOs come
    /// from the test environment.
    struct Scope(TestEnv);

    impl PromqlScope for Scope {
        fn signal(&self, slot: Slot, stat: SignalStat) -> Option<String> {
            match (slot, stat) {
                (Slot::Signal(i), SignalStat::Last) if i <= 3 => Some(format!("s{i}")),
                (Slot::Signal(i), SignalStat::Max) if i <= 3 => Some(format!("max_s{i}")),
                _ => None,
            }
        }
        fn constants(&self) -> &dyn Env {
            &self.0
        }
    }

    fn export(src: &str) -> Exported {
        Condition::compile(src, &scope())
            .unwrap()
            .to_promql(&Scope(env()))
    }

    fn q(s: &str) -> Exported {
        Exported::Query(s.to_string())
    }

    #[test]
    fn comparisons_facts_and_slos_fold() {
        assert_eq!(export("queue_depth > 10"), q("(s0) > 10.0"));
        assert_eq!(export("10 < queue_depth"), q("(s0) > 10.0"));
        assert_eq!(
            export("running_requests >= 0.9 * fact.max_num_seqs"),
            q("(s3) >= 230.4")
        );
        assert_eq!(
            export("ttft_p99_seconds > slo.ttft_p99_seconds"),
            Exported::Unknown
        );
        assert_eq!(
            export("max_over_time(queue_depth) >= 5"),
            q("(max_s0) >= 5.0")
        );
        assert_eq!(
            export("queue_depth / kv_cache_usage_ratio > 2"),
            q("((s0) / ((s1) != 0)) > 2.0")
        );
        // Functions of one number keep their PromQL names; on facts they fold.
        assert_eq!(
            export("ceil(queue_depth / 256) * abs(-2) >= 2"),
            q("((ceil((s0) / 256.0)) * 2.0) >= 2.0")
        );
        assert_eq!(
            export("running_requests >= ceil(fact.max_num_seqs / 100)"),
            q("(s3) >= 3.0")
        );
    }

    #[test]
    fn logic_drops_what_prometheus_cannot_see() {
        // A fact decides a clause at export time.
        assert_eq!(
            export(r#"fact.engine == "vllm" and queue_depth > 1"#),
            q("(s0) > 1.0")
        );
        assert_eq!(
            export(r#"fact.engine == "sglang" and queue_depth > 1"#),
            Exported::False
        );
        assert_eq!(
            export("fact.enforce_eager or queue_depth > 1"),
            Exported::True
        );
        // An unknown clause drops out of `and` and `or`.
        assert_eq!(
            export("absent_signal > 1 and queue_depth > 1"),
            q("(s0) > 1.0")
        );
        assert_eq!(
            export("absent_signal > 1 or queue_depth > 1"),
            q("(s0) > 1.0")
        );
        assert_eq!(export("absent_signal > 1"), Exported::Unknown);
        // Negation moves into the comparisons (De Morgan).
        assert_eq!(
            export("not (queue_depth > 1 and kv_cache_usage_ratio >= 90%)"),
            q("((s0) <= 1.0) or ((s1) < 0.9)")
        );
        assert_eq!(
            export("not known(fact.missing) or queue_depth > 1"),
            Exported::True
        );
    }

    #[test]
    fn a_negated_guard_with_known_becomes_unless() {
        // Holds where the guard is false or its series are absent: PromQL's `unless`.
        assert_eq!(
            export(
                "queue_depth > 1 and not (known(kv_cache_usage_ratio) and known(running_requests) \
                 and kv_cache_usage_ratio >= 99% and running_requests >= 99%)"
            ),
            q("((s0) > 1.0) unless (((s1) >= 0.99) and ((s3) >= 0.99))")
        );
        // Alone, "every target but these" has no PromQL form.
        assert_eq!(
            export("not (known(kv_cache_usage_ratio) and kv_cache_usage_ratio >= 99%)"),
            Exported::Unknown
        );
        // A guard term Prometheus cannot see makes the guard unexportable, not wider.
        assert_eq!(
            export(
                "queue_depth > 1 and not (known(kv_cache_usage_ratio) and known(absent_signal) \
                 and kv_cache_usage_ratio >= 99% and absent_signal >= 99%)"
            ),
            q("(s0) > 1.0")
        );
        // Without known() the negation still moves into the comparisons.
        assert_eq!(
            export("queue_depth > 1 and not (kv_cache_usage_ratio >= 99%)"),
            q("((s0) > 1.0) and ((s1) < 0.99)")
        );
    }
}
