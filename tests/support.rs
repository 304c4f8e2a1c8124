//! Helpers: run the built binary, compare with golden files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `llm-doctor` with `args` from the repository root, stdin closed, no colour.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_llm-doctor"))
        .args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the binary runs")
}

/// [`run`] with one environment variable set (a limit, say).
pub fn run_env(args: &[&str], (var, value): (&str, &str)) -> Output {
    Command::new(env!("CARGO_BIN_EXE_llm-doctor"))
        .args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .env(var, value)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the binary runs")
}

/// Exit code, stdout and stderr of a run, as text.
pub fn outcome(out: &Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Compares `actual` with `tests/snapshots/<name>`; `UPDATE_GOLDEN=1` rewrites it instead.
pub fn golden(name: &str, actual: &str) {
    let path = root().join("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing snapshot {} (run with UPDATE_GOLDEN=1)",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "snapshot {} differs (run with UPDATE_GOLDEN=1 and review the diff)\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        );
    }
}

/// Writes `text` to a temporary file named `name` and returns its path.
pub fn temp_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The ids of a JSON diagnosis target's causes, in rank order.
pub fn cause_ids(target: &serde_json::Value) -> Vec<String> {
    target["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect()
}
