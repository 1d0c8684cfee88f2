//! Connecting to the server on a socket of our own, so that every message
//! the server sends goes through [`wire::Bounded`] (tokio-postgres's own
//! `Config::connect` makes its socket where nothing can wrap it). What it
//! does is what `Config::connect` does: each host (or `hostaddr`) in turn,
//! in random order under `load_balance_hosts=random`, each address a name
//! resolves to, the connect timeout, `TCP_NODELAY`, keepalives and
//! `tcp_user_timeout`, TLS as the `sslmode` asks, then
//! `target_session_attrs`' check; and cancel requests to the host the
//! connection went to.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::ops::Deref;
use std::path::PathBuf;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio_postgres::config::{Host, LoadBalanceHosts, SslMode, TargetSessionAttrs};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{CancelToken, Config, SimpleQueryMessage};

use crate::sqlstate::ServerError;
use crate::tls::{RustlsStream, Tls};
use crate::wire::{Bounded, Refusal};

/// The port PostgreSQL listens on unless told.
const DEFAULT_PORT: u16 = 5432;

/// The stream under a connection.
pub(crate) type Wire = Bounded<Socket>;

/// A connection, to be driven by a task of its own.
pub(crate) type Connection = tokio_postgres::Connection<Wire, RustlsStream<Wire>>;

/// A TCP or Unix socket.
#[derive(Debug)]
pub(crate) enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Socket::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Socket::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_flush(cx),
            Socket::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Socket::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// Where a connection went: for its cancel requests.
#[derive(Clone, Debug)]
enum Addr {
    Tcp(IpAddr),
    Unix(PathBuf),
}

#[derive(Clone, Debug)]
struct Peer {
    addr: Addr,
    port: u16,
    /// The host's name, for TLS.
    hostname: Option<String>,
}

/// A client, with what its connection refused and where it went.
#[derive(Debug)]
pub(crate) struct Client {
    client: tokio_postgres::Client,
    refused: Refusal,
    peer: Peer,
}

impl Deref for Client {
    type Target = tokio_postgres::Client;

    fn deref(&self) -> &tokio_postgres::Client {
        &self.client
    }
}

impl Client {
    /// What `e` from this session's client means: the refusal of an
    /// oversized message when there was one (the client then sees only a
    /// closed connection).
    pub(crate) fn error(&self, e: tokio_postgres::Error) -> ServerError {
        refused_or(&self.refused, e)
    }

    /// Asks the server to cancel the statement this session runs, on a
    /// connection of its own to the same host, over TLS as `tls` says.
    pub(crate) async fn cancel(
        token: CancelToken,
        peer: PeerOf,
        config: Arc<Config>,
        mut tls: Tls,
    ) -> Result<(), ServerError> {
        let peer = peer.0;
        let socket = socket(&peer.addr, peer.port, &config)
            .await
            .map_err(ServerError::connect)?;
        let connector = <Tls as MakeTlsConnect<Wire>>::make_tls_connect(&mut tls, &tls_name(&peer))
            .map_err(|e| ServerError::connect(io::Error::other(e)))?;
        let refused = Refusal::default();
        token
            .cancel_query_raw(
                Bounded::socket(socket, refused.clone()),
                connector.with_refusal(refused.clone()),
            )
            .await
            .map_err(|e| refused_or(&refused, e))
    }

    /// Where this session went, for [`Client::cancel`].
    pub(crate) fn peer(&self) -> PeerOf {
        PeerOf(self.peer.clone())
    }
}

/// Where a session went (opaque outside this module).
#[derive(Clone, Debug)]
pub(crate) struct PeerOf(Peer);

fn refused_or(refused: &Refusal, e: tokio_postgres::Error) -> ServerError {
    match refused.get() {
        Some(too_large) => ServerError::too_large(*too_large),
        None => ServerError::new(e),
    }
}

/// Connects as `config` says, over TLS as `tls` says; the connection is to
/// be driven by the caller. The error is the last host's.
pub(crate) async fn connect(
    config: &Config,
    tls: &Tls,
) -> Result<(Client, Connection), ServerError> {
    let hosts = config.get_hosts();
    let hostaddrs = config.get_hostaddrs();
    let ports = config.get_ports();
    let count = hosts.len().max(hostaddrs.len());
    if count == 0 {
        return Err(ServerError::config("both host and hostaddr are missing"));
    }
    if !hosts.is_empty() && !hostaddrs.is_empty() && hosts.len() != hostaddrs.len() {
        return Err(ServerError::config(
            "the number of hosts is different from the number of hostaddrs",
        ));
    }
    if ports.len() > 1 && ports.len() != count {
        return Err(ServerError::config("invalid number of ports"));
    }
    let mut order: Vec<usize> = (0..count).collect();
    let random = config.get_load_balance_hosts() == LoadBalanceHosts::Random;
    if random {
        shuffle(&mut order);
    }
    let mut last = None;
    for i in order {
        let host = hosts.get(i);
        let port = ports
            .get(i)
            .or_else(|| ports.first())
            .copied()
            .unwrap_or(DEFAULT_PORT);
        // The host's name is what TLS checks, even when `hostaddr` says
        // where to connect.
        let hostname = match host {
            Some(Host::Tcp(name)) => Some(name.clone()),
            _ => None,
        };
        let addrs = match (hostaddrs.get(i), host) {
            (Some(ip), _) => vec![Addr::Tcp(*ip)],
            (None, Some(Host::Unix(path))) => vec![Addr::Unix(path.clone())],
            (None, Some(Host::Tcp(name))) => {
                match tokio::net::lookup_host((name.as_str(), port)).await {
                    Ok(found) => {
                        let mut ips: Vec<Addr> = found.map(|a| Addr::Tcp(a.ip())).collect();
                        if random {
                            shuffle(&mut ips);
                        }
                        if ips.is_empty() {
                            last = Some(ServerError::connect(io::Error::new(
                                io::ErrorKind::InvalidInput,
                                "could not resolve any addresses",
                            )));
                        }
                        ips
                    }
                    Err(e) => {
                        last = Some(ServerError::connect(e));
                        Vec::new()
                    }
                }
            }
            (None, None) => Vec::new(),
        };
        for addr in addrs {
            let peer = Peer {
                addr,
                port,
                hostname: hostname.clone(),
            };
            match connect_once(config, tls, peer).await {
                Ok(done) => return Ok(done),
                Err(e) => last = Some(e),
            }
        }
    }
    Err(last.unwrap_or_else(|| ServerError::config("no host to connect to")))
}

async fn connect_once(
    config: &Config,
    tls: &Tls,
    peer: Peer,
) -> Result<(Client, Connection), ServerError> {
    let socket = socket(&peer.addr, peer.port, config)
        .await
        .map_err(ServerError::connect)?;
    let refused = Refusal::default();
    let connector =
        <Tls as MakeTlsConnect<Wire>>::make_tls_connect(&mut tls.clone(), &tls_name(&peer))
            .map_err(|e| ServerError::connect(io::Error::other(e)))?
            .with_refusal(refused.clone());
    // libpq never uses TLS on a Unix socket, whatever the sslmode (a URL
    // may list TCP hosts and socket directories together).
    let unix;
    let config = match peer.addr {
        Addr::Unix(_) => {
            let mut plain = config.clone();
            plain.ssl_mode(SslMode::Disable);
            unix = plain;
            &unix
        }
        Addr::Tcp(_) => config,
    };
    let (client, mut connection) = config
        .connect_raw(Bounded::socket(socket, refused.clone()), connector)
        .await
        .map_err(|e| refused_or(&refused, e))?;
    let session = Client {
        client,
        refused,
        peer,
    };
    let wanted = config.get_target_session_attrs();
    if wanted != TargetSessionAttrs::Any {
        // Driven here: the connection is not handed over yet.
        let read_only = {
            let work = async {
                let rows = session
                    .simple_query_raw("SHOW transaction_read_only")
                    .await?;
                let mut rows = pin!(rows);
                while let Some(message) = std::future::poll_fn(|cx| rows.as_mut().poll_next(cx))
                    .await
                    .transpose()?
                {
                    if let SimpleQueryMessage::Row(row) = message {
                        return Ok(row.try_get(0)?.map(|v: &str| v == "on"));
                    }
                }
                Ok(None)
            };
            let mut work = pin!(work);
            std::future::poll_fn(|cx| {
                if let Poll::Ready(Err(e)) = Pin::new(&mut connection).poll(cx) {
                    return Poll::Ready(Err(e));
                }
                work.as_mut().poll(cx)
            })
            .await
            .map_err(|e: tokio_postgres::Error| session.error(e))?
        };
        let refuse = match (wanted, read_only) {
            (TargetSessionAttrs::ReadWrite, Some(true)) => Some("database does not allow writes"),
            (TargetSessionAttrs::ReadOnly, Some(false)) => Some("database is not read only"),
            (_, None) => Some("the server did not say whether it is read-only"),
            _ => None,
        };
        if let Some(why) = refuse {
            return Err(ServerError::connect(io::Error::new(
                io::ErrorKind::PermissionDenied,
                why,
            )));
        }
    }
    Ok((session, connection))
}

/// The name TLS checks the server's certificate against: the host's, or,
/// with only a `hostaddr`, the address (as libpq does). A Unix socket
/// never carries TLS: any name does.
fn tls_name(peer: &Peer) -> String {
    match (&peer.hostname, &peer.addr) {
        (Some(name), _) => name.clone(),
        (None, Addr::Tcp(ip)) => ip.to_string(),
        (None, Addr::Unix(_)) => "localhost".to_owned(),
    }
}

/// A socket to `addr`, within the connect timeout, with the URL's (or
/// [`Server::bound`](crate::server::Server::bound)'s) keepalives and TCP
/// user timeout.
async fn socket(addr: &Addr, port: u16, config: &Config) -> io::Result<Socket> {
    let timeout = config.get_connect_timeout().copied();
    match addr {
        Addr::Tcp(ip) => {
            let stream = within(timeout, TcpStream::connect((*ip, port))).await?;
            stream.set_nodelay(true)?;
            use rustix::net::sockopt;
            if let Some(limit) = config.get_tcp_user_timeout() {
                let ms = u32::try_from(limit.as_millis()).unwrap_or(u32::MAX);
                sockopt::set_tcp_user_timeout(&stream, ms)?;
            }
            if config.get_keepalives() {
                sockopt::set_socket_keepalive(&stream, true)?;
                sockopt::set_tcp_keepidle(&stream, config.get_keepalives_idle())?;
                if let Some(interval) = config.get_keepalives_interval() {
                    sockopt::set_tcp_keepintvl(&stream, interval)?;
                }
                if let Some(retries) = config.get_keepalives_retries() {
                    sockopt::set_tcp_keepcnt(&stream, retries)?;
                }
            }
            Ok(Socket::Tcp(stream))
        }
        Addr::Unix(dir) => {
            let path = dir.join(format!(".s.PGSQL.{port}"));
            Ok(Socket::Unix(
                within(timeout, UnixStream::connect(path)).await?,
            ))
        }
    }
}

/// `connect`, failed as timed out past `timeout`.
async fn within<T>(
    timeout: Option<Duration>,
    connect: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match timeout {
        Some(limit) => tokio::time::timeout(limit, connect)
            .await
            .unwrap_or_else(|_| {
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connection timed out",
                ))
            }),
        None => connect.await,
    }
}

/// Shuffles `items` (Fisher–Yates, from the system's random numbers).
fn shuffle<T>(items: &mut [T]) {
    use ring::rand::{SecureRandom as _, SystemRandom};
    let random = SystemRandom::new();
    for i in (1..items.len()).rev() {
        let mut bytes = [0; 8];
        // Without random numbers the order is the given one: a preference,
        // not a guarantee.
        if random.fill(&mut bytes).is_err() {
            return;
        }
        let j = usize::try_from(u64::from_le_bytes(bytes) % (i as u64 + 1)).unwrap_or(0);
        items.swap(i, j);
    }
}
