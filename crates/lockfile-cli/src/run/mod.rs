//! `lockfile run`: take the hold (a lock file, or a lease of any engine),
//! run COMMAND under it, release when it ends. One pipeline for every hold,
//! read top to bottom in [`run`]: validate, monitor, acquire and claim,
//! spawn, supervise, finish, release.
//!
//! Where each step lives:
//! - `hold/`: what a run holds, and taking it (`file.rs`, `lease.rs`);
//! - `command.rs`: COMMAND's program, arguments and job name, and its spawn;
//!   `keeper.rs`: the process between a lease's wrapper and COMMAND;
//! - `supervise.rs`: the supervision loop and the one stop sequence, with
//!   `signals.rs` (blocked, forwarded) and `tree.rs` (COMMAND's tree);
//! - `limits.rs`: the heartbeat, the watchdog and the maximum runtime, which
//!   ask the loop for a stop; `beat_file.rs`: where COMMAND beats under a
//!   lease;
//! - `tick.rs`: `--once-per`'s lines and environment;
//! - `capture.rs`: COMMAND's output through pipes, for `--ping-log-bytes`
//!   and `--output-on-failure`, with `output.rs`, what a stream keeps;
//! - `outcome.rs`: how the run ended, and its exit status.

use std::ffi::OsString;
use std::time::{Instant, SystemTime};

pub(crate) mod beat_file;
pub(crate) mod capture;
pub(crate) mod command;
pub(crate) mod hold;
pub(crate) mod jitter;
pub(crate) mod keeper;
pub(crate) mod limits;
pub(crate) mod outcome;
pub(crate) mod output;
pub(crate) mod signals;
pub(crate) mod supervise;
pub(crate) mod tick;
pub(crate) mod tree;

use crate::cli::RunArgs;
use crate::exit;
use crate::monitor::Monitor;
use crate::run::capture::Capture;
use crate::run::command::{command_line, job_name};
use crate::run::hold::{Hold, Released};
use crate::run::limits::Limits;
use crate::run::outcome::Ran;
use crate::run::signals::BlockedSignals;
use crate::run::supervise::{StopSequence, Wake};

/// Runs `args`; returns the exit status.
pub(crate) fn run(args: RunArgs) -> i32 {
    // The run's start, before any wait for the hold: what its tick is of.
    let started = Instant::now();
    // The name flock(1)'s lines and errors start with.
    let name = if args.flock_compat {
        "flock"
    } else {
        "lockfile"
    };

    // Validate.
    let claim = match args.ticks.claim(started) {
        Ok(claim) => claim,
        Err(e) => {
            errln!("{name}: {e}");
            return exit::USAGE;
        }
    };
    if let Some(why) = args
        .jitter
        .and_then(|jitter| jitter::refused(jitter, args.ticks.once_per))
    {
        errln!("{name}: {why}");
        return exit::USAGE;
    }
    if args.command.is_empty() && args.shell_command.is_none() {
        if args.slots.is_some() {
            errln!("{name}: --slots needs a COMMAND to run in its slot, not a descriptor to lock");
            return exit::USAGE;
        }
        if args.output_on_failure {
            errln!("{name}: --output-on-failure needs a COMMAND whose output to keep");
            return exit::USAGE;
        }
        let job = args
            .job
            .clone()
            .unwrap_or_else(|| args.lockfile.to_string_lossy().into_owned());
        wait_jitter(&args, &job, name);
        return crate::flock::descriptor::without_command(&args, claim.is_some(), name);
    }
    let (program, program_args) = command_line(&args);
    let job = args.job.clone().unwrap_or_else(|| job_name(&program));

    // Monitor.
    let mut monitor = match Monitor::new(&args.monitoring, &job, &args.lockfile.to_string_lossy()) {
        Ok(monitor) => monitor,
        Err(e) => {
            errln!("lockfile: {e}");
            return exit::USAGE;
        }
    };

    // Wait out the jitter, then acquire, and claim the tick (the one
    // nearest `started`, before the jitter).
    wait_jitter(&args, &job, name);
    let acquired = if args.engine.chosen() {
        hold::lease::acquire(&args, &job, claim, &mut monitor)
    } else {
        hold::file::acquire(&args, &job, claim, &mut monitor, name)
    };
    let mut hold = match acquired {
        Ok(hold) => hold,
        Err(code) => return code,
    };
    if let (Some(claim), Some(ours)) = (&claim, hold.claim()) {
        tick::warn_on_drift(claim, ours);
    }

    // Spawn and supervise, COMMAND's output through pipes when an option
    // asks for it.
    let capture = capture(&args);
    // The tick claimed, whichever clock dated it (a lease's: its server's).
    let tick = claim
        .as_ref()
        .zip(hold.claim())
        .map(|(claim, ours)| (ours.tick, claim.schedule.period()));
    monitor.started(hold.record().token, tick);
    let started_at = SystemTime::now();
    let ran = supervised(hold.as_mut(), &program, &program_args, &args);

    // Finish: the metrics, the run history and the release, in that order,
    // so that the next holder finds them written.
    let (end, mut code) = outcome::of(ran.as_ref(), hold.as_ref(), started_at);
    if let Err((_, message)) = &ran {
        errln!("{name}: {message}");
        // flock(1) exits 69 (EX_UNAVAILABLE) for a command it cannot run.
        if args.flock_compat && matches!(code, exit::NOT_FOUND | exit::NOT_EXECUTABLE) {
            code = exit::UNAVAILABLE;
        }
    }
    let mut captured = capture.map(Capture::finish).unwrap_or_default();
    let (outcome, signal) = (end.outcome, end.signal);
    monitor.finished(outcome, code, std::mem::take(&mut captured.tail));
    let survivors = ran.as_ref().is_ok_and(|ran| ran.survivors);
    let code = match hold.finish(end, survivors) {
        // A run whose lease lapsed before its release did not run fully
        // protected, whatever COMMAND's own status: say so with a status of
        // its own.
        Released::Lost if ran.is_ok() => exit::LEASE_LOST,
        _ => code,
    };
    // After the release: a slow reader of the output never holds the lock.
    if args.output_on_failure && code != 0 {
        errln!(
            "lockfile: {}",
            outcome::failure_line(&job, outcome, code, signal, captured.nothing_kept())
        );
        captured.print_kept();
    }
    code
}

/// Points COMMAND's output at pipes for `--ping-log-bytes` (the tail for
/// the ping) and `--output-on-failure` (all of it, kept). Should that be
/// impossible, the output goes straight through, and a line says so.
fn capture(args: &RunArgs) -> Option<Capture> {
    let tail = args.monitoring.ping_log_bytes;
    let keep = args.output_on_failure.then_some(args.output_limit);
    if tail == 0 && keep.is_none() {
        return None;
    }
    Capture::start(tail, keep)
        .inspect_err(|e| {
            errln!("lockfile: cannot pass the command's output through the wrapper ({e}): it goes straight to stdout and stderr");
        })
        .ok()
}

/// Sleeps `--jitter`'s delay for `job`, if any. Nothing is held or written
/// yet, and the signals keep the dispositions the run started with: a
/// SIGTERM ends the run here as it would end a `sleep`.
fn wait_jitter(args: &RunArgs, job: &str, name: &str) {
    let Some(jitter) = args.jitter else { return };
    let delay = jitter::delay(jitter, job);
    if args.verbose {
        errln!(
            "{name}: --jitter {}: waiting {:.3}s before taking the lock",
            humantime::format_duration(jitter),
            delay.as_secs_f64()
        );
    }
    std::thread::sleep(delay);
}

/// Starts COMMAND under `hold` and supervises it, and whatever it leaves
/// behind while that keeps the hold, to the end.
fn supervised(
    hold: &mut dyn Hold,
    program: &OsString,
    program_args: &[OsString],
    args: &RunArgs,
) -> Result<Ran, (i32, String)> {
    let os_error = |what: &str, e: std::io::Error| (exit::OS_ERROR, format!("{what}: {e}"));
    // Block the forwarded signals before spawning, so that none arriving
    // between the spawn and the wait loop is lost.
    let mut signals = BlockedSignals::block().map_err(|e| os_error("cannot block signals", e))?;
    // Orphans of COMMAND are reparented to us, so that we can tell whether
    // any of them outlives it, and stop them at a limit.
    supervise::become_subreaper().map_err(|e| os_error("cannot become a subreaper", e))?;
    let mut env = vec![
        // The run's identity under every hold: the token of its owner
        // record, never a lease's fencing token.
        ("LOCKFILE_TOKEN", hold.record().token.to_string().into()),
    ];
    env.extend(hold.env());
    env.extend(tick::env(hold.claim()));
    let mut child = hold.spawn(&mut signals, program, program_args, &env)?;

    let mut limits = Limits::new(hold, args);
    let mut stop = StopSequence::new(args.kill_after);
    let status = supervise::supervise(&signals, &mut child, &mut stop, |stop, now| {
        watch(hold, &mut limits, stop, now)
    })
    .map_err(|e| os_error("cannot wait for the command", e))?;
    let mut survivors = false;
    if supervise::has_children() {
        let count = supervise::descendants().len();
        let limited = limits.any() || stop.stopping();
        if let Some(line) = hold.keeps_leftovers(limited, count) {
            // Once the tree is being stopped, they are no news.
            if !stop.stopping() {
                errln!("lockfile: {line}");
            }
            survivors = !supervise::supervise_leftovers(&signals, &mut stop, |stop, now| {
                watch(hold, &mut limits, stop, now)
            });
        }
    }
    Ok(Ran {
        status,
        stopped_for: limits.stopped_for,
        survivors,
    })
}

/// What the watchers ask when the supervision loop wakes at `now`: the
/// hold first, whoever began the stop sequence (a lease about to lapse
/// brings SIGKILL forward to its deadline), then the limits.
fn watch(hold: &mut dyn Hold, limits: &mut Limits, stop: &StopSequence, now: Instant) -> Wake {
    let wake = hold.watch(stop, now);
    if wake.stop.is_some() {
        return wake;
    }
    let limit = limits.watch(hold, stop, now);
    Wake {
        stop: limit.stop,
        next: wake.next.min(limit.next),
    }
}
