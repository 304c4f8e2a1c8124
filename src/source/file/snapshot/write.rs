//! Writing: prepared snapshots as a snapshot or timeline file, signals, facts and hints in
//! catalog order, in the shortest form that reads back the same.

use llm_doctor_engine::{Catalog, Snapshot, Target, Window};

use super::doc::{
    describe_target, format_time_ms, to_text, FactDoc, FactObj, FactScalar, LabelValue, Named, Num,
    PointDoc, SignalDoc, SignalObj, SnapshotDoc, SnapshotTargetDoc, TargetDoc, TimelineDoc,
    TimelineTargetDoc, TimelineWindowDoc, WindowDoc, DEFAULT_SOURCE, SNAPSHOT_V1, TIMELINE_V1,
};
use super::error::SnapshotFileError;
use crate::prepared::Prepared;
use crate::time::format_duration;

/// Writes snapshots as a snapshot file (JSON when `json`, else YAML) that [`parse`] reads back
/// to the same snapshots and notes.
pub fn write(prepared: &[Prepared], catalog: &Catalog, json: bool) -> String {
    let doc = SnapshotDoc {
        llm_doctor: SNAPSHOT_V1.to_string(),
        targets: prepared
            .iter()
            .map(|p| {
                let s = &p.snapshot;
                SnapshotTargetDoc {
                    target: target_doc(&s.target),
                    window: window_doc(&s.window),
                    signals: signals_doc(s, catalog),
                    facts: facts_doc(s, catalog),
                    hints: hints_doc(s, catalog),
                    notes: p.notes.clone(),
                }
            })
            .collect(),
    };
    to_text(&doc, json)
}

/// Writes snapshots of several instants as a timeline file: snapshots of the same target
/// (equal [`Target`]s) become the points of one timeline target, in time order, with the facts,
/// hints and notes of its newest snapshot. Every snapshot needs a window end (its point's `at`),
/// and a target's snapshots must share one window length.
pub fn write_timeline(
    snapshots: &[Prepared],
    catalog: &Catalog,
    json: bool,
) -> Result<String, SnapshotFileError> {
    let mut groups: Vec<(&Target, Vec<&Prepared>)> = Vec::new();
    for p in snapshots {
        match groups.iter_mut().find(|(t, _)| **t == p.snapshot.target) {
            Some((_, list)) => list.push(p),
            None => groups.push((&p.snapshot.target, vec![p])),
        }
    }
    let mut targets = Vec::new();
    for (target, mut list) in groups {
        let name = describe_target(target);
        let mut points = Vec::new();
        for p in &list {
            if p.snapshot.window.end_ms.is_none() {
                return Err(SnapshotFileError::Timeline(format!(
                    "{name}: a snapshot without a window end (lifetime values) cannot be a timeline point"
                )));
            }
        }
        list.sort_by_key(|p| p.snapshot.window.end_ms);
        let length = list[0].snapshot.window.length_ms;
        for pair in list.windows(2) {
            let (a, b) = (&pair[0].snapshot.window, &pair[1].snapshot.window);
            if a.end_ms == b.end_ms {
                return Err(SnapshotFileError::Timeline(format!(
                    "{name}: two snapshots end at {}",
                    format_time_ms(a.end_ms.unwrap_or_default())
                )));
            }
            if b.length_ms != length {
                return Err(SnapshotFileError::Timeline(format!(
                    "{name}: the snapshots' windows differ in length ({} and {}); a timeline has one",
                    a.length_ms.map_or("none".to_string(), format_duration),
                    b.length_ms.map_or("none".to_string(), format_duration)
                )));
            }
        }
        for p in &list {
            points.push(PointDoc {
                at: format_time_ms(p.snapshot.window.end_ms.unwrap_or_default()),
                signals: signals_doc(&p.snapshot, catalog),
            });
        }
        let newest = list[list.len() - 1];
        targets.push(TimelineTargetDoc {
            target: target_doc(target),
            window: length.map(|l| TimelineWindowDoc {
                length: format_duration(l),
            }),
            facts: facts_doc(&newest.snapshot, catalog),
            hints: hints_doc(&newest.snapshot, catalog),
            notes: newest.notes.clone(),
            points,
        });
    }
    Ok(to_text(
        &TimelineDoc {
            llm_doctor: TIMELINE_V1.to_string(),
            targets,
        },
        json,
    ))
}

fn target_doc(t: &Target) -> TargetDoc {
    TargetDoc {
        engine: t.engine.clone(),
        labels: t
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), LabelValue(v.clone())))
            .collect(),
    }
}

fn window_doc(w: &Window) -> Option<WindowDoc> {
    let doc = WindowDoc {
        end: w.end_ms.map(format_time_ms),
        length: w.length_ms.map(format_duration),
        lifetime: w.lifetime,
    };
    (doc.end.is_some() || doc.length.is_some() || doc.lifetime).then_some(doc)
}

fn signals_doc(s: &Snapshot, catalog: &Catalog) -> Named<SignalDoc> {
    let mut out = Vec::new();
    for (i, def) in catalog.signals().iter().enumerate() {
        let Some(sv) = s.signal_at(i) else { continue };
        // Statistics that JSON cannot carry (NaN, Inf) are left out: they read back as unknown.
        let stats = sv.stats.filter(|st| {
            [st.min, st.mean, st.max, st.last]
                .iter()
                .all(|v| v.is_finite())
        });
        let doc = if stats.is_none() && sv.source == DEFAULT_SOURCE {
            SignalDoc::Plain(Num(sv.value))
        } else {
            SignalDoc::Full(SignalObj {
                value: Num(sv.value),
                min: stats.map(|st| Num(st.min)),
                mean: stats.map(|st| Num(st.mean)),
                max: stats.map(|st| Num(st.max)),
                last: stats
                    .filter(|st| st.last.to_bits() != sv.value.to_bits())
                    .map(|st| Num(st.last)),
                source: (sv.source != DEFAULT_SOURCE).then(|| sv.source.clone()),
            })
        };
        out.push((def.name.clone(), doc));
    }
    Named(out)
}

fn facts_doc(s: &Snapshot, catalog: &Catalog) -> Named<FactDoc> {
    let mut out = Vec::new();
    for (i, def) in catalog.facts().iter().enumerate() {
        let Some(f) = s.fact_at(i) else { continue };
        let value = FactScalar(f.value.clone());
        let doc = if f.source == DEFAULT_SOURCE {
            FactDoc::Plain(value)
        } else {
            FactDoc::Full(FactObj {
                value,
                source: Some(f.source.clone()),
            })
        };
        out.push((def.name.clone(), doc));
    }
    Named(out)
}

fn hints_doc(s: &Snapshot, catalog: &Catalog) -> Named<String> {
    let mut out = Vec::new();
    for (i, def) in catalog.signals().iter().enumerate() {
        if let Some(h) = s.hint_at(i) {
            out.push((def.name.clone(), h.to_string()));
        }
    }
    Named(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::file::snapshot::read::tests::{catalog, SNAPSHOT, TIMELINE};
    use std::collections::BTreeMap;

    use llm_doctor_engine::{FactValue, SignalValue};

    use crate::source::file::snapshot::read::{looks_like, parse};
    use crate::time::parse_time;

    #[test]
    fn round_trips_through_yaml_and_json() {
        let c = catalog();
        let p = parse(SNAPSHOT, "s.yaml", &c, None).unwrap();
        for json in [false, true] {
            let text = write(&p, &c, json);
            assert!(looks_like(&text), "{text}");
            let back = parse(&text, "w", &c, None).unwrap();
            assert_eq!(back[0].snapshot, p[0].snapshot, "{text}");
            assert_eq!(back[0].notes, p[0].notes);
            // Written twice, the text is the same: deterministic output.
            assert_eq!(write(&back, &c, json), text);
        }
        let yaml = write(&p, &c, false);
        assert!(yaml.starts_with("llm_doctor: snapshot/v1\n"), "{yaml}");
        assert!(yaml.contains("ttft_p99_seconds: 40\n"), "{yaml}");
        assert!(yaml.contains("max_num_seqs: 256\n"), "{yaml}");
        assert!(yaml.contains("end: 2026-12-01T00:10:00.250Z"), "{yaml}");
    }

    #[test]
    fn awkward_numbers_round_trip_exactly() {
        let c = catalog();
        let mut s = Snapshot::new(&c, Target::default());
        let values = [
            0.1 + 0.2,
            1e-300,
            123_456_789.123_456_79,
            -0.0,
            2f64.powi(60),
            1.0 / 3.0,
        ];
        for (def, v) in c.signals().iter().zip(values) {
            s.set_signal(
                &c,
                &def.name,
                SignalValue {
                    value: v,
                    stats: None,
                    source: DEFAULT_SOURCE.into(),
                },
            )
            .unwrap();
        }
        let p = vec![Prepared {
            snapshot: s,
            notes: vec![],
        }];
        for json in [false, true] {
            let back = parse(&write(&p, &c, json), "w", &c, None).unwrap();
            for (i, v) in values.iter().enumerate() {
                let got = back[0].snapshot.signal_at(i).unwrap().value;
                assert_eq!(
                    got.to_bits(),
                    v.to_bits(),
                    "{v} read back as {got} (json: {json})"
                );
            }
        }
    }

    #[test]
    fn timeline_write_and_read_back() {
        let c = catalog();
        let mut snaps = Vec::new();
        for (k, at) in [
            "2026-12-01T00:05:00Z",
            "2026-12-01T00:00:00Z",
            "2026-12-01T00:10:00.5Z",
        ]
        .iter()
        .enumerate()
        {
            let mut s = Snapshot::new(
                &c,
                Target {
                    engine: Some("vllm".into()),
                    labels: BTreeMap::from([("pod".into(), "p".into())]),
                },
            );
            s.window = Window {
                end_ms: Some(parse_time(at).unwrap()),
                length_ms: Some(60_000),
                lifetime: false,
            };
            s.set_signal(
                &c,
                "queue_depth",
                SignalValue {
                    value: k as f64,
                    stats: None,
                    source: "x".into(),
                },
            )
            .unwrap();
            s.set_fact(&c, "engine", FactValue::Str("vllm".into()), "detected")
                .unwrap();
            snaps.push(Prepared {
                snapshot: s,
                notes: vec![format!("n{k}")],
            });
        }
        for json in [false, true] {
            let text = write_timeline(&snaps, &c, json).unwrap();
            assert!(looks_like(&text), "{text}");
            let newest = parse(&text, "t", &c, None).unwrap();
            assert_eq!(newest[0].snapshot, snaps[2].snapshot, "{text}");
            assert_eq!(newest[0].notes[0], "n2");
            let first = parse(
                &text,
                "t",
                &c,
                Some(parse_time("2026-12-01T00:04:00Z").unwrap()),
            )
            .unwrap();
            assert_eq!(
                first[0].snapshot.signal(&c, "queue_depth").unwrap().value,
                1.0
            );
        }
        let mut lifetime = snaps[0].clone();
        lifetime.snapshot.window = Window {
            end_ms: None,
            length_ms: None,
            lifetime: true,
        };
        assert!(write_timeline(&[lifetime], &c, false)
            .unwrap_err()
            .to_string()
            .contains("cannot be a timeline point"));
        let mut other = snaps[0].clone();
        other.snapshot.window.length_ms = Some(1000);
        assert!(write_timeline(&[snaps[1].clone(), other], &c, false)
            .unwrap_err()
            .to_string()
            .contains("differ in length"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 128, failure_persistence: None, ..Default::default() })]
        #[test]
        fn never_panics_on_mangled_files(cut in 0usize..1200, junk in "[\\[\\]{}\",: \n0-9a-z_.-]{0,12}") {
            let c = catalog();
            for base in [SNAPSHOT, TIMELINE] {
                let mut cut = cut.min(base.len());
                while !base.is_char_boundary(cut) {
                    cut -= 1;
                }
                let text = format!("{}{junk}{}", &base[..cut], &base[cut..]);
                let _ = parse(&text, "p.yaml", &c, None);
                let _ = parse(&text, "p.yaml", &c, Some(1_796_083_500_000));
            }
        }
    }
}
