//! Validation and compilation of playbook files into a `Playbook`.

use std::collections::HashMap;

use crate::catalog::Catalog;
use crate::condition::{Condition, ConditionError, Scope, Slot, Type};

use super::compiled::{
    Cause, Evidence, LoadError, LoadErrorKind, LoadErrors, Playbook, Remediation, Slo, Source,
    Symptom,
};
use super::graph;
use super::spec::{CauseSpec, EvidenceSpec, PlaybookFile, RemediationSpec, SloSpec, SymptomSpec};

/// Resolves condition names against the catalog and the playbooks' SLOs.
struct PlaybookScope<'a> {
    catalog: &'a Catalog,
    slos: &'a HashMap<String, usize>,
}

impl Scope for PlaybookScope<'_> {
    fn resolve(&self, name: &str) -> Option<(Slot, Type)> {
        if let Some(fact) = name.strip_prefix("fact.") {
            let i = self.catalog.fact(fact)?;
            return Some((Slot::Fact(i), self.catalog.facts()[i].ty.condition_type()));
        }
        if let Some(slo) = name.strip_prefix("slo.") {
            return self.slos.get(slo).map(|&i| (Slot::Slo(i), Type::Number));
        }
        self.catalog
            .signal(name)
            .map(|i| (Slot::Signal(i), Type::Number))
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .catalog
            .signals()
            .iter()
            .map(|s| s.name.clone())
            .collect();
        names.extend(
            self.catalog
                .facts()
                .iter()
                .map(|f| format!("fact.{}", f.name)),
        );
        names.extend(self.slos.keys().map(|s| format!("slo.{s}")));
        names.sort();
        names
    }
}

/// Finds where a rule's field text sits in its file, for error locations: the 1-based line and
/// column of `needle` at or after the line that defines `id: <rule_id>`.
fn locate(text: &str, rule_id: &str, needle: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let id_line = lines.iter().position(|l| {
        let t = l.trim_start().trim_start_matches("- ").trim_start();
        t.strip_prefix("id:")
            .map(|rest| rest.trim().trim_matches(|c| c == '"' || c == '\'') == rule_id)
            .unwrap_or(false)
    });
    let start = id_line.unwrap_or(0);
    if needle.is_empty() {
        return id_line.map(|l| (l + 1, 1));
    }
    let first = needle.lines().next().unwrap_or(needle);
    for (i, line) in lines.iter().enumerate().skip(start) {
        if let Some(byte) = line.find(first) {
            return Some((i + 1, line[..byte].chars().count() + 1));
        }
    }
    id_line.map(|l| (l + 1, 1))
}

struct Loader<'a> {
    catalog: &'a Catalog,
    errors: Vec<LoadError>,
}

impl Loader<'_> {
    fn error(&mut self, kind: LoadErrorKind, message: String) {
        self.errors.push(LoadError { kind, message });
    }

    fn condition(
        &mut self,
        scope: &PlaybookScope<'_>,
        src: Source<'_>,
        rule: (&str, &str),
        field: &str,
        text: &str,
        number: bool,
    ) -> Option<Condition> {
        let result = if number {
            Condition::compile_number(text, scope)
        } else {
            Condition::compile(text, scope)
        };
        match result {
            Ok(c) => Some(c),
            Err(errs) => {
                let origin = match locate(src.text, rule.1, text) {
                    Some((l, c)) => format!("{}:{l}:{c}", src.name),
                    None => src.name.to_string(),
                };
                let rule_label = format!("{} `{}`", rule.0, rule.1);
                for e in errs {
                    self.push_condition_error(&e, text, &origin, &rule_label, field);
                }
                None
            }
        }
    }

    fn push_condition_error(
        &mut self,
        e: &ConditionError,
        text: &str,
        origin: &str,
        rule: &str,
        field: &str,
    ) {
        self.error(
            LoadErrorKind::Condition,
            e.render(text, origin, rule, field),
        );
    }

    fn evidence(
        &mut self,
        scope: &PlaybookScope<'_>,
        src: Source<'_>,
        cause: &CauseSpec,
        field: &str,
        items: &[EvidenceSpec],
    ) -> Vec<Evidence> {
        let mut out = Vec::new();
        for (i, e) in items.iter().enumerate() {
            let f = format!("{field}[{i}].when");
            if !(e.weight.is_finite() && e.weight > 0.0) {
                let origin = at(src, &cause.id, &e.when);
                self.error(
                    LoadErrorKind::Incomplete,
                    format!(
                        "error: weight must be a positive number, got {}\n  --> {origin}, cause `{}`, field `{field}[{i}].weight`",
                        e.weight, cause.id
                    ),
                );
            }
            if let Some(when) = self.condition(scope, src, ("cause", &cause.id), &f, &e.when, false)
            {
                out.push(Evidence {
                    when,
                    weight: e.weight,
                    note: e.note.clone(),
                });
            }
        }
        out
    }
}

fn at(src: Source<'_>, id: &str, needle: &str) -> String {
    match locate(src.text, id, needle) {
        Some((l, c)) => format!("{}:{l}:{c}", src.name),
        None => src.name.to_string(),
    }
}

/// Loads, merges, validates and compiles playbook sources. Later sources override earlier ones
/// by id. Returns every error found, not just the first.
pub fn load(sources: &[Source<'_>], catalog: &Catalog) -> Result<Playbook, LoadErrors> {
    let mut loader = Loader {
        catalog,
        errors: Vec::new(),
    };

    // 1. Parse every file; collect definitions by id, later files replacing earlier ones.
    let files = parse_files(&mut loader, sources);
    // References cannot be checked against files that did not parse.
    if !loader.errors.is_empty() {
        return Err(LoadErrors(loader.errors));
    }
    let specs = Specs::collect(&mut loader, &files);

    let slo_index: HashMap<String, usize> = specs
        .slos
        .iter()
        .enumerate()
        .map(|(i, (_, s))| (s.id.clone(), i))
        .collect();
    let scope = PlaybookScope {
        catalog,
        slos: &slo_index,
    };
    let slos: Vec<Slo> = specs
        .slos
        .iter()
        .map(|(_, s)| Slo {
            id: s.id.clone(),
            default: s.default,
            title: s.title.clone(),
            why: s.why.clone(),
        })
        .collect();

    // 2. Compile conditions.
    let symptoms = compile_symptoms(&mut loader, &scope, &files, &specs);
    let remediations = compile_remediations(&mut loader, &scope, &files, &specs);
    let mut causes = compile_causes(&mut loader, &scope, &files, &specs);
    if !loader.errors.is_empty() {
        return Err(LoadErrors(loader.errors));
    }

    // 3. The graph: acyclic, every cause leads to a symptom; ancestors for root-cause analysis.
    let graph_errors = graph::validate(&mut causes, symptoms.len());
    for e in graph_errors {
        loader.error(e.0, e.1);
    }
    if !loader.errors.is_empty() {
        return Err(LoadErrors(loader.errors));
    }

    Ok(Playbook {
        slos,
        symptoms,
        causes,
        remediations,
        signal_names: catalog.signals().iter().map(|s| s.name.clone()).collect(),
        fact_names: loader
            .catalog
            .facts()
            .iter()
            .map(|f| f.name.clone())
            .collect(),
    })
}

/// Every source that parses as YAML, with its file; the others become errors.
fn parse_files<'s>(
    loader: &mut Loader<'_>,
    sources: &[Source<'s>],
) -> Vec<(Source<'s>, PlaybookFile)> {
    let mut files = Vec::new();
    for src in sources {
        if let Err(e) = crate::yaml_guard::check_depth(src.text) {
            loader.error(LoadErrorKind::Yaml, format!("error: {}:{e}", src.name));
            continue;
        }
        match serde_yaml::from_str::<Option<PlaybookFile>>(src.text) {
            Ok(f) => files.push((*src, f.unwrap_or_default())),
            Err(e) => loader.error(LoadErrorKind::Yaml, format!("error: {}: {e}", src.name)),
        }
    }
    files
}

/// The definitions in force, by kind: (index of the file, definition), later files replacing
/// earlier ones by id.
struct Specs<'f> {
    slos: Vec<(usize, &'f SloSpec)>,
    symptoms: Vec<(usize, &'f SymptomSpec)>,
    causes: Vec<(usize, &'f CauseSpec)>,
    remediations: Vec<(usize, &'f RemediationSpec)>,
}

impl<'f> Specs<'f> {
    /// Collects the definitions; ids repeated in one file, and ids that are both a symptom and
    /// a cause, are errors.
    fn collect(loader: &mut Loader<'_>, files: &'f [(Source<'_>, PlaybookFile)]) -> Specs<'f> {
        let mut specs = Specs {
            slos: Vec::new(),
            symptoms: Vec::new(),
            causes: Vec::new(),
            remediations: Vec::new(),
        };
        for (fi, (src, file)) in files.iter().enumerate() {
            check_unique(loader, *src, "SLO", file.slos.iter().map(|s| &s.id));
            check_unique(loader, *src, "symptom", file.symptoms.iter().map(|s| &s.id));
            check_unique(loader, *src, "cause", file.causes.iter().map(|s| &s.id));
            check_unique(
                loader,
                *src,
                "remediation",
                file.remediations.iter().map(|s| &s.id),
            );
            upsert(&mut specs.slos, file.slos.iter().map(|s| (fi, s)), |s| {
                &s.id
            });
            upsert(
                &mut specs.symptoms,
                file.symptoms.iter().map(|s| (fi, s)),
                |s| &s.id,
            );
            upsert(
                &mut specs.causes,
                file.causes.iter().map(|s| (fi, s)),
                |s| &s.id,
            );
            upsert(
                &mut specs.remediations,
                file.remediations.iter().map(|s| (fi, s)),
                |s| &s.id,
            );
        }
        // Symptoms and causes share one namespace in the graph.
        for (fi, c) in &specs.causes {
            if specs.symptoms.iter().any(|(_, s)| s.id == c.id) {
                let src = files[*fi].0;
                loader.error(
                    LoadErrorKind::DuplicateId,
                    format!(
                        "error: `{}` is both a symptom and a cause\n  --> {}",
                        c.id,
                        at(src, &c.id, "")
                    ),
                );
            }
        }
        specs
    }
}

fn compile_symptoms(
    loader: &mut Loader<'_>,
    scope: &PlaybookScope<'_>,
    files: &[(Source<'_>, PlaybookFile)],
    specs: &Specs<'_>,
) -> Vec<Symptom> {
    let mut symptoms = Vec::new();
    for (fi, s) in &specs.symptoms {
        let src = files[*fi].0;
        require_words(loader, src, "symptom", &s.id, &s.title, &s.why);
        let when = loader.condition(scope, src, ("symptom", &s.id), "when", &s.when, false);
        let critical_when = s.critical_when.as_ref().and_then(|c| {
            loader.condition(scope, src, ("symptom", &s.id), "critical_when", c, false)
        });
        let share = s
            .share
            .as_ref()
            .and_then(|c| loader.condition(scope, src, ("symptom", &s.id), "share", c, true));
        if let Some(when) = when {
            symptoms.push(Symptom {
                id: s.id.clone(),
                title: s.title.clone(),
                why: s.why.clone(),
                when,
                critical_when,
                share,
                file: src.name.to_string(),
            });
        }
    }
    symptoms
}

fn compile_remediations(
    loader: &mut Loader<'_>,
    scope: &PlaybookScope<'_>,
    files: &[(Source<'_>, PlaybookFile)],
    specs: &Specs<'_>,
) -> Vec<Remediation> {
    let mut remediations = Vec::new();
    for (fi, r) in &specs.remediations {
        let src = files[*fi].0;
        require_words(loader, src, "remediation", &r.id, &r.title, &r.why);
        if r.tradeoff.trim().is_empty() {
            loader.error(
                LoadErrorKind::Incomplete,
                format!(
                    "error: remediation `{}` has no `tradeoff`: every fix states what it costs\n  --> {}",
                    r.id,
                    at(src, &r.id, "")
                ),
            );
        }
        for engine in r.actions.keys() {
            if !KNOWN_ENGINES.contains(&engine.as_str()) {
                let hint = crate::suggest::did_you_mean(engine, KNOWN_ENGINES.iter().copied())
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                loader.error(
                    LoadErrorKind::UnknownReference,
                    format!(
                        "error: remediation `{}` has an action for unknown engine `{engine}`{hint} (engines: {})\n  --> {}",
                        r.id,
                        KNOWN_ENGINES.join(", "),
                        at(src, &r.id, engine)
                    ),
                );
            }
        }
        let in_effect = r.in_effect.as_ref().and_then(|e| {
            let c = loader.condition(
                scope,
                src,
                ("remediation", &r.id),
                "in_effect.when",
                &e.when,
                false,
            )?;
            Some((c, e.next.clone()))
        });
        let fits_when = r.fits_when.as_ref().and_then(|text| {
            loader.condition(scope, src, ("remediation", &r.id), "fits_when", text, false)
        });
        remediations.push(Remediation {
            id: r.id.clone(),
            title: r.title.clone(),
            why: r.why.clone(),
            favours: r.favours,
            tradeoff: r.tradeoff.clone(),
            actions: r.actions.clone(),
            in_effect,
            fits_when,
        });
    }
    remediations
}

fn compile_causes(
    loader: &mut Loader<'_>,
    scope: &PlaybookScope<'_>,
    files: &[(Source<'_>, PlaybookFile)],
    specs: &Specs<'_>,
) -> Vec<Cause> {
    let symptom_ids: Vec<&str> = specs.symptoms.iter().map(|(_, s)| s.id.as_str()).collect();
    let cause_ids: Vec<&str> = specs.causes.iter().map(|(_, c)| c.id.as_str()).collect();
    let remediation_ids: Vec<&str> = specs
        .remediations
        .iter()
        .map(|(_, r)| r.id.as_str())
        .collect();
    let mut causes = Vec::new();
    for (fi, c) in &specs.causes {
        let src = files[*fi].0;
        check_cause(loader, src, c);
        let advice = c
            .advice
            .as_ref()
            .and_then(|t| loader.condition(scope, src, ("cause", &c.id), "advice", t, false));
        let when = loader.condition(scope, src, ("cause", &c.id), "when", &c.when, false);
        let evidence = loader.evidence(scope, src, c, "evidence", &c.evidence);
        let against = loader.evidence(scope, src, c, "against", &c.against);
        let impact = c
            .impact
            .as_ref()
            .and_then(|text| loader.condition(scope, src, ("cause", &c.id), "impact", text, true));
        let leads_to = resolve_refs(loader, src, &c.id, "leads_to", &c.leads_to, &cause_ids);
        let explains = resolve_refs(loader, src, &c.id, "explains", &c.explains, &symptom_ids);
        let explains_when = explained_when(loader, scope, src, c, &symptom_ids);
        let rems = resolve_refs(
            loader,
            src,
            &c.id,
            "remediations",
            &c.remediations,
            &remediation_ids,
        );
        if let Some(when) = when {
            causes.push(Cause {
                id: c.id.clone(),
                title: c.title.clone(),
                why: c.why.clone(),
                severity: c.severity,
                advice,
                alarms_alone: c.alarms_alone,
                engines: c.engines.clone(),
                when,
                evidence,
                against,
                impact,
                impact_note: c.impact_note.clone(),
                leads_to,
                explains,
                explains_when,
                remediations: rems,
                ancestors: Vec::new(),
                file: src.name.to_string(),
            });
        }
    }
    causes
}

/// A cause's conditional explanations: each symptom resolved (as `explains` resolves them)
/// and its condition compiled. A symptom listed in both `explains` and `explains_when` is an
/// error: the condition would never matter.
fn explained_when(
    loader: &mut Loader<'_>,
    scope: &PlaybookScope<'_>,
    src: Source<'_>,
    c: &CauseSpec,
    symptom_ids: &[&str],
) -> Vec<(usize, Condition)> {
    let mut out = Vec::new();
    for (symptom, text) in &c.explains_when {
        if c.explains.contains(symptom) {
            loader.error(
                LoadErrorKind::DuplicateId,
                format!(
                    "error: symptom `{symptom}` is in both `explains` and `explains_when`\n  --> {}, cause `{}`, field `explains_when`",
                    at(src, &c.id, symptom),
                    c.id
                ),
            );
            continue;
        }
        let resolved = resolve_refs(
            loader,
            src,
            &c.id,
            "explains_when",
            std::slice::from_ref(symptom),
            symptom_ids,
        );
        let field = format!("explains_when.{symptom}");
        let cond = loader.condition(scope, src, ("cause", &c.id), &field, text, false);
        if let (Some(&i), Some(cond)) = (resolved.first(), cond) {
            out.push((i, cond));
        }
    }
    out
}

/// A cause explains itself, says what to do, and names only known engines.
fn check_cause(loader: &mut Loader<'_>, src: Source<'_>, c: &CauseSpec) {
    require_words(loader, src, "cause", &c.id, &c.title, &c.why);
    if c.remediations.is_empty() {
        loader.error(
            LoadErrorKind::Incomplete,
            format!(
                "error: cause `{}` has no remediation: every cause says what to do\n  --> {}",
                c.id,
                at(src, &c.id, "")
            ),
        );
    }
    for engine in &c.engines {
        if !KNOWN_ENGINES.contains(&engine.as_str()) || engine == "any" {
            loader.error(
                LoadErrorKind::UnknownReference,
                format!(
                    "error: cause `{}` names unknown engine `{engine}` (engines: {})\n  --> {}",
                    c.id,
                    KNOWN_ENGINES[..KNOWN_ENGINES.len() - 1].join(", "),
                    at(src, &c.id, engine)
                ),
            );
        }
    }
}

/// Engines a remediation action or cause may name; `any` applies to every engine.
pub const KNOWN_ENGINES: &[&str] = &["vllm", "sglang", "tgi", "trtllm", "llamacpp", "any"];

fn require_words(
    loader: &mut Loader<'_>,
    src: Source<'_>,
    kind: &str,
    id: &str,
    title: &str,
    why: &str,
) {
    for (field, value) in [("title", title), ("why", why)] {
        if value.trim().is_empty() {
            loader.error(
                LoadErrorKind::Incomplete,
                format!(
                    "error: {kind} `{id}` has no `{field}`: every rule explains itself\n  --> {}",
                    at(src, id, "")
                ),
            );
        }
    }
}

fn check_unique<'s>(
    loader: &mut Loader<'_>,
    src: Source<'_>,
    kind: &str,
    ids: impl Iterator<Item = &'s String>,
) {
    let mut seen = HashMap::new();
    for id in ids {
        if seen.insert(id.clone(), ()).is_some() {
            loader.error(
                LoadErrorKind::DuplicateId,
                format!(
                    "error: {kind} `{id}` is defined twice in {}\n  --> {}",
                    src.name,
                    at(src, id, "")
                ),
            );
        }
    }
}

fn upsert<'s, T: 's>(
    list: &mut Vec<(usize, &'s T)>,
    items: impl Iterator<Item = (usize, &'s T)>,
    id: impl Fn(&T) -> &String,
) {
    for (fi, item) in items {
        match list.iter().position(|(_, x)| id(x) == id(item)) {
            Some(i) => list[i] = (fi, item),
            None => list.push((fi, item)),
        }
    }
}

fn resolve_refs(
    loader: &mut Loader<'_>,
    src: Source<'_>,
    rule: &str,
    field: &str,
    names: &[String],
    known: &[&str],
) -> Vec<usize> {
    let mut out = Vec::new();
    for name in names {
        match known.iter().position(|k| k == name) {
            Some(i) => out.push(i),
            None => {
                let what = match field {
                    "leads_to" => "cause",
                    "explains" | "explains_when" => "symptom",
                    _ => "remediation",
                };
                let hint = crate::suggest::did_you_mean(name, known.iter().copied())
                    .map(|s| format!("\n   = help: did you mean `{s}`?"))
                    .unwrap_or_default();
                loader.error(
                    LoadErrorKind::UnknownReference,
                    format!(
                        "error: unknown {what} `{name}`\n  --> {}, cause `{rule}`, field `{field}`{hint}",
                        at(src, rule, name)
                    ),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_finds_the_expression_after_the_rule_id() {
        let text = "causes:\n  - id: a\n    when: x > 1\n  - id: b\n    when: x > 1\n";
        assert_eq!(locate(text, "b", "x > 1"), Some((5, 11)));
        assert_eq!(locate(text, "a", "x > 1"), Some((3, 11)));
        assert_eq!(locate(text, "b", ""), Some((4, 1)));
        assert_eq!(locate(text, "zzz", "nothing"), None);
    }
}
