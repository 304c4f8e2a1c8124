//! The server's own `/metrics`, in the Prometheus text format: a few labelled counters and one
//! histogram, kept in memory (no client library needed for so few series), and unlabelled
//! gauges whose values the caller reads at render time (the delivery queue's).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Upper bounds of `llm_doctor_handling_seconds`' buckets.
const BUCKETS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Counters by (metric, label value) and the handling-time histogram.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    counters: BTreeMap<(&'static str, String), u64>,
    bucket_counts: Vec<u64>,
    sum: f64,
    count: u64,
}

/// The values a family's label may take when they come from the request (an alert's
/// `status`): anything else is counted as `other`, so a client cannot grow `/metrics`.
const ALLOWED: &[(&str, &[&str])] =
    &[("llm_doctor_alerts_received_total", &["firing", "resolved"])];

/// Counter families: (name, label, help).
const FAMILIES: &[(&str, &str, &str)] = &[
    (
        "llm_doctor_alerts_received_total",
        "status",
        "Alerts received, by status (firing, resolved, other).",
    ),
    (
        "llm_doctor_diagnoses_total",
        "outcome",
        "Diagnoses made, by outcome (diagnosed, unavailable, cached).",
    ),
    (
        "llm_doctor_peer_forwards_total",
        "outcome",
        "Notifications passed to the peer that owns them, by outcome (answered, unreachable: the next peer tried, no_answer: 503).",
    ),
    (
        "llm_doctor_sink_failures_total",
        "sink",
        "Notifications a sink did not accept before the retry deadline.",
    ),
    (
        "llm_doctor_sink_retries_total",
        "sink",
        "Retried deliveries to a sink.",
    ),
    (
        "llm_doctor_webhook_requests_total",
        "code",
        "Webhook requests answered, by HTTP status code.",
    ),
];

impl Metrics {
    /// Adds one to `name{label=value}`; `name` must be one of the families.
    pub fn inc(&self, name: &'static str, value: &str) {
        debug_assert!(
            FAMILIES.iter().any(|f| f.0 == name),
            "unknown metric {name}"
        );
        let value = match ALLOWED.iter().find(|(family, _)| *family == name) {
            Some((_, allowed)) if !allowed.contains(&value) => "other",
            _ => value,
        };
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *m.counters.entry((name, value.to_string())).or_default() += 1;
    }

    /// Records one request's handling time.
    pub fn observe_seconds(&self, seconds: f64) {
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if m.bucket_counts.is_empty() {
            m.bucket_counts = vec![0; BUCKETS.len()];
        }
        for (i, le) in BUCKETS.iter().enumerate() {
            if seconds <= *le {
                m.bucket_counts[i] += 1;
            }
        }
        m.sum += seconds;
        m.count += 1;
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        for (name, label, help) in FAMILIES {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            for ((n, value), count) in &m.counters {
                if n == name {
                    let _ = writeln!(out, "{name}{{{label}=\"{}\"}} {count}", escape(value));
                }
            }
        }
        let name = "llm_doctor_handling_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time to handle one webhook request, diagnosis and delivery included."
        );
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (i, le) in BUCKETS.iter().enumerate() {
            let c = m.bucket_counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", m.count);
        let _ = writeln!(out, "{name}_sum {}", m.sum);
        let _ = writeln!(out, "{name}_count {}", m.count);
        out
    }
}

/// Appends a gauge without labels (its value comes from elsewhere at render time).
pub fn gauge(out: &mut String, name: &str, help: &str, value: f64) {
    gauge_header(out, name, help);
    let _ = writeln!(out, "{name} {value}");
}

/// Appends a gauge with one value per `label` value (a fixed set, from the configuration).
pub fn labelled_gauge(
    out: &mut String,
    name: &str,
    help: &str,
    label: &str,
    values: &[(&str, f64)],
) {
    gauge_header(out, name, help);
    for (v, value) in values {
        let _ = writeln!(out, "{name}{{{label}=\"{}\"}} {value}", escape(v));
    }
}

fn gauge_header(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_from_the_request_cannot_grow_the_series() {
        let m = Metrics::default();
        for i in 0..10_000 {
            m.inc("llm_doctor_alerts_received_total", &format!("status-{i}"));
        }
        m.inc("llm_doctor_alerts_received_total", "resolved");
        let text = m.render();
        let series = text
            .lines()
            .filter(|l| l.starts_with("llm_doctor_alerts_received_total{"))
            .count();
        assert_eq!(series, 2, "{text}");
        assert!(text.contains("llm_doctor_alerts_received_total{status=\"other\"} 10000\n"));
    }

    #[test]
    fn renders_counters_and_histogram() {
        let m = Metrics::default();
        m.inc("llm_doctor_alerts_received_total", "firing");
        m.inc("llm_doctor_alerts_received_total", "firing");
        m.observe_seconds(0.2);
        let text = m.render();
        assert!(
            text.contains("llm_doctor_alerts_received_total{status=\"firing\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("llm_doctor_handling_seconds_bucket{le=\"0.1\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("llm_doctor_handling_seconds_bucket{le=\"0.25\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("llm_doctor_handling_seconds_count 1\n"),
            "{text}"
        );
    }
}
