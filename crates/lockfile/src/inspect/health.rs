//! `Unhealthy`: the one predicate that tells a holder worth waking someone for
//! from one that is merely busy. `lockfile run -q` stays quiet on a skip
//! behind a healthy holder, and speaks (and fails its ping) behind an
//! unhealthy one.

use std::fmt;
use std::time::Duration;

use super::finding::Finding;
use super::report::{LockReport, LockState};

/// Why the holder of a held lock is not healthy.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Unhealthy {
    /// Its heartbeat has been silent past the threshold
    /// ([`Finding::HeartbeatSilent`](crate::inspect::Finding::HeartbeatSilent)): the holder may be hung.
    HeartbeatSilent {
        /// Time since the last heartbeat.
        silent: Duration,
        /// The threshold it crossed.
        threshold: Duration,
    },
    /// It has held the lock longer than the maximum runtime it recorded
    /// itself ([`Finding::Overrunning`](crate::inspect::Finding::Overrunning)).
    Overrunning {
        /// How long it has held the lock.
        held: Duration,
        /// The maximum runtime its record promised.
        max_runtime: Duration,
    },
    /// It has held the lock longer than the caller's
    /// [`InspectOptions::max_age`](crate::inspect::InspectOptions::max_age)
    /// ([`Finding::Aged`](crate::inspect::Finding::Aged)).
    Aged {
        /// How long it has held the lock.
        held: Duration,
        /// The age the caller allows.
        max_age: Duration,
    },
    /// The lock is held, but the recorded owner is dead
    /// ([`Finding::OwnerDead`](crate::inspect::Finding::OwnerDead)): whatever holds it now (a process the owner
    /// started, after the owner was killed) is unsupervised.
    OwnerDead {
        /// The recorded PID.
        pid: u32,
        /// How we know.
        reason: String,
    },
}

impl LockReport {
    /// Whether the lock is held by a holder that needs a human: its
    /// heartbeat is silent past the threshold, it has held the lock longer
    /// than its own recorded maximum runtime (or than `max_age` when one was
    /// given), or its recorded owner is dead. The first reason found is
    /// returned, in that order. This is the one judgement of health that
    /// `inspect`, `lockfile check`, the quiet skip and the pings share.
    ///
    /// A lock that is not held is never unhealthy, and neither is a holder
    /// that keeps no record by design ([`LockReport::no_record`]: a foreign
    /// file, a lock held read-only), since nothing it could have written is
    /// there to judge it by.
    ///
    /// The heartbeat threshold is the one the report was made with
    /// ([`InspectOptions::stale_after`](crate::inspect::InspectOptions::stale_after),
    /// by default three times the interval the holder promised).
    pub fn unhealthy(&self) -> Option<Unhealthy> {
        if self.state != LockState::Held || self.no_record.is_some() {
            return None;
        }
        let silent = self.findings.iter().find_map(|f| match f {
            Finding::HeartbeatSilent { silent, threshold } => Some(Unhealthy::HeartbeatSilent {
                silent: *silent,
                threshold: *threshold,
            }),
            _ => None,
        });
        let overrunning = || {
            self.findings.iter().find_map(|f| match f {
                Finding::Overrunning { age, max_runtime } => Some(Unhealthy::Overrunning {
                    held: *age,
                    max_runtime: *max_runtime,
                }),
                Finding::Aged { age, threshold } => Some(Unhealthy::Aged {
                    held: *age,
                    max_age: *threshold,
                }),
                _ => None,
            })
        };
        let dead = || {
            self.findings.iter().find_map(|f| match f {
                Finding::OwnerDead { pid, reason } => Some(Unhealthy::OwnerDead {
                    pid: *pid,
                    reason: reason.clone(),
                }),
                _ => None,
            })
        };
        silent.or_else(overrunning).or_else(dead)
    }
}

impl fmt::Display for Unhealthy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |d: &Duration| humantime::format_duration(Duration::from_secs(d.as_secs()));
        match self {
            Unhealthy::HeartbeatSilent { silent, threshold } => write!(
                f,
                "no heartbeat for {}, longer than {}: the holder may be hung",
                d(silent),
                d(threshold)
            ),
            Unhealthy::Overrunning { held, max_runtime } => write!(
                f,
                "held for {}, longer than its limit of {}",
                d(held),
                d(max_runtime)
            ),
            Unhealthy::Aged { held, max_age } => write!(
                f,
                "held for {}, longer than the {} allowed",
                d(held),
                d(max_age)
            ),
            Unhealthy::OwnerDead { pid, reason } => write!(
                f,
                "the recorded owner pid {pid} is dead ({reason}), yet the lock is still held"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::OwnerRecord;
    use crate::inspect::{Content, NoRecord};

    fn report(state: LockState, findings: Vec<Finding>) -> LockReport {
        let mut owner = OwnerRecord::current(Some("job"), Some(Duration::from_secs(1)));
        owner.max_runtime_ms = Some(60_000);
        LockReport {
            path: PathBuf::from("/x.lock"),
            state,
            owner: Some(owner),
            released: false,
            holders: Vec::new(),
            shared: false,
            age: Some(Duration::from_secs(10)),
            heartbeat_age: Some(Duration::from_secs(1)),
            last_success: None,
            last_run: None,
            last_claimed_tick: None,
            size: 0,
            modified: None,
            content_error: None,
            content: Some(Content::Record),
            no_record: None,
            findings,
            slots: Vec::new(),
        }
    }

    fn silent() -> Finding {
        Finding::HeartbeatSilent {
            silent: Duration::from_secs(9),
            threshold: Duration::from_secs(3),
        }
    }

    fn dead() -> Finding {
        Finding::OwnerDead {
            pid: 7,
            reason: "no such process".to_owned(),
        }
    }

    #[test]
    fn a_busy_holder_that_beats_is_healthy() {
        assert_eq!(report(LockState::Held, Vec::new()).unhealthy(), None);
    }

    #[test]
    fn a_holder_past_max_age_is_overrunning() {
        let aged = Finding::Aged {
            age: Duration::from_secs(10),
            threshold: Duration::from_secs(1),
        };
        assert_eq!(
            report(LockState::Held, vec![aged]).unhealthy(),
            Some(Unhealthy::Aged {
                held: Duration::from_secs(10),
                max_age: Duration::from_secs(1)
            })
        );
    }

    #[test]
    fn silence_overrun_and_a_dead_owner_are_unhealthy_in_that_order() {
        let r = report(LockState::Held, vec![dead(), silent()]);
        assert!(matches!(
            r.unhealthy(),
            Some(Unhealthy::HeartbeatSilent { .. })
        ));
        let overrun = Finding::Overrunning {
            age: Duration::from_secs(61),
            max_runtime: Duration::from_secs(60),
        };
        let r = report(LockState::Held, vec![dead(), overrun]);
        assert_eq!(
            r.unhealthy(),
            Some(Unhealthy::Overrunning {
                held: Duration::from_secs(61),
                max_runtime: Duration::from_secs(60)
            })
        );
        let r = report(LockState::Held, vec![dead()]);
        assert!(matches!(
            r.unhealthy(),
            Some(Unhealthy::OwnerDead { pid: 7, .. })
        ));
    }

    #[test]
    fn a_lock_nobody_holds_or_a_holder_without_a_record_by_design_is_healthy() {
        assert_eq!(report(LockState::Stale, vec![dead()]).unhealthy(), None);
        let mut r = report(LockState::Held, vec![silent()]);
        r.no_record = Some(NoRecord::ReadOnly);
        assert_eq!(r.unhealthy(), None);
    }
}
