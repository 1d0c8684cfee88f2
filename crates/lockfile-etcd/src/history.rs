//! The run history of a lease: how its last run ended, in a key of its own
//! that has no lease (`lockfile/history/NAME`), so that it outlives the
//! lease and later holders. The history document is the lease layer's
//! ([`History`]), and how failures in a row are counted the core crate's
//! ([`LastRun`]); this module only keeps it in etcd.
//!
//! A write reads the history, builds the next one from it, and puts it only
//! if the key has not changed since the read (same mod revision); otherwise
//! it starts again from what the key holds now. Two holders that finish at
//! once (one whose lease lapsed, and its successor) so never lose a failure
//! between them.

use std::time::Instant;

use etcd_client::{Client, Compare, CompareOp, KeyValue, Txn, TxnOp, TxnOpResponse};
use lockfile::history::{LastRun, RunEnd};
use lockfile::tick::Claim;
use lockfile_lease::history::History;

use crate::conn::Conn;
use crate::{Error, Operation, Result};

/// The history in `conn`'s key as it stands, with the mod revision to
/// compare against (0 for a missing key), for a claim.
pub(crate) async fn read_current(conn: &Conn, client: &mut Client) -> Result<(History, i64)> {
    let get = conn
        .call(Operation::Read, client.get(conn.key(), None))
        .await?;
    Ok(current(get.kvs().first()))
}

/// How many times a write is tried when the key keeps changing under it.
const ATTEMPTS: u32 = 5;

/// The history in `kv` (none when the key does not exist) and the mod
/// revision to compare against (0 for a missing key). A value that is not
/// a history is overwritten, as if the job had none yet.
fn current(kv: Option<&KeyValue>) -> (History, i64) {
    match kv {
        None => (History::default(), 0),
        Some(kv) => (
            History::decode(kv.value()).unwrap_or_default(),
            kv.mod_revision(),
        ),
    }
}

/// The history in `conn`'s key, for a report: a history that cannot be
/// read (not ours, or not readable by this etcd user) is a note beside the
/// report, never a failure of it.
pub(crate) async fn read(conn: &Conn, client: &mut Client) -> Result<Option<History>, String> {
    match conn
        .call(Operation::Read, client.get(conn.key(), None))
        .await
    {
        Ok(get) => from_value(get.kvs().first()),
        Err(e) => Err(e.to_string()),
    }
}

/// [`read`]'s answer for the value of a history key, if it exists.
pub(crate) fn from_value(kv: Option<&KeyValue>) -> Result<Option<History>, String> {
    kv.map(|kv| History::decode(kv.value())).transpose()
}

/// Records `end` in `conn`'s key, the history key, by `until`, on a
/// connection of its own; returns the history written.
pub(crate) async fn record(
    conn: &Conn,
    end: RunEnd,
    claim: Option<&Claim>,
    until: Instant,
) -> Result<LastRun> {
    let key = conn.key();
    // The lease's connection may be stuck behind a dead network that the
    // renewer has since left.
    let mut client = conn.connect_within(conn.left_until(until)).await?;
    let get = conn
        .call_within(
            Operation::RecordRun,
            conn.left_until(until),
            client.get(key, None),
        )
        .await?;
    let (mut previous, mut revision) = current(get.kvs().first());
    for _ in 0..ATTEMPTS {
        let next = previous.after(end, claim);
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, revision)])
            .and_then([TxnOp::put(key, next.encode(), None)])
            .or_else([TxnOp::get(key, None)]);
        let resp = conn
            .call_within(
                Operation::RecordRun,
                conn.left_until(until),
                client.txn(txn),
            )
            .await?;
        if resp.succeeded() {
            return Ok(next.last_run.expect("a history after a run has a last run"));
        }
        let now = resp.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(get) => Some(get.kvs().first().cloned()),
            _ => None,
        });
        (previous, revision) = current(now.flatten().as_ref());
    }
    Err(Error::Conflict {
        op: Operation::RecordRun,
        key: key.to_owned(),
        attempts: ATTEMPTS,
    })
}
