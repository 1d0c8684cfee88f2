//! Where the server is: the connection URL, completed from libpq's
//! environment (`PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`, `PGPASSWORD`,
//! `PGPASSFILE` and `~/.pgpass`; for TLS, `PGSSLMODE`, `PGSSLROOTCERT`,
//! `PGSSLCERT`, `PGSSLKEY` and `~/.postgresql/`), and the URL as rebuilt
//! from its parts without its password, for every message.

use std::path::PathBuf;
use std::time::Duration;

use tokio_postgres::Config;
use tokio_postgres::config::{Host, SslMode};

use crate::conninfo::ConnInfo;
use crate::sslmode::{self, SslParams};
use crate::tls::Tls;

/// The port PostgreSQL listens on unless told.
const DEFAULT_PORT: u16 = 5432;

/// A parsed connection string and how it is shown.
#[derive(Clone)]
pub(crate) struct Server {
    pub(crate) config: Config,
    /// TLS as the URL's `sslmode` asks: for every connection and cancel
    /// request.
    pub(crate) tls: Tls,
    /// The URL as rebuilt from its parts, its password replaced.
    pub(crate) shown: String,
}

impl Server {
    /// Parses `url` (a `postgres://` URL or libpq's `key=value` form) and
    /// fills in what it leaves out from libpq's environment variables, as
    /// `psql` would.
    ///
    /// The string is read once, by [`ConnInfo`]; tokio-postgres is handed
    /// its parts, re-quoted, never the text. Errors never hold the text.
    pub(crate) fn parse(url: &str) -> Result<Server, String> {
        let info = ConnInfo::parse(url).map_err(|e| e.to_string())?;
        let shown = info.shown();
        let (rest, given) = info.split(&sslmode::NAMES);
        let ssl = SslParams::from_given(&given).map_err(|e| format!("{}: {e}", info.describe()))?;
        // Every value is quoted: the driver can refuse only a parameter's
        // value, by the parameter's name.
        let mut config: Config = rest.parse().map_err(|e| {
            format!(
                "{} is not a PostgreSQL connection string: {e}",
                info.describe()
            )
        })?;
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        if config.get_hosts().is_empty() {
            config.host(env("PGHOST").unwrap_or_else(|| "localhost".to_owned()));
        }
        if config.get_ports().is_empty()
            && let Some(port) = env("PGPORT").and_then(|p| p.parse().ok())
        {
            config.port(port);
        }
        if config.get_user().is_none()
            && let Some(user) = env("PGUSER")
        {
            config.user(user);
        }
        if config.get_dbname().is_none()
            && let Some(db) = env("PGDATABASE")
        {
            config.dbname(db);
        }
        if config.get_password().is_none() {
            if let Some(password) = env("PGPASSWORD") {
                config.password(password);
            } else if let Some(password) = pgpass(&config) {
                config.password(password);
            }
        }
        if config.get_application_name().is_none() {
            config.application_name("lockfile");
        }
        // libpq never uses TLS on a Unix socket, whatever the sslmode.
        let unix_only = config
            .get_hosts()
            .iter()
            .all(|h| matches!(h, Host::Unix(_)));
        config.ssl_mode(if unix_only {
            SslMode::Disable
        } else {
            ssl.mode.negotiation()
        });
        Ok(Server {
            config,
            tls: Tls::new(ssl),
            shown,
        })
    }

    /// Sets the socket limits that the URL leaves unset: a dead peer is
    /// noticed within `limit` (keepalives, and `tcp_user_timeout` for
    /// unacknowledged data), and a connection attempt waits at most `limit`.
    pub(crate) fn bound(&mut self, limit: Duration) {
        let c = &mut self.config;
        if c.get_connect_timeout().is_none() {
            c.connect_timeout(limit);
        }
        if c.get_tcp_user_timeout().is_none() {
            c.tcp_user_timeout(limit);
        }
        // tokio-postgres's default idle time is libpq's, two hours.
        if c.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
            c.keepalives_idle((limit / 2).max(Duration::from_secs(1)));
        }
        if c.get_keepalives_interval().is_none() {
            c.keepalives_interval((limit / 4).max(Duration::from_secs(1)));
        }
        if c.get_keepalives_retries().is_none() {
            c.keepalives_retries(3);
        }
    }
}

/// How `url` is shown in a message about a connection that could not be
/// made: rebuilt from its parts, or, when it cannot be read, what is wrong
/// with it (never its text).
pub(crate) fn shown(url: &str) -> String {
    match ConnInfo::parse(url) {
        Ok(info) => info.shown(),
        Err(fault) => format!("<{fault}>"),
    }
}

/// The password for `config` in the password file (`PGPASSFILE`, or
/// `~/.pgpass`), as libpq looks it up: the first line whose host, port,
/// database and user match (`*` matches anything). A file that others may
/// read is ignored, as libpq ignores it.
fn pgpass(config: &Config) -> Option<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = match std::env::var_os("PGPASSFILE") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".pgpass"),
    };
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_file() || meta.permissions().mode() & 0o077 != 0 {
        return None;
    }
    let text = std::fs::read_to_string(&path).ok()?;
    let host = match config.get_hosts().first()? {
        Host::Tcp(host) => host.clone(),
        Host::Unix(_) => "localhost".to_owned(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(DEFAULT_PORT)
        .to_string();
    let user = config.get_user()?.to_owned();
    let db = config.get_dbname().unwrap_or(&user).to_owned();
    pgpass_lookup(&text, [&host, &port, &db, &user])
}

/// The password of the first line of a password file matching `want`
/// (host, port, database, user).
fn pgpass_lookup(text: &str, want: [&str; 4]) -> Option<String> {
    text.lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .find_map(|line| {
            let fields = split_escaped(line);
            if fields.len() != 5 {
                return None;
            }
            let matches = fields[..4]
                .iter()
                .zip(want)
                .all(|(field, want)| field == "*" || field == want);
            matches.then(|| fields[4].clone())
        })
}

/// A password-file line's fields: split at `:`, with `\:` and `\\` escaped.
fn split_escaped(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    fields.last_mut().expect("one field").push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().expect("one field").push(c),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_rebuilt_string_is_shown() {
        for (url, shown) in [
            (
                "postgresql://app:a/b?c@db/jobs",
                "<the PostgreSQL connection string (a postgresql:// URL) cannot be read at byte 22",
            ),
            (
                "host=db password=s3cret dbname=jobs",
                "host=db password=*** dbname=jobs",
            ),
        ] {
            assert!(super::shown(url).starts_with(shown), "{url}");
            assert!(!super::shown(url).contains("s3cret"));
            assert!(!super::shown(url).contains("a/b"));
        }
        let err = Server::parse("postgresql://app:a/b?c@db/jobs")
            .err()
            .unwrap();
        assert!(!err.contains("a/b"), "{err}");
    }

    #[test]
    fn the_password_file_is_read_as_libpq_reads_it() {
        let file =
            "# comment\nother:5432:*:app:wrong\ndb:5432:jobs:app:right\\:1\n*:*:*:*:fallback\n";
        assert_eq!(
            pgpass_lookup(file, ["db", "5432", "jobs", "app"]).as_deref(),
            Some("right:1")
        );
        assert_eq!(
            pgpass_lookup(file, ["db", "6432", "jobs", "app"]).as_deref(),
            Some("fallback")
        );
        assert_eq!(
            pgpass_lookup("db:5432:jobs:app", ["db", "5432", "jobs", "app"]),
            None
        );
    }

    #[test]
    fn tls_parameters_become_a_negotiation_and_never_reach_a_unix_socket() {
        use tokio_postgres::config::SslMode;
        let server =
            Server::parse("postgres://app:pw@db/jobs?sslmode=verify-full&sslrootcert=/ca.crt")
                .unwrap();
        assert_eq!(server.config.get_ssl_mode(), SslMode::Require);
        assert_eq!(
            server.shown,
            "postgres://app:***@db/jobs?sslmode=verify-full&sslrootcert=/ca.crt"
        );
        let server = Server::parse("host=/run/postgresql sslmode=verify-full").unwrap();
        assert_eq!(server.config.get_ssl_mode(), SslMode::Disable);
        let err = Server::parse("postgres://app:pw@db/jobs?sslmode=full")
            .err()
            .unwrap();
        assert!(err.contains("invalid sslmode \"full\""), "{err}");
        assert!(!err.contains("pw@"), "{err}");
    }

    #[test]
    fn a_url_keeps_what_it_says() {
        let server = Server::parse("postgres://app:pw@db:6432/jobs?application_name=x").unwrap();
        assert_eq!(
            server.shown,
            "postgres://app:***@db:6432/jobs?application_name=x"
        );
        assert_eq!(server.config.get_user(), Some("app"));
        assert_eq!(server.config.get_password(), Some(&b"pw"[..]));
        assert_eq!(server.config.get_ports(), [6432]);
        assert_eq!(server.config.get_application_name(), Some("x"));
        let err = Server::parse("postgres://app:pw@db:notaport/x")
            .err()
            .unwrap();
        assert!(!err.contains("pw@"), "{err}");
    }
}
