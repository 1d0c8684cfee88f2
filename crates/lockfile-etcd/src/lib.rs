//! Run-once leases across hosts, on etcd: the cross-host sibling of the
//! `lockfile` crate's kernel lock, with the same owner record, the same
//! error style, and the two things a lease cannot do without: a fencing
//! token and an honest deadline.
//!
//! This is an engine of the lease layer (`lockfile-lease`):
//! [`LeaseOptions`] implements its [`Engine`] trait with etcd's server
//! operations, and a held lease is the layer's [`LeaseGuard`] (a
//! [`Lease`]), so that code written for any engine (the `lockfile`
//! command's supervision, for one) drives etcd through them. The layer
//! renews, keeps the deadline, releases and writes the run history; this
//! crate says how each is asked of etcd. The layer's types are re-exported
//! here.
//!
//! ```no_run
//! use std::time::Duration;
//! use lockfile_etcd::LeaseOptions;
//!
//! # fn main() -> Result<(), lockfile_etcd::Error> {
//! match LeaseOptions::new()
//!     .endpoints(["http://etcd-1:2379", "http://etcd-2:2379", "http://etcd-3:2379"])
//!     .ttl(Duration::from_secs(10))
//!     .job("nightly-report")
//!     .try_acquire("nightly-report")
//! {
//!     Ok(guard) => {
//!         for batch in 0..3 {
//!             guard.check()?; // the lease may have lapsed: stop
//!             // ... write the batch, carrying guard.fencing_token() ...
//!         }
//!         if let Some(loss) = guard.release()?.loss() {
//!             eprintln!("the batches may have overlapped another holder: {loss}");
//!         }
//!     }
//!     // Someone else holds it; the error names them (pid, host, job, since).
//!     Err(e) if e.is_contended() => eprintln!("skipped: {e}"),
//!     Err(e) => return Err(e),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Choosing between the kernel lock and a lease
//!
//! Use the kernel lock (`lockfile::LockGuard`) whenever the competing
//! processes share a host (or a local filesystem): the kernel releases it
//! the instant its holder dies, it needs no server, and it cannot lapse
//! while its holder is alive. Use a lease only when they run on different
//! hosts. A lease is a promise with an expiry date: it needs a quorum of
//! etcd members to grant it, it blocks the next holder for up to a TTL after
//! its holder dies, and it can lapse while the holder still runs.
//!
//! # How it works
//!
//! - **Acquire.** Grant an etcd lease with the TTL, then, in one transaction,
//!   write the key `lockfile/locks/NAME` ([`KEY_PREFIX`]) attached to it only
//!   if the key does not exist (create revision 0). The value is the
//!   [`OwnerRecord`](lockfile::OwnerRecord) JSON of the core crate. On
//!   contention, the transaction reads the holder's record instead:
//!   [`Error::Contended`]. A blocking acquire then waits on a watch for the
//!   key's deletion; it does not poll.
//! - **Fencing token.** The key's create revision
//!   ([`LeaseGuard::fencing_token`]). etcd revisions only grow, so each
//!   acquisition gets a larger token than every earlier one.
//! - **Renewal.** A thread owned by the guard runs a small single-threaded
//!   runtime that renews the lease every TTL/3 (a keepalive) and watches
//!   the key. The
//!   deadline runs on the monotonic clock ([`Instant`](std::time::Instant)),
//!   never on wall time: it is the *send* time of the last renewal that
//!   succeeded plus the TTL. etcd keeps a lease at least a TTL after the
//!   last renewal it *received*, which is no earlier than when it was sent,
//!   so the lease cannot expire before the holder's deadline.
//! - **Loss.** [`LeaseGuard::check`] fails with [`Error::LeaseLost`] as soon
//!   as the deadline passes without a successful renewal, etcd answers a
//!   renewal with TTL 0, or the key is deleted or replaced. A renewal that
//!   merely errors may have succeeded on the server, so it does not count as
//!   a loss by itself. [`LeaseSignal`] lets another thread wait for the loss
//!   or be called back, and [`LeaseSignal::wait_step`] applies a
//!   [`StopPolicy`] to a supervised child (SIGTERM `grace` before the
//!   deadline, SIGKILL just before it).
//! - **Release.** Delete the key only if its create revision is still our
//!   token, then revoke the lease, then join the thread. Dropping the guard
//!   does the same, logging errors. After a loss the thread stops renewing
//!   and keeps trying to clean up, so the next holder need not wait a TTL.
//!   The release never waits on etcd past the lease's deadline: after it,
//!   the key goes with its lease whatever the holder does.
//! - **Run history.** [`LeaseGuard::record_outcome`] records how the run
//!   ended (the core crate's [`LastRun`](lockfile::history::LastRun): outcome, exit
//!   status or signal, failures in a row) in the key
//!   `lockfile/history/NAME` ([`HISTORY_PREFIX`]), which has no lease, so
//!   that it outlives the lease and later holders. The failures in a row
//!   are counted from the key's value at the moment of writing: a
//!   transaction writes only if the key's mod revision is still the one
//!   read, and starts again otherwise.
//! - **Inspect.** [`LeaseOptions::inspect`] reads the key, the lease's
//!   remaining TTL and the run history: the owner record, the fencing
//!   token, the TTL left, the last run.
//!
//! # What a TTL really promises
//!
//! - **Process pauses.** A holder stopped (SIGSTOP, a long GC, a VM paused or
//!   migrated, a laptop lid) past its deadline wakes up believing for a
//!   moment that it holds the lease. `check()` reports the loss on the first
//!   call after the pause, but a write already past its `check()` cannot be
//!   called back. Only the resource can refuse it, by its fencing token:
//!   the crate's `fenced_store` example shows a store that does.
//! - **Clock rate.** The deadline assumes the holder's monotonic clock does
//!   not run slower than the etcd leader's by a noticeable fraction of a
//!   TTL. Both are the kernels' monotonic clocks, which NTP slews by at most
//!   0.05%; a stopped VM's clock is another story (see pauses).
//! - **Leader changes.** A new etcd leader extends every lease to a full TTL
//!   (the old leader's renewals are not known to it). This only delays the
//!   next holder; it never shortens the current holder's lease.
//! - **A recreated cluster.** Fencing tokens are revisions of one etcd
//!   cluster's data. A cluster rebuilt from nothing starts again at revision
//!   1: reset the fenced resources' highest token with it.
//!
//! The crate's `README.md` covers running etcd in production and how the
//! holder behaves when etcd pauses or restarts.
//!
//! # Events
//!
//! A lease emits [`tracing`](https://docs.rs/tracing) events with stable
//! names, each also carrying an `event` field with the same name:
//! `lock_acquired`, `lock_contended`, `lock_released`, `renewal_failed`,
//! `lease_lost` and `release_failed`. The lease layer emits them (their
//! target is under `lockfile_lease`), the same for every engine; etcd's
//! `lock_acquired` carries `lease_id` and `ttl_s`, its `lock_released`
//! `deleted`.

#![deny(missing_docs)]
// The owner record comes from the core crate, which is Unix-only.
#![cfg(unix)]

mod acquire;
mod conn;
mod endpoint;
mod engine;
mod history;
mod inspect;
mod key;
mod keywatch;
mod ops;
mod options;
mod state;

pub use key::{HISTORY_PREFIX, KEY_PREFIX, history_key_for, key_for};
// The lease layer's types, which this crate implements.
pub use lockfile_lease::error::{BoxError, LostReason, Operation};
pub use lockfile_lease::history::History;
pub use lockfile_lease::name::MAX_NAME_LEN;
pub use lockfile_lease::policy::{Step, StopPolicy};
pub use lockfile_lease::report::LeaseState;
pub use lockfile_lease::signal::Renewals;
pub use lockfile_lease::{
    Engine, Error, Lease, LeaseGuard, LeaseReport, LeaseRequest, LeaseSignal, Released, Result,
    Wait,
};
pub use options::{DEFAULT_ENDPOINT, DEFAULT_REQUEST_TIMEOUT, DEFAULT_TTL, LeaseOptions};

/// This engine's name in reports, messages and metrics.
pub const ENGINE: &str = "etcd";
