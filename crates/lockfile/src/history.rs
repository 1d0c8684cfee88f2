//! The run history a lock file keeps across holders: how the last run ended,
//! and how many in a row have failed. `lockfile check` alarms on it.

use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::rfc3339;

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// The job succeeded (exit status 0).
    Succeeded,
    /// The job failed: a non-zero exit status, or a signal.
    Failed,
    /// The job ran past its maximum runtime and was stopped.
    TimedOut,
    /// The job stopped proving progress (its watchdog fired) and was stopped.
    Hung,
    /// Another run stopped the job, judging it hung, and took the lock.
    Evicted,
    /// The job's lease lapsed while it ran (etcd), and it was stopped.
    LeaseLost,
    /// The run claimed its tick (`--once-per`) but never finished: its
    /// wrapper died. Recorded by the next claimant.
    OwnerDead,
}

impl Outcome {
    /// The name used in JSON and tables: `succeeded`, `failed`, `timed_out`,
    /// `hung`, `evicted`, `lease_lost` or `owner_dead`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::TimedOut => "timed_out",
            Outcome::Hung => "hung",
            Outcome::Evicted => "evicted",
            Outcome::LeaseLost => "lease_lost",
            Outcome::OwnerDead => "owner_dead",
        }
    }

    /// Whether a run that ended so used up its tick (`--once-per`): it ran
    /// to an end of its own (`succeeded`, `failed`, `timed_out`, `hung`).
    /// A run stopped from outside (`lease_lost`, `evicted`) or whose wrapper
    /// died (`owner_dead`) leaves its tick to another run.
    pub fn uses_up_tick(self) -> bool {
        matches!(
            self,
            Outcome::Succeeded | Outcome::Failed | Outcome::TimedOut | Outcome::Hung
        )
    }

    /// Every outcome but success counts as a failure.
    pub fn is_failure(self) -> bool {
        self != Outcome::Succeeded
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one run ended, as the run's holder reports it to
/// [`LockGuard::record_outcome`](crate::LockGuard::record_outcome) (or, for
/// a lease on etcd, to the `lockfile-etcd` crate's
/// `LeaseGuard::record_outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// Exhaustive on purpose: a value its caller builds, and what a run reports
// about its end does not grow without a new way to record it.
#[allow(clippy::exhaustive_structs)]
pub struct RunEnd {
    /// How it ended.
    pub outcome: Outcome,
    /// Its exit status, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// When it started.
    pub started_at: SystemTime,
}

/// The last finished run, kept in the lock file across holders (like the last
/// success) until a later run replaces it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LastRun {
    /// When it started.
    #[serde(with = "rfc3339")]
    pub started_at: SystemTime,
    /// When it ended.
    #[serde(with = "rfc3339")]
    pub finished_at: SystemTime,
    /// How long it ran.
    pub duration_seconds: f64,
    /// Its exit status, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// How it ended.
    pub outcome: Outcome,
    /// How many runs in a row have failed, this one included (0 after a
    /// success).
    pub consecutive_failures: u32,
    /// When a run last failed, this one or an earlier one.
    #[serde(with = "rfc3339::option")]
    pub last_failure_at: Option<SystemTime>,
    /// The tick the run claimed (`--once-per`), when it claimed one.
    #[serde(
        default,
        with = "rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub tick: Option<SystemTime>,
    /// The run's token (its owner record's), when it claimed a tick: which
    /// claim this run finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

impl LastRun {
    /// Every time it carries: when it started, ended, and last failed.
    pub(crate) fn times(&self) -> impl Iterator<Item = SystemTime> {
        [self.started_at, self.finished_at]
            .into_iter()
            .chain(self.last_failure_at)
    }

    /// The history after `end`, which finished just now, given the one
    /// before it (`None` for a job's first recorded run): the failures in a
    /// row count up from the previous run's, and a success resets them.
    ///
    /// For holders that keep the history elsewhere than in a lock file
    /// (the `lockfile-etcd` crate keeps it in a key of its own), so that
    /// every kind of lock counts the same way. Times are kept to the
    /// microsecond, as the JSON spells them.
    pub fn finished(previous: Option<&LastRun>, end: RunEnd) -> LastRun {
        let end = RunEnd {
            started_at: crate::clock::to_micros(end.started_at),
            ..end
        };
        LastRun::after(previous, end, crate::clock::now())
    }

    /// As [`finished`](LastRun::finished), dated by another clock that
    /// reads `now` at this moment (a lease server's): the run finished at
    /// `now`, and started as long before it as it ran by this host's clock.
    /// So a history kept on a server holds the server's times, whatever
    /// the host's clock says.
    pub fn finished_on(previous: Option<&LastRun>, end: RunEnd, now: SystemTime) -> LastRun {
        let ran = crate::clock::now()
            .duration_since(end.started_at)
            .unwrap_or(Duration::ZERO);
        let now = crate::clock::to_micros(now);
        let end = RunEnd {
            started_at: crate::clock::to_micros(now.checked_sub(ran).unwrap_or(now)),
            ..end
        };
        LastRun::after(previous, end, now)
    }

    /// The history after `end`, which finished at `now`, given the one
    /// before it.
    pub(crate) fn after(previous: Option<&LastRun>, end: RunEnd, now: SystemTime) -> LastRun {
        let failed = end.outcome.is_failure();
        let consecutive_failures = if failed {
            previous
                .map_or(0, |p| p.consecutive_failures)
                .saturating_add(1)
        } else {
            0
        };
        LastRun {
            started_at: end.started_at,
            finished_at: now,
            duration_seconds: now
                .duration_since(end.started_at)
                .unwrap_or(Duration::ZERO)
                .as_secs_f64(),
            exit_code: end.exit_code,
            signal: end.signal,
            outcome: end.outcome,
            consecutive_failures,
            last_failure_at: if failed {
                Some(now)
            } else {
                previous.and_then(|p| p.last_failure_at)
            },
            tick: None,
            token: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(outcome: Outcome) -> RunEnd {
        RunEnd {
            outcome,
            exit_code: Some(1),
            signal: None,
            started_at: SystemTime::UNIX_EPOCH + Duration::from_secs(100),
        }
    }

    #[test]
    fn a_finished_run_reads_back_as_written() {
        let end = RunEnd {
            started_at: SystemTime::now() - Duration::from_nanos(1_500_123),
            ..end(Outcome::Failed)
        };
        let run = LastRun::finished(None, end);
        let json = serde_json::to_string(&run).unwrap();
        assert_eq!(serde_json::from_str::<LastRun>(&json).unwrap(), run);
        assert_eq!(run.consecutive_failures, 1);
    }

    #[test]
    fn failures_count_up_in_a_row_and_a_success_resets_them() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(160);
        let first = LastRun::after(None, end(Outcome::Failed), now);
        assert_eq!(first.consecutive_failures, 1);
        assert_eq!(first.duration_seconds, 60.0);
        assert_eq!(first.last_failure_at, Some(now));
        let second = LastRun::after(Some(&first), end(Outcome::Hung), now);
        assert_eq!(second.consecutive_failures, 2);
        let ok = LastRun::after(Some(&second), end(Outcome::Succeeded), now);
        assert_eq!(ok.consecutive_failures, 0);
        assert_eq!(ok.last_failure_at, Some(now), "the last failure is kept");
    }
}
