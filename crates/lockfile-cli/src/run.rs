//! `lockfile run`: take the lock, run COMMAND, release when it ends.
//!
//! COMMAND inherits the lock, as under flock(1): the kernel holds it for as
//! long as any process holds the descriptor. So a SIGKILLed wrapper never lets
//! a second COMMAND start while the first (or anything it started) still
//! runs. Unlike flock(1), a background process that COMMAND leaves behind
//! holding the lock is named on stderr, and `inspect` names it too.

use std::ffi::OsString;
use std::io;
use std::path::Path;

use lockfile::{Error, LockGuard, LockOptions, LockReport};

use crate::args::RunArgs;
use crate::command::{command_line, job_name, spawn};
use crate::exit;
use crate::monitor::Monitor;
use crate::signals::{self, BlockedSignals};

pub(crate) fn run(args: RunArgs) -> i32 {
    let (program, program_args) = command_line(&args);
    let job = args.job.clone().unwrap_or_else(|| job_name(&program));
    let lock = args.lockfile.to_string_lossy();
    let mut monitor = match Monitor::new(&args.monitoring, &job, &lock) {
        Ok(monitor) => monitor,
        Err(e) => {
            errln!("lockfile: {e}");
            return exit::USAGE;
        }
    };
    let mut opts = LockOptions::new();
    // As flock(1) does, lock any file we may open: one whose content is not
    // ours (a script that locks itself) or that we may only read is locked
    // read-only and left byte for byte as it is.
    opts.job(job)
        .heartbeat_interval(args.heartbeat)
        .heartbeat_source(lockfile::HeartbeatSource::Wrapper)
        .record_optional(true);
    let acquired = if args.nonblock {
        opts.try_acquire(&args.lockfile)
    } else {
        if let Some(wait) = args.wait {
            opts.timeout(wait);
        }
        opts.acquire(&args.lockfile)
    };
    let guard = match acquired {
        Ok(guard) => guard,
        Err(e) if e.is_contended() => {
            monitor.skipped_file(&args.lockfile, &conflict_line(&args.lockfile, &e));
            return i32::from(args.conflict_exit_code);
        }
        Err(e) => {
            errln!("lockfile: {e}");
            return exit::CANNOT_LOCK;
        }
    };
    monitor.started(guard.record().token);
    match run_locked(guard, &program, &program_args, &args, &mut monitor) {
        Ok(code) => code,
        Err((code, message)) => {
            errln!("lockfile: {message}");
            monitor.finished(lockfile::Outcome::Failed, code);
            code
        }
    }
}

fn run_locked(
    mut guard: LockGuard,
    program: &OsString,
    program_args: &[OsString],
    args: &RunArgs,
    monitor: &mut Monitor,
) -> Result<i32, (i32, String)> {
    let os_error = |what: &str, e: io::Error| (exit::OS_ERROR, format!("{what}: {e}"));
    // Block the forwarded signals before spawning, so that none arriving
    // between the spawn and the wait loop is lost.
    let signals = BlockedSignals::block().map_err(|e| os_error("cannot block signals", e))?;
    // Orphans of COMMAND are reparented to us, so that we can tell whether
    // any of them outlives it.
    signals::become_subreaper().map_err(|e| os_error("cannot become a subreaper", e))?;

    // COMMAND and everything it starts hold the lock for as long as they
    // live. From here on the guard never unlocks: not on an error, not on a
    // panic; it only closes our descriptor.
    let inherited = guard
        .share_with_children()
        .map_err(|e| (exit::OS_ERROR, e.to_string()))?;
    let env = [
        ("LOCKFILE_PATH", guard.path().as_os_str().to_owned()),
        ("LOCKFILE_TOKEN", guard.record().token.to_string().into()),
    ];
    let child = spawn(&signals, program, program_args, &env, false);
    // No other thread of ours spawns: none could have inherited it meanwhile.
    drop(inherited);
    let child_pid = child?;

    // A file without our record is not ours to touch: no heartbeat.
    let interval = match guard.no_record() {
        None => args.heartbeat,
        Some(_) => std::time::Duration::MAX,
    };
    let status = signals::supervise(&signals, child_pid, signals::after(interval), || {
        if let Err(e) = guard.heartbeat() {
            errln!("lockfile: {e}");
        }
        signals::after(interval)
    })
    .map_err(|e| os_error("cannot wait for the command", e))?;

    let code = signals::exit_code(status);
    monitor.finished(crate::monitor::outcome_of(code), code);
    if code == 0
        && let Err(e) = guard.record_success()
    {
        errln!("lockfile: the command succeeded, but {e}");
    }
    let leftovers = if signals::has_children() {
        guard.inheritors().unwrap_or_default()
    } else {
        Vec::new()
    };
    if leftovers.is_empty() {
        if let Err(e) = guard.release() {
            errln!("lockfile: {e}");
        }
    } else {
        let names: Vec<String> = leftovers.iter().map(ToString::to_string).collect();
        errln!(
            "lockfile: `{}` stays locked: the command left {} background process(es) holding it: {}",
            guard.path().display(),
            names.len(),
            names.join(", ")
        );
        // Unlocking would let the next run start beside them.
        guard.disown();
    }
    Ok(code)
}

/// One line for stderr naming who holds the lock and for how long.
fn conflict_line(path: &Path, err: &Error) -> String {
    let report = lockfile::inspect(path).ok();
    let holder = describe_holder(err, report.as_ref());
    match err {
        Error::Timeout { waited, .. } => format!(
            "gave up after waiting {} for `{}`: held by {holder}",
            humantime::format_duration(std::time::Duration::from_secs(waited.as_secs())),
            path.display()
        ),
        _ => format!("`{}` is held by {holder}; not running", path.display()),
    }
}

fn describe_holder(err: &Error, report: Option<&LockReport>) -> String {
    let released = report.is_some_and(|r| r.released);
    let owner = err.owner().filter(|_| !released);
    let no_record = report.and_then(|r| r.no_record);
    let mut text = match (owner, no_record) {
        (Some(o), _) => o.to_string(),
        (None, Some(why)) => format!("a process that keeps no owner record there ({why})"),
        (None, None) => "a process that wrote no owner record".to_owned(),
    };
    if let Some(report) = report {
        let kernel: Vec<String> = report
            .holders
            .iter()
            .filter(|h| owner.is_none_or(|o| o.pid != h.pid))
            .map(ToString::to_string)
            .collect();
        if !kernel.is_empty() {
            text.push_str(&format!(
                " (the kernel lock is held by {})",
                kernel.join(", ")
            ));
        }
    }
    text
}
