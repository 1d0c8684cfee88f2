//! The lease's own thread: a single-threaded runtime that acquires, then runs
//! the renewal and key-watch tasks and turns their reports into the shared
//! state, until the guard asks it to release.
//!
//! The thread is joined when the guard is released or dropped, and every
//! task dies with its runtime: nothing renews a lease its guard let go.

use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};
use lockfile::OwnerRecord;
use lockfile::history::{LastRun, RunEnd};
use lockfile::tick::Claim;
use lockfile_lease::session::{Reply, Request, Requests, Session};
use tokio::sync::mpsc::unbounded_channel;
use tokio::task::JoinHandle;

use crate::acquire::{self, Held};
use crate::conn::{self, Conn};
use crate::renew::{self, Report};
use crate::{
    Error, LeaseOptions, LeaseSignal, LostReason, Operation, Renewals, Result, history, keywatch,
};
use lockfile::wait::Wait;

/// What the guard asks of its thread besides release: write how the run
/// ended into the history key, on the thread that knows the deadline.
#[derive(Debug)]
pub(crate) struct Record(pub(crate) RunEnd, pub(crate) Reply<LastRun>);

/// What the thread hands the guard once the lease is held.
pub(crate) struct Acquired {
    pub(crate) lease_id: i64,
    /// The TTL etcd granted.
    pub(crate) ttl: Duration,
    /// The key's create revision.
    pub(crate) token: u64,
    pub(crate) record: OwnerRecord,
    /// When the winning transaction was sent.
    pub(crate) acquired_at: Instant,
    pub(crate) signal: LeaseSignal,
    /// The claim on the run's tick, when one was asked for.
    pub(crate) claim: Option<Claim>,
}

/// Starts the lease's thread, which takes the lease on `key` (waiting as
/// `wait` says) and then holds it; returns once the lease is held. The run
/// history goes to `history_key`.
pub(crate) fn spawn(
    opts: &LeaseOptions,
    key: &str,
    history_key: &str,
    wait: Wait,
) -> Result<(Acquired, Session<Record>)> {
    let conn = Conn::new(opts, key)?;
    let history = conn.for_key(history_key);
    let opts = opts.clone();
    Session::spawn("lockfile-etcd", key, move |ready, requests| async move {
        let held = match acquire::acquire(&conn, &history, &opts, wait).await {
            Ok(held) => held,
            Err(e) => return ready.send(Err(e)),
        };
        let shared = Renewals::new(conn.key(), held.ttl, held.granted_at);
        ready.send(Ok(Acquired {
            lease_id: held.lease_id,
            ttl: held.ttl,
            token: held.token,
            record: held.record.clone(),
            claim: held.claim.clone(),
            acquired_at: held.acquired_at,
            signal: shared.signal(),
        }));
        hold(conn, history, held, shared, requests).await;
    })
}

/// Runs the renewal and the key watch, and applies their reports, until the
/// guard asks for release. After a loss it stops renewing and keeps trying to
/// clean up (delete the key if still ours, revoke the lease), so that the
/// next holder need not wait for the lease to expire.
///
/// Once the guard asks for release, nothing waits on etcd past the lease's
/// deadline: the key goes with its lease then, whatever we do.
async fn hold(
    conn: Conn,
    history: Conn,
    held: Held,
    shared: Renewals,
    mut requests: Requests<Record>,
) {
    let Held {
        client,
        lease_id,
        ttl,
        token,
        granted_at,
        claim,
        ..
    } = held;
    let (report_tx, mut reports) = unbounded_channel();
    let renewer = tokio::spawn(renew::renew(
        conn.clone(),
        client.clone(),
        lease_id,
        ttl,
        granted_at,
        report_tx.clone(),
    ));
    let watcher = tokio::spawn(keywatch::watch_key(
        conn.clone(),
        client.clone(),
        token,
        lease_id,
        ttl.max(Duration::from_secs(1)),
        report_tx,
    ));
    let cleanup_every = (ttl / 3).max(Duration::from_millis(200));
    let mut client = client;
    let mut cleanup: Option<JoinHandle<bool>> = None;
    let mut reports_open = true;
    loop {
        let lost = shared.lost().is_some();
        if lost && cleanup.is_none() {
            // Stop renewing a lease we no longer trust, and let it go.
            renewer.abort();
            watcher.abort();
            cleanup = Some(tokio::spawn(clean_up(
                conn.clone(),
                client.clone(),
                token,
                lease_id,
                cleanup_every,
            )));
        }
        let deadline = tokio::time::Instant::from_std(shared.deadline());
        tokio::select! {
            biased;
            request = requests.recv() => {
                if let Some(Request::Engine(Record(end, reply))) = request {
                    // On a task of its own, so that renewals go on being
                    // applied while it waits on etcd.
                    let until = lockfile_lease::history::write_until(
                        shared.deadline(),
                        Instant::now(),
                        history.request_timeout,
                    );
                    let history = history.clone();
                    let claim = claim.clone();
                    tokio::spawn(async move {
                        let recorded = history::record(&history, end, claim.as_ref(), until).await;
                        reply.send(recorded);
                    });
                    continue;
                }
                renewer.abort();
                watcher.abort();
                // A deadline that passed unnoticed is a loss all the same.
                shared.poll(Instant::now());
                let lost = shared.lost();
                let until = shared.deadline();
                // The first connection may be stuck behind a dead network
                // the renewer has since left; a new one costs little.
                if Instant::now() < until
                    && let Ok(fresh) = conn.connect_within(conn.left_until(until)).await
                {
                    client = fresh;
                }
                let result = match lost {
                    Some(reason) => {
                        let cleaned = match cleanup.take() {
                            Some(task) if task.is_finished() => task.await.unwrap_or(false),
                            Some(task) => {
                                // Bound the release: one more attempt, not
                                // the rest of one already under way.
                                task.abort();
                                false
                            }
                            None => false,
                        };
                        if !cleaned && Instant::now() < until {
                            let _ = release(&conn, &mut client, token, lease_id, until).await;
                        }
                        Err(shared.lost_error(reason))
                    }
                    None => release(&conn, &mut client, token, lease_id, until).await,
                };
                shared.lose(LostReason::Released);
                if let Some(Request::Release(reply)) = request {
                    reply.send(result);
                }
                return;
            }
            report = reports.recv(), if !lost && reports_open => match report {
                Some(Report::Renewed { sent, ttl }) => shared.renewed(sent, ttl),
                Some(Report::Failed(e)) => {
                    tracing::warn!(
                        name: "renewal_failed",
                        event = "renewal_failed",
                        key = %conn.key(),
                        error = %e,
                    );
                    shared.renewal_failed();
                }
                Some(Report::Expired) => shared.lose(LostReason::Expired),
                Some(Report::KeyLost(reason)) => shared.lose(reason),
                None => reports_open = false,
            },
            () = tokio::time::sleep_until(deadline), if !lost => {
                shared.poll(Instant::now());
            }
        }
    }
}

/// After a loss: releases until etcd confirms, so that the next holder need
/// not wait for the lease to expire. True once done.
async fn clean_up(
    conn: Conn,
    mut client: Client,
    token: u64,
    lease_id: i64,
    every: Duration,
) -> bool {
    loop {
        // Each request bounded by the request timeout: nothing waits on
        // this task but the next holder.
        let until = Instant::now() + conn.request_timeout * 2;
        if release(&conn, &mut client, token, lease_id, until)
            .await
            .is_ok()
        {
            return true;
        }
        tokio::time::sleep(every).await;
        if let Ok(fresh) = conn.connect().await {
            client = fresh;
        }
    }
}

/// Deletes the key only if it is still ours (same create revision, same
/// lease), then revokes the lease; both over by `until`.
async fn release(
    conn: &Conn,
    client: &mut Client,
    token: u64,
    lease_id: i64,
    until: Instant,
) -> Result<()> {
    let key = conn.key();
    let token = i64::try_from(token).unwrap_or(i64::MAX);
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
    tracing::info!(
        name: "lock_released",
        event = "lock_released",
        key = %key,
        fencing_token = token,
        deleted = matches!(deleted, Ok(true)),
    );
    deleted.map(|_| ()).and(revoked)
}
