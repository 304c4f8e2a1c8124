//! The postmortem as one self-contained HTML page: inline CSS, inline SVG, no scripts and
//! nothing fetched, so it can be attached to a ticket and opened anywhere.

use std::fmt::Write;

use llm_doctor_engine::report::Status;

use super::chart::target_charts;
use super::{cause_line, episode_line, incident_heading, range_line, steps_line};
use crate::postmortem::Postmortem;
use crate::report::{evidence_line, with_unit};
use crate::rules::Rules;
use crate::time::{format_duration, format_time};

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:980px;color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:4px}h2{margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:1.05em;margin-top:20px}.muted{color:#666}.fleet{background:#f4f6fa;border-left:4px solid #4a6fa5;padding:8px 12px}
table{border-collapse:collapse;margin:8px 0;font-size:.92em}td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f7f7f7}.critical{color:#b00020;font-weight:600}.degraded{color:#a86200;font-weight:600}.healthy{color:#1b7f3b;font-weight:600}
.chart{margin:6px 0}.strip{margin:4px 0 8px}code{background:#f3f3f3;padding:0 3px;border-radius:3px}li{margin:2px 0}";

/// Escapes text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page.
pub fn html(pm: &Postmortem, rules: &Rules, slos: &[f64]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>llm-doctor postmortem</title><style>{STYLE}</style></head><body>\n"
    );
    let _ = writeln!(
        out,
        "<h1>Postmortem</h1><p class=\"muted\">{}</p>",
        esc(&range_line(pm))
    );
    let _ = writeln!(
        out,
        "<p class=\"fleet\" id=\"fleet\"><b>Fleet:</b> {}</p>",
        esc(&pm.fleet.scope)
    );
    if pm.targets.len() > 1 && !pm.fleet.hit.is_empty() {
        let _ = writeln!(out, "<table id=\"hit\"><tr><th>target</th><th>first hit</th><th>not healthy for</th><th>leading cause</th></tr>");
        for h in &pm.fleet.hit {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&h.target),
                format_time(h.first_ms),
                format_duration(h.unhealthy_ms),
                esc(h.cause.as_deref().unwrap_or("—"))
            );
        }
        out.push_str("</table>\n");
    }
    for n in &pm.notes {
        let _ = writeln!(out, "<p class=\"muted\">note: {}</p>", esc(n));
    }
    let charted = super::chart::charted_indices(pm);
    for (ti, t) in pm.targets.iter().enumerate() {
        let engine = t.target.engine.as_deref().unwrap_or("no engine");
        let _ = writeln!(
            out,
            "<section class=\"target\"><h2>{} <span class=\"muted\">({})</span></h2>",
            esc(&t.name()),
            esc(engine)
        );
        let _ = writeln!(out, "<p>{}</p>", esc(&steps_line(t)));
        out.push_str(&strip_svg(&t.timeline.status, &t.timeline.times));
        if charted.contains(&ti) {
            for svg in target_charts(t, rules, slos) {
                let _ = writeln!(out, "<div class=\"chart\">{svg}</div>");
            }
        }
        if t.incidents.is_empty() {
            out.push_str("<p class=\"healthy\">No incident: never degraded in the range.</p>\n");
        }
        for (k, i) in t.incidents.iter().enumerate() {
            let class = match i.worst {
                Status::Critical => "critical",
                _ => "degraded",
            };
            let _ = writeln!(
                out,
                "<h3 class=\"{class}\">{}</h3>",
                esc(&incident_heading(k, i, t.step_ms))
            );
            if !i.causes.is_empty() {
                out.push_str("<p><b>Causes</b>, most to blame first:</p><ol class=\"causes\">\n");
                for (r, c) in i.causes.iter().enumerate() {
                    let line = cause_line(r, c);
                    let line = line
                        .split_once(". ")
                        .map_or(line.as_str(), |(_, rest)| rest);
                    let _ = write!(out, "<li>{}<ul>", esc(line));
                    for e in c.finding.evidence.iter().filter(|e| e.result == Some(true)) {
                        let _ = write!(out, "<li>evidence: {}</li>", esc(&evidence_line(e)));
                    }
                    for f in &c.finding.remediations {
                        let _ = write!(
                            out,
                            "<li>fix: <b>{}</b>{} <span class=\"muted\">({})</span></li>",
                            esc(&f.title),
                            f.action
                                .as_deref()
                                .map(|a| format!(": <code>{}</code>", esc(a)))
                                .unwrap_or_default(),
                            esc(&super::cost_or_already(f))
                        );
                    }
                    out.push_str("</ul></li>\n");
                }
                out.push_str("</ol>\n");
            }
            if !i.onsets.is_empty() {
                out.push_str("<p><b>What moved first</b></p><table class=\"onsets\"><tr><th>when</th><th>signal</th><th>crossed</th><th>value then</th><th>evidence of</th><th>explains</th></tr>\n");
                for o in &i.onsets {
                    let _ = writeln!(
                        out,
                        "<tr><td>{}</td><td><code>{}</code></td><td>{} {}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                        format_time(o.at_ms),
                        esc(&o.signal),
                        esc(&o.op),
                        esc(&with_unit(&o.signal, o.threshold)),
                        esc(&with_unit(&o.signal, o.value)),
                        esc(&o.of.join(", ")),
                        esc(&o.explains.join(", "))
                    );
                }
                out.push_str("</table>\n");
            }
            if !i.symptoms.is_empty() {
                out.push_str("<p><b>Symptoms</b></p><ul class=\"symptoms\">\n");
                for e in &i.symptoms {
                    let _ = writeln!(out, "<li>{}</li>", esc(&episode_line(e, t.step_ms)));
                }
                out.push_str("</ul>\n");
                for f in &i.symptom_findings {
                    let _ = write!(out, "<p class=\"muted\">{}: ", esc(&f.title));
                    let lines: Vec<String> =
                        f.evidence.iter().map(|e| esc(&evidence_line(e))).collect();
                    let _ = writeln!(out, "{}</p>", lines.join("; "));
                }
            }
        }
        out.push_str("</section>\n");
    }
    if let Some(r) = &pm.requests {
        out.push_str(&requests_section(r));
    }
    out.push_str("<p class=\"muted\">Made by llm-doctor postmortem.</p></body></html>\n");
    out
}

/// The requests of the range: what was read, the chart of each request's split, the slowest.
fn requests_section(r: &crate::postmortem::requests::RequestsView) -> String {
    let mut out = format!(
        "<section class=\"requests\" id=\"requests\"><h2>Requests</h2><p>{}</p>\n",
        esc(&r.summary())
    );
    if let Some(svg) = super::chart::requests_chart(r) {
        let _ = writeln!(out, "<div class=\"chart\">{svg}</div>");
    }
    if let Some(u) = &r.upstreams {
        let _ = writeln!(out, "<p>{}</p>", esc(u));
    }
    if let Some(slow) = &r.slowest {
        let row = |cells: &[String], tag: &str| {
            cells
                .iter()
                .map(|c| format!("<{tag}>{}</{tag}>", esc(c)))
                .collect::<String>()
        };
        let head: Vec<String> = crate::traffic::slowest::COLUMNS
            .iter()
            .map(|c| c.to_string())
            .collect();
        let _ = writeln!(
            out,
            "<p><b>Slowest {} of {}</b></p><table class=\"slowest\"><tr>{}</tr>",
            slow.slow,
            slow.requests,
            row(&head, "th")
        );
        for q in &slow.listed {
            let _ = writeln!(out, "<tr>{}</tr>", row(&q.cells(), "td"));
        }
        out.push_str("</table>\n");
        for n in slow.notes().iter().skip(1) {
            let _ = writeln!(out, "<p>{}</p>", esc(n));
        }
    }
    out.push_str("</section>\n");
    out
}

/// The status strip: one rectangle per stretch of steps, coloured by its worst status.
fn strip_svg(status: &[Status], times: &[i64]) -> String {
    const W: usize = 760;
    let n = status.len().max(1);
    let cols = n.min(W);
    let mut out = format!(
        "<svg class=\"strip\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"30\" viewBox=\"0 0 {W} 30\" role=\"img\" aria-label=\"status over time\">"
    );
    for c in 0..cols {
        let a = c * n / cols;
        let b = ((c + 1) * n / cols).max(a + 1).min(n);
        let worst = status[a..b]
            .iter()
            .max()
            .copied()
            .unwrap_or(Status::Unknown);
        let color = match worst {
            Status::Critical => "#d62728",
            Status::Degraded => "#ff9f1c",
            Status::Healthy => "#2ca02c",
            Status::Unknown => "#bbbbbb",
        };
        let x0 = c * W / cols;
        let x1 = (c + 1) * W / cols;
        let _ = write!(
            out,
            "<rect x=\"{x0}\" y=\"0\" width=\"{}\" height=\"18\" fill=\"{color}\"/>",
            x1 - x0
        );
    }
    if let (Some(first), Some(last)) = (times.first(), times.last()) {
        let _ = write!(
            out,
            "<text x=\"0\" y=\"29\" font-size=\"10\" font-family=\"sans-serif\">{}</text><text x=\"{W}\" y=\"29\" font-size=\"10\" font-family=\"sans-serif\" text-anchor=\"end\">{}</text>",
            format_time(*first),
            format_time(*last)
        );
    }
    out.push_str("</svg>\n");
    out
}
