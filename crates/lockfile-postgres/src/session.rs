//! The lease's own thread: a single-threaded runtime that acquires, then
//! renews every third of the TTL, until the guard asks it to release.
//!
//! The thread is joined when the guard is released or dropped: nothing
//! renews a lease its guard let go.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use lockfile::OwnerRecord;
use lockfile_lease::LeaseRequest;
use lockfile_lease::error::LostReason;
use lockfile_lease::session::{Request, Requests, Session};
use lockfile_lease::signal::Renewals;
use tokio_postgres::types::Type;

use crate::acquire::{self, Held, column};
use crate::conn::Conn;
use crate::connect::Client;
use crate::{LeaseSignal, Operation, Result};

/// What the thread hands the guard once the lease is held.
pub(crate) struct Acquired {
    pub(crate) token: u64,
    pub(crate) ttl: Duration,
    pub(crate) record: OwnerRecord,
    pub(crate) signal: LeaseSignal,
    pub(crate) claim: Option<lockfile::tick::Claim>,
}

/// Starts the lease's thread, which takes the lease on `name` as `request`
/// says and then holds it; returns once the lease is held. The guard asks
/// nothing of it but release: the run history goes on connections of the
/// guard's own.
pub(crate) fn spawn(
    conn: Conn,
    name: &str,
    ttl: Duration,
    request: LeaseRequest,
) -> Result<(Acquired, Session<Infallible>)> {
    let key = conn.key().to_owned();
    let name = name.to_owned();
    Session::spawn(
        "lockfile-postgres",
        &key,
        move |ready, requests| async move {
            let (held, client) = match acquire::acquire(&conn, &name, ttl, &request).await {
                Ok(held) => held,
                Err(e) => return ready.send(Err(e)),
            };
            let renewals = Renewals::new(conn.key(), held.ttl, held.granted_at);
            ready.send(Ok(Acquired {
                token: held.token,
                ttl: held.ttl,
                record: held.record.clone(),
                signal: renewals.signal(),
                claim: held.claim.clone(),
            }));
            hold(&conn, &name, client, &held, &renewals, requests).await;
        },
    )
}

/// Renews until the guard asks for release. After a loss it stops renewing
/// and tries once per interval to expire the row if it is still ours, so
/// that the next holder need not wait out the TTL.
async fn hold(
    conn: &Conn,
    name: &str,
    client: Client,
    held: &Held,
    renewals: &Renewals,
    mut requests: Requests<Infallible>,
) {
    let interval = held.ttl / 3;
    let mut client = Some(client);
    let mut next = held.granted_at + interval;
    let mut cleaned = false;
    loop {
        let request = tokio::select! {
            biased;
            request = requests.recv() => Some(request),
            () = step(conn, name, &mut client, held, renewals, &mut next, &mut cleaned) => None,
        };
        let Some(request) = request else { continue };
        // A deadline that passed unnoticed is a loss all the same.
        renewals.poll(Instant::now());
        let until = renewals.deadline();
        let result = match renewals.lost() {
            Some(reason) => {
                if !cleaned && Instant::now() < until {
                    let _ = release(conn, &mut client, name, held.token, until).await;
                }
                Err(renewals.lost_error(reason))
            }
            None => release(conn, &mut client, name, held.token, until).await,
        };
        renewals.lose(LostReason::Released);
        match request {
            Some(Request::Release(reply)) => reply.send(result),
            Some(Request::Engine(never)) => match never {},
            None => {}
        }
        return;
    }
}

/// Waits for what is due next (a renewal, the deadline, a clean-up) and
/// does it.
async fn step(
    conn: &Conn,
    name: &str,
    client: &mut Option<Client>,
    held: &Held,
    renewals: &Renewals,
    next: &mut Instant,
    cleaned: &mut bool,
) {
    let interval = held.ttl / 3;
    let lost = renewals.lost().is_some();
    let wake = if lost {
        *next
    } else {
        (*next).min(renewals.deadline())
    };
    tokio::time::sleep_until(wake.into()).await;
    if !lost && renewals.poll(Instant::now()) {
        tracing::debug!(key = %conn.key(), "the lease's deadline passed: renewals stop");
        return;
    }
    if Instant::now() < *next {
        return;
    }
    if lost {
        if !*cleaned {
            let until = Instant::now() + conn.request_timeout;
            *cleaned = release(conn, client, name, held.token, until).await.is_ok();
        }
        *next = Instant::now() + interval.max(Duration::from_millis(200));
        return;
    }
    // An answer slower than this is treated as none: the renewal is sent
    // again on a fresh connection while there is still time.
    let answer_within = conn.request_timeout.min(interval);
    let sent = Instant::now();
    match renew(conn, client, name, held.token, answer_within).await {
        Ok(Some(ttl)) => {
            renewals.renewed(sent, ttl);
            *next = sent + interval;
        }
        Ok(None) => renewals.lose(LostReason::Expired),
        Err(e) => {
            tracing::warn!(
                name: "renewal_failed",
                event = "renewal_failed",
                key = %conn.key(),
                error = %e,
            );
            renewals.renewal_failed();
            // The connection may be dead, or on a server that became read-only
            // (25006): a new one finds the primary again.
            *client = None;
            *next = Instant::now() + (interval / 4).max(Duration::from_millis(50));
        }
    }
}

/// The connection in `client`, or a new one within `limit`.
async fn connection<'a>(
    conn: &Conn,
    client: &'a mut Option<Client>,
    limit: Duration,
) -> Result<&'a Client> {
    if client.as_ref().is_none_or(|c| c.is_closed()) {
        *client = Some(conn.connect_within(limit).await?);
    }
    Ok(client.as_ref().expect("a connection"))
}

/// One renewal, all within `limit`: `Some(ttl)` when renewed, `None` when
/// the server answered that the lease is no longer ours.
async fn renew(
    conn: &Conn,
    client: &mut Option<Client>,
    name: &str,
    token: u64,
    limit: Duration,
) -> Result<Option<Duration>> {
    let until = Instant::now() + limit;
    let token = i64::try_from(token).unwrap_or(i64::MAX);
    let c = connection(conn, client, limit).await?;
    let rows = conn
        .query(
            c,
            Operation::Renew,
            conn.left_until(until),
            &conn.sql.renew,
            &[(&name, Type::TEXT), (&token, Type::INT8)],
        )
        .await?;
    match rows.first() {
        None => Ok(None),
        Some(row) => {
            let ms: i64 = column(conn, Operation::Renew, row, 0)?;
            Ok(Some(Duration::from_millis(ms.unsigned_abs())))
        }
    }
}

/// Expires the lease's row if it is still ours, by `until`.
async fn release(
    conn: &Conn,
    client: &mut Option<Client>,
    name: &str,
    token: u64,
    until: Instant,
) -> Result<()> {
    let limit = conn.left_until(until);
    if limit.is_zero() {
        return Err(conn.unanswered(Operation::Release, limit));
    }
    let token_i = i64::try_from(token).unwrap_or(i64::MAX);
    let c = connection(conn, client, limit).await?;
    let rows = conn
        .query(
            c,
            Operation::Release,
            conn.left_until(until),
            &conn.sql.release,
            &[(&name, Type::TEXT), (&token_i, Type::INT8)],
        )
        .await;
    if rows.is_err() {
        *client = None;
    }
    tracing::info!(
        name: "lock_released",
        event = "lock_released",
        key = %conn.key(),
        fencing_token = token,
        expired = matches!(&rows, Ok(rows) if !rows.is_empty()),
    );
    rows.map(drop)
}
