//! The lease layer's [`Engine`], implemented for PostgreSQL by
//! [`LeaseOptions`] with its server operations (`ops.rs`); the [`Lease`] is
//! the layer's [`LeaseGuard`].

use lockfile_lease::{Engine, Lease, LeaseGuard, LeaseReport, LeaseRequest, Result};

use crate::state::PgOps;
use crate::{ENGINE, LeaseOptions, inspect};

impl Engine for LeaseOptions {
    fn kind(&self) -> &'static str {
        ENGINE
    }

    /// The request's TTL, or these options' when it names none.
    fn acquire(&self, name: &str, request: &LeaseRequest) -> Result<Box<dyn Lease>> {
        let ops = PgOps::new(self, name, self.ttl_for(request))?;
        Ok(Box::new(LeaseGuard::acquire(name, ops, request)?))
    }

    fn inspect(&self, name: &str) -> Result<LeaseReport> {
        inspect::inspect(self, name)
    }

    /// Every name with a row in the lease table (held or free) or a run
    /// history.
    fn inspect_all(&self) -> Result<Vec<LeaseReport>> {
        inspect::inspect_all(self)
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
