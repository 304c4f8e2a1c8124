//! The recording's file on disk: written through a partial file renamed into place, gzip when
//! named so, and checked for writability before anything is recorded.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// What `write` streams, written to `path` (a fleet-day is many gigabytes of text): through a
/// buffered partial file, gzip-compressed when `path` is named so, renamed into place once
/// whole; on an error the partial file is removed.
pub fn stream_to_file<T>(
    path: &Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> Result<T>,
) -> Result<T> {
    use std::io::Write as _;
    let partial = partial_path(path);
    let file = std::fs::File::create(&partial)
        .with_context(|| format!("writing `{}`", partial.display()))?;
    let mut sink = std::io::BufWriter::with_capacity(1 << 20, file);
    let stream = || -> Result<T> {
        let t = if is_gzip_name(path) {
            let mut gz = flate2::write::GzEncoder::new(&mut sink, flate2::Compression::fast());
            let t = write(&mut gz)?;
            gz.finish()?;
            t
        } else {
            write(&mut sink)?
        };
        sink.flush()?;
        Ok(t)
    };
    let written = stream();
    drop(sink);
    match written {
        Ok(t) => match std::fs::rename(&partial, path) {
            Ok(()) => Ok(t),
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                Err(anyhow::Error::new(e).context(format!("writing `{}`", path.display())))
            }
        },
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(e)
        }
    }
}

/// Whether a recording named `path` is written gzip-compressed (`.gz`, as `FILE.om.gz`).
pub fn is_gzip_name(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// `.NAME.partial` beside `path`: written whole, then renamed over `path`, so `path` is always a
/// complete file; hidden, so that a glob over the folder (`OUT.parts/*`) never picks up a
/// half-written file.
fn partial_path(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(".partial");
    path.with_file_name(name)
}

/// Fails now, with the reason, when `path` cannot be written.
pub fn check_writable(path: &Path) -> Result<()> {
    let probe = partial_path(path);
    std::fs::write(&probe, b"")
        .with_context(|| format!("--out `{}` cannot be written", path.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
