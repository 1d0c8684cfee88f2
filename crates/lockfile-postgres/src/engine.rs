//! The lease layer's [`Engine`], implemented for PostgreSQL by
//! [`LeaseOptions`] (the [`Lease`] is [`LeaseGuard`](crate::LeaseGuard)).

use lockfile_lease::{Engine, Lease, LeaseReport, LeaseRequest, Result};

use crate::{ENGINE, LeaseGuard, LeaseOptions, inspect};

impl Engine for LeaseOptions {
    fn kind(&self) -> &'static str {
        ENGINE
    }

    /// The request's TTL, or these options' when it names none.
    fn acquire(&self, name: &str, request: &LeaseRequest) -> Result<Box<dyn Lease>> {
        Ok(Box::new(LeaseGuard::start(self, name, request)?))
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
