//! The shipped fixtures: every test passes, every cause is covered by a fixture where it ranks
//! first and by a near miss where it must not fire, healthy baselines fire no symptom, and the
//! committed recordings are what the generator produces.

use std::collections::BTreeSet;

use crate::support::{outcome, root, run};

#[test]
fn every_fixture_test_passes() {
    let (code, out, err) = outcome(&run(&["rules", "test", "fixtures"]));
    assert_eq!(code, 0, "{out}{err}");
    let last = out.lines().last().unwrap();
    assert!(last.ends_with(" passed, 0 failed"), "{last}");
}

#[test]
fn every_cause_ranks_first_somewhere_and_has_a_near_miss() {
    let rules = llm_doctor::rules::load_rules(None).unwrap();
    let mut first = BTreeSet::new();
    let mut near_miss = BTreeSet::new();
    let mut healthy = 0;
    for path in llm_doctor::score::fixtures::discover(&root().join("fixtures")).unwrap() {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("# "),
            "{} must open with a comment stating its intent",
            path.display()
        );
        let t: llm_doctor::score::fixtures::FixtureTest = serde_yaml::from_str(&text).unwrap();
        let expects = t.expect.iter().chain(t.targets.iter().map(|x| &x.expect));
        for e in expects {
            if let Some(c) = &e.top_cause {
                first.insert(c.clone());
            }
            near_miss.extend(e.absent_causes.iter().cloned());
            if e.no_symptoms {
                healthy += 1;
            }
        }
    }
    let all: BTreeSet<String> = rules.playbook.causes.iter().map(|c| c.id.clone()).collect();
    let no_first: Vec<_> = all.difference(&first).collect();
    let no_miss: Vec<_> = all.difference(&near_miss).collect();
    assert!(
        no_first.is_empty(),
        "causes without a fixture where they rank first: {no_first:?}"
    );
    assert!(
        no_miss.is_empty(),
        "causes without a near miss: {no_miss:?}"
    );
    assert!(healthy >= 2, "busy and idle healthy baselines are needed");
}

#[test]
fn committed_recordings_match_the_generator() {
    let status = std::process::Command::new("python3")
        .arg(root().join("scripts/gen_fixtures.py"))
        .arg("--check")
        .current_dir(root())
        .status()
        .expect("python3 runs");
    assert!(
        status.success(),
        "fixtures are stale: run python3 scripts/gen_fixtures.py"
    );
}
