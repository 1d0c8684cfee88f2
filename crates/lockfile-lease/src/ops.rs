//! What an engine supplies: its server operations on one lease, as
//! [`LeaseOps`]. The layer drives them the same way for every engine: the
//! acquire's attempts and waits, the renewals and the deadline, the
//! clean-up after a loss, the release, the run history, and every event.
//!
//! An engine's side is its operations (each one request, or a few, to its
//! server, bounded as the layer says) and its connection (how it reaches
//! the server). It decides nothing about the lease's life: when to renew,
//! when the lease is lost, when a wait ends, what a contended attempt
//! means, all that is the layer's.

use std::future::Future;
use std::time::{Duration, Instant};

use lockfile::OwnerRecord;
use lockfile::history::{LastRun, RunEnd};
use lockfile::tick::Claim;

use crate::acquiring::Attempt;
use crate::error::{LostReason, Result};
use crate::request::LeaseRequest;

/// A lease an engine's attempt took, with what the server granted.
#[derive(Debug)]
#[non_exhaustive]
pub struct Granted<H> {
    /// The fencing token: larger than every earlier holder's.
    pub fencing_token: u64,
    /// The TTL the server granted.
    pub ttl: Duration,
    /// The owner record as stored (see [`stored_record`]).
    pub record: OwnerRecord,
    /// When the request that granted the lease was sent: the lease is good
    /// until this plus the TTL.
    pub granted_at: Instant,
    /// The claim on the run's tick, taken with the lease when asked for.
    pub claim: Option<Claim>,
    /// The engine's own id of the lease, if it has one (etcd's lease id).
    pub lease_id: Option<i64>,
    /// What the engine keeps to renew and release this lease.
    pub held: H,
}

impl<H> Granted<H> {
    /// A lease granted by a request sent at `granted_at`, with `ttl`, under
    /// `fencing_token`, holding `record`; no claim, no lease id yet.
    pub fn new(
        fencing_token: u64,
        ttl: Duration,
        record: OwnerRecord,
        granted_at: Instant,
        held: H,
    ) -> Granted<H> {
        Granted {
            fencing_token,
            ttl,
            record,
            granted_at,
            claim: None,
            lease_id: None,
            held,
        }
    }
}

/// The owner record that `request` stores for a lease of `ttl`, as the
/// JSON to store and as the holder keeps it (read back from that JSON, so
/// that its times are exactly the stored ones, in microseconds). Renewals
/// come every third of the TTL: the record's heartbeat interval.
pub fn stored_record(request: &LeaseRequest, ttl: Duration) -> (String, OwnerRecord) {
    let value = serde_json::to_string(&request.owner_record(ttl / 3))
        .expect("an owner record always serialises");
    let record =
        OwnerRecord::from_json(value.as_bytes()).expect("an owner record always round-trips");
    (value, record)
}

/// What a release did on the server, for the `lock_released` event.
#[derive(Debug)]
#[non_exhaustive]
pub struct Released {
    /// Whether the server freed the lease: it was still ours.
    pub freed: bool,
    /// Whether the server was told everything (a release can free the lease
    /// and still fail a later request, etcd's revoke).
    pub result: Result<()>,
}

impl Released {
    /// A release that freed the lease, or found it no longer ours, as
    /// `freed` says, with `result`.
    pub fn new(freed: bool, result: Result<()>) -> Released {
        Released { freed, result }
    }
}

/// One finished run, for the run history: how it ended, and its holder.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Run {
    /// How it ended.
    pub end: RunEnd,
    /// The holder's owner record.
    pub record: OwnerRecord,
    /// The holder's fencing token.
    pub fencing_token: u64,
    /// The run's claim on its tick, when it made one.
    pub claim: Option<Claim>,
}

/// How an engine's events name what differs between servers.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Vocabulary {
    /// The server grants whole seconds: `lock_acquired` says `ttl_s`, not
    /// `ttl_ms`.
    pub ttl_in_seconds: bool,
    /// A release deletes the lease's key: `lock_released` says `deleted`,
    /// not `expired` (a row kept for the next holder, expired).
    pub release_deletes: bool,
}

impl Vocabulary {
    /// An engine's vocabulary.
    pub const fn new(ttl_in_seconds: bool, release_deletes: bool) -> Vocabulary {
        Vocabulary {
            ttl_in_seconds,
            release_deletes,
        }
    }
}

/// An engine's server operations on one lease name, with the connection
/// they go over: what the layer's acquire, renewal, release and run history
/// ask of the server. Each call is a request or a few, bounded in time as
/// its documentation says; the layer decides when each is made and what
/// its answer means.
///
/// The calls run on the lease's own thread (a single-threaded runtime with
/// every signal blocked), one at a time, except [`record`](LeaseOps::record)
/// and [`watch`](LeaseOps::watch), whose futures own what they need and run
/// beside the others.
///
/// A renewal or a clean-up release may be dropped at any await, when the
/// guard's request comes first: the next call must not take anything the
/// dropped one left behind (an answer still on its way on a stream) for its
/// own.
pub trait LeaseOps: Send + 'static {
    /// What the engine keeps of a lease it took, to renew and release it.
    type Held: Send + 'static;
    /// What a contended attempt saw of the holder, to wait for it.
    type Seen: Send;

    /// The engine's name: `etcd`, `postgres`. Its lease threads are named
    /// `lockfile-KIND`.
    const KIND: &'static str;

    /// How the engine's events name what differs.
    const VOCABULARY: Vocabulary;

    /// Where the engine keeps the lease, for every message and event.
    fn key(&self) -> &str;

    /// Where it keeps the lease's run history.
    fn history_key(&self) -> &str;

    /// How long one request may take.
    fn request_timeout(&self) -> Duration;

    /// One attempt to take the lease as `request` says, with its claim on
    /// the run's tick when it asks for one (in one atomic step with taking
    /// the lease: see [`Engine::acquire`](crate::Engine::acquire)). Every
    /// request of the attempt ends by `until`, when given.
    fn attempt(
        &mut self,
        request: &LeaseRequest,
        until: Option<Instant>,
    ) -> impl Future<Output = Result<Attempt<Granted<Self::Held>, Self::Seen>>> + Send;

    /// Waits before the next attempt: for the holder `seen` to let go (or
    /// its lease to expire), or, without one, after a failed attempt.
    /// `Ok(true)` to ask again, `Ok(false)` once `until` has passed.
    fn wait(
        &mut self,
        seen: Option<Self::Seen>,
        until: Option<Instant>,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// What ended the last wait, for the `woken_by` of `lock_acquired`,
    /// when the engine tells its wake-ups apart.
    fn woken_by(&self) -> Option<&'static str> {
        None
    }

    /// One renewal, all within `within`: `Some(ttl)` when renewed for
    /// `ttl` from its receipt, `None` when the server answered that the
    /// lease is no longer ours. After an error, the next call starts on a
    /// fresh connection.
    fn renew(
        &mut self,
        held: &mut Self::Held,
        within: Duration,
    ) -> impl Future<Output = Result<Option<Duration>>> + Send;

    /// Frees the lease on the server if it is still ours, by `until`.
    ///
    /// # Errors
    ///
    /// When the server could not be asked at all (no `lock_released`).
    fn release(
        &mut self,
        held: &mut Self::Held,
        until: Instant,
    ) -> impl Future<Output = Result<Released>> + Send;

    /// Writes `run` into the lease's run history by `until`, with the
    /// engine's compare-and-set ([`History::after`](crate::history::History::after)
    /// from the stored history, again while it changes under the write, up
    /// to a few times), on a connection of its own: the lease's may be
    /// stuck behind a dead network. Returns the run as written.
    fn record(
        &self,
        run: Run,
        until: Instant,
    ) -> impl Future<Output = Result<LastRun>> + Send + 'static;

    /// Resolves when the server says the lease was taken from its holder
    /// (its key deleted or replaced), for an engine that can be told;
    /// never, by default. Expiry is the deadline's business, not this.
    fn watch(&self, held: &Self::Held) -> impl Future<Output = LostReason> + Send + 'static {
        let _ = held;
        std::future::pending()
    }
}
