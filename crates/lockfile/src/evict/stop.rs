//! The stop of a hung run: SIGTERM and SIGCONT, SIGKILL after the grace, to
//! every verified process and what they fork meanwhile, through pidfds
//! only; then the wait for the lock they held. Step 5 of the procedure.

use std::fs::{File, TryLockError};
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use super::eviction::Eviction;
use super::targets::{Target, adopt_descendants};
use crate::error::EvictionRefused;
use crate::history::LastRun;
use crate::record::Evicted;
use crate::sys::{self, Pidfd, ProcessIdentity};

/// How many times the descendants are walked again after SIGKILL, for what
/// they forked between two walks. A killed process forks no more, so the
/// walks end long before.
const KILL_ROUNDS: usize = 100;

/// Everyone to stop, verified, and what the new record will say of them.
#[derive(Debug)]
pub(super) struct Plan {
    /// The owner first.
    pub(super) targets: Vec<Target>,
    /// The uid every target runs as: the owner's.
    pub(super) uid: u32,
    pub(super) evicted: Evicted,
    pub(super) started_at: SystemTime,
    pub(super) previous_run: Option<LastRun>,
}

/// How stopping a holder ended, when it did not end with the lock.
pub(super) enum Stop {
    NotTaken(EvictionRefused),
    Lock(io::Error),
}

impl Plan {
    /// The stop sequence, through the pidfds only, then the wait for the
    /// lock, within `bound` when one is given.
    pub(super) fn stop_and_take(
        mut self,
        path: &Path,
        file: &File,
        kill_after: Duration,
        bound: Option<Instant>,
    ) -> Result<Eviction, Stop> {
        tracing::warn!(
            name: "lock_evicted",
            event = "lock_evicted",
            path = %crate::text::path(path),
            pid = self.evicted.pid,
            job = self.evicted.job.as_deref().unwrap_or(""),
            token = %self.evicted.token,
            silent_s = self.evicted.silent().as_secs_f64(),
            processes = self.targets.len(),
        );
        let me = sys::process_identity();
        // A stopped process cannot act on SIGTERM: SIGCONT follows at once.
        self.signal_all(libc::SIGTERM);
        self.signal_all(libc::SIGCONT);
        // Processes forked between the walk and the signals.
        self.adopt_more(&me, &[libc::SIGTERM, libc::SIGCONT]);

        // SIGKILL after kill-after, or at the end of the wait if that comes
        // first: the caller's patience is the hard deadline.
        let kill_at = match (Instant::now().checked_add(kill_after), bound) {
            (Some(soft), Some(bound)) => Some(soft.min(bound)),
            (soft, bound) => soft.or(bound),
        };
        let mut signal = libc::SIGTERM;
        if !self.wait_exited(kill_at) {
            if !self.targets[0].pidfd.has_exited() {
                signal = libc::SIGKILL;
            }
            self.signal_all(libc::SIGKILL);
            // What they forked meanwhile, until a walk finds nothing new.
            for _ in 0..KILL_ROUNDS {
                if self.adopt_more(&me, &[libc::SIGKILL]) == 0 {
                    break;
                }
            }
            self.wait_exited(bound);
        }
        let taken = match bound {
            Some(bound) => sys::lock_until(file.as_fd(), sys::LockMode::Exclusive, bound),
            None => match file.try_lock() {
                Ok(()) => Ok(true),
                Err(TryLockError::WouldBlock) => Ok(false),
                Err(TryLockError::Error(e)) => Err(e),
            },
        };
        if !taken.map_err(Stop::Lock)? {
            let survivors = self
                .targets
                .iter()
                .filter(|t| !t.pidfd.has_exited())
                .map(|t| t.pidfd.pid())
                .collect();
            return Err(Stop::NotTaken(EvictionRefused::StillHeld { survivors }));
        }
        Ok(Eviction {
            evicted: self.evicted,
            started_at: self.started_at,
            previous_run: self.previous_run,
            signal,
        })
    }

    fn signal_all(&self, signal: i32) {
        for target in &self.targets {
            send(target, signal);
        }
    }

    /// Adds the descendants forked since the last walk, verified as the
    /// first ones were, and sends them `signals`. A new one that does not run
    /// as the owner's uid (a setuid program it started) is left alone.
    /// Returns how many were added.
    fn adopt_more(&mut self, me: &ProcessIdentity, signals: &[i32]) -> usize {
        let before = self.targets.len();
        // A pidfd that cannot be opened now only ends the walk early; the
        // ones found so far are stopped all the same.
        let _ = adopt_descendants(&mut self.targets, &sys::process_table());
        let mut added: Vec<Target> = self.targets.drain(before..).collect();
        added.retain(|t| t.pidfd.pid() != me.pid && t.runs_as(self.uid));
        for target in &added {
            for &signal in signals {
                send(target, signal);
            }
        }
        let n = added.len();
        self.targets.extend(added);
        n
    }

    /// Waits until every target has exited, until `until` (or as long as it
    /// takes). Returns whether all have.
    fn wait_exited(&self, until: Option<Instant>) -> bool {
        let pidfds: Vec<&Pidfd> = self.targets.iter().map(|t| &t.pidfd).collect();
        loop {
            // In slices, when unbounded: a wait needs an end.
            let slice_end = until.unwrap_or_else(|| Instant::now() + Duration::from_secs(60));
            if sys::wait_exited(&pidfds, slice_end)
                .iter()
                .all(|&gone| gone)
            {
                return true;
            }
            if until.is_some() {
                return false;
            }
        }
    }
}

/// Sends `signal` through the target's pidfd. A process that exited
/// meanwhile is no failure; anything else is worth a warning, not a stop.
fn send(target: &Target, signal: i32) {
    if let Err(e) = target.pidfd.signal(signal)
        && e.raw_os_error() != Some(libc::ESRCH)
    {
        tracing::warn!(
            name: "evict_signal_failed",
            event = "evict_signal_failed",
            pid = target.pidfd.pid(),
            signal,
            error = %e,
        );
    }
}
