//! The wrapper's timers while COMMAND runs under `lockfile run`: its own
//! heartbeat, or the watchdog that COMMAND's beats feed, and the maximum
//! runtime. Each reached limit starts the one stop sequence. The maximum
//! runtime ([`MaxRuntime`]) also serves the lease, which has no lock file
//! for the others.

use std::time::{Duration, Instant, SystemTime};

use lockfile::LockGuard;

use crate::cli::RunArgs;
use crate::run::supervise::{self, StopSequence};

/// Which limit stopped a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    Watchdog,
    MaxRuntime,
}

/// The wrapper's timers while COMMAND runs: its own heartbeat, or the
/// watchdog that COMMAND's beats feed, and the maximum runtime. Every
/// duration is measured on the monotonic clock, so that a step of the wall
/// clock never stops a healthy job.
pub(crate) struct Limits {
    /// The wrapper's own heartbeat interval; `None` when COMMAND beats or the
    /// file is not ours to touch.
    heartbeat: Option<Duration>,
    next_heartbeat: Instant,
    watchdog: Option<Duration>,
    max_runtime: Option<MaxRuntime>,
    /// The lock file's modification time when last looked at, and when it
    /// was last seen to change (a beat).
    seen_modified: Option<SystemTime>,
    last_beat: Instant,
    job: String,
    pub(crate) stopped_for: Option<Limit>,
}

impl Limits {
    pub(crate) fn new(guard: &LockGuard, args: &RunArgs) -> Limits {
        let started = Instant::now();
        let heartbeat = match (args.watchdog, guard.no_record()) {
            (None, None) => Some(args.heartbeat),
            _ => None,
        };
        Limits {
            heartbeat,
            next_heartbeat: supervise::after(args.heartbeat),
            watchdog: args.watchdog,
            max_runtime: MaxRuntime::new(args.max_runtime, started),
            seen_modified: guard.modified().ok(),
            last_beat: started,
            job: guard.record().job.clone().unwrap_or_default(),
            stopped_for: None,
        }
    }

    pub(crate) fn any(&self) -> bool {
        self.watchdog.is_some() || self.max_runtime.is_some()
    }

    /// The earliest moment something is due.
    pub(crate) fn next_wake(&self) -> Instant {
        let far = supervise::after(Duration::MAX);
        let heartbeat = self.heartbeat.map_or(far, |_| self.next_heartbeat);
        let watchdog = self
            .watchdog
            .and_then(|w| self.last_beat.checked_add(w))
            .unwrap_or(far);
        let runtime = self.max_runtime.as_ref().map_or(far, MaxRuntime::deadline);
        heartbeat.min(watchdog).min(runtime)
    }

    /// Beats, watches COMMAND's beats and the clock, and starts the stop
    /// sequence when a limit is reached. Returns the next wake-up.
    pub(crate) fn check(&mut self, guard: &LockGuard, stop: &mut StopSequence) -> Instant {
        if let Some(next) = stop.step() {
            return next;
        }
        let now = Instant::now();
        if let Some(interval) = self.heartbeat
            && now >= self.next_heartbeat
        {
            if let Err(e) = guard.heartbeat() {
                errln!("lockfile: {e}");
            }
            self.next_heartbeat = supervise::after(interval);
        }
        if stop.forwarded() {
            // Someone else is stopping the run (an evictor, an operator):
            // it is not this run's limit that ends it. Only the heartbeat
            // goes on.
            return match self.heartbeat {
                Some(_) => self.next_heartbeat,
                None => supervise::after(Duration::MAX),
            };
        }
        if let Some(threshold) = self.watchdog {
            // Any change of the modification time is a beat: COMMAND's own
            // clock may differ from ours, and only the change matters.
            let modified = guard.modified().ok();
            if modified != self.seen_modified {
                self.seen_modified = modified;
                self.last_beat = now;
            }
            let silent = now.duration_since(self.last_beat);
            if silent >= threshold {
                errln!(
                    "lockfile: job {:?} has not beaten for {} (watchdog {}): stopping it and everything it started",
                    self.job,
                    humantime::format_duration(Duration::from_millis(silent.as_millis() as u64)),
                    humantime::format_duration(threshold)
                );
                tracing::warn!(
                    name: "heartbeat_silent",
                    event = "heartbeat_silent",
                    path = %guard.path().display(),
                    job = %self.job,
                    silent_ms = silent.as_millis() as u64,
                    threshold_ms = threshold.as_millis() as u64,
                );
                return self.stop(Limit::Watchdog, stop);
            }
        }
        if self
            .max_runtime
            .as_ref()
            .is_some_and(|m| m.check(&self.job, now))
        {
            return self.stop(Limit::MaxRuntime, stop);
        }
        self.next_wake()
    }

    fn stop(&mut self, limit: Limit, stop: &mut StopSequence) -> Instant {
        self.stopped_for = Some(limit);
        stop.terminate(None);
        stop.step().unwrap_or_else(Instant::now)
    }
}

/// `--max-runtime`, for the file lock (within [`Limits`]) and the lease
/// alike, so that both measure it and say it the same way.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MaxRuntime {
    limit: Duration,
    /// When COMMAND started, on the monotonic clock: a step of the wall
    /// clock must not stop a job early, nor let it overrun.
    started: Instant,
}

impl MaxRuntime {
    /// The limit for a COMMAND that started at `started`, if there is one.
    pub(crate) fn new(limit: Option<Duration>, started: Instant) -> Option<MaxRuntime> {
        limit.map(|limit| MaxRuntime { limit, started })
    }

    /// When the limit is reached (a year away for a limit too large to add).
    pub(crate) fn deadline(&self) -> Instant {
        self.started
            .checked_add(self.limit)
            .unwrap_or_else(|| supervise::after(Duration::MAX))
    }

    /// Whether the limit is reached at `now`; if so, says on stderr that
    /// `job` is being stopped for it, before the stop sequence begins.
    pub(crate) fn check(&self, job: &str, now: Instant) -> bool {
        if now.duration_since(self.started) < self.limit {
            return false;
        }
        errln!(
            "lockfile: job {job:?} reached its maximum runtime of {}: stopping it and everything it started",
            humantime::format_duration(self.limit)
        );
        true
    }
}
