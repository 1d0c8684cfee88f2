//! The run history of a lease: how its last run ended, in a key of its own
//! that has no lease (`lockfile/history/NAME`), so that it outlives the
//! lease and later holders. The history itself, and how failures in a row
//! are counted, are the core crate's ([`LastRun`]); this module only keeps
//! it in etcd.
//!
//! A write reads the history, builds the next one from it, and puts it only
//! if the key has not changed since the read (same mod revision); otherwise
//! it starts again from what the key holds now. Two holders that finish at
//! once (one whose lease lapsed, and its successor) so never lose a failure
//! between them.

use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, KeyValue, Txn, TxnOp, TxnOpResponse};
use lockfile::{LastRun, RunEnd};
use serde::{Deserialize, Serialize};

use crate::conn::Conn;
use crate::error::Operation;
use crate::{Error, Result};

/// How long past the lease's deadline a history write may still wait on
/// etcd. Past the deadline nobody holds the lease any more, and a command
/// wrapper should be gone: the write gets a moment to land, not a request
/// timeout.
pub(crate) const AFTER_DEADLINE: Duration = Duration::from_millis(200);

/// The least time a history write is given, however late it starts: a run
/// that ends well after its deadline (its holder was paused, or kept a lost
/// guard) still gets one short attempt.
pub(crate) const AT_LEAST: Duration = Duration::from_millis(100);

/// How many times a write is tried when the key keeps changing under it.
const ATTEMPTS: u32 = 5;

/// The history key's value: a JSON object, so that more can be kept beside
/// the last run later without breaking older readers.
#[derive(Serialize, Deserialize)]
struct Document<T> {
    last_run: Option<T>,
}

/// When a history write that starts at `now` must be over, for a lease
/// whose deadline is `deadline`: within the request timeout, and within
/// [`AFTER_DEADLINE`] of the deadline, but never in less than [`AT_LEAST`].
pub(crate) fn write_until(deadline: Instant, now: Instant, request_timeout: Duration) -> Instant {
    let budget = (deadline + AFTER_DEADLINE)
        .saturating_duration_since(now)
        .max(AT_LEAST)
        .min(request_timeout);
    now + budget
}

/// The last run kept in a history key's value, or why it cannot be read.
pub(crate) fn decode(value: &[u8]) -> std::result::Result<Option<LastRun>, String> {
    serde_json::from_slice::<Document<LastRun>>(value)
        .map(|doc| doc.last_run)
        .map_err(|e| format!("the run history is not one of ours: {e}"))
}

fn encode(run: &LastRun) -> Vec<u8> {
    serde_json::to_vec(&Document {
        last_run: Some(run),
    })
    .expect("a run history serialises")
}

/// The history in `kv` (none when the key does not exist) and the mod
/// revision to compare against (0 for a missing key). A value that is not
/// a history is overwritten, as if the job had none yet.
fn current(kv: Option<&KeyValue>) -> (Option<LastRun>, i64) {
    match kv {
        None => (None, 0),
        Some(kv) => (decode(kv.value()).ok().flatten(), kv.mod_revision()),
    }
}

/// The history in `conn`'s key, for a report: a history that cannot be
/// read (not ours, or not readable by this etcd user) is a note beside the
/// report, never a failure of it.
pub(crate) async fn read(conn: &Conn, client: &mut Client) -> (Option<LastRun>, Option<String>) {
    match conn
        .call(Operation::Read, client.get(conn.key(), None))
        .await
    {
        Ok(get) => from_value(get.kvs().first()),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// [`read`]'s answer for the value of a history key, if it exists.
pub(crate) fn from_value(kv: Option<&KeyValue>) -> (Option<LastRun>, Option<String>) {
    match kv.map(|kv| decode(kv.value())) {
        None => (None, None),
        Some(Ok(run)) => (run, None),
        Some(Err(e)) => (None, Some(e)),
    }
}

/// Records `end` in `conn`'s key, the history key, by `until`, on a
/// connection of its own; returns the history written.
pub(crate) async fn record(conn: &Conn, end: RunEnd, until: Instant) -> Result<LastRun> {
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
        let run = LastRun::finished(previous.as_ref(), end);
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, revision)])
            .and_then([TxnOp::put(key, encode(&run), None)])
            .or_else([TxnOp::get(key, None)]);
        let resp = conn
            .call_within(
                Operation::RecordRun,
                conn.left_until(until),
                client.txn(txn),
            )
            .await?;
        if resp.succeeded() {
            return Ok(run);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_is_bounded_by_the_deadline_but_gets_a_short_attempt_however_late() {
        let now = Instant::now();
        let timeout = Duration::from_secs(5);
        let ms = Duration::from_millis;
        // Far from the deadline: the request timeout.
        assert_eq!(write_until(now + ms(60_000), now, timeout), now + timeout);
        // Near it: a moment past it.
        assert_eq!(write_until(now + ms(100), now, timeout), now + ms(300));
        // Past it: the least attempt, never less.
        assert_eq!(write_until(now, now + ms(150), timeout), now + ms(250));
        assert_eq!(write_until(now, now + ms(9_000), timeout), now + ms(9_100));
        // And never more than the request timeout.
        assert_eq!(write_until(now, now, ms(50)), now + ms(50));
    }

    #[test]
    fn the_value_is_an_object_around_the_core_crates_last_run() {
        assert_eq!(decode(br#"{"last_run":null}"#), Ok(None));
        let value = br#"{"last_run":{"started_at":"2026-01-02T03:04:05.000000Z","finished_at":"2026-01-02T03:04:07.500000Z","duration_seconds":2.5,"exit_code":null,"signal":9,"outcome":"lease_lost","consecutive_failures":3,"last_failure_at":"2026-01-02T03:04:07.500000Z"},"later":1}"#;
        let run = decode(value).unwrap().unwrap();
        assert_eq!(run.outcome, lockfile::Outcome::LeaseLost);
        assert_eq!(run.consecutive_failures, 3);
        assert_eq!(run.signal, Some(9));
        let again = decode(&encode(&run)).unwrap().unwrap();
        assert_eq!(again, run);
        let err = decode(b"not json").unwrap_err();
        assert!(err.contains("not one of ours"), "{err}");
    }
}
