//! Taking a lease: one statement that inserts the lease's row, or takes
//! over a row whose lease has expired by the server's clock, and returns
//! either our new token or the holder. A blocking acquire asks again every
//! [`poll_interval`](lockfile_lease::engine::poll_interval).

use std::time::{Duration, Instant};

use lockfile::OwnerRecord;
use lockfile::tick::{Claim, TickClaim};
use lockfile::wait::Wait;
use lockfile_lease::LeaseRequest;
use lockfile_lease::history::History;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Row};

use crate::conn::Conn;
use crate::{Error, Operation, Result, ServerError};

/// A lease just taken.
pub(crate) struct Held {
    pub(crate) token: u64,
    /// The TTL the server granted (the one asked for).
    pub(crate) ttl: Duration,
    pub(crate) record: OwnerRecord,
    /// When the winning statement was sent: the lease is good until this
    /// plus the TTL.
    pub(crate) granted_at: Instant,
    /// The claim on the run's tick, taken with the lease.
    pub(crate) claim: Option<Claim>,
}

/// The outcome of one attempt.
enum Attempt {
    Acquired(Box<Held>),
    /// The run history changed between its read and the claim's write:
    /// decide again.
    Raced,
    Contended {
        owner: Option<Box<OwnerRecord>>,
        fencing_token: u64,
    },
}

/// The TTL in whole milliseconds, as the server keeps it.
fn ttl_ms(conn: &Conn, ttl: Duration) -> Result<i64> {
    let invalid = |reason: String| Error::InvalidOptions {
        op: Operation::Acquire,
        key: conn.key().to_owned(),
        reason,
    };
    match i64::try_from(ttl.as_millis()) {
        Ok(0) => Err(invalid("the TTL is under a millisecond".to_owned())),
        Ok(ms) => Ok(ms),
        Err(_) => Err(invalid(format!("a TTL of {ttl:?} is too long"))),
    }
}

pub(crate) async fn acquire(
    conn: &Conn,
    name: &str,
    ttl: Duration,
    request: &LeaseRequest,
) -> Result<(Held, Client)> {
    let ms = ttl_ms(conn, ttl)?;
    let ttl = Duration::from_millis(ms.unsigned_abs());
    let started = Instant::now();
    let until = match request.wait {
        Wait::Until(until) => Some(until),
        Wait::No | Wait::Forever => None,
    };
    let poll = lockfile_lease::engine::poll_interval(ttl);
    let mut client: Option<Client> = None;
    let mut owner = None;
    let mut waiting = false;
    let mut races = 0;
    loop {
        let tried = match client.take().filter(|c| !c.is_closed()) {
            Some(c) => Ok(c),
            None => conn.connect().await,
        };
        let tried = match tried {
            Ok(c) => {
                let answer = attempt(conn, &c, name, ms, ttl, request).await;
                client = Some(c);
                answer
            }
            Err(e) => Err(e),
        };
        match tried {
            Ok(Attempt::Raced) if races < RACES => {
                races += 1;
                continue;
            }
            Ok(Attempt::Raced) => {
                return Err(Error::Conflict {
                    op: Operation::Acquire,
                    key: conn.key().to_owned(),
                    attempts: RACES,
                });
            }
            Ok(Attempt::Acquired(held)) => {
                tracing::info!(
                    name: "lock_acquired",
                    event = "lock_acquired",
                    key = %conn.key(),
                    fencing_token = held.token,
                    ttl_ms = ms,
                    token = %held.record.token,
                    job = held.record.job.as_deref().unwrap_or(""),
                    waited_ms = started.elapsed().as_millis() as u64,
                );
                return Ok((*held, client.take().expect("the attempt's connection")));
            }
            Ok(Attempt::Contended {
                owner: holder,
                fencing_token,
            }) => {
                if let Some(o) = &holder {
                    tracing::info!(
                        name: "lock_contended",
                        event = "lock_contended",
                        key = %conn.key(),
                        holder_pid = o.pid,
                        holder_host = %o.hostname,
                        fencing_token,
                    );
                }
                if let Wait::No = request.wait {
                    return Err(Error::Contended {
                        key: conn.key().to_owned(),
                        owner: holder,
                        fencing_token,
                    });
                }
                owner = holder;
                waiting = true;
            }
            // Once waiting, a server hiccup (a restart, a failover) is
            // waited out like the holder is; errors before the first answer
            // (a missing table, a bad password) are returned.
            Err(e) if waiting && !e.is_tick_refused() => {
                tracing::warn!(key = %conn.key(), error = %e, "waiting for a lease: the server failed; retrying");
                client = None;
            }
            Err(e) => return Err(e),
        }
        let now = Instant::now();
        let pause = match until {
            Some(until) if now >= until => {
                return Err(Error::Timeout {
                    key: conn.key().to_owned(),
                    waited: started.elapsed(),
                    owner,
                });
            }
            Some(until) => poll.min(until - now),
            None => poll,
        };
        tokio::time::sleep(pause).await;
    }
}

/// How many times in a row a claim may lose the race on the run history
/// before the acquire gives up.
const RACES: u32 = 5;

/// One acquire statement on `client`; with a tick to claim, a transaction
/// that also writes the claim into the run history.
async fn attempt(
    conn: &Conn,
    client: &Client,
    name: &str,
    ttl_ms: i64,
    ttl: Duration,
    request: &LeaseRequest,
) -> Result<Attempt> {
    let Some(tick) = &request.tick else {
        return take(conn, client, name, ttl_ms, ttl, request).await;
    };
    conn.batch(client, Operation::Acquire, conn.request_timeout, "BEGIN")
        .await?;
    let answer = claim(conn, client, name, ttl_ms, ttl, request, tick).await;
    let won = matches!(answer, Ok(Attempt::Acquired(_)));
    let end = if won { "COMMIT" } else { "ROLLBACK" };
    match conn
        .batch(client, Operation::Acquire, conn.request_timeout, end)
        .await
    {
        Ok(()) => answer,
        // A claim that did not commit took nothing.
        Err(e) if won => Err(e),
        Err(_) => answer,
    }
}

/// Inside a transaction: reads the run history and the server's time,
/// decides the tick, takes the lease, and writes the claim if the history
/// is still the one read.
async fn claim(
    conn: &Conn,
    client: &Client,
    name: &str,
    ttl_ms: i64,
    ttl: Duration,
    request: &LeaseRequest,
    tick: &TickClaim,
) -> Result<Attempt> {
    let rows = conn
        .query(
            client,
            Operation::Acquire,
            conn.request_timeout,
            &conn.sql.history_now,
            &[(&name, Type::TEXT)],
        )
        .await?;
    let row = one_row(conn, Operation::Acquire, &rows)?;
    let version: Option<i64> = column(conn, Operation::Acquire, row, 0)?;
    let kept: Option<String> = column(conn, Operation::Acquire, row, 1)?;
    let server_now: f64 = column(conn, Operation::Acquire, row, 2)?;
    let kept = kept
        .and_then(|k| History::decode(k.as_bytes()).ok())
        .unwrap_or_default();
    // The database's clock decides, not this host's.
    let now = std::time::UNIX_EPOCH
        + Duration::try_from_secs_f64(server_now.max(0.0)).unwrap_or(Duration::ZERO);
    let taken = take(conn, client, name, ttl_ms, ttl, request).await?;
    let Attempt::Acquired(mut held) = taken else {
        return Ok(taken);
    };
    let (next, ours) = match kept.claimed(tick, &held.record, now) {
        Ok(claimed) => claimed,
        Err(decision) => {
            return Err(
                Error::refused_tick(conn.key(), decision, kept.last_claimed_tick.as_ref())
                    .expect("a refusal"),
            );
        }
    };
    let document = String::from_utf8(next.encode()).expect("JSON is UTF-8");
    let written = match version {
        None => {
            conn.query(
                client,
                Operation::Acquire,
                conn.request_timeout,
                &conn.sql.claim_create,
                &[(&name, Type::TEXT), (&document, Type::TEXT)],
            )
            .await?
        }
        Some(version) => {
            conn.query(
                client,
                Operation::Acquire,
                conn.request_timeout,
                &conn.sql.claim_update,
                &[
                    (&name, Type::TEXT),
                    (&document, Type::TEXT),
                    (&version, Type::INT8),
                ],
            )
            .await?
        }
    };
    if written.is_empty() {
        return Ok(Attempt::Raced);
    }
    held.claim = Some(ours);
    Ok(Attempt::Acquired(held))
}

/// The acquire statement on `client`.
async fn take(
    conn: &Conn,
    client: &Client,
    name: &str,
    ttl_ms: i64,
    ttl: Duration,
    request: &LeaseRequest,
) -> Result<Attempt> {
    let value = serde_json::to_string(&request.owner_record(ttl / 3))
        .expect("an owner record always serialises");
    // The guard keeps the record exactly as stored (times in microseconds).
    let record =
        OwnerRecord::from_json(value.as_bytes()).expect("an owner record always round-trips");
    // The record's token is new with every record: it tells our row from
    // the holder's.
    let attempt = record.token.to_string();
    let granted_at = Instant::now();
    let rows = conn
        .query(
            client,
            Operation::Acquire,
            conn.request_timeout,
            &conn.sql.acquire,
            &[
                (&name, Type::TEXT),
                (&attempt, Type::TEXT),
                (&value, Type::TEXT),
                (&ttl_ms, Type::INT8),
            ],
        )
        .await?;
    let row = one_row(conn, Operation::Acquire, &rows)?;
    let acquired: bool = column(conn, Operation::Acquire, row, 0)?;
    let token: i64 = column(conn, Operation::Acquire, row, 1)?;
    let token = token.unsigned_abs();
    if acquired {
        return Ok(Attempt::Acquired(Box::new(Held {
            token,
            ttl,
            record,
            granted_at,
            claim: None,
        })));
    }
    let owner: String = column(conn, Operation::Acquire, row, 2)?;
    Ok(Attempt::Contended {
        owner: OwnerRecord::from_json(owner.as_bytes()).ok().map(Box::new),
        fencing_token: token,
    })
}

/// The one row a statement returns.
pub(crate) fn one_row<'a>(conn: &Conn, op: Operation, rows: &'a [Row]) -> Result<&'a Row> {
    rows.first().ok_or_else(|| Error::Io {
        op,
        key: conn.key().to_owned(),
        source: std::io::Error::other("the server returned no row"),
    })
}

/// Column `index` of `row`, as a `T`.
pub(crate) fn column<'a, T: tokio_postgres::types::FromSql<'a>>(
    conn: &Conn,
    op: Operation,
    row: &'a Row,
    index: usize,
) -> Result<T> {
    row.try_get(index)
        .map_err(|e| conn.error(op, ServerError::new(e)))
}
