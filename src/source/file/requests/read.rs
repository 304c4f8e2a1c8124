//! A request-record file read as a stream of lines: one line in memory at a time, plain or
//! gzip, and only the requests that end inside the span asked for kept. A day's access log
//! beside a five-minute window costs the window's requests, not the day's.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{Context, Result};

use super::record::{Interner, Request, RequestLogError, MAX_LINE_BYTES};
use super::{mapped, nginx, otlp, FieldMap, RecordKind};

/// Which requests a read keeps, by when they ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Every one.
    All,
    /// Those ending in `(from_ms, to_ms]`.
    Ending {
        /// Exclusive.
        from_ms: i64,
        /// Inclusive.
        to_ms: i64,
    },
}

impl Keep {
    fn keeps(self, r: &Request) -> bool {
        match self {
            Keep::All => true,
            Keep::Ending { from_ms, to_ms } => r.end_ms > from_ms && r.end_ms <= to_ms,
        }
    }
}

/// What a read kept, and how many it left out.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRead {
    /// The requests kept, in file order.
    pub requests: Vec<Request>,
    /// Requests read that ended outside the span.
    pub outside: usize,
}

/// What reading several request files gave: their requests together, what each left out, and
/// the files that did not read.
#[derive(Debug, Default)]
pub struct RequestFilesRead {
    /// The requests kept, file after file.
    pub requests: Vec<Request>,
    /// Per file read: its name, the requests it left out (outside the span) and those it kept.
    pub outside: Vec<(String, usize, usize)>,
    /// Per file that did not read: why (file and line).
    pub errors: Vec<String>,
}

/// The requests of every file in `files` that `keep` keeps. A file that does not read is an
/// error of its own, beside the others' requests: one broken log loses nothing the others hold.
pub fn read_paths(
    files: &[(std::path::PathBuf, RecordKind)],
    map: Option<&FieldMap>,
    keep: Keep,
) -> RequestFilesRead {
    let mut out = RequestFilesRead::default();
    for (path, kind) in files {
        match read_path(path, *kind, map, keep) {
            Ok(got) => {
                out.outside
                    .push((path.display().to_string(), got.outside, got.requests.len()));
                // The first file's records are taken as they are, not copied: a million of
                // them is a few hundred megabytes.
                if out.requests.is_empty() {
                    out.requests = got.requests;
                } else {
                    out.requests.extend(got.requests);
                }
            }
            Err(e) => out.errors.push(format!("{e:#}")),
        }
    }
    out
}

/// The requests of `path` (a file of `kind`; `map`: the user's `--request-fields`) that `keep`
/// keeps. An error names the file and the line.
pub fn read_path(
    path: &Path,
    kind: RecordKind,
    map: Option<&FieldMap>,
    keep: Keep,
) -> Result<FileRead> {
    let name = path.display().to_string();
    let (src, _) = crate::source::file::read::open_maybe_gzip(path)?;
    read_lines(
        BufReader::with_capacity(1 << 20, src),
        &name,
        kind,
        map,
        keep,
    )
}

/// Every request of `text`, a request-record file's whole text, through the same line reader
/// as a file.
#[cfg(test)]
pub(crate) fn parse_text(
    text: &str,
    name: &str,
    kind: RecordKind,
    map: Option<&FieldMap>,
) -> Result<Vec<Request>> {
    read_lines(text.as_bytes(), name, kind, map, Keep::All).map(|r| r.requests)
}

fn read_lines(
    mut src: impl BufRead,
    name: &str,
    kind: RecordKind,
    map: Option<&FieldMap>,
    keep: Keep,
) -> Result<FileRead> {
    let envoy = FieldMap::envoy();
    let mut out = FileRead {
        requests: Vec::new(),
        outside: 0,
    };
    let mut shared = Interner::default();
    let mut buf = Vec::new();
    let mut line = 0usize;
    loop {
        buf.clear();
        // At most one byte past the longest line: enough to tell that it is too long.
        let n = (&mut src)
            .take(MAX_LINE_BYTES as u64 + 2)
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("reading `{name}`"))?;
        if n == 0 {
            break;
        }
        line += 1;
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        if buf.len() > MAX_LINE_BYTES {
            return Err(RequestLogError::LineTooLong {
                file: name.to_string(),
                line,
                bytes: buf.len(),
            }
            .into());
        }
        let text = std::str::from_utf8(&buf).map_err(|e| RequestLogError::NotJson {
            file: name.to_string(),
            line,
            detail: format!("not UTF-8 text ({e})"),
        })?;
        let text = if line == 1 {
            text.trim_start_matches('\u{feff}')
        } else {
            text
        };
        if text.trim().is_empty() {
            continue;
        }
        let got = match (kind, map) {
            (RecordKind::Nginx, _) => vec![nginx::parse_line(text, name, line)?],
            (RecordKind::Envoy, _) => vec![mapped::parse_line(&envoy, text, name, line)?],
            (RecordKind::Mapped, Some(m)) => vec![mapped::parse_line(m, text, name, line)?],
            (RecordKind::Mapped, None) => {
                return Err(RequestLogError::Field {
                    file: name.to_string(),
                    line,
                    field: "request-fields",
                    problem: "is needed to read this log: no field map was given".into(),
                }
                .into())
            }
            (RecordKind::OtlpJson, _) => otlp::parse_line(text, name, line)?,
        };
        for mut r in got {
            if keep.keeps(&r) {
                shared.share(&mut r);
                out.requests.push(r);
            } else {
                out.outside += 1;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"msec":"1796570000.250","status":"200","request_time":"2.500"}"#;

    fn read(text: &[u8], keep: Keep) -> Result<Vec<Request>> {
        read_lines(text, "access.log", RecordKind::Nginx, None, keep).map(|r| r.requests)
    }

    #[test]
    fn lines_stream_and_only_the_span_asked_for_is_kept() {
        let late = LINE.replace("1796570000.250", "1796570100.000");
        let text = format!("\u{feff}{LINE}\r\n\n{late}\n{LINE}");
        assert_eq!(read(text.as_bytes(), Keep::All).unwrap().len(), 3);
        let keep = Keep::Ending {
            from_ms: 1_796_570_050_000,
            to_ms: 1_796_570_100_000,
        };
        let got = read_lines(text.as_bytes(), "a", RecordKind::Nginx, None, keep).unwrap();
        assert_eq!((got.requests.len(), got.outside), (1, 2));
        assert_eq!(got.requests[0].end_ms, 1_796_570_100_000);
    }

    #[test]
    fn a_line_too_long_and_a_gzip_file_read_as_lines() {
        let long = format!("{LINE}\n{}\n", "x".repeat(MAX_LINE_BYTES + 1));
        let e = read(long.as_bytes(), Keep::All).unwrap_err().to_string();
        assert!(
            e.starts_with("access.log:2: a line of 67108865 bytes"),
            "{e}"
        );
        // The window's start is not in it: a request ending exactly there is left out.
        let keep = Keep::Ending {
            from_ms: 1_796_570_000_250,
            to_ms: 1_796_570_000_251,
        };
        assert!(read(LINE.as_bytes(), keep).unwrap().is_empty());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log.gz");
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        std::io::Write::write_all(&mut gz, format!("{LINE}\n{LINE}\n").as_bytes()).unwrap();
        gz.finish().unwrap();
        let got = read_path(&path, RecordKind::Nginx, None, Keep::All).unwrap();
        assert_eq!((got.requests.len(), got.outside), (2, 0));
    }

    /// Blank lines count in the numbering; the long line is named by its own number.
    #[test]
    fn a_line_too_long_is_named_after_blank_lines() {
        let long = format!("{LINE}\n\n{}\n", "x".repeat(MAX_LINE_BYTES + 1));
        let e = parse_text(&long, "big.log", RecordKind::Nginx, None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("big.log:3: a line of 67108865 bytes"), "{e}");
        assert_eq!(
            parse_text(LINE, "big.log", RecordKind::Nginx, None)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn a_bad_line_is_named_with_its_number() {
        let text = format!("{LINE}\n\n{{\"msec\":\"17\n");
        let e = read(text.as_bytes(), Keep::All).unwrap_err().to_string();
        assert!(e.starts_with("access.log:3: not a JSON object"), "{e}");
        let e = read(b"\xff\xfe\n", Keep::All).unwrap_err().to_string();
        assert!(
            e.contains("access.log:1: not a JSON object: not UTF-8"),
            "{e}"
        );
    }
}
