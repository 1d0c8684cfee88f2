//! `Eviction`: what the new holder's record keeps of the run it evicted.
//! Its own file, because the stop makes it and the acquire writes it: the
//! acquire needs none of the procedure to record its outcome.

use std::time::SystemTime;

use crate::history::{LastRun, Outcome, RunEnd};
use crate::record::{Evicted, LockDocument};

/// A run that was stopped so that this acquire could take its lock: what the
/// new record keeps of it.
#[derive(Debug)]
pub(crate) struct Eviction {
    pub(super) evicted: Evicted,
    /// When the evicted run took the lock.
    pub(super) started_at: SystemTime,
    /// The last run its record carried, before it.
    pub(super) previous_run: Option<LastRun>,
    /// The last signal it was sent: SIGTERM, or SIGKILL when it outlived the grace.
    pub(super) signal: i32,
}

impl Eviction {
    /// Writes the eviction into the new holder's document: `evicted` in the
    /// record, and the evicted run as the last run.
    pub(crate) fn record_into(self, doc: &mut LockDocument) {
        let end = RunEnd {
            outcome: Outcome::Evicted,
            exit_code: None,
            signal: Some(self.signal),
            started_at: self.started_at,
        };
        let last = LastRun::after(self.previous_run.as_ref(), end, crate::clock::now());
        doc.last_run = Some(Box::new(last));
        doc.owner.evicted = Some(Box::new(self.evicted));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::OwnerRecord;

    #[test]
    fn the_evicted_run_becomes_the_last_run_and_counts_as_a_failure() {
        let started_at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let previous = LastRun::after(
            None,
            RunEnd {
                outcome: Outcome::Failed,
                exit_code: Some(1),
                signal: None,
                started_at,
            },
            started_at + Duration::from_secs(5),
        );
        let eviction = Eviction {
            evicted: Evicted {
                token: uuid::Uuid::from_u128(7),
                pid: 42,
                job: Some("job".to_owned()),
                silent_ms: 3_000,
            },
            started_at,
            previous_run: Some(previous),
            signal: libc::SIGTERM,
        };
        let mut doc = LockDocument::new(OwnerRecord::current(Some("job"), None), None, None);
        eviction.record_into(&mut doc);
        let run = doc.last_run.as_deref().unwrap();
        assert_eq!(run.outcome, Outcome::Evicted);
        assert_eq!(run.started_at, started_at);
        assert_eq!(run.signal, Some(libc::SIGTERM));
        assert_eq!(run.consecutive_failures, 2);
        assert_eq!(doc.owner.evicted.as_ref().unwrap().pid, 42);
    }
}
