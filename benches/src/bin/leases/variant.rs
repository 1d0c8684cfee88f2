//! What figures 1 and 2 time, shared by every engine's variants: a named
//! operation, the leases' TTL, and the runtime and owner record the raw
//! floors use.

use std::rc::Rc;
use std::time::Duration;

use anyhow::{Context, Result};
use lockfile_postgres::LeaseRequest;
use tokio::runtime::Runtime;

/// One operation to time.
pub(crate) type Op = Box<dyn FnMut() -> Result<()>>;

/// A named operation.
pub(crate) struct Variant {
    pub(crate) name: String,
    pub(crate) op: Op,
}

/// The TTL of the leases these figures take and renew: long enough that
/// none expires while measured.
pub(crate) const TTL: Duration = Duration::from_secs(10);

/// A single-threaded runtime, shared by the variants of one engine.
pub(crate) fn runtime() -> Result<Rc<Runtime>> {
    Ok(Rc::new(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot build a runtime")?,
    ))
}

/// The owner record and attempt the raw acquire sends, as the engine makes
/// them (made once: the floor is the round trips, not the record).
pub(crate) fn owner_json() -> (String, String) {
    let record = LeaseRequest::new().owner_record(TTL / 3);
    let json = serde_json::to_string(&record).expect("an owner record serialises");
    (json, record.token.to_string())
}
