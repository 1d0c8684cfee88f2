//! An acquire across its attempts, judged the same way on every engine:
//! how many times a tick's claim may lose the race on the run history, when
//! a held lease is a refusal and when a wait, which failures a waiting
//! acquire waits out, and what a timeout says of the holder.
//!
//! The engine makes each attempt and waits its own way (etcd on a watch,
//! PostgreSQL on a poll or a notification), as the layer's acquire asks it
//! to; [`Acquiring::judge`] says what the attempt means.

use std::time::{Duration, Instant};

use lockfile::OwnerRecord;
use lockfile::wait::Wait;

use crate::error::{Error, Operation, Result};

/// What one attempt to take a lease came to. `H` is the engine's lease just
/// taken; `S` what the engine saw of the holder that it needs to wait (etcd:
/// the revision it read; PostgreSQL: what is left of the holder's lease).
///
/// Exhaustive on purpose: [`Acquiring::judge`] gives each outcome its
/// meaning, and a new one needs a meaning there.
#[derive(Debug)]
#[allow(clippy::exhaustive_enums)]
pub enum Attempt<H, S> {
    /// Taken.
    Acquired(Box<H>),
    /// The run history changed between its read and the write that claims
    /// the tick (another run finished or claimed): decide again.
    Raced,
    /// Someone else holds the lease.
    Contended {
        /// The holder's owner record, when readable.
        owner: Option<Box<OwnerRecord>>,
        /// The holder's fencing token.
        fencing_token: u64,
        /// What the engine needs to wait for this holder.
        seen: S,
    },
}

/// What the engine does after an attempt, as [`Acquiring::judge`] says.
#[derive(Debug)]
#[allow(clippy::exhaustive_enums)]
pub enum Next<H, S> {
    /// The lease is taken: hand it over.
    Acquired(Box<H>),
    /// Ask again at once.
    Again,
    /// Held: wait for the holder (until [`Acquiring::until`]), then ask
    /// again.
    Wait(S),
    /// The server failed while this acquire was waiting: wait that out as
    /// a holder is waited out, on a fresh connection, then ask again.
    Retry,
}

/// How many times in a row a claim may lose the race on the run history
/// before the acquire gives up.
pub const RACES: u32 = 5;

/// One acquire, across its attempts.
#[derive(Debug)]
pub struct Acquiring {
    key: String,
    history_key: String,
    wait: Wait,
    started: Instant,
    races: u32,
    /// The holder as last seen, for the timeout's message.
    owner: Option<Box<OwnerRecord>>,
    /// Whether the server has answered that the lease is held: from then
    /// on its failures are waited out.
    waiting: bool,
}

impl Acquiring {
    /// An acquire of the lease at `key`, whose run history is at
    /// `history_key`, waiting as `wait` says; it starts now.
    pub fn new(key: &str, history_key: &str, wait: Wait) -> Acquiring {
        Acquiring {
            key: key.to_owned(),
            history_key: history_key.to_owned(),
            wait,
            started: Instant::now(),
            races: 0,
            owner: None,
            waiting: false,
        }
    }

    /// When the wait ends, if it is bounded.
    pub fn until(&self) -> Option<Instant> {
        match self.wait {
            Wait::Until(until) => Some(until),
            Wait::No | Wait::Forever => None,
        }
    }

    /// How long this acquire has been going on.
    pub fn waited(&self) -> Duration {
        self.started.elapsed()
    }

    /// What `attempt` means, and what to do next.
    ///
    /// # Errors
    ///
    /// [`Error::Contended`] for a held lease when this acquire does not
    /// wait; [`Error::Conflict`] after [`RACES`] lost races; the attempt's
    /// own error, unless the acquire was already waiting (see
    /// [`retry_after`](Acquiring::retry_after)).
    pub fn judge<H, S>(&mut self, attempt: Result<Attempt<H, S>>) -> Result<Next<H, S>> {
        match attempt {
            Ok(Attempt::Acquired(held)) => Ok(Next::Acquired(held)),
            Ok(Attempt::Raced) if self.races < RACES => {
                self.races += 1;
                Ok(Next::Again)
            }
            Ok(Attempt::Raced) => Err(Error::Conflict {
                op: Operation::Acquire,
                key: self.history_key.clone(),
                attempts: RACES,
            }),
            Ok(Attempt::Contended {
                owner,
                fencing_token,
                seen,
            }) => {
                if let Some(o) = &owner {
                    tracing::info!(
                        name: "lock_contended",
                        event = "lock_contended",
                        key = %self.key,
                        holder_pid = o.pid,
                        holder_host = &*o.hostname,
                        fencing_token,
                    );
                }
                if let Wait::No = self.wait {
                    return Err(Error::Contended {
                        key: self.key.clone(),
                        owner,
                        fencing_token,
                    });
                }
                self.owner = owner;
                self.waiting = true;
                Ok(Next::Wait(seen))
            }
            Err(e) => self.retry_after(e).map(|()| Next::Retry),
        }
    }

    /// Whether this acquire waits out `e`, a failure of an attempt or of
    /// the wait: once waiting, a server hiccup (a leader election, a
    /// restart, a failover) is waited out as the holder is; an error before
    /// the server's first answer (a wrong address, a bad password, a
    /// missing table) and a refused tick are returned.
    ///
    /// # Errors
    ///
    /// `e`, when it is not waited out.
    pub fn retry_after(&self, e: Error) -> Result<()> {
        if !self.waiting || e.is_tick_refused() {
            return Err(e);
        }
        tracing::warn!(key = %self.key, error = %e, "waiting for a lease: the server failed; retrying");
        Ok(())
    }

    /// The error of a wait that ended before the lease was free, naming the
    /// holder as last seen.
    pub fn timed_out(&mut self) -> Error {
        Error::Timeout {
            key: self.key.clone(),
            waited: self.waited(),
            owner: self.owner.take(),
        }
    }
}
