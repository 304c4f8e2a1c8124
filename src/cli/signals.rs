//! `signals`: the catalog's signals (and which adapters provide each) and facts.

use anyhow::Result;

use super::format::Format;
use super::outcome::Outcome;
use crate::rules::load_rules;

/// Runs `signals`: JSON, or two tables (Markdown is drawn as the table).
pub fn run(format: Format) -> Result<Outcome> {
    let rules = load_rules(None)?;
    let c = &rules.catalog;
    let stdout = if format == Format::Json {
        let v = serde_json::json!({"signals": c.signals(), "facts": c.facts()});
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else {
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::NOTHING);
        t.set_header(vec![
            "signal",
            "unit",
            "group",
            "provided by",
            "description",
        ]);
        for s in c.signals() {
            let by: Vec<&str> = rules
                .adapters
                .list
                .iter()
                .filter(|a| a.signals.contains_key(&s.name))
                .map(|a| a.name.as_str())
                .collect();
            t.add_row(vec![
                s.name.clone(),
                s.unit.clone(),
                s.group.clone(),
                if by.is_empty() {
                    "--signal".into()
                } else {
                    by.join(", ")
                },
                s.description.clone(),
            ]);
        }
        let mut f = comfy_table::Table::new();
        f.load_style(comfy_table::presets::NOTHING);
        f.set_header(vec!["fact", "type", "description"]);
        for x in c.facts() {
            f.add_row(vec![
                x.name.clone(),
                format!("{:?}", x.ty).to_lowercase(),
                x.description.clone(),
            ]);
        }
        format!("SIGNALS\n{t}\n\nFACTS\n{f}\n")
    };
    Ok(Outcome { stdout, code: 0 })
}
