//! Tests of the parser as a whole: both formats, leniencies, every error kind located, and
//! properties over arbitrary input.

use proptest::prelude::*;

use super::*;
use crate::signal::series::{MetricType, Sample, SeriesSet};

fn ok(text: &str) -> SeriesSet {
    parse(text, "t.prom").unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> String {
    parse(text, "t.prom").unwrap_err().to_string()
}

fn values(set: &SeriesSet, name: &str) -> Vec<(Option<i64>, f64)> {
    set.iter_by_name(name)
        .flat_map(|s| s.samples.iter().map(|x| (x.t_ms, x.value)))
        .collect()
}

#[test]
fn vllm_text_scrape() {
    let text = "\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B\"} 3.0
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B\"} 12.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.001\",model_name=\"m\"} 0.0
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 7.0
vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"m\"} 7.0
vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"m\"} 1.25
";
    let set = ok(text);
    assert_eq!(set.series.len(), 6);
    assert!(!set.has_timestamps);
    let running: Vec<_> = set.iter_by_name("vllm:num_requests_running").collect();
    assert_eq!(running.len(), 1);
    assert_eq!(
        running[0].labels.get("model_name"),
        Some("meta-llama/Llama-3.1-8B")
    );
    assert_eq!(running[0].labels.get("engine"), Some("0"));
    assert_eq!(
        running[0].samples.to_vec(),
        [Sample {
            t_ms: None,
            value: 3.0
        }]
    );
    assert_eq!(
        set.family_type("vllm:num_preemptions_total"),
        MetricType::Counter
    );
    assert_eq!(
        set.family_type("vllm:time_to_first_token_seconds_bucket"),
        MetricType::Histogram
    );
    assert_eq!(
        set.family_type("vllm:time_to_first_token_seconds_sum"),
        MetricType::Histogram
    );
    let buckets: Vec<_> = set
        .iter_by_name("vllm:time_to_first_token_seconds_bucket")
        .map(|s| s.labels.get("le").unwrap().to_string())
        .collect();
    assert_eq!(buckets, ["+Inf", "0.001"]);
}

#[test]
fn escaped_label_values_and_leniencies() {
    let set = ok(concat!(
        "a{path=\"C:\\\\x\",q=\"say \\\"hi\\\"\",nl=\"1\\n2\",odd=\"\\d\"} 1\n",
        "b { x = \"1\" , y=\"2\", } 2\n",
        "c{} 3\n",
        "d{empty=\"\",k=\"v\"}\t4\n",
        "  e\t5  \r\n",
    ));
    let a = set.iter_by_name("a").next().unwrap();
    assert_eq!(a.labels.get("path"), Some("C:\\x"));
    assert_eq!(a.labels.get("q"), Some("say \"hi\""));
    assert_eq!(a.labels.get("nl"), Some("1\n2"));
    assert_eq!(a.labels.get("odd"), Some("\\d"));
    assert_eq!(
        a.labels.to_string(),
        r#"{nl="1\n2",odd="\\d",path="C:\\x",q="say \"hi\""}"#
    );
    let b = set.iter_by_name("b").next().unwrap();
    assert_eq!(b.labels.to_string(), r#"{x="1",y="2"}"#);
    assert!(set.iter_by_name("c").next().unwrap().labels.is_empty());
    assert_eq!(
        set.iter_by_name("d").next().unwrap().labels.to_string(),
        r#"{k="v"}"#
    );
    assert_eq!(values(&set, "e"), [(None, 5.0)]);
}

#[test]
fn special_values() {
    let set = ok("a NaN\nb +Inf\nc -Inf\nd Inf\ne 1e3\nf -0.5\ng inf\nh 12\n");
    assert!(values(&set, "a")[0].1.is_nan());
    assert_eq!(values(&set, "b")[0].1, f64::INFINITY);
    assert_eq!(values(&set, "c")[0].1, f64::NEG_INFINITY);
    assert_eq!(values(&set, "d")[0].1, f64::INFINITY);
    assert_eq!(values(&set, "e")[0].1, 1000.0);
    assert_eq!(values(&set, "f")[0].1, -0.5);
    assert_eq!(values(&set, "g")[0].1, f64::INFINITY);
    assert_eq!(values(&set, "h")[0].1, 12.0);
}

#[test]
fn openmetrics_with_eof_unit_exemplars_and_second_timestamps() {
    let text = "\
# TYPE vllm:num_preemptions counter
# HELP vllm:num_preemptions Cumulative number of preemption from the engine.
vllm:num_preemptions_total{model_name=\"m\"} 1 1717000000.123
vllm:num_preemptions_total{model_name=\"m\"} 4 1717000015
vllm:num_preemptions_created{model_name=\"m\"} 1716999000 1717000000.123
# TYPE vllm:e2e_request_latency_seconds histogram
# UNIT vllm:e2e_request_latency_seconds seconds
vllm:e2e_request_latency_seconds_bucket{le=\"1.0\"} 2 1717000000 # {trace_id=\"abc\"} 0.7 1717000000.5
vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 3 1717000000 # {} 9
vllm:e2e_request_latency_seconds_count 3 # {trace_id=\"x\"} 1.0
# EOF
";
    let set = ok(text);
    assert_eq!(
        values(&set, "vllm:num_preemptions_total"),
        [
            (Some(1_717_000_000_123), 1.0),
            (Some(1_717_000_015_000), 4.0)
        ]
    );
    assert_eq!(
        set.family_type("vllm:num_preemptions_total"),
        MetricType::Counter
    );
    assert_eq!(
        set.family_type("vllm:num_preemptions_created"),
        MetricType::Counter
    );
    assert_eq!(
        set.family_type("vllm:e2e_request_latency_seconds_count"),
        MetricType::Histogram
    );
    // The `_count` line has no timestamp, so not every sample has one.
    assert!(!set.has_timestamps);
    assert_eq!(set.newest_ms(), Some(1_717_000_015_000));
    assert_eq!(set.oldest_ms(), Some(1_717_000_000_000));
    // Trailing blank lines after `# EOF` are fine.
    ok("a 1 1\n# EOF\n\n  \n");
}

#[test]
fn text_format_millisecond_recording() {
    let text = "\
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name=\"m\"} 0 1717000000000
vllm:num_requests_waiting{model_name=\"m\"} 5 1717000015000
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name=\"m\"} 9 1717000030000
vllm:num_requests_waiting{model_name=\"other\"} 1 1717000030000
";
    let set = ok(text);
    assert!(set.has_timestamps);
    assert_eq!(set.series.len(), 2);
    assert_eq!(
        values(&set, "vllm:num_requests_waiting")[..3],
        [
            (Some(1_717_000_000_000), 0.0),
            (Some(1_717_000_015_000), 5.0),
            (Some(1_717_000_030_000), 9.0)
        ]
    );
}

#[test]
fn samples_are_sorted_and_differently_spelled_series_joined() {
    let set = ok("\
x{a=\"1\",b=\"2\"} 3 3000
x{b=\"2\", a=\"1\"} 1 1000
x{a=\"1\",b=\"2\"} 2 2000
x{a=\"1\",b=\"2\"} 20 2000
");
    assert_eq!(set.series.len(), 1);
    assert_eq!(
        values(&set, "x"),
        [(Some(1000), 1.0), (Some(2000), 20.0), (Some(3000), 3.0)]
    );
}

#[test]
fn merge_two_files() {
    let mut a = ok("# TYPE c counter\nc_total{p=\"x\"} 1 1000\nc_total{p=\"x\"} 2 2000\n");
    let b = ok("# TYPE g gauge\nc_total{p=\"x\"} 3 3000\nc_total{p=\"x\"} 22 2000\ng 1 2000\n");
    a.merge(b);
    assert_eq!(
        values(&a, "c_total"),
        [(Some(1000), 1.0), (Some(2000), 22.0), (Some(3000), 3.0)]
    );
    assert_eq!(a.family_type("c_total"), MetricType::Counter);
    assert_eq!(a.family_type("g"), MetricType::Gauge);
    assert!(a.has_timestamps);
}

#[test]
fn quoted_names() {
    let set = ok(concat!(
        "# TYPE \"my.metric\" gauge\n",
        "{\"my.metric\",\"my.label\"=\"v\",l=\"w\"} 1\n",
        "{\"other.metric\"} 2\n",
    ));
    let s = set.iter_by_name("my.metric").next().unwrap();
    assert_eq!(s.labels.get("my.label"), Some("v"));
    assert_eq!(s.labels.get("l"), Some("w"));
    assert_eq!(set.family_type("my.metric"), MetricType::Gauge);
    assert_eq!(values(&set, "other.metric"), [(None, 2.0)]);
}

#[test]
fn empty_and_comment_only_input() {
    for text in [
        "",
        "\n\n",
        "# just a comment\n# HELP x y\n# TYPE x gauge\n",
        "# EOF\n",
    ] {
        let set = ok(text);
        assert!(set.series.is_empty());
        assert!(!set.has_timestamps);
    }
    assert_eq!(ok("# TYPE x gauge\n").families["x"], MetricType::Gauge);
}

#[test]
fn error_display_format() {
    assert_eq!(
        err("ok 1\nvllm:x{model_name \"m\"} 1\n"),
        "t.prom:2:19: expected `=` after label name `model_name`\n  \
             | vllm:x{model_name \"m\"} 1\n  \
             |                   ^"
    );
}

#[test]
// Long on purpose: a table of cases, one per error kind.
fn every_error_kind_is_located() {
    // (input, line, column, message)
    let cases: &[(&str, usize, usize, &str)] = &[
        ("x{model_name=\"m\"} 12a", 1, 19, "invalid value `12a`"),
        ("x{a=\"unterminated} 1", 1, 5, "unterminated label value"),
        ("9x 1", 1, 1, "invalid metric name starting with `9`"),
        ("a 1\n# EOF\nb 2\n", 3, 1, "content after `# EOF`"),
        ("a 1\n# EOF\n  # EOF\n", 3, 3, "content after `# EOF`"),
        (
            "x{pod=\"a\",ns=\"b\",pod=\"c\"} 1",
            1,
            18,
            "duplicate label `pod`",
        ),
        ("x 1 abc", 1, 5, "invalid timestamp `abc`"),
        (
            "x{a=\"1\"} 1\ny 2\nx{a=\"1\"} 3\n",
            3,
            1,
            "`x{a=\"1\"}` again without a timestamp: a series has one sample per instant \
             (give each sample its timestamp, or one scrape per file)",
        ),
        // The predicted-key path (the series that followed last time) too.
        (
            "x 1\ny 2\nx 3\ny 4\n",
            3,
            1,
            "`x` again without a timestamp: a series has one sample per instant \
             (give each sample its timestamp, or one scrape per file)",
        ),
        (
            "x 1 1717000000.5",
            1,
            5,
            "invalid timestamp `1717000000.5` (Prometheus text format timestamps are \
                 integer milliseconds; an OpenMetrics file must end with `# EOF`)",
        ),
        ("x 1 abc\n# EOF", 1, 5, "invalid timestamp `abc`"),
        ("x", 1, 2, "missing value after `x`"),
        ("x{a=\"b\"}", 1, 9, "missing value after `x{a=\"b\"}`"),
        ("x 1 2 3", 1, 7, "unexpected `3` after timestamp"),
        ("x 1 # {a=\"b\"} zz", 1, 15, "invalid exemplar value `zz`"),
        (
            "x 1 # {a=\"b\"} 1 t",
            1,
            17,
            "invalid exemplar timestamp `t`",
        ),
        (
            "x 1 # a",
            1,
            7,
            "expected `{` to start the exemplar labels, found `a`",
        ),
        (
            "x{a=\"b\" c=\"d\"} 1",
            1,
            9,
            "expected `,` or `}` after label value, found `c`",
        ),
        ("x{a=\"b\"", 1, 8, "unterminated label set"),
        (
            "x{a=b} 1",
            1,
            5,
            "expected `\"` to open the value of label `a`",
        ),
        (
            "x{1a=\"b\"} 1",
            1,
            3,
            "invalid label name starting with `1`",
        ),
        ("x{,} 1", 1, 3, "invalid label name starting with `,`"),
        ("{a=\"b\"} 1", 1, 1, "missing metric name"),
        ("x-y 1", 1, 2, "unexpected `-` after metric name `x`"),
        ("x{\"q\"} 1", 1, 6, "expected `=` after label name `q`"),
        ("# TYPE x countr", 1, 10, "invalid metric type `countr`"),
        ("# TYPE x", 1, 9, "missing metric type after `# TYPE x`"),
        ("# TYPE", 1, 7, "missing metric name after `# TYPE`"),
        (
            "# TYPE 1x gauge",
            1,
            8,
            "invalid metric name starting with `1`",
        ),
        ("é 1", 1, 1, "invalid metric name starting with `é`"),
        // Columns count characters, not bytes.
        ("x{a=\"é\"} 1 bad", 1, 12, "invalid timestamp `bad`"),
    ];
    for &(input, line, column, message) in cases {
        let e = parse(input, "f.om").unwrap_err();
        assert_eq!(
            (e.line, e.column, e.message.as_str()),
            (line, column, message),
            "input {input:?}"
        );
        assert_eq!(e.file, "f.om");
    }
}

#[test]
fn caret_follows_tabs_and_columns() {
    let e = parse("x\t1\tzz", "f").unwrap_err();
    assert_eq!(
        e.to_string(),
        "f:1:5: invalid timestamp `zz`\n  | x\t1\tzz\n  |  \t \t^"
    );
    let e = parse("9", "f").unwrap_err();
    assert_eq!(
        e.to_string(),
        "f:1:1: invalid metric name starting with `9`\n  | 9\n  | ^"
    );
}

#[test]
fn a_long_line_is_cut_around_the_error_with_the_caret_still_under_it() {
    let label = "v".repeat(5_000_000);
    let input = format!("x{{a=\"{label}\"}} 1 zz\n");
    let e = parse(&input, "f").unwrap_err();
    assert_eq!((e.line, e.column), (1, input.find("zz").unwrap() + 1));
    let text = e.to_string();
    assert!(text.len() < 1_000, "{} bytes", text.len());
    assert!(
        e.line_text.starts_with('…') && e.line_text.ends_with("1 zz"),
        "{}",
        e.line_text
    );
    // The caret points at `zz` in what is shown.
    let shown: Vec<char> = e.line_text.chars().collect();
    assert_eq!(shown[e.caret - 1..].iter().collect::<String>(), "zz");
}

#[test]
fn eof_detection_needs_a_whole_line() {
    // `# EOF` inside a comment or a label does not switch to OpenMetrics: ms stay ms.
    let set = ok("# not # EOF\nx{a=\"# EOF\"} 1 1500\n");
    assert_eq!(values(&set, "x"), [(Some(1500), 1.0)]);
    let set = ok("x 1 1500\n# EOF\r\n");
    assert_eq!(values(&set, "x"), [(Some(1_500_000), 1.0)]);
}

/// Invariants every successful parse must keep.
fn check_invariants(set: &SeriesSet) {
    for w in set.series.windows(2) {
        assert_eq!(w[0].key_cmp(&w[1]), std::cmp::Ordering::Less);
    }
    for s in &set.series {
        for w in s.samples.to_vec().windows(2) {
            assert!(w[0].t_ms < w[1].t_ms);
        }
    }
}

const FRAGMENTS: &[&str] = &[
    "vllm:x",
    "x_total",
    "{",
    "}",
    "=",
    ",",
    "\"",
    "\\",
    "\\\"",
    "\\n",
    "a",
    "le",
    "\"v\"",
    " ",
    "\t",
    "\n",
    "\r\n",
    "#",
    "# TYPE ",
    "# HELP ",
    "# UNIT ",
    "# EOF",
    "counter",
    "histogram",
    "gauge",
    "1",
    "1.5",
    "-3",
    "1e3",
    "NaN",
    "+Inf",
    "-Inf",
    "1717000000.123",
    "1717000000000",
    "é",
    "\u{10FFFF}",
    "\0",
    "9",
    "{\"q.n\"",
    ":",
    "_",
    "00000000000000000000",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(set) = parse(&text, "fuzz") {
            check_invariants(&set);
        }
    }

    #[test]
    fn exposition_like_soup_never_panics(text in soup()) {
        match parse(&text, "fuzz") {
            Ok(set) => check_invariants(&set),
            Err(e) => {
                prop_assert!(e.line >= 1 && e.column >= 1);
                let _ = e.to_string();
            }
        }
    }
}

/// Throughput check, run by hand: `cargo test --release --lib -- --ignored --nocapture`.
#[test]
#[ignore]
fn throughput() {
    use std::fmt::Write;
    let mut recording = String::new();
    let mut t = 1_717_000_000_000i64;
    while recording.len() < 3_000_000 {
        for engine in 0..4 {
            for le in ["0.001", "0.01", "0.1", "1.0", "10.0", "+Inf"] {
                writeln!(
                        recording,
                        "vllm:time_to_first_token_seconds_bucket{{engine=\"{engine}\",le=\"{le}\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}} {} {t}",
                        t % 9973
                    )
                    .unwrap();
            }
            writeln!(
                    recording,
                    "vllm:num_requests_running{{engine=\"{engine}\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}} 3.5 {t}"
                )
                .unwrap();
        }
        t += 15_000;
    }
    let mut scrape = String::new();
    let mut i = 0;
    while scrape.len() < 3_000_000 {
        writeln!(
                scrape,
                "vllm:some_metric_total{{engine=\"0\",pod=\"pod-{i}\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}} {}.25",
                i * 7
            )
            .unwrap();
        i += 1;
    }
    for (what, text) in [("recording", &recording), ("distinct series", &scrape)] {
        let started = std::time::Instant::now();
        let rounds = 5;
        for _ in 0..rounds {
            std::hint::black_box(parse(text, "bench").unwrap());
        }
        let secs = started.elapsed().as_secs_f64() / rounds as f64;
        println!(
            "{what}: {:.1} MB in {:.1} ms = {:.0} MB/s",
            text.len() as f64 / 1e6,
            secs * 1e3,
            text.len() as f64 / 1e6 / secs
        );
    }
}
