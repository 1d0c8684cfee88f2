//! Taking a lease: one statement that inserts the lease's row, or takes
//! over a row whose lease has expired by the server's clock, and returns
//! either our new token or the holder. A blocking acquire asks again when
//! the lease is released (with a listener: [`crate::listen`]), and in any
//! case every [`poll_interval`](lockfile_lease::engine::poll_interval), or
//! sooner when the holder's row expires by the server's clock.

use std::time::{Duration, Instant};

use lockfile::OwnerRecord;
use lockfile::tick::{Claim, TickClaim};
use lockfile_lease::LeaseRequest;
use lockfile_lease::acquiring::{Acquiring, Next};
use lockfile_lease::history::History;
use tokio_postgres::Row;
use tokio_postgres::types::Type;

use crate::connect::Client;

use crate::conn::Conn;
use crate::listen::{Listener, Starting};
use crate::sql::MAX_TTL_MS;
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

/// One attempt: when contended, it saw what is left of the holder's lease
/// by the server's clock.
type Attempt = lockfile_lease::acquiring::Attempt<Held, Duration>;

/// What ended a waiting acquire's last pause: the `woken_by` of its
/// `lock_acquired` event.
#[derive(Clone, Copy, Debug)]
enum Woken {
    /// Nothing: the first attempt.
    Nothing,
    /// Asked again at once, once the listener was subscribed: a release
    /// committed before that sent its notification to no one.
    Listening,
    /// A notification naming the lease.
    Notification,
    /// The poll interval (or a retry after a failure).
    Poll,
    /// The time the holder's row said it expires.
    Expiry,
}

impl Woken {
    fn as_str(self) -> &'static str {
        match self {
            Woken::Nothing => "nothing",
            Woken::Listening => "listening",
            Woken::Notification => "notification",
            Woken::Poll => "poll",
            Woken::Expiry => "expiry",
        }
    }
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
        // Longer expiries are taken for another role's writes (see
        // `MAX_TTL_MS`), so a lease may not ask for one.
        Ok(ms) if ms <= MAX_TTL_MS => Ok(ms),
        _ => Err(invalid(format!(
            "a TTL of {ttl:?} is too long: the longest is {} days",
            MAX_TTL_MS / 86_400_000
        ))),
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
    let mut acquiring = Acquiring::new(conn.key(), conn.key(), request.wait);
    let until = acquiring.until();
    let poll = lockfile_lease::engine::poll_interval(ttl);
    let mut client: Option<Client> = None;
    let mut listener: Option<Listener> = None;
    let mut starting: Option<Starting> = None;
    let mut listen_tried = false;
    let mut woken = Woken::Nothing;
    loop {
        // Notifications already here were sent by commits this attempt
        // sees: only those that come during or after it may wake us.
        if let Some(l) = &mut listener
            && !l.forget(conn)
        {
            listener = None;
        }
        // Every request of this attempt ends by the wait's end too.
        let bounded = conn.within(until);
        let tried = match client.take().filter(|c| !c.is_closed()) {
            Some(c) => Ok(c),
            None => bounded.connect().await,
        };
        let tried = match tried {
            Ok(c) => {
                let answer = attempt(&bounded, &c, name, ms, ttl, request).await;
                client = Some(c);
                answer
            }
            Err(e) => Err(e),
        };
        // What is left of the holder's lease, when the attempt said.
        let expiry = match acquiring.judge(tried)? {
            Next::Again => continue,
            Next::Acquired(held) => {
                tracing::info!(
                    name: "lock_acquired",
                    event = "lock_acquired",
                    key = %conn.key(),
                    fencing_token = held.token,
                    ttl_ms = ms,
                    token = %held.record.token,
                    job = held.record.job.as_deref().unwrap_or(""),
                    waited_ms = acquiring.waited().as_millis() as u64,
                    woken_by = woken.as_str(),
                );
                // The listener's connection closes here, with `listener`.
                return Ok((*held, client.take().expect("the attempt's connection")));
            }
            Next::Wait(remaining) => {
                if !listen_tried && conn.listen.is_some() {
                    listen_tried = true;
                    let limit = until.map_or(conn.request_timeout, |u| conn.left_until(u));
                    if !limit.is_zero() {
                        starting = Some(Starting::spawn(conn, limit));
                    }
                }
                Some(remaining)
            }
            Next::Retry => {
                client = None;
                None
            }
        };
        let now = Instant::now();
        if until.is_some_and(|until| now >= until) {
            return Err(acquiring.timed_out());
        }
        // A holder that dies sends no notification: wake when its row
        // expires, a millisecond after the time the server gave (rounded
        // to the millisecond), if that comes before the next poll.
        let (mut pause, mut timer) = match expiry {
            Some(left) if left + Duration::from_millis(1) < poll => {
                (left + Duration::from_millis(1), Woken::Expiry)
            }
            _ => (poll, Woken::Poll),
        };
        if let Some(until) = until
            && until - now < pause
        {
            pause = until - now;
            timer = Woken::Poll;
        }
        // Any role may NOTIFY the channel, with any payload: a notification
        // proves nothing, and a flood of them must not become a flood of
        // acquire statements (each draws a token). So a notification wakes
        // us only if the last attempt was not itself woken by one: the first
        // after a timed attempt wakes at once (an honest release is seen
        // without delay), and the pause after a notified attempt is a timed
        // one. At most one attempt per poll interval is so owed to
        // notifications. An honest release that comes during that pause,
        // after a hostile notification, is seen when it ends: one poll
        // interval later at the most.
        let hearing = !matches!(woken, Woken::Notification);
        woken = tokio::select! {
            biased;
            () = released(&mut listener, conn, name), if hearing => Woken::Notification,
            // Subscribed: every release that commits from now on wakes us,
            // and one that committed since the last attempt is seen by
            // asking again at once.
            started = subscribed(&mut starting) => {
                listener = Some(started);
                Woken::Listening
            }
            () = tokio::time::sleep(pause) => timer,
        };
    }
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
