//! `LeaseSignal`: what the holder may believe about its lease, right now;
//! and `Renewals`, the engine's side of it.
//!
//! The engine's renewal thread writes into this state through [`Renewals`];
//! the holder's threads read it through [`LeaseSignal`].
//! Every reader also compares the clock with the deadline itself, so a lost
//! lease is reported on time even when the renewal thread has not run yet
//! (after the whole process was stopped, for example).

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::{Error, LostReason, Result};

type Callback = Box<dyn FnOnce(&LostReason) + Send>;

pub(crate) struct Shared {
    key: String,
    ttl: Duration,
    state: Mutex<State>,
    changed: Condvar,
    /// The same wake-ups as `changed`, for tasks (`ending.rs`).
    notify: tokio::sync::Notify,
}

pub(crate) struct State {
    /// The latest moment the holder can be sure it still holds the lease:
    /// the send time of the last renewal that succeeded, plus the TTL.
    pub(crate) deadline: Instant,
    /// The send time of the last renewal that succeeded (or of the grant).
    pub(crate) last_renewal: Instant,
    /// Renewals that failed since the last one that succeeded.
    pub(crate) failures: u32,
    pub(crate) lost: Option<(LostReason, Instant)>,
    callbacks: Vec<Callback>,
}

impl Shared {
    pub(crate) fn new(key: &str, ttl: Duration, renewed: Instant) -> Shared {
        Shared {
            key: key.to_owned(),
            ttl,
            state: Mutex::new(State {
                deadline: renewed + ttl,
                last_renewal: renewed,
                failures: 0,
                lost: None,
                callbacks: Vec::new(),
            }),
            changed: Condvar::new(),
            notify: tokio::sync::Notify::new(),
        }
    }

    /// Wakes every thread and task that waits for a change.
    fn wake_all(&self) {
        self.changed.notify_all();
        self.notify.notify_waiters();
    }

    /// A wake-up at the next change, for a task: enable it before looking at
    /// the state, so that a change in between is not missed.
    #[cfg(feature = "tokio")]
    pub(crate) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent even if a callback panicked elsewhere.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A renewal sent at `sent` succeeded and the server promised `ttl` from
    /// receipt. A success that arrives after the old deadline passed unseen
    /// still counts: the server would have refused it had the lease lapsed.
    pub(crate) fn renewed(&self, sent: Instant, ttl: Duration) {
        let mut st = self.lock();
        if st.lost.is_some() {
            return;
        }
        if sent > st.last_renewal {
            st.last_renewal = sent;
        }
        st.deadline = st.deadline.max(sent + ttl);
        st.failures = 0;
        drop(st);
        self.wake_all();
    }

    pub(crate) fn renewal_failed(&self) {
        let mut st = self.lock();
        st.failures = st.failures.saturating_add(1);
        drop(st);
        self.wake_all();
    }

    /// Declares the lease lost. The first reason sticks: a lost lease is
    /// never found again.
    pub(crate) fn lose(&self, reason: LostReason) {
        let st = self.lock();
        self.lose_locked(st, reason, Instant::now());
    }

    /// Declares the lease lost if its deadline has passed; true when lost.
    pub(crate) fn poll(&self, now: Instant) -> bool {
        let st = self.lock();
        self.poll_locked(st, now).is_none()
    }

    /// Like [`poll`](Shared::poll) on a held lock; gives the lock back unless
    /// the lease is lost (callbacks run without the lock).
    pub(crate) fn poll_locked<'a>(
        &'a self,
        st: MutexGuard<'a, State>,
        now: Instant,
    ) -> Option<MutexGuard<'a, State>> {
        if st.lost.is_some() {
            return None;
        }
        if now >= st.deadline {
            let reason = LostReason::DeadlinePassed {
                ttl: self.ttl,
                since_renewal: now.saturating_duration_since(st.last_renewal),
            };
            self.lose_locked(st, reason, now);
            return None;
        }
        Some(st)
    }

    fn lose_locked(&self, mut st: MutexGuard<'_, State>, reason: LostReason, now: Instant) {
        if st.lost.is_some() {
            return;
        }
        if reason != LostReason::Released {
            tracing::warn!(
                name: "lease_lost",
                event = "lease_lost",
                key = %self.key,
                reason = %reason,
            );
        }
        st.lost = Some((reason.clone(), now));
        let callbacks = std::mem::take(&mut st.callbacks);
        drop(st);
        self.wake_all();
        for callback in callbacks {
            callback(&reason);
        }
    }

    pub(crate) fn wait_timeout<'a>(
        &self,
        st: MutexGuard<'a, State>,
        timeout: Duration,
    ) -> MutexGuard<'a, State> {
        self.changed
            .wait_timeout(st, timeout)
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }

    pub(crate) fn lost_error(&self, reason: LostReason) -> Error {
        Error::LeaseLost {
            key: self.key.clone(),
            reason,
        }
    }
}

/// A handle on a held lease's state that other threads can keep: the deadline,
/// the lost signal, and the supervision policy.
///
/// Get one from a held lease ([`Lease::signal`](crate::Lease::signal)). It
/// is cheap to clone, `Send` and `Sync`. It stays valid after the lease is
/// released, and then reports [`LostReason::Released`].
///
/// ```
/// use std::time::{Duration, Instant};
/// use lockfile_lease::error::LostReason;
/// use lockfile_lease::signal::Renewals;
///
/// // An engine made this when it took the lease; a holder gets the signal.
/// let renewals = Renewals::new("lockfile/locks/reindex", Duration::from_secs(10), Instant::now());
/// let signal = renewals.signal();
/// let watched = signal.clone();
/// let watchdog = std::thread::spawn(move || {
///     // Blocks until the lease may have lapsed (or is released).
///     if let Some(reason) = watched.wait_lost(Duration::MAX) {
///         eprintln!("stop writing: {reason}");
///     }
/// });
/// // ... the work, calling signal.check()? before each write ...
/// assert!(signal.check().is_ok());
/// renewals.lose(LostReason::Released); // what a release does
/// watchdog.join().unwrap();
/// ```
#[derive(Clone)]
pub struct LeaseSignal {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for LeaseSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.lock();
        f.debug_struct("LeaseSignal")
            .field("key", &self.shared.key)
            .field("ttl", &self.shared.ttl)
            .field("deadline", &st.deadline)
            .field("failures", &st.failures)
            .field("lost", &st.lost.as_ref().map(|(reason, _)| reason))
            .finish()
    }
}

impl LeaseSignal {
    pub(crate) fn new(shared: Arc<Shared>) -> LeaseSignal {
        LeaseSignal { shared }
    }

    /// The key of the lease (its name in the engine's key space).
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The TTL the server granted.
    pub fn ttl(&self) -> Duration {
        self.shared.ttl
    }

    /// The latest moment (on the monotonic clock) the holder can be sure it
    /// still holds the lease: the send time of the last successful renewal
    /// plus the TTL. Moves later with every successful renewal, never
    /// earlier. Past it, [`check`](LeaseSignal::check) fails.
    pub fn deadline(&self) -> Instant {
        self.shared.lock().deadline
    }

    /// The send time of the last renewal that succeeded (at first, of the
    /// grant that created the lease).
    pub fn last_renewal(&self) -> Instant {
        self.shared.lock().last_renewal
    }

    /// How many renewals failed (or went unanswered) since the last one that
    /// succeeded. Above zero means trouble is brewing, not that the lease is
    /// lost: only the deadline says that.
    pub fn failed_renewals(&self) -> u32 {
        self.shared.lock().failures
    }

    /// `Ok` while the lease is certainly held; [`Error::LeaseLost`] as soon
    /// as it may have lapsed: the deadline passed without a successful
    /// renewal, the server answered a renewal that the lease is gone, or the
    /// key was deleted or replaced. Once lost, always lost.
    ///
    /// Call it before every action that relies on the lease. It takes a
    /// mutex and reads the clock: cheap enough for a hot loop.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] with the reason.
    pub fn check(&self) -> Result<()> {
        match self.lost_reason() {
            None => Ok(()),
            Some(reason) => Err(self.shared.lost_error(reason)),
        }
    }

    /// Whether the lease may have lapsed (see [`check`](LeaseSignal::check)).
    pub fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    /// Why the lease is lost, or `None` while it is certainly held.
    pub fn lost_reason(&self) -> Option<LostReason> {
        let st = self.shared.lock();
        match self.shared.poll_locked(st, Instant::now()) {
            Some(_) => None,
            None => self.shared.lock().lost.as_ref().map(|(r, _)| r.clone()),
        }
    }

    /// When the loss was first noticed (on the monotonic clock). For a
    /// deadline that passed, this is at or after the deadline; how long after
    /// depends on when a thread first looked.
    pub fn lost_at(&self) -> Option<Instant> {
        self.lost_reason()?;
        self.shared.lock().lost.as_ref().map(|(_, at)| *at)
    }

    /// Blocks until the lease is lost (returning why) or `timeout` passes
    /// (returning `None`). Wakes at the deadline by itself: no renewal thread
    /// has to run for a passed deadline to be noticed.
    pub fn wait_lost(&self, timeout: Duration) -> Option<LostReason> {
        let until = Instant::now().checked_add(timeout);
        let mut st = self.shared.lock();
        loop {
            let now = Instant::now();
            st = match self.shared.poll_locked(st, now) {
                Some(st) => st,
                None => return self.shared.lock().lost.as_ref().map(|(r, _)| r.clone()),
            };
            let mut wake = st.deadline;
            if let Some(until) = until {
                if now >= until {
                    return None;
                }
                wake = wake.min(until);
            }
            st = self
                .shared
                .wait_timeout(st, wake.saturating_duration_since(now));
        }
    }

    /// Calls `callback` once, when the lease is lost (at once if it already
    /// is), or with [`LostReason::Released`] when the guard releases it.
    ///
    /// It runs on whichever thread notices the loss first: the renewal thread,
    /// or a thread calling [`check`](LeaseSignal::check) or another method.
    /// Keep it short and non-blocking (set a flag, send on a channel, signal
    /// a child process); never release the guard from it.
    pub fn on_lost(&self, callback: impl FnOnce(&LostReason) + Send + 'static) {
        let st = self.shared.lock();
        match self.shared.poll_locked(st, Instant::now()) {
            Some(mut st) => st.callbacks.push(Box::new(callback)),
            None => {
                let reason = self.shared.lock().lost.as_ref().map(|(r, _)| r.clone());
                if let Some(reason) = reason {
                    callback(&reason);
                }
            }
        }
    }
}

/// The engine's side of a [`LeaseSignal`]: its renewal thread reports each
/// renewal's fate here, and the holder's threads read the outcome through
/// the signals it hands out. Every engine keeps its deadline this way, so
/// that "held until when" means the same whatever the server.
///
/// The deadline is the *send* time of the last renewal that succeeded plus
/// the TTL: the server keeps a lease at least a TTL after the renewal it
/// received, which is no earlier than when it was sent.
#[derive(Clone, Debug)]
pub struct Renewals {
    signal: LeaseSignal,
}

impl Renewals {
    /// The state of a lease on `key` granted with `ttl` by a request sent at
    /// `granted_at` (on the monotonic clock): its deadline is `granted_at +
    /// ttl`.
    pub fn new(key: &str, ttl: Duration, granted_at: Instant) -> Renewals {
        Renewals {
            signal: LeaseSignal::new(Arc::new(Shared::new(key, ttl, granted_at))),
        }
    }

    /// A signal for the holder.
    pub fn signal(&self) -> LeaseSignal {
        self.signal.clone()
    }

    fn shared(&self) -> &Shared {
        &self.signal.shared
    }

    /// A renewal sent at `sent` succeeded, and the server promised `ttl` from
    /// its receipt: the deadline moves to `sent + ttl` (never earlier), and
    /// the failures in a row go back to zero. Ignored once the lease is lost.
    pub fn renewed(&self, sent: Instant, ttl: Duration) {
        self.shared().renewed(sent, ttl);
    }

    /// A renewal failed or went unanswered. It may have reached the server
    /// all the same, so it proves nothing by itself: only the deadline says
    /// the lease is lost.
    pub fn renewal_failed(&self) {
        self.shared().renewal_failed();
    }

    /// Declares the lease lost. The first reason sticks; callbacks run now.
    pub fn lose(&self, reason: LostReason) {
        self.shared().lose(reason);
    }

    /// Declares the lease lost if its deadline has passed at `now`; true when
    /// it is lost (now or before).
    pub fn poll(&self, now: Instant) -> bool {
        self.shared().poll(now)
    }

    /// The deadline as it stands, without declaring anything.
    pub fn deadline(&self) -> Instant {
        self.shared().lock().deadline
    }

    /// Why the lease was declared lost, if it was (without looking at the
    /// clock: call [`poll`](Renewals::poll) first for that).
    pub fn lost(&self) -> Option<LostReason> {
        self.shared().lock().lost.as_ref().map(|(r, _)| r.clone())
    }

    /// The [`Error::LeaseLost`] for `reason`, naming the lease's key.
    pub fn lost_error(&self, reason: LostReason) -> Error {
        self.shared().lost_error(reason)
    }
}
