//! `signals`: the catalog's signals (and which adapters provide each) and facts.

use anyhow::Result;

use super::format::Format;
use super::outcome::Outcome;
use crate::rules::load_rules;

/// Runs `signals`: JSON, Markdown tables, or two terminal tables.
pub fn run(format: Format) -> Result<Outcome> {
    let rules = load_rules(None)?;
    let c = &rules.catalog;
    let provided_by = |name: &str| {
        let by: Vec<&str> = rules
            .adapters
            .list
            .iter()
            .filter(|a| a.signals.contains_key(name))
            .map(|a| a.name.as_str())
            .collect();
        if by.is_empty() {
            "--signal".to_string()
        } else {
            by.join(", ")
        }
    };
    let stdout = if format == Format::Json {
        let v = serde_json::json!({"signals": c.signals(), "facts": c.facts()});
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else if format == Format::Markdown {
        let mut out = String::from("## Signals\n\n| signal | unit | group | provided by | description |\n| --- | --- | --- | --- | --- |\n");
        for s in c.signals() {
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | {} |\n",
                s.name,
                s.unit,
                s.group,
                provided_by(&s.name),
                s.description.replace('|', "\\|")
            ));
        }
        out.push_str("\n## Facts\n\n| fact | type | description |\n| --- | --- | --- |\n");
        for x in c.facts() {
            out.push_str(&format!(
                "| `{}` | {} | {} |\n",
                x.name,
                format!("{:?}", x.ty).to_lowercase(),
                x.description.replace('|', "\\|")
            ));
        }
        out
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
            t.add_row(vec![
                s.name.clone(),
                s.unit.clone(),
                s.group.clone(),
                provided_by(&s.name),
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
