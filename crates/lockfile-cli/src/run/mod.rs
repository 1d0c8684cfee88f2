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

use std::time::{Duration, Instant, SystemTime};

use lockfile::history::{Outcome, RunEnd};
use lockfile::{Error, LockGuard, LockOptions, OwnerRecord};

pub(crate) mod command;
pub(crate) mod keeper;
pub(crate) mod limits;
pub(crate) mod signals;
pub(crate) mod supervise;
pub(crate) mod tick;
pub(crate) mod tree;

use crate::cli::RunArgs;
use crate::exit;
use crate::monitor::Monitor;
use crate::run::command::{command_line, job_name, spawn};
use crate::run::limits::{Limit, Limits};
use crate::run::signals::BlockedSignals;
use crate::run::supervise::{Child, StopSequence};

/// Runs `args`, its pings through `P`; returns the exit status.
pub(crate) fn run(args: RunArgs) -> i32 {
    // The run's start, before any wait for the lock: what its tick is of.
    let started = Instant::now();
    // The name flock(1)'s lines and errors start with.
    let name = if args.flock_compat {
        "flock"
    } else {
        "lockfile"
    };
    let claim = match args.ticks.claim(started) {
        Ok(claim) => claim,
        Err(e) => {
            errln!("{name}: {e}");
            return exit::USAGE;
        }
    };
    if args.command.is_empty() && args.shell_command.is_none() {
        if claim.is_some() {
            errln!(
                "{name}: --once-per needs a lock file and a COMMAND: a descriptor's lock keeps no record to claim a tick in"
            );
            return exit::USAGE;
        }
        // `lockfile run N`: a descriptor of the calling shell, as flock(1) N.
        return match args.lockfile.to_str().and_then(|s| s.parse::<i32>().ok()) {
            Some(fd) => crate::flock::Descriptor {
                fd,
                shared: args.shared && !args.exclusive,
                unlock: args.unlock,
                wait: if args.nonblock {
                    Some(Duration::ZERO)
                } else {
                    args.wait
                },
                conflict: Some(args.conflict_exit_code),
                verbose: args.verbose,
            }
            .run(name),
            None => {
                errln!(
                    "{name}: COMMAND is missing: `lockfile run LOCKFILE COMMAND...`, `-c STRING`, or a descriptor number alone"
                );
                exit::USAGE
            }
        };
    }
    if args.unlock {
        errln!(
            "{name}: -u unlocks a descriptor (`lockfile run -u N`); with a file and a command it would lock nothing"
        );
        return exit::USAGE;
    }
    if args.verbose && args.monitoring.quiet {
        errln!("{name}: --quiet and --verbose contradict each other");
        return exit::USAGE;
    }
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
    opts.job(job.clone()).record_optional(true);
    match (args.watchdog, args.no_fork) {
        // COMMAND promises to beat at least this often.
        (Some(watchdog), _) => opts
            .heartbeat_interval(watchdog)
            .heartbeat_source(lockfile::record::HeartbeatSource::Command),
        // COMMAND replaces us: nobody beats, nobody marks the release.
        (None, true) => opts.release(lockfile::record::Release::Unrecorded),
        (None, false) => opts
            .heartbeat_interval(args.heartbeat)
            .heartbeat_source(lockfile::record::HeartbeatSource::Wrapper),
    };
    if let Some(limit) = args.max_runtime {
        opts.max_runtime(limit);
    }
    // The grace between SIGTERM and SIGKILL: this run's own, and the
    // promise that lets an evictor give our watchdog the first chance.
    opts.kill_after(args.kill_after);
    if let Some(silence) = args.evict_after {
        opts.evict_after(silence);
    }
    if args.shared && !args.exclusive {
        opts.shared(true);
    }
    if let Some(claim) = claim {
        if args.lockfile.is_dir() {
            errln!(
                "{name}: --once-per needs a lock file, and `{}` is a directory",
                args.lockfile.display()
            );
            return exit::USAGE;
        }
        opts.claim_tick(claim);
    }
    // `-w 0` is `-n`, as in flock(1).
    let acquired = if args.nonblock || args.wait == Some(Duration::ZERO) {
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
            if args.verbose {
                let why = match e {
                    Error::Timeout { .. } => "timeout while waiting to get lock",
                    _ => "failed to get lock",
                };
                errln!("{name}: {why}");
            }
            // flock(1) says nothing on a conflict (its --verbose line aside).
            if !args.flock_compat {
                monitor.skipped_file(&args.lockfile, &conflict_line(&args.lockfile, &e));
            }
            return i32::from(args.conflict_exit_code);
        }
        Err(Error::TickUsed {
            tick, run, claim, ..
        }) => {
            let refusal = tick::Refusal {
                tick,
                ran: Some((&run, claim.as_deref())),
            };
            return refusal.skip(&mut monitor, &job, args.conflict_exit_code);
        }
        Err(Error::TooLate { tick, .. }) => {
            let refusal = tick::Refusal { tick, ran: None };
            return refusal.skip(&mut monitor, &job, args.conflict_exit_code);
        }
        // A job name too long for a record: refused before the file was
        // touched, and a mistake on the command line.
        Err(e @ Error::RecordTooLarge { .. }) => {
            errln!("{name}: {e}");
            return exit::USAGE;
        }
        Err(e) if args.flock_compat => {
            errln!("flock: {e}");
            return flock_open_status(&e);
        }
        Err(e) => {
            errln!("lockfile: {e}");
            return exit::CANNOT_LOCK;
        }
    };
    let verbose = args.verbose.then(|| {
        format!(
            "{name}: getting lock took {:.6} seconds\n{name}: executing {}\n",
            started.elapsed().as_secs_f64(),
            program.to_string_lossy()
        )
    });
    // flock(1) prints these through C's stdio, which holds them back until
    // it exits when stdout is not a terminal (and an exec drops them): the
    // personality does the same, so that its output is flock(1)'s.
    use std::io::IsTerminal as _;
    let held_back = verbose.is_some() && args.flock_compat && !std::io::stdout().is_terminal();
    let print = |lines: &str| {
        use std::io::Write as _;
        let _ = std::io::stdout().write_all(lines.as_bytes());
    };
    if let (Some(lines), false) = (&verbose, held_back) {
        print(lines);
    }
    if args.no_fork {
        return exec_in_place(guard, &program, &program_args, name);
    }
    if let Some(claim) = &claim {
        match guard.claim() {
            Some(ours) => tick::warn_on_drift(claim, ours),
            None => {
                // A lock held without a record of ours claims nothing.
                errln!(
                    "lockfile: `{}` carries no record of ours ({}), and --once-per keeps its claim there: use a lock file of its own",
                    args.lockfile.display(),
                    guard
                        .no_record()
                        .map_or_else(String::new, |why| why.to_string())
                );
                return exit::CANNOT_LOCK;
            }
        }
    }
    if let Some(evicted) = guard.record().evicted.as_deref() {
        errln!(
            "lockfile: evicted pid {} (job {:?}, run {}) from `{}`: its heartbeat had been silent for {}",
            evicted.pid,
            evicted.job.as_deref().unwrap_or(""),
            evicted.token,
            args.lockfile.display(),
            humantime::format_duration(Duration::from_secs(evicted.silent().as_secs()))
        );
    }
    monitor.started(guard.record().token);
    let ran = run_locked(guard, &program, &program_args, &args, &mut monitor);
    if let (Some(lines), true) = (&verbose, held_back) {
        print(lines);
    }
    match ran {
        Ok(code) => code,
        Err((code, message)) => {
            errln!("{name}: {message}");
            monitor.finished(lockfile::history::Outcome::Failed, code);
            // flock(1) exits 69 (EX_UNAVAILABLE) for a command it cannot run.
            match code {
                exit::NOT_FOUND | exit::NOT_EXECUTABLE if args.flock_compat => exit::UNAVAILABLE,
                code => code,
            }
        }
    }
}

/// flock(1)'s status for a lock file it cannot open: 73 (EX_CANTCREAT) on a
/// read-only or full filesystem or a planted file, 71 (EX_OSERR) when out of descriptors or
/// memory, 66 (EX_NOINPUT) otherwise.
fn flock_open_status(e: &Error) -> i32 {
    use std::error::Error as _;
    let errno = e
        .source()
        .and_then(|s| s.downcast_ref::<io::Error>())
        .and_then(io::Error::raw_os_error);
    match (e, errno) {
        (
            Error::ReadOnlyFilesystem { .. } | Error::NoSpace { .. } | Error::PlantedFile { .. },
            _,
        ) => exit::CANNOT_LOCK,
        (_, Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM)) => exit::OS_ERROR,
        _ => exit::NO_INPUT,
    }
}

/// `-F`: COMMAND replaces this process and holds the lock itself, through
/// the descriptor it inherits. Returns only when the exec failed.
fn exec_in_place(mut guard: LockGuard, program: &OsString, args: &[OsString], name: &str) -> i32 {
    use std::os::unix::process::CommandExt;
    let inherited = match guard.share_with_children() {
        Ok(fd) => fd,
        Err(e) => {
            errln!("{name}: {e}");
            return exit::OS_ERROR;
        }
    };
    let error = std::process::Command::new(program)
        .args(args)
        .env("LOCKFILE_PATH", guard.path())
        .env("LOCKFILE_TOKEN", guard.record().token.to_string())
        .exec();
    drop(inherited);
    errln!(
        "{name}: failed to execute {}: {error}",
        program.to_string_lossy()
    );
    match error.kind() {
        _ if name == "flock" => exit::UNAVAILABLE,
        io::ErrorKind::NotFound => exit::NOT_FOUND,
        _ => exit::NOT_EXECUTABLE,
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
    if args.watchdog.is_some()
        && let Some(why) = guard.no_record()
    {
        // A watchdog is fed through the record's file: one that is not ours
        // to write cannot carry it. (Dropping the guard unlocks.)
        return Err((
            exit::CANNOT_LOCK,
            format!(
                "`{}` carries no record of ours ({why}), and --watchdog needs one: use a lock file of its own",
                guard.path().display()
            ),
        ));
    }
    // Block the forwarded signals before spawning, so that none arriving
    // between the spawn and the wait loop is lost.
    let signals = BlockedSignals::block().map_err(|e| os_error("cannot block signals", e))?;
    // Orphans of COMMAND are reparented to us, so that we can tell whether
    // any of them outlives it, and stop them at a limit.
    supervise::become_subreaper().map_err(|e| os_error("cannot become a subreaper", e))?;

    // COMMAND and everything it starts hold the lock for as long as they
    // live. From here on the guard never unlocks: not on an error, not on a
    // panic; it only closes our descriptor.
    // With -o the wrapper alone holds it, until COMMAND exits.
    let inherited = match args.close {
        true => None,
        false => Some(
            guard
                .share_with_children()
                .map_err(|e| (exit::OS_ERROR, e.to_string()))?,
        ),
    };
    let mut env = vec![
        ("LOCKFILE_PATH", guard.path().as_os_str().to_owned()),
        ("LOCKFILE_TOKEN", guard.record().token.to_string().into()),
    ];
    env.extend(tick::env(guard.claim()));
    let started_at = SystemTime::now();
    let child = spawn(&signals, program, program_args, &env, false);
    // No other thread of ours spawns: none could have inherited it meanwhile.
    drop(inherited);
    let child_pid = child?;

    let mut limits = Limits::new(&guard, args);
    let mut stop = StopSequence::new(args.kill_after);
    let first_wake = limits.next_wake();
    let mut child = Child::Own(child_pid);
    let status = supervise::supervise(&signals, &mut child, &mut stop, first_wake, |stop| {
        limits.check(&guard, stop)
    })
    .map_err(|e| os_error("cannot wait for the command", e))?;

    // Processes COMMAND left behind hold the lock with it. Under a limit the
    // limit applies to them too, so wait for them; without one they keep
    // the lock and we leave, as flock(1) does.
    let mut survivors = false;
    if (limits.any() || stop.stopping()) && supervise::has_children() {
        if !stop.stopping() {
            errln!(
                "lockfile: the command left {} background process(es) holding `{}`; its limits apply to them until they exit",
                supervise::descendants().len(),
                guard.path().display()
            );
        }
        let next = limits.next_wake();
        survivors = !supervise::supervise_leftovers(&signals, &mut stop, next, |stop| {
            limits.check(&guard, stop)
        });
    }
    let stopped_for = limits.stopped_for;

    let code = match stopped_for {
        Some(_) => exit::LIMIT,
        None => supervise::exit_code(status),
    };
    let outcome = match stopped_for {
        Some(Limit::Watchdog) => Outcome::Hung,
        Some(Limit::MaxRuntime) => Outcome::TimedOut,
        None if code == 0 => Outcome::Succeeded,
        None => Outcome::Failed,
    };
    let end = RunEnd {
        outcome,
        exit_code: status.code(),
        signal: std::os::unix::process::ExitStatusExt::signal(&status),
        started_at,
    };
    monitor.finished(outcome, code);
    if let Err(e) = guard.record_outcome(end) {
        errln!("lockfile: the command ended ({outcome}), but {e}");
    }
    let leftovers = if survivors || supervise::has_children() {
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
        let why = if survivors {
            "processes of the command survived SIGKILL (uninterruptible sleep?) and hold it"
        } else {
            "the command left background process(es) holding it"
        };
        errln!(
            "lockfile: `{}` stays locked: {why}: {} ({})",
            guard.path().display(),
            names.join(", "),
            names.len(),
        );
        // Unlocking would let the next run start beside them.
        guard.disown();
    }
    Ok(code)
}

/// One line for stderr naming who holds the lock and for how long.
fn conflict_line(path: &Path, err: &Error) -> String {
    // The kernel's view a moment later, merged with the record the error
    // read: who holds it, whatever they wrote.
    let holder = match lockfile::inspect(path) {
        Ok(report) => report.describe_holder(err.owner()),
        Err(_) => OwnerRecord::describe(err.owner()).to_string(),
    };
    let not_evicted = err
        .not_evicted()
        .map(|why| format!(" (not evicted: {why})"))
        .unwrap_or_default();
    match err {
        Error::Timeout { waited, .. } => format!(
            "gave up after waiting {} for `{}`: held by {holder}{not_evicted}",
            humantime::format_duration(std::time::Duration::from_secs(waited.as_secs())),
            path.display()
        ),
        _ => format!(
            "`{}` is held by {holder}{not_evicted}; not running",
            path.display()
        ),
    }
}
