//! Run-once leases across hosts, on PostgreSQL: the database that teams
//! already run. An engine of the lease layer (`lockfile-lease`):
//! [`LeaseOptions`] implements its [`Engine`] trait with PostgreSQL's
//! server operations, and a held lease is the layer's [`LeaseGuard`] (a
//! [`Lease`]), with every guarantee the etcd engine gives: a fencing
//! token that never goes back, a deadline on the holder's monotonic clock,
//! a run history that outlives the lease.
//!
//! ```no_run
//! use std::time::Duration;
//! use lockfile_postgres::LeaseOptions;
//!
//! # fn main() -> Result<(), lockfile_postgres::Error> {
//! let url = "postgres://app@db.internal/jobs?sslmode=verify-full&channel_binding=require";
//! // Once, by a role that may create the schema (or `lockfile postgres init URL`).
//! LeaseOptions::new(url).init(None)?;
//! match LeaseOptions::new(url)
//!     .ttl(Duration::from_secs(10))
//!     .job("nightly-report")
//!     .try_acquire("nightly-report")
//! {
//!     Ok(lease) => {
//!         for batch in 0..3 {
//!             lease.check()?; // the lease may have lapsed: stop
//!             // ... write the batch, carrying lease.fencing_token() ...
//!         }
//!         if let Some(loss) = lease.release()?.loss() {
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
//! # How it works
//!
//! - **A lease is a row** of `SCHEMA.leases` (the schema is `lockfile`
//!   unless told): the name, the fencing token, the owner record, the TTL
//!   and `expires_at`, on the **server's clock**. No client clock takes part
//!   in deciding who holds a lease.
//! - **Acquire** is one statement: insert the row, or take over a row whose
//!   lease has expired (`INSERT … ON CONFLICT (name) DO UPDATE`, each column
//!   taken over only `WHEN expires_at <= statement_timestamp()`). It returns
//!   either our token and TTL, or the holder's record and token:
//!   [`Error::Contended`]. A waiting acquire asks again every
//!   [`poll_interval`](lockfile_lease::engine::poll_interval) (at most a
//!   second), sooner when the holder's row expires before that, and, with
//!   [`LeaseOptions::listen`], as soon as the lease is released.
//! - **The fencing token** comes from the sequence `SCHEMA.fencing_tokens`
//!   (`CACHE 1`, `NO CYCLE`). The takeover draws it while the row is
//!   locked, so a stalled contender can never take over with an older
//!   token. Tokens rise with every holder, but **skip values**: the row an
//!   attempt would insert draws one too, before the conflict is known, so
//!   every attempt on a held lease (a waiting contender asks once per poll
//!   or notification) uses a value up, and a takeover uses two. A resource
//!   must compare tokens (larger wins), never expect the next integer. A release only expires the row, so every later holder of a name
//!   goes through that takeover. Each write sets `synchronous_commit` on for
//!   its own transaction: a token handed out survives a server crash and a
//!   switch to a synchronous standby.
//! - **Renewal** every TTL/3 by a thread of the guard's own: an `UPDATE`
//!   that succeeds only if the row still has our token and has not expired.
//!   The deadline is the lease layer's: the send time of the last renewal
//!   that succeeded plus the TTL, on the monotonic clock. A renewal that
//!   fails or goes unanswered drops its connection and tries again on a new
//!   one (a server that answers 25006, read-only, counts as unreachable:
//!   with `target_session_attrs=read-write` the new connection finds the
//!   primary).
//! - **Release** expires the row if it still has our token, and in the same
//!   transaction notifies the channel `SCHEMA.leases` with the lease's
//!   name (`pg_notify`, delivered at commit). A waiter with a listen
//!   connection ([`LeaseOptions::listen`], direct, never through a pooler)
//!   subscribes to it once it finds the lease held, while its poll goes
//!   on; it asks again at once when subscribed (so a release in between is
//!   never missed), and then whenever its lease's name comes.
//! - **No session state.** No advisory lock, no transaction open across the
//!   job, nothing `SET` for the session, no named prepared statement: every
//!   statement is one unnamed statement in its own transaction, so that
//!   everything works through PgBouncer in transaction pooling mode. Each
//!   statement is bounded by the client, and cancelled on the server when
//!   the time left before its deadline runs out.
//! - **Isolation.** Every statement is correct under READ COMMITTED and
//!   under `serializable` (a server whose `default_transaction_isolation`
//!   says so): a statement refused with 40001 or 40P01 is sent again, each
//!   time with a `statement_retried` event.
//! - **Fencing where the data lives.** A job whose data is in PostgreSQL
//!   calls `SELECT SCHEMA.fence('NAME', token)` first in its own
//!   transaction ([`schema::fence_sql`]): it keeps the highest token per
//!   name and raises SQLSTATE [`LF001`](sqlstate::STALE_FENCING_TOKEN) for
//!   a lower one, so that a stale holder's whole transaction rolls back.
//!   The engine itself never calls it.
//! - **Run history.** [`Lease::record_outcome`] writes the lease layer's
//!   [`History`] document to `SCHEMA.history` (a compare-and-set on its
//!   version) and the run's end to `SCHEMA.runs`, where every run is kept
//!   for the retention that `init --history-days` set (30 days unless told).
//!
//! # TLS
//!
//! Through rustls on ring, with libpq's parameters and meaning: `sslmode`
//! from `disable` to `verify-full` (the chain to a root of `sslrootcert`,
//! and the host's name in the certificate), `sslcert`/`sslkey` for a client
//! certificate, their `PGSSL*` variables and `~/.postgresql/` files, and
//! SCRAM channel binding. A certificate that does not verify is an
//! [`Error::Server`] that names the cause.
//!
//! # What a TTL really promises here
//!
//! - **The server's clock must slew, not step.** Expiry is judged on it: a
//!   server clock that jumps forward by more than what is left of a lease
//!   expires it early, while its holder still believes it holds it. The
//!   fencing token still protects a resource that checks it. Keep the
//!   server on NTP with stepping disabled after boot.
//! - **An asynchronous failover can lose tokens.** A standby promoted before
//!   it received the last commits may hand out a token again that the old
//!   primary had already handed out, and take over a lease whose renewal it
//!   never saw. Use synchronous replication (`synchronous_standby_names`)
//!   for a failover that keeps every token, or after an asynchronous one
//!   advance the sequence past the highest token the fenced resources have
//!   seen: `SELECT pg_catalog.setval('lockfile.fencing_tokens', N)`.
//! - **Process pauses** are as under any lease: a holder stopped past its
//!   deadline wakes believing for a moment that it holds the lease; only the
//!   resource can refuse its late write, by its token.
//!
//! # Events
//!
//! `lock_acquired`, `lock_contended`, `lock_released`, `renewal_failed`,
//! `statement_retried`, `lease_lost`, `release_failed` and `listen_failed`
//! (a warning, once per acquire: the listen connection could not be opened
//! or died, and the acquire polls), as
//! [`tracing`](https://docs.rs/tracing) events with an `event` field of the
//! same name. `lock_acquired` says what ended the wait in `woken_by`:
//! `nothing` (no wait), `listening` (asked again once subscribed),
//! `notification`, `poll` or `expiry` (the holder's row expired); its TTL
//! is `ttl_ms`, and `lock_released` says whether the row was `expired`.
//! The lease layer emits the lease's events (their target is under
//! `lockfile_lease`), this crate `statement_retried` and `listen_failed`.
//!
//! Do not call the blocking calls of this crate from an async task: each
//! runs its own small runtime on a thread of its own, and blocks the
//! caller until it is done.

#![deny(missing_docs)]
// The owner record comes from the core crate, which is Unix-only.
#![cfg(unix)]

mod acquire;
mod channel_binding;
mod conn;
mod connect;
mod conninfo;
mod conninfo_parse;
mod engine;
mod history;
mod init;
mod inspect;
mod key;
mod listen;
mod ops;
mod options;
pub mod schema;
mod server;
pub mod sql;
pub mod sqlstate;
mod sslmode;
mod state;
mod tls;
mod wire;

pub use key::{history_key_for, key_for};
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
pub use options::{DEFAULT_REQUEST_TIMEOUT, DEFAULT_TTL, LeaseOptions};
pub use sqlstate::ServerError;

/// This engine's name in reports, messages and metrics.
pub const ENGINE: &str = "postgres";
