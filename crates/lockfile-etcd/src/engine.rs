//! The lease layer's traits, implemented for etcd: [`LeaseOptions`] is an
//! [`Engine`], [`LeaseGuard`] a [`Lease`].

use std::time::Duration;

use lockfile::OwnerRecord;
use lockfile::history::{LastRun, RunEnd};
use lockfile::tick::Claim;
use lockfile_lease::{Engine, Lease, LeaseReport, LeaseRequest, LeaseSignal, Result};

use crate::{ENGINE, LeaseGuard, LeaseOptions};

impl Engine for LeaseOptions {
    fn kind(&self) -> &'static str {
        ENGINE
    }

    /// These options, with the request's TTL (when it has one), job and
    /// maximum runtime in place of theirs, and its wait in place of the
    /// options' timeout.
    fn acquire(&self, name: &str, request: &LeaseRequest) -> Result<Box<dyn Lease>> {
        let mut opts = self.clone();
        if let Some(ttl) = request.ttl {
            opts.ttl = ttl;
        }
        opts.request = request.clone();
        Ok(Box::new(LeaseGuard::start(&opts, name, request.wait)?))
    }

    fn inspect(&self, name: &str) -> Result<LeaseReport> {
        LeaseOptions::inspect(self, name)
    }

    fn inspect_all(&self) -> Result<Vec<LeaseReport>> {
        LeaseOptions::inspect_all(self)
    }
}

impl Lease for LeaseGuard {
    fn name(&self) -> &str {
        LeaseGuard::name(self)
    }

    fn key(&self) -> &str {
        LeaseGuard::key(self)
    }

    fn fencing_token(&self) -> u64 {
        LeaseGuard::fencing_token(self)
    }

    fn record(&self) -> &OwnerRecord {
        LeaseGuard::record(self)
    }

    fn ttl(&self) -> Duration {
        LeaseGuard::ttl(self)
    }

    fn lease_id(&self) -> Option<i64> {
        Some(LeaseGuard::lease_id(self))
    }

    fn signal(&self) -> LeaseSignal {
        LeaseGuard::signal(self)
    }

    fn claim(&self) -> Option<&Claim> {
        LeaseGuard::claim(self)
    }

    fn record_outcome(&self, end: RunEnd) -> Result<LastRun> {
        LeaseGuard::record_outcome(self, end)
    }

    fn release(self: Box<Self>) -> Result<()> {
        LeaseGuard::release(*self)
    }
}
