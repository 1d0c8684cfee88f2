//! How long an acquire waits for a held lock: the one spelling shared by the
//! file lock and the lease.

use std::time::{Duration, Instant};

/// How long an acquire may wait while someone else holds the lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
// Exhaustive on purpose: not at all, for ever, or until a moment covers
// every wait.
#[allow(clippy::exhaustive_enums)]
pub enum Wait {
    /// Not at all: fail at once with a contention error. The default.
    #[default]
    No,
    /// As long as it takes.
    Forever,
    /// Until this moment on the monotonic clock.
    Until(Instant),
}

impl Wait {
    /// Waits up to `timeout` from now, or forever without one (or when it is
    /// too long to add to the clock).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use lockfile::wait::Wait;
    /// assert_eq!(Wait::up_to(None), Wait::Forever);
    /// assert!(matches!(Wait::up_to(Some(Duration::from_secs(1))), Wait::Until(_)));
    /// assert_eq!(Wait::up_to(Some(Duration::MAX)), Wait::Forever);
    /// ```
    pub fn up_to(timeout: Option<Duration>) -> Wait {
        match timeout {
            None => Wait::Forever,
            Some(t) => Instant::now()
                .checked_add(t)
                .map_or(Wait::Forever, Wait::Until),
        }
    }
}
