//! `lockfile run --metrics-dir DIR`: the metrics of each run, in a file for
//! node_exporter's textfile collector.
//!
//! The file is `DIR/lockfile-<job>.prom`, `<job>` being the job name with
//! every character outside `[A-Za-z0-9_.-]` replaced by `_`. Every sample
//! has the labels `lockfile_job` (the job name as given) and `lock` (the
//! lock's path, or the lease's name), so several locks under one job share
//! the file, and each writer replaces only its own lock's samples.
//!
//! The protocol for a write, by the holder or by a skipper alike:
//! 1. take an exclusive flock(2) on the side file `DIR/.lockfile-<job>.prom.lck`
//!    (not `*.prom`, which the collector would read, nor `*.lock`, which
//!    `inspect DIR` and `reap DIR` would take for a job's lock), so that
//!    read-modify-write cycles never interleave and no update is lost;
//! 2. read the samples of the current file, if any; a file that another
//!    user owns, or whose figures no run of ours writes (a count below zero,
//!    a time more than a minute ahead, a tick more than half its period
//!    ahead), is not carried forward: its owner could mute every alert on
//!    it. The figures start anew from zero, and stderr says so once;
//! 3. change this lock's figures only: counters go on from the values read,
//!    which is how they survive from run to run;
//! 4. write the whole file to `DIR/.lockfile-<job>.prom.tmp` and rename it
//!    over the old one: a reader (the collector) sees the old file or the
//!    new one, never a part, and never no file;
//! 5. unlock (closing the side file does it, whatever happens).
//!
//! Metrics are best effort: a write that fails is reported once on stderr,
//! and never changes the run's exit status.
//!
//! DIR may be shared (a textfile directory that several users write), so
//! any of the three names may have been planted. Each is opened as
//! [`crate::files`] does it: no symlink followed, no FIFO waited on, regular
//! files only, and at most [`READ_LIMIT`] bytes read; anything else fails
//! the write, and the name is left as it was.
//!
//! A wrapper that is SIGKILLed leaves `lockfile_run_running 1` behind;
//! nothing can prevent that. The next run of the same lock writes it anew,
//! and `lockfile inspect --format prometheus` tells the lock's truth at any
//! moment.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use lockfile::history::Outcome;

use crate::files;
use crate::monitor::exposition;
use crate::monitor::run_figures::{Distrust, Figures, Key, read_figures, render};
pub(crate) use crate::monitor::run_figures::{OUTCOMES, SkipReason};

/// The largest metrics file read back. A lock's figures take about 2 KiB,
/// so ours stay far below it; a larger file is not ours, and reading it
/// whole could exhaust memory.
const READ_LIMIT: u64 = 1 << 20;

/// The longest a writer waits for the side lock. Writers hold it for one
/// read and one write of a small file; one stopped in between (SIGSTOP)
/// must not hold up a run for good.
const SIDE_LOCK_PATIENCE: Duration = Duration::from_secs(5);

/// Writes the run metrics of one lock under one job.
#[derive(Debug)]
pub(crate) struct MetricsSink {
    file: PathBuf,
    side_lock: PathBuf,
    tmp: PathBuf,
    job: String,
    lock: String,
    /// Whether a failed write was reported already: once is enough.
    reported: bool,
    /// Whether figures not carried forward were reported already.
    distrust_reported: bool,
}

impl MetricsSink {
    /// The sink for `lock` (a lock file's path, or a lease's name) under
    /// `job`, writing into `dir`. Nothing is touched before the first write.
    pub(crate) fn new(dir: &Path, job: &str, lock: &str) -> MetricsSink {
        let name = format!("lockfile-{}.prom", sanitise(job));
        MetricsSink {
            file: dir.join(&name),
            side_lock: dir.join(format!(".{name}.lck")),
            tmp: dir.join(format!(".{name}.tmp")),
            job: job.to_owned(),
            lock: lock.to_owned(),
            reported: false,
            distrust_reported: false,
        }
    }

    /// COMMAND starts now: `running` 1, its start time, and for a
    /// `--once-per` run the tick it claimed and the ticks' period.
    pub(crate) fn started(&mut self, at: SystemTime, tick: Option<(SystemTime, Duration)>) {
        self.update(|f| {
            f.running = true;
            f.last_start = exposition::timestamp(at);
            if let Some((tick, period)) = tick {
                f.last_tick = Some(exposition::timestamp(tick));
                f.tick_period = Some(period.as_secs_f64());
            }
        });
    }

    /// COMMAND ended with `outcome` and the wrapper's `exit_code`, after
    /// `duration`; `success_at` is when, for a success.
    pub(crate) fn finished(
        &mut self,
        outcome: Outcome,
        exit_code: i32,
        duration: Duration,
        success_at: Option<SystemTime>,
    ) {
        self.update(|f| {
            f.running = false;
            f.last_exit_code = Some(f64::from(exit_code));
            f.last_duration = Some(duration.as_secs_f64());
            if let Some(i) = OUTCOMES.iter().position(|&o| o == outcome) {
                f.outcomes[i] += 1.0;
            }
            if outcome.is_failure() {
                f.consecutive_failures += 1.0;
            } else {
                f.consecutive_failures = 0.0;
            }
            if let Some(t) = success_at {
                f.last_success = exposition::timestamp(t);
            }
        });
    }

    /// A run was skipped at `at`, for `reason`. The holder's figures stay as
    /// they are.
    pub(crate) fn skipped(&mut self, at: SystemTime, reason: SkipReason) {
        self.update(|f| {
            f.skips[reason as usize] += 1.0;
            f.last_skip = exposition::timestamp(at);
        });
    }

    fn update(&mut self, change: impl FnOnce(&mut Figures)) {
        if let Err(e) = self.try_update(change)
            && !std::mem::replace(&mut self.reported, true)
        {
            errln!(
                "lockfile: cannot write the run's metrics to `{}`: {e}",
                crate::term::path(&self.file)
            );
        }
    }

    fn try_update(&mut self, change: impl FnOnce(&mut Figures)) -> io::Result<()> {
        let _side = lock_side_file(&self.side_lock)?;
        let mut all = match read_previous(&self.file)? {
            Ok(all) => all,
            Err(why) => {
                if !std::mem::replace(&mut self.distrust_reported, true) {
                    errln!(
                        "lockfile: not carrying forward the metrics in `{}`: {why}; starting anew from zero",
                        crate::term::path(&self.file)
                    );
                }
                Vec::new()
            }
        };
        let key = (self.job.clone(), self.lock.clone());
        let mine = match all.iter().position(|(k, _)| *k == key) {
            Some(i) => &mut all[i].1,
            None => {
                all.push((key, Figures::default()));
                &mut all.last_mut().expect("just pushed").1
            }
        };
        change(mine);
        crate::atomic::write_atomically(&self.file, &self.tmp, render(&all).as_bytes())
        // `_side` closes here, after the rename: the next writer reads our file.
    }
}

/// `job` with every character outside `[A-Za-z0-9_.-]` replaced by `_`.
pub(crate) fn sanitise(job: &str) -> String {
    job.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Takes the side lock that serialises writers, waiting at most
/// [`SIDE_LOCK_PATIENCE`]. Read-only is enough for flock(2), and lets a
/// writer lock a side file that another user created.
fn lock_side_file(path: &Path) -> io::Result<File> {
    let named = |what: &str, e: io::Error| {
        io::Error::new(
            e.kind(),
            format!("cannot {what} `{}`: {e}", crate::term::path(path)),
        )
    };
    let file = files::open_regular(path, OpenOptions::new().read(true), "open").or_else(|e| {
        if !e.is_not_found() {
            return Err(e);
        }
        files::open_regular(
            path,
            OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .mode(0o644),
            "create",
        )
    })?;
    let deadline = Instant::now() + SIDE_LOCK_PATIENCE;
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "`{}` stayed locked by another writer for {}s",
                        crate::term::path(path),
                        SIDE_LOCK_PATIENCE.as_secs()
                    ),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(named("lock", e)),
        }
    }
}

/// The figures in the metrics file `path` (none if there is no file), or
/// why they are not to be carried forward.
///
/// # Errors
///
/// A file that cannot be read at all: see [`files::read_bounded`].
fn read_previous(path: &Path) -> io::Result<Result<Vec<(Key, Figures)>, Distrust>> {
    let Some((bytes, meta)) = files::read_bounded(path, READ_LIMIT)? else {
        return Ok(Ok(Vec::new()));
    };
    // Its owner can write any figures into it: a success far in the future,
    // failures below zero, and the alerts on them stay silent.
    let euid = rustix::process::geteuid().as_raw();
    if meta.uid() != euid {
        return Ok(Err(Distrust::Owner {
            owner: meta.uid(),
            euid,
        }));
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return Ok(Err(Distrust::NotText));
    };
    let all = read_figures(&exposition::parse(&text));
    let now = exposition::timestamp(SystemTime::now());
    Ok(match all.iter().find_map(|(_, f)| f.impossible(now)) {
        Some(why) => Err(why),
        None => Ok(all),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_are_sanitised_for_the_file_name_only() {
        assert_eq!(sanitise("nightly-backup_2.x"), "nightly-backup_2.x");
        assert_eq!(sanitise("a b/c\"d\né"), "a_b_c_d__");
        let sink = MetricsSink::new(Path::new("/m"), "a b", "/l");
        assert_eq!(sink.file, Path::new("/m/lockfile-a_b.prom"));
        assert_eq!(sink.side_lock, Path::new("/m/.lockfile-a_b.prom.lck"));
        assert!(!sink.tmp.to_string_lossy().ends_with(".prom"));
    }
}
