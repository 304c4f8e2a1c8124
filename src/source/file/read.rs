//! Reading recordings: a file's bytes as text (gzip or plain), then every input parsed by its
//! format (Prometheus API JSON or exposition text) and merged into one series set.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::{api_json, exposition};
use crate::signal::series::{Labels, SeriesSet};

/// Reads a metrics file as text; gzip-compressed files (`.om.gz`, by magic bytes) are
/// decompressed, so recordings can be kept small.
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading `{}`", path.display()))?;
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&bytes[..]), &mut out)
            .with_context(|| format!("decompressing `{}`", path.display()))?;
        out
    } else {
        bytes
    };
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "`{}` is not UTF-8 text (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Reads and merges exposition files and saved Prometheus API answers; also returns warnings
/// (partial answers, skipped samples) to show beside the diagnosis. `(name, text)` pairs
/// keep this free of file I/O.
pub fn parse_inputs_with_warnings(inputs: &[(String, String)]) -> Result<(SeriesSet, Vec<String>)> {
    let mut warnings = Vec::new();
    let mut set: Option<SeriesSet> = None;
    for (name, text) in inputs {
        let mut parsed = if api_json::looks_like(text) {
            let p = api_json::parse_with_warnings(text, name).map_err(anyhow::Error::new)?;
            warnings.extend(p.warnings);
            p.set
        } else {
            exposition::parse(text, name).map_err(anyhow::Error::new)?
        };
        if parsed.series.is_empty() {
            bail!("{name}: no samples (an empty file, or only comments)");
        }
        // Pages saved with curl carry no target labels: with several files, each file is a
        // target of its own, named after the file, so replicas are not mixed up.
        if inputs.len() > 1
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
            Some(s) => s.merge(parsed),
        }
    }
    let set = set.context("no input files")?;
    if let Some(first) = &set.conflicts.first {
        warnings.push(format!(
            "{} sample(s) had the same series and instant as another with a different value (a file repeating itself, or joined files that disagree); the one read later was kept: the first was {first}",
            set.conflicts.count
        ));
    }
    Ok((set, warnings))
}

/// Reads and merges inputs, dropping warnings (partial answers and the like).
pub fn parse_inputs(inputs: &[(String, String)]) -> Result<SeriesSet> {
    parse_inputs_with_warnings(inputs).map(|(set, _)| set)
}
