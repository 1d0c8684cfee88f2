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

/// A lease being taken: the lease's thread is started, and takes the lease
/// (trying, or waiting as the request said) from the moment the acquisition
/// is first waited for or polled; nothing is asked of the server before.
///
/// [`wait`](Acquisition::wait) blocks the calling thread until the lease is
/// held or refused. With the `tokio` feature, an `Acquisition` is also a
/// [`Future`] of the same result, which never blocks the task's thread, on
/// any runtime (it waits on a channel that the lease's thread answers).
///
/// **Cancel safety.** Dropping an `Acquisition` (a cancelled future, a
/// `select!` that took another branch) gives up:
/// - before its first wait or poll, nothing was asked of the server, and
///   the lease's thread exits;
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
    /// Such an acquisition is only waited for: see the `Future` impl.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    claims_tick: bool,
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
        let claims_tick = request.tick.is_some();
        let request = request.clone();
        let starting = crate::session::Session::start(
            &thread,
            &key,
            &history_key,
            move |mut ready, requests| async move {
                if !ready.go().await {
                    return;
                }
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
            claims_tick,
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
        crate::park::block_on(poll_fn(|cx| self.poll_guard(cx, true)))
    }

    fn poll_guard(&mut self, cx: &mut Context<'_>, blocking: bool) -> Poll<Result<LeaseGuard>> {
        self.starting.poll_started(cx, blocking).map(|started| {
            let (acquired, session) = started?;
            Ok(LeaseGuard::held(&self.name, &self.key, acquired, session))
        })
    }
}

/// Awaits the lease without blocking the task's thread: see
/// [`Acquisition`], and its cancel safety.
///
/// A request that claims a tick ([`LeaseRequest::claim_tick`]) is refused
/// here ([`Error::InvalidOptions`](crate::Error::InvalidOptions)), before
/// anything is asked of the server: the claim is written with the grant,
/// and a future dropped after the grant would leave the claim of a run that
/// never started, which the next run records as `owner_dead`. Such a
/// request is [`wait`](Acquisition::wait)ed for.
#[cfg(feature = "tokio")]
impl std::future::Future for Acquisition {
    type Output = Result<LeaseGuard>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<LeaseGuard>> {
        let this = self.get_mut();
        if this.claims_tick {
            return Poll::Ready(Err(crate::Error::InvalidOptions {
                op: crate::error::Operation::Acquire,
                key: this.key.clone(),
                reason: "a lease that claims a tick is waited for, not awaited: a future \
                         dropped after the grant would leave the claim of a run that never started"
                    .to_owned(),
            }));
        }
        this.poll_guard(cx, false)
    }
}
