//! Renderers: the diagnosis as a terminal table, Markdown or JSON.
//!
//! Renderers only format: every number they print is in the diagnosis. Units come from the
//! canonical names (`_seconds`, `_ratio`, `_per_second`), so a value always prints with its unit.

pub mod explain;
pub mod graph;
pub mod json;
pub mod markdown;
pub mod postmortem;
pub mod table;
pub mod why;

use llm_doctor_engine::report::{Diagnosis, EvidenceItem, RuleCheck};

use crate::time::{format_duration, format_time};
use serde::Serialize;

/// One target's diagnosis with notes about how its input was assembled.
#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    /// The diagnosis.
    #[serde(flatten)]
    pub diagnosis: Diagnosis,
    /// Joins, guesses and caveats.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// How each rule asked about (`--why`) judged this target, fired or not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<RuleCheck>,
}

/// Everything one `diagnose` run found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// One diagnosis per target.
    pub targets: Vec<TargetReport>,
    /// Sources that failed, with the reason.
    pub errors: Vec<String>,
    /// The slowest requests read beside the metrics (gateway logs, engine traces), each with
    /// where its time went, and what they share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowest_requests: Option<crate::traffic::slowest::Slowest>,
}

/// A number with few significant digits.
pub fn number(v: f64) -> String {
    let a = v.abs();
    let s = if a == 0.0 {
        "0".to_string()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    };
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A value with the unit its signal name implies.
pub fn with_unit(name: &str, v: f64) -> String {
    if name.ends_with("_seconds") {
        if v.abs() < 1.0 && v != 0.0 {
            format!("{} ms", number(v * 1000.0))
        } else {
            format!("{} s", number(v))
        }
    } else if name.ends_with("_ratio")
        || name == "slo.error_ratio"
        || name == "slo.truncation_ratio"
    {
        format!("{} %", number(v * 100.0))
    } else if name.ends_with("bytes_per_second") {
        format!("{} GB/s", number(v / 1e9))
    } else if name.ends_with("tokens_per_second") {
        format!("{} tok/s", number(v))
    } else if name.ends_with("_per_second") {
        format!("{}/s", number(v))
    } else if name.ends_with("_celsius") {
        format!("{} °C", number(v))
    } else if name.ends_with("_cores") {
        format!("{} cores", number(v))
    } else {
        number(v)
    }
}

/// What a diagnosis says when fired symptoms have no measured cause behind them: plainly that
/// nothing read explains them, and where the explanation would be. None when every fired
/// symptom is explained by a fault.
pub fn unexplained_sentence(d: &llm_doctor_engine::report::Diagnosis) -> Option<String> {
    if d.unexplained.is_empty() {
        return None;
    }
    let unread = if d.unchecked.is_empty() {
        String::new()
    } else {
        format!(
            "; {} rule(s) could not be checked for want of data (below)",
            d.unchecked.len()
        )
    };
    Some(format!(
        "No measured cause explains {}. What would: the server's own logs (crashes, \
         out-of-memory errors, refusals), its restarts, and per-request records{unread}.",
        d.unexplained.join(", ")
    ))
}

/// One evidence item in one line: `kv_cache_usage_ratio 99.5 % (> 95 %)` for a simple
/// comparison, else the playbook's note (or the condition) with the known values it read.
pub fn evidence_line(e: &EvidenceItem) -> String {
    if let (Some(signal), Some(value), Some(op), Some(threshold)) =
        (&e.signal, e.value, e.op, e.threshold)
    {
        let line = format!(
            "{signal} {} ({op} {})",
            with_unit(signal, value),
            with_unit(signal, threshold)
        );
        return match &e.note {
            Some(n) => format!("{n}: {line}"),
            None => line,
        };
    }
    let values: Vec<String> = e
        .values
        .iter()
        .filter(|(name, _)| !name.starts_with("slo."))
        .filter_map(|(name, v)| match v {
            llm_doctor_engine::report::ShownValue::Number(n) => {
                Some(match e.window_stats.get(name) {
                    Some(st) if st.min != st.max => format!(
                        "{name} {} (window min {}, mean {}, max {})",
                        with_unit(name, *n),
                        with_unit(name, st.min),
                        with_unit(name, st.mean),
                        with_unit(name, st.max)
                    ),
                    _ => format!("{name} {}", with_unit(name, *n)),
                })
            }
            llm_doctor_engine::report::ShownValue::Fact(f) => Some(format!("{name} = {f}")),
            llm_doctor_engine::report::ShownValue::Missing(_) => None,
        })
        .collect();
    match (&e.note, values.is_empty()) {
        (Some(n), true) => n.clone(),
        (Some(n), false) => format!("{n}: {}", values.join(", ")),
        (None, false) => values.join(", "),
        (None, true) => e.condition.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

/// The heading of a target: engine, model, identity, time frame.
pub fn heading(d: &Diagnosis) -> String {
    let mut parts = Vec::new();
    parts.push(
        d.target
            .engine
            .clone()
            .unwrap_or_else(|| "unknown engine".to_string()),
    );
    if let Some(llm_doctor_engine::FactValue::Str(m)) = d.facts.get("model") {
        parts.push(m.clone());
    }
    for l in ["namespace", "pod", "instance", "host"] {
        if let Some(v) = d.target.labels.get(l) {
            parts.push(v.clone());
        }
    }
    parts.push(match (d.window.end_ms, d.window.length_ms) {
        (Some(end), Some(len)) => format!(
            "{} window ending {}",
            format_duration(len),
            format_time(end)
        ),
        _ => "lifetime averages (no timestamps)".to_string(),
    });
    parts.join(" · ")
}

/// `text` after `lead`, wrapped at spaces to `width` columns, continuation lines indented to
/// `indent` columns.
pub(crate) fn wrap(lead: &str, text: &str, width: usize, indent: usize) -> String {
    let mut out = lead.to_string();
    let mut col = console::measure_text_width(lead);
    let pad = " ".repeat(indent);
    for (i, word) in text.split(' ').enumerate() {
        let w = console::measure_text_width(word);
        if i > 0 && col + 1 + w > width && col > indent {
            out.push('\n');
            out.push_str(&pad);
            col = indent;
        } else if i > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += w;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(with_unit("ttft_p99_seconds", 138.0), "138 s");
        assert_eq!(with_unit("ttft_p99_seconds", 0.25), "250 ms");
        assert_eq!(with_unit("kv_cache_usage_ratio", 0.995), "99.5 %");
        assert_eq!(with_unit("preemptions_per_second", 0.29), "0.29/s");
        assert_eq!(with_unit("queue_depth", 184.0), "184");
        assert_eq!(with_unit("pcie_bytes_per_second", 2.5e10), "25 GB/s");
    }
}
