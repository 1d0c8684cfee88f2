//! The lease layer of `lockfile`: what every cross-host lease engine
//! shares, written once.
//!
//! A lease is the cross-host sibling of the `lockfile` crate's kernel lock:
//! the same owner record, the same run history, and the two things a lease
//! cannot do without, a fencing token and an honest deadline. An engine
//! (`lockfile-etcd`, `lockfile-postgres`) keeps leases on its server and
//! implements two traits:
//!
//! - [`Engine`]: [`acquire`](Engine::acquire) (try, or wait with a bound, as
//!   a [`LeaseRequest`] says), [`inspect`](Engine::inspect) one name and
//!   [`inspect_all`](Engine::inspect_all);
//! - [`Lease`], one held lease: its [`fencing_token`](Lease::fencing_token),
//!   [`record`](Lease::record), [`ttl`](Lease::ttl), its
//!   [`signal`](Lease::signal) (the monotonic deadline, the loss), the run
//!   history's [`record_outcome`](Lease::record_outcome), and
//!   [`release`](Lease::release).
//!
//! What the engines share lives here, so that it behaves the same on every
//! server:
//!
//! - **The deadline.** An engine's renewal thread reports each renewal to
//!   [`Renewals`]: the deadline is the *send* time of the last renewal that
//!   succeeded plus the TTL, on the monotonic clock. A server keeps a lease
//!   at least a TTL after the renewal it received, which is no earlier than
//!   when it was sent, so the lease cannot lapse on the server before the
//!   holder's deadline. [`LeaseSignal`] tells the holder's threads.
//! - **The stop policy.** [`StopPolicy`] and [`Step`]: ask the work to stop
//!   `grace` before the deadline, kill it just before it.
//! - **The run history.** [`History`]: how the last run ended and the last
//!   success, as one JSON document per name that outlives the lease. The
//!   engine only stores it, with a compare-and-set.
//! - **The report.** [`LeaseReport`], one JSON shape for every engine, with
//!   findings judged as a lock file's are (`overrunning`, `silent`, …).
//! - **Names and errors.** [`check_name`] and one [`Error`] enum naming the
//!   operation, the key and the server.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use lockfile_lease::{Renewals, Step, StopPolicy};
//!
//! // An engine's renewal thread, granted a 9 s lease just now:
//! let renewals = Renewals::new("lockfile/locks/nightly", Duration::from_secs(9), Instant::now());
//! let signal = renewals.signal();
//! // The holder's supervisor: ask COMMAND to stop 3 s before the deadline.
//! let policy = StopPolicy::for_ttl(signal.ttl());
//! assert!(matches!(signal.step(policy), Step::Continue { .. }));
//! renewals.renewed(Instant::now(), Duration::from_secs(9));
//! assert!(signal.check().is_ok());
//! ```

#![deny(missing_docs)]
// The owner record comes from the core crate, which is Unix-only.
#![cfg(unix)]

mod engine;
mod error;
mod history;
mod lost;
mod name;
mod policy;
mod report;
mod signal;
mod thread;

pub use engine::{Engine, Lease, LeaseRequest, poll_interval};
pub use error::{BoxError, Error, Operation, Result};
pub use history::{History, WRITE_AFTER_DEADLINE, WRITE_AT_LEAST, write_until};
pub use lost::LostReason;
pub use name::{MAX_NAME_LEN, check_name};
pub use policy::{Step, StopPolicy};
pub use report::{Holding, LeaseReport, LeaseState};
pub use signal::{LeaseSignal, Renewals};
pub use thread::{block_signals, on_own_thread};
