//! Property tests: the compiler never panics on any input, errors point inside
//! the source, and generated well-typed expressions compile and evaluate the
//! same whether written with minimal or with full parentheses.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;

use super::testutil::{env, scope, TestEnv};
use super::{Condition, Value, WindowStats};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Compiles `src` both ways and checks the invariants of the result.
fn compile_checked(src: &str) {
    for result in [
        Condition::compile(src, &scope()),
        Condition::compile_number(src, &scope()),
    ] {
        match result {
            Ok(c) => {
                let env = env();
                let value = c.eval(&env);
                if c.is_number() {
                    assert!(
                        matches!(value, Value::Number(x) if x.is_finite())
                            || value == Value::Unknown
                    );
                } else {
                    assert!(
                        matches!(value, Value::Bool(_) | Value::Unknown),
                        "{value:?}"
                    );
                }
                let _ = c.simple_comparison();
                assert_eq!(c.source(), src);
            }
            Err(errors) => {
                assert!(!errors.is_empty());
                for e in &errors {
                    assert!(
                        e.span.start <= e.span.end && e.span.end <= src.len(),
                        "{e:?}"
                    );
                    assert!(src.is_char_boundary(e.span.start), "{e:?}");
                    assert!(src.is_char_boundary(e.span.end), "{e:?}");
                    assert!(!e.message.is_empty());
                    let rendered = e.render(src, "f.yaml:1:1", "cause `c`", "when");
                    assert!(rendered.contains('^'));
                }
            }
        }
    }
}

/// Tokens of the language, correct and incorrect, for token soups.
const TOKENS: &[&str] = &[
    "queue_depth",
    "kv_cache_usage_ratio",
    "absent_signal",
    "nan_signal",
    "zero_signal",
    "fact.engine",
    "fact.enforce_eager",
    "fact.max_num_seqs",
    "fact.missing",
    "slo.ttft_p99_seconds",
    "queue_dept",
    "fact.",
    "slo.nope",
    "x",
    "and",
    "or",
    "not",
    "true",
    "false",
    "AND",
    "known",
    "min",
    "max",
    "abs",
    "ceil",
    "avg_over_time",
    "max_over_time",
    "min_over_time",
    "mean",
    "(",
    ")",
    ",",
    "+",
    "-",
    "*",
    "/",
    "<",
    "<=",
    ">",
    ">=",
    "==",
    "!=",
    "=",
    "!",
    "&&",
    "||",
    "0",
    "1",
    "2.5",
    "500ms",
    "90%",
    "1e-3",
    "1e999",
    "5kb",
    "1.5m",
    "2s",
    "1h",
    "250us",
    "\"vllm\"",
    "\"a\\\"b\"",
    "\"open",
    "'single'",
    "\\",
    "@",
    "%",
    ".",
    "é",
    "≥",
    "\n",
    "\t",
];

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn random_strings_never_panic(src in "\\PC{0,60}") {
        compile_checked(&src);
    }

    #[test]
    fn random_bytes_never_panic(bytes in vec(any::<u8>(), 0..80)) {
        compile_checked(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn token_soups_never_panic(
        tokens in vec(select(TOKENS), 0..25),
        spaced in any::<bool>(),
    ) {
        let src = tokens.join(if spaced { " " } else { "" });
        compile_checked(&src);
    }
}

/// A generated expression, printed with minimal or full parentheses.
#[derive(Clone, Debug)]
enum Gen {
    Atom(&'static str),
    Call(&'static str, Vec<Gen>),
    Neg(Box<Gen>),
    Not(Box<Gen>),
    /// Operator, its binding power, operands.
    Bin(&'static str, u8, Box<Gen>, Box<Gen>),
}

impl Gen {
    fn bin(op: &'static str, a: Gen, b: Gen) -> Gen {
        let bp = match op {
            "or" => 1,
            "and" => 2,
            "+" | "-" => 5,
            "*" | "/" => 6,
            _ => 4,
        };
        Gen::Bin(op, bp, Box::new(a), Box::new(b))
    }

    fn bp(&self) -> u8 {
        match self {
            Gen::Atom(_) | Gen::Call(..) => 8,
            Gen::Neg(_) => 7,
            Gen::Not(_) => 3,
            Gen::Bin(_, bp, _, _) => *bp,
        }
    }

    /// The source text; `min` is the binding power the context requires.
    fn show(&self, min: u8, full: bool) -> String {
        let text = match self {
            Gen::Atom(a) => (*a).to_owned(),
            Gen::Call(f, args) => {
                let args: Vec<_> = args.iter().map(|a| a.show(0, full)).collect();
                format!("{f}({})", args.join(", "))
            }
            Gen::Neg(x) => format!("-{}", x.show(7, full)),
            Gen::Not(x) => format!("not {}", x.show(3, full)),
            Gen::Bin(op, bp, a, b) => {
                // Comparisons do not associate: both sides bind tighter.
                let left = if *bp == 4 { bp + 1 } else { *bp };
                format!("{} {op} {}", a.show(left, full), b.show(bp + 1, full))
            }
        };
        let compound = !matches!(self, Gen::Atom(_) | Gen::Call(..));
        if self.bp() < min || (full && compound) {
            format!("({text})")
        } else {
            text
        }
    }
}

const NUM_ATOMS: &[&str] = &[
    "0",
    "1",
    "2.5",
    "4096",
    "500ms",
    "90%",
    "1e-3",
    "1.5m",
    "2s",
    "1h",
    "250us",
    "queue_depth",
    "kv_cache_usage_ratio",
    "preemptions_per_second",
    "running_requests",
    "absent_signal",
    "nan_signal",
    "inf_signal",
    "zero_signal",
    "neg_signal",
    "fact.max_num_seqs",
    "fact.missing",
    "slo.ttft_p99_seconds",
    "slo.missing",
];
const SIGNALS: &[&str] = &[
    "queue_depth",
    "kv_cache_usage_ratio",
    "absent_signal",
    "nan_signal",
];
const BOOL_ATOMS: &[&str] = &["true", "false", "fact.enforce_eager", "fact.unset_flag"];

fn number() -> BoxedStrategy<Gen> {
    let leaf = prop_oneof![
        3 => select(NUM_ATOMS).prop_map(Gen::Atom),
        1 => (select(&["avg_over_time", "max_over_time", "min_over_time"][..]), select(SIGNALS))
            .prop_map(|(f, s)| Gen::Call(f, vec![Gen::Atom(s)])),
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (
                select(&["+", "-", "*", "/"][..]),
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(op, a, b)| Gen::bin(op, a, b)),
            inner.clone().prop_map(|x| Gen::Neg(Box::new(x))),
            inner.clone().prop_map(|x| Gen::Call("abs", vec![x])),
            inner.clone().prop_map(|x| Gen::Call("ceil", vec![x])),
            (select(&["min", "max"][..]), vec(inner, 2..4))
                .prop_map(|(f, args)| Gen::Call(f, args)),
        ]
    })
    .boxed()
}

fn boolean() -> BoxedStrategy<Gen> {
    let leaf = prop_oneof![
        select(BOOL_ATOMS).prop_map(Gen::Atom),
        (
            select(&["==", "!="][..]),
            select(&["fact.engine", "fact.unset_engine", "\"vllm\""][..])
        )
            .prop_map(|(op, s)| Gen::bin(op, Gen::Atom(s), Gen::Atom("\"vllm\""))),
        (
            select(&["<", "<=", ">", ">=", "==", "!="][..]),
            number(),
            number()
        )
            .prop_map(|(op, a, b)| Gen::bin(op, a, b)),
        number().prop_map(|x| Gen::Call("known", vec![x])),
    ];
    leaf.prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            (select(&["and", "or"][..]), inner.clone(), inner.clone())
                .prop_map(|(op, a, b)| Gen::bin(op, a, b)),
            inner.clone().prop_map(|x| Gen::Not(Box::new(x))),
            (select(&["==", "!="][..]), inner.clone(), inner)
                .prop_map(|(op, a, b)| Gen::bin(op, a, b)),
        ]
    })
    .boxed()
}

fn maybe_number() -> impl Strategy<Value = Option<f64>> {
    prop_oneof![
        Just(None),
        Just(Some(f64::NAN)),
        Just(Some(f64::INFINITY)),
        Just(Some(0.0)),
        (-1000.0..1000.0f64).prop_map(Some),
    ]
}

fn random_env() -> impl Strategy<Value = TestEnv> {
    let stats = option::of((
        -10.0..10.0f64,
        -10.0..10.0f64,
        prop_oneof![Just(f64::NAN), -10.0..10.0f64],
    ))
    .prop_map(|s| {
        s.map(|(min, mean, max)| WindowStats {
            min,
            mean,
            max,
            last: mean,
        })
    });
    (
        vec(maybe_number(), 12),
        vec(stats, 12),
        vec(maybe_number(), 2),
    )
        .prop_map(|(signals, stats, slos)| TestEnv {
            signals,
            stats,
            slos,
            ..env()
        })
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn generated_conditions_compile_and_parenthesisation_does_not_matter(
        expr in boolean(),
        env in random_env(),
    ) {
        let minimal = expr.show(0, false);
        let full = expr.show(0, true);
        let a = Condition::compile(&minimal, &scope());
        let b = Condition::compile(&full, &scope());
        prop_assert!(a.is_ok(), "`{}`: {:?}", minimal, a.err());
        prop_assert!(b.is_ok(), "`{}`: {:?}", full, b.err());
        let (a, b) = (a.unwrap(), b.unwrap());
        let value = a.eval(&env);
        prop_assert!(matches!(value, Value::Bool(_) | Value::Unknown));
        prop_assert_eq!(value, b.eval(&env), "`{}` vs `{}`", minimal, full);
        prop_assert_eq!(a.slots(), b.slots());
    }

    #[test]
    fn generated_numbers_compile_and_evaluate_to_finite_values(
        expr in number(),
        env in random_env(),
    ) {
        let minimal = expr.show(0, false);
        let full = expr.show(0, true);
        let a = Condition::compile_number(&minimal, &scope());
        let b = Condition::compile_number(&full, &scope());
        prop_assert!(a.is_ok(), "`{}`: {:?}", minimal, a.err());
        prop_assert!(b.is_ok(), "`{}`: {:?}", full, b.err());
        let (a, b) = (a.unwrap(), b.unwrap());
        let value = a.eval(&env);
        prop_assert!(matches!(value, Value::Number(x) if x.is_finite()) || value == Value::Unknown);
        prop_assert_eq!(value, b.eval(&env), "`{}` vs `{}`", minimal, full);
    }
}
