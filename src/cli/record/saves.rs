//! Keeps a `record --scrape` recording on disk while it grows, writing in all a few times its
//! final size rather than the square of its length.
//!
//! OpenMetrics keeps each family in one block, so a recording cannot be appended to: a complete
//! file after every round meant rewriting it whole, n²/2 rounds' worth over n rounds (a day of
//! one replica at 15 s ends near 150 MB and wrote some 400 GB). Instead:
//! - `--out` is written whole after rounds 1, 2, 4, 8, … (each save at most doubles the one
//!   before), at most twice the final size in all (after a failed whole save, the next is
//!   tried at twice the rounds and the parts keep everything since the last one that
//!   succeeded). A whole save runs on a thread of its own, from a copy of the recording, so
//!   that the rounds keep their schedule while it writes (a fleet's recording at a short
//!   interval takes many intervals to write); one due while another is still being written
//!   starts with the first round after that one is done (so the schedule may shift: 1, 2, 4,
//!   9, 18, …);
//! - every round goes into a part of at most [`PART_ROUNDS`] rounds in `OUT.parts/` (a part
//!   ends with the round a whole save starts at), and the parts a whole save holds are removed
//!   once it is done; only the open part is rewritten after each round: a crash or a `kill -9` loses
//!   at most the round in progress, and `diagnose OUT OUT.parts/*` reads everything (a part
//!   being written is a hidden `.rounds-….partial` file, which `*` leaves out);
//! - at the end `--out` is written whole and the parts are removed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{bail, Result};

use crate::signal::series::SeriesSet;
use crate::source::file::openmetrics;

/// Rounds in one part: each round rewrites its part, so a round costs at most this many
/// rounds' worth of writing.
pub const PART_ROUNDS: usize = 8;

/// A whole save on its own thread.
struct Writing {
    /// The rounds it holds.
    rounds: usize,
    /// Its series.
    series: usize,
    /// Set to make it stop (it then fails, removing its partial file).
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<u64>>,
}

/// Where the recording stands on disk.
pub struct Saves {
    out: PathBuf,
    /// `OUT.parts`, created with the first part.
    parts_dir: PathBuf,
    /// Rounds seen so far.
    rounds: usize,
    /// The round count at which `out` is next written whole.
    next_whole: usize,
    /// The open part's samples, and its first round (1-based; None while no part is open).
    part: SeriesSet,
    part_first: Option<usize>,
    /// Part files written since the last whole save, with their first round.
    part_files: Vec<(usize, PathBuf)>,
    /// The whole save being written.
    writing: Option<Writing>,
    /// Say each save on stderr.
    verbose: bool,
}

impl Saves {
    /// Nothing saved yet; `verbose` says each save on stderr. Refused when `OUT.parts` holds
    /// files already: parts of an earlier recording that stopped without finishing, which this
    /// one would mix with its own or remove.
    pub fn new(out: &Path, verbose: bool) -> Result<Saves> {
        let parts_dir = parts_dir(out);
        if parts_dir.exists() && !parts_dir.is_dir() {
            bail!(
                "`{}` is where the rounds between whole saves go, and it is not a folder: \
                 move or remove it first",
                parts_dir.display()
            );
        }
        if std::fs::read_dir(&parts_dir).is_ok_and(|mut entries| entries.next().is_some()) {
            bail!(
                "`{}` holds parts of an earlier recording that did not finish (`diagnose {} {}/*` \
                 reads them with it): move or remove it first",
                parts_dir.display(),
                out.display(),
                parts_dir.display()
            );
        }
        Ok(Saves {
            out: out.to_path_buf(),
            parts_dir,
            rounds: 0,
            next_whole: 1,
            part: SeriesSet::default(),
            part_first: None,
            part_files: Vec::new(),
            writing: None,
            verbose,
        })
    }

    /// Saves after a round: `round` is what it added, `all` everything so far. A failed write
    /// is said on stderr and the recording goes on.
    pub fn after_round(&mut self, round: &SeriesSet, all: &SeriesSet) {
        self.rounds += 1;
        if self
            .writing
            .as_ref()
            .is_some_and(|w| w.thread.is_finished())
        {
            self.settle();
        }
        if all.series.is_empty() {
            return;
        }
        // The round goes into a part whether or not a whole save starts with it: `out` holds it
        // only once that save is done. A part ends with the round a whole save starts at, so
        // that the parts it holds can be removed when it is done.
        let whole_now = self.rounds >= self.next_whole && self.writing.is_none();
        // Not after a part that could not be written: were the whole save to fail too, the
        // round would be on disk nowhere (the open part, written again next round, keeps it).
        if self.save_part(round) && whole_now {
            self.part_first = None;
            self.next_whole = self.rounds * 2;
            let (out, copy) = (self.out.clone(), all.clone());
            let series = copy.series.len();
            let stop = Arc::new(AtomicBool::new(false));
            let stopped = stop.clone();
            let thread = std::thread::Builder::new()
                .name("whole save".into())
                .spawn(move || write_whole_until(&out, &copy, &stopped));
            match thread {
                Ok(thread) => {
                    self.writing = Some(Writing {
                        rounds: self.rounds,
                        series,
                        stop,
                        thread,
                    })
                }
                Err(e) => tracing::error!("error: cannot start the whole save: {e}"),
            }
        }
    }

    /// Waits for the whole save being written, if any; when it succeeded, removes the parts it
    /// holds. Called before `out` is written again.
    pub fn settle(&mut self) {
        let Some(Writing {
            rounds,
            series,
            stop,
            thread,
        }) = self.writing.take()
        else {
            return;
        };
        let written = thread
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the whole save's thread panicked")));
        match written {
            // Stopped on purpose: the recording is about to be written whole anyway.
            Err(_) if stop.load(Ordering::Relaxed) => {}
            Ok(bytes) => {
                if self.verbose {
                    tracing::info!(
                        "saved {series} series, {bytes} bytes to {} (rounds 1-{rounds}; next whole save after round {})",
                        self.out.display(),
                        rounds * 2
                    );
                }
                self.remove_parts_through(rounds);
            }
            // The parts since the last whole save that succeeded are kept, and the next is
            // tried at twice the rounds, so a full disk does not make every round a whole save.
            Err(e) => tracing::error!("error: {e:#}"),
        }
    }

    /// Stops the whole save being written, if any (what it would hold is written whole next),
    /// and waits for its thread: after Ctrl-C a fleet's recording is then written once, not
    /// twice. A save already done counts as done.
    pub fn stop(&mut self) {
        if let Some(w) = &self.writing {
            w.stop.store(true, Ordering::Relaxed);
        }
        self.settle();
    }

    /// `round` added to the open part (a full one stays on disk as it is, and the round opens
    /// another), which is written again; false when it could not be.
    fn save_part(&mut self, round: &SeriesSet) -> bool {
        let first = match self.part_first {
            Some(first) if self.rounds - first < PART_ROUNDS => first,
            _ => {
                self.part = SeriesSet::default();
                self.rounds
            }
        };
        self.part_first = Some(first);
        self.part.merge_next(round);
        let file = self.parts_dir.join(part_name(first, &self.out));
        let written = std::fs::create_dir_all(&self.parts_dir)
            .map_err(anyhow::Error::new)
            .and_then(|()| write_whole(&file, &self.part));
        match written {
            Ok(bytes) => {
                if !self.part_files.iter().any(|(_, f)| f == &file) {
                    self.part_files.push((first, file.clone()));
                }
                if self.verbose {
                    tracing::info!(
                        "saved rounds {first}-{}, {bytes} bytes to {} (diagnose {} {}/* reads all)",
                        self.rounds,
                        file.display(),
                        self.out.display(),
                        self.parts_dir.display()
                    );
                }
                true
            }
            Err(e) => {
                tracing::error!("error: {e:#}");
                false
            }
        }
    }

    /// After `out` was written whole at the end: the parts are no longer needed.
    pub fn finish(mut self) {
        self.settle();
        self.remove_parts_through(usize::MAX);
    }

    /// Removes the parts whose rounds all lie at or before `round` (each part starts after
    /// the last whole save it follows and ends at the next one's round at the latest).
    fn remove_parts_through(&mut self, round: usize) {
        // A part that could not be removed is kept in the list, to be tried again.
        self.part_files.retain(|(first, f)| {
            *first > round || (std::fs::remove_file(f).is_err() && f.exists())
        });
        if self.part_files.is_empty() {
            // Only when empty: a directory the user put other files in stays.
            let _ = std::fs::remove_dir(&self.parts_dir);
        }
        if self.part_first.is_some_and(|first| first <= round) {
            self.part = SeriesSet::default();
            self.part_first = None;
        }
    }
}

impl Drop for Saves {
    /// A recording that ends early stops its whole save, which removes its partial file,
    /// rather than leave one half written behind.
    fn drop(&mut self) {
        self.stop();
    }
}

/// `OUT.parts` beside `OUT`.
pub fn parts_dir(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".parts");
    out.with_file_name(name)
}

/// `rounds-000009.om` (`.om.gz` when `out` is gzip): named by its first round, so the parts
/// list in recording order.
fn part_name(first_round: usize, out: &Path) -> String {
    let gz = if super::file::is_gzip_name(out) {
        ".gz"
    } else {
        ""
    };
    format!("rounds-{first_round:06}.om{gz}")
}

/// `set` written to `path` as OpenMetrics (gzip when so named), through a partial file.
pub fn write_whole(path: &Path, set: &SeriesSet) -> Result<u64> {
    super::file::stream_to_file(path, |mut sink| Ok(openmetrics::write_to(set, &mut sink)?))
}

/// [`write_whole`] that fails as soon as `stop` is set, leaving `path` as it was.
fn write_whole_until(path: &Path, set: &SeriesSet, stop: &AtomicBool) -> Result<u64> {
    super::file::stream_to_file(path, |sink| {
        let mut until = Until { sink, stop };
        Ok(openmetrics::write_to(set, &mut until)?)
    })
}

/// A writer that fails once `stop` is set.
struct Until<'a> {
    sink: &'a mut dyn std::io::Write,
    stop: &'a AtomicBool,
}

impl std::io::Write for Until<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("the whole save was stopped"));
        }
        self.sink.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.sink.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::samples::Samples;
    use crate::signal::series::{Labels, Sample, Series};

    /// Round `k`: one gauge sampled at k seconds.
    fn round(k: usize) -> SeriesSet {
        let mut samples = Samples::new();
        samples.push(Sample {
            t_ms: Some(k as i64 * 1000),
            value: k as f64,
        });
        SeriesSet {
            series: vec![Series {
                name: "queue".into(),
                labels: Labels::new(vec![("instance".into(), "a:1".into())]),
                samples,
            }],
            ..Default::default()
        }
    }

    /// Round `k` recorded: added to `all`, then saved.
    fn record(saves: &mut Saves, all: &mut SeriesSet, k: usize) {
        let r = round(k);
        all.merge_next(&r);
        saves.after_round(&r, all);
    }

    /// The rounds (seconds) in `path`, none when it is not there.
    fn rounds_in(path: &Path) -> Vec<i64> {
        let Ok(text) = crate::source::file::read_text(path) else {
            return Vec::new();
        };
        let set = crate::source::file::parse_inputs(&[("f".into(), text)]).unwrap();
        (set.series.iter())
            .flat_map(|s| s.samples.iter().filter_map(|x| x.t_ms))
            .map(|t| t / 1000)
            .collect()
    }

    /// What a crash would leave: `out` and the parts `OUT.parts/*` names.
    fn on_disk(out: &Path) -> (Vec<i64>, Vec<i64>) {
        let mut parts: Vec<PathBuf> = std::fs::read_dir(parts_dir(out))
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        parts.retain(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'));
        parts.sort();
        let in_parts = parts.iter().flat_map(|p| rounds_in(p)).collect();
        (rounds_in(out), in_parts)
    }

    /// Every round in `out` or a part, each once, in order.
    fn every_round_on_disk(out: &Path) -> Vec<i64> {
        let (whole, parts) = on_disk(out);
        let mut both = [whole, parts].concat();
        both.sort_unstable();
        both.dedup();
        both
    }

    /// Whole saves run beside the rounds: at every round, whether a whole save is still being
    /// written or not, `out` and the parts hold every round, and `out` the first ones.
    #[test]
    fn every_round_is_on_disk_while_whole_saves_are_written_beside_the_rounds() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("rec.om.gz");
        let mut saves = Saves::new(&out, false).unwrap();
        let mut all = SeriesSet::default();
        for k in 1..=40 {
            record(&mut saves, &mut all, k);
            let (whole, _) = on_disk(&out);
            assert_eq!(
                every_round_on_disk(&out),
                (1..=k as i64).collect::<Vec<_>>(),
                "after round {k}"
            );
            // The whole file is the recording's first rounds, once the first save is done.
            assert_eq!(whole, (1..=whole.len() as i64).collect::<Vec<_>>());
            if k % 8 == 0 {
                // Waiting for the save removes the parts it holds.
                saves.settle();
                let (whole, parts) = on_disk(&out);
                assert!(parts.iter().all(|r| *r as usize > whole.len()), "{parts:?}");
            }
        }
        saves.settle();
        let bytes = write_whole(&out, &all).unwrap();
        assert!(bytes > 0);
        saves.finish();
        assert_eq!(rounds_in(&out), (1..=40).collect::<Vec<_>>());
        assert!(
            !parts_dir(&out).exists(),
            "the parts are removed at the end"
        );
    }

    /// A whole save that fails (its partial file cannot be made) keeps the parts, and the next
    /// one, at twice the rounds, removes them once it is written.
    #[test]
    fn a_failed_whole_save_keeps_the_parts_until_one_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("rec.om");
        let mut saves = Saves::new(&out, false).unwrap();
        let mut all = SeriesSet::default();
        let mut add = |saves: &mut Saves, k: usize| {
            record(saves, &mut all, k);
            saves.settle();
        };
        for k in 1..=4 {
            add(&mut saves, k);
        }
        assert_eq!(on_disk(&out), ((1..=4).collect(), Vec::new()));
        // A folder where the save's partial file goes: rounds 5 to 8 cannot be saved whole.
        let blocker = dir.path().join(".rec.om.partial");
        std::fs::create_dir(&blocker).unwrap();
        for k in 5..=15 {
            add(&mut saves, k);
        }
        let (whole, parts) = on_disk(&out);
        assert_eq!(whole, (1..=4).collect::<Vec<_>>());
        assert_eq!(parts, (5..=15).collect::<Vec<_>>());
        // The next is due at twice the failed one's rounds.
        std::fs::remove_dir(&blocker).unwrap();
        add(&mut saves, 16);
        assert_eq!(on_disk(&out), ((1..=16).collect(), Vec::new()));
        assert!(!parts_dir(&out).exists());
    }

    /// A stopped whole save leaves `out` as it was and no partial file; the rounds stay in the
    /// parts.
    #[test]
    fn a_stopped_whole_save_leaves_the_file_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("rec.om.gz");
        std::fs::write(&out, b"before").unwrap();
        let stop = AtomicBool::new(true);
        assert!(write_whole_until(&out, &round(1), &stop).is_err());
        assert_eq!(std::fs::read(&out).unwrap(), b"before");
        let names = |dir: &Path| -> Vec<String> {
            let entries = std::fs::read_dir(dir).unwrap();
            let names = entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned());
            names.collect()
        };
        assert_eq!(names(dir.path()), vec!["rec.om.gz".to_string()]);

        // A save of a large recording stopped as it starts (or done already: either way
        // nothing is half written, and every round is on disk).
        std::fs::remove_file(&out).unwrap();
        let mut saves = Saves::new(&out, false).unwrap();
        let mut all = SeriesSet::default();
        for k in 1..=3 {
            let mut r = SeriesSet::default();
            for i in 0..20_000 {
                let mut one = round(k);
                one.series[0].labels = Labels::new(vec![("gpu".into(), i.to_string())]);
                r.series.extend(one.series);
            }
            r.normalize();
            all.merge_next(&r);
            saves.after_round(&r, &all);
        }
        saves.stop();
        assert!(
            names(dir.path()).iter().all(|n| !n.ends_with(".partial")),
            "{:?}",
            names(dir.path())
        );
        assert_eq!(every_round_on_disk(&out), vec![1, 2, 3]);
    }
}
