//! `rules explain ID`: a rule in plain words, with its conditions and fixes.

use anyhow::{bail, Result};
use llm_doctor_engine::Playbook;

use crate::rules::Rules;

/// Explains a symptom, cause, remediation, SLO, signal or fact by id.
pub fn explain(rules: &Rules, id: &str) -> Result<String> {
    let pb = &rules.playbook;
    if let Some(i) = pb.symptom(id) {
        return Ok(symptom(pb, i));
    }
    if let Some(i) = pb.cause(id) {
        return Ok(cause(pb, i));
    }
    if let Some(i) = pb.remediation(id) {
        return Ok(remediation(pb, i));
    }
    if let Some(s) = pb
        .slos
        .iter()
        .find(|s| s.id == id || format!("slo.{}", s.id) == id)
    {
        return Ok(format!(
            "SLO {} = {} (override with --slo {}=VALUE)\n{}\n{}\n",
            s.id, s.default, s.id, s.title, s.why
        ));
    }
    if let Some(s) = rules.catalog.signals().iter().find(|s| s.name == id) {
        return Ok(format!(
            "signal {} ({}): {}\n",
            s.name, s.unit, s.description
        ));
    }
    if let Some(f) = rules
        .catalog
        .facts()
        .iter()
        .find(|f| f.name == id || format!("fact.{}", f.name) == id)
    {
        return Ok(format!("fact {}: {}\n", f.name, f.description));
    }
    let all = pb
        .symptoms
        .iter()
        .map(|s| s.id.as_str())
        .chain(pb.causes.iter().map(|c| c.id.as_str()))
        .chain(pb.remediations.iter().map(|r| r.id.as_str()))
        .chain(rules.catalog.signals().iter().map(|s| s.name.as_str()));
    match llm_doctor_engine::suggest::did_you_mean(id, all) {
        Some(s) => bail!("no rule, signal or fact named `{id}` (did you mean `{s}`?)"),
        None => bail!("no rule, signal or fact named `{id}`"),
    }
}

/// A symptom: what fires it, and the causes that explain it.
fn symptom(pb: &Playbook, i: usize) -> String {
    let mut out = String::new();
    let s = &pb.symptoms[i];
    out.push_str(&format!(
        "symptom {}: {}\n\n{}\n\nfires when: {}\n",
        s.id,
        s.title,
        s.why,
        s.when.source()
    ));
    if let Some(c) = &s.critical_when {
        out.push_str(&format!("critical when: {}\n", c.source()));
    }
    let causes: Vec<String> = pb
        .causes
        .iter()
        .filter_map(|c| {
            if c.explains.contains(&i) {
                Some(c.id.clone())
            } else {
                (c.explains_when.iter().any(|(s, _)| *s == i))
                    .then(|| format!("{} (when it holds)", c.id))
            }
        })
        .collect();
    out.push_str(&format!("explained by: {}\n", causes.join(", ")));
    out
}

/// A cause: its gate, evidence, impact, the graph around it and its remediations.
fn cause(pb: &Playbook, i: usize) -> String {
    let mut out = String::new();
    let c = &pb.causes[i];
    out.push_str(&format!("cause {}: {}\n\n{}\n\n", c.id, c.title, c.why));
    if !c.engines.is_empty() {
        out.push_str(&format!("engines: {}\n", c.engines.join(", ")));
    }
    out.push_str(&format!("fires when: {}\n", c.when.source()));
    for e in &c.evidence {
        out.push_str(&format!(
            "  evidence (weight {}): {}\n",
            e.weight,
            e.when.source()
        ));
    }
    for e in &c.against {
        out.push_str(&format!(
            "  against (weight {}): {}\n",
            e.weight,
            e.when.source()
        ));
    }
    if let Some(x) = &c.impact {
        out.push_str(&format!(
            "impact: {} ({})\n",
            x.source(),
            c.impact_note.as_deref().unwrap_or("")
        ));
    }
    let names = |v: &[usize], f: &dyn Fn(usize) -> String| {
        v.iter().map(|&i| f(i)).collect::<Vec<_>>().join(", ")
    };
    if !c.leads_to.is_empty() {
        out.push_str(&format!(
            "leads to: {}\n",
            names(&c.leads_to, &|i| pb.causes[i].id.clone())
        ));
    }
    out.push_str(&format!(
        "explains: {}\n",
        names(&c.explains, &|i| pb.symptoms[i].id.clone())
    ));
    for (s, when) in &c.explains_when {
        out.push_str(&format!(
            "explains {} when: {}\n",
            pb.symptoms[*s].id,
            when.source()
        ));
    }
    out.push_str("\nremediations:\n");
    for &r in &c.remediations {
        let r = &pb.remediations[r];
        out.push_str(&format!(
            "  {} — {} (tradeoff: {})\n",
            r.id, r.title, r.tradeoff
        ));
    }
    out
}

/// A remediation: what it favours, what it costs, and its action per engine.
fn remediation(pb: &Playbook, i: usize) -> String {
    let mut out = String::new();
    let r = &pb.remediations[i];
    out.push_str(&format!(
        "remediation {}: {}\n\n{}\n\nfavours: {:?}\ntradeoff: {}\n",
        r.id, r.title, r.why, r.favours, r.tradeoff
    ));
    for (engine, action) in &r.actions {
        out.push_str(&format!("  {engine}: {action}\n"));
    }
    out
}

/// `explain`'s text as a Markdown page: its first line the heading, its first paragraph the
/// why, the conditions and references kept as written in a text block.
pub fn markdown(text: &str) -> String {
    let mut parts = text.trim_end().splitn(3, "\n\n");
    let heading = parts.next().unwrap_or_default();
    let mut out = format!("# {heading}\n");
    if let Some(why) = parts.next() {
        out.push_str(&format!("\n{why}\n"));
    }
    if let Some(rest) = parts.next() {
        out.push_str(&format!("\n```text\n{rest}\n```\n"));
    }
    out
}
