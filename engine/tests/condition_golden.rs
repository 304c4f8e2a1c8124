//! Golden files for the rendering of condition-language errors.
//!
//! Each case compiles a broken expression, renders its errors and compares the
//! result with `tests/diagnostics/<name>.txt`. Run with `UPDATE_GOLDEN=1` to
//! rewrite the files after an intended change, then review the diff.

use std::path::PathBuf;

use llm_doctor_engine::condition::{Condition, ConditionError, ErrorKind, Scope, Slot, Type};

struct GoldenScope;

const NAMES: &[(&str, Slot, Type)] = &[
    ("queue_depth", Slot::Signal(0), Type::Number),
    ("kv_cache_usage_ratio", Slot::Signal(1), Type::Number),
    ("queue_time_mean_seconds", Slot::Signal(2), Type::Number),
    ("ttft_mean_seconds", Slot::Signal(3), Type::Number),
    ("fact.engine", Slot::Fact(0), Type::String),
    ("fact.enforce_eager", Slot::Fact(1), Type::Bool),
    ("slo.ttft_p99_seconds", Slot::Slo(0), Type::Number),
];

impl Scope for GoldenScope {
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

/// (file name, source, expected kinds of the errors in order).
const CASES: &[(&str, &str, &[ErrorKind])] = &[
    ("lex", "fact.engine = \"vllm\"", &[ErrorKind::Lex]),
    ("parse", "queue_depth >", &[ErrorKind::Parse]),
    (
        "parse_unexpected",
        "(queue_depth > 10)) and kv_cache_usage_ratio > 0.9",
        &[ErrorKind::Parse],
    ),
    ("unknown_name", "queue_dept > 10", &[ErrorKind::UnknownName]),
    ("type", "fact.engine < 3", &[ErrorKind::Type]),
    (
        "condition_type",
        "queue_time_mean_seconds / ttft_mean_seconds",
        &[ErrorKind::Type],
    ),
    (
        "unknown_unit",
        "queue_time_mean_seconds > 5kb",
        &[ErrorKind::UnknownUnit],
    ),
    (
        "unknown_function",
        "mean(queue_depth) > 10",
        &[ErrorKind::UnknownFunction],
    ),
    ("arity", "abs(queue_depth, 2) > 1", &[ErrorKind::Arity]),
    ("empty", "", &[ErrorKind::Parse]),
    (
        "multiple",
        "queue_dept > 10 and kv_cache_usag > 0.9 and fact.enginee == \"vllm\"",
        &[
            ErrorKind::UnknownName,
            ErrorKind::UnknownName,
            ErrorKind::UnknownName,
        ],
    ),
    (
        "non_ascii",
        "fact.engine == \"é\" and queue_dept ≥ 1",
        &[ErrorKind::UnknownName, ErrorKind::Lex],
    ),
];

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("diagnostics")
        .join(format!("{name}.txt"))
}

fn render_all(src: &str, errors: &[ConditionError]) -> String {
    let rendered: Vec<_> = errors
        .iter()
        .map(|e| {
            e.render(
                src,
                "rules/example.yaml:3:11",
                "cause `queue_backlog`",
                "evidence[0].when",
            )
        })
        .collect();
    rendered.join("\n\n") + "\n"
}

#[test]
fn rendered_errors_match_golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let mut mismatches = Vec::new();
    for (name, src, kinds) in CASES {
        let errors = match Condition::compile(src, &GoldenScope) {
            Ok(_) => panic!("`{src}` compiled"),
            Err(errors) => errors,
        };
        let got_kinds: Vec<_> = errors.iter().map(|e| e.kind).collect();
        assert_eq!(&got_kinds, kinds, "{name}: {errors:#?}");
        let rendered = render_all(src, &errors);
        let path = golden_path(name);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &rendered).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display()));
        if want != rendered {
            mismatches.push(format!(
                "{}:\n--- want\n{want}--- got\n{rendered}",
                path.display()
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "golden files differ (run with UPDATE_GOLDEN=1 to update):\n{}",
        mismatches.join("\n")
    );
}

#[test]
fn every_error_kind_has_a_golden_file() {
    let covered: Vec<ErrorKind> = CASES
        .iter()
        .flat_map(|(_, _, kinds)| kinds.iter().copied())
        .collect();
    for kind in [
        ErrorKind::Lex,
        ErrorKind::Parse,
        ErrorKind::UnknownName,
        ErrorKind::Type,
        ErrorKind::UnknownUnit,
        ErrorKind::UnknownFunction,
        ErrorKind::Arity,
    ] {
        assert!(covered.contains(&kind), "{kind:?} has no golden case");
    }
}
