//! `rules export grafana`: a Grafana dashboard per engine, generated from the playbooks, the
//! adapters and the objectives the diagnosis uses.
//!
//! A row per symptom charts the signals its condition compares with a threshold, the threshold
//! drawn as a line (the SLO's default, or the constant); a collapsed row per cause family (the
//! playbook file: memory, scheduling, throughput, gpu) charts every signal its causes read, with
//! the gates' thresholds, and the engine's own limit where it exports one (`max_num_seqs` from
//! SGLang's `sglang:max_running_requests`). Every panel's query is the PromQL a live triage shows
//! as that signal's source (`signal_query`), with the window and the replicas as dashboard
//! variables written as a triage writes them: with the same window and replicas selected, the
//! panel sends a triage's bytes. Firing `llm-doctor` alerts are annotations.
//!
//! Signals with no PromQL form (computed by llm-doctor from raw samples) and constants have no
//! panel; the dashboard's description lists them.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use llm_doctor_engine::condition::{Condition, Env, Input, Slot, ThresholdLine, WindowStats};
use serde_json::{json, Value};

use super::Defaults;
use crate::rules::Rules;
use crate::signal::adapter::spec::{Expr, Picks};
use crate::signal::adapter::{AdapterKind, AdapterSpec};
use crate::signal::promql;
use crate::source::live::prometheus::{
    discovery_selector, gauge_fact_query, signal_query, triage_window,
};
use crate::target::JOIN_LABELS;

/// The dashboard variable holding the window, written into every range.
pub const WINDOW_VARIABLE: &str = "$window";
/// The matcher every engine query carries: the replicas selected in the dashboard.
pub const INSTANCE_MATCHER: &str = "instance=~\"$instance\"";
/// The windows offered besides the exported default, as `--window` takes them.
const WINDOWS: &[&str] = &["1m", "5m", "15m", "1h"];
/// The datasource every panel and variable reads.
const DATASOURCE: &str = "${datasource}";

/// One engine adapter's dashboard.
pub struct Dashboard {
    /// The adapter (`vllm`, `triton`, ...).
    pub adapter: String,
    /// The dashboard JSON, for Grafana's import or provisioning.
    pub json: Value,
}

/// The dashboards of every engine, or of one (`engine`, by engine name: `trtllm` gives Triton's
/// and trtllm-serve's). `window` is the default window (`5m`); `datasource`, when given, the
/// Prometheus datasource selected by default; `slos` override the objectives' defaults.
pub fn export_grafana(
    rules: &Rules,
    engine: Option<&str>,
    window: &str,
    datasource: Option<&str>,
    slos: &BTreeMap<String, f64>,
) -> Result<Vec<Dashboard>> {
    let window_ms = crate::time::parse_duration(window)?;
    let engines = super::engines(rules, engine)?;
    let slos = rules.playbook.slo_values(slos)?;
    let mut out = Vec::new();
    for a in engines {
        let builder = Builder {
            rules,
            engine: a,
            slos_only: Defaults {
                facts: BTreeMap::new(),
                slos: slos.clone(),
            },
        };
        out.push(Dashboard {
            adapter: a.name.clone(),
            json: builder.dashboard(window, window_ms, datasource),
        });
    }
    Ok(out)
}

/// A panel to draw: a signal, its threshold lines and the facts it is compared with.
struct Chart {
    signal: String,
    /// `(value, severity color, the comparison in words)`, in order of appearance.
    lines: Vec<(f64, &'static str, String)>,
    /// Gauge facts of the engine compared with the signal: drawn as series of their own.
    facts: BTreeSet<String>,
    /// Conditions the chart is drawn for, in words.
    read_by: Vec<String>,
}

struct Builder<'a> {
    rules: &'a Rules,
    engine: &'a AdapterSpec,
    /// SLOs alone: the values thresholds take. A threshold that needs a fact is the
    /// deployment's, not drawn from a default: the engine's own value is charted where it
    /// exports one.
    slos_only: Defaults,
}

/// SLOs as they are and every fact a number: a threshold that reads facts is valued.
struct EveryFact<'a>(&'a Defaults);

impl Env for EveryFact<'_> {
    fn get(&self, slot: Slot) -> Option<Input<'_>> {
        match slot {
            Slot::Fact(_) => Some(Input::Number(1.0)),
            s => self.0.get(s),
        }
    }

    fn stats(&self, _: Slot) -> Option<WindowStats> {
        None
    }
}

impl Builder<'_> {
    fn dashboard(&self, window: &str, window_ms: i64, datasource: Option<&str>) -> Value {
        let mut panels = Vec::new();
        let mut not_shown = BTreeSet::new();
        let mut y = 0;
        let mut id = 0;
        for s in &self.rules.playbook.symptoms {
            let mut charts = Vec::new();
            self.add(&mut charts, &s.when, "orange", &format!("symptom {}", s.id));
            if let Some(c) = &s.critical_when {
                self.add(
                    &mut charts,
                    c,
                    "red",
                    &format!("symptom {} (critical)", s.id),
                );
            }
            let drawn = self.panels(&charts, &mut not_shown, &mut id);
            if drawn.is_empty() {
                continue;
            }
            id += 1;
            panels.push(row(
                id,
                &format!("{} ({})", s.title, s.id),
                y,
                false,
                Vec::new(),
            ));
            y += 1;
            for p in place(drawn, &mut y) {
                panels.push(p);
            }
        }
        for (family, causes) in self.families() {
            let mut charts = Vec::new();
            for c in &causes {
                let what = format!("cause {}", c.id);
                self.add(&mut charts, &c.when, "orange", &what);
                for e in c.evidence.iter().chain(&c.against) {
                    self.add(&mut charts, &e.when, "", &what);
                }
            }
            let drawn = self.panels(&charts, &mut not_shown, &mut id);
            if drawn.is_empty() {
                continue;
            }
            id += 1;
            let ids: Vec<&str> = causes.iter().map(|c| c.id.as_str()).collect();
            let title = format!("Causes: {family} ({})", ids.join(", "));
            let row_y = y;
            y += 1;
            let mut inner = y;
            let nested = place(drawn, &mut inner);
            panels.push(row(id, &title, row_y, true, nested));
        }
        let mut description = format!(
            "llm-doctor's view of {}: the signals its diagnosis reads, with the playbooks' thresholds. Generated by `llm-doctor rules export grafana`; do not edit, regenerate.",
            self.engine.name
        );
        if !not_shown.is_empty() {
            let list: Vec<&str> = not_shown.iter().map(String::as_str).collect();
            description.push_str(&format!(
                " Not charted (no PromQL form; llm-doctor computes them from raw samples): {}.",
                list.join(", ")
            ));
        }
        json!({
            "uid": format!("llm-doctor-{}", self.engine.name.replace('_', "-")),
            "title": format!("llm-doctor: {}", self.engine.name),
            "description": description,
            "tags": ["llm-doctor", self.engine.engine_name()],
            "timezone": "browser",
            "editable": true,
            "graphTooltip": 1,
            "time": {"from": "now-6h", "to": "now"},
            "refresh": "1m",
            "schemaVersion": 39,
            "templating": {"list": [
                datasource_variable(datasource),
                self.instance_variable(),
                window_variable(window, window_ms),
            ]},
            "annotations": {"list": [self.alert_annotations()]},
            "panels": panels,
        })
    }

    /// The causes that apply to this engine, by playbook file (their family), in file order.
    fn families(&self) -> Vec<(String, Vec<&llm_doctor_engine::playbook::Cause>)> {
        let mut out: Vec<(String, Vec<_>)> = Vec::new();
        let engine = self.engine.engine_name();
        for c in &self.rules.playbook.causes {
            if !c.engines.is_empty() && !c.engines.iter().any(|e| e == engine) {
                continue;
            }
            let family = std::path::Path::new(&c.file)
                .file_stem()
                .map_or_else(|| c.file.clone(), |f| f.to_string_lossy().to_string());
            match out.iter_mut().find(|(f, _)| *f == family) {
                Some((_, list)) => list.push(c),
                None => out.push((family, vec![c])),
            }
        }
        out
    }

    /// Adds to `charts` the signals `cond` reads; with a `color`, its thresholds as lines.
    fn add(&self, charts: &mut Vec<Chart>, cond: &Condition, color: &'static str, what: &str) {
        let catalog = &self.rules.catalog;
        let lines = cond.threshold_lines(&self.slos_only);
        // Every fact valued, whether or not the engine has a default: which lines need one.
        let with_facts = cond.threshold_lines(&EveryFact(&self.slos_only));
        let facts: BTreeSet<String> = cond
            .slots()
            .iter()
            .filter_map(|s| match s {
                Slot::Fact(i) => Some(catalog.facts()[*i].name.clone()),
                _ => None,
            })
            .filter(|f| self.engine.gauge_facts.contains_key(f))
            .collect();
        for slot in cond.slots() {
            let Slot::Signal(i) = slot else { continue };
            let name = &catalog.signals()[*i].name;
            let chart = match charts.iter().position(|c| &c.signal == name) {
                Some(k) => &mut charts[k],
                None => {
                    charts.push(Chart {
                        signal: name.clone(),
                        lines: Vec::new(),
                        facts: BTreeSet::new(),
                        read_by: Vec::new(),
                    });
                    charts.last_mut().expect("just pushed")
                }
            };
            if !chart.read_by.iter().any(|w| w == what) {
                chart.read_by.push(what.to_string());
            }
            let own = |l: &&ThresholdLine| l.signal == *slot;
            if !color.is_empty() {
                for l in lines.iter().filter(own) {
                    let words = format!("{what}: {name} {} {}", l.op, number(l.value));
                    if !chart
                        .lines
                        .iter()
                        .any(|(v, c, _)| *v == l.value && *c == color)
                    {
                        chart.lines.push((l.value, color, words));
                    }
                }
            }
            // A comparison that needs a fact: the engine's own value, where it exports one.
            if with_facts.iter().filter(own).count() > lines.iter().filter(own).count() {
                chart.facts.extend(facts.iter().cloned());
            }
        }
    }

    /// The panels of `charts` whose signals this engine (or an exporter) provides in PromQL;
    /// the others go to `not_shown`.
    fn panels(
        &self,
        charts: &[Chart],
        not_shown: &mut BTreeSet<String>,
        id: &mut u32,
    ) -> Vec<Value> {
        let mut out = Vec::new();
        for c in charts {
            let Some((adapter, expr)) = self.provider(&c.signal) else {
                continue;
            };
            if matches!(expr, Expr::Const(_)) {
                continue;
            }
            if !promql::expressible(expr) {
                not_shown.insert(c.signal.clone());
                continue;
            }
            let Some(q) = signal_query(
                adapter,
                expr,
                &Picks::new(),
                WINDOW_VARIABLE,
                INSTANCE_MATCHER,
            ) else {
                continue;
            };
            let mut targets = vec![target("A", &q.shown, &legend(adapter))];
            for (k, fact) in c.facts.iter().enumerate() {
                let selector = &self.engine.gauge_facts[fact];
                let query =
                    gauge_fact_query(self.engine, selector, WINDOW_VARIABLE, INSTANCE_MATCHER);
                let ref_id = char::from(b'B' + u8::try_from(k % 24).unwrap_or(0)).to_string();
                targets.push(target(
                    &ref_id,
                    &query,
                    &format!("fact.{fact} {}", legend(self.engine)),
                ));
            }
            *id += 1;
            out.push(self.panel(*id, c, adapter, targets));
        }
        out
    }

    /// The adapter that provides `signal` (the engine's first, then an exporter's) and its
    /// definition, as the alert rules and the triage choose it.
    fn provider(&self, signal: &str) -> Option<(&AdapterSpec, &Expr)> {
        crate::verdict::symptom_promql::provider(self.rules, self.engine, signal)
    }

    fn panel(&self, id: u32, c: &Chart, adapter: &AdapterSpec, targets: Vec<Value>) -> Value {
        let def = self
            .rules
            .catalog
            .signal(&c.signal)
            .map(|i| &self.rules.catalog.signals()[i]);
        let (unit, what) = def.map_or(("short", ""), |d| {
            (grafana_unit(&d.unit), d.description.as_str())
        });
        let mut lines = c.lines.clone();
        lines.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut steps = vec![json!({"color": "transparent", "value": null})];
        steps.extend(
            lines
                .iter()
                .map(|(v, color, _)| json!({"color": color, "value": v})),
        );
        let mut description = format!(
            "{what}.\n\nThe query is what `llm-doctor diagnose --prometheus` reads for `{}` ({}), for the replicas and window selected.\n\nRead by: {}.",
            c.signal,
            adapter.name,
            c.read_by.join("; ")
        );
        if !lines.is_empty() {
            let words: Vec<&str> = lines.iter().map(|(_, _, w)| w.as_str()).collect();
            description.push_str(&format!("\n\nLines: {}.", words.join("; ")));
        }
        json!({
            "type": "timeseries",
            "id": id,
            "title": c.signal,
            "description": description,
            "datasource": datasource_ref(),
            "targets": targets,
            "fieldConfig": {
                "defaults": {
                    "unit": unit,
                    "thresholds": {"mode": "absolute", "steps": steps},
                    "custom": {"thresholdsStyle": {"mode": if lines.is_empty() { "off" } else { "line" }}},
                },
                "overrides": [],
            },
            "options": {
                "legend": {"displayMode": "list", "placement": "bottom", "showLegend": true, "calcs": []},
                "tooltip": {"mode": "multi", "sort": "desc"},
            },
        })
    }

    /// The replicas, as a triage discovers them: the instances of the engine's own metrics.
    fn instance_variable(&self) -> Value {
        json!({
            "type": "query",
            "name": "instance",
            "label": "replica",
            "description": "The replicas charted (the `instance` of the engine's metrics).",
            "datasource": datasource_ref(),
            "query": format!("label_values({}, instance)", discovery_selector(self.engine)),
            "refresh": 2,
            "sort": 1,
            "multi": true,
            "includeAll": true,
            "allValue": ".+",
            "current": {"text": ["All"], "value": ["$__all"]},
            "hide": 0,
        })
    }

    /// The alerts `rules export prometheus` writes for this engine, while they fire.
    fn alert_annotations(&self) -> Value {
        json!({
            "name": "llm-doctor alerts",
            "datasource": datasource_ref(),
            "enable": true,
            "hide": false,
            "iconColor": "red",
            "expr": format!(
                "ALERTS{{alertstate=\"firing\", llm_doctor_adapter=\"{}\", {INSTANCE_MATCHER}}}",
                self.engine.name
            ),
        })
    }
}

/// Panels laid out three a line from row `y` on; `y` moves past them.
fn place(panels: Vec<Value>, y: &mut u32) -> Vec<Value> {
    let (w, h) = (8, 8);
    let n = panels.len();
    let out = panels
        .into_iter()
        .enumerate()
        .map(|(k, mut p)| {
            let k = u32::try_from(k).unwrap_or(0);
            p["gridPos"] = json!({"h": h, "w": w, "x": (k % 3) * w, "y": *y + (k / 3) * h});
            p
        })
        .collect();
    *y += u32::try_from(n.div_ceil(3)).unwrap_or(0) * h;
    out
}

fn row(id: u32, title: &str, y: u32, collapsed: bool, panels: Vec<Value>) -> Value {
    json!({
        "type": "row",
        "id": id,
        "title": title,
        "collapsed": collapsed,
        "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
        "panels": panels,
    })
}

fn target(ref_id: &str, expr: &str, legend: &str) -> Value {
    json!({
        "refId": ref_id,
        "datasource": datasource_ref(),
        "expr": expr,
        "legendFormat": legend,
        "range": true,
        "editorMode": "code",
    })
}

/// A series' name in the legend: the labels the query keeps.
fn legend(a: &AdapterSpec) -> String {
    let labels: &[&str] = if a.kind == AdapterKind::Engine {
        &["pod", "instance"]
    } else {
        JOIN_LABELS
    };
    labels
        .iter()
        .map(|l| format!("{{{{{l}}}}}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn datasource_ref() -> Value {
    json!({"type": "prometheus", "uid": DATASOURCE})
}

fn datasource_variable(selected: Option<&str>) -> Value {
    let mut v = json!({
        "type": "datasource",
        "name": "datasource",
        "label": "Prometheus",
        "query": "prometheus",
        "refresh": 1,
        "hide": 0,
    });
    if let Some(name) = selected {
        v["current"] = json!({"text": name, "value": name});
    }
    v
}

/// The windows offered, each shown as `--window` takes it and valued as a triage writes it
/// (`5m : 299999ms`), the exported one selected.
fn window_variable(window: &str, window_ms: i64) -> Value {
    let mut choices: Vec<(String, String)> = Vec::new();
    for w in WINDOWS.iter().copied().chain(std::iter::once(window)) {
        let Ok(ms) = crate::time::parse_duration(w) else {
            continue;
        };
        let value = triage_window(ms);
        if !choices.iter().any(|(_, v)| *v == value) {
            choices.push((w.to_string(), value));
        }
    }
    let current = triage_window(window_ms);
    let options: Vec<Value> = choices
        .iter()
        .map(|(text, value)| json!({"text": text, "value": value, "selected": *value == current}))
        .collect();
    let query: Vec<String> = choices.iter().map(|(t, v)| format!("{t} : {v}")).collect();
    let text = choices
        .iter()
        .find(|(_, v)| *v == current)
        .map_or(window, |(t, _)| t.as_str());
    json!({
        "type": "custom",
        "name": "window",
        "label": "window",
        "description": "The window of rates and quantiles, as `--window` sets it for a triage (one millisecond short, as a triage sends it).",
        "query": query.join(","),
        "options": options,
        "current": {"text": text, "value": current},
        "hide": 0,
    })
}

/// Grafana's unit id for a catalog unit.
fn grafana_unit(unit: &str) -> &'static str {
    match unit {
        "seconds" => "s",
        "ratio" => "percentunit",
        "bytes_per_second" => "Bps",
        "celsius" => "celsius",
        "mhz" => "rotmhz",
        "per_second" | "requests_per_second" => "reqps",
        "tokens_per_second" => "short",
        _ => "short",
    }
}

/// A threshold as people write it: `0.95`, `2`, `0.5`.
fn number(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
