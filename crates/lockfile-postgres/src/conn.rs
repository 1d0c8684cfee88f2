//! Talking to PostgreSQL: connecting, bounding every statement in time on
//! the client (and cancelling it on the server when time runs out),
//! retrying serialization failures, naming errors.
//!
//! No limit is set for the session (PgBouncer would hand it to another
//! client): a statement is bounded here, by the time left before whatever
//! deadline it serves.

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_core::Stream;
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

use crate::connect::Client;
use crate::server::Server;
use crate::sql::Statements;
use crate::{ENGINE, Error, LeaseOptions, Operation, Result, ServerError};

/// How many times a statement is sent when the server keeps answering
/// 40001 or 40P01.
const ATTEMPTS: u32 = 5;

/// How long a cancel request may take: it goes over a connection of its own,
/// and nothing waits for it.
const CANCEL_WITHIN: Duration = Duration::from_secs(2);

/// The most rows a statement about one name returns: every such statement
/// selects or writes the row of its name (the primary key), so a second
/// row is never ours.
pub(crate) const ONE_ROW: usize = 1;

/// The most rows a statement over all names (`inspect` of every lease, and
/// of every history) is read to: one row per name, far more names than a
/// host's jobs have. A reply with more is refused rather than held in
/// memory: rows come one at a time from the connection (which reads no
/// further while one waits), so that a server flooding rows costs at most
/// this many.
pub(crate) const MAX_NAMES: usize = 100_000;

/// The most bytes of rows one statement's reply is read to: 32 MiB, over
/// 300 bytes per name for [`MAX_NAMES`] names, and 3 KiB each for 10,000
/// (an owner record, and the history document with its last run). With the bound on each
/// message ([`crate::wire::MAX_MESSAGE`]), what a server can make the
/// client hold for one statement is this, not rows × 1 MiB.
pub(crate) const MAX_REPLY_BYTES: usize = 32 << 20;

/// A statement's parameters, each with its declared type (unnamed
/// statements are not described by the server first).
pub(crate) type Params<'a> = [(&'a (dyn ToSql + Sync), Type)];

/// Everything needed to (re)connect to the server about one key.
#[derive(Clone)]
pub(crate) struct Conn {
    server: Arc<Server>,
    pub(crate) sql: Arc<Statements>,
    key: Arc<str>,
    pub(crate) request_timeout: Duration,
    /// The URL a waiting acquire listens on for releases, as given: it is
    /// parsed only when needed, since a bad one only costs the wake-up.
    pub(crate) listen: Option<Arc<str>>,
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn").field("key", &self.key()).finish()
    }
}

impl Conn {
    pub(crate) fn new(opts: &LeaseOptions, key: &str) -> Result<Conn> {
        let invalid = |reason: String| Error::InvalidOptions {
            op: Operation::Connect,
            key: key.to_owned(),
            reason,
        };
        if opts.request_timeout.is_zero() {
            return Err(invalid("the request timeout is zero".to_owned()));
        }
        crate::schema::check_schema(&opts.schema).map_err(invalid)?;
        let mut server = Server::parse(&opts.url).map_err(invalid)?;
        server.bound(opts.request_timeout);
        Ok(Conn {
            server: Arc::new(server),
            sql: Arc::new(Statements::new(&opts.schema)),
            key: key.into(),
            request_timeout: opts.request_timeout,
            listen: opts.listen.as_deref().map(Arc::from),
        })
    }

    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The same server and limits, about another key (so that errors name
    /// the key they are about).
    pub(crate) fn for_key(&self, key: &str) -> Conn {
        Conn {
            key: key.into(),
            ..self.clone()
        }
    }

    /// The same connection, whose calls must also end by `until` (a
    /// bounded wait's end) and one second more: `-w 3` against a silent
    /// server gives up within 4 s, not after the request timeout, while a
    /// server that is only slow when the wait runs out (a loaded host, an
    /// attempt started a moment before the end) still gets a second to
    /// answer, and the wait ends as a timeout naming the holder rather than
    /// as a server failure.
    pub(crate) fn within(&self, until: Option<Instant>) -> Conn {
        const GRACE: Duration = Duration::from_secs(1);
        match until {
            Some(until) => Conn {
                request_timeout: self.request_timeout.min(
                    until
                        .saturating_duration_since(std::time::Instant::now())
                        .saturating_add(GRACE),
                ),
                ..self.clone()
            },
            None => self.clone(),
        }
    }

    /// How long one call may take: the request timeout, or less when it
    /// must end by `until`.
    pub(crate) fn left_until(&self, until: Instant) -> Duration {
        self.request_timeout
            .min(until.saturating_duration_since(Instant::now()))
    }

    /// A new connection, within the request timeout.
    pub(crate) async fn connect(&self) -> Result<Client> {
        self.connect_within(self.request_timeout).await
    }

    /// A new connection, within `limit` (the whole start-up: TCP,
    /// authentication, and `target_session_attrs`' check). Its socket is
    /// driven by a task on the current runtime.
    pub(crate) async fn connect_within(&self, limit: Duration) -> Result<Client> {
        let connect = crate::connect::connect(&self.server.config, &self.server.tls);
        match tokio::time::timeout(limit, connect).await {
            Ok(Ok((client, connection))) => {
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "the PostgreSQL connection ended");
                    }
                });
                Ok(client)
            }
            Ok(Err(e)) => Err(self.error(Operation::Connect, e)),
            Err(_) => Err(self.unanswered(Operation::Connect, limit)),
        }
    }

    /// Sends one unnamed statement with `params` and returns its row, if
    /// any ([`ONE_ROW`]), all within `limit`. A statement the server
    /// refuses with 40001 or 40P01 is sent again while time is left (a
    /// `statement_retried` event each time); one still running when the
    /// time is up is cancelled.
    pub(crate) async fn query(
        &self,
        client: &Client,
        op: Operation,
        limit: Duration,
        sql: &str,
        params: &Params<'_>,
    ) -> Result<Vec<Row>> {
        self.query_at_most(client, op, limit, sql, params, ONE_ROW)
            .await
    }

    /// As [`Conn::query`], for a statement over all names: at most
    /// [`MAX_NAMES`] rows.
    pub(crate) async fn query_all(
        &self,
        client: &Client,
        op: Operation,
        limit: Duration,
        sql: &str,
        params: &Params<'_>,
    ) -> Result<Vec<Row>> {
        self.query_at_most(client, op, limit, sql, params, MAX_NAMES)
            .await
    }

    async fn query_at_most(
        &self,
        client: &Client,
        op: Operation,
        limit: Duration,
        sql: &str,
        params: &Params<'_>,
        most: usize,
    ) -> Result<Vec<Row>> {
        let until = Instant::now() + limit;
        let mut attempt = 1;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let e = match self
                .bounded(client, op, limit, left, rows(client, sql, params, most))
                .await?
            {
                Ok(rows) => return Ok(rows),
                Err(e) => e,
            };
            if !e.is_retryable() || attempt >= ATTEMPTS {
                return Err(self.error(op, e));
            }
            tracing::info!(
                name: "statement_retried",
                event = "statement_retried",
                key = %self.key,
                op = ?op,
                sqlstate = e.sqlstate().unwrap_or(""),
                attempt,
            );
            attempt += 1;
            // A little apart, so that the transactions that collided do not
            // collide again.
            let pause = Duration::from_millis(5 << attempt)
                .min(until.saturating_duration_since(Instant::now()));
            tokio::time::sleep(pause).await;
        }
    }

    /// `call`, within `left` of the `limit` the caller was given; cancelled
    /// on the server when the time is up.
    async fn bounded<T>(
        &self,
        client: &Client,
        op: Operation,
        limit: Duration,
        left: Duration,
        call: impl Future<Output = T>,
    ) -> Result<T> {
        match tokio::time::timeout(left, call).await {
            Ok(answer) => Ok(answer),
            Err(_) => {
                // The connection may be fine and the statement merely slow
                // (a lock wait): stop it there, not only here.
                // Over TLS as the connection was (the same connector).
                let cancel = Client::cancel(
                    client.cancel_token(),
                    client.peer(),
                    Arc::new(self.server.config.clone()),
                    self.server.tls.clone(),
                );
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(CANCEL_WITHIN, cancel).await;
                });
                Err(self.unanswered(op, limit))
            }
        }
    }

    /// Sends statements without parameters (DDL, `BEGIN`, `COMMIT`) by the
    /// simple protocol, within `limit`; errors are `op`'s.
    pub(crate) async fn batch(
        &self,
        client: &Client,
        op: Operation,
        limit: Duration,
        sql: &str,
    ) -> Result<()> {
        match self
            .bounded(client, op, limit, limit, client.batch_execute(sql))
            .await?
        {
            Ok(()) => Ok(()),
            Err(e) => Err(self.error(op, client.error(e))),
        }
    }

    pub(crate) fn error(&self, op: Operation, source: ServerError) -> Error {
        Error::Server {
            engine: ENGINE,
            op,
            key: self.key.to_string(),
            server: self.server.shown.clone(),
            source: Box::new(source),
        }
    }

    pub(crate) fn unanswered(&self, op: Operation, after: Duration) -> Error {
        Error::Unanswered {
            engine: ENGINE,
            op,
            key: self.key.to_string(),
            server: self.server.shown.clone(),
            after,
        }
    }
}

impl LeaseOptions {
    /// Reads the options as every connection will, without connecting:
    /// the URL and the listen URL (each read once, by libpq's rules), the
    /// schema's name, the request timeout. A command checks them first, so
    /// that a mistake is a usage error before anything runs.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] with an empty key, saying what cannot
    /// work. A URL that cannot be read for certain is named by its form and
    /// the byte at fault, never shown.
    pub fn check(&self) -> Result<()> {
        Conn::new(self, "")?;
        if let Some(listen) = &self.listen {
            Server::parse(listen).map_err(|reason| Error::InvalidOptions {
                op: Operation::Connect,
                key: String::new(),
                reason: format!("the listen URL: {reason}"),
            })?;
        }
        Ok(())
    }
}

/// The rows of one statement, read one at a time and refused past `most`:
/// collecting them all first (`query_typed`) would hold whatever a server
/// sends.
async fn rows(
    client: &Client,
    sql: &str,
    params: &Params<'_>,
    most: usize,
) -> std::result::Result<Vec<Row>, ServerError> {
    let stream = client
        .query_typed_raw(sql, params.iter().map(|(p, t)| (*p, t.clone())))
        .await
        .map_err(|e| client.error(e))?;
    let mut stream = pin!(stream);
    let mut rows = Vec::new();
    let mut bytes = 0;
    while let Some(row) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
        // Dropping the stream stops the reply here; the connection
        // discards the rest, and is dropped with the client.
        if rows.len() == most {
            return Err(ServerError::too_many_rows(most));
        }
        let row = row.map_err(|e| client.error(e))?;
        bytes += row_bytes(&row);
        if bytes > MAX_REPLY_BYTES {
            return Err(ServerError::too_many_bytes(MAX_REPLY_BYTES));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The bytes of a row's values, whatever their types.
fn row_bytes(row: &Row) -> usize {
    /// A value's length, read from any type.
    struct Len(usize);
    impl<'a> tokio_postgres::types::FromSql<'a> for Len {
        fn from_sql(
            _: &Type,
            raw: &'a [u8],
        ) -> std::result::Result<Len, Box<dyn std::error::Error + Sync + Send>> {
            Ok(Len(raw.len()))
        }
        fn accepts(_: &Type) -> bool {
            true
        }
    }
    (0..row.len())
        .filter_map(|i| row.try_get::<_, Option<Len>>(i).ok().flatten())
        .map(|Len(n)| n)
        .sum()
}

/// Runs `make()`'s future on a thread of this crate's own (see
/// [`block_on`](lockfile_lease::thread::block_on)).
pub(crate) fn block_on<T, F>(key: &str, make: impl FnOnce() -> F + Send) -> Result<T>
where
    T: Send,
    F: Future<Output = Result<T>>,
{
    lockfile_lease::thread::block_on("lockfile-postgres", key, make)
}
