//! SVG charts of the signals that matter for a target's incidents: one small chart per signal
//! group, symptom episodes shaded, objectives drawn as lines, onsets marked. Drawn with
//! plotters' SVG backend and no font library, so the output is the same on every machine.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::postmortem::{Kind, Postmortem, TargetPostmortem};
use crate::report::with_unit;
use crate::rules::Rules;

/// Chart width and height in pixels.
const SIZE: (u32, u32) = (760, 170);
/// At most this many charts per target.
const MAX_CHARTS: usize = 8;
/// Targets charted, hit ones first.
const MAX_TARGETS: usize = 8;

/// The signal groups worth a chart, in the order they are shown.
const GROUPS: &[&[&str]] = &[
    &["ttft_p99_seconds"],
    &["itl_p99_seconds"],
    &["e2e_p99_seconds"],
    &["queue_depth", "running_requests"],
    &["kv_cache_usage_ratio"],
    &["preemptions_per_second"],
    &["error_ratio"],
    &["gpu_utilization_ratio", "sm_active_ratio"],
    &["sm_clock_ratio"],
    &["host_cpu_utilization_ratio"],
];

const PALETTE: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// The groups drawn for a target: the fixed ones it has values for, then the signals its
/// incidents' onsets name.
fn groups(t: &TargetPostmortem) -> Vec<Vec<String>> {
    let has = |s: &str| {
        t.timeline
            .signals
            .get(s)
            .is_some_and(|v| v.iter().any(|x| x.is_finite()))
    };
    let mut out: Vec<Vec<String>> = Vec::new();
    for g in GROUPS {
        let present: Vec<String> = g.iter().filter(|s| has(s)).map(|s| s.to_string()).collect();
        if !present.is_empty() {
            out.push(present);
        }
    }
    for i in &t.incidents {
        for o in &i.onsets {
            if has(&o.signal) && !out.iter().any(|g| g.contains(&o.signal)) {
                out.push(vec![o.signal.clone()]);
            }
        }
    }
    // Onset signals matter more than the fixed list's tail: keep them when trimming.
    if out.len() > MAX_CHARTS {
        let onset: Vec<Vec<String>> = out
            .iter()
            .filter(|g| {
                t.incidents
                    .iter()
                    .any(|i| i.onsets.iter().any(|o| g.contains(&o.signal)))
            })
            .cloned()
            .collect();
        let mut kept: Vec<Vec<String>> = Vec::new();
        for g in &out {
            let room = MAX_CHARTS - kept.len();
            let onset_left = onset.iter().filter(|o| !kept.contains(o)).count();
            if onset.contains(g) || room > onset_left {
                kept.push(g.clone());
            }
            if kept.len() == MAX_CHARTS {
                break;
            }
        }
        out = kept;
    }
    out
}

/// Indices of the targets that get charts (what every report format draws or links).
pub fn charted_indices(pm: &Postmortem) -> Vec<usize> {
    charted(pm).map(|(i, _)| i).collect()
}

/// The targets that get charts: those hit, or the first one when none was.
fn charted(pm: &Postmortem) -> impl Iterator<Item = (usize, &TargetPostmortem)> {
    let any_hit = pm.targets.iter().any(|t| !t.incidents.is_empty());
    pm.targets
        .iter()
        .enumerate()
        .filter(move |(i, t)| {
            if any_hit {
                !t.incidents.is_empty()
            } else {
                *i == 0
            }
        })
        .take(MAX_TARGETS)
}

/// File names of target `index`'s charts, in order.
pub fn chart_names(index: usize, t: &TargetPostmortem) -> Vec<String> {
    groups(t)
        .iter()
        .map(|g| format!("t{index}-{}.svg", g[0].replace('.', "_")))
        .collect()
}

/// Every chart of the report as (file name, SVG).
pub fn charts(pm: &Postmortem, rules: &Rules, slos: &[f64]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, t) in charted(pm) {
        for (name, svg) in chart_names(i, t)
            .into_iter()
            .zip(target_charts(t, rules, slos))
        {
            out.push((name, svg));
        }
    }
    if let Some(svg) = pm.requests.as_ref().and_then(requests_chart) {
        out.push((REQUESTS_CHART.to_string(), svg));
    }
    out
}

/// The file name of the request chart.
pub const REQUESTS_CHART: &str = "requests.svg";

/// The parts of a request's time, bottom up, and their colours.
const PARTS: [(&str, RGBColor); 5] = [
    ("outside the engine", RGBColor(255, 127, 14)),
    ("queue", RGBColor(214, 39, 40)),
    ("prefill", RGBColor(31, 119, 180)),
    ("decode", RGBColor(44, 160, 44)),
    ("not split", RGBColor(170, 170, 170)),
];

/// Each request as a bar at the time it ended, as tall as its whole time and split into the
/// parts its records time (outside the engine, queue, prefill, decode; the rest grey). None
/// when no request was drawn.
pub fn requests_chart(view: &crate::postmortem::requests::RequestsView) -> Option<String> {
    let drawn = &view.drawn;
    let first = drawn.first()?.end_ms as f64;
    let last = drawn.last()?.end_ms as f64;
    let x1 = if last > first { last } else { first + 1000.0 };
    let top = drawn.iter().map(|r| r.total_seconds).fold(0.0f64, f64::max);
    let hi = if top > 0.0 { top * 1.08 } else { 1.0 };
    let half = ((x1 - first) / 900.0).max(1.0);
    let bars = |r: &crate::traffic::slowest::SlowRequest| {
        let parts = [
            r.outside_engine_seconds,
            r.queue_seconds,
            r.prefill_seconds,
            r.decode_seconds,
        ];
        let mut y = 0.0;
        let mut out = Vec::new();
        for (k, p) in parts.iter().enumerate() {
            if let Some(v) = p.filter(|v| *v > 0.0) {
                out.push((k, y, y + v));
                y += v;
            }
        }
        if r.total_seconds > y {
            out.push((4, y, r.total_seconds));
        }
        out
    };
    let title = if view.not_drawn > 0 {
        format!(
            "each request's time by part (the slowest {} of {})",
            drawn.len(),
            drawn.len() + view.not_drawn
        )
    } else {
        format!("each request's time by part ({} requests)", drawn.len())
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, 240)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let mut chart = frame(&root, &title, first - half..x1 + half, 0.0..hi).ok()?;
        grid(&mut chart, &|y| format!("{y:.1} s")).ok()?;
        for (k, (name, color)) in PARTS.iter().enumerate() {
            let rects: Vec<Rectangle<(f64, f64)>> = drawn
                .iter()
                .flat_map(|r| {
                    let x = r.end_ms as f64;
                    bars(r)
                        .into_iter()
                        .filter(|(part, _, _)| *part == k)
                        .map(move |(_, y0, y1)| {
                            Rectangle::new([(x - half, y0), (x + half, y1)], color.filled())
                        })
                })
                .collect();
            if rects.is_empty() {
                continue;
            }
            let color = *color;
            chart
                .draw_series(rects)
                .ok()?
                .label(*name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 4), (x + 12, y + 4)], color.filled())
                });
        }
        legend(&mut chart).ok()?;
        root.present().ok()?;
    }
    Some(svg)
}

/// The SVG charts of one target, in [`chart_names`] order.
pub fn target_charts(t: &TargetPostmortem, rules: &Rules, slos: &[f64]) -> Vec<String> {
    let shades: Vec<(i64, i64)> = t
        .episodes
        .iter()
        .filter(|e| e.kind == Kind::Symptom)
        .map(|e| (e.start_ms, e.end_ms))
        .collect();
    groups(t)
        .iter()
        .map(|g| {
            let slo = rules
                .playbook
                .slos
                .iter()
                .position(|s| g.len() == 1 && s.id == g[0])
                .and_then(|k| slos.get(k).copied());
            let marks: Vec<i64> = t
                .incidents
                .iter()
                .flat_map(|i| i.onsets.iter())
                .filter(|o| g.contains(&o.signal))
                .map(|o| o.at_ms)
                .collect();
            draw(t, g, slo, &shades, &marks).unwrap_or_else(|e| {
                format!("<svg xmlns=\"http://www.w3.org/2000/svg\"><text x=\"4\" y=\"14\">chart failed: {e}</text></svg>")
            })
        })
        .collect()
}

/// One chart: the group's lines over the target's steps.
fn draw(
    t: &TargetPostmortem,
    group: &[String],
    slo: Option<f64>,
    shades: &[(i64, i64)],
    marks: &[i64],
) -> Result<String, String> {
    let times = &t.timeline.times;
    let (Some(&first), Some(&last)) = (times.first(), times.last()) else {
        return Err("no steps".into());
    };
    let x0 = first as f64;
    let x1 = if last > first { last as f64 } else { x0 + 1.0 };
    let lines: Vec<(&str, &[f64])> = group
        .iter()
        .filter_map(|s| {
            t.timeline
                .signals
                .get(s)
                .map(|v| (s.as_str(), v.as_slice()))
        })
        .collect();
    let values = lines
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .chain(slo)
        .filter(|x| x.is_finite());
    let (lo, hi) = values.fold((0.0f64, 0.0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let hi = if hi > lo {
        hi + (hi - lo) * 0.08
    } else {
        lo + 1.0
    };
    let unit_of = group[0].clone();
    let half_step = (t.step_ms / 2) as f64;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = frame(&root, &group.join(" / "), x0..x1, lo..hi)?;
        chart
            .draw_series(shades.iter().map(|&(a, b)| {
                Rectangle::new(
                    [
                        ((a as f64 - half_step).max(x0), lo),
                        ((b as f64 + half_step).min(x1), hi),
                    ],
                    RGBColor(253, 219, 219).filled(),
                )
            }))
            .map_err(|e| e.to_string())?;
        grid(&mut chart, &|y| with_unit(&unit_of, *y))?;
        for &m in marks {
            chart
                .draw_series(LineSeries::new(
                    [(m as f64, lo), (m as f64, hi)],
                    RGBColor(255, 127, 14).stroke_width(2),
                ))
                .map_err(|e| e.to_string())?;
        }
        if let Some(s) = slo {
            chart
                .draw_series(DashedLineSeries::new(
                    [(x0, s), (x1, s)],
                    6,
                    4,
                    RGBColor(214, 39, 40).stroke_width(2),
                ))
                .map_err(|e| e.to_string())?
                .label("objective")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RGBColor(214, 39, 40)));
        }
        for (k, (name, v)) in lines.iter().enumerate() {
            let color = PALETTE[k % PALETTE.len()];
            let mut labelled = false;
            for run in segments(times, v) {
                let series = chart
                    .draw_series(LineSeries::new(run, color.stroke_width(2)))
                    .map_err(|e| e.to_string())?;
                if !labelled {
                    series
                        .label(*name)
                        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
                    labelled = true;
                }
            }
        }
        if lines.len() > 1 || slo.is_some() {
            legend(&mut chart)?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The coordinates of every chart here: time (Unix ms) by value.
type Axes = Cartesian2d<RangedCoordf64, RangedCoordf64>;

/// A chart's axes over time (`x`, Unix ms) with `caption` above, as every chart here has them.
fn frame<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    caption: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<ChartContext<'a, SVGBackend<'b>, Axes>, String> {
    ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 14))
        .margin(8)
        .margin_right(36)
        .x_label_area_size(24)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(|e| e.to_string())
}

/// The light grid, clock times below and `y_label` values beside.
fn grid(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Axes>,
    y_label: &dyn Fn(&f64) -> String,
) -> Result<(), String> {
    chart
        .configure_mesh()
        .x_labels(7)
        .y_labels(4)
        .light_line_style(RGBColor(238, 238, 238))
        .x_label_formatter(&|x| clock(*x as i64))
        .y_label_formatter(y_label)
        .draw()
        .map_err(|e| e.to_string())
}

/// The series' labels, upper left.
fn legend<'a, 'b: 'a>(chart: &mut ChartContext<'a, SVGBackend<'b>, Axes>) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(RGBColor(200, 200, 200))
        .draw()
        .map_err(|e| e.to_string())
}

/// Runs of known values, so a gap in the data is a gap in the line.
fn segments(times: &[i64], v: &[f64]) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for (t, x) in times.iter().zip(v) {
        if x.is_finite() {
            out.last_mut().expect("never empty").push((*t as f64, *x));
        } else if !out.last().expect("never empty").is_empty() {
            out.push(Vec::new());
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

/// `HH:MM:SS` of a Unix time in ms (UTC).
fn clock(ms: i64) -> String {
    let s = ms.div_euclid(1000).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}
