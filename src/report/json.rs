//! JSON output: the contract of SPEC §7, `{"targets": [...], "errors": [...]}`.

use super::Report;

/// The report as pretty-printed JSON.
pub fn render(report: &Report) -> String {
    let mut s = serde_json::to_string_pretty(report)
        .unwrap_or_else(|e| format!("{{\"errors\": [\"{e}\"]}}"));
    s.push('\n');
    s
}
