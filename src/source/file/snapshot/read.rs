//! Reading: a snapshot or timeline file checked against the catalog (every problem reported,
//! with line and column and "did you mean") and turned into prepared snapshots.

use std::fmt;

use llm_doctor_engine::condition::WindowStats;
use llm_doctor_engine::snapshot::SnapshotError;
use llm_doctor_engine::suggest::did_you_mean;
use llm_doctor_engine::{Catalog, FactValue, SignalValue, Snapshot, Target, Window};

use super::doc::{
    format_time_ms, from_text, FactDoc, Named, Peek, PointDoc, SignalDoc, SnapshotDoc, TargetDoc,
    TimelineDoc, WindowDoc, DEFAULT_SOURCE, SNAPSHOT_V1, TIMELINE_V1,
};
use super::error::SnapshotFileError;
use crate::prepared::Prepared;
use crate::time::{parse_duration, parse_time};

/// Cheap content check: the first key is `llm_doctor` (after blank lines, comments, a YAML
/// `---` or a byte-order mark).
pub fn looks_like(text: &str) -> bool {
    let t = text.trim_start_matches('\u{feff}').trim_start();
    if let Some(rest) = t.strip_prefix('{') {
        return rest.trim_start().starts_with("\"llm_doctor\"");
    }
    for line in t.lines().take(64) {
        let l = line.trim_end();
        if l.is_empty() || l.starts_with('#') || l == "---" {
            continue;
        }
        // `llm_doctor:x 1` would be an exposition sample; the YAML key needs a space or an end.
        return l
            .strip_prefix("llm_doctor:")
            .or_else(|| l.strip_prefix("\"llm_doctor\":"))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']));
    }
    false
}

/// Parses a snapshot or timeline file into snapshots for `catalog`, picking timeline points
/// at `at_ms` (None = the newest). Every problem is reported, one per line, each starting with
/// `file`.
pub fn parse(
    text: &str,
    file: &str,
    catalog: &Catalog,
    at_ms: Option<i64>,
) -> Result<Vec<Prepared>, SnapshotFileError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let json = text.trim_start().starts_with('{');
    let peek: Peek = from_text(text, json, file)?;
    let mut ctx = Ctx {
        file,
        text,
        catalog,
        errors: Vec::new(),
    };
    let out = match peek.llm_doctor.as_deref() {
        Some(SNAPSHOT_V1) => {
            let doc: SnapshotDoc = from_text(text, json, file)?;
            parse_snapshot(&mut ctx, doc, at_ms)
        }
        Some(TIMELINE_V1) => {
            let doc: TimelineDoc = from_text(text, json, file)?;
            parse_timeline(&mut ctx, doc, at_ms)
        }
        Some(other) => {
            return Err(SnapshotFileError::Unsupported {
                file: file.to_string(),
                found: other.to_string(),
            })
        }
        None => return Err(SnapshotFileError::NotSnapshot(file.to_string())),
    };
    if ctx.errors.is_empty() {
        Ok(out)
    } else {
        Err(SnapshotFileError::Problems(ctx.errors))
    }
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
    catalog: &'a Catalog,
    errors: Vec<String>,
}

impl Ctx<'_> {
    fn error(&mut self, place: &str, message: impl fmt::Display) {
        self.errors
            .push(format!("{}: {place}: {message}", self.file));
    }

    /// An unknown-name error with its line, when the name can be found, and a suggestion.
    fn unknown(&mut self, place: &str, kind: &str, name: &str) {
        let candidates: Vec<&str> = match kind {
            "fact" => self
                .catalog
                .facts()
                .iter()
                .map(|f| f.name.as_str())
                .collect(),
            _ => self
                .catalog
                .signals()
                .iter()
                .map(|s| s.name.as_str())
                .collect(),
        };
        let at = locate(self.text, name)
            .map(|(l, c)| format!(" at line {l} column {c}"))
            .unwrap_or_default();
        let hint = did_you_mean(name, candidates.into_iter())
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_else(|| " (`llm-doctor signals` lists the catalog)".to_string());
        self.error(place, format_args!("unknown {kind} `{name}`{at}{hint}"));
    }
}

fn parse_snapshot(ctx: &mut Ctx<'_>, doc: SnapshotDoc, at_ms: Option<i64>) -> Vec<Prepared> {
    if doc.targets.is_empty() {
        ctx.errors.push(format!(
            "{}: `targets` is empty: nothing to diagnose",
            ctx.file
        ));
    }
    let mut out = Vec::new();
    for (i, t) in doc.targets.into_iter().enumerate() {
        let place = place(i, &t.target);
        let window = match parse_window(t.window.as_ref()) {
            Ok(w) => w,
            Err(e) => {
                ctx.error(&place, e);
                Window::default()
            }
        };
        let mut snapshot = Snapshot::new(ctx.catalog, target_of(&t.target));
        snapshot.window = window;
        fill_signals(ctx, &mut snapshot, &place, &t.signals);
        fill_facts(ctx, &mut snapshot, &place, &t.target, &t.facts);
        fill_hints(ctx, &mut snapshot, &place, &t.hints);
        let mut notes = t.notes;
        if let (Some(at), Some(end)) = (at_ms, snapshot.window.end_ms) {
            if at != end {
                notes.push(format!(
                    "{} is a snapshot of one instant (window ending {}): --at {} does not move it",
                    ctx.file,
                    format_time_ms(end),
                    format_time_ms(at)
                ));
            }
        }
        out.push(Prepared { snapshot, notes });
    }
    out
}

fn parse_timeline(ctx: &mut Ctx<'_>, doc: TimelineDoc, at_ms: Option<i64>) -> Vec<Prepared> {
    if doc.targets.is_empty() {
        ctx.errors.push(format!(
            "{}: `targets` is empty: nothing to diagnose",
            ctx.file
        ));
    }
    let mut out = Vec::new();
    for (i, t) in doc.targets.into_iter().enumerate() {
        let place = place(i, &t.target);
        let length_ms = match t.window.as_ref().map(|w| parse_length(&w.length)) {
            Some(Err(e)) => {
                ctx.error(&place, format_args!("window.length: {e}"));
                None
            }
            Some(Ok(l)) => Some(l),
            None => None,
        };
        let Some(points) = timeline_points(ctx, &place, &t.points) else {
            continue;
        };
        let Some(chosen) = pick_point(ctx, &place, &points, at_ms) else {
            continue;
        };
        let (end, point) = points[chosen];
        let mut snapshot = Snapshot::new(ctx.catalog, target_of(&t.target));
        snapshot.window = Window {
            end_ms: Some(end),
            length_ms,
            lifetime: false,
        };
        fill_signals(ctx, &mut snapshot, &place, &point.signals);
        fill_facts(ctx, &mut snapshot, &place, &t.target, &t.facts);
        fill_hints(ctx, &mut snapshot, &place, &t.hints);
        // Check the other points' names too, so every typo is reported in one round.
        for (k, (_, p)) in points.iter().enumerate() {
            if k != chosen {
                let mut scratch = Snapshot::new(ctx.catalog, Target::default());
                fill_signals(ctx, &mut scratch, &place, &p.signals);
            }
        }
        let mut notes = t.notes;
        notes.push(format!(
            "timeline {}: the point at {} ({} of {}, {})",
            ctx.file,
            format_time_ms(end),
            chosen + 1,
            points.len(),
            match at_ms {
                Some(at) => format!("the newest at or before --at {}", format_time_ms(at)),
                None => "the newest".to_string(),
            }
        ));
        out.push(Prepared { snapshot, notes });
    }
    out
}

/// A target's points by time; None (with the errors reported) when there are none, two share
/// a time, or a time does not parse.
fn timeline_points<'p>(
    ctx: &mut Ctx<'_>,
    place: &str,
    docs: &'p [PointDoc],
) -> Option<Vec<(i64, &'p PointDoc)>> {
    let mut points: Vec<(i64, &PointDoc)> = Vec::new();
    for (k, p) in docs.iter().enumerate() {
        match parse_time(&p.at) {
            Ok(ms) => points.push((ms, p)),
            Err(e) => ctx.error(place, format_args!("points[{k}].at: {e}")),
        }
    }
    if docs.is_empty() {
        ctx.error(place, "a timeline target needs at least one point");
        return None;
    }
    points.sort_by_key(|(ms, _)| *ms);
    if let Some(pair) = points.windows(2).find(|w| w[0].0 == w[1].0) {
        ctx.error(
            place,
            format_args!("two points at {}", format_time_ms(pair[0].0)),
        );
        return None;
    }
    if points.len() != docs.len() {
        return None; // a bad `at` was reported; picking another point would mislead
    }
    Some(points)
}

/// The newest point at or before `at_ms` (or the newest); None, reported, when all are later.
fn pick_point(
    ctx: &mut Ctx<'_>,
    place: &str,
    points: &[(i64, &PointDoc)],
    at_ms: Option<i64>,
) -> Option<usize> {
    match at_ms {
        None => Some(points.len() - 1),
        Some(at) => match points.iter().rposition(|(ms, _)| *ms <= at) {
            Some(k) => Some(k),
            None => {
                ctx.error(
                    place,
                    format_args!(
                        "no point at or before --at {}: the first point is at {}",
                        format_time_ms(at),
                        format_time_ms(points[0].0)
                    ),
                );
                None
            }
        },
    }
}

/// `target 1 (vllm, instance=gpu-node-1:8000)`: how errors name a target.
fn place(i: usize, t: &TargetDoc) -> String {
    let mut parts: Vec<String> = t.engine.iter().cloned().collect();
    parts.extend(t.labels.iter().map(|(k, v)| format!("{k}={}", v.0)));
    if parts.is_empty() {
        format!("target {}", i + 1)
    } else {
        format!("target {} ({})", i + 1, parts.join(", "))
    }
}

fn target_of(t: &TargetDoc) -> Target {
    Target {
        engine: t.engine.clone(),
        labels: t
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect(),
    }
}

fn parse_window(doc: Option<&WindowDoc>) -> Result<Window, String> {
    let Some(doc) = doc else {
        return Ok(Window::default());
    };
    if doc.lifetime && (doc.end.is_some() || doc.length.is_some()) {
        return Err(
            "window: `lifetime: true` means averages since the server started, so it takes no `end` or `length`"
                .to_string(),
        );
    }
    let end_ms = match &doc.end {
        Some(s) => Some(parse_time(s).map_err(|e| format!("window.end: {e}"))?),
        None => None,
    };
    let length_ms = match &doc.length {
        Some(s) => Some(parse_length(s).map_err(|e| format!("window.length: {e}"))?),
        None => None,
    };
    Ok(Window {
        end_ms,
        length_ms,
        lifetime: doc.lifetime,
    })
}

fn parse_length(s: &str) -> Result<i64, String> {
    match parse_duration(s).map_err(|e| e.to_string())? {
        0 => Err(format!("window length `{s}` must be longer than zero")),
        ms => Ok(ms),
    }
}

fn fill_signals(ctx: &mut Ctx<'_>, snap: &mut Snapshot, place: &str, signals: &Named<SignalDoc>) {
    for (name, doc) in &signals.0 {
        let value = match doc {
            SignalDoc::Plain(v) => SignalValue {
                value: v.0,
                stats: None,
                source: DEFAULT_SOURCE.to_string(),
            },
            SignalDoc::Full(o) => {
                let stats = match (o.min, o.mean, o.max) {
                    (Some(min), Some(mean), Some(max)) => Some(WindowStats {
                        min: min.0,
                        mean: mean.0,
                        max: max.0,
                        last: o.last.unwrap_or(o.value).0,
                    }),
                    (None, None, None) => {
                        if o.last.is_some() {
                            ctx.error(
                                place,
                                format_args!(
                                    "signal `{name}`: `last` is a window statistic and needs `min`, `mean` and `max`"
                                ),
                            );
                        }
                        None
                    }
                    _ => {
                        ctx.error(
                            place,
                            format_args!(
                                "signal `{name}`: give all of `min`, `mean` and `max` (window statistics), or none"
                            ),
                        );
                        None
                    }
                };
                let finite =
                    |s: &WindowStats| [s.min, s.mean, s.max, s.last].iter().all(|v| v.is_finite());
                SignalValue {
                    value: o.value.0,
                    stats: stats.filter(finite),
                    source: o
                        .source
                        .clone()
                        .unwrap_or_else(|| DEFAULT_SOURCE.to_string()),
                }
            }
        };
        if let Err(SnapshotError::UnknownSignal(_)) = snap.set_signal(ctx.catalog, name, value) {
            ctx.unknown(place, "signal", name);
        }
    }
}

fn fill_facts(
    ctx: &mut Ctx<'_>,
    snap: &mut Snapshot,
    place: &str,
    target: &TargetDoc,
    facts: &Named<FactDoc>,
) {
    let mut engine_fact = None;
    for (name, doc) in &facts.0 {
        let (value, source) = match doc {
            FactDoc::Plain(v) => (v.0.clone(), DEFAULT_SOURCE.to_string()),
            FactDoc::Full(o) => (
                o.value.0.clone(),
                o.source
                    .clone()
                    .unwrap_or_else(|| DEFAULT_SOURCE.to_string()),
            ),
        };
        if let FactValue::Number(n) = value {
            if !n.is_finite() {
                ctx.error(
                    place,
                    format_args!("fact `{name}` must be a finite number, got `{n}`"),
                );
                continue;
            }
        }
        if name == "engine" {
            engine_fact = Some(value.clone());
        }
        let quote_hint = matches!(value, FactValue::Number(_) | FactValue::Bool(_));
        match snap.set_fact(ctx.catalog, name, value, source) {
            Ok(()) => {}
            Err(SnapshotError::UnknownFact(_)) => ctx.unknown(place, "fact", name),
            Err(e @ SnapshotError::FactType { expected, .. }) => {
                let hint = if expected == "string" && quote_hint {
                    " (quote it to make it a string)"
                } else {
                    ""
                };
                ctx.error(place, format_args!("{e}{hint}"));
            }
            Err(e) => ctx.error(place, e),
        }
    }
    match (&target.engine, engine_fact) {
        (Some(t), Some(FactValue::Str(f))) if *t != f => ctx.error(
            place,
            format_args!("target.engine `{t}` and fact `engine` `{f}` disagree"),
        ),
        (Some(t), None) if ctx.catalog.fact("engine").is_some() => {
            // The playbooks' engine filters read the fact; a hand-written file may give only
            // the target's engine.
            let _ = snap.set_fact(
                ctx.catalog,
                "engine",
                FactValue::Str(t.clone()),
                DEFAULT_SOURCE,
            );
        }
        _ => {}
    }
}

fn fill_hints(ctx: &mut Ctx<'_>, snap: &mut Snapshot, place: &str, hints: &Named<String>) {
    for (name, hint) in &hints.0 {
        if snap.set_hint(ctx.catalog, name, hint.clone()).is_err() {
            ctx.unknown(place, "signal", name);
        }
    }
}

/// Line and column (1-based) of the first place `name` appears as a mapping key: preceded by
/// a non-name character and followed by an optional quote and a colon.
fn locate(text: &str, name: &str) -> Option<(usize, usize)> {
    // An empty key matches everywhere and would never advance the search.
    if name.is_empty() {
        return None;
    }
    let is_name = |c: char| c.is_alphanumeric() || c == '_' || c == ':' || c == '.';
    for (ln, line) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(off) = line[from..].find(name) {
            let start = from + off;
            let end = start + name.len();
            let before_ok = line[..start]
                .chars()
                .next_back()
                .is_none_or(|c| !is_name(c));
            let rest = line[end..].trim_start_matches(['"', '\'']).trim_start();
            if before_ok && rest.starts_with(':') {
                return Some((ln + 1, line[..start].chars().count() + 1));
            }
            from = end;
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::source::file::snapshot::write::write;

    pub(crate) fn catalog() -> Catalog {
        let (name, text) = crate::rules::CATALOG;
        Catalog::from_yaml(text, name).unwrap()
    }

    pub(crate) const SNAPSHOT: &str = r#"
# a hand-written snapshot
llm_doctor: snapshot/v1
targets:
  - target:
      engine: vllm
      labels: {instance: "gpu-node-1:8000", gpu: 0}
    window: {end: "2026-12-01T00:10:00.250Z", length: 5m}
    signals:
      ttft_p99_seconds: 40
      kv_cache_usage_ratio: {value: 0.995, min: 0.97, mean: 0.99, max: 1, source: "vllm: kv"}
      queue_depth: {value: 3, min: 1, mean: 2, max: 4, last: 3.5}
    facts:
      max_num_seqs: 256
      enable_prefix_caching: {value: true, source: vllm:cache_config_info}
      kv_cache_dtype: fp8
    hints:
      gpu_thermal_throttle_ratio: add the clocks-event-reasons field
    notes: [joined by host]
"#;

    #[test]
    fn detection_by_marker() {
        assert!(looks_like(SNAPSHOT));
        assert!(looks_like("---\nllm_doctor: timeline/v1\n"));
        assert!(looks_like("{\n  \"llm_doctor\": \"snapshot/v1\"}"));
        assert!(!looks_like("{\"status\": \"success\", \"llm_doctor\": 1}"));
        assert!(!looks_like("llm_doctor:requests_total 1\n"));
        assert!(!looks_like("# TYPE x gauge\nx 1\n"));
        assert!(!looks_like("targets: []\nllm_doctor: snapshot/v1\n"));
    }

    #[test]
    fn reads_every_part_of_a_snapshot() {
        let c = catalog();
        let p = parse(SNAPSHOT, "s.yaml", &c, None).unwrap();
        assert_eq!(p.len(), 1);
        let s = &p[0].snapshot;
        assert_eq!(s.target.engine.as_deref(), Some("vllm"));
        assert_eq!(s.target.labels["gpu"], "0");
        assert_eq!(
            s.window.end_ms,
            Some(parse_time("2026-12-01T00:10:00Z").unwrap() + 250)
        );
        assert_eq!(s.window.length_ms, Some(300_000));
        assert!(!s.window.lifetime);
        let ttft = s.signal(&c, "ttft_p99_seconds").unwrap();
        assert_eq!(
            (ttft.value, ttft.stats, ttft.source.as_str()),
            (40.0, None, DEFAULT_SOURCE)
        );
        let kv = s.signal(&c, "kv_cache_usage_ratio").unwrap();
        assert_eq!(kv.source, "vllm: kv");
        assert_eq!(
            kv.stats,
            Some(WindowStats {
                min: 0.97,
                mean: 0.99,
                max: 1.0,
                last: 0.995
            })
        );
        assert_eq!(
            s.signal(&c, "queue_depth").unwrap().stats.unwrap().last,
            3.5
        );
        let f = s.fact(&c, "enable_prefix_caching").unwrap();
        assert_eq!(
            (&f.value, f.source.as_str()),
            (&FactValue::Bool(true), "vllm:cache_config_info")
        );
        assert_eq!(
            s.fact(&c, "max_num_seqs").unwrap().value,
            FactValue::Number(256.0)
        );
        // target.engine fills the engine fact.
        assert_eq!(
            s.fact(&c, "engine").unwrap().value,
            FactValue::Str("vllm".into())
        );
        let i = c.signal("gpu_thermal_throttle_ratio").unwrap();
        assert_eq!(s.hint_at(i), Some("add the clocks-event-reasons field"));
        assert_eq!(p[0].notes, ["joined by host"]);
        let with_bom = parse(&format!("\u{feff}{SNAPSHOT}"), "s.yaml", &c, None).unwrap();
        assert_eq!(with_bom[0].snapshot, p[0].snapshot);
    }

    #[test]
    fn lifetime_and_missing_windows() {
        let c = catalog();
        let text =
            "llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    window: {lifetime: true}\n";
        let p = parse(text, "l.yaml", &c, Some(5)).unwrap();
        assert_eq!(
            p[0].snapshot.window,
            Window {
                end_ms: None,
                length_ms: None,
                lifetime: true
            }
        );
        assert!(p[0].notes.is_empty());
        let back = parse(&write(&p, &c, false), "w", &c, None).unwrap();
        assert_eq!(back[0].snapshot, p[0].snapshot);

        let text = "llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n";
        let p = parse(text, "n.yaml", &c, None).unwrap();
        assert_eq!(p[0].snapshot.window, Window::default());
        assert!(!write(&p, &c, false).contains("window"));
    }

    #[test]
    fn a_snapshot_does_not_move_with_at() {
        let c = catalog();
        let p = parse(SNAPSHOT, "s.yaml", &c, Some(0)).unwrap();
        assert!(
            p[0].notes[1].contains("does not move it"),
            "{:?}",
            p[0].notes
        );
    }

    fn err(text: &str) -> String {
        parse(text, "bad.yaml", &catalog(), None)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn names_and_types_are_checked_with_suggestions() {
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {engine: vllm}\n    signals:\n      queue_dept: 1\n      kv_cache_usage: 0.5\n    facts:\n      max_num_seq: 4\n      max_num_seqs: many\n      model: 7\n    hints:\n      zzz_unknown: x\n");
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), 6, "{e}");
        assert!(
            lines
                .iter()
                .all(|l| l.starts_with("bad.yaml: target 1 (vllm): ")),
            "{e}"
        );
        assert!(
            e.contains(
                "unknown signal `queue_dept` at line 5 column 7 (did you mean `queue_depth`?)"
            ),
            "{e}"
        );
        assert!(e.contains("(did you mean `kv_cache_usage_ratio`?)"), "{e}");
        assert!(
            e.contains(
                "unknown fact `max_num_seq` at line 8 column 7 (did you mean `max_num_seqs`?)"
            ),
            "{e}"
        );
        assert!(
            e.contains("fact `max_num_seqs` must be a number, got `many`"),
            "{e}"
        );
        assert!(
            e.contains("fact `model` must be a string, got `7` (quote it"),
            "{e}"
        );
        assert!(e.contains("unknown signal `zzz_unknown`"), "{e}");
    }

    #[test]
    fn structure_errors_carry_line_and_column() {
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signal: {}\n");
        assert!(
            e.contains("unknown field `signal`") && e.contains("line 4"),
            "{e}"
        );
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signals: {queue_depth: {value: 1, avg: 2}}\n");
        assert!(
            e.contains("unknown field `avg`") && e.contains("line 4"),
            "{e}"
        );
        let e = err(
            "llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signals: {queue_depth: [1]}\n",
        );
        assert!(
            e.contains("expected a number, or a map") && e.contains("line 4"),
            "{e}"
        );
        let e = err("llm_doctor: snapshot/v1\ntargets: [\n");
        assert!(e.contains("line"), "{e}");
        let e = parse(
            "{\"llm_doctor\": \"snapshot/v1\",\n \"targets\": [}",
            "b.json",
            &catalog(),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("b.json: ") && e.contains("line 2 column"),
            "{e}"
        );
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signals: {queue_depth: 1, queue_depth: 2}\n");
        assert!(e.contains("given twice") || e.contains("duplicate"), "{e}");
        let e = err("llm_doctor: snapshot/v9\ntargets: []\n");
        assert!(
            e.contains("unsupported format `llm_doctor: snapshot/v9`"),
            "{e}"
        );
        let e = err("targets: []\n");
        assert!(e.contains("first key must be"), "{e}");
        let e = err("llm_doctor: snapshot/v1\ntargets: []\n");
        assert!(e.contains("`targets` is empty"), "{e}");
    }

    #[test]
    fn window_and_stats_rules() {
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    window: {lifetime: true, length: 5m}\n");
        assert!(e.contains("takes no `end` or `length`"), "{e}");
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    window: {end: yesterday, length: 5min}\n");
        assert!(e.contains("window.end: invalid time `yesterday`"), "{e}");
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    window: {length: 0}\n");
        assert!(
            e.contains("longer than zero") || e.contains("string"),
            "{e}"
        );
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signals: {queue_depth: {value: 1, min: 0}}\n");
        assert!(e.contains("give all of `min`, `mean` and `max`"), "{e}");
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signals: {queue_depth: {value: 1, last: 0}}\n");
        assert!(e.contains("`last` is a window statistic"), "{e}");
        let e = err("llm_doctor: snapshot/v1\ntargets:\n  - target: {engine: vllm}\n    facts: {engine: sglang}\n");
        assert!(e.contains("disagree"), "{e}");
    }

    #[test]
    fn non_finite_values_are_absent() {
        let c = catalog();
        let text = "llm_doctor: snapshot/v1\ntargets:\n  - target: {}\n    signals:\n      queue_depth: .nan\n      running_requests: {value: 2, min: .nan, mean: 1, max: 2}\n";
        let p = parse(text, "n.yaml", &c, None).unwrap();
        assert!(p[0].snapshot.signal(&c, "queue_depth").is_none());
        let r = p[0].snapshot.signal(&c, "running_requests").unwrap();
        assert_eq!((r.value, r.stats), (2.0, None));
    }

    pub(crate) const TIMELINE: &str = r#"llm_doctor: timeline/v1
targets:
  - target: {engine: vllm, labels: {pod: vllm-0}}
    window: {length: 5m}
    facts: {max_num_seqs: 8}
    notes: [recorded]
    points:
      - {at: "2026-12-01T00:10:00Z", signals: {queue_depth: 30}}
      - {at: "2026-12-01T00:00:00Z", signals: {queue_depth: 0}}
      - {at: "1796083500", signals: {queue_depth: 4}}
"#;

    #[test]
    fn timeline_points_are_picked_by_at() {
        let c = catalog();
        let t = |s: &str| parse_time(s).unwrap();
        let depth = |at: Option<i64>| {
            let p = parse(TIMELINE, "t.yaml", &c, at).unwrap();
            let s = &p[0].snapshot;
            assert_eq!(s.window.length_ms, Some(300_000));
            assert_eq!(
                s.fact(&c, "max_num_seqs").unwrap().value,
                FactValue::Number(8.0)
            );
            (
                s.window.end_ms.unwrap(),
                s.signal(&c, "queue_depth").unwrap().value,
                p[0].notes.clone(),
            )
        };
        let (end, v, notes) = depth(None);
        assert_eq!((end, v), (t("2026-12-01T00:10:00Z"), 30.0));
        assert_eq!(notes[0], "recorded");
        assert!(notes[1].contains("(3 of 3, the newest)"), "{notes:?}");
        let (end, v, notes) = depth(Some(t("2026-12-01T00:09:59Z")));
        assert_eq!((end, v), (1_796_083_500_000, 4.0));
        assert!(
            notes[1].contains("2 of 3, the newest at or before --at 2026-12-01T00:09:59Z"),
            "{notes:?}"
        );
        assert_eq!(depth(Some(t("2026-12-01T00:00:00Z"))).1, 0.0);
        assert_eq!(depth(Some(t("2027-01-01T00:00:00Z"))).1, 30.0);
        let e = parse(TIMELINE, "t.yaml", &c, Some(t("2026-11-30T00:00:00Z")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no point at or before --at 2026-11-30T00:00:00Z: the first point is at 2026-12-01T00:00:00Z"), "{e}");
    }

    #[test]
    fn timeline_errors() {
        let e = err("llm_doctor: timeline/v1\ntargets:\n  - target: {}\n    window: {end: \"2026-12-01T00:00:00Z\"}\n    points: []\n");
        assert!(e.contains("unknown field `end`"), "{e}");
        let e = err("llm_doctor: timeline/v1\ntargets:\n  - target: {}\n    points: []\n");
        assert!(e.contains("at least one point"), "{e}");
        let e = err("llm_doctor: timeline/v1\ntargets:\n  - target: {}\n    points: [{at: \"1\"}, {at: \"1.0\"}]\n");
        assert!(e.contains("two points at"), "{e}");
        let e = err("llm_doctor: timeline/v1\ntargets:\n  - target: {}\n    points: [{at: \"1\", signals: {queue_depth: 1}}, {at: \"2\", signals: {queue_dpth: 1}}]\n");
        assert!(e.contains("unknown signal `queue_dpth`"), "{e}");
        let e = err("llm_doctor: timeline/v1\ntargets:\n  - target: {}\n    signals: {}\n    points: [{at: \"1\"}]\n");
        assert!(e.contains("unknown field `signals`"), "{e}");
    }

    #[test]
    fn locate_finds_keys_not_substrings() {
        let text = "a:\n  queue_depth_x: 1\n  \"queue_depth\": 2\n";
        assert_eq!(locate(text, "queue_depth"), Some((3, 4)));
        assert_eq!(locate(text, "missing"), None);
        assert_eq!(locate(text, ""), None);
    }

    /// An empty signal or fact name used to loop forever while its position was looked up.
    #[test]
    fn empty_keys_are_errors_not_hangs() {
        let c = catalog();
        for (key, kind) in [("signals", "signal"), ("facts", "fact")] {
            let text = SNAPSHOT.replacen(
                &format!("    {key}:\n"),
                &format!("    {key}:\n      \"\": 1\n"),
                1,
            );
            assert_ne!(text, SNAPSHOT, "{key} section found");
            let err = parse(&text, "s.yaml", &c, None).unwrap_err().to_string();
            assert!(err.contains(&format!("unknown {kind} ``")), "{err}");
        }
    }
}
