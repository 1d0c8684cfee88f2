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
use std::process::{Command, Stdio};

use lockfile::{Error, LockGuard, LockOptions, LockReport};
use rustix::process::Pid;

use crate::args::RunArgs;
use crate::exit;
use crate::signals::{self, BlockedSignals};

pub(crate) fn run(args: RunArgs) -> i32 {
    if args.etcd.is_some() {
        return run_lease(args);
    }
    let (program, program_args) = command_line(&args);
    let job = args.job.clone().unwrap_or_else(|| job_name(&program));
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
            errln!("lockfile: {}", conflict_line(&args.lockfile, &e));
            return i32::from(args.conflict_exit_code);
        }
        Err(e) => {
            errln!("lockfile: {e}");
            return exit::CANNOT_LOCK;
        }
    };
    match run_locked(guard, &program, &program_args, &args) {
        Ok(code) => code,
        Err((code, message)) => {
            errln!("lockfile: {message}");
            code
        }
    }
}

#[cfg(feature = "etcd")]
fn run_lease(args: RunArgs) -> i32 {
    crate::lease::run(args)
}

#[cfg(not(feature = "etcd"))]
fn run_lease(_: RunArgs) -> i32 {
    errln!(
        "lockfile: --etcd needs a build with the `etcd` feature (cargo install --features etcd)"
    );
    exit::USAGE
}

/// COMMAND, or `sh -c SHELL_COMMAND`.
pub(crate) fn command_line(args: &RunArgs) -> (OsString, Vec<OsString>) {
    match &args.shell_command {
        Some(script) => ("sh".into(), vec!["-c".into(), script.into()]),
        None => (args.command[0].clone(), args.command[1..].to_vec()),
    }
}

pub(crate) fn job_name(program: &OsString) -> String {
    Path::new(program)
        .file_name()
        .unwrap_or(program)
        .to_string_lossy()
        .into_owned()
}

fn run_locked(
    mut guard: LockGuard,
    program: &OsString,
    program_args: &[OsString],
    args: &RunArgs,
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
    // We are single-threaded: no other spawn could have inherited it meanwhile.
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

/// Spawns COMMAND with the signal mask we had before blocking, and with
/// `die_with_parent`, SIGKILLed by the kernel should this process die.
/// Errors map to the shell's statuses: 127 not found, 126 not executable.
pub(crate) fn spawn(
    signals: &BlockedSignals,
    program: &OsString,
    args: &[OsString],
    env: &[(&str, OsString)],
    die_with_parent: bool,
) -> Result<Pid, (i32, String)> {
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::inherit());
    for (key, value) in env {
        cmd.env(key, value);
    }
    signals.unblock_in_child(&mut cmd);
    if die_with_parent {
        signals::die_with_parent(&mut cmd);
    }
    let child = cmd.spawn().map_err(|e| {
        let code = match e.kind() {
            io::ErrorKind::NotFound => exit::NOT_FOUND,
            _ => exit::NOT_EXECUTABLE,
        };
        (
            code,
            format!("cannot run `{}`: {e}", program.to_string_lossy()),
        )
    })?;
    // std's Child is not waited on: `supervise` reaps it with waitpid.
    Ok(Pid::from_raw(child.id() as i32).expect("a child has a positive pid"))
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
