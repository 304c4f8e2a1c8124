//! Markdown output, for tickets and postmortem documents.

use llm_doctor_engine::report::Diagnosis;

use super::{evidence_line, heading, unexplained_sentence, Report};

/// The report as Markdown.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for r in &report.targets {
        let d: &Diagnosis = &r.diagnosis;
        let coverage = d
            .coverage
            .summary()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        out.push_str(&format!(
            "## {}\n\n**Status: {}**{coverage}\n\n",
            heading(d),
            d.status.as_str()
        ));
        if !d.symptoms.is_empty() {
            out.push_str("### Symptoms\n\n");
            for s in &d.symptoms {
                let ev = s.evidence.first().map(evidence_line).unwrap_or_default();
                out.push_str(
                    &format!("- **{:?}** `{}`: {} ({})\n", s.severity, s.id, s.title, ev)
                        .replace("**Critical**", "**critical**")
                        .replace("**Warning**", "**warning**"),
                );
            }
            out.push('\n');
        }
        if let Some(text) = unexplained_sentence(d) {
            out.push_str(&format!("**{text}**\n\n"));
        }
        if !d.causes.is_empty() {
            out.push_str(
                "### Causes\n\n| # | cause | score | ranked by | chain | evidence |\n|---|---|---|---|---|---|\n",
            );
            for c in &d.causes {
                let ev: Vec<String> = c.evidence.iter().map(evidence_line).collect();
                out.push_str(&format!(
                    "| {} | `{}`{} | {:.2} | {} | {} | {} |\n",
                    c.rank,
                    c.id,
                    if c.root { "" } else { " (follows)" },
                    c.score,
                    c.ranked_by.replace('|', "\\|"),
                    c.chain.join(" → "),
                    ev.join("<br>").replace('|', "\\|")
                ));
            }
            out.push_str("\n### Fixes\n\n");
            for c in d.causes.iter().filter(|c| c.root) {
                out.push_str(&format!("**{}** — {}\n\n", c.id, c.title));
                for rem in &c.remediations {
                    let action = rem.action.clone().unwrap_or_else(|| rem.title.clone());
                    match &rem.already {
                        Some(facts) => out.push_str(&format!(
                            "- {} — already in effect ({facts}); next: {action}\n",
                            rem.title
                        )),
                        None => {
                            let measured = (rem.fits.as_ref())
                                .map(|f| format!(" (measured: {})", evidence_line(f)))
                                .unwrap_or_default();
                            out.push_str(&format!("- `{action}` — {}{measured}\n", rem.tradeoff));
                        }
                    }
                }
                out.push('\n');
            }
        }
        if !d.unchecked.is_empty() {
            out.push_str("### Not checked\n\n");
            for u in &d.unchecked {
                let hint = u
                    .hint
                    .as_deref()
                    .map(|h| format!(" — {h}"))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "- {} `{}` (missing {}){hint}\n",
                    u.kind,
                    u.rule,
                    u.missing.join(", ")
                ));
            }
            out.push('\n');
        }
        if !d.healthy.is_empty() {
            out.push_str(&format!("Checked and clear: {}\n\n", d.healthy.join(", ")));
        }
        for n in &r.notes {
            out.push_str(&format!("> note: {n}\n"));
        }
        if !r.checks.is_empty() {
            out.push_str(&format!(
                "\n### Why\n\n```text{}```\n\n",
                super::why::render(&r.checks, None)
            ));
        }
    }
    if let Some(slow) = &report.slowest_requests {
        out.push_str(&slowest_section(slow));
    }
    for e in &report.errors {
        out.push_str(&format!("- error: {e}\n"));
    }
    out
}

/// The slowest requests as a table: each one's split, then what they share.
pub fn slowest_section(slow: &crate::traffic::slowest::Slowest) -> String {
    use crate::traffic::slowest::COLUMNS;
    let mut out = format!(
        "\n### Slowest requests ({} of {})\n\n| {} |\n|{}\n",
        slow.slow,
        slow.requests,
        COLUMNS.join(" | "),
        " --- |".repeat(COLUMNS.len())
    );
    for r in &slow.listed {
        out.push_str(&format!("| {} |\n", r.cells().join(" | ")));
    }
    match (&slow.shared[..], &slow.compared) {
        ([], Some(c)) => out.push_str(&format!("\nThey share no {c} beyond the others.\n")),
        ([], None) => {}
        (shared, _) => out.push_str(&format!("\nThey share: {}.\n", shared.join("; "))),
    }
    out
}
