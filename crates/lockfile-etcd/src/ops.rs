//! The lease layer's server operations, on etcd: [`EtcdOps`] takes a lease
//! (grant, then a transaction: [`crate::acquire`]), renews it (a keepalive
//! on a stream kept open), watches its key ([`crate::keywatch`]), writes
//! its run history ([`crate::history`]) and releases it (a conditional
//! delete, then a revoke). When to do each, and what the answers mean, is
//! the layer's.

use std::future::Future;
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, LeaseKeepAliveStream, LeaseKeeper, Txn, TxnOp};
use lockfile::history::LastRun;
use lockfile_lease::LeaseRequest;
use lockfile_lease::acquiring::Attempt;
use lockfile_lease::ops::{Granted, LeaseOps, Released, Run, Vocabulary};

use crate::conn::{self, Conn};
use crate::state::{EtcdOps, Held};
use crate::{ENGINE, Error, LostReason, Operation, Result, acquire, history, keywatch};

impl LeaseOps for EtcdOps {
    type Held = Held;
    /// The revision at which the holder's key was read.
    type Seen = i64;

    const KIND: &'static str = ENGINE;
    const VOCABULARY: Vocabulary = Vocabulary::new(true, true);

    fn key(&self) -> &str {
        self.conn.key()
    }

    fn history_key(&self) -> &str {
        self.history.key()
    }

    fn request_timeout(&self) -> Duration {
        self.conn.request_timeout
    }

    async fn attempt(
        &mut self,
        request: &LeaseRequest,
        until: Option<Instant>,
    ) -> Result<Attempt<Granted<Held>, i64>> {
        acquire::attempt(self, request, until).await
    }

    async fn wait(&mut self, seen: Option<i64>, until: Option<Instant>) -> Result<bool> {
        acquire::wait(self, seen, until).await
    }

    async fn renew(&mut self, held: &mut Held, within: Duration) -> Result<Option<Duration>> {
        let mut client = match &self.client {
            Some(client) => client.clone(),
            None => self.conn.connect().await?,
        };
        if held.unanswered {
            // The answer to a cancelled renewal may still come on this
            // stream: read as this one's, it would date the deadline from
            // a later send than the renewal etcd answered.
            held.stream = None;
        }
        held.unanswered = true;
        let answer = self
            .conn
            .call_within(
                Operation::Renew,
                within,
                renew_once(&mut client, &mut held.stream, held.lease_id, held.ttl),
            )
            .await;
        held.unanswered = false;
        self.client = Some(client);
        if let Err(e) = &answer {
            tracing::debug!(error = %e, "lease renewal failed; reconnecting");
            // The stream may be stuck behind a dead connection: drop it
            // and the client's connections, and start afresh.
            held.stream = None;
            if let Ok(fresh) = self.conn.connect().await {
                self.client = Some(fresh);
            }
        }
        answer
    }

    async fn release(&mut self, held: &mut Held, until: Instant) -> Result<Released> {
        // The lease's connection may be stuck behind a dead network the
        // renewals have since left; a new one costs little.
        if Instant::now() < until
            && let Ok(fresh) = self.conn.connect_within(self.conn.left_until(until)).await
        {
            self.client = Some(fresh);
        }
        let mut client = match self.client.clone() {
            Some(client) => client,
            None => {
                self.conn
                    .connect_within(self.conn.left_until(until))
                    .await?
            }
        };
        release(&self.conn, &mut client, held, until).await
    }

    fn record(
        &self,
        run: Run,
        until: Instant,
    ) -> impl Future<Output = Result<LastRun>> + Send + 'static {
        let history = self.history.clone();
        async move { history::record(&history, run.end, run.claim.as_ref(), until).await }
    }

    fn watch(&self, held: &Held) -> impl Future<Output = LostReason> + Send + 'static {
        keywatch::watch_key(
            self.conn.clone(),
            self.client.clone(),
            held.token,
            held.lease_id,
            held.ttl.max(Duration::from_secs(1)),
        )
    }
}

/// One renewal: `Some(ttl)` when etcd renewed the lease, `None` when it
/// answered that the lease does not exist.
async fn renew_once(
    client: &mut Client,
    stream: &mut Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    lease_id: i64,
    ttl: Duration,
) -> Result<Option<Duration>, etcd_client::Error> {
    let Some((keeper, responses)) = stream else {
        // Opening the stream sends a first renewal and waits for its answer.
        return match client.lease_keep_alive(lease_id).await {
            Ok(opened) => {
                *stream = Some(opened);
                Ok(Some(ttl))
            }
            // etcd answers a renewal of a lease it no longer has with TTL 0,
            // which the client reports as this variant; a failure to send is
            // the same variant, told apart only by its message. Ask etcd:
            // a lease it does not have has a time-to-live of -1.
            Err(e @ etcd_client::Error::LeaseKeepAliveError(_)) => {
                let live = client.lease_time_to_live(lease_id, None).await?;
                if live.ttl() < 0 { Ok(None) } else { Err(e) }
            }
            Err(e) => Err(e),
        };
    };
    keeper.keep_alive().await?;
    match responses.message().await? {
        Some(resp) => match u64::try_from(resp.ttl()) {
            Ok(secs) if secs > 0 => Ok(Some(Duration::from_secs(secs))),
            _ => Ok(None),
        },
        None => Err(etcd_client::Error::LeaseKeepAliveError(
            "etcd closed the keepalive stream".to_owned(),
        )),
    }
}

/// Deletes the key only if it is still ours (same create revision, same
/// lease), then revokes the lease; both over by `until`.
async fn release(
    conn: &Conn,
    client: &mut Client,
    held: &Held,
    until: Instant,
) -> Result<Released> {
    let key = conn.key();
    let token = i64::try_from(held.token).unwrap_or(i64::MAX);
    let lease_id = held.lease_id;
    let txn = Txn::new()
        .when([
            Compare::create_revision(key, CompareOp::Equal, token),
            // A put over the key keeps its create revision but moves it to
            // another lease: then it is someone else's.
            Compare::lease(key, CompareOp::Equal, lease_id),
        ])
        .and_then([TxnOp::delete(key, None)]);
    let deleted = match conn
        .call_within(Operation::Release, conn.left_until(until), client.txn(txn))
        .await
    {
        Ok(resp) => Ok(resp.succeeded()),
        // etcd is not answering: a revoke would wait as long again.
        Err(e @ Error::Unanswered { .. }) => return Err(e),
        Err(e) => Err(e),
    };
    // Revoke even when the delete failed: if that was only an error in the
    // answer, the revoke still lets the next holder in at once.
    let revoked = conn
        .call_within(Operation::Revoke, conn.left_until(until), async {
            match client.lease_revoke(lease_id).await {
                // A lease that already expired (or that an earlier attempt
                // revoked, its answer lost) is no failure to release.
                Err(e) if conn::is_lease_not_found(&e) => Ok(()),
                answer => answer.map(drop),
            }
        })
        .await;
    let freed = matches!(deleted, Ok(true));
    Ok(Released::new(freed, deleted.map(|_| ()).and(revoked)))
}
