//! Waking a waiting acquire when the lease is released: `LISTEN` on the
//! schema's channel, on a direct connection of the waiter's own (a session
//! outlives a transaction only there, never through PgBouncer in
//! transaction mode). Every release notifies that channel with the lease's
//! name at its commit ([`crate::sql`]).
//!
//! The listener is only a way to wake sooner: a notification can be lost
//! with its connection, and a holder that dies sends none. The acquire keeps
//! its poll whatever happens here, and a listener that cannot start or dies
//! costs one `listen_failed` warning and nothing else.

use std::time::Duration;

use tokio::sync::mpsc::{UnboundedReceiver, error::TryRecvError, unbounded_channel};
use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;

use crate::connect::Client;

use crate::ServerError;
use crate::conn::Conn;
use crate::server::{Server, shown};

/// A connection subscribed to the lease channel, with the names its
/// notifications carried, in order.
pub(crate) struct Listener {
    /// Kept for its connection: dropping it closes the connection.
    _client: Client,
    /// The payloads of the channel's notifications; after the last, why the
    /// connection ended (`Err`), or nothing if it closed without a word.
    names: UnboundedReceiver<Result<String, String>>,
    /// The listen URL without its password.
    shown: String,
}

/// A listener on its way: connecting and subscribing on a task of its own,
/// so that the wait goes on meanwhile (a listen host that drops packets
/// costs nothing but the wake-up). Dropping it stops the task.
pub(crate) struct Starting(JoinHandle<Option<Listener>>);

impl Starting {
    /// Starts [`Listener::start`] on the current runtime.
    pub(crate) fn spawn(conn: &Conn, limit: Duration) -> Starting {
        let conn = conn.clone();
        Starting(tokio::spawn(
            async move { Listener::start(&conn, limit).await },
        ))
    }

    /// The listener once subscribed; `None` if it could not start (after
    /// its warning). Cancel-safe: the task goes on if this is dropped.
    pub(crate) async fn subscribed(&mut self) -> Option<Listener> {
        (&mut self.0).await.ok().flatten()
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Listener {
    /// Connects to the listen URL and subscribes, all within `limit`; once
    /// this returns, every release that commits later reaches us. `None`
    /// (after a `listen_failed` warning) when there is no listen URL to use.
    async fn start(conn: &Conn, limit: Duration) -> Option<Listener> {
        let url = conn.listen.as_deref()?;
        match open(conn, url, limit).await {
            Ok(listener) => {
                tracing::debug!(key = %conn.key(), server = %listener.shown, "listening for releases");
                Some(listener)
            }
            Err(reason) => {
                failed(conn, &shown(url), &reason);
                None
            }
        }
    }

    /// Forgets the notifications received so far: each was sent at the
    /// commit of a release that the next attempt sees anyway. `false`
    /// (after the warning) when the connection has ended.
    pub(crate) fn forget(&mut self, conn: &Conn) -> bool {
        loop {
            match self.names.try_recv() {
                Ok(Ok(_)) => {}
                Err(TryRecvError::Empty) => return true,
                Ok(Err(reason)) => return self.ended(conn, Some(&reason)),
                Err(TryRecvError::Disconnected) => return self.ended(conn, None),
            }
        }
    }

    /// Waits for a notification that names `name`. `false` (after the
    /// warning) when the connection ends first.
    pub(crate) async fn released(&mut self, conn: &Conn, name: &str) -> bool {
        loop {
            match self.names.recv().await {
                Some(Ok(payload)) if payload == name => return true,
                // Another lease of the schema.
                Some(Ok(_)) => {}
                Some(Err(reason)) => return self.ended(conn, Some(&reason)),
                None => return self.ended(conn, None),
            }
        }
    }

    fn ended(&self, conn: &Conn, reason: Option<&str>) -> bool {
        let reason = reason.unwrap_or("the server closed the connection");
        failed(
            conn,
            &self.shown,
            &format!("the listening connection ended: {reason}"),
        );
        false
    }
}

/// The one warning of a listener that could not start or has died.
fn failed(conn: &Conn, server: &str, reason: &str) {
    tracing::warn!(
        name: "listen_failed",
        event = "listen_failed",
        key = %conn.key(),
        server = %server,
        error = %reason,
        "waiting for a lease: no notification of its release; polling instead",
    );
}

/// Connects to `url` and subscribes to the lease channel, within `limit`.
async fn open(conn: &Conn, url: &str, limit: Duration) -> Result<Listener, String> {
    let mut server = Server::parse(url)?;
    // The same keepalives as every connection: a listener on a dead peer
    // is noticed (and polling takes over) within the request timeout.
    server.bound(conn.request_timeout);
    let shown = server.shown.clone();
    let unanswered = || format!("`{shown}` did not answer within {limit:?}");
    let work = async {
        let (client, mut connection) = crate::connect::connect(&server.config, &server.tls)
            .await
            .map_err(|e| format!("connecting to `{shown}`: {e}"))?;
        let (tx, names) = unbounded_channel();
        // Drives the connection and hands over the channel's notifications;
        // it ends with the connection, when the client is dropped or the
        // server goes.
        let channel = conn.sql.channel.clone();
        tokio::spawn(async move {
            loop {
                match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                    Some(Ok(AsyncMessage::Notification(n))) if n.channel() == channel => {
                        if tx.send(Ok(n.payload().to_owned())).is_err() {
                            return;
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        let _ = tx.send(Err(ServerError::new(e).to_string()));
                        return;
                    }
                    None => return,
                }
            }
        });
        client
            .batch_execute(&conn.sql.listen)
            .await
            .map_err(|e| format!("LISTEN on `{shown}`: {}", client.error(e)))?;
        Ok(Listener {
            _client: client,
            names,
            shown: shown.clone(),
        })
    };
    // Timing out drops the connection, and with it the session and any
    // statement it was running: nothing to cancel.
    tokio::time::timeout(limit, work)
        .await
        .unwrap_or_else(|_| Err(unanswered()))
}
