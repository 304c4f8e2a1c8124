//! The streaming reader: an exposition file (gzip or plain) parsed piece by piece as it is
//! read, keeping of each series only the samples a [`Retention`] asks for.
//!
//! A day of a 64-replica fleet is ~16 GB of text: read whole, it needed 17.6 GB of memory. Here
//! the file is cut into pieces of whole lines (a few MB) as it is decompressed, each piece is
//! parsed on its own ([`exposition::parse_chunk`]), possibly on another thread, and the pieces
//! are joined in file order, so memory is the pieces in flight plus what the retention keeps:
//! series times samples in the window, not the file. Joined in order, the pieces give exactly
//! what [`exposition::parse`] gives on the whole text (with [`Retention::All`]; a test compares
//! them).
//!
//! The one thing a piece cannot know is the format: a file is OpenMetrics (timestamps in
//! seconds) when some line is `# EOF`, usually the last. The reader guesses from the first
//! piece (an `# EOF` line in it, else the first timestamp's shape, else the file name) and
//! checks the guess at the end; a wrong guess costs a second read, never a wrong result.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use super::exposition::{self, Chunk, FastMap, ParseError};
use super::limit;
use crate::signal::series::{MetricType, Samples, Series, SeriesSet};

/// Which samples of each series the reader keeps. Series themselves are always kept (with
/// their labels), even when none of their samples are: a metric's presence and its labels are
/// facts of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Retention {
    /// Every sample: the whole-text parse.
    #[default]
    All,
    /// Samples newer than `keep_ms` before the newest sample of the file (`t > newest -
    /// keep_ms`), and every sample without a timestamp. `diagnose` keeps two windows: window
    /// statistics of ratios evaluate a window ending at each sample of the last one.
    LastWindow {
        /// How far back from the newest sample to keep, in milliseconds.
        keep_ms: i64,
    },
    /// Samples with `from_ms <= t <= to_ms`, and every sample without a timestamp (a
    /// postmortem: the incident plus the window before it).
    Range {
        /// First instant kept (ms since the epoch), inclusive.
        from_ms: i64,
        /// Last instant kept (ms since the epoch), inclusive.
        to_ms: i64,
    },
}

impl Retention {
    /// Whether a sample at `t` can be kept at all (before the newest sample is known).
    fn admits(self, t: Option<i64>) -> bool {
        match (self, t) {
            (Retention::Range { from_ms, to_ms }, Some(t)) => from_ms <= t && t <= to_ms,
            _ => true,
        }
    }
}

/// Keeps only series whose sample name it accepts (all when absent).
pub type NameFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The target a series belongs to, when it makes one of its own.
pub type TargetOf = Arc<dyn Fn(&Series) -> Option<String> + Send + Sync>;

/// Stops a read once its series name more than `max` targets: a run would refuse them after
/// the split anyway, and a million one-sample pods held 1.7 GB by then.
#[derive(Clone)]
pub struct TargetLimit {
    /// The target a series belongs to, when it makes one of its own (an engine's replica);
    /// distinct answers are counted.
    pub target_of: TargetOf,
    /// The most targets allowed.
    pub max: usize,
}

/// How to read.
#[derive(Clone)]
pub struct ReadOptions {
    /// Which samples to keep.
    pub retention: Retention,
    /// Which series to keep; every line is still parsed and checked.
    pub keep_name: Option<NameFilter>,
    /// Parsing threads beside the reading one (one more for plain text); 0 reads and parses on
    /// the calling thread.
    pub threads: usize,
    /// Size of a piece, in bytes (whole lines: a piece ends at the last newline after this).
    pub chunk_bytes: usize,
    /// Stop with an error past this many targets.
    pub target_limit: Option<TargetLimit>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        // One core decompresses and cuts pieces; the others parse. The calling thread only
        // joins pieces, which is light.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        ReadOptions {
            retention: Retention::All,
            keep_name: None,
            threads: cores.saturating_sub(1).max(1),
            chunk_bytes: 4 << 20,
            target_limit: None,
        }
    }
}

impl std::fmt::Debug for ReadOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadOptions")
            .field("retention", &self.retention)
            .field("keep_name", &self.keep_name.as_ref().map(|_| "fn"))
            .field("threads", &self.threads)
            .field("chunk_bytes", &self.chunk_bytes)
            .field("target_limit", &self.target_limit.as_ref().map(|l| l.max))
            .finish()
    }
}

/// One file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRead {
    /// The series, with the samples the retention kept, normalized.
    pub set: SeriesSet,
    /// Oldest and newest timestamp of every sample read, kept or not.
    pub span: Option<(i64, i64)>,
    /// At least one sample, each with a timestamp (over every sample read, kept or not).
    pub has_timestamps: bool,
}

/// Opens a source afresh (the reader may read a file twice, see the module docs).
pub type Opener<'a> = &'a (dyn Fn() -> std::io::Result<Box<dyn Read + Send>> + Sync);

/// Reads one exposition file from disk (gzip by its magic bytes).
pub fn read_path(path: &Path, opts: &ReadOptions) -> Result<StreamRead> {
    let open =
        || -> std::io::Result<Box<dyn Read + Send>> { Ok(Box::new(std::fs::File::open(path)?)) };
    let name = path.display().to_string();
    let name_says_om = {
        let n = name.to_ascii_lowercase();
        n.ends_with(".om") || n.ends_with(".om.gz") || n.contains("openmetrics")
    };
    read_stream(&open, &name, name_says_om, opts)
}

/// The first `max` bytes of a file's text (decompressed), lossily decoded: enough to tell a
/// snapshot or an API answer from exposition text without reading the file.
pub fn peek_text(path: &Path, max: usize) -> Result<String> {
    let file =
        std::fs::File::open(path).with_context(|| format!("reading `{}`", path.display()))?;
    let (mut r, _) =
        decoder(Box::new(file)).with_context(|| format!("reading `{}`", path.display()))?;
    let mut buf = Vec::with_capacity(max.min(1 << 20));
    (&mut r)
        .take(max as u64)
        .read_to_end(&mut buf)
        .with_context(|| format!("decompressing `{}`", path.display()))?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Reads one exposition text from `open`. `name` labels errors; `name_says_om` is the guess
/// for the format when the first piece does not tell.
pub fn read_stream(
    open: Opener<'_>,
    name: &str,
    name_says_om: bool,
    opts: &ReadOptions,
) -> Result<StreamRead> {
    let mut guess = None;
    let first = pass(open, name, &mut guess, name_says_om, opts)?;
    match first {
        Pass::Done(r) => r,
        // The guess was wrong: read again in the format the file turned out to have.
        Pass::Redo(om) => match pass(open, name, &mut Some(om), om, opts)? {
            Pass::Done(r) => r,
            // Only when the file changed between the two reads.
            Pass::Redo(_) => anyhow::bail!("{name}: the file changed while it was read"),
        },
    }
}

/// How a pass over the file ended.
enum Pass {
    /// With this result (or parse error).
    Done(Result<StreamRead>),
    /// In the wrong format: read again with `openmetrics` set to this.
    Redo(bool),
}

/// A piece of the file: whole lines. Its lines are numbered from 1 while it is parsed (the
/// pieces before it may not be parsed yet); the joiner renumbers errors.
struct Piece {
    text: String,
}

/// A piece, parsed.
struct Parsed {
    result: Result<Chunk, ParseError>,
    /// Whether the piece has an `# EOF` line (known even when it failed to parse).
    saw_eof: bool,
    /// "content after `# EOF`" at the piece's first non-blank line, for when an earlier piece
    /// ended the file.
    after_eof: Option<ParseError>,
}

fn parse_piece(piece: &Piece, name: &str, openmetrics: bool) -> Parsed {
    let result = exposition::parse_chunk(&piece.text, name, openmetrics, 1);
    let saw_eof = match &result {
        Ok(c) => c.saw_eof,
        Err(_) => exposition::has_eof_line(&piece.text),
    };
    Parsed {
        result,
        saw_eof,
        after_eof: exposition::first_content_error(&piece.text, name, 1),
    }
}

/// One read of the file in one format. `mode` is the format when known (a second pass), else
/// it is guessed from the first piece and stored there.
fn pass(
    open: Opener<'_>,
    name: &str,
    mode: &mut Option<bool>,
    name_says_om: bool,
    opts: &ReadOptions,
) -> Result<Pass> {
    let src = open().with_context(|| format!("reading `{name}`"))?;
    let (src, gzip) = decoder(src).with_context(|| format!("reading `{name}`"))?;
    let mut pieces = Pieces::new(src, name, opts.chunk_bytes.max(1));
    // The first piece is cut here, so the format can be guessed before anything is parsed.
    let first = pieces.next_piece()?;
    let om = *mode.get_or_insert_with(|| {
        first
            .as_ref()
            .is_some_and(|p| guess_openmetrics(&p.text, name_says_om))
    });
    let mut join = Joiner::new(om, opts);
    if opts.threads == 0 {
        let mut next = first;
        while let Some(piece) = next {
            let parsed = parse_piece(&piece, name, om);
            pieces.spare.give(piece.text);
            if join.take(parsed) {
                break;
            }
            next = pieces.next_piece()?;
        }
    } else {
        // Cutting plain text into pieces leaves the reading thread mostly idle: one more
        // parser then keeps every core busy (a fifth off the wall time of 189 MB of text on two
        // cores). Decompressing keeps it busy, so gzip input gets none.
        let threads = opts.threads + usize::from(!gzip);
        parallel(first, pieces, name, om, threads, &mut join)?;
    }
    Ok(join.finish(name))
}

/// Reads pieces on one thread, parses them on `threads` others and joins them in order on this
/// one. Stops early when the joiner has seen enough (a parse error whose format is certain).
fn parallel(
    first: Option<Piece>,
    mut pieces: Pieces<'_>,
    name: &str,
    om: bool,
    threads: usize,
    join: &mut Joiner<'_>,
) -> Result<()> {
    std::thread::scope(|scope| -> Result<()> {
        let (piece_tx, piece_rx) = sync_channel::<(usize, Piece)>(threads * 2);
        let (out_tx, out_rx) = sync_channel::<(usize, Parsed)>(threads * 2);
        let spare = pieces.spare.clone();
        let reader = scope.spawn(move || -> Result<()> {
            let mut seq = 0;
            let mut next = first;
            while let Some(piece) = next {
                if piece_tx.send((seq, piece)).is_err() {
                    return Ok(()); // the joiner stopped early
                }
                seq += 1;
                next = pieces.next_piece()?;
            }
            Ok(())
        });
        // Workers share the receiver; when they all stop, it is dropped and the reader's next
        // send fails, so nothing waits forever after an early stop.
        let piece_rx = Arc::new(Mutex::new(piece_rx));
        for _ in 0..threads {
            let (rx, tx, spare) = (Arc::clone(&piece_rx), out_tx.clone(), spare.clone());
            scope.spawn(move || worker(&rx, &tx, &spare, name, om));
        }
        drop((piece_rx, out_tx));
        let mut waiting: BTreeMap<usize, Parsed> = BTreeMap::new();
        let mut next = 0;
        'recv: for (seq, parsed) in out_rx.iter() {
            waiting.insert(seq, parsed);
            while let Some(parsed) = waiting.remove(&next) {
                next += 1;
                if join.take(parsed) {
                    break 'recv;
                }
            }
        }
        drop(out_rx);
        match reader.join() {
            Ok(r) => r,
            Err(_) => anyhow::bail!("{name}: the reading thread failed"),
        }
    })
}

fn worker(
    rx: &Mutex<Receiver<(usize, Piece)>>,
    tx: &std::sync::mpsc::SyncSender<(usize, Parsed)>,
    spare: &Spare,
    name: &str,
    om: bool,
) {
    loop {
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok((seq, piece)) = job else { return };
        let parsed = parse_piece(&piece, name, om);
        spare.give(piece.text);
        if tx.send((seq, parsed)).is_err() {
            return;
        }
    }
}

/// Piece buffers to fill again (at most as many as can be in flight).
#[derive(Clone, Default)]
struct Spare(Arc<Mutex<Vec<Vec<u8>>>>);

impl Spare {
    fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .ok()
            .and_then(|mut v| v.pop())
            .unwrap_or_default()
    }

    fn give(&self, text: String) {
        if let Ok(mut v) = self.0.lock() {
            if v.len() < 16 {
                let mut buf = text.into_bytes();
                buf.clear();
                v.push(buf);
            }
        }
    }
}

/// The format guess: an `# EOF` line in the first piece is certain; else the first sample with
/// a timestamp says seconds (a fraction, or a number of the size of seconds since 1973) or
/// milliseconds; else the file name.
fn guess_openmetrics(text: &str, name_says_om: bool) -> bool {
    if exposition::has_eof_line(text) {
        return true;
    }
    for line in text.lines().take(10_000) {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let rest = line.rsplit_once('}').map_or(line, |(_, r)| r);
        let rest = rest.split(" # ").next().unwrap_or(rest);
        let tokens: Vec<&str> = rest.split_whitespace().collect();
        let ts = match (line.contains('}'), tokens.as_slice()) {
            (true, [_, ts]) | (false, [_, _, ts]) => *ts,
            _ => continue,
        };
        return ts.contains(['.', 'e', 'E']) || ts.parse::<f64>().is_ok_and(|t| t.abs() < 1e11);
    }
    name_says_om
}

/// The bytes of a source, decompressed when they start with gzip's magic bytes, and whether
/// they were.
fn decoder(src: Box<dyn Read + Send>) -> std::io::Result<(Box<dyn Read + Send>, bool)> {
    let mut buf = BufReader::with_capacity(1 << 20, src);
    let gz = buf.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    Ok(if gz {
        (Box::new(flate2::bufread::MultiGzDecoder::new(buf)), true)
    } else {
        (Box::new(buf), false)
    })
}

/// Cuts a byte stream into pieces of whole lines, checking that each is UTF-8.
struct Pieces<'n> {
    src: Box<dyn Read + Send>,
    name: &'n str,
    size: usize,
    /// Buffers of parsed pieces, handed back to be filled again: a fresh multi-megabyte buffer
    /// per piece cost page faults.
    spare: Spare,
    /// The start of the next piece: an unfinished line.
    carry: Vec<u8>,
    offset: usize,
    done: bool,
    /// [`limit::max_line`], read once.
    max_line: (u64, f64),
}

impl<'n> Pieces<'n> {
    fn new(src: Box<dyn Read + Send>, name: &'n str, size: usize) -> Self {
        Pieces {
            src,
            name,
            size,
            spare: Spare::default(),
            carry: Vec::new(),
            offset: 0,
            done: false,
            max_line: limit::max_line(),
        }
    }

    fn next_piece(&mut self) -> Result<Option<Piece>> {
        let mut buf = self.spare.take();
        buf.extend_from_slice(&self.carry);
        self.carry.clear();
        buf.reserve(self.size + (1 << 16));
        // Read until the piece is big enough and has a newline, or the input ends.
        let mut searched = 0;
        while !self.done {
            if buf.len() >= self.size {
                if buf[searched..].contains(&b'\n') {
                    break;
                }
                searched = buf.len();
                // Nothing searched had a newline: the whole buffer is one line so far, and a
                // gzip bomb of zeros would grow it without end.
                if buf.len() as u64 > self.max_line.0 {
                    anyhow::bail!(
                        "`{}`: no line break in the {} MiB from byte {}: not metrics text (LLM_DOCTOR_MAX_INPUT_MB raises the limit)",
                        self.name,
                        self.max_line.1,
                        self.offset
                    );
                }
            }
            let at = buf.len();
            buf.resize(at + (1 << 16).max(self.size.min(1 << 20)), 0);
            let n = loop {
                match self.src.read(&mut buf[at..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        return Err(
                            anyhow::Error::new(e).context(format!("decompressing `{}`", self.name))
                        )
                    }
                }
            };
            buf.truncate(at + n);
            self.done = n == 0;
        }
        if buf.is_empty() {
            return Ok(None);
        }
        if !self.done {
            // Cut after the last newline; the rest starts the next piece.
            let cut = buf
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(buf.len(), |i| i + 1);
            self.carry.extend_from_slice(&buf[cut..]);
            buf.truncate(cut);
        }
        let offset = self.offset;
        self.offset += buf.len();
        let text = String::from_utf8(buf).map_err(|e| {
            anyhow::anyhow!(
                "`{}` is not UTF-8 text (invalid byte at offset {})",
                self.name,
                offset + e.utf8_error().valid_up_to()
            )
        })?;
        Ok(Some(Piece { text }))
    }
}

/// Joins parsed pieces in file order, applying the retention as samples arrive.
struct Joiner<'o> {
    openmetrics: bool,
    opts: &'o ReadOptions,
    by_raw: FastMap<String, usize>,
    series: Vec<Series>,
    /// Per series, what its window trim needs.
    trims: Vec<Trim>,
    families: BTreeMap<String, MetricType>,
    /// OpenMetrics: a piece ended the file.
    ended: bool,
    /// Some piece had an `# EOF` line: the file is OpenMetrics.
    saw_eof: bool,
    error: Option<ParseError>,
    /// The number of the next piece's first line.
    next_line: usize,
    span: Option<(i64, i64)>,
    any_sample: bool,
    all_timestamped: bool,
    /// The targets seen, with [`ReadOptions::target_limit`] (at most its `max` + 1).
    targets: std::collections::HashSet<String>,
}

impl<'o> Joiner<'o> {
    fn new(openmetrics: bool, opts: &'o ReadOptions) -> Self {
        Joiner {
            openmetrics,
            opts,
            by_raw: FastMap::default(),
            series: Vec::new(),
            trims: Vec::new(),
            families: BTreeMap::new(),
            ended: false,
            saw_eof: false,
            error: None,
            next_line: 1,
            span: None,
            any_sample: false,
            all_timestamped: true,
            targets: Default::default(),
        }
    }

    /// Takes the next piece; true when reading can stop (the outcome is settled).
    fn take(&mut self, parsed: Parsed) -> bool {
        let renumber = |mut e: ParseError, base: usize| {
            e.line += base - 1;
            e
        };
        if self.error.is_none() && self.ended {
            // An earlier piece ended the file: any content here is an error.
            self.error = parsed.after_eof.map(|e| renumber(e, self.next_line));
            if let Ok(chunk) = &parsed.result {
                self.next_line += chunk.newlines;
            }
        } else if self.error.is_none() {
            match parsed.result {
                Ok(chunk) => {
                    self.ended = self.openmetrics && chunk.saw_eof;
                    self.next_line += chunk.newlines;
                    self.absorb(chunk);
                    if self.over_target_limit() {
                        return true;
                    }
                }
                Err(e) => self.error = Some(renumber(e, self.next_line)),
            }
        }
        self.saw_eof |= parsed.saw_eof;
        // Settled: the text format was wrong (an `# EOF` line), or an error in OpenMetrics,
        // which is certain once an `# EOF` line was seen. An error in the text format needs the
        // rest of the file to rule out an `# EOF` line further on.
        self.saw_eof && (!self.openmetrics || self.error.is_some())
    }

    fn absorb(&mut self, chunk: Chunk) {
        for (name, ty) in chunk.families {
            match self.families.get_mut(&name) {
                Some(existing) if ty != MetricType::Unknown => *existing = ty,
                Some(_) => {}
                None => {
                    self.families.insert(name, ty);
                }
            }
        }
        let retention = self.opts.retention;
        for (raw, mut s) in chunk.series {
            let (mut span, timed) = s.samples.time_span();
            self.note_span(span, timed, s.samples.is_empty());
            if let Some(keep) = &self.opts.keep_name {
                if !keep(&s.name) {
                    continue;
                }
            }
            if let Retention::Range { .. } = retention {
                s.samples.retain(|x| retention.admits(x.t_ms));
                span = s.samples.time_span().0;
            }
            let idx = match self.by_raw.get(&raw) {
                Some(&i) => {
                    self.series[i].samples.append(&mut s.samples);
                    let trim = &mut self.trims[i];
                    trim.newest = trim.newest.max(span.map(|(_, hi)| hi));
                    trim.oldest = min_some(trim.oldest, span.map(|(lo, _)| lo));
                    i
                }
                None => {
                    if let Some(limit) = &self.opts.target_limit {
                        if self.targets.len() <= limit.max {
                            if let Some(t) = (limit.target_of)(&s) {
                                self.targets.insert(t);
                            }
                        }
                    }
                    self.by_raw.insert(raw, self.series.len());
                    self.series.push(s);
                    self.trims.push(Trim {
                        newest: span.map(|(_, hi)| hi),
                        oldest: span.map(|(lo, _)| lo),
                        at_len: 0,
                    });
                    self.series.len() - 1
                }
            };
            if let Retention::LastWindow { keep_ms } = retention {
                let Trim {
                    newest,
                    oldest,
                    at_len: trim_at,
                } = &mut self.trims[idx];
                let samples = &mut self.series[idx].samples;
                if samples.len() > *trim_at {
                    if let Some(n) = *newest {
                        let cutoff = n.saturating_sub(keep_ms);
                        // Nothing at or before the cutoff: no walk over the samples.
                        if oldest.is_none_or(|o| o <= cutoff) {
                            trim_before(samples, cutoff);
                            *oldest = samples.time_span().0.map(|(lo, _)| lo);
                        }
                    }
                    // A day of one series can arrive in one piece: give back what the trim
                    // freed, or every series would hold a day's capacity.
                    samples.shrink_slack();
                    // Amortized: trim again only when the buffer has doubled.
                    *trim_at = (samples.len() * 2).max(64);
                }
            }
        }
    }

    fn note_span(&mut self, span: Option<(i64, i64)>, timed: bool, empty: bool) {
        self.any_sample |= !empty;
        self.all_timestamped &= timed;
        if let Some((lo, hi)) = span {
            self.span = Some(match self.span {
                Some((l, h)) => (l.min(lo), h.max(hi)),
                None => (lo, hi),
            });
        }
    }

    fn over_target_limit(&self) -> bool {
        self.opts
            .target_limit
            .as_ref()
            .is_some_and(|l| self.targets.len() > l.max)
    }

    fn finish(self, name: &str) -> Pass {
        // Before the format check: either format names the same targets, and the read stopped
        // early, maybe before the `# EOF` line.
        if let Some(limit) = self
            .opts
            .target_limit
            .as_ref()
            .filter(|_| self.over_target_limit())
        {
            return Pass::Done(Err(too_many_targets(name, limit.max)));
        }
        if self.saw_eof != self.openmetrics {
            return Pass::Redo(self.saw_eof);
        }
        if let Some(e) = self.error {
            return Pass::Done(Err(anyhow::Error::new(e)));
        }
        let mut set = SeriesSet {
            series: self.series,
            families: self.families,
            has_timestamps: false,
            conflicts: Default::default(),
        };
        set.normalize();
        if let Retention::LastWindow { keep_ms } = self.opts.retention {
            if let Some(newest) = self.span.map(|(_, hi)| hi) {
                let cutoff = newest.saturating_sub(keep_ms);
                for s in &mut set.series {
                    // Only where a sample is at or before the cutoff: no walk otherwise.
                    if s.samples.time_span().0.is_none_or(|(lo, _)| lo <= cutoff) {
                        trim_before(&mut s.samples, cutoff);
                    }
                }
            }
        }
        Pass::Done(Ok(StreamRead {
            set,
            span: self.span,
            has_timestamps: self.any_sample && self.all_timestamped,
        }))
    }
}

/// The error for file `name` naming more than `max` targets.
fn too_many_targets(name: &str, max: usize) -> anyhow::Error {
    anyhow::anyhow!(
        "`{name}`: more than {max} targets in the input, the most diagnosed at once (LLM_DOCTOR_MAX_TARGETS raises the limit; --selector narrows the input)"
    )
}

/// A series' newest and oldest timestamps, and the length at which it is trimmed next: a trim
/// that would drop nothing (the oldest sample newer than the cutoff) is skipped.
struct Trim {
    newest: Option<i64>,
    oldest: Option<i64>,
    at_len: usize,
}

/// The earlier of two optional instants, either one where the other is missing.
fn min_some(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Drops samples at or before `cutoff`; keeps those without a timestamp.
fn trim_before(samples: &mut Samples, cutoff: i64) {
    if samples.time_span().1 && samples.is_strictly_increasing() {
        // Every sample timed and in time order: the dropped ones are the first.
        let k = samples.partition_point(|t| t.is_some_and(|t| t <= cutoff));
        samples.drop_first(k);
    } else {
        samples.retain(|x| x.t_ms.is_none_or(|t| t > cutoff));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    fn gz_members(text: &[u8], cuts: &[usize]) -> Vec<u8> {
        // Several gzip members, cut at the given byte offsets (mid-line, mid-character even).
        let mut out = Vec::new();
        let mut at = 0;
        let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(text.len())).collect();
        cuts.sort_unstable();
        cuts.push(text.len());
        for c in cuts {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&text[at..c]).unwrap();
            out.extend(e.finish().unwrap());
            at = c;
        }
        out
    }

    fn read_bytes(bytes: &[u8], name: &str, opts: &ReadOptions) -> Result<StreamRead> {
        let bytes = bytes.to_vec();
        let open = move || -> std::io::Result<Box<dyn Read + Send>> {
            Ok(Box::new(std::io::Cursor::new(bytes.clone())))
        };
        read_stream(&open, name, name.contains(".om"), opts)
    }

    fn opts(threads: usize, chunk_bytes: usize, retention: Retention) -> ReadOptions {
        ReadOptions {
            retention,
            keep_name: None,
            threads,
            chunk_bytes,
            target_limit: None,
        }
    }

    /// The streamed set of `text` must be the whole-text parse, for every way of reading it.
    fn assert_same_as_whole(text: &str, name: &str) {
        let whole = exposition::parse(text, name);
        for (threads, chunk) in [(0, 1), (0, 97), (1, 4096), (3, 333), (2, 1 << 20)] {
            for bytes in [
                text.as_bytes().to_vec(),
                gz_members(text.as_bytes(), &[chunk * 3, 7]),
            ] {
                let got = read_bytes(&bytes, name, &opts(threads, chunk, Retention::All));
                match (&whole, got) {
                    (Ok(w), Ok(g)) => {
                        assert_eq!(&g.set, w, "{name}: threads {threads}, chunk {chunk}")
                    }
                    (Err(w), Err(g)) => assert_eq!(
                        g.downcast_ref::<ParseError>(),
                        Some(w),
                        "{name}: threads {threads}, chunk {chunk}"
                    ),
                    (w, g) => panic!("{name}: threads {threads}, chunk {chunk}: {w:?} vs {g:?}"),
                }
            }
        }
    }

    fn files_under(dir: &str) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        let mut todo = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    todo.push(p);
                } else if p.to_string_lossy().ends_with(".om.gz") {
                    out.push(p);
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn fixtures_and_corpus_stream_to_the_whole_text_parse() {
        let files: Vec<_> = files_under("fixtures")
            .into_iter()
            .chain(files_under("corpus"))
            .collect();
        assert!(files.len() > 50, "{} recordings", files.len());
        for path in files {
            let text = crate::source::file::read_text(&path).unwrap();
            let name = path.display().to_string();
            let whole = exposition::parse(&text, &name).unwrap();
            for (threads, chunk) in [(0, 64 << 10), (2, 100_000)] {
                let got = read_path(&path, &opts(threads, chunk, Retention::All)).unwrap();
                assert_eq!(got.set, whole, "{name}: threads {threads}");
                assert_eq!(got.span, whole.oldest_ms().zip(whole.newest_ms()), "{name}");
            }
        }
    }

    #[test]
    fn diagnose_retention_prepares_the_same_snapshots() {
        // What `diagnose` keeps (two windows before the newest sample, or before `--at`) gives
        // every fixture the same snapshots as the whole recording.
        let rules = crate::rules::load_rules(None).unwrap();
        let window_ms = 300_000;
        for path in files_under("fixtures") {
            let whole = read_path(&path, &opts(0, 1 << 20, Retention::All)).unwrap();
            let newest = whole.set.newest_ms().unwrap();
            // Recorded fixtures of a few minutes are kept whole; the others lose their start.
            let longer = newest - whole.set.oldest_ms().unwrap() > 2 * window_ms;
            let at = newest - 60_000;
            for (retention, at_ms) in [
                (
                    Retention::LastWindow {
                        keep_ms: 2 * window_ms,
                    },
                    None,
                ),
                (
                    Retention::Range {
                        from_ms: at - 2 * window_ms,
                        to_ms: at,
                    },
                    Some(at),
                ),
            ] {
                let kept = read_path(&path, &opts(1, 1 << 16, retention)).unwrap();
                assert!(
                    kept.set.sample_count() < whole.set.sample_count() || !longer,
                    "{path:?}"
                );
                let o = crate::prepared::Options {
                    window_ms,
                    at_ms,
                    ..Default::default()
                };
                let snaps = |set: &SeriesSet| -> Vec<_> {
                    crate::pipeline::prepare(set, &rules, &o)
                        .unwrap()
                        .into_iter()
                        .map(|p| (p.snapshot, p.notes))
                        .collect()
                };
                assert_eq!(
                    snaps(&kept.set),
                    snaps(&whole.set),
                    "{path:?} {retention:?}"
                );
            }
        }
    }

    #[test]
    fn parallel_and_sequential_agree_on_a_fleet() {
        // Several replicas, series contiguous as in the generated fleet files.
        let mut text = String::from("# TYPE g gauge\n# TYPE c counter\n");
        for r in 0..20 {
            for k in 0..50 {
                text.push_str(&format!("g{{pod=\"p{r}\",k=\"{k}\"}} {k}.5 {}\n", 1000 + r));
            }
            for t in 0..40 {
                text.push_str(&format!(
                    "c_total{{pod=\"p{r}\"}} {t} {}.5\n",
                    1000 + t * 15
                ));
            }
        }
        text.push_str("# EOF\n");
        assert_same_as_whole(&text, "fleet.om");
        let seq = read_bytes(text.as_bytes(), "f", &opts(0, 1000, Retention::All)).unwrap();
        let par = read_bytes(text.as_bytes(), "f", &opts(4, 1000, Retention::All)).unwrap();
        assert_eq!(seq, par);
        assert_eq!(seq.set.series.len(), 20 * 51);
    }

    #[test]
    fn format_is_settled_by_the_whole_file() {
        // Text format with small millisecond timestamps: guessed OpenMetrics, read again.
        assert_same_as_whole("a 1 1000\na 2 2000\n", "x.om");
        // OpenMetrics whose first pieces look like milliseconds: `# EOF` only at the end.
        let mut om = String::new();
        for t in 0..200 {
            om.push_str(&format!("a {t} {}\n", 1_796_083_200_000i64 + t));
        }
        om.push_str("# EOF\n");
        assert_same_as_whole(&om, "x.prom");
        // A float timestamp is an error in the text format, but not when `# EOF` comes later.
        let late_eof = format!("a 1 1.5\n{}# EOF\n", "b 1\n".repeat(500));
        assert_same_as_whole(&late_eof, "x.prom");
        let no_eof = format!("{}a 1 1.5\n", "b 1 5\n".repeat(500));
        assert_same_as_whole(&no_eof, "x.prom");
        let got = read_bytes(no_eof.as_bytes(), "x.prom", &opts(0, 64, Retention::All));
        let e = got.unwrap_err().downcast::<ParseError>().unwrap();
        assert_eq!((e.line, e.column), (501, 5));
    }

    #[test]
    fn errors_keep_line_and_column_across_pieces() {
        for text in [
            "a 1 1\n# EOF\nb 2 2\n",
            "a 1 1\n# EOF\n\n   \n  b 2 2\n",
            "a 1 1\na{x=\"1\",x=\"2\"} 1 2\n# EOF\n",
            "# TYPE a gauge\na 1 1\na 2 zz\n# EOF\n",
            "a{b=\"é\"} 1 1\na{b=\"é\" 2 2\n# EOF\n",
            "a 1\n# EOF\n# EOF\n",
            "",
            "\n\n# only comments\n",
        ] {
            assert_same_as_whole(text, "t.om");
        }
        // Deep in a long file: the pieces before it count their lines right.
        let mut long = "a{x=\"1\"} 1 1\n".repeat(20_000);
        long.push_str("a{x=\"1\"} 1 bad\n# EOF\n");
        assert_same_as_whole(&long, "t.om");
        let e = read_bytes(long.as_bytes(), "t.om", &opts(2, 5000, Retention::All)).unwrap_err();
        let e = e.downcast::<ParseError>().unwrap();
        assert_eq!(
            (e.line, e.column, e.message.as_str()),
            (20_001, 12, "invalid timestamp `bad`")
        );
    }

    #[test]
    fn invalid_utf8_is_reported_with_its_offset() {
        let mut bytes = "a 1 1\n".repeat(100).into_bytes();
        bytes.extend([0xff, b'\n']);
        let e = read_bytes(&bytes, "bad", &opts(0, 50, Retention::All)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`bad` is not UTF-8 text (invalid byte at offset 600)"
        );
        let e = read_bytes(
            &gz_members(&bytes, &[3, 301]),
            "bad",
            &opts(2, 50, Retention::All),
        );
        assert!(e.unwrap_err().to_string().contains("offset 600"));
        // A truncated gzip member is a decompression error, not a panic.
        let gz = gz_members(&bytes[..500], &[]);
        let e = read_bytes(&gz[..gz.len() - 9], "cut", &opts(1, 50, Retention::All));
        assert!(format!("{:#}", e.unwrap_err()).contains("decompressing `cut`"));
    }

    fn window_text() -> String {
        // Two series, one ending early; samples every 15 s for 20 minutes; a timestamp-less one.
        let mut text = String::from("# TYPE g gauge\n");
        for t in 0..80 {
            text.push_str(&format!("g{{a=\"1\"}} {t} {}\n", 1_000_000 + t * 15));
        }
        for t in 0..10 {
            text.push_str(&format!("g{{a=\"2\"}} {t} {}\n", 1_000_000 + t * 15));
        }
        text.push_str("h 7\n# EOF\n");
        text
    }

    #[test]
    fn last_window_keeps_the_window_before_the_newest_sample() {
        let text = window_text();
        let whole = exposition::parse(&text, "w").unwrap();
        let newest = whole.newest_ms().unwrap();
        let keep_ms = 300_000;
        for threads in [0, 2] {
            for chunk in [1, 100, 1 << 20] {
                let got = read_bytes(
                    text.as_bytes(),
                    "w",
                    &opts(threads, chunk, Retention::LastWindow { keep_ms }),
                )
                .unwrap();
                let mut want = whole.clone();
                for s in &mut want.series {
                    s.samples
                        .retain(|x| x.t_ms.is_none_or(|t| t > newest - keep_ms));
                }
                assert_eq!(got.set, want);
                assert_eq!(got.set.series[0].samples.len(), 20);
                // The series that ended early is kept, with no samples.
                assert!(got.set.series[1].samples.is_empty());
                assert_eq!(got.span, Some((1_000_000_000, newest)));
                assert!(!got.has_timestamps);
            }
        }
    }

    /// The read stops at the piece that goes past the limit: a broken line pieces later is
    /// never reached.
    #[test]
    fn a_read_stops_once_past_the_target_limit() {
        // About 170 kB: pieces are read 64 kB at a time.
        let mut text = String::from("# TYPE g gauge\n");
        for i in 0..3000 {
            text.push_str(&format!("g{{pod=\"p{i}\"}} 1\nother{{pod=\"p{i}\"}} 1\n"));
        }
        text.push_str("g{pod=\"broken\" 1\n");
        let pods = |max| TargetLimit {
            target_of: Arc::new(|s: &Series| {
                (s.name == "g").then(|| s.labels.get("pod").unwrap_or("").to_string())
            }),
            max,
        };
        for threads in [0, 2] {
            let mut o = opts(threads, 64, Retention::All);
            o.target_limit = Some(pods(10));
            let e = format!("{:#}", read_bytes(text.as_bytes(), "t", &o).unwrap_err());
            assert!(e.contains("more than 10 targets"), "{e}");
            o.target_limit = Some(pods(3000));
            let e = format!("{:#}", read_bytes(text.as_bytes(), "t", &o).unwrap_err());
            assert!(
                e.contains("t:6002:"),
                "within the limit, the whole file is read: {e}"
            );
        }
    }

    #[test]
    fn range_and_name_filter() {
        let text = window_text();
        let whole = exposition::parse(&text, "w").unwrap();
        let (from_ms, to_ms) = (1_000_060_000, 1_000_120_000);
        let mut o = opts(1, 64, Retention::Range { from_ms, to_ms });
        o.keep_name = Some(Arc::new(|n: &str| n == "g"));
        let got = read_bytes(text.as_bytes(), "w", &o).unwrap();
        let mut want = whole.clone();
        want.series.retain(|s| s.name == "g");
        for s in &mut want.series {
            s.samples
                .retain(|x| x.t_ms.is_none_or(|t| (from_ms..=to_ms).contains(&t)));
        }
        want.has_timestamps = true;
        assert_eq!(got.set, want);
        assert_eq!(got.set.series[0].samples.len(), 5);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any piece size and any gzip member cuts give the whole-text parse (or its error).
        #[test]
        fn any_pieces_give_the_whole_parse(
            lines in proptest::collection::vec(
                prop_oneof![
                    (0u8..4, 0u32..1000, 0u32..100).prop_map(|(n, v, t)| format!("m{n}{{l=\"{}\"}} {v} {}", n % 2, 1000 + t)),
                    (0u8..4).prop_map(|n| format!("# TYPE m{n} gauge")),
                    Just(String::new()),
                    Just("  m1 5 1200.5".to_string()),
                    Just("m2{l=\"1\" 1 1".to_string()),
                ],
                0..60,
            ),
            eof in any::<bool>(),
            chunk in 1usize..300,
            threads in 0usize..3,
            cuts in proptest::collection::vec(0usize..4000, 0..4),
        ) {
            let mut text = lines.join("\n");
            if eof { text.push_str("\n# EOF\n"); }
            let whole = exposition::parse(&text, "p");
            let bytes = gz_members(text.as_bytes(), &cuts);
            let got = read_bytes(&bytes, "p", &opts(threads, chunk, Retention::All));
            match (whole, got) {
                (Ok(w), Ok(g)) => prop_assert_eq!(g.set, w),
                (Err(w), Err(g)) => prop_assert_eq!(g.downcast_ref::<ParseError>(), Some(&w)),
                (w, g) => prop_assert!(false, "{:?} vs {:?}", w, g),
            }
        }
    }
}
