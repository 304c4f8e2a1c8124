//! The files the user names (`diagnose`, `postmortem`, `diff`): `-` is standard input (copied to a temporary
//! file, since the streaming reader may read a file twice), and files that are plainly not
//! metrics (a serve config, arbitrary JSON) are named for what they are before any parsing.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::source::file::{not_metrics, requests, snapshot, stream};

/// The input paths, with standard input's copy removed on drop.
pub struct Inputs {
    /// The paths to read (`-` replaced by the copy).
    pub paths: Vec<PathBuf>,
    stdin_copy: Option<PathBuf>,
}

impl Drop for Inputs {
    fn drop(&mut self) {
        if let Some(p) = &self.stdin_copy {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Inputs {
    /// Standard input's copy named as `<stdin>` in an error's text.
    pub fn name_errors(&self, e: anyhow::Error) -> anyhow::Error {
        match &self.stdin_copy {
            Some(p) => anyhow::anyhow!(
                "{}",
                format!("{e:#}").replace(&p.display().to_string(), "<stdin>")
            ),
            None => e,
        }
    }
}

/// `files` with `-` read from standard input.
pub fn inputs(files: &[PathBuf]) -> Result<Inputs> {
    let dashes = files.iter().filter(|f| f.as_os_str() == "-").count();
    if dashes > 1 {
        bail!("`-` (standard input) can be given once");
    }
    let mut stdin_copy = None;
    let paths = files
        .iter()
        .map(|f| {
            if f.as_os_str() != "-" {
                return Ok(f.clone());
            }
            let path =
                std::env::temp_dir().join(format!("llm-doctor-stdin-{}", std::process::id()));
            if let Err(e) = copy_stdin(&path) {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
            stdin_copy = Some(path.clone());
            Ok(path)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Inputs { paths, stdin_copy })
}

/// Copies standard input to `path` in pieces, not through memory: it may be any size.
fn copy_stdin(path: &Path) -> Result<()> {
    let mut file =
        std::fs::File::create(path).with_context(|| format!("writing `{}`", path.display()))?;
    let copied = std::io::copy(&mut std::io::stdin().lock(), &mut file)
        .with_context(|| format!("copying standard input to `{}`", path.display()))?;
    if copied == 0 {
        bail!("standard input is empty: pipe a recording into `-`");
    }
    Ok(())
}

/// `--engine-args`, or the file it names after `@`.
pub fn engine_args(arg: Option<&str>) -> Result<Option<String>> {
    Ok(match arg {
        Some(a) if a.starts_with('@') => Some(
            std::fs::read_to_string(&a[1..])
                .with_context(|| format!("reading --engine-args file `{}`", &a[1..]))?,
        ),
        other => other.map(str::to_string),
    })
}

/// What an input file holds, from one look at its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// An llm-doctor snapshot or timeline.
    Snapshot,
    /// Per-request records: a gateway's access log or an engine's trace exports.
    Requests(requests::RecordKind),
    /// Metrics (exposition text, OpenMetrics, a Prometheus API answer), or so it may be.
    Metrics,
}

/// What `path` holds; a file that is plainly none of the inputs is refused. `mapped`: the user
/// named a request log's fields (`--request-fields`), so any JSON-lines log is one.
pub fn kind(path: &Path, mapped: bool) -> Result<InputKind> {
    let head = stream::peek_text(path, 64 << 10)?;
    if snapshot::looks_like(&head) {
        return Ok(InputKind::Snapshot);
    }
    if let Some(k) = requests::record_kind(&head, mapped) {
        return Ok(InputKind::Requests(k));
    }
    match not_metrics(&path.display().to_string(), &head) {
        Some(msg) => bail!("{msg}"),
        None => Ok(InputKind::Metrics),
    }
}
