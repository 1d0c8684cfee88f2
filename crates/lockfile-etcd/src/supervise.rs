//! The stop policy for work done under a lease: when to ask it to stop, and
//! when to stop it for good, so that it never outlives the lease.

use std::time::{Duration, Instant};

use crate::LeaseSignal;

/// What a supervisor of work done under a lease (a child process, a worker
/// thread) should do now. See [`LeaseSignal::step`].
///
/// The policy, for a `grace` period:
///
/// - while more than `grace` remains before the deadline: [`Step::Continue`];
/// - within `grace` of the deadline (renewals have been failing for
///   `TTL - grace`): [`Step::Terminate`], ask the work to stop (SIGTERM);
/// - at the deadline, or as soon as the lease is lost for any other reason:
///   [`Step::Kill`], stop it now (SIGKILL).
///
/// Renewals normally keep the deadline between two thirds of a TTL and a
/// whole TTL ahead, so a `grace` under `TTL / 3` never fires while etcd
/// answers. `TTL / 3` (see [`LeaseSignal::default_grace`]) asks the work to
/// stop after two renewals in a row have failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// All is well. Look again by `terminate_at` (later, if renewals succeed).
    Continue {
        /// When the work will have to be asked to stop unless a renewal
        /// succeeds first.
        terminate_at: Instant,
    },
    /// Renewals are failing: ask the work to stop, and stop it for good at
    /// `kill_at` if it has not (later, if a renewal succeeds meanwhile).
    Terminate {
        /// The lease's deadline.
        kill_at: Instant,
    },
    /// The lease may have lapsed: stop the work now.
    Kill,
}

impl LeaseSignal {
    /// A `grace` for [`step`](LeaseSignal::step): a third of the TTL.
    pub fn default_grace(&self) -> Duration {
        self.ttl() / 3
    }

    /// What to do now under the stop policy described at [`Step`].
    pub fn step(&self, grace: Duration) -> Step {
        let st = self.shared.lock();
        let now = Instant::now();
        match self.shared.poll_locked(st, now) {
            None => Step::Kill,
            Some(st) => decide(st.deadline, grace, now),
        }
    }

    /// Blocks until the policy says [`Step::Terminate`] or [`Step::Kill`],
    /// or until `until` (then [`Step::Continue`]), whichever comes first.
    /// Wakes at once when the lease is lost.
    ///
    /// A command wrapper's loop:
    ///
    /// ```no_run
    /// # fn main() -> Result<(), lockfile_etcd::Error> {
    /// use std::time::{Duration, Instant};
    /// use lockfile_etcd::Step;
    ///
    /// let guard = lockfile_etcd::LeaseGuard::try_acquire("nightly")?;
    /// let signal = guard.signal();
    /// let grace = signal.default_grace();
    /// let mut child = std::process::Command::new("backup")
    ///     .env("LOCKFILE_FENCING_TOKEN", guard.fencing_token().to_string())
    ///     .spawn()
    ///     .unwrap();
    /// let mut terminated = false;
    /// while child.try_wait().unwrap().is_none() {
    ///     match signal.wait_step(grace, Instant::now() + Duration::from_millis(100)) {
    ///         Step::Continue { .. } => {}
    ///         Step::Terminate { .. } if !terminated => {
    ///             terminated = true; // send SIGTERM to the child here
    ///         }
    ///         Step::Terminate { .. } => {}
    ///         Step::Kill => {
    ///             child.kill().unwrap(); // SIGKILL
    ///             child.wait().unwrap();
    ///         }
    ///         _ => {}
    ///     }
    /// }
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn wait_step(&self, grace: Duration, until: Instant) -> Step {
        let mut st = self.shared.lock();
        loop {
            let now = Instant::now();
            st = match self.shared.poll_locked(st, now) {
                Some(st) => st,
                None => return Step::Kill,
            };
            let step = decide(st.deadline, grace, now);
            let terminate_at = match step {
                Step::Continue { terminate_at } => terminate_at,
                _ => return step,
            };
            if now >= until {
                return step;
            }
            let wake = terminate_at.min(until);
            st = self
                .shared
                .wait_timeout(st, wake.saturating_duration_since(now));
        }
    }
}

fn decide(deadline: Instant, grace: Duration, now: Instant) -> Step {
    if now >= deadline {
        return Step::Kill;
    }
    let terminate_at = deadline.checked_sub(grace).unwrap_or(now);
    if now >= terminate_at {
        Step::Terminate { kill_at: deadline }
    } else {
        Step::Continue { terminate_at }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::signal::Shared;
    use crate::{LostReason, LostReason::DeadlinePassed};

    fn signal(ttl: Duration, renewed: Instant) -> LeaseSignal {
        LeaseSignal {
            shared: Arc::new(Shared::new("lockfile/locks/t", ttl, renewed)),
        }
    }

    #[test]
    fn the_policy_terminates_within_grace_and_kills_at_the_deadline() {
        let now = Instant::now();
        let deadline = now + Duration::from_secs(10);
        let grace = Duration::from_secs(3);
        assert_eq!(
            decide(deadline, grace, now),
            Step::Continue {
                terminate_at: now + Duration::from_secs(7)
            }
        );
        assert_eq!(
            decide(deadline, grace, now + Duration::from_secs(7)),
            Step::Terminate { kill_at: deadline }
        );
        assert_eq!(decide(deadline, grace, deadline), Step::Kill);
        // A grace longer than what is left asks for termination at once.
        assert_eq!(
            decide(deadline, Duration::from_secs(60), now),
            Step::Terminate { kill_at: deadline }
        );
    }

    #[test]
    fn a_passed_deadline_is_noticed_without_the_renewal_thread() {
        let ttl = Duration::from_millis(200);
        let s = signal(ttl, Instant::now());
        assert!(s.check().is_ok());
        assert!(matches!(s.step(Duration::ZERO), Step::Continue { .. }));
        let started = Instant::now();
        let reason = s
            .wait_lost(Duration::from_secs(5))
            .expect("lost by its deadline");
        assert!(matches!(reason, DeadlinePassed { .. }), "{reason:?}");
        // Woken by the deadline itself: not early, not much later.
        assert!(Instant::now() >= s.deadline());
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(s.check().unwrap_err().is_lost());
        assert_eq!(s.step(Duration::ZERO), Step::Kill);
        assert!(s.lost_at().unwrap() >= s.deadline());
    }

    #[test]
    fn renewals_move_the_deadline_and_loss_sticks() {
        let ttl = Duration::from_secs(3);
        let start = Instant::now();
        let s = signal(ttl, start);
        s.shared.renewed(start + Duration::from_secs(1), ttl);
        assert_eq!(s.deadline(), start + Duration::from_secs(4));
        assert_eq!(s.last_renewal(), start + Duration::from_secs(1));
        // An older success never moves the deadline back.
        s.shared.renewed(start, ttl);
        assert_eq!(s.deadline(), start + Duration::from_secs(4));
        s.shared.renewal_failed();
        s.shared.renewal_failed();
        assert_eq!(s.failed_renewals(), 2);

        let (tx, rx) = std::sync::mpsc::channel();
        s.on_lost(move |reason| tx.send(reason.clone()).unwrap());
        s.shared.lose(LostReason::KeyDeleted { revision: 7 });
        assert_eq!(
            rx.try_recv().unwrap(),
            LostReason::KeyDeleted { revision: 7 }
        );
        // Nothing brings a lost lease back, and the first reason stays.
        s.shared.renewed(Instant::now(), ttl);
        s.shared.lose(LostReason::Expired);
        assert_eq!(
            s.lost_reason(),
            Some(LostReason::KeyDeleted { revision: 7 })
        );
        assert_eq!(s.wait_step(Duration::ZERO, Instant::now()), Step::Kill);
        // A late subscriber hears at once.
        let (tx, rx) = std::sync::mpsc::channel();
        s.on_lost(move |reason| tx.send(reason.clone()).unwrap());
        assert!(rx.try_recv().is_ok());
    }

    #[test]
    fn wait_step_wakes_when_the_lease_is_lost() {
        let s = signal(Duration::from_secs(60), Instant::now());
        let waiter = {
            let s = s.clone();
            std::thread::spawn(move || {
                s.wait_step(
                    Duration::from_secs(1),
                    Instant::now() + Duration::from_secs(30),
                )
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        s.shared.lose(LostReason::Expired);
        assert_eq!(waiter.join().unwrap(), Step::Kill);
    }
}
