//! Taking a lease: grant, then write the key attached to it in one
//! transaction that succeeds only if the key does not exist; on contention,
//! wait on a watch for the key's deletion. The layer judges each attempt.

use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, EventType, PutOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use lockfile::OwnerRecord;
use lockfile_lease::LeaseRequest;
use lockfile_lease::ops::{Granted, stored_record};

use crate::conn::Conn;
use crate::history;
use crate::state::{EtcdOps, Held};
use crate::{Error, Operation, Result};

/// One grant-and-write attempt: when contended, it saw the revision at
/// which the key was read.
type Attempt = lockfile_lease::acquiring::Attempt<Granted<Held>, i64>;

/// How long a waiting acquire pauses after an etcd failure.
const RETRY_WAITING: Duration = Duration::from_secs(1);

/// One attempt, every request of it ending by `until` too.
pub(crate) async fn attempt(
    ops: &mut EtcdOps,
    request: &LeaseRequest,
    until: Option<Instant>,
) -> Result<Attempt> {
    let (conn, history) = (&ops.conn.within(until), &ops.history.within(until));
    let mut client = match &ops.client {
        Some(client) => client.clone(),
        None => conn.connect().await?,
    };
    ops.client = Some(client.clone());
    take(conn, history, &mut client, request, ops.ttl_secs).await
}

/// Waits for the holder whose key was read at revision `seen` to let go;
/// without one, pauses after a failure and reconnects. False once `until`
/// has passed.
pub(crate) async fn wait(
    ops: &mut EtcdOps,
    seen: Option<i64>,
    until: Option<Instant>,
) -> Result<bool> {
    let conn = &ops.conn.within(until);
    let Some(revision) = seen else {
        if let Some(until) = until
            && Instant::now() + RETRY_WAITING >= until
        {
            tokio::time::sleep_until(until.into()).await;
            return Ok(false);
        }
        tokio::time::sleep(RETRY_WAITING).await;
        if let Ok(fresh) = conn.connect().await {
            ops.client = Some(fresh);
        }
        return Ok(true);
    };
    let mut client = match &ops.client {
        Some(client) => client.clone(),
        None => conn.connect().await?,
    };
    // Watch from the revision after the one we read, so that a deletion
    // between the transaction and the watch is not missed.
    let woke = wait_deleted(conn, &mut client, revision + 1, until).await;
    ops.client = Some(client);
    woke
}

/// Grants a lease and writes the key attached to it if the key does not
/// exist; with a tick to claim, writes the claim into the run history in the
/// same transaction, if the history has not changed since it was read.
async fn take(
    conn: &Conn,
    history: &Conn,
    client: &mut Client,
    request: &LeaseRequest,
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
    let (value, record) = stored_record(request, ttl);
    let mut when = vec![Compare::create_revision(key, CompareOp::Equal, 0)];
    let mut then = vec![TxnOp::put(
        key,
        value,
        Some(PutOptions::new().with_lease(lease_id)),
    )];
    let mut claim = None;
    if let Some(tick) = &request.tick {
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
        let token = u64::try_from(revision).unwrap_or(0);
        let held = Held::new(lease_id, token, ttl);
        let mut granted = Granted::new(token, ttl, record, granted_at, held);
        granted.lease_id = Some(lease_id);
        granted.claim = claim;
        return Ok(Attempt::Acquired(Box::new(granted)));
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
