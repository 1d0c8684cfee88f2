//! A lease of any engine as a run's hold.
//!
//! The safety property: COMMAND is gone before anyone else can be granted the
//! lease. The server keeps a lease at least a TTL after the last renewal it
//! received, which is no earlier than a TTL after we sent it; that moment,
//! on the monotonic clock, is the lease's deadline. When renewals fail,
//! COMMAND gets SIGTERM `--grace` before the deadline and SIGKILL just before
//! it, whoever began the stop sequence. COMMAND runs below our keeper (see
//! `run::keeper`), which stops the whole tree should this process die,
//! since nobody would renew the lease any more.
//!
//! A lease has no lock file to beat on: under `--watchdog`, COMMAND beats on
//! a private file of the run's own (see `run::beat_file`). Nobody signals
//! another host's processes: `--evict-after` is the lock file's, and a
//! lease's holder that falls silent loses it when its TTL runs out.

use std::ffi::OsString;
use std::time::{Duration, Instant, SystemTime};

use lockfile::OwnerRecord;
use lockfile::history::RunEnd;
use lockfile::tick::{Claim, TickClaim};
use lockfile::wait::Wait;
use lockfile_lease::policy::{Step, StopPolicy};
use lockfile_lease::{Error, Lease, LeaseRequest, LeaseSignal};

use crate::cli::RunArgs;
use crate::exit;
use crate::monitor::Monitor;
use crate::run::beat_file::BeatFile;
use crate::run::hold::{Hold, NotHeld, Released};
use crate::run::keeper;
use crate::run::signals::BlockedSignals;
use crate::run::supervise::{self, Child, Stop, StopSequence, Wake};
use crate::run::tick;

/// Wakes the supervisor the moment the lease is known to be lost. SIGURG,
/// because its default action is to be ignored: one still pending when the
/// mask is restored at exit must not kill us.
const WAKE: i32 = libc::SIGURG;

/// A lease held by a run.
pub(crate) struct LeaseHold {
    lease: Box<dyn Lease>,
    signal: LeaseSignal,
    policy: StopPolicy,
    /// Under `--watchdog`: where COMMAND beats.
    beat: Option<BeatFile>,
    /// Whether the stop policy has acted: the lease lapsed, or was about to.
    stopped: bool,
    /// When the SIGKILL the stop policy asked for goes out.
    kill_by: Option<Instant>,
    /// Whether the lease's SIGTERM and SIGKILL lines went out.
    said_terminate: bool,
    said_kill: bool,
}

/// Takes the lease `args` ask for, or says why not and returns the status.
pub(crate) fn acquire(
    args: &RunArgs,
    job: &str,
    claim: Option<TickClaim>,
    monitor: &mut Monitor,
) -> Result<Box<dyn Hold>, NotHeld> {
    let engine = crate::lease::engine(&args.engine, args.postgres_listen_url())?;
    // Made before the lease is taken: a run that cannot be watched is
    // refused before it holds anything.
    let mut beat = match args.watchdog {
        Some(_) => Some(BeatFile::create().map_err(|e| {
            errln!("lockfile: --watchdog: {e}");
            exit::OS_ERROR
        })?),
        None => None,
    };
    let mut request = request(args, job);
    if let Some(claim) = claim {
        request.claim_tick(claim);
    }
    let name = args.lockfile.to_string_lossy();
    let acquired = match args.slots {
        None => engine.acquire(&name, &request),
        Some(slots) => lockfile_lease::slots::acquire_slot(engine.as_ref(), &name, slots, &request),
    };
    let lease = match acquired {
        Ok(lease) => lease,
        Err(Error::TickUsed {
            tick, run, claim, ..
        }) => {
            let ran = Some((run.as_ref(), claim.as_deref()));
            return Err(tick::Refusal { tick, ran }.skip(monitor, job, args.conflict_exit_code));
        }
        Err(Error::TooLate { tick, .. }) => {
            let refusal = tick::Refusal { tick, ran: None };
            return Err(refusal.skip(monitor, job, args.conflict_exit_code));
        }
        Err(e) if e.is_contended() => {
            monitor.skipped(&format!("{e}; not running"), || None);
            return Err(i32::from(args.conflict_exit_code));
        }
        Err(e @ (Error::InvalidName { .. } | Error::InvalidOptions { .. })) => {
            errln!("lockfile: {e}");
            return Err(exit::USAGE);
        }
        Err(e) => {
            errln!("lockfile: {e}");
            return Err(exit::UNAVAILABLE);
        }
    };
    if let Some(beat) = &mut beat
        && let Err(e) = beat.write_token(lease.record().token)
    {
        errln!("lockfile: --watchdog: {e}");
        let _ = lease.release();
        return Err(exit::OS_ERROR);
    }
    let signal = lease.signal();
    let policy = args
        .grace
        .map_or_else(|| signal.default_policy(), StopPolicy::new);
    Ok(Box::new(LeaseHold {
        lease,
        signal,
        policy,
        beat,
        stopped: false,
        kill_by: None,
        said_terminate: false,
        said_kill: false,
    }))
}

/// What `args` ask of the acquisition.
fn request(args: &RunArgs, job: &str) -> LeaseRequest {
    let wait = if args.nonblock {
        Wait::No
    } else {
        Wait::up_to(args.wait)
    };
    let mut request = LeaseRequest::new();
    request.wait(wait).job(job);
    if let Some(ttl) = args.ttl {
        request.ttl(ttl);
    }
    if let Some(max_runtime) = args.max_runtime {
        request.max_runtime(max_runtime);
    }
    request
}

impl LeaseHold {
    /// Says on stderr what the lease's state makes us do to the tree. How
    /// long is left says how urgent it is, and dates the deadline for
    /// whoever reads the line.
    fn announce(&self, what: &str) {
        let state = match self.signal.lost_reason() {
            Some(r) => format!("is lost ({r})"),
            None => format!(
                "is about to lapse in {:.3}s",
                self.signal
                    .deadline()
                    .saturating_duration_since(Instant::now())
                    .as_secs_f64()
            ),
        };
        errln!(
            "lockfile: the lease on `{}` {state}: {what}",
            self.lease.name()
        );
    }
}

impl Hold for LeaseHold {
    fn record(&self) -> &OwnerRecord {
        self.lease.record()
    }

    fn claim(&self) -> Option<&Claim> {
        self.lease.claim()
    }

    fn label(&self) -> String {
        self.lease.name().to_owned()
    }

    fn env(&self) -> Vec<(&'static str, OsString)> {
        let mut env = vec![
            (
                "LOCKFILE_FENCING_TOKEN",
                self.lease.fencing_token().to_string().into(),
            ),
            ("LOCKFILE_LEASE", self.lease.name().into()),
        ];
        if let Some(slot) = self.lease.record().slot {
            env.push(("LOCKFILE_SLOT", slot.index.to_string().into()));
        }
        if let Some(beat) = &self.beat {
            env.push(("LOCKFILE_BEAT", beat.path().as_os_str().to_owned()));
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
        signals
            .also_block(WAKE)
            .map_err(|e| (exit::OS_ERROR, format!("cannot block signals: {e}")))?;
        // SAFETY: pthread_self has no preconditions.
        let main_thread = unsafe { libc::pthread_self() };
        self.signal.on_lost(move |_| {
            // SAFETY: the main thread outlives the guard, whose release joins
            // the thread that runs this callback; the signal is blocked
            // there and taken by sigtimedwait.
            unsafe {
                libc::pthread_kill(main_thread, WAKE);
            }
        });
        // Through the keeper, which stops the whole tree should we die:
        // nobody would renew the lease any more.
        Ok(Child::Kept(keeper::spawn(signals, program, args, env)?))
    }

    fn heartbeat_every(&self) -> Option<Duration> {
        // The engine renews the lease on a thread of its own.
        None
    }

    fn heartbeat(&self) {}

    fn beaten(&self) -> Option<SystemTime> {
        self.beat.as_ref().and_then(BeatFile::modified)
    }

    fn watch(&mut self, stop: &StopSequence, now: Instant) -> Wake {
        // Judged at `now`, the moment the stop sequence steps at: a SIGKILL
        // that it sends at the lease's kill moment is one announced here.
        let step = match self.signal.is_lost() {
            true => Step::Kill,
            false => self.policy.decide(self.signal.deadline(), now),
        };
        let wake = match step {
            Step::Continue { terminate_at } => Wake::at(terminate_at),
            Step::Terminate { kill_at } => {
                self.stopped = true;
                self.kill_by = Some(self.kill_by.map_or(kill_at, |k| k.min(kill_at)));
                if !self.said_terminate {
                    self.said_terminate = true;
                    self.announce(if stop.stopping() {
                        "the command and everything it started, already being stopped, get SIGKILL before then"
                    } else {
                        "sending SIGTERM to the command and everything it started"
                    });
                }
                Wake {
                    stop: Some(Stop::Terminate {
                        kill_by: Some(kill_at),
                    }),
                    next: kill_at,
                }
            }
            // Kill, and whatever a later version adds: stop the work now.
            _ => {
                self.stopped = true;
                self.said_terminate = true;
                self.kill_by = Some(now);
                Wake {
                    stop: Some(Stop::Kill),
                    next: supervise::after(Duration::MAX),
                }
            }
        };
        // The SIGKILL the lease asked for goes out at this step, even when
        // a renewal succeeded meanwhile: the sequence never takes it back.
        if self.kill_by.is_some_and(|k| now >= k) && !self.said_kill {
            self.said_kill = true;
            self.announce("sending SIGKILL to the command and everything it started");
        }
        wake
    }

    fn keeps_leftovers(&self, _limited: bool, count: usize) -> Option<String> {
        // Background processes COMMAND left behind still work under the
        // lease: it is kept renewed, with the stop policy and the limits,
        // until they are gone. Releasing now would let another host start
        // beside them.
        Some(format!(
            "the command left {count} background process(es) behind; the lease on `{}` is kept until they exit",
            self.lease.name()
        ))
    }

    fn lost(&self) -> bool {
        self.stopped || self.lease.is_lost()
    }

    fn finish(self: Box<Self>, end: RunEnd, survivors: bool) -> Released {
        if survivors {
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
        // Bounded by the lease's deadline (see `record_outcome`): a server
        // that does not answer delays the exit by a moment at most.
        if let Err(e) = self.lease.record_outcome(end) {
            errln!("lockfile: the command ended ({}), but {e}", end.outcome);
        }
        match self.lease.release() {
            Ok(lockfile_lease::Released::AfterLoss(loss)) => {
                errln!("lockfile: {loss}");
                Released::Lost
            }
            Ok(_) => Released::Done,
            Err(e) => {
                errln!("lockfile: {e}");
                Released::Done
            }
        }
    }
}
