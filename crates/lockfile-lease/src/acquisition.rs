//! `Acquisition`: a lease being taken on its own thread, waited for by
//! blocking ([`wait`](Acquisition::wait)) or, with the `tokio` feature,
//! awaited.

use std::fmt;
use std::future::poll_fn;
use std::task::{Context, Poll};

use crate::acquire::acquire;
use crate::error::Result;
use crate::guard::{Acquired, LeaseGuard};
use crate::hold::hold;
use crate::ops::LeaseOps;
use crate::request::LeaseRequest;
use crate::session::Starting;
use crate::signal::Renewals;

/// A lease being taken: the lease's thread is started and tries (or waits,
/// as the request said) while the caller does something else.
///
/// [`wait`](Acquisition::wait) blocks the calling thread until the lease is
/// held or refused. With the `tokio` feature, an `Acquisition` is also a
/// [`Future`] of the same result, which never blocks the task's thread, on
/// any runtime (it waits on a channel that the lease's thread answers).
///
/// **Cancel safety.** Dropping an `Acquisition` (a cancelled future, a
/// `select!` that took another branch) gives up:
/// - while it waits for a holder to let go, the wait ends at once and the
///   lease's thread exits;
/// - during an attempt, the attempt runs to its end (at most the engine's
///   request timeout) rather than be cut short, since a request cut short
///   could leave a lease on the server that nobody releases; a lease it took
///   is then released at once by the lease's thread, with a request to the
///   server, never renewed, and has no run recorded. Before it is released
///   it is a lease like any: the next holder can have it at the latest when
///   its TTL runs out.
#[must_use = "an acquisition does nothing useful unless waited for or awaited"]
pub struct Acquisition {
    name: String,
    key: String,
    starting: Starting<Acquired>,
}

impl fmt::Debug for Acquisition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquisition")
            .field("name", &self.name)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl LeaseGuard {
    /// Starts taking the lease `name` through `ops` as `request` says, on a
    /// thread of its own (`lockfile-KIND`) that then holds it; returns at
    /// once. What an engine's [`Engine::start`](crate::Engine::start) does.
    ///
    /// # Errors
    ///
    /// [`Error::Io`](crate::Error::Io) when the thread cannot be started.
    pub fn start<O: LeaseOps>(name: &str, ops: O, request: &LeaseRequest) -> Result<Acquisition> {
        let key = ops.key().to_owned();
        let history_key = ops.history_key().to_owned();
        let thread = format!("lockfile-{}", O::KIND);
        let request = request.clone();
        let starting = crate::session::Session::start(
            &thread,
            &key,
            &history_key,
            move |mut ready, requests| async move {
                let mut ops = ops;
                let granted = match acquire(&mut ops, &request, ready.abandoned()).await {
                    Ok(granted) => granted,
                    Err(e) => return ready.send(Err(e)),
                };
                let renewals = Renewals::new(ops.key(), granted.ttl, granted.granted_at);
                ready.send(Ok(Acquired {
                    token: granted.fencing_token,
                    ttl: granted.ttl,
                    lease_id: granted.lease_id,
                    record: granted.record.clone(),
                    claim: granted.claim.clone(),
                    acquired_at: granted.granted_at,
                    signal: renewals.signal(),
                }));
                hold(ops, granted, renewals, requests).await;
            },
        )?;
        Ok(Acquisition {
            name: name.to_owned(),
            key,
            starting,
        })
    }

    /// Takes the lease `name` through `ops` as `request` says, on a thread
    /// of its own that then holds it; returns once the lease is held, or
    /// why not: [`start`](LeaseGuard::start), then
    /// [`wait`](Acquisition::wait).
    ///
    /// # Errors
    ///
    /// As [`Engine::acquire`](crate::Engine::acquire).
    pub fn acquire<O: LeaseOps>(name: &str, ops: O, request: &LeaseRequest) -> Result<LeaseGuard> {
        LeaseGuard::start(name, ops, request)?.wait()
    }
}

impl Acquisition {
    /// The lease name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Blocks the calling thread until the lease is held, or why not.
    ///
    /// # Errors
    ///
    /// As [`Engine::acquire`](crate::Engine::acquire).
    pub fn wait(mut self) -> Result<LeaseGuard> {
        crate::park::block_on(poll_fn(|cx| self.poll_guard(cx)))
    }

    fn poll_guard(&mut self, cx: &mut Context<'_>) -> Poll<Result<LeaseGuard>> {
        self.starting.poll_started(cx).map(|started| {
            let (acquired, session) = started?;
            Ok(LeaseGuard::held(&self.name, &self.key, acquired, session))
        })
    }
}

/// Awaits the lease without blocking the task's thread: see
/// [`Acquisition`], and its cancel safety.
#[cfg(feature = "tokio")]
impl std::future::Future for Acquisition {
    type Output = Result<LeaseGuard>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<LeaseGuard>> {
        self.get_mut().poll_guard(cx)
    }
}
