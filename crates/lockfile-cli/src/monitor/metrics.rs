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
//!    a time more than a minute ahead), is not carried forward: its owner
//!    could mute every alert on it. The figures start anew from zero, and
//!    stderr says so once;
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
use crate::monitor::exposition::{self, Exposition, Family, Sample};

/// Every outcome, in the order the file lists them. Each is exported from
/// the first write on, at 0 until it happens, so that `rate()` and
/// `increase()` see it start.
pub(crate) const OUTCOMES: [Outcome; 6] = [
    Outcome::Succeeded,
    Outcome::Failed,
    Outcome::TimedOut,
    Outcome::Hung,
    Outcome::Evicted,
    Outcome::LeaseLost,
];

const RUNNING: Family = Family::gauge(
    "lockfile_run_running",
    "1 while COMMAND runs under the lock, 0 after it ended.",
);
const LAST_START: Family = Family::gauge(
    "lockfile_run_last_start_timestamp_seconds",
    "When the last run started (0: never).",
);
const LAST_SUCCESS: Family = Family::gauge(
    "lockfile_run_last_success_timestamp_seconds",
    "When the last successful run ended (0: never).",
);
const LAST_EXIT_CODE: Family = Family::gauge(
    "lockfile_run_last_exit_code",
    "The exit status of the last finished run: 128+N for signal N, 124 for a run stopped by a limit.",
);
const LAST_DURATION: Family = Family::gauge(
    "lockfile_run_last_duration_seconds",
    "How long the last finished run took.",
);
const CONSECUTIVE_FAILURES: Family = Family::gauge(
    "lockfile_run_consecutive_failures",
    "How many finished runs in a row have failed (0 after a success).",
);
const SKIPS: Family = Family::counter(
    "lockfile_run_skips_total",
    "Runs that did not start, by why: the lock was held, or their tick already ran (--once-per).",
);
const LAST_SKIP: Family = Family::gauge(
    "lockfile_run_last_skip_timestamp_seconds",
    "When a run was last skipped, for any reason (0: never).",
);

/// Why a run did not start, as the skip counter's `reason` label says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SkipReason {
    /// The lock (or lease) was held.
    Held,
    /// The run's tick was used up, or its lock came too late for it
    /// (`--once-per`).
    AlreadyRan,
}

impl SkipReason {
    const ALL: [SkipReason; 2] = [SkipReason::Held, SkipReason::AlreadyRan];

    fn as_str(self) -> &'static str {
        match self {
            SkipReason::Held => "held",
            SkipReason::AlreadyRan => "already_ran",
        }
    }
}
const OUTCOMES_TOTAL: Family = Family::counter(
    "lockfile_run_outcomes_total",
    "Finished runs, by how they ended.",
);

/// The largest metrics file read back. A lock's figures take about 2 KiB,
/// so ours stay far below it; a larger file is not ours, and reading it
/// whole could exhaust memory.
const READ_LIMIT: u64 = 1 << 20;

/// The longest a writer waits for the side lock. Writers hold it for one
/// read and one write of a small file; one stopped in between (SIGSTOP)
/// must not hold up a run for good.
const SIDE_LOCK_PATIENCE: Duration = Duration::from_secs(5);

/// One lock's figures, as the file keeps them.
#[derive(Clone, Debug, Default, PartialEq)]
struct Figures {
    running: bool,
    last_start: f64,
    last_success: f64,
    /// `None` until a run of this lock finished.
    last_exit_code: Option<f64>,
    last_duration: Option<f64>,
    consecutive_failures: f64,
    /// By [`SkipReason::ALL`].
    skips: [f64; 2],
    last_skip: f64,
    outcomes: [f64; OUTCOMES.len()],
}

/// Who the figures belong to: the job name and the lock.
type Key = (String, String);

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

    /// COMMAND starts now: `running` 1, and its start time.
    pub(crate) fn started(&mut self, at: SystemTime) {
        self.update(|f| {
            f.running = true;
            f.last_start = exposition::timestamp(at);
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

/// Why the figures of a metrics file are not carried forward.
#[derive(Clone, Debug, PartialEq)]
enum Distrust {
    /// Another user owns the file, and could have written anything in it.
    Owner { owner: u32, euid: u32 },
    /// Not UTF-8, which is all we write.
    NotText,
    /// A figure that no run of ours writes.
    Impossible {
        family: &'static str,
        value: f64,
        broken: Rule,
    },
}

impl std::fmt::Display for Distrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distrust::Owner { owner, euid } => {
                write!(f, "it is owned by uid {owner}, not by us (uid {euid})")
            }
            Distrust::NotText => f.write_str("it is not UTF-8 text"),
            Distrust::Impossible {
                family,
                value,
                broken,
            } => write!(f, "{family} is {value}, {broken}"),
        }
    }
}

/// What a figure we write always is. A file that breaks one was written by
/// someone else, or by hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    Finite,
    NotNegative,
    /// Counts and exit codes.
    Whole,
    /// Timestamps: written at the moment they name, so one later than now
    /// (beyond a clock's step) would hold an alert on them off until then.
    NotInTheFuture,
}

/// How far ahead of our clock a timestamp may be, for a clock stepped back
/// a little between two runs.
const FUTURE_SLACK: f64 = 60.0;

impl Rule {
    fn holds(self, value: f64, now: f64) -> bool {
        match self {
            Rule::Finite => value.is_finite(),
            Rule::NotNegative => value >= 0.0,
            Rule::Whole => value.fract() == 0.0,
            Rule::NotInTheFuture => value <= now + FUTURE_SLACK,
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Rule::Finite => "not a finite number",
            Rule::NotNegative => "below zero",
            Rule::Whole => "not a whole number",
            Rule::NotInTheFuture => "more than 60 s in the future",
        })
    }
}

impl Figures {
    /// The first figure that breaks a [`Rule`], if any; `now` is the time
    /// as [`exposition::timestamp`] gives it.
    fn impossible(&self, now: f64) -> Option<Distrust> {
        use Rule::{Finite, NotInTheFuture, NotNegative, Whole};
        const COUNT: &[Rule] = &[Finite, NotNegative, Whole];
        const TIME: &[Rule] = &[Finite, NotNegative, NotInTheFuture];
        let mut figures = vec![
            (LAST_START.name, self.last_start, TIME),
            (LAST_SUCCESS.name, self.last_success, TIME),
            (LAST_SKIP.name, self.last_skip, TIME),
            (CONSECUTIVE_FAILURES.name, self.consecutive_failures, COUNT),
        ];
        figures.extend(self.skips.iter().map(|&v| (SKIPS.name, v, COUNT)));
        figures.extend(self.last_exit_code.map(|v| (LAST_EXIT_CODE.name, v, COUNT)));
        figures.extend(
            self.last_duration
                .map(|v| (LAST_DURATION.name, v, &[Finite, NotNegative][..])),
        );
        figures.extend(
            self.outcomes
                .iter()
                .map(|&v| (OUTCOMES_TOTAL.name, v, COUNT)),
        );
        figures.into_iter().find_map(|(family, value, rules)| {
            let broken = *rules.iter().find(|r| !r.holds(value, now))?;
            Some(Distrust::Impossible {
                family,
                value,
                broken,
            })
        })
    }
}

/// The figures of every (job, lock) in `samples`, in the order they first
/// appear. Samples of other families, or without both labels, are left out.
fn read_figures(samples: &[Sample]) -> Vec<(Key, Figures)> {
    let mut all: Vec<(Key, Figures)> = Vec::new();
    for sample in samples {
        let (Some(job), Some(lock)) = (sample.label("lockfile_job"), sample.label("lock")) else {
            continue;
        };
        let i = match all.iter().position(|((j, l), _)| j == job && l == lock) {
            Some(i) => i,
            None => {
                all.push(((job.to_owned(), lock.to_owned()), Figures::default()));
                all.len() - 1
            }
        };
        let f = &mut all[i].1;
        let v = sample.value;
        match sample.name.as_str() {
            n if n == RUNNING.name => f.running = v != 0.0,
            n if n == LAST_START.name => f.last_start = v,
            n if n == LAST_SUCCESS.name => f.last_success = v,
            n if n == LAST_EXIT_CODE.name => f.last_exit_code = Some(v),
            n if n == LAST_DURATION.name => f.last_duration = Some(v),
            n if n == CONSECUTIVE_FAILURES.name => f.consecutive_failures = v,
            // Files written before the reason existed counted only a
            // held lock.
            n if n == SKIPS.name => {
                let reason = SkipReason::ALL
                    .into_iter()
                    .find(|r| sample.label("reason") == Some(r.as_str()))
                    .unwrap_or(SkipReason::Held);
                f.skips[reason as usize] = v;
            }
            n if n == LAST_SKIP.name => f.last_skip = v,
            n if n == OUTCOMES_TOTAL.name => {
                if let Some(o) = OUTCOMES
                    .iter()
                    .position(|o| Some(o.as_str()) == sample.label("outcome"))
                {
                    f.outcomes[o] = v;
                }
            }
            _ => {}
        }
    }
    all
}

/// The whole file: each family once, with one sample per (job, lock).
fn render(all: &[(Key, Figures)]) -> String {
    let mut e = Exposition::default();
    let mut family = |family: &Family, value: &dyn Fn(&Figures) -> Option<f64>| {
        let values: Vec<(&Key, f64)> = all
            .iter()
            .filter_map(|(k, f)| value(f).map(|v| (k, v)))
            .collect();
        if values.is_empty() {
            return;
        }
        e.family(family);
        for ((job, lock), v) in values {
            e.sample(family.name, &[("lockfile_job", job), ("lock", lock)], v);
        }
    };
    family(&RUNNING, &|f| Some(if f.running { 1.0 } else { 0.0 }));
    family(&LAST_START, &|f| Some(f.last_start));
    family(&LAST_SUCCESS, &|f| Some(f.last_success));
    family(&LAST_EXIT_CODE, &|f| f.last_exit_code);
    family(&LAST_DURATION, &|f| f.last_duration);
    family(&CONSECUTIVE_FAILURES, &|f| Some(f.consecutive_failures));
    family(&LAST_SKIP, &|f| Some(f.last_skip));
    e.family(&SKIPS);
    for ((job, lock), f) in all {
        for (reason, count) in SkipReason::ALL.iter().zip(f.skips) {
            e.sample(
                SKIPS.name,
                &[
                    ("lockfile_job", job),
                    ("lock", lock),
                    ("reason", reason.as_str()),
                ],
                count,
            );
        }
    }
    e.family(&OUTCOMES_TOTAL);
    for ((job, lock), f) in all {
        for (outcome, count) in OUTCOMES.iter().zip(f.outcomes) {
            e.sample(
                OUTCOMES_TOTAL.name,
                &[
                    ("lockfile_job", job),
                    ("lock", lock),
                    ("outcome", outcome.as_str()),
                ],
                count,
            );
        }
    }
    e.into_string()
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

    #[test]
    fn impossible_figures_name_the_family_and_the_broken_rule() {
        let now = 1_700_000_000.0;
        let fine = Figures {
            last_success: now + FUTURE_SLACK,
            last_exit_code: Some(143.0),
            last_duration: Some(0.5),
            consecutive_failures: 3.0,
            ..Figures::default()
        };
        assert_eq!(fine.impossible(now), None);
        let broken = |f: Figures| match f.impossible(now) {
            Some(Distrust::Impossible { family, broken, .. }) => (family, broken),
            other => panic!("{f:?}: {other:?}"),
        };
        let failures = CONSECUTIVE_FAILURES.name;
        let with = |change: &dyn Fn(&mut Figures)| {
            let mut f = fine.clone();
            change(&mut f);
            f
        };
        assert_eq!(
            broken(with(&|f| f.consecutive_failures = -1e6)),
            (failures, Rule::NotNegative)
        );
        assert_eq!(
            broken(with(&|f| f.consecutive_failures = 0.5)),
            (failures, Rule::Whole)
        );
        assert_eq!(
            broken(with(&|f| f.skips[1] = f64::INFINITY)),
            (SKIPS.name, Rule::Finite)
        );
        assert_eq!(
            broken(with(&|f| f.outcomes[2] = f64::NAN)),
            (OUTCOMES_TOTAL.name, Rule::Finite)
        );
        assert_eq!(
            broken(with(&|f| f.last_success = now + FUTURE_SLACK + 1.0)),
            (LAST_SUCCESS.name, Rule::NotInTheFuture)
        );
        assert_eq!(
            broken(with(&|f| f.last_duration = Some(-1.0))),
            (LAST_DURATION.name, Rule::NotNegative)
        );
        let why = with(&|f| f.consecutive_failures = -1e6)
            .impossible(now)
            .unwrap();
        assert_eq!(
            why.to_string(),
            "lockfile_run_consecutive_failures is -1000000, below zero"
        );
    }

    #[test]
    fn figures_survive_a_render_and_a_read() {
        let mut f = Figures {
            running: true,
            last_start: 1_700_000_000.5,
            last_success: 1_699_999_000.0,
            last_exit_code: Some(3.0),
            last_duration: Some(0.125),
            consecutive_failures: 2.0,
            skips: [7.0, 2.0],
            last_skip: 1_700_000_001.0,
            ..Figures::default()
        };
        f.outcomes[1] = 2.0;
        f.outcomes[5] = 1.0;
        let all = vec![
            (("sh".to_owned(), "/a \"b\"\n.lock".to_owned()), f),
            (("sh".to_owned(), "/c.lock".to_owned()), Figures::default()),
        ];
        let text = render(&all);
        assert_eq!(read_figures(&exposition::parse(&text)), all);
        // Each family once, even with two locks in the file.
        assert_eq!(text.matches("# TYPE lockfile_run_running ").count(), 1);
        // A lock that never finished a run has no exit code yet.
        assert_eq!(text.matches("lockfile_run_last_exit_code{").count(), 1);
    }
}
