//! A lock file as a run's hold: the kernel's flock, which COMMAND inherits
//! as under flock(1), so that it holds for as long as any process holds the
//! descriptor, and a SIGKILLed wrapper never lets a second COMMAND start
//! while the first (or anything it started) still runs. Unlike flock(1), a
//! background process that COMMAND leaves behind holding the lock is named
//! on stderr, and `inspect` names it too.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use lockfile::history::RunEnd;
use lockfile::tick::{Claim, TickClaim};
use lockfile::{Error, LockGuard, LockOptions, OwnerRecord};

use crate::cli::RunArgs;
use crate::exit;
use crate::monitor::Monitor;
use crate::run::command::{self, command_line};
use crate::run::hold::{Hold, NotHeld, Released};
use crate::run::signals::BlockedSignals;
use crate::run::supervise::{self, Child, StopSequence, Wake};
use crate::run::tick;

/// A lock file held by a run.
pub(crate) struct FileHold {
    guard: LockGuard,
    /// COMMAND inherits the lock (all but `-o`).
    inherit: bool,
    /// The wrapper's heartbeat interval, when it keeps one.
    heartbeat: Option<Duration>,
    /// `--watchdog`: COMMAND beats on the lock file.
    watchdog: bool,
    /// flock(1)'s `--verbose` lines when they wait for the exit (see
    /// [`acquire`]).
    held_back: Option<String>,
}

/// Takes the lock `args` ask for, or says why not and returns the status.
/// With `-F`, execs COMMAND in its place and returns only if that failed.
pub(crate) fn acquire(
    args: &RunArgs,
    job: &str,
    claim: Option<TickClaim>,
    monitor: &mut Monitor,
    name: &str,
) -> Result<Box<dyn Hold>, NotHeld> {
    let started = Instant::now();
    let mut opts = LockOptions::new();
    // As flock(1) does, lock any file we may open: one whose content is not
    // ours (a script that locks itself) or that we may only read is locked
    // read-only and left byte for byte as it is.
    opts.job(job).record_optional(true);
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
    if args.slots.is_some() && args.lockfile.is_dir() {
        errln!(
            "{name}: --slots needs a lock file, and `{}` is a directory",
            crate::term::path(&args.lockfile)
        );
        return Err(exit::USAGE);
    }
    let claimed = claim.is_some();
    if let Some(claim) = claim {
        if args.lockfile.is_dir() {
            errln!(
                "{name}: --once-per needs a lock file, and `{}` is a directory",
                crate::term::path(&args.lockfile)
            );
            return Err(exit::USAGE);
        }
        opts.claim_tick(claim);
    }
    // `-w 0` is `-n`, as in flock(1).
    let acquired = match (
        args.nonblock || args.wait == Some(Duration::ZERO),
        args.slots,
    ) {
        (true, None) => opts.try_acquire(&args.lockfile),
        (true, Some(slots)) => opts.try_acquire_slot(&args.lockfile, slots),
        (false, slots) => {
            if let Some(wait) = args.wait {
                opts.timeout(wait);
            }
            match slots {
                None => opts.acquire(&args.lockfile),
                Some(slots) => opts.acquire_slot(&args.lockfile, slots),
            }
        }
    };
    let guard = acquired.map_err(|e| refused(e, args, job, monitor, name))?;
    let verbose = args.verbose.then(|| {
        let (program, _) = command_line(args);
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
    let (now, held_back) = match held_back {
        true => (None, verbose),
        false => (verbose, None),
    };
    if let Some(lines) = now {
        print(&lines);
    }
    if args.no_fork {
        let (program, program_args) = command_line(args);
        return Err(exec_in_place(guard, &program, &program_args, name));
    }
    if claimed && guard.claim().is_none() {
        // A lock held without a record of ours claims nothing.
        errln!(
            "lockfile: `{}` carries no record of ours ({}), and --once-per keeps its claim there: use a lock file of its own",
            crate::term::path(&args.lockfile),
            guard
                .no_record()
                .map_or_else(String::new, |why| why.to_string())
        );
        return Err(exit::CANNOT_LOCK);
    }
    if args.watchdog.is_some()
        && let Some(why) = guard.no_record()
    {
        // A watchdog is fed through the record's file: one that is not ours
        // to write cannot carry it. (Dropping the guard unlocks.)
        errln!(
            "{name}: `{}` carries no record of ours ({why}), and --watchdog needs one: use a lock file of its own",
            crate::term::path(guard.path())
        );
        return Err(exit::CANNOT_LOCK);
    }
    if let Some(evicted) = guard.record().evicted.as_deref() {
        errln!(
            "lockfile: evicted pid {} (job {}, run {}) from `{}`: its heartbeat had been silent for {}",
            evicted.pid,
            lockfile::text::quoted(evicted.job.as_deref().unwrap_or("")),
            evicted.token,
            crate::term::path(&args.lockfile),
            humantime::format_duration(Duration::from_secs(evicted.silent().as_secs()))
        );
    }
    let heartbeat = match (args.watchdog, guard.no_record()) {
        (None, None) => Some(args.heartbeat),
        _ => None,
    };
    Ok(Box::new(FileHold {
        guard,
        inherit: !args.close,
        heartbeat,
        watchdog: args.watchdog.is_some(),
        held_back,
    }))
}

/// Says why the lock was not taken; returns the status to exit with.
fn refused(e: Error, args: &RunArgs, job: &str, monitor: &mut Monitor, name: &str) -> NotHeld {
    match e {
        e if e.is_contended() => {
            if args.verbose {
                let why = match e {
                    Error::Timeout { .. } => "timeout while waiting to get lock",
                    _ => "failed to get lock",
                };
                errln!("{name}: {why}");
            }
            // flock(1) says nothing on a conflict (its --verbose line aside).
            if !args.flock_compat {
                let line = conflict_line(&args.lockfile, &e);
                match args.slots {
                    None => monitor.skipped_file(&args.lockfile, &line),
                    Some(_) => monitor.skipped_slots(&args.lockfile, &line),
                }
            }
            i32::from(args.conflict_exit_code)
        }
        Error::TickUsed {
            tick, run, claim, ..
        } => {
            let ran = Some((run.as_ref(), claim.as_deref()));
            tick::Refusal { tick, ran }.skip(monitor, job, args.conflict_exit_code)
        }
        Error::TooLate { tick, .. } => {
            let refusal = tick::Refusal { tick, ran: None };
            refusal.skip(monitor, job, args.conflict_exit_code)
        }
        // A job name too long for a record: refused before the file was
        // touched, and a mistake on the command line.
        e @ Error::RecordTooLarge { .. } => {
            errln!("{name}: {e}");
            exit::USAGE
        }
        e if args.flock_compat => {
            errln!("flock: {e}");
            flock_open_status(&e)
        }
        e => {
            errln!("lockfile: {e}");
            exit::CANNOT_LOCK
        }
    }
}

impl Hold for FileHold {
    fn record(&self) -> &OwnerRecord {
        self.guard.record()
    }

    fn claim(&self) -> Option<&Claim> {
        self.guard.claim()
    }

    fn label(&self) -> String {
        crate::term::path(self.guard.path())
    }

    fn env(&self) -> Vec<(&'static str, OsString)> {
        let path = self.guard.path().as_os_str().to_owned();
        let mut env = vec![("LOCKFILE_PATH", path.clone())];
        if let Some(slot) = self.guard.slot() {
            env.push(("LOCKFILE_SLOT", slot.index.to_string().into()));
        }
        if self.watchdog {
            env.push(("LOCKFILE_BEAT", path));
        }
        env
    }

    fn spawn(
        &mut self,
        signals: &mut BlockedSignals,
        program: &OsString,
        args: &[OsString],
        env: &[(&str, OsString)],
    ) -> Result<Child, (i32, String)> {
        // COMMAND and everything it starts hold the lock for as long as they
        // live. From here on the guard never unlocks: not on an error, not
        // on a panic; it only closes our descriptor. With -o the wrapper
        // alone holds it, until COMMAND exits.
        let inherited = match self.inherit {
            true => Some(
                self.guard
                    .share_with_children()
                    .map_err(|e| (exit::OS_ERROR, e.to_string()))?,
            ),
            false => None,
        };
        let child = command::spawn(signals, program, args, env, false);
        // No other thread of ours spawns: none could have inherited it
        // meanwhile.
        drop(inherited);
        Ok(Child::Own(child?))
    }

    fn heartbeat_every(&self) -> Option<Duration> {
        self.heartbeat
    }

    fn heartbeat(&self) {
        if let Err(e) = self.guard.heartbeat() {
            errln!("lockfile: {e}");
        }
    }

    fn beaten(&self) -> Option<SystemTime> {
        self.guard.modified().ok()
    }

    fn watch(&mut self, _stop: &StopSequence, _now: Instant) -> Wake {
        Wake::never()
    }

    fn keeps_leftovers(&self, limited: bool, count: usize) -> Option<String> {
        // Processes COMMAND left behind hold the lock with it. Under a limit
        // the limit applies to them too, so they are waited for; without
        // one they keep the lock and we leave, as flock(1) does.
        limited.then(|| {
            format!(
                "the command left {count} background process(es) holding `{}`; its limits apply to them until they exit",
                crate::term::path(self.guard.path())
            )
        })
    }

    fn lost(&self) -> bool {
        false
    }

    fn finish(self: Box<Self>, end: RunEnd, survivors: bool) -> Released {
        let FileHold {
            mut guard,
            held_back,
            ..
        } = *self;
        if let Err(e) = guard.record_outcome(end) {
            errln!("lockfile: the command ended ({}), but {e}", end.outcome);
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
                crate::term::path(guard.path()),
                names.join(", "),
                names.len(),
            );
            // Unlocking would let the next run start beside them.
            guard.disown();
        }
        if let Some(lines) = held_back {
            print(&lines);
        }
        Released::Done
    }
}

/// Our own text on stdout, where flock(1) prints its `--verbose` lines.
fn print(lines: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().write_all(lines.as_bytes());
}

/// flock(1)'s status for a lock file it cannot open: 73 (EX_CANTCREAT) on a
/// read-only or full filesystem or a planted file, 71 (EX_OSERR) when out of
/// descriptors or memory, 66 (EX_NOINPUT) otherwise.
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
    // The holder's words come escaped and quoted from the library's
    // messages; the path is escaped here, from its bytes.
    let path = crate::term::path(path);
    match err {
        // It names every slot's holder itself.
        Error::SlotsHeld { .. } => format!("{err}; not running"),
        Error::Timeout { waited, .. } => format!(
            "gave up after waiting {} for `{path}`: held by {holder}{not_evicted}",
            humantime::format_duration(std::time::Duration::from_secs(waited.as_secs())),
        ),
        _ => format!("`{path}` is held by {holder}{not_evicted}; not running"),
    }
}
