//! `Leadership`: a won campaign, and its `Term`, what the leader's work
//! looks at.

use std::time::{Duration, Instant};

use crate::ending::Ending;
use crate::error::Result;
use crate::guard::LeaseGuard;
use crate::released::Released;
use crate::signal::LeaseSignal;

/// A won campaign: the lease, held and renewed until
/// [`step_down`](Leadership::step_down) or drop (which, inside a runtime,
/// never blocks: see [`LeaseGuard`]).
#[derive(Debug)]
#[must_use = "dropping the leadership steps down at once"]
pub struct Leadership {
    lease: LeaseGuard,
    grace: Duration,
}

impl Leadership {
    pub(crate) fn new(lease: LeaseGuard, grace: Duration) -> Leadership {
        Leadership { lease, grace }
    }

    /// The fencing token of this term: larger than every earlier leader's.
    /// Pass it with every write.
    pub fn fencing_token(&self) -> u64 {
        self.lease.fencing_token()
    }

    /// What the leader's work looks at: cheap to clone, for any task.
    pub fn term(&self) -> Term {
        Term {
            token: self.lease.fencing_token(),
            signal: self.lease.signal(),
            grace: self.grace,
        }
    }

    /// The lease itself (its record, TTL, history).
    pub fn lease(&self) -> &LeaseGuard {
        &self.lease
    }

    /// Stops leading: releases the lease, so that another service can be
    /// elected at once. Never waits on the server past the deadline.
    ///
    /// # Errors
    ///
    /// As [`LeaseGuard::release_async`]; the lease is let go either way.
    pub async fn step_down(self) -> Result<Released> {
        self.lease.release_async().await
    }
}

/// One term of leadership, as the leader's work sees it: the fencing token
/// to write with, and when to stop.
#[derive(Clone, Debug)]
pub struct Term {
    token: u64,
    signal: LeaseSignal,
    grace: Duration,
}

impl Term {
    /// The fencing token: pass it with every write, to a store that refuses
    /// a token lower than the highest it has seen.
    pub fn fencing_token(&self) -> u64 {
        self.token
    }

    /// The latest moment the leader can be sure it still leads (the lease's
    /// deadline, moved later by every renewal).
    pub fn deadline(&self) -> Instant {
        self.signal.deadline()
    }

    /// Whether to go on acting as leader: the lease is held and more than
    /// the grace remains before its deadline. Check it before each write,
    /// which the fence then checks again where the data lives.
    pub fn is_leading(&self) -> bool {
        !self.signal.is_lost()
            && self
                .signal
                .deadline()
                .checked_sub(self.grace)
                .is_some_and(|near| Instant::now() < near)
    }

    /// Completes when the work must wind down: the lease was lost, or its
    /// deadline is within the grace (renewals have been failing). The
    /// cancellation signal to `select!` on. Cancel-safe.
    pub async fn ending(&self) -> Ending {
        self.signal.ending(self.grace).await
    }

    /// How long before the deadline [`ending`](Term::ending) fires.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// The lease's signal (deadline, loss), for code written against it.
    pub fn signal(&self) -> &LeaseSignal {
        &self.signal
    }
}
