//! Keeps a `record --scrape` recording on disk while it grows, writing in all a few times its
//! final size rather than the square of its length.
//!
//! OpenMetrics keeps each family in one block, so a recording cannot be appended to: a complete
//! file after every round meant rewriting it whole, n²/2 rounds' worth over n rounds (a day of
//! one replica at 15 s ends near 150 MB and wrote some 400 GB). Instead:
//! - `--out` is written whole after rounds 1, 2, 4, 8, … (each save at most doubles the one
//!   before), at most twice the final size in all; it always holds at least the first half of
//!   the rounds recorded (after a failed whole save, the next is tried at twice the rounds and
//!   the parts keep everything since the last one that succeeded);
//! - the rounds after its last whole save go into parts of at most [`PART_ROUNDS`] rounds in
//!   `OUT.parts/`, only the open part rewritten after each round: a crash or a `kill -9` loses
//!   at most the round in progress, and `diagnose OUT OUT.parts/*` reads everything (a part
//!   being written is a hidden `.rounds-….partial` file, which `*` leaves out);
//! - at the end `--out` is written whole and the parts are removed.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::signal::series::SeriesSet;
use crate::source::file::openmetrics;

/// Rounds in one part: each round rewrites its part, so a round costs at most this many
/// rounds' worth of writing.
pub const PART_ROUNDS: usize = 8;

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
    /// Part files written since the last whole save.
    part_files: Vec<PathBuf>,
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
            verbose,
        })
    }

    /// Saves after a round: `round` is what it added, `all` everything so far. A failed write
    /// is said on stderr and the recording goes on.
    pub fn after_round(&mut self, round: &SeriesSet, all: &SeriesSet) {
        self.rounds += 1;
        if all.series.is_empty() {
            return;
        }
        if self.rounds >= self.next_whole {
            match write_whole(&self.out, all) {
                Ok(bytes) => {
                    if self.verbose {
                        eprintln!(
                            "saved {} series, {bytes} bytes to {} (rounds 1-{}; next whole save after round {})",
                            all.series.len(),
                            self.out.display(),
                            self.rounds,
                            self.rounds * 2
                        );
                    }
                    self.next_whole = self.rounds * 2;
                    self.remove_parts();
                    return;
                }
                // The round still goes into a part below (the parts since the last whole save
                // are kept), and the whole save is tried again after twice the rounds, so a
                // full disk does not make every round a whole save.
                Err(e) => {
                    eprintln!("error: {e:#}");
                    self.next_whole = self.rounds * 2;
                }
            }
        }
        // A full part stays on disk as it is; the next round opens another.
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
                if !self.part_files.contains(&file) {
                    self.part_files.push(file.clone());
                }
                if self.verbose {
                    eprintln!(
                        "saved rounds {first}-{}, {bytes} bytes to {} (diagnose {} {}/* reads all)",
                        self.rounds,
                        file.display(),
                        self.out.display(),
                        self.parts_dir.display()
                    );
                }
            }
            Err(e) => eprintln!("error: {e:#}"),
        }
    }

    /// After `out` was written whole at the end: the parts are no longer needed.
    pub fn finish(mut self) {
        self.remove_parts();
    }

    fn remove_parts(&mut self) {
        // A part that could not be removed is kept in the list, to be tried again.
        self.part_files
            .retain(|f| std::fs::remove_file(f).is_err() && f.exists());
        // Only when empty: a directory the user put other files in stays.
        let _ = std::fs::remove_dir(&self.parts_dir);
        self.part = SeriesSet::default();
        self.part_first = None;
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
