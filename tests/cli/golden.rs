//! Every renderer's output on a handful of fixtures, kept as files and reviewed as a diff:
//! `UPDATE_GOLDEN=1 cargo test --test main cli::golden` rewrites them (`tests/snapshots/golden/`).

use crate::support::{golden, outcome, run};

/// Recordings whose diagnoses show the renderers' cases: a cause with evidence and a fix, a
/// crash with restarts, a hang, a near miss (healthy), a fleet of replicas, and a symptom no
/// measured cause explains.
const DIAGNOSED: &[&str] = &[
    "kv_cache_exhaustion",
    "crash_loop",
    "engine_stalled_vllm_cpu",
    "kv_cache_near_miss",
    "fleet_mixed",
    "errors_unexplained",
];

/// The formats of `diagnose`, with the flags that make the table the same on every machine.
const DIAGNOSE_FORMATS: &[(&str, &[&str])] = &[
    (
        "txt",
        &["--format", "table", "--width", "120", "--color", "never"],
    ),
    ("md", &["--format", "markdown"]),
    ("json", &["--format", "json"]),
];

#[test]
fn every_diagnose_renderer_matches_its_golden_file() {
    for name in DIAGNOSED {
        let file = format!("fixtures/{name}.om.gz");
        for (ext, flags) in DIAGNOSE_FORMATS {
            let mut args = vec!["diagnose", file.as_str(), "-q"];
            args.extend_from_slice(flags);
            let (code, stdout, stderr) = outcome(&run(&args));
            assert!(
                code == 0 || code == 1,
                "{name}.{ext}: exit {code}: {stderr}"
            );
            golden(&format!("golden/diagnose/{name}.{ext}"), &stdout);
        }
    }
}

#[test]
fn every_postmortem_renderer_matches_its_golden_file() {
    for name in ["pm-kv-onset", "pm-drain"] {
        let file = format!("tests/data/postmortem/{name}.om.gz");
        for (ext, format) in [
            ("txt", "table"),
            ("md", "markdown"),
            ("html", "html"),
            ("json", "json"),
        ] {
            let (code, stdout, stderr) = outcome(&run(&[
                "postmortem",
                file.as_str(),
                "-q",
                "--format",
                format,
            ]));
            assert!(
                code == 0 || code == 1,
                "{name}.{ext}: exit {code}: {stderr}"
            );
            golden(&format!("golden/postmortem/{name}.{ext}"), &stdout);
        }
    }
}
