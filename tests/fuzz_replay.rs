//! Every file of the fuzz corpus (`fuzz/corpus/<target>/`) and every input that once failed
//! (`fuzz/regressions/<target>/`) through its fuzz target's function, on stable: what fuzzing
//! found stays fixed, without a nightly toolchain in CI. A panic fails the test; a hang is
//! caught by the time limit below.

use std::path::Path;
use std::time::{Duration, Instant};

#[test]
fn every_corpus_file_and_past_failure_runs_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut ran = 0;
    for (target, run) in llm_doctor::fuzzing::TARGETS {
        let mut files = Vec::new();
        for dir in ["corpus", "regressions"] {
            if let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) {
                files.extend(entries.filter_map(|e| e.ok()).map(|e| e.path()));
            }
        }
        assert!(
            root.join("corpus").join(target).is_dir(),
            "fuzz/corpus/{target} is missing: every target needs a seed corpus"
        );
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let started = Instant::now();
            run(&data);
            // Seconds, not the milliseconds these take: a hang (an empty key once looped forever)
            // or a quadratic blow-up, not noise.
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{} took {:?}",
                file.display(),
                started.elapsed()
            );
            ran += 1;
        }
    }
    assert!(ran >= 30, "{ran} inputs");
}
