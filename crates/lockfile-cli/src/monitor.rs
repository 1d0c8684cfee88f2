//! Telling the monitoring system about a run: the options, and the four
//! moments `run` reports, whether it holds a file lock or a lease.
//!
//! - [`Monitor::new`] before taking the lock (a bad option is a usage error);
//! - [`Monitor::skipped`] (or [`Monitor::skipped_file`]) instead of printing
//!   the line that names the holder, when the lock is held;
//! - [`Monitor::started`] once the lock is taken, just before COMMAND;
//! - [`Monitor::finished`] once COMMAND ended, before the lock is released
//!   (after the release, the next run could write its start first).
//!
//! Each hook is cheap when no option asks for it, and none ever changes the
//! exit status.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use clap::Args;
use lockfile::{Outcome, Unhealthy};

use crate::metrics::MetricsSink;
use crate::ping::{Ping, Pinger};

/// The options of `run` that tell the monitoring system.
#[derive(Debug, Args)]
pub(crate) struct MonitorArgs {
    /// Write the run's metrics for node_exporter's textfile collector to
    /// DIR/lockfile-JOB.prom (atomically, mode 0644). A skip counts there
    /// too.
    #[arg(long, value_name = "DIR", env = "LOCKFILE_METRICS_DIR")]
    pub(crate) metrics_dir: Option<PathBuf>,

    /// Ping a dead man's switch in the healthchecks.io protocol: URL/start
    /// when COMMAND starts, URL on success, URL/STATUS on failure, URL/fail
    /// when it was stopped, URL/log on a skip (URL/fail behind an unhealthy
    /// holder). Best effort: never changes the exit status.
    #[arg(long, value_name = "URL")]
    pub(crate) ping: Option<String>,

    /// With --ping: send the last N bytes of COMMAND's output with the final
    /// ping (default 0: none). COMMAND's stdout and stderr then pass through
    /// pipes, so COMMAND no longer sees a terminal.
    #[arg(long, value_name = "N", default_value_t = 0, requires = "ping")]
    pub(crate) ping_log_bytes: usize,

    /// Print nothing on a skip behind a healthy holder, as flock(1). A
    /// holder whose heartbeat is silent, that overran its own maximum
    /// runtime, or whose recorded owner is dead is still reported.
    #[arg(short = 'q', long)]
    pub(crate) quiet: bool,
}

/// What one `lockfile run` tells the monitoring system, its pings through
/// `P`.
#[derive(Debug)]
pub(crate) struct Monitor<P = Pinger> {
    metrics: Option<MetricsSink>,
    ping: Option<P>,
    quiet: bool,
    /// When COMMAND started: set by `started`, taken by `finished`, so
    /// that a run is finished once.
    run: Option<Instant>,
}

impl<P: Ping> Monitor<P> {
    /// The monitor of a run of `job` on `lock` (a lock file's path, or a
    /// lease's name).
    ///
    /// # Errors
    ///
    /// A message for a usage error: a URL that is not one, or `--ping` in a
    /// build without the `ping` feature.
    pub(crate) fn new(args: &MonitorArgs, job: &str, lock: &str) -> Result<Monitor<P>, String> {
        let ping = P::from_args(args)?;
        Ok(Monitor {
            metrics: args
                .metrics_dir
                .as_deref()
                .map(|dir| MetricsSink::new(dir, job, lock)),
            ping,
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
            metrics.skipped(SystemTime::now());
        }
        if let Some(ping) = &mut self.ping {
            ping.skipped(line, unhealthy.as_ref());
        }
    }

    /// [`Monitor::skipped`] for a lock file, judged by inspecting it.
    pub(crate) fn skipped_file(&mut self, lock: &Path, line: &str) {
        self.skipped(line, || lockfile::inspect(lock).ok()?.unhealthy());
    }

    /// COMMAND is about to start as the run `token`. The start ping holds it
    /// back for a few seconds at most.
    pub(crate) fn started(&mut self, token: impl std::fmt::Display) {
        let now = SystemTime::now();
        self.run = Some(Instant::now());
        if let Some(metrics) = &mut self.metrics {
            metrics.started(now);
        }
        if let Some(ping) = &mut self.ping {
            ping.started(&token.to_string());
        }
    }

    /// COMMAND ended with `outcome`, and the wrapper exits with
    /// `exit_code`. Does nothing unless `started` was called, or a second
    /// time.
    pub(crate) fn finished(&mut self, outcome: Outcome, exit_code: i32) {
        let Some(began) = self.run.take() else {
            return;
        };
        let duration = began.elapsed();
        if let Some(metrics) = &mut self.metrics {
            let success_at = (outcome == Outcome::Succeeded).then(SystemTime::now);
            metrics.finished(outcome, exit_code, duration, success_at);
        }
        if let Some(ping) = &mut self.ping {
            ping.finished(outcome, exit_code);
        }
    }
}

/// The outcome of a run told by its exit status alone: 0 succeeded,
/// anything else failed.
#[cfg(feature = "etcd")]
pub(crate) fn outcome_of(exit_code: i32) -> Outcome {
    if exit_code == 0 {
        Outcome::Succeeded
    } else {
        Outcome::Failed
    }
}
