//! Writes a [`SeriesSet`] as OpenMetrics 1.0 text, the format `promtool tsdb
//! create-blocks-from openmetrics` backfills into Prometheus.
//!
//! A recording (`llm-doctor record --scrape`) must load into a real Prometheus so that the
//! diagnosis can be checked against PromQL, and it must read back into the same [`SeriesSet`]
//! through [`crate::source::file::exposition::parse`]. The writer therefore follows what promtool's parser
//! enforces rather than the whole of the specification:
//!
//! - one `# TYPE` line per family, all samples of a family together, families in name order;
//! - counters are declared by family name (`# TYPE vllm:num_preemptions counter`, samples
//!   `vllm:num_preemptions_total`). A Prometheus-text counter declared with its `_total` name
//!   gets that suffix stripped; a counter sample whose name does not end in `_total` (TGI's
//!   `tgi_request_count`, Triton's `nv_inference_request_success`) is written as `unknown`,
//!   which promtool imports, where `counter` would make it reject the whole file;
//! - the same for info metrics and `_info`;
//! - timestamps in seconds (`1796083215`, `1796083215.5`), values in the shortest text that
//!   parses back to the same bits (`NaN`, `+Inf`, `-Inf`), label values escaped;
//! - a final `# EOF`.
//!
//! Within a family, series are ordered as an OpenMetrics MetricPoint lays them out: by their
//! labels other than `le`/`quantile`, then buckets and quantiles in ascending order, then
//! `_count`, `_sum`, `_created` and the rest. Each series' samples are written in time order
//! (one line per sample, as recordings do); the output is a pure function of the set.

use std::collections::BTreeMap;

use crate::signal::series::{Labels, MetricType, Series, SeriesSet};

/// Renders `set` as OpenMetrics 1.0 text ending in `# EOF`. Samples without a timestamp are
/// written without one.
pub fn write(set: &SeriesSet) -> String {
    let mut out = Vec::with_capacity(64 * set.sample_count() + 8);
    // Writing into memory cannot fail, and every piece written is UTF-8.
    let _ = write_to(set, &mut out);
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// [`write`], streamed into `sink` a series at a time (a fleet-day is many gigabytes of text);
/// returns the bytes written.
pub fn write_to(set: &SeriesSet, sink: &mut impl std::io::Write) -> std::io::Result<u64> {
    // Family name -> (declared type, series). A name claimed twice with different types (a
    // pathological input) keeps the first type; every sample is still written.
    let mut families: BTreeMap<String, (MetricType, Vec<&Series>)> = BTreeMap::new();
    for series in &set.series {
        let (family, ty) = om_family(set, &series.name);
        families
            .entry(family)
            .or_insert_with(|| (ty, Vec::new()))
            .1
            .push(series);
    }
    // Declared families without samples keep their TYPE line, so that a write → parse round
    // trip preserves the declarations.
    for (name, &ty) in &set.families {
        let (family, ty) = declared_om_family(name, ty);
        families.entry(family).or_insert_with(|| (ty, Vec::new()));
    }

    let mut written = 0u64;
    let mut out = String::with_capacity(FLUSH_AT * 2);
    let mut flush = |out: &mut String, sink: &mut dyn std::io::Write| -> std::io::Result<()> {
        sink.write_all(out.as_bytes())?;
        written += out.len() as u64;
        out.clear();
        Ok(())
    };
    for (family, (ty, series)) in families {
        out.push_str("# TYPE ");
        write_name(&mut out, &family);
        out.push(' ');
        out.push_str(ty.as_str());
        out.push('\n');
        for s in in_point_order(&family, series) {
            // The text before the value is the same for every sample of the series.
            let start = out.len();
            write_series_key(&mut out, s);
            let key_end = out.len();
            for (i, sample) in s.samples.iter().enumerate() {
                if i > 0 {
                    out.extend_from_within(start..key_end);
                }
                out.push(' ');
                write_value(&mut out, sample.value);
                if let Some(t_ms) = sample.t_ms {
                    out.push(' ');
                    write_seconds(&mut out, t_ms);
                }
                out.push('\n');
            }
            if out.len() >= FLUSH_AT {
                flush(&mut out, sink)?;
            }
        }
    }
    out.push_str("# EOF\n");
    flush(&mut out, sink)?;
    Ok(written)
}

/// Text gathered before it is handed to the sink.
const FLUSH_AT: usize = 1 << 16;

/// The OpenMetrics family a sample belongs to, and the type to declare for it.
fn om_family(set: &SeriesSet, sample_name: &str) -> (String, MetricType) {
    let Some((family, ty)) = set.family_of(sample_name) else {
        return (sample_name.to_string(), MetricType::Unknown);
    };
    if family != sample_name {
        // Claimed through a suffix the type owns (`_total` of a counter, `_bucket` of a
        // histogram...): already the OpenMetrics shape.
        return (family.to_string(), ty);
    }
    match ty {
        // Declared under the sample's own name: the text format's spelling of a counter or an
        // info metric, or a sample OpenMetrics does not allow for that type.
        MetricType::Counter => with_suffix_or_unknown(sample_name, "_total", ty),
        MetricType::Info => with_suffix_or_unknown(sample_name, "_info", ty),
        _ => (family.to_string(), ty),
    }
}

/// `foo_total` of a counter → family `foo`; a counter sample without `_total` → its own
/// `unknown` family (promtool rejects it as a counter).
fn with_suffix_or_unknown(name: &str, suffix: &str, ty: MetricType) -> (String, MetricType) {
    match name.strip_suffix(suffix) {
        Some(base) if !base.is_empty() => (base.to_string(), ty),
        _ => (name.to_string(), MetricType::Unknown),
    }
}

/// The OpenMetrics spelling of a declared family, for families that have no samples.
fn declared_om_family(name: &str, ty: MetricType) -> (String, MetricType) {
    let suffix = match ty {
        MetricType::Counter => "_total",
        MetricType::Info => "_info",
        _ => return (name.to_string(), ty),
    };
    match name.strip_suffix(suffix) {
        Some(base) if !base.is_empty() => (base.to_string(), ty),
        _ => (name.to_string(), ty),
    }
}

/// The series of one family in the order MetricPoints are laid out: labels other than
/// `le`/`quantile`, then the sample's role (buckets/quantiles first, in ascending bound, then
/// `_count`, `_sum`, `_created`, anything else), then name and labels as a tie-break. Each
/// series' place is found once: a family of thousands of series is compared tens of thousands
/// of times, and reading its labels, role and bound again at each comparison was about 6 % of
/// writing a fleet's recording.
fn in_point_order<'s>(family: &str, series: Vec<&'s Series>) -> Vec<&'s Series> {
    let mut keyed: Vec<PointKey<'s>> = series
        .into_iter()
        .map(|s| {
            let labels = (s.labels.iter())
                .filter(|(n, _)| *n != "le" && *n != "quantile")
                .collect();
            (labels, role(family, s), bound(s), s)
        })
        .collect();
    keyed.sort_by(|a, b| {
        (a.0.cmp(&b.0))
            .then(a.1.cmp(&b.1))
            .then(a.2.total_cmp(&b.2))
            .then_with(|| a.3.key_cmp(b.3))
    });
    keyed.into_iter().map(|k| k.3).collect()
}

/// A series' place in its family: its labels other than `le`/`quantile`, its role, its bound.
type PointKey<'s> = (Vec<(&'s str, &'s str)>, u8, f64, &'s Series);

/// Rank of a sample's suffix inside a MetricPoint.
fn role(family: &str, s: &Series) -> u8 {
    match s.name.strip_prefix(family).unwrap_or(&s.name) {
        "_bucket" | "" => 0,
        "_count" | "_gcount" => 1,
        "_sum" | "_gsum" => 2,
        "_created" => 3,
        _ => 4,
    }
}

/// The `le` or `quantile` bound as a number (`+Inf` last); 0 when there is none or it does
/// not parse, so the label text decides through the tie-break.
fn bound(s: &Series) -> f64 {
    s.labels
        .get("le")
        .or_else(|| s.labels.get("quantile"))
        .and_then(parse_bound)
        .unwrap_or(0.0)
}

fn parse_bound(v: &str) -> Option<f64> {
    match v {
        "+Inf" | "Inf" | "inf" | "+inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => v.parse().ok(),
    }
}

/// Whether `name` is a classic metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`), writable unquoted.
fn is_plain_metric_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_' || c == b':')
        && bytes.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
}

/// Whether `name` is a classic label name (`[a-zA-Z_][a-zA-Z0-9_]*`), writable unquoted.
fn is_plain_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && bytes.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// A metric name, quoted (the Prometheus 3 form the parser accepts) when it is not a classic
/// name; promtool 2.x cannot import those, but they survive a round trip.
fn write_name(out: &mut String, name: &str) {
    if is_plain_metric_name(name) {
        out.push_str(name);
    } else {
        write_quoted(out, name);
    }
}

/// `"text"` with `\\`, `\"` and `\n` escaped.
fn write_quoted(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `name{labels}`, or `{"name",labels}` for a name that needs quoting.
fn write_series_key(out: &mut String, s: &Series) {
    let quoted = !is_plain_metric_name(&s.name);
    if quoted {
        out.push('{');
        write_quoted(out, &s.name);
    } else {
        out.push_str(&s.name);
        if s.labels.is_empty() {
            return;
        }
        out.push('{');
    }
    write_labels(out, &s.labels, quoted);
    out.push('}');
}

/// `a="b",c="d"` (without braces); `comma_first` when something precedes them in the braces.
fn write_labels(out: &mut String, labels: &Labels, comma_first: bool) {
    for (i, (name, value)) in labels.iter().enumerate() {
        if i > 0 || comma_first {
            out.push(',');
        }
        if is_plain_label_name(name) {
            out.push_str(name);
        } else {
            write_quoted(out, name);
        }
        out.push('=');
        write_quoted(out, value);
    }
}

/// The shortest decimal text that parses back to the same `f64` (Rust's float formatting is
/// round-trip exact), with an exponent only for very large or small magnitudes so that
/// `1e300` does not become 301 digits. Go's `ParseFloat` (promtool) reads all of these.
fn write_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.trunc() == v && v.abs() < 1e15 && (v != 0.0 || v.is_sign_positive()) {
        // Counts and histogram buckets, most of a recording: a whole number below 1e15 is
        // exactly an i64, and its digits are Ryū's without the `.0` (-0.0 keeps Ryū's `-0`).
        out.push_str(itoa::Buffer::new().format(v as i64));
    } else {
        // Ryū writes the same shortest digits, as a decimal from 1e-5 to 1e16 and with an
        // exponent outside (`1e-6`, `1.5e20`, as `{:e}` does); a whole number ends in `.0`.
        let mut buffer = ryu::Buffer::new();
        let text = buffer.format_finite(v);
        out.push_str(text.strip_suffix(".0").unwrap_or(text));
    }
}

/// Milliseconds as seconds: `1796083215`, `1796083215.5`, `-1.25`, never trailing zeros.
fn write_seconds(out: &mut String, t_ms: i64) {
    if t_ms < 0 {
        out.push('-');
    }
    let abs = t_ms.unsigned_abs();
    let (secs, millis) = (abs / 1000, abs % 1000);
    out.push_str(itoa::Buffer::new().format(secs));
    if millis != 0 {
        let digits = [millis / 100, millis / 10 % 10, millis % 10].map(|d| b'0' + d as u8);
        let shown = if millis % 10 != 0 {
            3
        } else if millis % 100 != 0 {
            2
        } else {
            1
        };
        out.push('.');
        out.push_str(std::str::from_utf8(&digits[..shown]).unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::series::testutil::series;
    use crate::source::file::exposition::parse;

    fn set(series: Vec<Series>, families: &[(&str, MetricType)]) -> SeriesSet {
        let mut set = SeriesSet {
            series,
            families: families.iter().map(|(n, t)| (n.to_string(), *t)).collect(),
            has_timestamps: false,
            conflicts: Default::default(),
        };
        set.normalize();
        set
    }

    /// Compares through `Debug`, where NaN equals NaN (PartialEq on f64 says it does not).
    fn assert_same(a: &SeriesSet, b: &SeriesSet) {
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }

    fn seconds(t_ms: i64) -> String {
        let mut s = String::new();
        write_seconds(&mut s, t_ms);
        s
    }

    fn value(v: f64) -> String {
        let mut s = String::new();
        write_value(&mut s, v);
        s
    }

    // Long on purpose: test data, every awkward case in one set.
    fn rich_set() -> SeriesSet {
        use MetricType::*;
        let t0 = 1_796_083_215_000;
        let model = "Qwen/Qwen2.5-7B \"chat\"\\v1\nx";
        set(
            vec![
                series(
                    "vllm:num_preemptions_total",
                    &[("model_name", model)],
                    &[
                        (Some(t0), 1.0),
                        (Some(t0 + 500), 4.0),
                        (Some(t0 + 15_001), 9.0),
                    ],
                ),
                series(
                    "vllm:num_requests_waiting",
                    &[("model_name", model)],
                    &[
                        (Some(t0), f64::NAN),
                        (Some(t0 + 500), f64::INFINITY),
                        (Some(t0 + 15_001), f64::NEG_INFINITY),
                    ],
                ),
                series(
                    "vllm:gpu_cache_usage_perc",
                    &[("model_name", model)],
                    &[(Some(t0), 0.1 + 0.2), (Some(t0 + 500), 1e300)],
                ),
                series("tiny", &[], &[(Some(-1_250), 1.5e-7), (Some(0), -0.0)]),
            ]
            .into_iter()
            .chain(
                [("0.1", 1.0), ("1.0", 3.0), ("+Inf", 4.0)]
                    .iter()
                    .map(|&(le, v)| {
                        series(
                            "vllm:e2e_request_latency_seconds_bucket",
                            &[("le", le), ("model_name", "m")],
                            &[(Some(t0), v), (Some(t0 + 15_000), v * 2.0)],
                        )
                    }),
            )
            .chain([
                series(
                    "vllm:e2e_request_latency_seconds_count",
                    &[("model_name", "m")],
                    &[(Some(t0), 4.0), (Some(t0 + 15_000), 8.0)],
                ),
                series(
                    "vllm:e2e_request_latency_seconds_sum",
                    &[("model_name", "m")],
                    &[(Some(t0), 2.5), (Some(t0 + 15_000), 5.25)],
                ),
                series(
                    "tgi_request_duration",
                    &[("quantile", "0.5")],
                    &[(Some(t0), 0.25)],
                ),
                series(
                    "tgi_request_duration",
                    &[("quantile", "0.99")],
                    &[(Some(t0), 2.0)],
                ),
                series("tgi_request_duration_count", &[], &[(Some(t0), 10.0)]),
                series("tgi_request_duration_sum", &[], &[(Some(t0), 3.0)]),
                series(
                    "vllm:cache_config_info",
                    &[("block_size", "16")],
                    &[(Some(t0), 1.0)],
                ),
            ])
            .collect(),
            &[
                ("vllm:num_preemptions", Counter),
                ("vllm:num_requests_waiting", Gauge),
                ("vllm:gpu_cache_usage_perc", Gauge),
                ("vllm:e2e_request_latency_seconds", Histogram),
                ("tgi_request_duration", Summary),
                ("vllm:cache_config", Info),
                ("declared_only", Gauge),
                // The writer declares every family; undeclared ones come back `unknown`.
                ("tiny", Unknown),
            ],
        )
    }

    #[test]
    fn round_trip_through_the_parser() {
        let original = rich_set();
        let text = write(&original);
        let back = parse(&text, "rt.om").unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_same(&back, &original);
        assert!(back.has_timestamps);
        // And the output is a fixed point.
        assert_eq!(write(&back), text);
    }

    #[test]
    fn layout_type_lines_and_seconds() {
        let text = write(&rich_set());
        let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE")).collect();
        assert_eq!(
            types,
            [
                "# TYPE declared_only gauge",
                "# TYPE tgi_request_duration summary",
                "# TYPE tiny unknown",
                "# TYPE vllm:cache_config info",
                "# TYPE vllm:e2e_request_latency_seconds histogram",
                "# TYPE vllm:gpu_cache_usage_perc gauge",
                "# TYPE vllm:num_preemptions counter",
                "# TYPE vllm:num_requests_waiting gauge",
            ]
        );
        assert!(text.ends_with("\n# EOF\n"));
        let hist: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("histogram"))
            .skip(1)
            .take_while(|l| !l.starts_with('#'))
            .collect();
        assert_eq!(
            hist,
            [
                r#"vllm:e2e_request_latency_seconds_bucket{le="0.1",model_name="m"} 1 1796083215"#,
                r#"vllm:e2e_request_latency_seconds_bucket{le="0.1",model_name="m"} 2 1796083230"#,
                r#"vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 3 1796083215"#,
                r#"vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 6 1796083230"#,
                r#"vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 4 1796083215"#,
                r#"vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 8 1796083230"#,
                r#"vllm:e2e_request_latency_seconds_count{model_name="m"} 4 1796083215"#,
                r#"vllm:e2e_request_latency_seconds_count{model_name="m"} 8 1796083230"#,
                r#"vllm:e2e_request_latency_seconds_sum{model_name="m"} 2.5 1796083215"#,
                r#"vllm:e2e_request_latency_seconds_sum{model_name="m"} 5.25 1796083230"#,
            ]
        );
        assert!(text.contains(
            "vllm:num_preemptions_total{model_name=\"Qwen/Qwen2.5-7B \\\"chat\\\"\\\\v1\\nx\"} 4 1796083215.5\n"
        ));
        assert!(text.contains(" NaN 1796083215\n"));
        assert!(text.contains(" +Inf 1796083215.5\n"));
        assert!(text.contains(" -Inf 1796083230.001\n"));
        assert!(text.contains("tiny 1.5e-7 -1.25\ntiny -0 0\n"));
        assert!(text.contains("vllm:cache_config_info{block_size=\"16\"} 1 1796083215\n"));
    }

    #[test]
    fn text_format_counters_get_openmetrics_family_names() {
        let input = "\
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation=\"0\"} 7 1000
# TYPE tgi_request_count counter
tgi_request_count 5 1000
# TYPE nv_inference_request_success counter
nv_inference_request_success{model=\"m\",version=\"1\"} 12 1000
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size=\"16\"} 1 1000
# TYPE empty_total counter
";
        let text = write(&parse(input, "t.prom").unwrap());
        assert_eq!(
            text,
            "\
# TYPE empty counter
# TYPE nv_inference_request_success unknown
nv_inference_request_success{model=\"m\",version=\"1\"} 12 1
# TYPE python_gc_objects_collected counter
python_gc_objects_collected_total{generation=\"0\"} 7 1
# TYPE tgi_request_count unknown
tgi_request_count 5 1
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size=\"16\"} 1 1
# EOF
"
        );
        let back = parse(&text, "t.om").unwrap();
        assert_eq!(
            back.family_type("python_gc_objects_collected_total"),
            MetricType::Counter
        );
        assert_eq!(back.family_type("tgi_request_count"), MetricType::Unknown);
    }

    #[test]
    fn samples_without_timestamps_and_quoted_names() {
        let original = set(
            vec![
                series("up", &[("job", "x")], &[(None, 1.0)]),
                series(
                    "my.metric",
                    &[("my.label", "v"), ("l", "w")],
                    &[(None, 2.0)],
                ),
                series("no_labels", &[], &[(None, 3.0)]),
            ],
            &[("my.metric", MetricType::Gauge)],
        );
        let text = write(&original);
        assert_eq!(
            text,
            "\
# TYPE \"my.metric\" gauge
{\"my.metric\",l=\"w\",\"my.label\"=\"v\"} 2
# TYPE no_labels unknown
no_labels 3
# TYPE up unknown
up{job=\"x\"} 1
# EOF
"
        );
        let back = parse(&text, "t.om").unwrap();
        // Undeclared families come back declared `unknown`; the samples are unchanged.
        assert_eq!(back.series, original.series);
        assert!(!back.has_timestamps);
    }

    #[test]
    fn empty_set_is_just_eof() {
        assert_eq!(write(&SeriesSet::default()), "# EOF\n");
    }

    #[test]
    fn seconds_formatting() {
        assert_eq!(seconds(1_796_083_215_000), "1796083215");
        assert_eq!(seconds(1_796_083_215_500), "1796083215.5");
        assert_eq!(seconds(1_796_083_215_020), "1796083215.02");
        assert_eq!(seconds(1_796_083_215_007), "1796083215.007");
        assert_eq!(seconds(0), "0");
        assert_eq!(seconds(-1_500), "-1.5");
        assert_eq!(seconds(-1), "-0.001");
        assert_eq!(seconds(i64::MIN), "-9223372036854775.808");
    }

    #[test]
    fn values_round_trip_bit_for_bit() {
        for v in [
            0.0,
            -0.0,
            1.0,
            0.1 + 0.2,
            1e-5,
            9.999e-6,
            1e16,
            123_456_789_012_345.67,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            -2.5e-300,
        ] {
            let text = value(v);
            let back: f64 = text.parse().unwrap();
            assert_eq!(back.to_bits(), v.to_bits(), "{v:e} written as {text}");
            assert!(text.len() <= 24, "{text}");
        }
        assert_eq!(value(1.0), "1");
        assert_eq!(value(1e300), "1e300");
        assert_eq!(value(f64::NAN), "NaN");
        assert_eq!(value(f64::INFINITY), "+Inf");
        assert_eq!(value(f64::NEG_INFINITY), "-Inf");
    }

    /// The text Rust's own float and integer formatting gave before Ryū and itoa wrote it.
    fn formatted_before(v: f64) -> String {
        match v {
            v if v.is_nan() => "NaN".to_string(),
            v if v.is_infinite() => (if v > 0.0 { "+Inf" } else { "-Inf" }).to_string(),
            v if v != 0.0 && !(1e-5..1e16).contains(&v.abs()) => format!("{v:e}"),
            v => format!("{v}"),
        }
    }

    fn seconds_before(t_ms: i64) -> String {
        let sign = if t_ms < 0 { "-" } else { "" };
        let (secs, millis) = (t_ms.unsigned_abs() / 1000, t_ms.unsigned_abs() % 1000);
        match millis {
            0 => format!("{sign}{secs}"),
            m => format!("{sign}{secs}.{}", format!("{m:03}").trim_end_matches('0')),
        }
    }

    #[test]
    fn numbers_are_written_as_rust_formats_them() {
        for v in [
            0.0,
            -0.0,
            1.0,
            -3.0,
            0.1,
            1e-5,
            9.99e-6,
            1e15,
            9.999e15,
            1e16,
            1.5e20,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
            123456789.125,
            1796083207.0,
            999_999_999_999_999.0,
            -999_999_999_999_999.0,
            -42.0,
            4096.0,
        ] {
            assert_eq!(value(v), formatted_before(v), "{v:e}");
        }
        for t in [
            0,
            1,
            10,
            100,
            999,
            1000,
            1001,
            1010,
            1100,
            -1,
            -1500,
            i64::MIN,
            i64::MAX,
        ] {
            assert_eq!(seconds(t), seconds_before(t), "{t}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 4096, failure_persistence: None, ..Default::default() })]
        /// Round-trip exact, as short as Rust's text and in the same form. Where more than
        /// one text of the shortest length parses back to the float (15 significant digits or
        /// more), Ryū and Rust may pick different ones (`563600081208525.2` and `...525.3`).
        #[test]
        fn any_value_is_written_as_short_as_rust_writes_it(bits: u64) {
            let v = f64::from_bits(bits);
            let (ours, rusts) = (value(v), formatted_before(v));
            if v.is_nan() {
                proptest::prop_assert_eq!(ours, rusts);
            } else {
                proptest::prop_assert_eq!(ours.parse::<f64>().map(f64::to_bits), Ok(bits), "{}", ours);
                proptest::prop_assert_eq!(ours.len(), rusts.len(), "{} {}", ours, rusts);
                proptest::prop_assert_eq!(ours.contains('e'), rusts.contains('e'), "{} {}", ours, rusts);
            }
        }

        /// Whole numbers take their own path (itoa): the same text as Rust's.
        #[test]
        fn any_whole_value_is_written_as_rust_writes_it(n in -2_000_000_000_000_000i64..2_000_000_000_000_000) {
            let v = n as f64;
            proptest::prop_assert_eq!(value(v), formatted_before(v));
        }

        #[test]
        fn any_timestamp_is_written_as_before(t_ms: i64) {
            proptest::prop_assert_eq!(seconds(t_ms), seconds_before(t_ms));
        }
    }
}
