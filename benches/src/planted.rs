//! What others can make a scan cost: a directory of records that name live
//! processes which do not hold the locks, each process with many open
//! descriptors, scanned against a directory of ordinary released records.
//! `inspect_dir` looks again at every such file (the table does not list
//! its lock, and its owner lives), so the question is what the second look
//! costs, and whether it grows with the descriptors of the processes named.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use lockfile::{LockGuard, LockState};

pub(crate) const ORDINARY: &str = "inspect_dir of ordinary released records";
pub(crate) const ONE_PROCESS: &str = "inspect_dir of records naming one live process";
pub(crate) const MANY_PROCESSES: &str = "inspect_dir of records naming as many live processes";

/// Extra figures: how the rows were made.
pub(crate) const ONE_FDS: &str = "planted|one process's descriptors";
pub(crate) const PLANTERS: &str = "planted|processes";
pub(crate) const MANY_FDS: &str = "planted|descriptors of each";

/// The name a row's timings are recorded under: its variant, with the
/// table quiet or crowded.
pub(crate) fn key(which: &str, crowded: bool) -> String {
    format!("{which}|{}", if crowded { "crowded" } else { "quiet" })
}

/// The fixed part of the target: a planted scan may take 3× the ordinary
/// one plus this.
pub(crate) const ALLOWANCE_SECONDS: f64 = 0.25;

pub(crate) fn allowance_key(key: &str) -> String {
    format!("allowance|{key}")
}

fn name(i: usize) -> String {
    format!("job-{i:05}.lock")
}

/// A directory of `files` lock files whose records name live processes
/// that do not hold them, spread over `processes` processes, each with
/// `descriptors` open descriptors. With no process, the records are
/// ordinary released ones.
#[derive(Debug)]
pub(crate) struct PlantedDir {
    pub(crate) dir: PathBuf,
    pub(crate) files: usize,
    planters: Vec<Child>,
}

impl PlantedDir {
    pub(crate) fn ordinary(dir: PathBuf, files: usize) -> Result<PlantedDir> {
        std::fs::create_dir_all(&dir)?;
        for i in 0..files {
            LockGuard::try_acquire(dir.join(name(i)))?.release()?;
        }
        Ok(PlantedDir {
            dir,
            files,
            planters: Vec::new(),
        })
    }

    pub(crate) fn planted(
        exe: &Path,
        dir: PathBuf,
        files: usize,
        processes: usize,
        descriptors: usize,
    ) -> Result<PlantedDir> {
        std::fs::create_dir_all(&dir)?;
        let per = files.div_ceil(processes.max(1));
        let mut planted = PlantedDir {
            dir,
            files,
            planters: Vec::new(),
        };
        // Started together, then waited for: each spends most of its start
        // opening descriptors.
        let mut first = 0;
        while first < files {
            let count = per.min(files - first);
            let child = Command::new(exe)
                .arg("--child")
                .arg("planter")
                .arg(&planted.dir)
                .arg(first.to_string())
                .arg(count.to_string())
                .arg(descriptors.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .context("cannot start a process that plants records")?;
            planted.planters.push(child);
            first += count;
        }
        for child in &mut planted.planters {
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
            if line.trim() != "ready" {
                bail!("a planting child answered {line:?}");
            }
        }
        Ok(planted)
    }
}

impl Drop for PlantedDir {
    fn drop(&mut self) {
        // Closing its stdin tells a planter to exit.
        for child in &mut self.planters {
            drop(child.stdin.take());
        }
        for child in &mut self.planters {
            let _ = child.wait();
        }
    }
}

/// A planting child: opens `descriptors` descriptors (copies of one, which
/// cost a walk as much as any), writes its own record into `count` files
/// from `first` on and lets their locks go without marking the records
/// released, then says so and waits until its stdin closes.
pub(crate) fn planter_main(
    dir: PathBuf,
    first: usize,
    count: usize,
    descriptors: usize,
) -> Result<()> {
    raise_descriptor_limit()?;
    let null = std::fs::File::open("/dev/null")?;
    let mut copies = Vec::with_capacity(descriptors);
    for _ in 0..descriptors {
        copies.push(null.try_clone().context("cannot open another descriptor")?);
    }
    for i in first..first + count {
        LockGuard::try_acquire(dir.join(name(i)))?.disown();
    }
    println!("ready");
    std::io::stdout().flush()?;
    let mut rest = String::new();
    let _ = std::io::stdin().read_line(&mut rest);
    drop(copies);
    Ok(())
}

/// Lifts the soft limit on open descriptors to the hard one.
fn raise_descriptor_limit() -> Result<()> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write a live local.
    unsafe {
        crate::sys::check(
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0,
            "getrlimit",
        )?;
        limit.rlim_cur = limit.rlim_max;
        crate::sys::check(
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0,
            "setrlimit",
        )?;
    }
    Ok(())
}

/// The most descriptors a child may open here, short of the few it needs
/// besides.
pub(crate) fn descriptor_limit() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes a live local.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    if ok {
        usize::try_from(limit.rlim_max)
            .unwrap_or(usize::MAX)
            .saturating_sub(64)
    } else {
        1_000
    }
}

/// One scan of `planted`, in seconds; checked so that a broken scan is never
/// timed: every file is `stale` (an ordinary one `free`), or `undecided`
/// when the scan's walking budget ran out.
pub(crate) fn scan_seconds(planted: &PlantedDir) -> Result<(f64, usize)> {
    let start = Instant::now();
    let reports = lockfile::inspect_dir(&planted.dir)?;
    let seconds = start.elapsed().as_secs_f64();
    let want = if planted.planters.is_empty() {
        LockState::Free
    } else {
        LockState::Stale
    };
    let mut undecided = 0;
    for report in &reports {
        let report = report.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
        match report.state {
            LockState::Undecided => undecided += 1,
            state if state == want => {}
            state => bail!("{} is {state}, expected {want}", report.path.display()),
        }
    }
    if reports.len() != planted.files {
        bail!("{} reports for {} files", reports.len(), planted.files);
    }
    Ok((seconds, undecided))
}

/// The files of the planted scans: as many as the figure the project holds
/// itself to names.
pub(crate) const PLANTED_FILES: usize = 1_500;
/// The descriptors of the one process all the records of a row name.
pub(crate) const ONE_PROCESS_DESCRIPTORS: usize = 19_000;
