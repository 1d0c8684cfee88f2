//! The one judgement of "this holder is unhealthy", shared by `inspect`,
//! `lockfile check`, the quiet skip and the pings.

use super::finding::Finding;
use super::report::{LockReport, LockState};

impl LockReport {
    /// The finding that makes the lock's holder unhealthy, or `None` when it
    /// is healthy (or nobody holds the lock). A holder is unhealthy when:
    ///
    /// - its heartbeat is silent past the threshold (`heartbeat_silent`: by
    ///   default three times the interval it promised);
    /// - it holds the lock past its own recorded maximum runtime
    ///   (`overrunning`), or past [`InspectOptions::max_age`](crate::InspectOptions::max_age)
    ///   when one was given (`aged`);
    /// - its recorded owner is dead while the lock is held (`owner_dead`: a
    ///   process it started holds the lock on).
    ///
    /// A holder that keeps no record by design
    /// ([`no_record`](LockReport::no_record)) raises none of these, and is
    /// healthy.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn main() -> Result<(), lockfile::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("job.lock");
    /// let _guard = lockfile::LockGuard::try_acquire(&path)?;
    /// assert!(lockfile::inspect(&path)?.unhealthy().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn unhealthy(&self) -> Option<&Finding> {
        if self.state != LockState::Held {
            return None;
        }
        self.findings.iter().find(|f| {
            matches!(
                f,
                Finding::HeartbeatSilent { .. }
                    | Finding::Overrunning { .. }
                    | Finding::Aged { .. }
                    | Finding::OwnerDead { .. }
            )
        })
    }
}
