//! One answer of the query API: its samples and notes, or why it failed (an error answer, or
//! no answer at all), parsed from Prometheus' or VictoriaMetrics' JSON.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Deserialize;

/// One series of an answer: labels and value (non-finite values are kept here, and dropped
/// when mapped to targets).
pub(super) type AnswerSample = (BTreeMap<String, String>, f64);

/// A successful answer.
#[derive(Debug, Clone, Default)]
pub(super) struct Answer {
    pub(super) samples: Vec<AnswerSample>,
    /// The raw series of a range-vector (matrix) answer, with their samples.
    pub(super) series: Vec<crate::signal::series::Series>,
    /// `warnings`, `infos` and `isPartial`, in words.
    pub(super) notes: Vec<String>,
}

/// A failed query.
#[derive(Debug, Clone)]
pub(super) struct Failure {
    /// The server could not be reached or did not answer in time (as opposed to an error
    /// answer).
    pub(super) unreachable: bool,
    pub(super) message: String,
}

type Envelope = crate::source::file::api_json::Envelope<Data>;

#[derive(Debug, Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    /// Parsed once its type is known, straight into what it holds: a histogram's bucket rates
    /// for a fleet are thousands of rows, which an intermediate `Value` made the costliest part
    /// of a triage's client.
    result: Box<serde_json::value::RawValue>,
}

#[derive(Debug, Deserialize)]
struct VectorSample {
    #[serde(default)]
    pub(super) metric: BTreeMap<String, String>,
    pub(super) value: (serde::de::IgnoredAny, String),
}

/// Reads an answer: a vector or a scalar (VictoriaMetrics answers `scalar()` with a vector);
/// error answers (HTTP 400 from Prometheus, 422 from VictoriaMetrics) become failures quoting
/// the server's message. With `as_series`, a vector's rows are kept as series (one sample
/// each) for the reader's evaluation (bucket rates, see `plan::from_bucket_rates`), not as
/// samples.
// Long on purpose: one decision per kind of answer (error status, partial, vector, scalar,
// matrix), in the order a server can send them.
pub(super) fn parse_answer(
    status: u16,
    content_type: &str,
    body: &[u8],
    as_series: bool,
) -> Result<Answer, Failure> {
    let fail = |message: String| Failure {
        unreachable: false,
        message,
    };
    let envelope: Envelope = match serde_json::from_slice(body) {
        Ok(e) => e,
        Err(e) => {
            let text = String::from_utf8_lossy(body);
            let start: String = text.trim().chars().take(120).collect();
            let what = if content_type.is_empty() {
                String::new()
            } else {
                format!(", Content-Type {content_type}")
            };
            return Err(fail(format!(
                "HTTP {status}{what}: not a Prometheus API answer ({e}): {start:?}"
            )));
        }
    };
    if envelope.status != "success" {
        return Err(fail(format!(
            "HTTP {status} {}: {}",
            envelope.error_type.as_deref().unwrap_or("error"),
            envelope.error.as_deref().unwrap_or("(no message)")
        )));
    }
    let mut notes: Vec<String> = envelope
        .warnings
        .iter()
        .map(|w| format!("Prometheus warning: {w}"))
        .chain(
            envelope
                .infos
                .iter()
                .map(|i| format!("Prometheus info: {i}")),
        )
        .collect();
    if envelope.is_partial {
        notes.push(
            "the server answered with partial data (isPartial): some values may be incomplete"
                .to_string(),
        );
    }
    let data = envelope
        .data
        .ok_or_else(|| fail(format!("HTTP {status}: a success answer without `data`")))?;
    let number = |text: &str| -> Result<f64, Failure> {
        match text {
            "NaN" => Ok(f64::NAN),
            "+Inf" | "Inf" => Ok(f64::INFINITY),
            "-Inf" => Ok(f64::NEG_INFINITY),
            t => t
                .parse()
                .map_err(|_| fail(format!("value {t:?} is not a number"))),
        }
    };
    let mut series = Vec::new();
    let samples = match data.result_type.as_str() {
        "vector" => {
            if as_series {
                series =
                    crate::source::file::api_json::series_of_text(data.result.get(), "the answer")
                        .map_err(|e| fail(format!("malformed vector answer: {e}")))?;
                Vec::new()
            } else {
                let v: Vec<VectorSample> = serde_json::from_str(data.result.get())
                    .map_err(|e| fail(format!("malformed vector answer: {e}")))?;
                v.into_iter()
                    .map(|s| Ok((s.metric, number(&s.value.1)?)))
                    .collect::<Result<Vec<_>, Failure>>()?
            }
        }
        "scalar" => {
            let (_, v): (serde::de::IgnoredAny, String) =
                serde_json::from_str(data.result.get())
                    .map_err(|e| fail(format!("malformed scalar answer: {e}")))?;
            vec![(BTreeMap::new(), number(&v)?)]
        }
        // Raw samples (`{__name__=~"..."}[5m]`), read as a saved answer is.
        "matrix" => {
            let series =
                crate::source::file::api_json::series_of_text(data.result.get(), "the answer")
                    .map_err(|e| fail(format!("malformed matrix answer: {e}")))?;
            return Ok(Answer {
                samples: Vec::new(),
                series,
                notes,
            });
        }
        other => {
            return Err(fail(format!(
                "expected a vector, matrix or scalar answer, got `{other}`"
            )))
        }
    };
    Ok(Answer {
        samples,
        series,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_prometheus_and_victoriametrics() {
        let ok = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"pod":"a"},"value":[1796083807.000,"0.5"]},
            {"metric":{"pod":"b"},"value":[1796083807,"NaN"]}]},"warnings":["w"],"infos":["i"]}"#;
        let a = parse_answer(200, "application/json", ok, false).unwrap();
        assert_eq!(a.samples.len(), 2);
        assert_eq!(a.samples[0].1, 0.5);
        assert!(a.samples[1].1.is_nan());
        assert_eq!(a.notes, ["Prometheus warning: w", "Prometheus info: i"]);

        let scalar = br#"{"status":"success","data":{"resultType":"scalar","result":[1,"+Inf"]}}"#;
        let s = parse_answer(200, "", scalar, false).unwrap();
        assert_eq!(s.samples, vec![(BTreeMap::new(), f64::INFINITY)]);

        // Asked as series, a vector's rows are series of one sample each.
        let named = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"x_bucket","le":"1","pod":"a"},"value":[1796083807,"0.25"]}]}}"#;
        let n = parse_answer(200, "", named, true).unwrap();
        assert!(n.samples.is_empty());
        assert_eq!(n.series.len(), 1);
        assert_eq!(n.series[0].name, "x_bucket");
        assert_eq!(n.series[0].samples.len(), 1);
        assert!(a.series.is_empty());

        let partial =
            br#"{"status":"success","isPartial":true,"data":{"resultType":"vector","result":[]}}"#;
        assert!(parse_answer(200, "", partial, false).unwrap().notes[0].contains("isPartial"));

        let bad = br#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#;
        let f = parse_answer(400, "application/json", bad, false).unwrap_err();
        assert!(!f.unreachable);
        assert_eq!(f.message, "HTTP 400 bad_data: parse error at char 3");
        let vm = br#"{"status":"error","errorType":"422","error":"cannot parse"}"#;
        assert_eq!(
            parse_answer(422, "", vm, false).unwrap_err().message,
            "HTTP 422 422: cannot parse"
        );

        let html = parse_answer(502, "text/html", b"<html>Bad gateway</html>", false).unwrap_err();
        assert!(
            html.message
                .starts_with("HTTP 502, Content-Type text/html: not a Prometheus API answer"),
            "{}",
            html.message
        );
        let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"x","pod":"a"},"values":[[1796083807,"1"],[1796083808,"2"]]}]}}"#;
        let m = parse_answer(200, "", matrix, false).unwrap();
        assert_eq!(m.series.len(), 1);
        assert_eq!(m.series[0].samples.len(), 2);
        let empty = br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert!(parse_answer(200, "", empty, false)
            .unwrap()
            .series
            .is_empty());
        let unnamed = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"pod":"a"},"values":[[1796083807,"1"]]}]}}"#;
        let e = parse_answer(200, "", unnamed, false).unwrap_err();
        assert!(
            e.message.starts_with("malformed matrix answer"),
            "{}",
            e.message
        );
        let string = br#"{"status":"success","data":{"resultType":"string","result":[1,"a"]}}"#;
        assert!(parse_answer(200, "", string, false).is_err());
    }
}
