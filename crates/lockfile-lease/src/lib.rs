//! The lease layer of `lockfile`: what every cross-host lease engine
//! shares, written once.
//!
//! A lease is the cross-host sibling of the `lockfile` crate's kernel lock:
//! the same owner record, the same run history, and the two things a lease
//! cannot do without, a fencing token and an honest deadline. Code that
//! drives any engine uses two traits:
//!
//! - [`Engine`]: [`acquire`](Engine::acquire) (try, or wait with a bound, as
//!   a [`LeaseRequest`] says; [`start`](Engine::start) for an
//!   [`Acquisition`] to await), [`inspect`](Engine::inspect) one name and
//!   [`inspect_all`](Engine::inspect_all);
//! - [`Lease`], one held lease: its [`fencing_token`](Lease::fencing_token),
//!   [`record`](Lease::record), [`ttl`](Lease::ttl), its
//!   [`signal`](Lease::signal) (the monotonic deadline, the loss), the run
//!   history's [`record_outcome`](Lease::record_outcome), and
//!   [`release`](Lease::release). Every engine's is the same
//!   [`LeaseGuard`].
//!
//! An engine (`lockfile-etcd`, `lockfile-postgres`, `lockfile-redis`) supplies two things:
//! its **server operations** on one lease, [`LeaseOps`](crate::ops::LeaseOps)
//! (one attempt to take it, a wait, a renewal, a release, a history write;
//! and `inspect`), and the **connection** they go over. Everything else
//! lives here, so that it behaves the same on every server:
//!
//! - **The guard and its thread.** [`LeaseGuard`]: the thread that takes
//!   and holds a lease (every signal blocked, a single-threaded runtime),
//!   release on drop; [`thread::block_on`] for an engine's blocking calls.
//! - **The acquire.** [`Acquiring`](crate::acquiring::Acquiring): what each
//!   attempt means (a lost race on the run history, a held lease refused or
//!   waited for, a failure waited out once waiting) and what a timeout says
//!   of the holder; the engine only makes the attempts and waits its own
//!   way (etcd on a watch, PostgreSQL on a poll or a notification).
//! - **The renewal and the deadline.** Every third of the TTL; each renewal
//!   reported to [`Renewals`](crate::signal::Renewals): the deadline is the
//!   *send* time of the last renewal that succeeded plus the TTL, on the
//!   monotonic clock. A server keeps a lease at least a TTL after the
//!   renewal it received, which is no earlier than when it was sent, so the
//!   lease cannot lapse on the server before the holder's deadline.
//!   [`LeaseSignal`] tells the holder's threads. After a loss, renewals
//!   stop and the lease is let go on the server as soon as it answers.
//! - **The stop policy.** [`StopPolicy`](crate::policy::StopPolicy) and [`Step`](crate::policy::Step): ask the work to stop
//!   `grace` before the deadline, kill it just before it.
//! - **The run history.** [`History`]: how the last run ended and the last
//!   success, as one JSON document per name that outlives the lease,
//!   written by the lease's thread within
//!   [`write_until`](crate::history::write_until) of the deadline. The
//!   engine only stores it, with a compare-and-set.
//! - **The events.** `lock_acquired`, `lock_contended`, `renewal_failed`,
//!   `lease_lost`, `lock_released` and `release_failed`, the same for every
//!   engine.
//! - **The report.** [`LeaseReport`], one JSON shape for every engine, with
//!   findings judged as a lock file's are (`overrunning`, `silent`, …).
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
//!
//! ## In an async service (the `tokio` feature)
//!
//! Nothing here blocks a runtime's worker: an engine's
//! [`start`](Engine::start) returns an [`Acquisition`] at once, and awaiting
//! it waits on a channel that the lease's own thread answers (dropping it
//! gives up, cancel-safely). A held lease says when its work must stop as
//! futures to `select!` on: `LeaseSignal::lost`, and
//! `LeaseSignal::ending`, which completes `grace` before the deadline
//! when renewals have been failing. `LeaseGuard::release_async` and a
//! guard dropped inside a runtime never block either. Here, a lease whose
//! renewals never come (nothing renews this one):
//!
//! ```
//! # #[cfg(feature = "tokio")]
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::time::{Duration, Instant};
//! use lockfile_lease::Ending;
//! use lockfile_lease::signal::Renewals;
//!
//! let renewals = Renewals::new("lockfile/locks/report", Duration::from_millis(1500), Instant::now());
//! let signal = renewals.signal();
//! let mut steps = 0;
//! let ending = loop {
//!     tokio::select! {
//!         ending = signal.ending(Duration::from_millis(1000)) => break ending,
//!         () = tokio::time::sleep(Duration::from_millis(10)) => steps += 1, // the work
//!     }
//! };
//! // Told to stop while a second remained: done before the deadline.
//! assert!(matches!(ending, Ending::Near { deadline } if Instant::now() < deadline));
//! assert!(steps > 0);
//! # });
//! ```
//!
//! The module `leader` is what a service wants of a lease: campaign, lead while
//! held, stop before the lease can lapse, campaign again; on every engine.
//! A whole service (the example `leader_service` is this one, with a
//! choice of engine and store):
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # mod service {
//! use std::ops::ControlFlow;
//! use std::sync::Arc;
//! use std::time::Duration;
//! use lockfile_lease::Engine;
//! use lockfile_lease::leader::Election;
//!
//! /// Leads for ever: writes every second while leading, each write fenced
//! /// by the term's token where the data lives.
//! pub async fn serve(engine: Arc<dyn Engine>) -> lockfile_lease::Result<()> {
//!     Election::new(engine, "billing")
//!         .lead(|term| async move {
//!             while term.is_leading() {
//!                 // BEGIN; SELECT lockfile.fence('billing', $token); ...; COMMIT
//!                 write(term.fencing_token()).await;
//!                 tokio::select! {
//!                     _ = term.ending() => break, // renewals failing: stop now
//!                     () = tokio::time::sleep(Duration::from_secs(1)) => {}
//!                 }
//!             }
//!             ControlFlow::<()>::Continue(()) // step down, campaign again
//!         })
//!         .await
//! }
//! # async fn write(_token: u64) {}
//! # }
//! ```
//!
//! Work that overstays its term is dropped just before the deadline; a
//! write already on its way cannot be called back, which is what the
//! fence is for. See `docs/services.md`.

#![deny(missing_docs)]
// The owner record comes from the core crate, which is Unix-only.
#![cfg(unix)]

mod acquire;
pub mod acquiring;
mod acquisition;
#[cfg(feature = "tokio")]
mod ending;
pub mod engine;
pub mod error;
mod guard;
pub mod history;
mod hold;
#[cfg(feature = "tokio")]
pub mod leader;
mod lease;
mod lost;
pub mod name;
pub mod ops;
mod park;
pub mod policy;
mod released;
pub mod report;
mod request;
mod runtime;
mod session;
pub mod shutdown;
pub mod signal;
pub mod slots;
pub mod thread;
pub mod waiting;

// The root: what code that drives any engine needs. The rest lives in the
// modules above.
pub use acquisition::Acquisition;
#[cfg(feature = "tokio")]
pub use ending::Ending;
pub use engine::Engine;
pub use error::{Error, Result};
pub use guard::LeaseGuard;
pub use lease::Lease;
pub use lockfile::wait::Wait;
pub use released::Released;
pub use report::LeaseReport;
pub use request::LeaseRequest;
pub use signal::LeaseSignal;

// Inside the crate, every type by its short name.
pub(crate) use history::History;
pub(crate) use lost::LostReason;
