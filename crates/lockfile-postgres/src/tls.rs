//! TLS to the server: rustls on ring (the provider named here, never the
//! process default), with libpq's meaning of each `sslmode`:
//!
//! - `prefer`, `allow`, and `require` without a root certificate file:
//!   encrypted, the server's certificate not verified (the handshake's
//!   signature still is: the server holds the key of what it sent, which
//!   channel binding relies on).
//! - `require` with a root certificate file, and `verify-ca`: the chain must
//!   end at a root of that file.
//! - `verify-full`: that, and the certificate must name the host connected
//!   to (a DNS name, or an IP address in its subjectAltName).
//!
//! The files are read at each connection, as libpq reads them, so that a
//! renewed certificate needs no restart. Cancel requests go through the same
//! connector.

use std::fmt;
use std::future::Future;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

use crate::sslmode::{SslMode, SslParams};
use crate::wire::{Bounded, Refusal};

/// The ALPN protocol PostgreSQL 17 expects (and requires for
/// `sslnegotiation=direct`); older servers ignore it.
const ALPN: &[u8] = b"postgresql";

/// Makes the TLS connector for each connection (and cancel request) to a
/// server.
#[derive(Clone, Debug)]
pub(crate) struct Tls {
    params: Arc<SslParams>,
}

impl Tls {
    pub(crate) fn new(params: SslParams) -> Tls {
        Tls {
            params: Arc::new(params),
        }
    }

    /// The client configuration for one connection, from the files as they
    /// are now, and the root certificate file it verifies against.
    fn client_config(&self) -> Result<(ClientConfig, Option<PathBuf>), TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let checks = self.checks()?;
        let (roots, root_file) = checks.roots.unzip();
        let verifier = Verifier {
            roots: roots.map(Arc::new),
            check_name: checks.name,
            algorithms: provider.signature_verification_algorithms,
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier));
        let mut config = match self.client_identity()? {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|source| TlsError::ClientCert {
                    path: self.params.cert.clone().unwrap_or_default(),
                    source,
                })?,
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok((config, root_file))
    }

    /// What this connection checks of the server's certificate.
    fn checks(&self) -> Result<Checks, TlsError> {
        let mode = self.params.mode;
        let root = self.params.root_cert.as_deref();
        let existing = root.filter(|p| p.exists());
        let roots = match mode {
            SslMode::Disable | SslMode::Allow | SslMode::Prefer => None,
            // libpq: `require` verifies the chain when a root file exists.
            SslMode::Require => existing.map(load_roots).transpose()?,
            SslMode::VerifyCa | SslMode::VerifyFull => match existing {
                Some(path) => Some(load_roots(path)?),
                None => {
                    return Err(TlsError::NoRootCert {
                        mode,
                        path: root.map(Path::to_owned),
                    });
                }
            },
        };
        Ok(Checks {
            roots,
            name: mode == SslMode::VerifyFull,
        })
    }

    /// The client certificate chain and key, when the certificate file
    /// exists (libpq sends none otherwise).
    fn client_identity(
        &self,
    ) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, TlsError> {
        let Some(cert) = self.params.cert.as_deref().filter(|p| p.exists()) else {
            return Ok(None);
        };
        let read = |what, path: &Path, source| TlsError::Read {
            what,
            path: path.to_owned(),
            source,
        };
        let chain = CertificateDer::pem_file_iter(cert)
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|e| read("client certificate", cert, e))?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                path: cert.to_owned(),
            });
        }
        let key = self.params.key.clone().unwrap_or_default();
        // libpq refuses a key that others may read: so do we.
        let meta = std::fs::metadata(&key).map_err(|source| TlsError::KeyFile {
            path: key.clone(),
            source,
        })?;
        let mode = meta.mode() & 0o777;
        let loose = if meta.uid() == 0 {
            mode & 0o037 != 0
        } else {
            mode & 0o077 != 0
        };
        if loose {
            return Err(TlsError::KeyPermissions { path: key, mode });
        }
        let private = PrivateKeyDer::from_pem_file(&key).map_err(|e| read("key", &key, e))?;
        Ok(Some((chain, private)))
    }
}

/// What the server's certificate must satisfy on one connection.
struct Checks {
    /// The roots its chain must end at, and the file they came from.
    roots: Option<(RootCertStore, PathBuf)>,
    /// Whether it must name the host.
    name: bool,
}

fn load_roots(path: &Path) -> Result<(RootCertStore, PathBuf), TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|source| TlsError::Read {
            what: "root certificate",
            path: path.to_owned(),
            source,
        })?;
    let mut store = RootCertStore::empty();
    let (added, _unusable) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(TlsError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok((store, path.to_owned()))
}

impl<S> MakeTlsConnect<S> for Tls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = Connector;
    type Error = TlsError;

    fn make_tls_connect(&mut self, host: &str) -> Result<Connector, TlsError> {
        let (config, roots) = self.client_config()?;
        let name = ServerName::try_from(host.to_owned()).map_err(|_| TlsError::ServerName {
            host: host.to_owned(),
        })?;
        Ok(Connector {
            config: Arc::new(config),
            name,
            roots,
            refused: Refusal::default(),
        })
    }
}

/// The TLS side of one connection attempt.
pub(crate) struct Connector {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    /// The root file the chain is verified against, for messages.
    roots: Option<PathBuf>,
    /// Where the bound on the messages inside TLS keeps its refusal.
    refused: Refusal,
}

impl Connector {
    /// The connector, keeping the refusal of an oversized message in
    /// `refused` (the connection's).
    pub(crate) fn with_refusal(self, refused: Refusal) -> Connector {
        Connector { refused, ..self }
    }
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("name", &self.name)
            .field("roots", &self.roots)
            .finish()
    }
}

impl<S> TlsConnect<S> for Connector
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = TlsError;
    type Future = Pin<Box<dyn Future<Output = Result<RustlsStream<S>, TlsError>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        let roots = self.roots;
        let refused = self.refused;
        Box::pin(async move {
            match connector.connect(self.name, stream).await {
                // Inside TLS, the server's messages are framed from the
                // first byte: bounded there (the socket under it sees only
                // TLS records).
                Ok(stream) => Ok(RustlsStream(Bounded::framed(stream, refused))),
                Err(e) => {
                    let rustls = e
                        .get_ref()
                        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                        .cloned();
                    Err(match rustls {
                        Some(source) => TlsError::Handshake { roots, source },
                        None => TlsError::Io(e),
                    })
                }
            }
        })
    }
}

/// An encrypted connection.
#[derive(Debug)]
pub(crate) struct RustlsStream<S>(Bounded<tokio_rustls::client::TlsStream<S>>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    /// `tls-server-end-point` (RFC 5929), for SCRAM-SHA-256-PLUS: the hash
    /// of the server's certificate, which a man in the middle cannot
    /// present.
    fn channel_binding(&self) -> ChannelBinding {
        let (_, session) = self.0.get_ref().get_ref();
        session
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|cert| crate::channel_binding::tls_server_end_point(cert))
            .map_or_else(ChannelBinding::none, ChannelBinding::tls_server_end_point)
    }
}

/// Checks the server's certificate as the `sslmode` asks (see the module's
/// documentation); the handshake's signatures are always checked.
#[derive(Debug)]
struct Verifier {
    roots: Option<Arc<RootCertStore>>,
    check_name: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = ParsedCertificate::try_from(end_entity)?;
            verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.algorithms.all,
            )?;
            if self.check_name {
                verify_server_name(&cert, server_name)?;
            }
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Why TLS to the server could not be set up: the source of tokio-postgres's
/// TLS error, and so a cause in the one line the command prints.
#[derive(Debug)]
pub(crate) enum TlsError {
    /// `verify-ca`/`verify-full` without a root certificate file.
    NoRootCert {
        mode: SslMode,
        path: Option<PathBuf>,
    },
    /// A certificate or key file that cannot be read or parsed.
    Read {
        what: &'static str,
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    /// A file with no usable certificate in it.
    NoCertificate { path: PathBuf },
    /// The client key's file cannot be examined.
    KeyFile { path: PathBuf, source: io::Error },
    /// A client key that others may read.
    KeyPermissions { path: PathBuf, mode: u32 },
    /// A client certificate that rustls refuses (e.g. not its key's).
    ClientCert {
        path: PathBuf,
        source: rustls::Error,
    },
    /// rustls refused the configuration.
    Config(rustls::Error),
    /// A host that cannot be a TLS server name.
    ServerName { host: String },
    /// The handshake failed: a certificate that does not verify, an alert.
    Handshake {
        roots: Option<PathBuf>,
        source: rustls::Error,
    },
    /// The connection failed during the handshake.
    Io(io::Error),
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::NoRootCert { mode, path } => {
                match path {
                    Some(path) => write!(
                        f,
                        "root certificate file `{}` does not exist",
                        path.display()
                    )?,
                    None => f.write_str("no root certificate file (no sslrootcert, no HOME)")?,
                }
                write!(
                    f,
                    ": sslmode={} verifies the server's certificate against it; give the CA's \
                     certificate with sslrootcert=FILE or PGSSLROOTCERT, or use sslmode=require \
                     to encrypt without verifying",
                    mode.name()
                )
            }
            TlsError::Read { what, path, .. } => {
                write!(f, "cannot read the {what} file `{}`", path.display())
            }
            TlsError::NoCertificate { path } => {
                write!(f, "`{}` holds no usable certificate", path.display())
            }
            TlsError::KeyFile { path, .. } => {
                write!(
                    f,
                    "a client certificate is given, and its key file `{}` cannot be read",
                    path.display()
                )
            }
            TlsError::KeyPermissions { path, mode } => write!(
                f,
                "the private key file `{}` has group or world access (mode {mode:04o}): \
                 make it u=rw (0600) or less",
                path.display()
            ),
            TlsError::ClientCert { path, .. } => {
                write!(f, "cannot use the client certificate `{}`", path.display())
            }
            TlsError::Config(_) => f.write_str("cannot configure TLS"),
            TlsError::ServerName { host } => {
                write!(f, "`{host}` cannot be checked against a certificate")
            }
            TlsError::Handshake {
                roots: Some(roots),
                source: rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
            } => write!(
                f,
                "certificate verify failed: the server's certificate is not signed by a CA in `{}`",
                roots.display()
            ),
            TlsError::Handshake {
                source: rustls::Error::InvalidCertificate(_),
                ..
            } => f.write_str("certificate verify failed"),
            TlsError::Handshake { .. } | TlsError::Io(_) => f.write_str("TLS handshake failed"),
        }
    }
}

impl std::error::Error for TlsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TlsError::Read { source, .. } => Some(source),
            TlsError::KeyFile { source, .. } | TlsError::Io(source) => Some(source),
            TlsError::ClientCert { source, .. }
            | TlsError::Config(source)
            | TlsError::Handshake { source, .. } => Some(source),
            TlsError::NoRootCert { .. }
            | TlsError::NoCertificate { .. }
            | TlsError::KeyPermissions { .. }
            | TlsError::ServerName { .. } => None,
        }
    }
}
