//! `lockfile run --etcd`: COMMAND under a lease instead of a file lock,
//! whatever the engine.
//!
//! The safety property: COMMAND is gone before anyone else can be granted the
//! lease. The server keeps a lease at least a TTL after the last renewal it
//! received, which is no earlier than a TTL after we sent it; that moment,
//! on the monotonic clock, is the lease's deadline. When renewals fail,
//! COMMAND gets SIGTERM `--grace` before the deadline and SIGKILL just before
//! it. Should this process itself die, the kernel SIGKILLs COMMAND
//! (PR_SET_PDEATHSIG), because nobody renews the lease any more.
//!
//! `--max-runtime` stops COMMAND through the same stop sequence, as for a
//! file lock; the stop policy keeps its say meanwhile. (`--watchdog` and
//! `--evict-after` have nothing to work on here: no lock file to beat on,
//! no local holder to evict.)

use std::ffi::OsString;
use std::time::{Duration, Instant, SystemTime};

use lockfile::history::{Outcome, RunEnd};
use lockfile::wait::Wait;
use lockfile_lease::policy::{Step, StopPolicy};
use lockfile_lease::{Error, Lease, LeaseRequest};

use crate::cli::RunArgs;
use crate::exit;
use crate::monitor::Monitor;
use crate::run::command::{command_line, job_name};
use crate::run::keeper;
use crate::run::limits::MaxRuntime;
use crate::run::signals::BlockedSignals;
use crate::run::supervise::{self, Child, StopSequence};
use crate::run::tick;

/// Wakes the supervisor the moment the lease is known to be lost. SIGURG,
/// because its default action is to be ignored: one still pending when the
/// mask is restored at exit must not kill us.
const WAKE: i32 = libc::SIGURG;

pub(crate) fn run(args: RunArgs) -> i32 {
    // The run's start, before any wait for the lease: what its tick is of.
    let started = Instant::now();
    if args.command.is_empty() && args.shell_command.is_none() {
        errln!("lockfile: a lease needs a COMMAND to run under it (or -c STRING)");
        return exit::USAGE;
    }
    let engine = match super::engine(&args.engine, args.postgres_listen_url()) {
        Ok(engine) => engine,
        Err(code) => return code,
    };
    let name = args.lockfile.to_string_lossy().into_owned();
    let (program, program_args) = command_line(&args);
    let job = args.job.clone().unwrap_or_else(|| job_name(&program));
    let mut monitor = match Monitor::new(&args.monitoring, &job, &name) {
        Ok(monitor) => monitor,
        Err(e) => {
            errln!("lockfile: {e}");
            return exit::USAGE;
        }
    };
    let claim = match args.ticks.claim(started) {
        Ok(claim) => claim,
        Err(e) => {
            errln!("lockfile: {e}");
            return exit::USAGE;
        }
    };
    let mut request = request(&args, job.clone());
    if let Some(claim) = claim {
        request = request.claim_tick(claim);
    }
    let guard = match engine.acquire(&name, &request) {
        Ok(guard) => guard,
        Err(Error::TickUsed {
            tick, run, claim, ..
        }) => {
            let ran = Some((run.as_ref(), claim.as_deref()));
            return tick::Refusal { tick, ran }.skip(&mut monitor, &job, args.conflict_exit_code);
        }
        Err(Error::TooLate { tick, .. }) => {
            let refusal = tick::Refusal { tick, ran: None };
            return refusal.skip(&mut monitor, &job, args.conflict_exit_code);
        }
        Err(e) if e.is_contended() => {
            monitor.skipped(&format!("{e}; not running"), || None);
            return i32::from(args.conflict_exit_code);
        }
        Err(e @ (Error::InvalidName { .. } | Error::InvalidOptions { .. })) => {
            errln!("lockfile: {e}");
            return exit::USAGE;
        }
        Err(e) => {
            errln!("lockfile: {e}");
            return exit::UNAVAILABLE;
        }
    };
    if let (Some(claim), Some(ours)) = (&claim, guard.claim()) {
        tick::warn_on_drift(claim, ours);
    }
    monitor.started(guard.record().token);
    let started_at = SystemTime::now();
    let ran = run_leased(guard.as_ref(), &program, &program_args, &args);
    finish(guard, ran, started_at, &mut monitor)
}

/// What `args` ask of the acquisition.
fn request(args: &RunArgs, job: String) -> LeaseRequest {
    let wait = if args.nonblock {
        Wait::No
    } else {
        Wait::up_to(args.wait)
    };
    let mut request = LeaseRequest::new().wait(wait).job(job);
    if let Some(ttl) = args.ttl {
        request = request.ttl(ttl);
    }
    if let Some(max_runtime) = args.max_runtime {
        request = request.max_runtime(max_runtime);
    }
    request
}

/// How COMMAND ran under the lease.
struct Ran {
    status: std::process::ExitStatus,
    /// The stop policy acted on it: the lease lapsed, or was about to.
    stopped: bool,
    /// `--max-runtime` began stopping it.
    timed_out: bool,
}

/// After COMMAND: the metrics, the run history, and the release, in that
/// order, so that the next holder finds them written. Returns the exit
/// status.
fn finish(
    guard: Box<dyn Lease>,
    ran: Result<Ran, (i32, String)>,
    started_at: SystemTime,
    monitor: &mut Monitor,
) -> i32 {
    let spawned = ran.is_ok();
    let (end, code) = match ran {
        Ok(Ran {
            status,
            stopped,
            timed_out,
        }) => {
            let code = if timed_out {
                exit::LIMIT
            } else {
                supervise::exit_code(status)
            };
            // When the lease lapsed (or was about to) while the maximum
            // runtime was stopping the run, the run is `lease_lost` and
            // exits 79, not 124: that it ran too long is the job's own
            // business, but that it ran unprotected, perhaps beside another
            // holder, is what whoever reads the outcome must learn.
            let outcome = if stopped || guard.is_lost() {
                Outcome::LeaseLost
            } else if timed_out {
                Outcome::TimedOut
            } else {
                crate::monitor::outcome_of(code)
            };
            let end = RunEnd {
                outcome,
                exit_code: status.code(),
                signal: std::os::unix::process::ExitStatusExt::signal(&status),
                started_at,
            };
            (end, code)
        }
        // COMMAND could not be started (or supervised): a failed run.
        Err((code, message)) => {
            errln!("lockfile: {message}");
            let end = RunEnd {
                outcome: Outcome::Failed,
                exit_code: None,
                signal: None,
                started_at,
            };
            (end, code)
        }
    };
    let lease_lost = end.outcome == Outcome::LeaseLost;
    monitor.finished(
        end.outcome,
        if lease_lost { exit::LEASE_LOST } else { code },
    );
    // Bounded by the lease's deadline (see `record_outcome`): a server that
    // does not answer delays the exit by a moment at most.
    if let Err(e) = guard.record_outcome(end) {
        errln!("lockfile: the command ended ({}), but {e}", end.outcome);
    }
    let released = guard.release();
    if let Err(e) = &released {
        errln!("lockfile: {e}");
    }
    // A run whose lease lapsed (or was about to) did not run fully protected,
    // whatever COMMAND's own status: say so with a status of its own.
    if lease_lost || (spawned && released.as_ref().is_err_and(|e| e.is_lost())) {
        return exit::LEASE_LOST;
    }
    code
}

fn run_leased(
    guard: &dyn Lease,
    program: &OsString,
    program_args: &[OsString],
    args: &RunArgs,
) -> Result<Ran, (i32, String)> {
    let os_error = |what: &str, e: std::io::Error| (exit::OS_ERROR, format!("{what}: {e}"));
    let mut signals = BlockedSignals::block().map_err(|e| os_error("cannot block signals", e))?;
    signals
        .also_block(WAKE)
        .map_err(|e| os_error("cannot block signals", e))?;
    // Whatever COMMAND starts stays our descendant, even a daemon that
    // detaches: its orphans are reparented to us, and can be stopped.
    supervise::become_subreaper().map_err(|e| os_error("cannot become a subreaper", e))?;
    let lease = guard.signal();
    // SAFETY: pthread_self has no preconditions.
    let main_thread = unsafe { libc::pthread_self() };
    lease.on_lost(move |_| {
        // SAFETY: the main thread outlives the guard, whose release joins the
        // thread that runs this callback; the signal is blocked there and
        // taken by sigtimedwait.
        unsafe {
            libc::pthread_kill(main_thread, WAKE);
        }
    });
    let policy = args
        .grace
        .map_or_else(|| lease.default_policy(), StopPolicy::new);
    let mut env = vec![
        (
            "LOCKFILE_FENCING_TOKEN",
            guard.fencing_token().to_string().into(),
        ),
        ("LOCKFILE_LEASE", guard.name().into()),
        // The run's identity, as under a file lock (`LOCKFILE_TOKEN`): the
        // token of its owner record, never the fencing token.
        ("LOCKFILE_TOKEN", guard.record().token.to_string().into()),
    ];
    env.extend(tick::env(guard.claim()));
    // Through the keeper, which stops the whole tree should we die: nobody
    // would renew the lease any more.
    let mut child = Child::Kept(keeper::spawn(&signals, program, program_args, &env)?);
    let max_runtime = MaxRuntime::new(args.max_runtime, Instant::now());
    let job = guard.record().job.clone().unwrap_or_default();

    // The stop policy and the maximum runtime, applied to COMMAND and
    // everything it started through one stop sequence.
    let mut stop = StopSequence::new(args.kill_after);
    // Whether the stop policy has acted, and whether the maximum runtime
    // began the sequence.
    let (mut stopped, mut timed_out) = (false, false);
    // Whether the lease's SIGTERM and SIGKILL lines went out.
    let mut announced = (false, false);
    let mut on_wake = |stop: &mut StopSequence| {
        let announce = |what: &str| {
            // How long is left says how urgent it is, and dates the
            // deadline for whoever reads the line.
            let state = match lease.lost_reason() {
                Some(r) => format!("is lost ({r})"),
                None => format!(
                    "is about to lapse in {:.3}s",
                    lease
                        .deadline()
                        .saturating_duration_since(Instant::now())
                        .as_secs_f64()
                ),
            };
            errln!("lockfile: the lease on `{}` {state}: {what}", guard.name());
        };
        // The stop policy first, whoever began the sequence: the tree must
        // be dead by the lease's deadline even when the maximum runtime's
        // `--kill-after` would wait longer.
        let lease_next = match lease.step(policy) {
            Step::Continue { terminate_at } => Some(terminate_at),
            Step::Terminate { kill_at } => {
                stopped = true;
                stop.terminate(Some(kill_at));
                Some(kill_at)
            }
            // Kill, and whatever a later version adds: stop the work now.
            _ => {
                stopped = true;
                announced.0 = true; // straight to SIGKILL: no SIGTERM line
                stop.kill();
                None
            }
        };
        // As for a file lock, a run someone else is stopping (a forwarded
        // signal) is not claimed by the limit.
        if !stop.stopping()
            && !stop.forwarded()
            && max_runtime.is_some_and(|m| m.check(&job, Instant::now()))
        {
            timed_out = true;
            stop.terminate(None);
        }
        let far = || supervise::after(Duration::MAX);
        let next = match stop.step() {
            Some(next) => next,
            None if stop.forwarded() => far(),
            None => max_runtime.map_or_else(far, |m| m.deadline()),
        };
        if stopped && !announced.0 {
            announced.0 = true;
            announce(if timed_out {
                "the command and everything it started, already stopping at its maximum runtime, get SIGKILL before then"
            } else {
                "sending SIGTERM to the command and everything it started"
            });
        }
        if stopped && stop.killed() && !announced.1 {
            announced.1 = true;
            announce("sending SIGKILL to the command and everything it started");
        }
        lease_next.map_or(next, |lease_next| lease_next.min(next))
    };
    let status = supervise::supervise(
        &signals,
        &mut child,
        &mut stop,
        Instant::now(),
        &mut on_wake,
    )
    .map_err(|e| os_error("cannot wait for the command", e))?;
    if supervise::has_children() {
        // Background processes COMMAND left behind still work under the
        // lease: keep renewing it, and keep the stop policy and the maximum
        // runtime, until they are gone. Releasing now would let another host
        // start beside them. (Once the tree is being stopped, they are no
        // news.)
        if !stop.stopping() {
            errln!(
                "lockfile: the command left {} background process(es) behind; the lease on `{}` is kept until they exit",
                supervise::descendants().len(),
                guard.name()
            );
        }
        if !supervise::supervise_leftovers(&signals, &mut stop, Instant::now(), &mut on_wake) {
            let names: Vec<String> = supervise::descendants()
                .iter()
                .map(|p| format!("pid {}", p.as_raw_nonzero()))
                .collect();
            errln!(
                "lockfile: {} process(es) survived SIGKILL (uninterruptible sleep?): {}",
                names.len(),
                names.join(", ")
            );
        }
    }
    Ok(Ran {
        status,
        stopped,
        timed_out,
    })
}
