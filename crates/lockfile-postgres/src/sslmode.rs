//! libpq's TLS parameters: `sslmode`, `sslrootcert`, `sslcert` and
//! `sslkey` in the connection string, else `PGSSLMODE`, `PGSSLROOTCERT`,
//! `PGSSLCERT` and `PGSSLKEY`, else libpq's files in `~/.postgresql/`.
//!
//! tokio-postgres's parser knows only `disable`, `prefer` and `require`, and
//! none of the file parameters: they are taken out of the parsed string
//! before it reads the rest, and the TLS connector (`tls.rs`) carries them out.

use std::path::PathBuf;

use tokio_postgres::config::SslMode as Negotiation;

/// The parameters taken out of the connection string.
pub(crate) const NAMES: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// libpq's `sslmode`: whether to encrypt, and what to check of the server's
/// certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Plain TCP.
    Disable,
    /// As `prefer` here (libpq tries plain TCP first).
    Allow,
    /// TLS if the server offers it, plain TCP if not; nothing verified.
    Prefer,
    /// TLS or no connection; the chain is verified only when a root
    /// certificate file exists, as libpq does.
    Require,
    /// TLS, and a chain to a root in the root certificate file.
    VerifyCa,
    /// As `verify-ca`, and the certificate names the host connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "invalid sslmode {other:?}: disable, allow, prefer, require, verify-ca or verify-full"
                ));
            }
        })
    }

    /// What tokio-postgres is told: whether to ask for TLS, and whether a
    /// server that refuses is an error. What the certificate must satisfy
    /// is the connector's business.
    pub(crate) fn negotiation(self) -> Negotiation {
        match self {
            SslMode::Disable => Negotiation::Disable,
            SslMode::Allow | SslMode::Prefer => Negotiation::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Negotiation::Require,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// The TLS parameters of one connection string, with libpq's defaults
/// filled in. Files are only named here: they are read at each connection,
/// as libpq reads them, so that a renewed certificate is picked up.
#[derive(Clone, Debug)]
pub(crate) struct SslParams {
    pub(crate) mode: SslMode,
    /// `sslrootcert`, else `~/.postgresql/root.crt` (None without a home).
    pub(crate) root_cert: Option<PathBuf>,
    /// `sslcert`, else `~/.postgresql/postgresql.crt`: sent when it exists.
    pub(crate) cert: Option<PathBuf>,
    /// `sslkey`, else `~/.postgresql/postgresql.key`.
    pub(crate) key: Option<PathBuf>,
}

impl SslParams {
    /// The TLS parameters from those `given` in the connection string
    /// (taken out of it by [`ConnInfo::split`](crate::conninfo::ConnInfo::split)
    /// with [`NAMES`], since tokio-postgres knows none but three modes), with
    /// libpq's defaults. A parameter given twice counts by its last value,
    /// as in libpq.
    pub(crate) fn from_given(found: &[(String, String)]) -> Result<SslParams, String> {
        let given = |name: &str| {
            found
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".postgresql"));
        let file = |name: &str, var: &str, default: &str| {
            given(name)
                .map(PathBuf::from)
                .or_else(|| env(var).map(PathBuf::from))
                .or_else(|| home.as_ref().map(|h| h.join(default)))
        };
        let mode = match given("sslmode") {
            Some(mode) => SslMode::parse(&mode)?,
            None => match env("PGSSLMODE") {
                Some(mode) => SslMode::parse(&mode.to_string_lossy())
                    .map_err(|e| format!("PGSSLMODE: {e}"))?,
                None => SslMode::Prefer,
            },
        };
        if given("sslrootcert").as_deref() == Some("system")
            || (given("sslrootcert").is_none()
                && env("PGSSLROOTCERT").is_some_and(|v| v == "system"))
        {
            return Err(
                "sslrootcert=system (the system's roots) is not supported: name the CA's certificate file"
                    .to_owned(),
            );
        }
        Ok(SslParams {
            mode,
            root_cert: file("sslrootcert", "PGSSLROOTCERT", "root.crt"),
            cert: file("sslcert", "PGSSLCERT", "postgresql.crt"),
            key: file("sslkey", "PGSSLKEY", "postgresql.key"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conninfo::ConnInfo;

    fn take(s: &str) -> (String, Vec<(String, String)>) {
        ConnInfo::parse(s).unwrap().split(&NAMES)
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn the_tls_parameters_leave_a_url_and_the_rest_stays() {
        assert_eq!(
            take(
                "postgres://app@db/jobs?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca%20x.crt"
            ),
            (
                "user='app' host='db' dbname='jobs' application_name='x'".to_owned(),
                pairs(&[("sslmode", "verify-full"), ("sslrootcert", "/etc/ca x.crt")])
            )
        );
        assert_eq!(
            take("postgres://db/jobs?sslmode=require"),
            (
                "host='db' dbname='jobs'".to_owned(),
                pairs(&[("sslmode", "require")])
            )
        );
    }

    #[test]
    fn the_tls_parameters_leave_the_keyword_form_quoted_or_not() {
        assert_eq!(
            take(
                "host=db sslmode = verify-ca password='a b\\'c' sslrootcert='/etc/my ca.crt' sslkey=/k\\ ey dbname=jobs"
            ),
            (
                "host='db' password='a b\\'c' dbname='jobs'".to_owned(),
                pairs(&[
                    ("sslmode", "verify-ca"),
                    ("sslrootcert", "/etc/my ca.crt"),
                    ("sslkey", "/k ey")
                ])
            )
        );
    }

    #[test]
    fn modes_are_libpqs_and_tokio_postgres_is_asked_for_tls_accordingly() {
        for (name, negotiation) in [
            ("disable", Negotiation::Disable),
            ("allow", Negotiation::Prefer),
            ("prefer", Negotiation::Prefer),
            ("require", Negotiation::Require),
            ("verify-ca", Negotiation::Require),
            ("verify-full", Negotiation::Require),
        ] {
            let mode = SslMode::parse(name).unwrap();
            assert_eq!(mode.name(), name);
            assert_eq!(mode.negotiation(), negotiation);
        }
        let err = SslMode::parse("verify_full").unwrap_err();
        assert!(err.contains("verify-full"), "{err}");
        let (rest, found) =
            take("postgres://db/x?sslmode=verify-full&sslrootcert=/ca.crt&sslmode=verify-ca");
        let params = SslParams::from_given(&found).unwrap();
        assert_eq!(rest, "host='db' dbname='x'");
        assert_eq!(params.mode, SslMode::VerifyCa, "the last one counts");
        assert_eq!(params.root_cert, Some(PathBuf::from("/ca.crt")));
        assert!(SslParams::from_given(&take("postgres://db/x?sslrootcert=system").1).is_err());
    }
}
