//! The lease layer's [`Engine`], implemented for Redis by [`LeaseOptions`]
//! with its server operations (`ops.rs`); the [`Lease`](lockfile_lease::Lease) is the layer's
//! [`LeaseGuard`]. And the options' own ways to take a lease,
//! [`LeaseOptions::acquire`] and [`LeaseOptions::try_acquire`].

use lockfile::wait::Wait;
use lockfile_lease::{Acquisition, Engine, LeaseGuard, LeaseReport, LeaseRequest, Result};

use crate::state::RedisOps;
use crate::{ENGINE, LeaseOptions, inspect};

impl Engine for LeaseOptions {
    fn kind(&self) -> &'static str {
        ENGINE
    }

    /// The request's TTL, or these options' when it names none.
    fn start(&self, name: &str, request: &LeaseRequest) -> Result<Acquisition> {
        LeaseGuard::start(name, self.ops(name, request)?, request)
    }

    fn inspect(&self, name: &str) -> Result<LeaseReport> {
        inspect::inspect(self, name)
    }

    /// Every name with a lease key or a run history under the prefix.
    fn inspect_all(&self) -> Result<Vec<LeaseReport>> {
        inspect::inspect_all(self)
    }
}

impl LeaseOptions {
    /// Takes the lease on `name`, waiting while someone else holds it: as
    /// long as it takes, or up to [`timeout`](LeaseOptions::timeout); with
    /// the options' [`job`](LeaseOptions::job) and
    /// [`max_runtime`](LeaseOptions::max_runtime) in the owner record.
    /// ([`Engine::acquire`] takes a [`LeaseRequest`] instead.)
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a name that
    /// cannot be a lease; [`Error::Timeout`](crate::Error::Timeout) when
    /// the timeout passed; [`Error::Server`](crate::Error::Server) or
    /// [`Error::Unanswered`](crate::Error::Unanswered) when the server
    /// fails, does not answer, or cannot keep a lease (a replica, an
    /// eviction policy that may drop its key).
    pub fn acquire(&self, name: &str) -> Result<LeaseGuard> {
        self.take(name, &self.request(Wait::up_to(self.timeout)))
    }

    /// Takes the lease on `name` if nobody holds it, without waiting.
    ///
    /// # Errors
    ///
    /// [`Error::Contended`](crate::Error::Contended), carrying the holder's
    /// record and fencing token, when someone holds the lease (see
    /// [`Error::is_contended`](crate::Error::is_contended)); otherwise as
    /// [`acquire`](LeaseOptions::acquire).
    pub fn try_acquire(&self, name: &str) -> Result<LeaseGuard> {
        self.take(name, &self.request(Wait::No))
    }

    /// The request these options make, waiting as `wait` says.
    fn request(&self, wait: Wait) -> LeaseRequest {
        let mut request = self.own.clone();
        request.wait(wait).ttl(self.ttl);
        request
    }

    fn take(&self, name: &str, request: &LeaseRequest) -> Result<LeaseGuard> {
        LeaseGuard::acquire(name, self.ops(name, request)?, request)
    }

    /// The server operations on the lease `name`, with the request's TTL
    /// (these options' when it names none).
    fn ops(&self, name: &str, request: &LeaseRequest) -> Result<RedisOps> {
        RedisOps::new(self, name, request.ttl.unwrap_or(self.ttl))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_options_signals_and_errors_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<LeaseGuard>();
        send_sync::<LeaseOptions>();
        send_sync::<crate::LeaseSignal>();
        send_sync::<crate::Error>();
    }
}
