//! A small scope and environment shared by the unit tests.

use super::{Condition, Env, Input, Scope, Slot, Type, WindowStats};

/// Names known to the test scope, with their slots and types.
pub(crate) const NAMES: &[(&str, Slot, Type)] = &[
    ("queue_depth", Slot::Signal(0), Type::Number),
    ("kv_cache_usage_ratio", Slot::Signal(1), Type::Number),
    ("preemptions_per_second", Slot::Signal(2), Type::Number),
    ("running_requests", Slot::Signal(3), Type::Number),
    ("absent_signal", Slot::Signal(4), Type::Number),
    ("nan_signal", Slot::Signal(5), Type::Number),
    ("inf_signal", Slot::Signal(6), Type::Number),
    ("queue_time_mean_seconds", Slot::Signal(7), Type::Number),
    ("ttft_mean_seconds", Slot::Signal(8), Type::Number),
    ("zero_signal", Slot::Signal(9), Type::Number),
    ("ttft_p99_seconds", Slot::Signal(10), Type::Number),
    ("neg_signal", Slot::Signal(11), Type::Number),
    ("fact.engine", Slot::Fact(0), Type::String),
    ("fact.enforce_eager", Slot::Fact(1), Type::Bool),
    ("fact.max_num_seqs", Slot::Fact(2), Type::Number),
    ("fact.missing", Slot::Fact(3), Type::Number),
    ("fact.unset_engine", Slot::Fact(4), Type::String),
    ("fact.unset_flag", Slot::Fact(5), Type::Bool),
    ("slo.ttft_p99_seconds", Slot::Slo(0), Type::Number),
    ("slo.missing", Slot::Slo(1), Type::Number),
];

/// Resolves the names of [`NAMES`].
pub(crate) struct TestScope;

impl Scope for TestScope {
    fn resolve(&self, name: &str) -> Option<(Slot, Type)> {
        NAMES
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|&(_, slot, ty)| (slot, ty))
    }

    fn names(&self) -> Vec<String> {
        NAMES.iter().map(|(n, _, _)| (*n).to_owned()).collect()
    }
}

pub(crate) fn scope() -> TestScope {
    TestScope
}

/// Values for the names of [`NAMES`] (see [`env`]).
#[derive(Debug)]
pub(crate) struct TestEnv {
    pub signals: Vec<Option<f64>>,
    pub facts: Vec<Option<Input<'static>>>,
    pub slos: Vec<Option<f64>>,
    pub stats: Vec<Option<WindowStats>>,
}

impl Env for TestEnv {
    fn get(&self, slot: Slot) -> Option<Input<'_>> {
        match slot {
            Slot::Signal(i) => self.signals.get(i).copied().flatten().map(Input::Number),
            Slot::Fact(i) => self.facts.get(i).copied().flatten(),
            Slot::Slo(i) => self.slos.get(i).copied().flatten().map(Input::Number),
        }
    }

    fn stats(&self, slot: Slot) -> Option<WindowStats> {
        match slot {
            Slot::Signal(i) => self.stats.get(i).copied().flatten(),
            _ => None,
        }
    }
}

/// The standard test environment: `queue_depth` 12 (window min 2, mean 6,
/// max 20), `kv_cache_usage_ratio` 0.97 (window min 0.5, mean 0.8, max NaN),
/// `preemptions_per_second` 0.5, `running_requests` 200, `absent_signal`
/// absent, `nan_signal` NaN, `inf_signal` +inf, `queue_time_mean_seconds` 0.3,
/// `ttft_mean_seconds` 0.5, `zero_signal` 0, `ttft_p99_seconds` 2.5,
/// `neg_signal` -3; `fact.engine` "vllm", `fact.enforce_eager` true,
/// `fact.max_num_seqs` 256, the other facts absent; `slo.ttft_p99_seconds` 2,
/// `slo.missing` absent.
pub(crate) fn env() -> TestEnv {
    TestEnv {
        signals: vec![
            Some(12.0),
            Some(0.97),
            Some(0.5),
            Some(200.0),
            None,
            Some(f64::NAN),
            Some(f64::INFINITY),
            Some(0.3),
            Some(0.5),
            Some(0.0),
            Some(2.5),
            Some(-3.0),
        ],
        facts: vec![
            Some(Input::Str("vllm")),
            Some(Input::Bool(true)),
            Some(Input::Number(256.0)),
            None,
            None,
            None,
        ],
        slos: vec![Some(2.0), None],
        stats: vec![
            Some(WindowStats {
                min: 2.0,
                mean: 6.0,
                max: 20.0,
                last: 12.0,
            }),
            Some(WindowStats {
                min: 0.5,
                mean: 0.8,
                max: f64::NAN,
                last: 0.97,
            }),
        ],
    }
}

/// The expected outcome of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    True,
    False,
    Unknown,
}

/// Compiles `src` against [`scope`], evaluates it in [`env`] and checks the outcome.
#[track_caller]
pub(crate) fn give(src: &str, want: Want) {
    let condition = match Condition::compile(src, &scope()) {
        Ok(c) => c,
        Err(errors) => {
            let rendered: Vec<_> = errors
                .iter()
                .map(|e| e.render(src, "test", "", ""))
                .collect();
            panic!("`{src}` does not compile:\n{}", rendered.join("\n"));
        }
    };
    let got = match condition.eval_bool(&env()) {
        Some(true) => Want::True,
        Some(false) => Want::False,
        None => Want::Unknown,
    };
    assert_eq!(got, want, "`{src}`");
}
