//! The lease's end as futures, for tasks: [`LeaseSignal::lost`] and
//! [`LeaseSignal::ending`], to `select!` on beside the work.

use std::pin::pin;
use std::time::{Duration, Instant};

use crate::LeaseSignal;
use crate::lost::LostReason;

/// Why [`LeaseSignal::ending`] completed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ending {
    /// The lease may have lapsed, or was released: stop now.
    Lost(LostReason),
    /// The lease is still held, but its deadline is within the grace asked
    /// for: renewals have been failing, and the work should wind down so as
    /// to be done by `deadline`.
    Near {
        /// The deadline as it stood (a renewal that succeeds later moves it).
        deadline: Instant,
    },
}

impl LeaseSignal {
    /// Completes when the lease is lost (returning why) or released: the
    /// future form of [`wait_lost`](LeaseSignal::wait_lost). Wakes at the
    /// deadline by itself, whether or not the lease's thread has run.
    ///
    /// Needs a tokio runtime with its time driver (`enable_time` or
    /// `enable_all`). Cancel-safe: it only watches.
    pub async fn lost(&self) -> LostReason {
        loop {
            if let Ending::Lost(reason) = self.ending(Duration::ZERO).await {
                return reason;
            }
        }
    }

    /// Completes when the lease is lost ([`Ending::Lost`]), or as soon as
    /// its deadline is within `grace` ([`Ending::Near`]): the moment to ask
    /// the work to stop so that it is done by the deadline. With the TTL's
    /// default policy, `grace` is a third of the TTL
    /// ([`StopPolicy::grace`](crate::policy::StopPolicy::grace)), which
    /// renewals that succeed never let come near.
    ///
    /// Needs a tokio runtime with its time driver. Cancel-safe: it only
    /// watches.
    pub async fn ending(&self, grace: Duration) -> Ending {
        loop {
            // Enabled before the state is read: a change in between wakes it.
            let mut changed = pin!(self.shared.notified());
            changed.as_mut().enable();
            if let Some(reason) = self.lost_reason() {
                return Ending::Lost(reason);
            }
            let deadline = self.deadline();
            let now = Instant::now();
            let near = deadline.checked_sub(grace).unwrap_or(now);
            if now >= near {
                return Ending::Near { deadline };
            }
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(near.into()) => {}
            }
        }
    }
}
