//! `InspectOptions`: the thresholds of an inspection. None is hard-coded.

use std::time::Duration;

/// Thresholds for `inspect`. None is hard-coded; each has a documented default.
///
/// ```
/// use std::time::Duration;
/// # fn main() -> Result<(), lockfile::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// let report = lockfile::InspectOptions::new()
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
