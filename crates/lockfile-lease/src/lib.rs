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
//!   [`Renewals`](crate::signal::Renewals): the deadline is the *send* time of the last renewal that
//!   succeeded plus the TTL, on the monotonic clock. A server keeps a lease
//!   at least a TTL after the renewal it received, which is no earlier than
//!   when it was sent, so the lease cannot lapse on the server before the
//!   holder's deadline. [`LeaseSignal`] tells the holder's threads.
//! - **The stop policy.** [`StopPolicy`](crate::policy::StopPolicy) and [`Step`](crate::policy::Step): ask the work to stop
//!   `grace` before the deadline, kill it just before it.
//! - **The run history.** [`History`]: how the last run ended and the last
//!   success, as one JSON document per name that outlives the lease. The
//!   engine only stores it, with a compare-and-set.
//! - **The report.** [`LeaseReport`], one JSON shape for every engine, with
//!   findings judged as a lock file's are (`overrunning`, `silent`, …).
//! - **The lease's thread.** [`Session`](crate::session::Session): the
//!   thread that takes and renews a lease (every signal blocked, a
//!   single-threaded runtime), its handshake with the guard, and release on
//!   drop; [`thread::block_on`] for an engine's blocking calls.
//! - **The acquire's judgement.** [`Acquiring`](crate::acquiring::Acquiring):
//!   what each attempt means (a lost race on the run history, a held lease
//!   refused or waited for, a failure waited out once waiting) and what a
//!   timeout says of the holder; the engine only makes the attempts and
//!   waits its own way.
//! - **Names and errors.** [`check_name`](crate::name::check_name) and one [`Error`] enum naming the
//!   operation, the key and the server.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use lockfile_lease::policy::{Step, StopPolicy};
//! use lockfile_lease::signal::Renewals;
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

pub mod acquiring;
pub mod engine;
pub mod error;
pub mod history;
mod lost;
pub mod name;
pub mod policy;
pub mod report;
pub mod session;
pub mod signal;
pub mod thread;

// The root: what code that drives any engine needs. The rest lives in the
// modules above.
pub use engine::{Engine, Lease, LeaseRequest};
pub use error::{Error, Result};
pub use report::LeaseReport;
pub use signal::LeaseSignal;

// Inside the crate, every type by its short name.
pub(crate) use history::History;
pub(crate) use lost::LostReason;
