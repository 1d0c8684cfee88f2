//! Taking a lease: one statement that inserts the lease's row, or takes
//! over a row whose lease has expired by the server's clock, and returns
//! either our new token or the holder. A blocking acquire asks again when
//! the lease is released (with a listener: [`crate::listen`]), and in any
//! case every [`poll_interval`](lockfile_lease::engine::poll_interval), or
//! sooner when the holder's row expires by the server's clock.

use std::time::{Duration, Instant};

use lockfile::OwnerRecord;
use lockfile::tick::TickClaim;
use lockfile_lease::LeaseRequest;
use lockfile_lease::history::History;
use lockfile_lease::ops::{Granted, stored_record};
use tokio_postgres::Row;
use tokio_postgres::types::Type;

use crate::conn::Conn;
use crate::connect::Client;
use crate::listen::{Listener, Starting};
use crate::state::{Held, PgOps};
use crate::{Error, Operation, Result, ServerError};
use lockfile_lease::waiting::Woken;

/// One attempt: when contended, it saw what is left of the holder's lease
/// by the server's clock.
type Attempt = lockfile_lease::acquiring::Attempt<Granted<Held>, Duration>;

/// One attempt, every request of it ending by `until` too: on the
/// connection kept from the last one, or a new one.
pub(crate) async fn attempt(
    ops: &mut PgOps,
    request: &LeaseRequest,
    until: Option<Instant>,
) -> Result<Attempt> {
    // Notifications already here were sent by commits this attempt sees:
    // only those that come during or after it may wake us.
    if let Some(l) = &mut ops.listener
        && !l.forget(&ops.conn)
    {
        ops.listener = None;
    }
    let bounded = ops.conn.within(until);
    let client = match ops.client.take().filter(|c| !c.is_closed()) {
        Some(c) => c,
        None => bounded.connect().await?,
    };
    let ttl = Duration::from_millis(ops.ttl_ms.unsigned_abs());
    let answer = attempt_on(&bounded, &client, &ops.name, ops.ttl_ms, ttl, request).await;
    ops.client = Some(client);
    if let Ok(lockfile_lease::acquiring::Attempt::Acquired(_)) = &answer {
        // The listener's connection closes here.
        ops.listener = None;
        ops.starting = None;
    }
    answer
}

/// Waits before the next attempt: for the holder, whose lease has
/// `remaining` by the server's clock, or, without it, after a failure.
/// False once `until` has passed.
pub(crate) async fn wait(
    ops: &mut PgOps,
    remaining: Option<Duration>,
    until: Option<Instant>,
) -> bool {
    let conn = &ops.conn;
    let ttl = Duration::from_millis(ops.ttl_ms.unsigned_abs());
    let poll = lockfile_lease::engine::poll_interval(ttl);
    match remaining {
        Some(_) => {
            if !ops.listen_tried && conn.listen.is_some() {
                ops.listen_tried = true;
                let limit = until.map_or(conn.request_timeout, |u| conn.left_until(u));
                if !limit.is_zero() {
                    ops.starting = Some(Starting::spawn(conn, limit));
                }
            }
        }
        None => ops.client = None,
    }
    let Some((pause, timer)) = lockfile_lease::waiting::pause(remaining, poll, until) else {
        return false;
    };
    // The rule for notifications, which any role may send with any
    // payload: `lockfile_lease::waiting`.
    let hearing = ops.woken.hears();
    ops.woken = tokio::select! {
        biased;
        () = released(&mut ops.listener, &ops.conn, &ops.name), if hearing => Woken::Notification,
        // Subscribed: every release that commits from now on wakes us,
        // and one that committed since the last attempt is seen by
        // asking again at once.
        started = subscribed(&mut ops.starting) => {
            ops.listener = Some(started);
            Woken::Listening
        }
        () = tokio::time::sleep(pause) => timer,
    };
    true
}

/// The listener once `starting` has subscribed it; never, when nothing is
/// starting or it could not start (and is dropped).
async fn subscribed(starting: &mut Option<Starting>) -> Listener {
    if let Some(s) = starting {
        let started = s.subscribed().await;
        *starting = None;
        if let Some(listener) = started {
            return listener;
        }
    }
    std::future::pending().await
}

/// Returns when the listener hears that `name` was released; never, when
/// there is no listener or it ends (and is dropped).
async fn released(listener: &mut Option<Listener>, conn: &Conn, name: &str) {
    if let Some(l) = listener {
        if l.released(conn, name).await {
            return;
        }
        *listener = None;
    }
    std::future::pending().await
}

/// One acquire statement on `client`; with a tick to claim, a transaction
/// that also writes the claim into the run history.
async fn attempt_on(
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
    let (value, record) = stored_record(request, ttl);
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
        let granted = Granted::new(token, ttl, record, granted_at, Held { token });
        return Ok(Attempt::Acquired(Box::new(granted)));
    }
    let owner: String = column(conn, Operation::Acquire, row, 2)?;
    let remaining: i64 = column(conn, Operation::Acquire, row, 4)?;
    Ok(Attempt::Contended {
        owner: OwnerRecord::from_json(owner.as_bytes()).ok().map(Box::new),
        fencing_token: token,
        seen: Duration::from_millis(remaining.unsigned_abs()),
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
