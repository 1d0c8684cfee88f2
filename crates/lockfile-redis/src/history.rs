//! The run history of a lease: how its last run ended, in a hash of its
//! own without expiry (`PREFIX{NAME}:history`: `version` and `doc`), so
//! that it outlives the lease and later holders. The document is the lease
//! layer's ([`History`]), dated by the server's `TIME`; this module only
//! keeps it in Redis.
//!
//! A write reads the history and its version, builds the next one, and
//! writes it only if the version is still the one read (a script:
//! [`WRITE_HISTORY`]); otherwise it starts again from what is there now.
//! Two holders that finish at once (one whose lease lapsed, and its
//! successor) so never lose a failure between them.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lockfile::history::LastRun;
use lockfile_lease::history::History;
use lockfile_lease::ops::Run;

use crate::conn::{Conn, Connection};
use crate::script::{self, MAX_VALUE, READ_HISTORY, WRITE_HISTORY};
use crate::{Error, Operation, Result};

/// How many times a write is tried when the history keeps changing under
/// it.
const ATTEMPTS: u32 = 5;

/// What the history key holds, as read with the server's clock.
pub(crate) struct Read {
    /// The history: `Ok(None)` when there is none yet, `Err` saying why
    /// the key is not a history of ours.
    pub(crate) history: Result<Option<History>, String>,
    /// The version to compare against ("0" for none).
    pub(crate) version: String,
    /// The server's clock.
    pub(crate) now: SystemTime,
}

/// Reads the history in `conn`'s key, with the server's clock.
pub(crate) async fn read(conn: &Conn, c: &mut Connection, limit: Duration) -> Result<Read> {
    let most = MAX_VALUE.to_string();
    let reply = READ_HISTORY
        .run(
            conn,
            c,
            Operation::Read,
            limit,
            &[conn.key()],
            &[most.as_bytes()],
        )
        .await?;
    let fields = script::fields(conn, Operation::Read, reply)?;
    let kind = String::from_utf8_lossy(&script::bytes(&fields, 0)).into_owned();
    let version = String::from_utf8_lossy(&script::bytes(&fields, 1)).into_owned();
    let size = script::int(&fields, 3).unwrap_or(0);
    let secs = script::int(&fields, 4).and_then(|s| u64::try_from(s).ok());
    let micros = script::int(&fields, 5).and_then(|s| u64::try_from(s).ok());
    let (Some(secs), Some(micros)) = (secs, micros) else {
        return Err(conn.error(
            Operation::Read,
            format!("the server's TIME did not read: {fields:?}"),
        ));
    };
    let now = UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
    // The version is sent back as the compare-and-set's argument and
    // counted on in the scripts: only a number of ours (digits, far from
    // a double's 2^53) is.
    let ours =
        !version.is_empty() && version.len() <= 15 && version.bytes().all(|b| b.is_ascii_digit());
    let history = match kind.as_str() {
        "none" => Ok(None),
        "hash" if !ours => Err(format!(
            "the run history is not one of ours: its version is {}",
            lockfile::text::quoted(&version)
        )),
        "hash" if usize::try_from(size).is_ok_and(|s| s > MAX_VALUE) => Err(format!(
            "the run history is not one of ours: it holds {size} bytes (ours are under {MAX_VALUE})"
        )),
        "hash" => {
            let doc = script::bytes(&fields, 2);
            if doc.is_empty() {
                Err("the run history is not one of ours: it has no document".to_owned())
            } else {
                History::decode(&doc).map(Some)
            }
        }
        other => Err(format!(
            "the run history is not one of ours: the key holds a {}",
            lockfile::text::quoted(other)
        )),
    };
    Ok(Read {
        history,
        version,
        now,
    })
}

/// The history to build on, its version and the server's clock, for a
/// claim or a write: a key that is not a history of ours stops it (it is
/// not overwritten: another client wrote it).
pub(crate) async fn read_current(
    conn: &Conn,
    c: &mut Connection,
    limit: Duration,
) -> Result<(History, String, SystemTime)> {
    let read = read(conn, c, limit).await?;
    match read.history {
        Ok(history) => Ok((history.unwrap_or_default(), read.version, read.now)),
        Err(reason) => Err(conn.error(Operation::Read, reason)),
    }
}

/// Records `run` in `conn`'s key, the history key, by `until`, on a
/// connection of its own; returns the run as written.
pub(crate) async fn record(conn: &Conn, run: &Run, until: Instant) -> Result<LastRun> {
    // The lease's connection may be stuck behind a dead network that the
    // renewals have since left.
    let mut c = conn.connect(conn.left_until(until)).await?;
    for _ in 0..ATTEMPTS {
        let (previous, version, now) = read_current(conn, &mut c, conn.left_until(until)).await?;
        // The server's clock dates the run, as it decides expiries and
        // ticks: a host whose clock is off writes no time of its own.
        let next = previous.after_on(run.end, run.claim.as_ref(), now);
        let doc = next.encode();
        let written = WRITE_HISTORY
            .run(
                conn,
                &mut c,
                Operation::RecordRun,
                conn.left_until(until),
                &[conn.key()],
                &[version.as_bytes(), &doc],
            )
            .await?;
        if written == redis::Value::Int(1) {
            return Ok(next.last_run.expect("a history after a run has a last run"));
        }
    }
    Err(Error::Conflict {
        op: Operation::RecordRun,
        key: conn.key().to_owned(),
        attempts: ATTEMPTS,
    })
}
