//! Talking to etcd: connecting, bounding every call in time, naming errors.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

use crate::Operation;
use crate::endpoint::Endpoints;
use crate::{Error, LeaseOptions, Result};

/// Everything needed to (re)connect to etcd about one key.
#[derive(Clone)]
pub(crate) struct Conn {
    /// The endpoints without their credentials, for etcd's client.
    endpoints: Arc<[String]>,
    /// The endpoints as rebuilt for every message, passwords replaced.
    shown: Arc<str>,
    key: Arc<str>,
    pub(crate) request_timeout: Duration,
    connect: ConnectOptions,
}

impl Conn {
    pub(crate) fn new(opts: &LeaseOptions, key: &str) -> Result<Conn> {
        if opts.endpoints.is_empty() {
            return Err(Error::InvalidOptions {
                op: Operation::Connect,
                key: key.to_owned(),
                reason: "no etcd endpoints were given".to_owned(),
            });
        }
        if opts.request_timeout.is_zero() {
            return Err(Error::InvalidOptions {
                op: Operation::Connect,
                key: key.to_owned(),
                reason: "the request timeout is zero".to_owned(),
            });
        }
        let endpoints =
            Endpoints::parse(&opts.endpoints).map_err(|reason| Error::InvalidOptions {
                op: Operation::Connect,
                key: key.to_owned(),
                reason,
            })?;
        let user = match (&opts.user, endpoints.user) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidOptions {
                    op: Operation::Connect,
                    key: key.to_owned(),
                    reason: "credentials are given both in the endpoints and as the user"
                        .to_owned(),
                });
            }
            (given, from_endpoints) => given.clone().or(from_endpoints),
        };
        // A member cut off from its leader would otherwise keep serving a
        // watch that never delivers an event; with this it closes the stream
        // and the client moves to another member.
        let mut connect = ConnectOptions::new()
            .with_connect_timeout(opts.request_timeout)
            .with_require_leader(true);
        if let Some((name, password)) = user {
            connect = connect.with_user(name, password);
        }
        Ok(Conn {
            endpoints: endpoints.targets.into(),
            shown: endpoints.shown.into(),
            key: key.into(),
            request_timeout: opts.request_timeout,
            connect,
        })
    }

    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// A new client with its own connections. Connecting is lazy: this
    /// fails only for malformed endpoints or failed authentication.
    pub(crate) async fn connect(&self) -> Result<Client> {
        self.connect_within(self.request_timeout).await
    }

    /// [`connect`](Conn::connect), bounded by `limit` (authenticating is a
    /// request like any other).
    pub(crate) async fn connect_within(&self, limit: Duration) -> Result<Client> {
        let endpoints: &[String] = &self.endpoints;
        self.call_within(
            Operation::Connect,
            limit,
            Client::connect(endpoints, Some(self.connect.clone())),
        )
        .await
    }

    /// The same endpoints and limits, about another key (so that errors
    /// name the key they are about).
    pub(crate) fn for_key(&self, key: &str) -> Conn {
        Conn {
            key: key.into(),
            ..self.clone()
        }
    }

    /// How long one call may take: the request timeout, or less when it
    /// must end by `until`.
    pub(crate) fn left_until(&self, until: std::time::Instant) -> Duration {
        self.request_timeout
            .min(until.saturating_duration_since(std::time::Instant::now()))
    }

    /// The same connection, whose calls must also end by `until` (a
    /// bounded wait's end) and one second more: `-w 3` against a silent
    /// server gives up within 4 s, not after the request timeout, while a
    /// server that is only slow when the wait runs out (a loaded host, an
    /// attempt started a moment before the end) still gets a second to
    /// answer, and the wait ends as a timeout naming the holder rather than
    /// as a server failure.
    pub(crate) fn within(&self, until: Option<std::time::Instant>) -> Conn {
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

    /// Runs one etcd call, bounded by the request timeout.
    pub(crate) async fn call<T>(
        &self,
        op: Operation,
        call: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T> {
        self.call_within(op, self.request_timeout, call).await
    }

    /// Runs one etcd call, bounded by `limit`.
    pub(crate) async fn call_within<T>(
        &self,
        op: Operation,
        limit: Duration,
        call: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T> {
        match tokio::time::timeout(limit, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(self.error(op, e)),
            Err(_) => Err(self.unanswered(op, limit)),
        }
    }

    pub(crate) fn error(&self, op: Operation, source: etcd_client::Error) -> Error {
        Error::Server {
            engine: crate::ENGINE,
            op,
            key: self.key.to_string(),
            server: self.shown.to_string(),
            source: Box::new(source),
        }
    }

    pub(crate) fn unanswered(&self, op: Operation, after: Duration) -> Error {
        Error::Unanswered {
            engine: crate::ENGINE,
            op,
            key: self.key.to_string(),
            server: self.shown.to_string(),
            after,
        }
    }
}

impl LeaseOptions {
    /// Reads the options as every connection will, without connecting:
    /// the endpoints (each read once), their credentials, the request
    /// timeout. A command checks them first, so that a mistake is a usage
    /// error before anything runs.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] with an empty key, saying what cannot
    /// work. An endpoint that cannot be read for certain is named by its
    /// position and the byte at fault, never shown.
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
    lockfile_lease::thread::block_on("lockfile-etcd", key, make)
}

/// Whether etcd answered that the lease does not exist: it expired, or was
/// revoked.
///
/// The status code alone does not say so: etcd answers `NotFound` for
/// missing users, roles and members too. Its own Go client tells its errors
/// apart by the status message, which is part of etcd's API
/// (`rpctypes.ErrGRPCLeaseNotFound`).
pub(crate) fn is_lease_not_found(e: &etcd_client::Error) -> bool {
    const LEASE_NOT_FOUND: &str = "etcdserver: requested lease not found";
    matches!(
        e,
        etcd_client::Error::GRpcStatus(status)
            if status.code() == tonic::Code::NotFound && status.message() == LEASE_NOT_FOUND
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_lease_is_told_by_its_status_code_and_message() {
        let status =
            |code, message: &str| etcd_client::Error::GRpcStatus(tonic::Status::new(code, message));
        assert!(is_lease_not_found(&status(
            tonic::Code::NotFound,
            "etcdserver: requested lease not found"
        )));
        // Another missing thing, or the right words under another code.
        assert!(!is_lease_not_found(&status(
            tonic::Code::NotFound,
            "etcdserver: user name not found"
        )));
        assert!(!is_lease_not_found(&status(
            tonic::Code::Unavailable,
            "etcdserver: requested lease not found"
        )));
        assert!(!is_lease_not_found(
            &etcd_client::Error::LeaseKeepAliveError("lease not found".to_owned())
        ));
    }
}
