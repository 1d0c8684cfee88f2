//! Telling the monitoring system about a run: the options, and the four
//! moments `run` reports, whether it holds a file lock or a lease.
//!
//! - [`Monitor::new`] before taking the lock (a bad option is a usage error);
//! - [`Monitor::skipped`] (or [`Monitor::skipped_file`]) instead of printing
//!   the line that names the holder, when the lock is held;
//! - [`Monitor::started`] once the lock is taken (and a `--once-per` run's
//!   tick claimed), just before COMMAND;
//! - [`Monitor::finished`] once COMMAND ended, before the lock is released
//!   (after the release, the next run could write its start first).
//!
//! Each hook is cheap when no option asks for it, and none ever changes the
//! exit status.

pub(crate) mod exposition;
pub(crate) mod lease_metrics;
pub(crate) mod lock_metrics;
pub(crate) mod metrics;
pub(crate) mod outcome;
#[cfg(feature = "ping")]
pub(crate) mod ping;
mod run_figures;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use lockfile::history::Outcome;
use lockfile::inspect::Unhealthy;

use crate::cli::MonitorArgs;
use crate::monitor::metrics::{MetricsSink, SkipReason};

/// A build without the `ping` feature has no HTTP client: `--ping` is a
/// usage error there, and no pinger is ever made.
#[cfg(not(feature = "ping"))]
#[derive(Debug)]
enum Pinger {}

#[cfg(not(feature = "ping"))]
impl Pinger {
    fn started(&mut self, _rid: &str, _job: &str) {
        match *self {}
    }

    fn finished(&mut self, _outcome: Outcome, _exit_code: i32, _output: Vec<u8>) {
        match *self {}
    }

    fn skipped(&mut self, _line: &str, _unhealthy: Option<&Unhealthy>) {
        match *self {}
    }
}

#[cfg(feature = "ping")]
use crate::monitor::ping::Pinger;

/// What one `lockfile run` tells the monitoring system.
#[derive(Debug)]
pub(crate) struct Monitor {
    metrics: Option<MetricsSink>,
    ping: Option<Pinger>,
    job: String,
    quiet: bool,
    /// When COMMAND started: set by `started`, taken by `finished`, so
    /// that a run is finished once.
    run: Option<Instant>,
}

impl Monitor {
    /// The monitor of a run of `job` on `lock` (a lock file's path, or a
    /// lease's name).
    ///
    /// # Errors
    ///
    /// A message for a usage error: a URL that is not one, or `--ping` in a
    /// build without the `ping` feature.
    pub(crate) fn new(args: &MonitorArgs, job: &str, lock: &str) -> Result<Monitor, String> {
        #[cfg(feature = "ping")]
        let ping = args.ping.as_deref().map(Pinger::new).transpose()?;
        #[cfg(not(feature = "ping"))]
        let ping: Option<Pinger> = match args.ping {
            None => None,
            Some(_) => {
                return Err(
                    "--ping needs a build with the `ping` feature (cargo install --features ping)"
                        .to_owned(),
                );
            }
        };
        Ok(Monitor {
            metrics: args
                .metrics_dir
                .as_deref()
                .map(|dir| MetricsSink::new(dir, job, lock)),
            ping,
            job: job.to_owned(),
            quiet: args.quiet,
            run: None,
        })
    }

    /// The lock is held: `line` names the holder. Prints it (unless quiet
    /// and the holder is healthy), counts the skip, and pings. `judge` tells
    /// whether the holder is unhealthy; it runs only when it matters.
    pub(crate) fn skipped(&mut self, line: &str, judge: impl FnOnce() -> Option<Unhealthy>) {
        let unhealthy = (self.quiet || self.ping.is_some()).then(judge).flatten();
        if !self.quiet || unhealthy.is_some() {
            errln!("lockfile: {line}");
        }
        if let (true, Some(why)) = (self.quiet, &unhealthy) {
            errln!("lockfile: the holder looks unhealthy: {why}");
        }
        if let Some(metrics) = &mut self.metrics {
            metrics.skipped(SystemTime::now(), SkipReason::Held);
        }
        if let Some(ping) = &mut self.ping {
            ping.skipped(line, unhealthy.as_ref());
        }
    }

    /// [`Monitor::skipped`] for a lock file, judged by inspecting it.
    /// A run whose tick already ran (or that came too late for it), said in
    /// `line`. With `-q` it is silent when `quiet_ok` (the tick's run
    /// succeeded). Pings `/log`.
    pub(crate) fn tick_skipped(&mut self, line: &str, quiet_ok: bool) {
        if !(self.quiet && quiet_ok) {
            errln!("lockfile: {line}");
        }
        if let Some(metrics) = &mut self.metrics {
            metrics.skipped(SystemTime::now(), SkipReason::AlreadyRan);
        }
        if let Some(ping) = &mut self.ping {
            ping.skipped(line, None);
        }
    }

    pub(crate) fn skipped_file(&mut self, lock: &Path, line: &str) {
        self.skipped(line, || lockfile::inspect(lock).ok()?.unhealthy());
    }

    /// A skip because every slot of the set at `lock` is held: as
    /// [`skipped_file`](Self::skipped_file), unhealthy when any slot's
    /// holder is.
    pub(crate) fn skipped_slots(&mut self, lock: &Path, line: &str) {
        self.skipped(line, || {
            let set = lockfile::inspect::InspectOptions::new()
                .inspect_slots(lock)
                .ok()?;
            set.with_slots().find_map(lockfile::LockReport::unhealthy)
        });
    }

    /// COMMAND is about to start as the run `token`, having claimed `tick`
    /// (its time, and the ticks' period) under `--once-per`. The start ping
    /// holds it back for a few seconds at most.
    pub(crate) fn started(
        &mut self,
        token: impl std::fmt::Display,
        tick: Option<(SystemTime, Duration)>,
    ) {
        let now = SystemTime::now();
        self.run = Some(Instant::now());
        if let Some(metrics) = &mut self.metrics {
            metrics.started(now, tick);
        }
        if let Some(ping) = &mut self.ping {
            ping.started(&token.to_string(), &self.job);
        }
    }

    /// COMMAND ended with `outcome`, and the wrapper exits with
    /// `exit_code`; `output` is the tail of its output for the ping
    /// (`--ping-log-bytes`). Does nothing unless `started` was called, or a
    /// second time.
    pub(crate) fn finished(&mut self, outcome: Outcome, exit_code: i32, output: Vec<u8>) {
        let Some(began) = self.run.take() else {
            return;
        };
        let duration = began.elapsed();
        if let Some(metrics) = &mut self.metrics {
            let success_at = (outcome == Outcome::Succeeded).then(SystemTime::now);
            metrics.finished(outcome, exit_code, duration, success_at);
        }
        if let Some(ping) = &mut self.ping {
            ping.finished(outcome, exit_code, output);
        }
    }
}

/// The outcome of a run told by its exit status alone: 0 succeeded,
/// anything else failed.
pub(crate) fn outcome_of(exit_code: i32) -> Outcome {
    if exit_code == 0 {
        Outcome::Succeeded
    } else {
        Outcome::Failed
    }
}
