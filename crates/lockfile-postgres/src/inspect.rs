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
use crate::sql::MAX_TTL_MS;
use crate::{ENGINE, LeaseOptions, Operation, Result, history};

/// What a lease row says about its holder.
struct Held {
    token: i64,
    owner: String,
    ttl_ms: i64,
    remaining_ms: i64,
}

/// What a lease row says: the holder when live, and whether its expiry is
/// past the longest TTL (so treated as expired).
struct Leased {
    held: Option<Held>,
    beyond: bool,
}

impl Leased {
    /// Columns `at..at + 6` of `row`: live, the holder's four, beyond.
    fn from_row(conn: &Conn, row: &Row, at: usize) -> Result<Leased> {
        let live: bool = column(conn, Operation::Read, row, at)?;
        Ok(Leased {
            held: live
                .then(|| Held::from_row(conn, row, at + 1))
                .transpose()?,
            beyond: column(conn, Operation::Read, row, at + 5)?,
        })
    }
}

/// The note on a row whose expiry is past the longest TTL.
fn beyond_note() -> String {
    format!(
        "its row's expiry is later than the longest TTL ({} days) allows, as no holder writes it: treated as expired",
        MAX_TTL_MS / 86_400_000
    )
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
        let leased = rows
            .first()
            .map(|row| Leased::from_row(&conn, row, 0))
            .transpose()?;
        // A read of its own: a role that may read the leases but not the
        // histories still gets the report.
        let history = history::read(&history_conn, &client, name).await;
        let held = leased.as_ref().and_then(|l| l.held.as_ref());
        let mut report = report(name, &key, held, history);
        if leased.is_some_and(|l| l.beyond) {
            report.content_error = Some(beyond_note());
        }
        Ok(report)
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
        // Every name with a row, held or not, or with a history. Any role
        // that may write the tables may write any row: one that cannot be
        // read is said in that name's report, and never keeps the others
        // from being listed.
        let mut names: BTreeMap<String, Named> = BTreeMap::new();
        for row in &rows {
            // A row without a name to show has no report to go into.
            let Ok(name) = column::<String>(&conn, Operation::Read, row, 0) else {
                continue;
            };
            names.entry(name).or_default().leased =
                Leased::from_row(&conn, row, 1).map_err(|e| e.to_string());
        }
        if let Ok(histories) = &histories {
            for row in histories {
                let Ok(name) = column::<String>(&conn, Operation::Read, row, 0) else {
                    continue;
                };
                let record = column::<String>(&conn, Operation::Read, row, 1);
                names.entry(name).or_default().kept = Some(record.map_err(|e| e.to_string()));
            }
        }
        let mut reports = Vec::with_capacity(names.len());
        for (name, named) in names {
            // Rows whose names are not valid lease names are not ours.
            let Ok(key) = key_for(&opts.schema, &name) else {
                continue;
            };
            let history = match &histories {
                Ok(_) => match named.kept {
                    None => Ok(None),
                    Some(Ok(r)) => History::decode(r.as_bytes()).map(Some),
                    Some(Err(e)) => Err(e),
                },
                Err(e) => Err(e.to_string()),
            };
            let held = named.leased.as_ref().ok().and_then(|l| l.held.as_ref());
            let mut report = report(&name, &key, held, history);
            match named.leased {
                Err(e) => {
                    report.content_error = Some(format!("its lease row cannot be read: {e}"));
                }
                Ok(Leased { beyond: true, .. }) => report.content_error = Some(beyond_note()),
                Ok(_) => {}
            }
            reports.push(report);
        }
        Ok(reports)
    })
}

/// What `inspect_all` read about one name: its lease row (none when free),
/// and its history row, each or why it could not be read.
struct Named {
    leased: std::result::Result<Leased, String>,
    kept: Option<std::result::Result<String, String>>,
}

impl Default for Named {
    fn default() -> Named {
        Named {
            leased: Ok(Leased {
                held: None,
                beyond: false,
            }),
            kept: None,
        }
    }
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
