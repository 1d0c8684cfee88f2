//! The run history of a lease: the lease layer's [`History`] document per
//! name (the `history` table, written with a compare-and-set on its
//! version), and every run's end (the `runs` table, pruned to the retention
//! `init` set as each run is written).
//!
//! The times that later runs decide by (when the run finished and started,
//! when it last failed, the last success) are the server's: the statement
//! that writes the run dates them by `statement_timestamp()`, whatever the
//! host's clock said ([`crate::sql`]).
//!
//! A write reads the document, builds the next one from it, and writes it
//! only if its version is still the one read; otherwise it starts again
//! from what the table holds now. Two holders that finish at once (one
//! whose lease lapsed, and its successor) so never lose a failure between
//! them.

use std::time::Instant;

use lockfile::history::LastRun;
use lockfile_lease::history::History;
use lockfile_lease::ops::Run;
use tokio_postgres::Row;
use tokio_postgres::types::Type;

use crate::connect::Client;

use crate::acquire::column;
use crate::conn::Conn;
use crate::{Error, Operation, Result};

/// How many times a write is tried when the document keeps changing under
/// it.
const ATTEMPTS: u32 = 5;

/// The history in a row of `Statements::history` (none without one) and the
/// version to compare against (0 for none). A document that is not a
/// history is overwritten, as if the job had none yet.
fn current(conn: &Conn, row: Option<&Row>) -> Result<(History, i64)> {
    match row {
        None => Ok((History::default(), 0)),
        Some(row) => {
            let version: i64 = column(conn, Operation::RecordRun, row, 0)?;
            let record: String = column(conn, Operation::RecordRun, row, 1)?;
            Ok((
                History::decode(record.as_bytes()).unwrap_or_default(),
                version,
            ))
        }
    }
}

/// The history of `name`, for a report: one that cannot be read (not ours,
/// or not readable by this role) is a note beside the report, never a
/// failure of it.
pub(crate) async fn read(
    conn: &Conn,
    client: &Client,
    name: &str,
) -> std::result::Result<Option<History>, String> {
    let rows = conn
        .query(
            client,
            Operation::Read,
            conn.request_timeout,
            &conn.sql.history,
            &[(&name, Type::TEXT)],
        )
        .await
        .map_err(|e| e.to_string())?;
    rows.first()
        .map(|row| {
            let record: String = row.try_get(1).map_err(|e| e.to_string())?;
            History::decode(record.as_bytes())
        })
        .transpose()
}

/// Records `run` for `name` by `until`, on a connection of its own (the
/// lease's may be stuck behind a dead network); returns the run written.
pub(crate) async fn record(conn: &Conn, name: &str, run: &Run, until: Instant) -> Result<LastRun> {
    let (end, holder) = (run.end, run);
    {
        let client = conn.connect_within(conn.left_until(until)).await?;
        let rows = conn
            .query(
                &client,
                Operation::RecordRun,
                conn.left_until(until),
                &conn.sql.history,
                &[(&name, Type::TEXT)],
            )
            .await?;
        let (mut previous, mut version) = current(conn, rows.first())?;
        let host: &str = &holder.record.hostname;
        let pid = i64::from(holder.record.pid);
        let owner_token = holder.record.token.to_string();
        let token = i64::try_from(holder.fencing_token).unwrap_or(i64::MAX);
        for _ in 0..ATTEMPTS {
            let next = previous.after(end, holder.claim.as_ref());
            let run = next
                .last_run
                .clone()
                .expect("a history after a run has a last run");
            let document = String::from_utf8(next.encode()).expect("JSON is UTF-8");
            let run_json = serde_json::to_string(&run).expect("a run serialises");
            let mut params: Vec<(&(dyn tokio_postgres::types::ToSql + Sync), Type)> = vec![
                (&name, Type::TEXT),
                (&document, Type::TEXT),
                (&run_json, Type::TEXT),
                (&host, Type::TEXT),
                (&pid, Type::INT8),
                (&owner_token, Type::TEXT),
                (&token, Type::INT8),
            ];
            let sql = if version == 0 {
                &conn.sql.history_create
            } else {
                params.push((&version, Type::INT8));
                &conn.sql.history_update
            };
            let written = conn
                .query(
                    &client,
                    Operation::RecordRun,
                    conn.left_until(until),
                    sql,
                    &params,
                )
                .await?;
            if let Some(row) = written.first() {
                // The run as stored: its times are the server's.
                let stored: String = column(conn, Operation::RecordRun, row, 0)?;
                return Ok(serde_json::from_str(&stored).unwrap_or(run));
            }
            let rows = conn
                .query(
                    &client,
                    Operation::RecordRun,
                    conn.left_until(until),
                    &conn.sql.history,
                    &[(&name, Type::TEXT)],
                )
                .await?;
            (previous, version) = current(conn, rows.first())?;
        }
        Err(Error::Conflict {
            op: Operation::RecordRun,
            key: conn.key().to_owned(),
            attempts: ATTEMPTS,
        })
    }
}
