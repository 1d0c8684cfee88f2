//! What one lease's operations keep between calls on PostgreSQL: its
//! connections, a waiting acquire's listener, and the lease's token.

use lockfile_lease::waiting::Woken;
use std::time::Duration;

use crate::conn::Conn;
use crate::connect::Client;
use crate::key::{history_key_for, key_for};
use crate::listen::{Listener, Starting};
use crate::sql::MAX_TTL_MS;
use crate::{Error, LeaseOptions, Operation, Result};

/// One lease name's operations on PostgreSQL, with their connections.
pub(crate) struct PgOps {
    pub(crate) conn: Conn,
    /// About the run history, on connections of its own.
    pub(crate) history: Conn,
    pub(crate) name: String,
    /// The TTL, in the server's whole milliseconds.
    pub(crate) ttl_ms: i64,
    /// The connection the acquire and the renewals go over, until one
    /// fails.
    pub(crate) client: Option<Client>,
    /// A waiting acquire's listener, once subscribed, and on its way.
    pub(crate) listener: Option<Listener>,
    pub(crate) starting: Option<Starting>,
    /// Whether this acquire has tried to listen (once).
    pub(crate) listen_tried: bool,
    /// What ended the last pause.
    pub(crate) woken: Woken,
}

/// What the renewals and the release need of a lease taken: its token.
pub(crate) struct Held {
    pub(crate) token: u64,
}

impl PgOps {
    /// The operations on `name`, with the TTL `ttl`. Connects only when
    /// asked to.
    pub(crate) fn new(opts: &LeaseOptions, name: &str, ttl: Duration) -> Result<PgOps> {
        let conn = Conn::new(opts, &key_for(&opts.schema, name)?)?;
        let history = conn.for_key(&history_key_for(&opts.schema, name)?);
        let ttl_ms = ttl_ms(&conn, ttl)?;
        Ok(PgOps {
            conn,
            history,
            name: name.to_owned(),
            ttl_ms,
            client: None,
            listener: None,
            starting: None,
            listen_tried: false,
            woken: Woken::Nothing,
        })
    }
}

/// The connection in `client`, or a new one within `limit`.
pub(crate) async fn connection<'a>(
    conn: &Conn,
    client: &'a mut Option<Client>,
    limit: Duration,
) -> Result<&'a Client> {
    if client.as_ref().is_none_or(|c| c.is_closed()) {
        *client = Some(conn.connect_within(limit).await?);
    }
    Ok(client.as_ref().expect("a connection"))
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
