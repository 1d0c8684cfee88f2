//! Talking to Redis: connecting (and refusing a server that cannot keep
//! the promise: [`crate::server`]), bounding every call in time, naming
//! errors.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, TlsCertificates};

use crate::server;
use crate::url::Server;
use crate::{ENGINE, Error, LeaseOptions, Operation, Result};

/// The connection every call of one lease goes over. Multiplexed: a call
/// dropped at an await leaves its answer to the connection's reader, which
/// throws it away, so the next call never reads it as its own.
pub(crate) type Connection = MultiplexedConnection;

/// Everything needed to (re)connect to Redis about one key.
#[derive(Clone)]
pub(crate) struct Conn {
    client: Client,
    server: Arc<Server>,
    key: Arc<str>,
    pub(crate) request_timeout: Duration,
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
        crate::key::check_prefix(&opts.prefix).map_err(invalid)?;
        let server = Server::parse(&opts.url, opts.password.as_deref()).map_err(invalid)?;
        if server.tls && rustls::crypto::CryptoProvider::get_default().is_none() {
            // redis-rs builds its TLS config with the process's provider:
            // ring, as every TLS connection of this workspace. (Another
            // thread may have installed one meanwhile: then that one serves.)
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let client = match &opts.ca {
            Some(path) => {
                if !server.tls {
                    return Err(invalid(
                        "a CA is given for a server without TLS: use rediss://".to_owned(),
                    ));
                }
                let pem = std::fs::read(path).map_err(|e| {
                    invalid(format!(
                        "cannot read the CA file {}: {e}",
                        lockfile::text::path(path)
                    ))
                })?;
                let certificates = TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem),
                };
                Client::build_with_tls(server.info.clone(), certificates).map_err(|e| {
                    invalid(format!(
                        "the CA file {} holds no certificate that can be used: {e}",
                        lockfile::text::path(path)
                    ))
                })?
            }
            None => Client::open(server.info.clone()).map_err(|e| invalid(e.to_string()))?,
        };
        Ok(Conn {
            client,
            server: Arc::new(server),
            key: key.into(),
            request_timeout: opts.request_timeout,
        })
    }

    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The server as every message shows it.
    pub(crate) fn shown(&self) -> &str {
        &self.server.shown
    }

    /// The same server and limits, about another key (so that errors name
    /// the key they are about).
    pub(crate) fn for_key(&self, key: &str) -> Conn {
        Conn {
            key: key.into(),
            ..self.clone()
        }
    }

    /// How long one call may take: the request timeout, or less when it
    /// must end by `until`.
    pub(crate) fn left_until(&self, until: Instant) -> Duration {
        self.request_timeout
            .min(until.saturating_duration_since(Instant::now()))
    }

    /// The request timeout, or what is left before `until` and one second
    /// more, as the other engines bound a bounded wait's calls: `-w 3`
    /// against a silent server gives up within 4 s.
    pub(crate) fn within(&self, until: Option<Instant>) -> Duration {
        const GRACE: Duration = Duration::from_secs(1);
        until.map_or(self.request_timeout, |until| {
            self.request_timeout.min(
                until
                    .saturating_duration_since(Instant::now())
                    .saturating_add(GRACE),
            )
        })
    }

    /// A new connection within `limit`, to a server checked to keep leases
    /// ([`crate::server`]).
    pub(crate) async fn connect(&self, limit: Duration) -> Result<Connection> {
        let start = Instant::now();
        let mut c = self.connect_to_read(limit).await?;
        let left = limit.saturating_sub(start.elapsed());
        self.check(&mut c, left).await?;
        Ok(c)
    }

    /// Checks the server behind `c` within `limit` ([`crate::server`]):
    /// `ROLE` and `CONFIG GET` are sent together, one round trip.
    async fn check(&self, c: &mut Connection, limit: Duration) -> Result<()> {
        let mut role_c = c.clone();
        let role = redis::cmd("ROLE");
        let mut config = redis::cmd("CONFIG");
        // One pattern: Redis 6 takes a single parameter.
        config.arg("GET").arg("maxmemory*");
        let (role, config) = tokio::join!(
            self.call(
                Operation::Connect,
                limit,
                role.query_async::<Vec<redis::Value>>(&mut role_c)
            ),
            tokio::time::timeout(limit, config.query_async::<HashMap<String, String>>(c)),
        );
        if let Some(reason) = server::not_primary(&role?) {
            return Err(self.error(Operation::Connect, reason));
        }
        match config {
            Ok(Ok(settings)) if !settings.contains_key("maxmemory-policy") => {
                server::policy_unknown(self.shown(), &"CONFIG GET named no maxmemory-policy");
                Ok(())
            }
            Ok(Ok(settings)) => match server::evicts(&settings) {
                Some(reason) => Err(self.error(Operation::Connect, reason)),
                None => Ok(()),
            },
            Ok(Err(e)) if e.kind() == redis::ErrorKind::Io => {
                Err(self.error(Operation::Connect, e))
            }
            Err(_) => Err(self.unanswered(Operation::Connect, limit)),
            Ok(Err(e)) => {
                server::policy_unknown(self.shown(), &e);
                Ok(())
            }
        }
    }

    /// A new connection within `limit`, to any server: to read (`inspect`
    /// works on a replica too).
    pub(crate) async fn connect_to_read(&self, limit: Duration) -> Result<Connection> {
        // The connection serves later calls too, each bounded by its own
        // timeout: its replies may take as long as the request timeout.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(limit))
            .set_response_timeout(Some(self.request_timeout));
        self.call(
            Operation::Connect,
            limit,
            self.client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await
    }

    /// A Pub/Sub connection within `limit`, for a waiter.
    pub(crate) async fn pubsub(&self, limit: Duration) -> Result<redis::aio::PubSub> {
        self.call(Operation::Watch, limit, self.client.get_async_pubsub())
            .await
    }

    /// `call`, within `limit`, as operation `op`: an error names the key
    /// and the server; no answer in time is [`Error::Unanswered`].
    pub(crate) async fn call<T>(
        &self,
        op: Operation,
        limit: Duration,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(limit, call).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) if e.is_timeout() => Err(self.unanswered(op, limit)),
            Ok(Err(e)) => Err(self.error(op, e)),
            Err(_) => Err(self.unanswered(op, limit)),
        }
    }

    /// The server's error `e` in operation `op`.
    pub(crate) fn error(
        &self,
        op: Operation,
        e: impl Into<lockfile_lease::error::BoxError>,
    ) -> Error {
        Error::Server {
            engine: ENGINE,
            op,
            key: self.key.to_string(),
            server: self.server.shown.clone(),
            source: e.into(),
        }
    }

    /// No answer within `after` in operation `op`.
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
    /// the URL, the key prefix, the CA file, the request timeout. A command
    /// checks them first, so that a mistake is a usage error before
    /// anything runs.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] with an empty key, saying what cannot
    /// work. The URL is never quoted (it may hold a password).
    pub fn check(&self) -> Result<()> {
        Conn::new(self, "").map(drop)
    }
}

/// Runs `make()`'s future on a thread of this crate's own (see
/// [`block_on`](lockfile_lease::thread::block_on)).
pub(crate) fn block_on<T, F>(key: &str, make: impl FnOnce() -> F + Send) -> Result<T>
where
    T: Send,
    F: Future<Output = Result<T>>,
{
    lockfile_lease::thread::block_on("lockfile-redis", key, make)
}
