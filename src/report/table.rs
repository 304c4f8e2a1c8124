//! The terminal view, for 3 a.m.: the verdict first, then ranked causes with their evidence and
//! the fix, then what could not be checked. Colour only on a terminal, never with `NO_COLOR`.

use comfy_table::{presets, ContentArrangement, Table};
use llm_doctor_engine::report::{Diagnosis, Severity, Status};

use super::{evidence_line, heading, number, unexplained_sentence, wrap, Report, TargetReport};

/// How the table is drawn.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// Emit ANSI colours.
    pub color: bool,
    /// Columns to fit in (the terminal's width on a terminal).
    pub width: u16,
    /// How much of a fleet to show.
    pub detail: Detail,
}

/// How much of a fleet the table shows after its summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Every target in full.
    All,
    /// Troubled targets in full, healthy ones in one line each (the default).
    Problems,
    /// Troubled targets only.
    ProblemsOnly,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            color: false,
            width: 150,
            detail: Detail::Problems,
        }
    }
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
    fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }
    fn status(&self, s: Status) -> String {
        let word = s.as_str().to_uppercase();
        match s {
            Status::Critical => self.paint("1;31", &word),
            Status::Degraded => self.paint("1;33", &word),
            Status::Healthy => self.paint("1;32", &word),
            Status::Unknown => self.paint("1;35", &word),
        }
    }
    fn severity(&self, s: Severity) -> String {
        match s {
            Severity::Critical => self.paint("1;31", "CRITICAL"),
            Severity::Warning => self.paint("1;33", "WARNING "),
        }
    }
}

/// Renders every target; a fleet summary first when there are several, then the troubled
/// targets in full and the healthy ones in a line each (see [`Detail`]).
pub fn render(report: &Report, style: Style) -> String {
    let mut out = String::new();
    let fleet = report.targets.len() > 1;
    if fleet {
        let mut t = new_table(style.width);
        t.set_header(vec!["target", "status", "top cause"]);
        for r in &report.targets {
            let d = &r.diagnosis;
            t.add_row(vec![
                heading(d),
                d.status.as_str().to_string(),
                d.causes
                    .first()
                    .map(|c| c.id.clone())
                    .unwrap_or_else(|| "-".into()),
            ]);
        }
        out.push_str(&format!(
            "{}\n\n",
            style.bold(&format!("{} targets", report.targets.len()))
        ));
        out.push_str(&format!("{t}\n\n"));
    }
    // A healthy target takes a line, unless `--why` asked about it (`--problems-only` still
    // leaves it out).
    let quiet = |r: &TargetReport| {
        r.diagnosis.status == Status::Healthy
            && r.diagnosis.causes.is_empty()
            && (r.checks.is_empty() || style.detail == Detail::ProblemsOnly)
    };
    let mut first = true;
    let mut healthy: Vec<&TargetReport> = Vec::new();
    for r in &report.targets {
        if fleet && style.detail != Detail::All && quiet(r) {
            healthy.push(r);
            continue;
        }
        if !first {
            out.push_str("\n────────────────────────────────────────────────────────────\n\n");
        }
        first = false;
        target(&mut out, r, style);
    }
    if !healthy.is_empty() && style.detail == Detail::Problems {
        if !first {
            out.push('\n');
        }
        out.push_str(&format!(
            "{} (--all shows them in full):\n",
            style.bold(&format!("{} healthy", healthy.len()))
        ));
        for r in healthy {
            let coverage = r
                .diagnosis
                .coverage
                .summary()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            let line = format!("{} · healthy{coverage}", heading(&r.diagnosis));
            out.push_str(&wrap("  ", &line, usize::from(style.width), 4));
            out.push('\n');
        }
    }
    if let Some(slow) = &report.slowest_requests {
        out.push_str(&format!(
            "\n{}\n",
            style.bold(&format!(
                "slowest {} of {} requests",
                slow.slow, slow.requests
            ))
        ));
        for r in &slow.listed {
            let line = format!(
                "{} · ended {}{}",
                r.describe(),
                crate::time::format_time(r.end_ms),
                r.replica
                    .as_deref()
                    .map_or(String::new(), |u| format!(" · {u}"))
            );
            out.push_str(&wrap("  ", &line, usize::from(style.width), 4));
            out.push('\n');
        }
        for n in slow.notes().iter().skip(1) {
            out.push_str(&wrap("  ", n, usize::from(style.width), 4));
            out.push('\n');
        }
    }
    for e in &report.errors {
        out.push_str(&format!("error: {e}\n"));
    }
    out
}

fn new_table(width: u16) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width);
    t
}

fn target(out: &mut String, r: &TargetReport, style: Style) {
    let d: &Diagnosis = &r.diagnosis;
    out.push_str(&style.bold(&wrap("", &heading(d), usize::from(style.width), 2)));
    out.push('\n');
    let coverage = d
        .coverage
        .summary()
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    out.push_str(&format!("status: {}{coverage}\n\n", style.status(d.status)));

    for s in &d.symptoms {
        let ev = s.evidence.first().map(evidence_line).unwrap_or_default();
        let lead = format!("{}  {:<16} ", style.severity(s.severity), s.id);
        let text = format!("{} — {ev}", s.title);
        out.push_str(&wrap(&lead, &text, usize::from(style.width), 27));
        out.push('\n');
    }
    if !d.symptoms.is_empty() {
        out.push('\n');
    }

    if let Some(text) = unexplained_sentence(d) {
        out.push_str(&wrap("", &text, usize::from(style.width), 0));
        out.push_str("\n\n");
    }
    // Fired symptoms without a cause are all unexplained: the sentence above says so.
    if d.causes.is_empty() {
        if d.status == Status::Healthy {
            out.push_str("No problem found.\n\n");
        }
    } else {
        out.push_str(&format!("{}\n\n", causes_table(d, style.width)));
        fixes(out, d, style);
    }

    unchecked(out, d, style);
    if !d.healthy.is_empty() {
        out.push_str(&format!("Checked and clear: {}\n", d.healthy.join(", ")));
    }
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out.push_str(&super::why::render(
        &r.checks,
        Some(usize::from(style.width)),
    ));
}

/// Evidence lines with a value's window statistics given once: the first line that shows
/// `queue_depth 180 (window min 97, mean 138, max 180)` keeps them, later lines say
/// `queue_depth 180`.
fn shorten_repeats(lines: Vec<String>) -> Vec<String> {
    static STATS: std::sync::OnceLock<regex_lite::Regex> = std::sync::OnceLock::new();
    let re = STATS.get_or_init(|| {
        regex_lite::Regex::new(r"([a-z][a-z0-9_.]* [^ ,;()]+(?: [^ ,;()]+)?) \(window min [^)]*\)")
            .expect("valid")
    });
    let mut seen: Vec<String> = Vec::new();
    lines
        .into_iter()
        .map(|line| {
            re.replace_all(&line, |c: &regex_lite::Captures<'_>| {
                let full = c[0].to_string();
                if seen.contains(&full) {
                    c[1].to_string()
                } else {
                    seen.push(full.clone());
                    full
                }
            })
            .into_owned()
        })
        .collect()
}

/// The fired causes, ranked, with their chain and evidence.
fn causes_table(d: &Diagnosis, width: u16) -> Table {
    let mut t = new_table(width);
    t.set_header(vec![
        "#",
        "cause",
        "score",
        "how it leads to the symptom",
        "evidence",
    ]);
    for c in &d.causes {
        // Why it stands here: its group and worst symptom say more than the score.
        let name = format!("{}\n({})", c.id, c.ranked_by);
        let mut ev: Vec<String> = shorten_repeats(c.evidence.iter().map(evidence_line).collect());
        if let (Some(i), Some(note)) = (c.impact, &c.impact_note) {
            ev.push(format!("{}: {} %", note, number(i * 100.0)));
        }
        for a in &c.against {
            ev.push(format!("against: {}", evidence_line(a)));
        }
        if !c.unknown.is_empty() {
            let names: Vec<&str> = c
                .unknown
                .iter()
                .flat_map(|u| u.missing.iter().map(String::as_str))
                .collect();
            ev.push(format!(
                "confidence {} (unknown: {})",
                number(c.confidence),
                dedup(names).join(", ")
            ));
        }
        t.add_row(vec![
            c.rank.to_string(),
            name,
            format!("{:.2}", c.score),
            c.chain.join(" → "),
            ev.join("\n"),
        ]);
    }
    t
}

/// What to do for the first three root causes.
fn fixes(out: &mut String, d: &Diagnosis, style: Style) {
    for c in d.causes.iter().filter(|c| c.root).take(3) {
        let title = format!("Fix #{} {} — {}", c.rank, c.id, c.title);
        out.push_str(&style.bold(&wrap("", &title, usize::from(style.width), 2)));
        out.push('\n');
        let width = usize::from(style.width);
        for rem in &c.remediations {
            let action = rem.action.clone().unwrap_or_else(|| rem.title.clone());
            if let Some(facts) = &rem.already {
                let done = format!("{} — already in effect ({facts})", rem.title);
                out.push_str(&wrap("  ", &done, width, 4));
                out.push('\n');
                out.push_str(&wrap("      next: ", &action, width, 12));
                out.push('\n');
                continue;
            }
            let favours = serde_json::to_value(rem.favours)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            out.push_str(&wrap("  ", &action, width, 4));
            out.push('\n');
            out.push_str(&wrap(
                "      ",
                &format!("{} (favours {favours})", rem.tradeoff),
                width,
                6,
            ));
            out.push('\n');
            if let Some(fits) = &rem.fits {
                out.push_str(&wrap("      measured: ", &evidence_line(fits), width, 16));
                out.push('\n');
            }
        }
        out.push('\n');
    }
}

/// The rules that could not be checked, and how to get what they miss.
fn unchecked(out: &mut String, d: &Diagnosis, style: Style) {
    if !d.unchecked.is_empty() {
        out.push_str(&format!("{}\n", style.bold("Not checked (data missing):")));
        let mut hints: Vec<&str> = Vec::new();
        let width = usize::from(style.width);
        for u in &d.unchecked {
            let line = format!("{} {} (missing {})", u.kind, u.rule, u.missing.join(", "));
            out.push_str(&wrap("  ", &line, width, 4));
            out.push('\n');
            for h in &u.hints {
                if !hints.contains(&h.as_str()) {
                    hints.push(h);
                }
            }
        }
        if !hints.is_empty() {
            out.push_str("To check them:\n");
            for h in hints {
                out.push_str(&wrap("  - ", h, width, 4));
                out.push('\n');
            }
        }
        out.push('\n');
    }
}

fn dedup(mut v: Vec<&str>) -> Vec<&str> {
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::shorten_repeats;

    #[test]
    fn window_statistics_are_shown_once_per_cell() {
        let full = "queue_depth 180 (window min 97, mean 138, max 180)";
        let lines = vec![
            format!("e2e_mean_seconds 45.9 s, {full}"),
            format!("ten or more requests waiting: {full}"),
            format!("the queue is still growing: {full}"),
        ];
        let out = shorten_repeats(lines);
        assert_eq!(out[0], format!("e2e_mean_seconds 45.9 s, {full}"));
        assert_eq!(out[1], "ten or more requests waiting: queue_depth 180");
        assert_eq!(out[2], "the queue is still growing: queue_depth 180");
    }
}
