//! `InspectOptions`: the thresholds of an inspection. None is hard-coded.

use std::time::{Duration, SystemTime};

use super::finding::Finding;
use crate::OwnerRecord;

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
