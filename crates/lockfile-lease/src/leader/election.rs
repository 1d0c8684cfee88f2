//! `Election`: campaign for a name on any engine, lead while the lease is
//! held, step down before it can lapse, and campaign again.

use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use lockfile::wait::Wait;

use super::leadership::{Leadership, Term};
use crate::ending::Ending;
use crate::engine::Engine;
use crate::error::{Error, Operation, Result};
use crate::policy::StopPolicy;
use crate::request::LeaseRequest;

/// A campaign for the lease `name` on an engine, and what to do with it.
/// Built as every options type of this project is (`&mut self` setters).
///
/// ```no_run
/// # async fn service(engine: std::sync::Arc<dyn lockfile_lease::Engine>) -> lockfile_lease::Result<()> {
/// use std::ops::ControlFlow;
/// use lockfile_lease::leader::Election;
///
/// Election::new(engine, "billing-leader")
///     .lead(|term| async move {
///         while term.is_leading() {
///             // ... one step of the leader's work, every write carrying
///             // term.fencing_token() ...
///             tokio::select! {
///                 _ = term.ending() => break,
///                 () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
///             }
///         }
///         ControlFlow::<()>::Continue(()) // step down, campaign again
///     })
///     .await
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Election {
    engine: Arc<dyn Engine>,
    name: String,
    request: LeaseRequest,
    grace: Option<Duration>,
    first_backoff: Duration,
    max_backoff: Duration,
}

impl Election {
    /// A campaign for `name` on `engine`, with the engine's TTL, the TTL's
    /// default grace (a third of it) and a backoff of 100 ms doubling up to
    /// 10 s.
    pub fn new(engine: Arc<dyn Engine>, name: impl Into<String>) -> Election {
        Election {
            engine,
            name: name.into(),
            request: LeaseRequest::new(),
            grace: None,
            first_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
        }
    }

    /// The lease's TTL, job name and maximum runtime, as a request says
    /// them. Its wait is not used (a campaign waits for ever), and it may
    /// not claim a tick.
    pub fn request(&mut self, request: LeaseRequest) -> &mut Self {
        self.request = request;
        self
    }

    /// Ask the work to stop this long before the lease's deadline, instead
    /// of a third of the TTL. Renewals keep the deadline between two thirds
    /// of a TTL and a TTL ahead: a grace under two thirds of the TTL fires
    /// only when renewals fail (the default, a third, once two in a row
    /// have failed), one above it at every term's start.
    pub fn grace(&mut self, grace: Duration) -> &mut Self {
        self.grace = Some(grace);
        self
    }

    /// After a failed campaign (a server that fails or does not answer),
    /// wait `first` before the next, doubling up to `max`; after a term,
    /// wait `first` before campaigning again, so that another service has
    /// its chance.
    pub fn backoff(&mut self, first: Duration, max: Duration) -> &mut Self {
        self.first_backoff = first;
        self.max_backoff = max.max(first);
        self
    }

    /// Campaigns until elected: waits for the lease as long as it takes,
    /// campaigning again after a server failure with the backoff (each
    /// failure logged as `campaign_failed`).
    ///
    /// Cancel-safe: see [`Acquisition`](crate::Acquisition).
    ///
    /// # Errors
    ///
    /// Only what no retry can mend: [`Error::InvalidName`],
    /// [`Error::InvalidOptions`] (a request that claims a tick).
    pub async fn campaign(&self) -> Result<Leadership> {
        if self.request.tick.is_some() {
            return Err(Error::InvalidOptions {
                op: Operation::Acquire,
                key: self.name.clone(),
                reason: "an election does not claim ticks: leave the request's tick out".to_owned(),
            });
        }
        let mut request = self.request.clone();
        request.wait(Wait::Forever);
        let mut backoff = self.first_backoff;
        loop {
            let elected = match self.engine.start(&self.name, &request) {
                Ok(acquisition) => acquisition.await,
                Err(e) => Err(e),
            };
            match elected {
                Ok(lease) => {
                    let grace = self
                        .grace
                        .unwrap_or_else(|| StopPolicy::for_ttl(lease.ttl()).grace());
                    return Ok(Leadership::new(lease, grace));
                }
                Err(e @ (Error::InvalidName { .. } | Error::InvalidOptions { .. })) => {
                    return Err(e);
                }
                Err(e) => {
                    tracing::warn!(
                        name: "campaign_failed",
                        event = "campaign_failed",
                        lease = %self.name,
                        retry_in_ms = backoff.as_millis() as u64,
                        error = %e,
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.max_backoff);
                }
            }
        }
    }

    /// Leads for as long as `work` says: campaigns, runs `work(term)` while
    /// elected, steps down, waits the first backoff, and campaigns again.
    ///
    /// The work learns when to stop from its [`Term`]
    /// ([`ending`](Term::ending), [`is_leading`](Term::is_leading)): `grace`
    /// before the deadline, or at once when the lease is lost. If the work
    /// is still running when the deadline is
    /// [`StopPolicy::DEFAULT_KILL_AHEAD`] (100 ms) away (or half the grace,
    /// when that is shorter), its future is dropped, as `lockfile run` kills
    /// a command, and the event `work_stopped` is logged. What the work
    /// returns decides the rest:
    /// [`ControlFlow::Continue`] to step down and campaign again,
    /// [`ControlFlow::Break`] to step down and return its value.
    ///
    /// Dropping the future (a service told to stop) drops the leadership
    /// with it, which only asks for the release: await
    /// [`shutdown::releases`](crate::shutdown::releases) before the process
    /// exits.
    ///
    /// # Errors
    ///
    /// As [`campaign`](Election::campaign).
    pub async fn lead<F, Fut, T>(&self, mut work: F) -> Result<T>
    where
        F: FnMut(Term) -> Fut,
        Fut: Future<Output = ControlFlow<T>>,
    {
        loop {
            let leadership = self.campaign().await?;
            let term = leadership.term();
            let flow = {
                let work = work(term.clone());
                // Never before the work was asked to stop.
                let kill_ahead = StopPolicy::DEFAULT_KILL_AHEAD.min(term.grace() / 2);
                let overrun = term.signal().ending(kill_ahead);
                tokio::select! {
                    biased;
                    flow = work => Some(flow),
                    ending = overrun => {
                        tracing::warn!(
                            name: "work_stopped",
                            event = "work_stopped",
                            lease = %self.name,
                            fencing_token = term.fencing_token(),
                            why = match &ending {
                                Ending::Lost(reason) => reason.to_string(),
                                _ => "the lease's deadline is about to pass".to_owned(),
                            },
                        );
                        None
                    }
                }
            };
            if let Err(e) = leadership.step_down().await {
                tracing::warn!(name: "release_failed", event = "release_failed", error = %e);
            }
            if let Some(ControlFlow::Break(value)) = flow {
                return Ok(value);
            }
            tokio::time::sleep(self.first_backoff).await;
        }
    }
}
