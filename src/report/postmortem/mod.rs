//! The postmortem as text, Markdown, HTML (with SVG charts) or JSON; `diff` as text or
//! Markdown. Renderers only format what `crate::postmortem` found.

mod chart;
mod html;

use std::fmt::Write;

use llm_doctor_engine::report::Status;

use crate::postmortem::diff::Diff;
use crate::postmortem::{Incident, Kind, Postmortem, TargetPostmortem};
use crate::report::{evidence_line, with_unit};
use crate::rules::Rules;
use crate::time::{format_duration, format_time};

pub use chart::charts;
pub use html::html;

/// The JSON form (episodes, incidents, onsets, fleet).
pub fn json(pm: &Postmortem) -> String {
    serde_json::to_string_pretty(pm).unwrap_or_default() + "\n"
}

/// The heading line: the range and how it was judged.
fn range_line(pm: &Postmortem) -> String {
    format!(
        "{} .. {} ({}), judged every {} over a {} window; {} target(s)",
        format_time(pm.from_ms),
        format_time(pm.to_ms),
        format_duration((pm.to_ms - pm.from_ms) / 1000 * 1000),
        format_duration(pm.step_ms),
        format_duration(pm.window_ms),
        pm.targets.len()
    )
}

/// One character per stretch of time: `.` healthy, `-` unknown, `+` degraded, `#` critical;
/// each character shows the worst status of its stretch.
pub fn strip(status: &[Status], width: usize) -> String {
    if status.is_empty() {
        return String::new();
    }
    let width = width.min(status.len()).max(1);
    (0..width)
        .map(|c| {
            let a = c * status.len() / width;
            let b = ((c + 1) * status.len() / width).max(a + 1);
            match status[a..b].iter().max() {
                Some(Status::Critical) => '#',
                Some(Status::Degraded) => '+',
                Some(Status::Unknown) => '-',
                _ => '.',
            }
        })
        .collect()
}

fn steps_line(t: &TargetPostmortem) -> String {
    let s = t.steps;
    let mut parts = vec![format!("{} healthy", s.healthy)];
    for (n, w) in [
        (s.degraded, "degraded"),
        (s.critical, "critical"),
        (s.unknown, "unknown"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {w}"));
        }
    }
    format!("steps: {}", parts.join(", "))
}

fn incident_heading(k: usize, i: &Incident, step_ms: i64) -> String {
    format!(
        "Incident {}: {} .. {} ({}), {}; before: {}; after: {}",
        k + 1,
        format_time(i.start_ms),
        format_time(i.end_ms),
        format_duration(i.end_ms - i.start_ms + step_ms),
        i.worst.as_str(),
        i.before.as_str(),
        i.after.as_str()
    )
}

fn cause_line(rank: usize, c: &crate::postmortem::IncidentCause) -> String {
    format!(
        "{}. {} ({}): held {:.0} % of the incident, first at {} step(s), mean score {:.2}, strongest at {}",
        rank + 1,
        c.title,
        c.id,
        c.held_share * 100.0,
        c.first_steps,
        c.mean_score,
        format_time(c.peak_ms)
    )
}

fn onset_line(o: &crate::postmortem::Onset) -> String {
    let mut line = format!(
        "{}  {} {} {} (then {})  [{}",
        format_time(o.at_ms),
        o.signal,
        o.op,
        with_unit(&o.signal, o.threshold),
        with_unit(&o.signal, o.value),
        o.of.join(", ")
    );
    if !o.explains.is_empty() {
        let _ = write!(line, "; explains {}", o.explains.join(", "));
    }
    line.push(']');
    line
}

fn episode_line(e: &crate::postmortem::Episode, step_ms: i64) -> String {
    let peak = match &e.signal {
        Some(s) if e.kind == Kind::Symptom => format!("peak {s} {}", with_unit(s, e.peak)),
        _ if e.kind == Kind::Cause => format!("peak score {:.2}", e.peak),
        _ => "peak".to_string(),
    };
    format!(
        "{} ({}): {} .. {} ({}), {} at {}",
        e.title,
        e.id,
        format_time(e.start_ms),
        format_time(e.end_ms),
        format_duration(e.duration_ms() + step_ms),
        peak,
        format_time(e.peak_ms)
    )
}

/// What a fix costs, or that it is in effect already (its action is then the next step).
fn cost_or_already(f: &llm_doctor_engine::report::RemediationFinding) -> String {
    match &f.already {
        Some(facts) => format!("already in effect: {facts}; the action is the next step"),
        None => match &f.fits {
            Some(fits) => format!(
                "costs: {}; measured: {}",
                f.tradeoff.trim(),
                crate::report::evidence_line(fits)
            ),
            None => format!("costs: {}", f.tradeoff.trim()),
        },
    }
}

/// Text for the terminal.
pub fn table(pm: &Postmortem, _rules: &Rules) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Postmortem: {}", range_line(pm));
    let _ = writeln!(out, "Fleet: {}", pm.fleet.scope);
    for n in &pm.notes {
        let _ = writeln!(out, "note: {n}");
    }
    for t in &pm.targets {
        let engine = t.target.engine.as_deref().unwrap_or("no engine");
        let _ = writeln!(out, "\n== {} ({engine}) ==", t.name());
        let _ = writeln!(out, "{}", steps_line(t));
        let _ = writeln!(out, "timeline: [{}]", strip(&t.timeline.status, 72));
        if t.incidents.is_empty() {
            let _ = writeln!(out, "No incident: never degraded in the range.");
        }
        for (k, i) in t.incidents.iter().enumerate() {
            let _ = writeln!(out, "{}", incident_heading(k, i, t.step_ms));
            if !i.causes.is_empty() {
                let _ = writeln!(out, "  Causes, most to blame first:");
            }
            for (r, c) in i.causes.iter().enumerate() {
                let _ = writeln!(out, "    {}", cause_line(r, c));
                for e in c.finding.evidence.iter().filter(|e| e.result == Some(true)) {
                    let _ = writeln!(out, "       evidence: {}", evidence_line(e));
                }
                for f in &c.finding.remediations {
                    let _ = writeln!(
                        out,
                        "       fix: {}{}{}",
                        f.title,
                        f.action
                            .as_deref()
                            .map(|a| format!(": {a}"))
                            .unwrap_or_default(),
                        f.already
                            .as_deref()
                            .map(|facts| format!(" (already in effect: {facts})"))
                            .unwrap_or_default()
                    );
                }
            }
            if !i.onsets.is_empty() {
                let _ = writeln!(out, "  What moved first:");
                for o in &i.onsets {
                    let _ = writeln!(out, "    {}", onset_line(o));
                }
            }
            if !i.symptoms.is_empty() {
                let _ = writeln!(out, "  Symptoms:");
                for e in &i.symptoms {
                    let _ = writeln!(out, "    {}", episode_line(e, t.step_ms));
                }
            }
        }
    }
    if let Some(r) = &pm.requests {
        let _ = writeln!(out, "\n== Requests ==\n{}", r.summary());
        if let Some(u) = &r.upstreams {
            let _ = writeln!(out, "{u}");
        }
        if let Some(slow) = &r.slowest {
            let _ = writeln!(out, "slowest {} of {}:", slow.slow, slow.requests);
            for q in &slow.listed {
                let _ = writeln!(out, "  {} · ended {}", q.describe(), format_time(q.end_ms));
            }
            for n in slow.notes().iter().skip(1) {
                let _ = writeln!(out, "  {n}");
            }
        }
    }
    out
}

/// Markdown; `charts` is the folder (relative to the report) holding [`charts`]' files.
pub fn markdown(pm: &Postmortem, _rules: &Rules, charts: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Postmortem\n\n{}\n", range_line(pm));
    let _ = writeln!(out, "**Fleet:** {}\n", pm.fleet.scope);
    if !pm.fleet.hit.is_empty() && pm.targets.len() > 1 {
        let _ = writeln!(
            out,
            "| target | first hit | not healthy for | leading cause |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- |");
        for h in &pm.fleet.hit {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                h.target,
                format_time(h.first_ms),
                format_duration(h.unhealthy_ms),
                h.cause.as_deref().unwrap_or("—")
            );
        }
        out.push('\n');
    }
    for n in &pm.notes {
        let _ = writeln!(out, "> note: {n}\n");
    }
    let charted = chart::charted_indices(pm);
    for (ti, t) in pm.targets.iter().enumerate() {
        let engine = t.target.engine.as_deref().unwrap_or("no engine");
        let _ = writeln!(out, "## {} ({engine})\n", t.name());
        let _ = writeln!(
            out,
            "{}. Timeline (`.` healthy, `+` degraded, `#` critical, `-` unknown):\n\n```\n{}\n```\n",
            steps_line(t),
            strip(&t.timeline.status, 72)
        );
        if let Some(dir) = charts.filter(|_| charted.contains(&ti)) {
            for name in chart::chart_names(ti, t) {
                let _ = writeln!(out, "![{name}]({dir}/{name})");
            }
            out.push('\n');
        }
        if t.incidents.is_empty() {
            let _ = writeln!(out, "No incident: never degraded in the range.\n");
        }
        for (k, i) in t.incidents.iter().enumerate() {
            let _ = writeln!(out, "### {}\n", incident_heading(k, i, t.step_ms));
            if !i.causes.is_empty() {
                let _ = writeln!(out, "**Causes**, most to blame first:\n");
                for (r, c) in i.causes.iter().enumerate() {
                    let _ = writeln!(out, "{}", cause_line(r, c));
                    for e in c.finding.evidence.iter().filter(|e| e.result == Some(true)) {
                        let _ = writeln!(out, "   - evidence: {}", evidence_line(e));
                    }
                    for f in &c.finding.remediations {
                        let _ = writeln!(
                            out,
                            "   - fix: **{}**{} ({})",
                            f.title,
                            f.action
                                .as_deref()
                                .map(|a| format!(": `{a}`"))
                                .unwrap_or_default(),
                            cost_or_already(f)
                        );
                    }
                }
                out.push('\n');
            }
            if !i.onsets.is_empty() {
                let _ = writeln!(out, "**What moved first:**\n");
                let _ = writeln!(
                    out,
                    "| when | signal | crossed | value then | evidence of | explains |"
                );
                let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
                for o in &i.onsets {
                    let _ = writeln!(
                        out,
                        "| {} | `{}` | {} {} | {} | {} | {} |",
                        format_time(o.at_ms),
                        o.signal,
                        o.op,
                        with_unit(&o.signal, o.threshold),
                        with_unit(&o.signal, o.value),
                        o.of.join(", "),
                        o.explains.join(", ")
                    );
                }
                out.push('\n');
            }
            if !i.symptoms.is_empty() {
                let _ = writeln!(out, "**Symptoms:**\n");
                for e in &i.symptoms {
                    let _ = writeln!(out, "- {}", episode_line(e, t.step_ms));
                }
                out.push('\n');
            }
        }
    }
    if let Some(r) = &pm.requests {
        let _ = writeln!(out, "## Requests\n\n{}.\n", r.summary());
        if let Some(dir) = charts.filter(|_| !r.drawn.is_empty()) {
            let _ = writeln!(
                out,
                "![{}]({dir}/{})\n",
                chart::REQUESTS_CHART,
                chart::REQUESTS_CHART
            );
        }
        if let Some(u) = &r.upstreams {
            let _ = writeln!(out, "{u}.\n");
        }
        if let Some(slow) = &r.slowest {
            out.push_str(&crate::report::markdown::slowest_section(slow));
        }
    }
    out
}

/// `diff` as text.
pub fn diff_table(d: &Diff) -> String {
    let mut out = String::new();
    let at = |t: Option<i64>| t.map(format_time).unwrap_or_else(|| "-".into());
    let _ = writeln!(
        out,
        "Good: {} ending {}\nBad:  {} ending {}\n",
        d.good,
        at(d.good_at_ms),
        d.bad,
        at(d.bad_at_ms)
    );
    if !d.new_symptoms.is_empty() {
        let _ = writeln!(out, "New symptoms: {}", d.new_symptoms.join(", "));
    }
    if !d.new_causes.is_empty() {
        let _ = writeln!(out, "New causes: {}", d.new_causes.join(", "));
    }
    let _ = writeln!(out, "\nMoved most (in units of the signal's own spread):");
    for m in d.moves.iter().take(12) {
        let _ = writeln!(
            out,
            "  {:>+7.1}  {:<34} {} -> {}{}",
            m.score,
            m.signal,
            with_unit(&m.signal, m.good),
            with_unit(&m.signal, m.bad),
            if m.supports.is_empty() {
                String::new()
            } else {
                format!("  supports {}", m.supports.join(", "))
            }
        );
    }
    if !d.facts.is_empty() {
        let _ = writeln!(out, "\nFacts that differ:");
        for f in &d.facts {
            let _ = writeln!(
                out,
                "  {}: {} -> {}",
                f.fact,
                f.good.as_deref().unwrap_or("unknown"),
                f.bad.as_deref().unwrap_or("unknown")
            );
        }
    }
    out
}

/// `diff` as Markdown.
pub fn diff_markdown(d: &Diff) -> String {
    let mut out = String::new();
    let at = |t: Option<i64>| t.map(format_time).unwrap_or_else(|| "-".into());
    let _ = writeln!(
        out,
        "# What changed\n\nGood: `{}` ending {}; bad: `{}` ending {}.\n",
        d.good,
        at(d.good_at_ms),
        d.bad,
        at(d.bad_at_ms)
    );
    if !d.new_symptoms.is_empty() || !d.new_causes.is_empty() {
        let _ = writeln!(
            out,
            "New on the bad side: symptoms {}; causes {}.\n",
            list_or_none(&d.new_symptoms),
            list_or_none(&d.new_causes)
        );
    }
    let _ = writeln!(out, "| moved (spreads) | signal | good | bad | supports |");
    let _ = writeln!(out, "| ---: | --- | --- | --- | --- |");
    for m in d.moves.iter().take(12) {
        let _ = writeln!(
            out,
            "| {:+.1} | `{}` | {} | {} | {} |",
            m.score,
            m.signal,
            with_unit(&m.signal, m.good),
            with_unit(&m.signal, m.bad),
            m.supports.join(", ")
        );
    }
    if !d.facts.is_empty() {
        let _ = writeln!(out, "\n| fact | good | bad |\n| --- | --- | --- |");
        for f in &d.facts {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} |",
                f.fact,
                f.good.as_deref().unwrap_or("unknown"),
                f.bad.as_deref().unwrap_or("unknown")
            );
        }
    }
    out
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}
