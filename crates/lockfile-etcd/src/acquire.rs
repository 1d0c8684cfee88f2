//! Taking a lease: grant, then write the key attached to it in one
//! transaction that succeeds only if the key does not exist; on contention,
//! wait on a watch for the key's deletion.

use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, EventType, PutOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use lockfile::OwnerRecord;
use lockfile::tick::Claim;
use lockfile::wait::Wait;
use lockfile_lease::acquiring::{Acquiring, Next};

use crate::conn::Conn;
use crate::history;
use crate::{Error, LeaseOptions, Operation, Result};

/// A lease just taken.
pub(crate) struct Held {
    pub(crate) client: Client,
    pub(crate) lease_id: i64,
    /// The TTL etcd granted.
    pub(crate) ttl: Duration,
    /// The key's create revision.
    pub(crate) token: u64,
    pub(crate) record: OwnerRecord,
    /// When the grant was sent: the lease is good until this plus the TTL.
    pub(crate) granted_at: Instant,
    /// When the winning transaction was sent.
    pub(crate) acquired_at: Instant,
    /// The claim on the run's tick, written with the key.
    pub(crate) claim: Option<Claim>,
}

/// One grant-and-write attempt: when contended, it saw the revision at
/// which the key was read.
type Attempt = lockfile_lease::acquiring::Attempt<Held, i64>;

pub(crate) async fn acquire(
    conn: &Conn,
    history: &Conn,
    opts: &LeaseOptions,
    wait: Wait,
) -> Result<Held> {
    let ttl_secs = ttl_seconds(conn, opts.ttl)?;
    let key = conn.key();
    let mut acquiring = Acquiring::new(key, history.key(), wait);
    let until = acquiring.until();
    let mut client = conn.within(until).connect().await?;
    loop {
        let (conn, history) = (&conn.within(until), &history.within(until));
        let attempt = attempt(conn, history, &mut client, opts, ttl_secs).await;
        match acquiring.judge(attempt)? {
            Next::Again => continue,
            Next::Acquired(held) => {
                tracing::info!(
                    name: "lock_acquired",
                    event = "lock_acquired",
                    key = %key,
                    fencing_token = held.token,
                    lease_id = held.lease_id,
                    ttl_s = held.ttl.as_secs(),
                    token = %held.record.token,
                    job = held.record.job.as_deref().unwrap_or(""),
                    waited_ms = acquiring.waited().as_millis() as u64,
                );
                return Ok(*held);
            }
            // Watch from the revision after the one we read, so that a
            // deletion between the transaction and the watch is not missed.
            Next::Wait(revision) => {
                match wait_deleted(conn, &mut client, revision + 1, until).await {
                    Ok(true) => continue,
                    Ok(false) => return Err(acquiring.timed_out()),
                    Err(e) => acquiring.retry_after(e)?,
                }
            }
            Next::Retry => {}
        }
        if let Some(until) = until
            && Instant::now() + RETRY_WAITING >= until
        {
            tokio::time::sleep_until(until.into()).await;
            return Err(acquiring.timed_out());
        }
        tokio::time::sleep(RETRY_WAITING).await;
        if let Ok(fresh) = conn.connect().await {
            client = fresh;
        }
    }
}

/// How long a waiting acquire pauses after an etcd failure.
const RETRY_WAITING: Duration = Duration::from_secs(1);

/// Grants a lease and writes the key attached to it if the key does not
/// exist; with a tick to claim, writes the claim into the run history in the
/// same transaction, if the history has not changed since it was read.
async fn attempt(
    conn: &Conn,
    history: &Conn,
    client: &mut Client,
    opts: &LeaseOptions,
    ttl_secs: i64,
) -> Result<Attempt> {
    let key = conn.key();
    let granted_at = Instant::now();
    let grant = conn
        .call(Operation::Grant, client.lease_grant(ttl_secs, None))
        .await?;
    let lease_id = grant.id();
    let ttl = match u64::try_from(grant.ttl()) {
        Ok(secs) if secs > 0 => Duration::from_secs(secs),
        _ => {
            return Err(conn.error(
                Operation::Grant,
                etcd_client::Error::InvalidArgs(format!("etcd granted a TTL of {}s", grant.ttl())),
            ));
        }
    };
    let value = serde_json::to_vec(&opts.request.owner_record(ttl / 3))
        .expect("an owner record always serialises");
    // The guard keeps the record exactly as stored (times in microseconds).
    let record: OwnerRecord =
        serde_json::from_slice(&value).expect("an owner record always round-trips");
    let mut when = vec![Compare::create_revision(key, CompareOp::Equal, 0)];
    let mut then = vec![TxnOp::put(
        key,
        value,
        Some(PutOptions::new().with_lease(lease_id)),
    )];
    let mut claim = None;
    if let Some(tick) = &opts.request.tick {
        // etcd has no clock to ask: the local one decides.
        let (kept, revision) = match history::read_current(history, client).await {
            Ok(read) => read,
            Err(e) => {
                revoke_quietly(conn, client, lease_id).await;
                return Err(e);
            }
        };
        match kept.claimed(tick, &record, std::time::SystemTime::now()) {
            Ok((next, ours)) => {
                when.push(Compare::mod_revision(
                    history.key(),
                    CompareOp::Equal,
                    revision,
                ));
                then.push(TxnOp::put(history.key(), next.encode(), None));
                claim = Some(ours);
            }
            Err(decision) => {
                revoke_quietly(conn, client, lease_id).await;
                return Err(
                    Error::refused_tick(key, decision, kept.last_claimed_tick.as_ref())
                        .expect("a refusal"),
                );
            }
        }
    }
    let txn = Txn::new()
        .when(when)
        .and_then(then)
        .or_else([TxnOp::get(key, None)]);
    let acquired_at = Instant::now();
    let resp = match conn.call(Operation::Acquire, client.txn(txn)).await {
        Ok(resp) => resp,
        Err(e) => {
            // The write may have happened; revoking the lease deletes it.
            revoke_quietly(conn, client, lease_id).await;
            return Err(e);
        }
    };
    let revision = resp.header().map_or(0, |h| h.revision());
    if resp.succeeded() {
        return Ok(Attempt::Acquired(Box::new(Held {
            client: client.clone(),
            lease_id,
            ttl,
            token: u64::try_from(revision).unwrap_or(0),
            record,
            granted_at,
            acquired_at,
            claim,
        })));
    }
    // Our lease holds nothing; let it go now rather than at its expiry.
    revoke_quietly(conn, client, lease_id).await;
    let Some((owner, fencing_token)) = holder(&resp.op_responses()) else {
        // The key is free: what failed was the history's comparison.
        return Ok(Attempt::Raced);
    };
    Ok(Attempt::Contended {
        owner,
        fencing_token,
        seen: revision,
    })
}

fn ttl_seconds(conn: &Conn, ttl: Duration) -> Result<i64> {
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    if secs == 0 {
        return Err(Error::InvalidOptions {
            op: Operation::Grant,
            key: conn.key().to_owned(),
            reason: "the TTL is zero".to_owned(),
        });
    }
    i64::try_from(secs).map_err(|_| Error::InvalidOptions {
        op: Operation::Grant,
        key: conn.key().to_owned(),
        reason: format!("a TTL of {secs}s is too long"),
    })
}

/// The holder's record and fencing token from the transaction's `else`
/// read; `None` when the key does not exist.
fn holder(responses: &[TxnOpResponse]) -> Option<(Option<Box<OwnerRecord>>, u64)> {
    for r in responses {
        if let TxnOpResponse::Get(get) = r
            && let Some(kv) = get.kvs().first()
        {
            let owner = OwnerRecord::from_json(kv.value()).ok().map(Box::new);
            return Some((owner, u64::try_from(kv.create_revision()).unwrap_or(0)));
        }
    }
    None
}

pub(crate) async fn revoke_quietly(conn: &Conn, client: &mut Client, lease_id: i64) {
    if let Err(e) = conn
        .call(Operation::Revoke, client.lease_revoke(lease_id))
        .await
    {
        tracing::debug!(error = %e, "revoking an unused lease failed; it will expire");
    }
}

/// Waits on a watch for the key's deletion, from revision `from`. True when
/// deleted (or when the watch cannot tell, so the caller tries again), false
/// when `until` passed.
///
/// A watch that goes silent on a dead connection is noticed: every
/// `LIVENESS` without a message the watch asks etcd for a progress report,
/// and a watch that does not answer that is opened anew.
async fn wait_deleted(
    conn: &Conn,
    client: &mut Client,
    mut from: i64,
    until: Option<Instant>,
) -> Result<bool> {
    const LIVENESS: Duration = Duration::from_secs(5);
    let key = conn.key();
    let mut reconnected = false;
    'watch: loop {
        let options = WatchOptions::new().with_start_revision(from);
        let mut stream = match conn
            .call(Operation::Watch, client.watch(key, Some(options)))
            .await
        {
            Ok(stream) => stream,
            Err(e) if reconnected => return Err(e),
            Err(_) => {
                reconnected = true;
                *client = conn.connect().await?;
                continue;
            }
        };
        let mut asked_progress = false;
        loop {
            let next = tokio::time::Instant::now() + LIVENESS;
            let wake = until.map_or(next, |u| next.min(u.into()));
            let message = tokio::select! {
                m = stream.message() => m,
                () = tokio::time::sleep_until(wake) => {
                    if until.is_some_and(|u| Instant::now() >= u) {
                        return Ok(false);
                    }
                    if asked_progress {
                        // Two silent periods: the connection is dead.
                        *client = conn.connect().await?;
                        continue 'watch;
                    }
                    asked_progress = true;
                    let _ = stream.request_progress().await;
                    continue;
                }
            };
            asked_progress = false;
            match message {
                Ok(Some(resp)) => {
                    reconnected = false;
                    if resp.canceled() {
                        // Compacted past `from`, or refused: try the
                        // transaction again, which reads the current state.
                        return Ok(true);
                    }
                    for event in resp.events() {
                        if event.event_type() == EventType::Delete {
                            return Ok(true);
                        }
                        if let Some(kv) = event.kv() {
                            from = from.max(kv.mod_revision() + 1);
                        }
                    }
                }
                Ok(None) | Err(_) => {
                    if reconnected {
                        return Ok(true);
                    }
                    reconnected = true;
                    *client = conn.connect().await?;
                    continue 'watch;
                }
            }
        }
    }
}
