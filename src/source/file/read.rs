//! Reading recordings: a file's bytes as text (gzip or plain), then every input parsed by its
//! format (Prometheus API JSON or exposition text) and merged into one series set.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

#[cfg(doc)]
use super::stream::Retention;
use super::stream::{self, ReadOptions};
use super::{api_json, exposition, limit};
use crate::signal::series::{Labels, SeriesSet};

/// Reads a metrics file as text; gzip-compressed files (`.om.gz`, by magic bytes) are
/// decompressed, so recordings can be kept small. Text larger than
/// [`limit::max_input`] is an error naming the file and the limit.
pub fn read_text(path: &Path) -> Result<String> {
    read_text_within(path, limit::max_input())
}

/// `path` opened for reading, decompressed when its first bytes are gzip's magic; whether it
/// was gzip.
pub fn open_maybe_gzip(path: &Path) -> Result<(Box<dyn std::io::Read>, bool)> {
    use std::io::Read;
    let name = path.display().to_string();
    let mut file = std::fs::File::open(path).with_context(|| format!("reading `{name}`"))?;
    let mut magic = [0u8; 2];
    let n = file
        .read(&mut magic)
        .with_context(|| format!("reading `{name}`"))?;
    let head = std::io::Cursor::new(magic[..n].to_vec()).chain(file);
    let gz = magic[..n] == [0x1f, 0x8b];
    let src: Box<dyn Read> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(head))
    } else {
        Box::new(head)
    };
    Ok((src, gz))
}

fn read_text_within(path: &Path, (max, mib): (u64, f64)) -> Result<String> {
    use std::io::Read;
    let name = path.display().to_string();
    let (src, gz) = open_maybe_gzip(path)?;
    // One byte past the limit tells "exactly at the limit" from "over it".
    let mut bytes = Vec::new();
    src.take(max + 1)
        .read_to_end(&mut bytes)
        .with_context(|| match gz {
            true => format!("decompressing `{name}`"),
            false => format!("reading `{name}`"),
        })?;
    if bytes.len() as u64 > max {
        let what = if gz { "decompresses to" } else { "holds" };
        return Err(limit::too_large(&name, what, mib));
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "`{name}` is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Reads and merges exposition files and saved Prometheus API answers; also returns warnings
/// (partial answers, skipped samples) to show beside the diagnosis. `(name, text)` pairs
/// keep this free of file I/O.
pub fn parse_inputs_with_warnings(inputs: &[(String, String)]) -> Result<(SeriesSet, Vec<String>)> {
    let mut warnings = Vec::new();
    let mut parsed = Vec::new();
    for (name, text) in inputs {
        parsed.push((name.clone(), parse_text(name, text, &mut warnings)?));
    }
    let set = join_inputs(parsed, &mut warnings)?;
    Ok((set, warnings))
}

/// One input's text: an API answer or exposition text.
fn parse_text(name: &str, text: &str, warnings: &mut Vec<String>) -> Result<SeriesSet> {
    Ok(if api_json::looks_like(text) {
        let p = api_json::parse_with_warnings(text, name).map_err(anyhow::Error::new)?;
        warnings.extend(p.warnings);
        p.set
    } else {
        exposition::parse(text, name).map_err(anyhow::Error::new)?
    })
}

/// Joins the inputs' series, each file a target of its own when none has target labels.
fn join_inputs(inputs: Vec<(String, SeriesSet)>, warnings: &mut Vec<String>) -> Result<SeriesSet> {
    let several = inputs.len() > 1;
    let mut set: Option<SeriesSet> = None;
    for (name, mut parsed) in inputs {
        if parsed.series.is_empty() {
            bail!("{name}: no samples (an empty file, or only comments)");
        }
        // Pages saved with curl carry no target labels: with several files, each file is a
        // target of its own, named after the file, so replicas are not mixed up.
        if several
            && parsed
                .series
                .iter()
                .all(|s| s.labels.get("instance").is_none() && s.labels.get("pod").is_none())
        {
            for s in &mut parsed.series {
                let mut pairs = s.labels.0.clone();
                pairs.push(("instance".to_string(), name.clone()));
                s.labels = Labels::new(pairs);
            }
            parsed.normalize();
        }
        match &mut set {
            None => set = Some(parsed),
            Some(s) => {
                // Within one file a repeated sample is noted; across files it means the files
                // describe different things under the same labels, and which one wins would
                // decide the verdict: refused rather than an answer that depends on the order.
                let before = s.conflicts.count + parsed.conflicts.count;
                let first_before = s.conflicts.first.is_some();
                s.merge(parsed);
                let across = s.conflicts.count - before;
                if across > 0 {
                    let example = if first_before {
                        String::new()
                    } else {
                        s.conflicts
                            .first
                            .as_ref()
                            .map(|f| format!(" (first: {f})"))
                            .unwrap_or_default()
                    };
                    bail!(
                        "`{name}` and the file(s) before it disagree on {across} sample(s): the same series at the same instant with different values{example}. They look like recordings of different servers under the same labels; diagnose them one at a time, or give each its own `instance` label"
                    );
                }
            }
        }
    }
    let set = set.context("no input files")?;
    if let Some(first) = &set.conflicts.first {
        warnings.push(format!(
            "{} sample(s) had the same series and instant as another with a different value (a file repeating itself, or joined files that disagree); the one read later was kept: the first was {first}",
            set.conflicts.count
        ));
    }
    Ok(set)
}

/// Files read by [`read_files`].
#[derive(Debug, Clone)]
pub struct FilesRead {
    /// The series of every file, joined, with the samples the retention kept.
    pub set: SeriesSet,
    /// Partial answers, disagreeing duplicates and the like, to show beside the diagnosis.
    pub warnings: Vec<String>,
    /// Oldest and newest timestamp of every sample read, kept or not.
    pub span: Option<(i64, i64)>,
}

/// Reads and merges exposition files and saved Prometheus API answers from disk, like
/// [`parse_inputs_with_warnings`] on their texts, but streaming: exposition files are parsed as
/// they are decompressed and keep only what `opts.retention` asks for (API answers, small by
/// nature, are still read whole). With [`Retention::All`] the series are the same.
pub fn read_files(paths: &[PathBuf], opts: &ReadOptions) -> Result<FilesRead> {
    let mut warnings = Vec::new();
    let mut parsed = Vec::new();
    let mut span: Option<(i64, i64)> = None;
    let mut has_timestamps = !paths.is_empty();
    for path in paths {
        let name = path.display().to_string();
        let head = stream::peek_text(path, 4096)?;
        let set = if api_json::looks_like(&head) {
            let set = parse_text(&name, &read_text(path)?, &mut warnings)?;
            let (lo, hi) = (set.oldest_ms(), set.newest_ms());
            has_timestamps &= set.has_timestamps;
            if let (Some(lo), Some(hi)) = (lo, hi) {
                span = Some(widen(span, (lo, hi)));
            }
            set
        } else {
            let r = stream::read_path(path, opts)?;
            has_timestamps &= r.has_timestamps;
            if let Some(s) = r.span {
                span = Some(widen(span, s));
            }
            r.set
        };
        parsed.push((name, set));
    }
    let mut set = join_inputs(parsed, &mut warnings)?;
    // Over every sample read: a retention that kept none must not turn a recording into a
    // scrape without timestamps.
    set.has_timestamps = has_timestamps;
    Ok(FilesRead {
        set,
        warnings,
        span,
    })
}

fn widen(span: Option<(i64, i64)>, (lo, hi): (i64, i64)) -> (i64, i64) {
    match span {
        Some((a, b)) => (a.min(lo), b.max(hi)),
        None => (lo, hi),
    }
}

/// Reads and merges inputs, dropping warnings (partial answers and the like).
pub fn parse_inputs(inputs: &[(String, String)]) -> Result<SeriesSet> {
    parse_inputs_with_warnings(inputs).map(|(set, _)| set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::file::Retention;

    /// The streaming entry point gives what the whole-text one gives on the same files: API
    /// answers beside recordings, and label-less scrapes each named after its file.
    #[test]
    fn read_files_joins_as_parse_inputs_does() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = tempfile::tempdir().unwrap();
        let scrape_a = dir.path().join("a.prom");
        let scrape_b = dir.path().join("b.prom");
        std::fs::write(
            &scrape_a,
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n",
        )
        .unwrap();
        std::fs::write(&scrape_b, "vllm:num_requests_running 6\n").unwrap();
        let sets: [Vec<PathBuf>; 3] = [
            vec![
                root.join("tests/data/inputs/vllm_query_range.json"),
                // Another server: files that disagree about one series are refused.
                root.join("corpus/llamacpp/llamacpp-cpu-control.om.gz"),
            ],
            vec![scrape_a, scrape_b],
            vec![root.join("tests/data/inputs/vllm_query_range.om.gz")],
        ];
        for paths in sets {
            let inputs: Vec<(String, String)> = paths
                .iter()
                .map(|p| (p.display().to_string(), read_text(p).unwrap()))
                .collect();
            let (want, want_warnings) = parse_inputs_with_warnings(&inputs).unwrap();
            let opts = ReadOptions {
                retention: Retention::All,
                ..ReadOptions::default()
            };
            let got = read_files(&paths, &opts).unwrap();
            assert_eq!(got.set, want, "{paths:?}");
            assert_eq!(got.warnings, want_warnings, "{paths:?}");
            assert_eq!(
                got.span,
                want.oldest_ms().zip(want.newest_ms()),
                "{paths:?}"
            );
        }
        let missing = read_files(&[dir.path().join("nope.om")], &ReadOptions::default());
        assert!(format!("{:#}", missing.unwrap_err()).starts_with("reading `"));
    }
}

/// The kinds of file the readers take, for errors about files that are none of them.
pub const ACCEPTED_INPUTS: &str = "accepted: Prometheus text or OpenMetrics (plain or gzip), a saved Prometheus API answer (JSON), an llm-doctor snapshot (YAML or JSON), or a gateway's JSON access log beside them";

/// An error for a file whose first bytes say it is not metrics: JSON that is not a Prometheus
/// API answer, YAML that is not a snapshot (an llm-doctor serve config, say). None when it may
/// be exposition text; call it for files that are not snapshots.
pub fn not_metrics(name: &str, head: &str) -> Option<String> {
    let t = head.trim_start_matches('\u{feff}').trim_start();
    if (t.starts_with('{') || t.starts_with('[')) && !api_json::looks_like(t) {
        return Some(format!(
            "`{name}` is JSON but not a Prometheus API answer (no \"status\" and \"data\"); {ACCEPTED_INPUTS}"
        ));
    }
    // YAML's `key: value` or `key:` at the top level; a metric name may hold colons, but never
    // followed by a space or the end of the line.
    let yaml_key = |l: &str| {
        let Some((key, rest)) = l.split_once(':') else {
            return false;
        };
        !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            && (rest.is_empty() || rest.starts_with(' '))
    };
    let first = t
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'));
    if first.is_some_and(yaml_key) {
        return Some(format!(
            "`{name}` looks like YAML (`{}`), not metrics or an llm-doctor snapshot; {ACCEPTED_INPUTS}",
            first.unwrap_or_default().trim()
        ));
    }
    None
}

#[cfg(test)]
mod sniff_tests {
    use super::not_metrics;

    #[test]
    fn configs_and_json_are_named_for_what_they_are() {
        let yaml = not_metrics("doctor.yaml", "listen: 127.0.0.1:9095\nprometheus:\n").unwrap();
        assert!(
            yaml.contains("looks like YAML (`listen: 127.0.0.1:9095`)"),
            "{yaml}"
        );
        let json = not_metrics("a.json", "{\"a\": 1}").unwrap();
        assert!(
            json.contains("JSON but not a Prometheus API answer"),
            "{json}"
        );
        // Metrics stay metrics, colons in names included.
        assert_eq!(not_metrics("m", "vllm:num_requests_running 3\n"), None);
        assert_eq!(not_metrics("m", "# HELP x y\nx{a=\"b\"} 1\n"), None);
        assert_eq!(
            not_metrics("m", "{\"status\":\"success\",\"data\":{}}"),
            None
        );
    }

    /// Text at the limit is read; one byte more, compressed or not, is an error naming the
    /// file, what it holds and the variable that raises the limit.
    #[test]
    fn whole_reads_stop_at_the_input_limit() {
        use super::read_text_within;
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let limit = (1000, 1000.0 / f64::from(1u32 << 20));
        let plain = dir.path().join("plain.json");
        std::fs::write(&plain, " ".repeat(1000)).unwrap();
        assert_eq!(read_text_within(&plain, limit).unwrap().len(), 1000);
        std::fs::write(&plain, " ".repeat(1001)).unwrap();
        let e = read_text_within(&plain, limit).unwrap_err().to_string();
        assert!(e.contains("plain.json`: holds more than"), "{e}");
        let bomb = dir.path().join("bomb.json.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&vec![0u8; 1 << 20]).unwrap();
        std::fs::write(&bomb, gz.finish().unwrap()).unwrap();
        let e = read_text_within(&bomb, limit).unwrap_err().to_string();
        assert!(
            e.contains("bomb.json.gz`: decompresses to more than")
                && e.contains("LLM_DOCTOR_MAX_INPUT_MB"),
            "{e}"
        );
        assert_eq!(
            read_text_within(&bomb, (2 << 20, 2.0)).unwrap().len(),
            1 << 20
        );
    }
}
