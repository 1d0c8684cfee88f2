//! `InspectOptions`: the thresholds of an inspection. None is hard-coded.

use std::time::{Duration, SystemTime};

use super::finding::{Finding, TimeField};
use crate::OwnerRecord;
use crate::history::LastRun;
use crate::tick::Claim;

/// Thresholds for `inspect`. None is hard-coded; each has a documented default.
///
/// ```
/// use std::time::Duration;
/// # fn main() -> Result<(), lockfile::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// let report = lockfile::inspect::InspectOptions::new()
///     .max_age(Duration::from_secs(3600))
///     .expect_every(Duration::from_secs(86400))
///     .inspect(dir.path().join("nightly.lock"))?;
/// assert_eq!(report.state, lockfile::LockState::Absent);
/// assert_eq!(report.findings[0].kind(), "never_succeeded");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct InspectOptions {
    pub(super) max_age: Option<Duration>,
    pub(super) stale_after: Option<Duration>,
    pub(super) expect_every: Option<Duration>,
}

impl InspectOptions {
    /// Options with every default.
    pub fn new() -> InspectOptions {
        InspectOptions::default()
    }

    /// Report `aged` when a lock has been held longer than this.
    ///
    /// Default: off. How long a run may take is the job's business; a lock
    /// held for long is not wrong in itself (a hung one is: see
    /// [`stale_after`](InspectOptions::stale_after)).
    pub fn max_age(&mut self, max_age: Duration) -> &mut Self {
        self.max_age = Some(max_age);
        self
    }

    /// Report `heartbeat_silent` when a held lock's heartbeat is older than this.
    ///
    /// Default: three times the heartbeat interval the holder promised in its
    /// record; off when it promised none.
    pub fn stale_after(&mut self, stale_after: Duration) -> &mut Self {
        self.stale_after = Some(stale_after);
        self
    }

    /// Expect a recorded success at least this often: report `never_succeeded`
    /// or `silent` otherwise. The alarm on silence: a job that never starts
    /// produces no error of its own.
    ///
    /// Default: off.
    pub fn expect_every(&mut self, period: Duration) -> &mut Self {
        self.expect_every = Some(period);
        self
    }
}

/// The judgements that do not depend on how a lock is held, shared by lock
/// files and leases (the `lockfile-lease` crate): how long the holder has
/// held it, and how long ago the job last succeeded.
impl InspectOptions {
    /// The findings about a run that has held its lock (or lease) for `age`
    /// under `owner`'s record: [`Finding::Aged`](crate::inspect::Finding::Aged) past
    /// [`max_age`](InspectOptions::max_age), [`Finding::Overrunning`](crate::inspect::Finding::Overrunning) past
    /// the maximum runtime the owner recorded.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// let mut owner = lockfile::OwnerRecord::current(Some("nightly"), None);
    /// owner.max_runtime_ms = Some(60_000);
    /// let mut findings = Vec::new();
    /// lockfile::inspect::InspectOptions::new()
    ///     .judge_run(Some((&owner, Duration::from_secs(90))), None, SystemTime::now(), &mut findings);
    /// assert_eq!(findings[0].kind(), "overrunning");
    /// ```
    pub fn judge_run(
        &self,
        held: Option<(&OwnerRecord, Duration)>,
        last_success: Option<SystemTime>,
        now: SystemTime,
        findings: &mut Vec<Finding>,
    ) {
        if let Some((owner, age)) = held {
            self.age_findings(owner, age, findings);
        }
        self.silence_findings(last_success, now, findings);
    }

    /// Whether `time`, which a record or a run history carries as `field`,
    /// is one that can have happened by `now`: not more than a minute ahead
    /// (clocks that share a lock drift by seconds, not minutes). When it is
    /// not, a [`Finding::FutureTime`](crate::inspect::Finding::FutureTime) says so, and the
    /// time must not be believed: a success "0 s ago" for years would mute
    /// the silence alarm. Lock files and every lease engine judge by it.
    pub fn believed(
        field: TimeField,
        time: SystemTime,
        now: SystemTime,
        findings: &mut Vec<Finding>,
    ) -> bool {
        match crate::trust::ahead(time, now) {
            Some(ahead) => {
                findings.push(Finding::FutureTime { field, time, ahead });
                false
            }
            None => true,
        }
    }

    /// What of a run history may be believed at `now`: the last success,
    /// the last run (when every time it carries is possible) and the last
    /// claim on a tick (when it was made in the past), with a
    /// [`Finding::FutureTime`](crate::inspect::Finding::FutureTime) for each impossible time.
    /// Every impossible time is told, not only the first.
    pub fn believed_history(
        history: BelievedHistory,
        now: SystemTime,
        findings: &mut Vec<Finding>,
    ) -> BelievedHistory {
        let last_success = history
            .last_success
            .filter(|&t| Self::believed(TimeField::LastSuccess, t, now, findings));
        let last_run = history.last_run.filter(|run| {
            run.times()
                .map(|t| Self::believed(TimeField::LastRun, t, now, findings))
                .fold(true, |all, one| all & one)
        });
        let last_claimed_tick = history
            .last_claimed_tick
            .filter(|c| Self::believed(TimeField::LastClaimedTick, c.claimed_at, now, findings));
        BelievedHistory {
            last_run,
            last_success,
            last_claimed_tick,
        }
    }

    pub(super) fn age_findings(
        &self,
        owner: &OwnerRecord,
        age: Duration,
        findings: &mut Vec<Finding>,
    ) {
        if let Some(max) = self.max_age
            && age > max
        {
            findings.push(Finding::Aged {
                age,
                threshold: max,
            });
        }
        if let Some(max_runtime) = owner.max_runtime()
            && age > max_runtime
        {
            findings.push(Finding::Overrunning { age, max_runtime });
        }
    }

    /// [`Finding::NeverSucceeded`](crate::inspect::Finding::NeverSucceeded) or [`Finding::Silent`](crate::inspect::Finding::Silent), when
    /// [`expect_every`](InspectOptions::expect_every) is set.
    pub(super) fn silence_findings(
        &self,
        last_success: Option<SystemTime>,
        now: SystemTime,
        findings: &mut Vec<Finding>,
    ) {
        let Some(expect_every) = self.expect_every else {
            return;
        };
        match last_success {
            None => findings.push(Finding::NeverSucceeded { expect_every }),
            Some(t) => {
                let since_success = now.duration_since(t).unwrap_or_default();
                if since_success > expect_every {
                    findings.push(Finding::Silent {
                        since_success,
                        expect_every,
                    });
                }
            }
        }
    }
}

/// The times of a run history that decisions read: as a record or a lease's
/// history keeps them, and what [`InspectOptions::believed_history`] leaves of
/// them.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct BelievedHistory {
    /// The last finished run.
    pub last_run: Option<LastRun>,
    /// When the job last succeeded.
    pub last_success: Option<SystemTime>,
    /// The last claim on a tick.
    pub last_claimed_tick: Option<Claim>,
}

impl BelievedHistory {
    /// A history of these times.
    pub fn new(
        last_run: Option<LastRun>,
        last_success: Option<SystemTime>,
        last_claimed_tick: Option<Claim>,
    ) -> BelievedHistory {
        BelievedHistory {
            last_run,
            last_success,
            last_claimed_tick,
        }
    }
}
