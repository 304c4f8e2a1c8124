//! Judging: the playbook evaluated on each prepared target, with the notes of how its input was
//! assembled and, for the rules asked about (`--why`), how each judged it.

use llm_doctor_engine::evaluate::check_rule;
use llm_doctor_engine::Playbook;

use crate::prepared::Prepared;
use crate::report::TargetReport;

/// One target's diagnosis; `why` names symptoms or causes the playbook has (see
/// [`crate::report::why::check_ids`]) whose judgement of the same snapshot is kept beside it.
pub fn judge(
    playbook: &Playbook,
    prepared: Prepared,
    slos: &[f64],
    why: &[String],
) -> TargetReport {
    let snapshot = &prepared.snapshot;
    TargetReport {
        diagnosis: llm_doctor_engine::diagnose(playbook, snapshot, slos),
        checks: why
            .iter()
            .enumerate()
            // A rule asked about twice is shown once.
            .filter(|(i, id)| !why[..*i].contains(id))
            .filter_map(|(_, id)| check_rule(playbook, snapshot, slos, id))
            .collect(),
        notes: prepared.notes,
    }
}

/// Every target judged (a fleet on every core, targets being independent), each given `notes`
/// about the inputs as a whole, worst first so a fleet's problems lead.
pub fn judge_all(
    playbook: &Playbook,
    prepared: Vec<Prepared>,
    slos: &[f64],
    why: &[String],
    notes: &[String],
) -> Vec<TargetReport> {
    let mut targets: Vec<TargetReport> =
        crate::parallel::map_owned(prepared, crate::parallel::TARGETS_PER_THREAD, |p| {
            let mut t = judge(playbook, p, slos, why);
            t.notes.extend(notes.iter().cloned());
            t
        });
    targets.sort_by(|a, b| {
        b.diagnosis
            .status
            .cmp(&a.diagnosis.status)
            .then_with(|| a.diagnosis.target.labels.cmp(&b.diagnosis.target.labels))
    });
    targets
}
