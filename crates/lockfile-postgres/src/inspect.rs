//! `inspect`: who holds a lease, with its fencing token and remaining TTL,
//! and how its last run ended. The report is the lease layer's
//! [`LeaseReport`].

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use lockfile::inspect::InspectOptions;
use lockfile_lease::LeaseReport;
use lockfile_lease::history::History;
use lockfile_lease::report::Holding;
use tokio_postgres::Row;
use tokio_postgres::types::Type;

use crate::acquire::column;
use crate::conn::{self, Conn};
use crate::key::{history_key_for, key_for, table_key};
use crate::{ENGINE, LeaseOptions, Operation, Result, history};

/// What a lease row says about its holder.
struct Held {
    token: i64,
    owner: String,
    ttl_ms: i64,
    remaining_ms: i64,
}

impl Held {
    /// Columns `at..at + 4` of `row`: token, owner, TTL, remaining.
    fn from_row(conn: &Conn, row: &Row, at: usize) -> Result<Held> {
        Ok(Held {
            token: column(conn, Operation::Read, row, at)?,
            owner: column(conn, Operation::Read, row, at + 1)?,
            ttl_ms: column(conn, Operation::Read, row, at + 2)?,
            remaining_ms: column(conn, Operation::Read, row, at + 3)?,
        })
    }
}

pub(crate) fn inspect(opts: &LeaseOptions, name: &str) -> Result<LeaseReport> {
    let key = key_for(&opts.schema, name)?;
    let conn = Conn::new(opts, &key)?;
    let history_conn = conn.for_key(&history_key_for(&opts.schema, name)?);
    conn::block_on(&key, || async {
        let client = conn.connect().await?;
        let rows = conn
            .query(
                &client,
                Operation::Read,
                conn.request_timeout,
                &conn.sql.inspect,
                &[(&name, Type::TEXT)],
            )
            .await?;
        let held = rows
            .first()
            .map(|row| Held::from_row(&conn, row, 0))
            .transpose()?;
        // A read of its own: a role that may read the leases but not the
        // histories still gets the report.
        let history = history::read(&history_conn, &client, name).await;
        Ok(report(name, &key, held.as_ref(), history))
    })
}

pub(crate) fn inspect_all(opts: &LeaseOptions) -> Result<Vec<LeaseReport>> {
    let key = table_key(&opts.schema);
    let conn = Conn::new(opts, &key)?;
    conn::block_on(&key, || async {
        let client = conn.connect().await?;
        let rows = conn
            .query_all(
                &client,
                Operation::Read,
                conn.request_timeout,
                &conn.sql.inspect_all,
                &[],
            )
            .await?;
        let histories = conn
            .query_all(
                &client,
                Operation::Read,
                conn.request_timeout,
                &conn.sql.history_all,
                &[],
            )
            .await;
        // Every name with a row, held or not, or with a history.
        let mut names: BTreeMap<String, (Option<Held>, Option<String>)> = BTreeMap::new();
        for row in &rows {
            let name: String = column(&conn, Operation::Read, row, 0)?;
            let live: bool = column(&conn, Operation::Read, row, 1)?;
            let held = if live {
                Some(Held::from_row(&conn, row, 2)?)
            } else {
                None
            };
            names.entry(name).or_default().0 = held;
        }
        if let Ok(histories) = &histories {
            for row in histories {
                let name: String = column(&conn, Operation::Read, row, 0)?;
                let record: String = column(&conn, Operation::Read, row, 1)?;
                names.entry(name).or_default().1 = Some(record);
            }
        }
        let mut reports = Vec::with_capacity(names.len());
        for (name, (held, kept)) in names {
            // Rows whose names are not valid lease names are not ours.
            let Ok(key) = key_for(&opts.schema, &name) else {
                continue;
            };
            let history = match &histories {
                Ok(_) => kept.map(|r| History::decode(r.as_bytes())).transpose(),
                Err(e) => Err(e.to_string()),
            };
            reports.push(report(&name, &key, held.as_ref(), history));
        }
        Ok(reports)
    })
}

/// The report on `name`, held as `held` says (free without it).
fn report(
    name: &str,
    key: &str,
    held: Option<&Held>,
    history: std::result::Result<Option<History>, String>,
) -> LeaseReport {
    let millis = |ms: i64| Some(Duration::from_millis(ms.unsigned_abs()));
    let mut report = LeaseReport::free(ENGINE, name, key).with_history(history);
    if let Some(held) = held {
        report = report.held(Holding {
            value: held.owner.as_bytes(),
            fencing_token: held.token.unsigned_abs(),
            lease_id: None,
            ttl: millis(held.ttl_ms),
            ttl_remaining: millis(held.remaining_ms),
        });
    }
    report.judged(&InspectOptions::new(), SystemTime::now())
}
