//! The wrapper's timers while COMMAND runs under `lockfile run`, whatever
//! the hold: its own heartbeat (when the hold keeps one), the watchdog that
//! COMMAND's beats feed, and the maximum runtime. A reached limit asks the
//! supervision loop for a stop ([`Wake`]); it never drives the stop sequence
//! itself.

use std::time::{Duration, Instant, SystemTime};

use crate::cli::RunArgs;
use crate::run::hold::Hold;
use crate::run::supervise::{self, Stop, StopSequence, Wake};

/// Which limit stopped a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    Watchdog,
    MaxRuntime,
}

/// The wrapper's timers while COMMAND runs. Every duration is measured on
/// the monotonic clock, so that a step of the wall clock never stops a
/// healthy job.
pub(crate) struct Limits {
    /// The wrapper's own heartbeat interval; `None` when COMMAND beats or the
    /// hold keeps none (a lease renews instead).
    heartbeat: Option<Duration>,
    next_heartbeat: Instant,
    watchdog: Option<Duration>,
    max_runtime: Option<MaxRuntime>,
    /// Where COMMAND beats, its modification time when last looked at, and
    /// when it was last seen to change (a beat).
    seen_modified: Option<SystemTime>,
    last_beat: Instant,
    job: String,
    pub(crate) stopped_for: Option<Limit>,
}

impl Limits {
    /// The limits of a COMMAND that starts now under `hold`.
    pub(crate) fn new(hold: &dyn Hold, args: &RunArgs) -> Limits {
        let started = Instant::now();
        let heartbeat = hold.heartbeat_every();
        Limits {
            heartbeat,
            next_heartbeat: supervise::after(heartbeat.unwrap_or(Duration::MAX)),
            watchdog: args.watchdog,
            max_runtime: MaxRuntime::new(args.max_runtime, started),
            seen_modified: hold.beaten(),
            last_beat: started,
            job: hold.record().job.clone().unwrap_or_default(),
            stopped_for: None,
        }
    }

    /// Whether a limit applies to the run (and so to what it leaves behind).
    pub(crate) fn any(&self) -> bool {
        self.watchdog.is_some() || self.max_runtime.is_some()
    }

    /// The earliest moment something is due; only the heartbeat once a
    /// signal from outside was forwarded.
    fn next_wake(&self, forwarded: bool) -> Instant {
        let far = supervise::after(Duration::MAX);
        let heartbeat = self.heartbeat.map_or(far, |_| self.next_heartbeat);
        if forwarded {
            return heartbeat;
        }
        let watchdog = self
            .watchdog
            .and_then(|w| self.last_beat.checked_add(w))
            .unwrap_or(far);
        let runtime = self.max_runtime.as_ref().map_or(far, MaxRuntime::deadline);
        heartbeat.min(watchdog).min(runtime)
    }

    /// Beats for the hold when due, watches COMMAND's beats and the clock,
    /// and asks for a stop when a limit is reached at `now`.
    pub(crate) fn watch(&mut self, hold: &dyn Hold, stop: &StopSequence, now: Instant) -> Wake {
        if stop.stopping() {
            // The sequence runs its course; nothing here adds to it.
            return Wake::never();
        }
        if let Some(interval) = self.heartbeat
            && now >= self.next_heartbeat
        {
            hold.heartbeat();
            self.next_heartbeat = supervise::after(interval);
        }
        if stop.forwarded() {
            // Someone else is stopping the run (an evictor, an operator):
            // it is not this run's limit that ends it. Only the heartbeat
            // goes on.
            return Wake::at(self.next_wake(true));
        }
        if let Some(threshold) = self.watchdog {
            // Any change of the modification time is a beat: COMMAND's own
            // clock may differ from ours, and only the change matters.
            let modified = hold.beaten();
            if modified != self.seen_modified {
                self.seen_modified = modified;
                self.last_beat = now;
            }
            let silent = now.duration_since(self.last_beat);
            if silent >= threshold {
                errln!(
                    "lockfile: job {} has not beaten for {} (watchdog {}): stopping it and everything it started",
                    lockfile::text::quoted(&self.job),
                    humantime::format_duration(Duration::from_millis(silent.as_millis() as u64)),
                    humantime::format_duration(threshold)
                );
                tracing::warn!(
                    name: "heartbeat_silent",
                    event = "heartbeat_silent",
                    lock = %hold.label(),
                    job = &*self.job,
                    silent_ms = silent.as_millis() as u64,
                    threshold_ms = threshold.as_millis() as u64,
                );
                return self.stop(Limit::Watchdog);
            }
        }
        if self
            .max_runtime
            .as_ref()
            .is_some_and(|m| m.check(&self.job, now))
        {
            return self.stop(Limit::MaxRuntime);
        }
        Wake::at(self.next_wake(false))
    }

    fn stop(&mut self, limit: Limit) -> Wake {
        self.stopped_for = Some(limit);
        Wake {
            stop: Some(Stop::Terminate { kill_by: None }),
            next: supervise::after(Duration::MAX),
        }
    }
}

/// `--max-runtime`: when COMMAND started and how long it may run.
#[derive(Clone, Copy, Debug)]
struct MaxRuntime {
    limit: Duration,
    /// When COMMAND started, on the monotonic clock: a step of the wall
    /// clock must not stop a job early, nor let it overrun.
    started: Instant,
}

impl MaxRuntime {
    /// The limit for a COMMAND that started at `started`, if there is one.
    fn new(limit: Option<Duration>, started: Instant) -> Option<MaxRuntime> {
        limit.map(|limit| MaxRuntime { limit, started })
    }

    /// When the limit is reached (a year away for a limit too large to add).
    fn deadline(&self) -> Instant {
        self.started
            .checked_add(self.limit)
            .unwrap_or_else(|| supervise::after(Duration::MAX))
    }

    /// Whether the limit is reached at `now`; if so, says on stderr that
    /// `job` is being stopped for it, before the stop sequence begins.
    fn check(&self, job: &str, now: Instant) -> bool {
        if now.duration_since(self.started) < self.limit {
            return false;
        }
        errln!(
            "lockfile: job {} reached its maximum runtime of {}: stopping it and everything it started",
            lockfile::text::quoted(job),
            humantime::format_duration(self.limit)
        );
        true
    }
}
