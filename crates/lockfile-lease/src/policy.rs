//! The stop policy for work done under a lease: when to ask it to stop, and
//! when to stop it for good, so that it is gone by the deadline.

use std::time::{Duration, Instant};

use crate::LeaseSignal;

/// When to stop work done under a lease (a child process, a worker thread)
/// as the deadline nears. See [`LeaseSignal::step`].
///
/// - While more than `grace` remains before the deadline:
///   [`Step::Continue`].
/// - Within `grace` of the deadline (renewals have been failing for
///   `TTL - grace`): [`Step::Terminate`], ask the work to stop (SIGTERM).
/// - Within `kill_ahead` of the deadline, or as soon as the lease is lost:
///   [`Step::Kill`], stop it now (SIGKILL), so that it is dead by the
///   deadline.
///
/// Renewals normally keep the deadline between two thirds of a TTL and a
/// whole TTL ahead, so a `grace` under `TTL / 3` never fires while the
/// server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopPolicy {
    grace: Duration,
    kill_ahead: Duration,
}

impl StopPolicy {
    /// Ask the work to stop `grace` before the deadline, and kill it
    /// [`DEFAULT_KILL_AHEAD`](StopPolicy::DEFAULT_KILL_AHEAD) before it.
    pub fn new(grace: Duration) -> StopPolicy {
        StopPolicy {
            grace,
            kill_ahead: StopPolicy::DEFAULT_KILL_AHEAD,
        }
    }

    /// How long before the deadline [`Step::Kill`] comes, unless told:
    /// time for a SIGKILL to be delivered and the process to die.
    pub const DEFAULT_KILL_AHEAD: Duration = Duration::from_millis(100);

    /// The policy for a lease with this TTL: ask the work to stop a third of a
    /// TTL before the deadline (after two renewals in a row failed), kill it
    /// [`DEFAULT_KILL_AHEAD`](StopPolicy::DEFAULT_KILL_AHEAD) before it.
    pub fn for_ttl(ttl: Duration) -> StopPolicy {
        StopPolicy::new(ttl / 3)
    }

    /// Kill this long before the deadline instead.
    #[must_use]
    pub fn kill_ahead(mut self, kill_ahead: Duration) -> StopPolicy {
        self.kill_ahead = kill_ahead;
        self
    }

    /// How long before the deadline the work is asked to stop.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// What to do at `now` for a lease whose deadline is `deadline` (and that
    /// is not known to be lost).
    pub fn decide(&self, deadline: Instant, now: Instant) -> Step {
        let kill_at = deadline.checked_sub(self.kill_ahead).unwrap_or(now);
        if now >= kill_at {
            return Step::Kill;
        }
        let terminate_at = deadline.checked_sub(self.grace).unwrap_or(now);
        if now >= terminate_at {
            Step::Terminate { kill_at }
        } else {
            Step::Continue { terminate_at }
        }
    }
}

/// What a supervisor of work done under a lease should do now, under a
/// [`StopPolicy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// All is well. Nothing is due before `terminate_at` (which moves later
    /// with every successful renewal).
    Continue {
        /// When the work will have to be asked to stop unless a renewal
        /// succeeds first.
        terminate_at: Instant,
    },
    /// Renewals are failing: ask the work to stop, and kill it at `kill_at`
    /// if it has not stopped (later, if a renewal succeeds meanwhile).
    Terminate {
        /// When [`Step::Kill`] comes.
        kill_at: Instant,
    },
    /// The deadline is about to pass or the lease is lost: stop the work now.
    Kill,
}

impl Step {
    fn same_kind(&self, other: &Step) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

impl LeaseSignal {
    /// [`StopPolicy::for_ttl`](crate::policy::StopPolicy::for_ttl) with this lease's TTL.
    pub fn default_policy(&self) -> StopPolicy {
        StopPolicy::for_ttl(self.ttl())
    }

    /// What to do now under `policy`.
    pub fn step(&self, policy: StopPolicy) -> Step {
        let st = self.shared.lock();
        let now = Instant::now();
        match self.shared.poll_locked(st, now) {
            None => Step::Kill,
            Some(st) => policy.decide(st.deadline, now),
        }
    }

    /// Blocks until the step under `policy` differs from what it was on entry
    /// (`Continue` becomes `Terminate` or `Kill`, `Terminate` becomes `Kill`,
    /// or back to `Continue` when a renewal succeeds), or until `until`;
    /// returns the step then. Returns at once with [`Step::Kill`].
    ///
    /// Wakes by itself when a step falls due, and at once when the lease is
    /// lost: nothing has to poll. A command wrapper's loop:
    ///
    /// ```no_run
    /// use std::time::{Duration, Instant};
    /// use lockfile_lease::Lease;
    /// use lockfile_lease::policy::Step;
    ///
    /// fn run_under(lease: &dyn Lease) -> std::io::Result<()> {
    ///     let signal = lease.signal();
    ///     let policy = signal.default_policy();
    ///     let mut child = std::process::Command::new("backup")
    ///         .env("LOCKFILE_FENCING_TOKEN", lease.fencing_token().to_string())
    ///         .spawn()?;
    ///     let mut terminated = false;
    ///     // Look at the child at least every 100 ms; the lease wakes us sooner.
    ///     while child.try_wait()?.is_none() {
    ///         match signal.wait_step(policy, Instant::now() + Duration::from_millis(100)) {
    ///             Step::Terminate { .. } if !terminated => {
    ///                 terminated = true; // send SIGTERM to the child here
    ///             }
    ///             Step::Kill => {
    ///                 child.kill()?; // SIGKILL
    ///                 child.wait()?;
    ///             }
    ///             _ => {}
    ///         }
    ///     }
    ///     Ok(())
    /// }
    /// ```
    pub fn wait_step(&self, policy: StopPolicy, until: Instant) -> Step {
        let mut st = self.shared.lock();
        let mut entry: Option<Step> = None;
        loop {
            let now = Instant::now();
            st = match self.shared.poll_locked(st, now) {
                Some(st) => st,
                None => return Step::Kill,
            };
            let step = policy.decide(st.deadline, now);
            let wake = match step {
                Step::Kill => return step,
                Step::Continue { terminate_at } => terminate_at,
                Step::Terminate { kill_at } => kill_at,
            };
            match &entry {
                None => entry = Some(step),
                Some(first) if !first.same_kind(&step) => return step,
                Some(_) => {}
            }
            if now >= until {
                return step;
            }
            st = self
                .shared
                .wait_timeout(st, wake.min(until).saturating_duration_since(now));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::signal::Shared;
    use crate::{LostReason, LostReason::DeadlinePassed};

    fn signal(ttl: Duration, renewed: Instant) -> LeaseSignal {
        LeaseSignal::new(Arc::new(Shared::new("lockfile/locks/t", ttl, renewed)))
    }

    #[test]
    fn the_policy_terminates_within_grace_and_kills_before_the_deadline() {
        let now = Instant::now();
        let s = |secs: u64| Duration::from_secs(secs);
        let deadline = now + s(10);
        let policy = StopPolicy::new(s(3)).kill_ahead(s(1));
        assert_eq!(
            policy.decide(deadline, now),
            Step::Continue {
                terminate_at: now + s(7)
            }
        );
        assert_eq!(
            policy.decide(deadline, now + s(7)),
            Step::Terminate {
                kill_at: now + s(9)
            }
        );
        assert_eq!(policy.decide(deadline, now + s(9)), Step::Kill);
        assert_eq!(policy.decide(deadline, deadline), Step::Kill);
        // A grace longer than what is left asks for termination at once.
        assert_eq!(
            StopPolicy::new(s(60)).decide(deadline, now),
            Step::Terminate {
                kill_at: deadline - StopPolicy::DEFAULT_KILL_AHEAD
            }
        );
        assert_eq!(StopPolicy::for_ttl(s(9)).grace(), s(3));
    }

    #[test]
    fn a_passed_deadline_is_noticed_without_the_renewal_thread() {
        let ttl = Duration::from_millis(200);
        let s = signal(ttl, Instant::now());
        let policy = StopPolicy::new(Duration::ZERO).kill_ahead(Duration::ZERO);
        assert!(s.check().is_ok());
        assert!(matches!(s.step(policy), Step::Continue { .. }));
        let started = Instant::now();
        let reason = s
            .wait_lost(Duration::from_secs(5))
            .expect("lost by its deadline");
        assert!(matches!(reason, DeadlinePassed { .. }), "{reason:?}");
        // Woken by the deadline itself: not early, not much later.
        assert!(Instant::now() >= s.deadline());
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(s.check().unwrap_err().is_lost());
        assert_eq!(s.step(policy), Step::Kill);
        assert!(s.lost_at().unwrap() >= s.deadline());
    }

    #[test]
    fn wait_step_wakes_as_each_step_falls_due() {
        let ttl = Duration::from_millis(600);
        let start = Instant::now();
        let s = signal(ttl, start);
        let policy =
            StopPolicy::new(Duration::from_millis(300)).kill_ahead(Duration::from_millis(100));
        let far = start + Duration::from_secs(30);
        match s.wait_step(policy, far) {
            Step::Terminate { kill_at } => {
                assert!(start.elapsed() >= Duration::from_millis(300));
                assert_eq!(kill_at, start + Duration::from_millis(500));
            }
            other => panic!("{other:?}"),
        }
        // From Terminate, the next change is Kill, ahead of the deadline.
        assert_eq!(s.wait_step(policy, far), Step::Kill);
        let killed = start.elapsed();
        assert!(killed >= Duration::from_millis(500), "{killed:?}");
        assert!(killed < Duration::from_secs(2), "{killed:?}");
        assert!(s.check().is_ok(), "Kill comes before the lease is lost");
        // Until passes first: the step as it is.
        let s = signal(Duration::from_secs(60), Instant::now());
        let until = Instant::now() + Duration::from_millis(50);
        assert!(matches!(s.wait_step(policy, until), Step::Continue { .. }));
        assert!(Instant::now() >= until);
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
        assert_eq!(s.wait_step(s.default_policy(), Instant::now()), Step::Kill);
        // A late subscriber hears at once.
        let (tx, rx) = std::sync::mpsc::channel();
        s.on_lost(move |reason| tx.send(reason.clone()).unwrap());
        assert!(rx.try_recv().is_ok());
    }

    #[test]
    fn poll_says_true_only_once_the_deadline_has_passed() {
        let start = Instant::now();
        let renewals = crate::signal::Renewals::new("k", Duration::from_secs(5), start);
        assert!(!renewals.poll(start + Duration::from_secs(4)));
        assert!(renewals.lost().is_none());
        assert!(renewals.poll(start + Duration::from_secs(5)));
        assert!(matches!(renewals.lost(), Some(DeadlinePassed { .. })));
        // Once lost, always.
        assert!(renewals.poll(start));
    }

    #[test]
    fn wait_step_wakes_when_the_lease_is_lost() {
        let s = signal(Duration::from_secs(60), Instant::now());
        let waiter = {
            let s = s.clone();
            std::thread::spawn(move || {
                s.wait_step(
                    StopPolicy::new(Duration::from_secs(1)),
                    Instant::now() + Duration::from_secs(30),
                )
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        s.shared.lose(LostReason::Expired);
        assert_eq!(waiter.join().unwrap(), Step::Kill);
    }
}
