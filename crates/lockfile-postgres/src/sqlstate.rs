//! What PostgreSQL (or the way to it) answered, as the source of the lease
//! layer's [`Error::Server`](crate::Error::Server): the SQLSTATE first, so
//! that one line says what went wrong.

use std::fmt;
use std::io;

/// SQLSTATE 42P01, `undefined_table`: the tables are missing.
pub const UNDEFINED_TABLE: &str = "42P01";
/// SQLSTATE 3F000, `invalid_schema_name`: the schema is missing.
pub const INVALID_SCHEMA_NAME: &str = "3F000";
/// SQLSTATE 28P01, `invalid_password`.
pub const INVALID_PASSWORD: &str = "28P01";
/// SQLSTATE 25006, `read_only_sql_transaction`: a standby, or a demoted
/// primary. Counts as an unreachable server: the lease is wherever the
/// primary is.
pub const READ_ONLY: &str = "25006";
/// SQLSTATE 40001, `serialization_failure`: retried.
pub const SERIALIZATION_FAILURE: &str = "40001";
/// SQLSTATE 40P01, `deadlock_detected`: retried.
pub const DEADLOCK_DETECTED: &str = "40P01";
/// SQLSTATE 42501, `insufficient_privilege`.
pub const INSUFFICIENT_PRIVILEGE: &str = "42501";
/// SQLSTATE LF001, lockfile's own (the class `LF` is one that PostgreSQL
/// does not use): `SCHEMA.fence(name, token)` was given a token lower than
/// the highest it has seen for the name, so a later holder of the lease has
/// fenced, and the caller's transaction rolls back. Never retry it with the
/// same token. See [`fence_sql`](crate::schema::fence_sql).
pub const STALE_FENCING_TOKEN: &str = "LF001";

/// An error from PostgreSQL or from the connection to it, with its SQLSTATE
/// when the server answered. Find it as the `source` of
/// [`Error::Server`](crate::Error::Server):
///
/// ```
/// # fn f(e: lockfile_postgres::Error) {
/// use lockfile_postgres::{Error, ServerError};
/// if let Error::Server { source, .. } = &e
///     && let Some(server) = source.downcast_ref::<ServerError>()
///     && server.sqlstate() == Some(lockfile_postgres::sqlstate::UNDEFINED_TABLE)
/// {
///     eprintln!("run `lockfile postgres init` first");
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct ServerError {
    sqlstate: Option<String>,
    message: String,
    /// The client's error; none when this crate refused the reply itself
    /// (one larger than anything it writes).
    source: Option<tokio_postgres::Error>,
}

impl ServerError {
    pub(crate) fn new(source: tokio_postgres::Error) -> ServerError {
        let (sqlstate, message) = match source.as_db_error() {
            Some(db) => {
                let mut message = format!("{}: {}", db.severity(), db.message());
                if let Some(detail) = db.detail() {
                    message.push_str(&format!(" ({detail})"));
                }
                (Some(db.code().code().to_owned()), message)
            }
            None => {
                // The client's error says what it was doing; its causes say
                // why (connection refused, a timeout).
                let mut message = source.to_string();
                let mut cause = std::error::Error::source(&source);
                while let Some(e) = cause {
                    message.push_str(&format!(": {e}"));
                    cause = e.source();
                }
                (None, message)
            }
        };
        ServerError {
            sqlstate,
            message,
            source: Some(source),
        }
    }

    /// A reply refused for holding more bytes of rows than
    /// `MAX_REPLY_BYTES` (`conn.rs`).
    pub(crate) fn too_many_bytes(limit: usize) -> ServerError {
        ServerError {
            sqlstate: None,
            message: format!(
                "the server answered more than {limit} bytes of rows to one statement, the \
                 most lockfile reads of one reply: the reply is refused"
            ),
            source: None,
        }
    }

    /// A connection that could not be made (before tokio-postgres had a
    /// socket to report on).
    pub(crate) fn connect(e: io::Error) -> ServerError {
        ServerError {
            sqlstate: None,
            message: format!("error connecting to server: {e}"),
            source: None,
        }
    }

    /// Connection parameters that cannot work.
    pub(crate) fn config(why: &str) -> ServerError {
        ServerError {
            sqlstate: None,
            message: format!("invalid configuration: {why}"),
            source: None,
        }
    }

    /// A message refused for its declared length ([`crate::wire`]).
    pub(crate) fn too_large(too_large: crate::wire::TooLarge) -> ServerError {
        ServerError {
            sqlstate: None,
            message: too_large.to_string(),
            source: None,
        }
    }

    /// A reply refused for holding more rows than the statement can return
    /// from what this engine writes: a hostile or broken server, or
    /// another role's rows in our tables. Unreachable, as a server that
    /// cannot be used is.
    pub(crate) fn too_many_rows(limit: usize) -> ServerError {
        let rows = if limit == 1 { "row" } else { "rows" };
        ServerError {
            sqlstate: None,
            message: format!(
                "the server answered more than {limit} {rows} to one statement, the most it can \
                 return from what lockfile writes: the reply is refused"
            ),
            source: None,
        }
    }

    /// The SQLSTATE the server answered with, if it answered (see the
    /// constants in [`sqlstate`](crate::sqlstate)).
    pub fn sqlstate(&self) -> Option<&str> {
        self.sqlstate.as_deref()
    }

    /// Whether the server could not be used at all: no connection, a lost
    /// one, a server shutting down or starting, or one that is read-only
    /// (25006, a standby or a demoted primary). A renewal that fails so
    /// reconnects.
    pub fn is_unreachable(&self) -> bool {
        match self.sqlstate() {
            None => true,
            Some(code) => {
                code == READ_ONLY
                    || code.starts_with("08")
                    || code.starts_with("57P")
                    || code == "53300"
            }
        }
    }

    /// Whether the statement may succeed if sent again as is (40001,
    /// 40P01).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.sqlstate(),
            Some(SERIALIZATION_FAILURE | DEADLOCK_DETECTED)
        )
    }
}

/// The SQLSTATE in a lease-layer error from this engine, if the server
/// answered one.
pub fn of(e: &crate::Error) -> Option<&str> {
    match e {
        crate::Error::Server { source, .. } => source.downcast_ref::<ServerError>()?.sqlstate(),
        _ => None,
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(code) = &self.sqlstate {
            write!(f, "SQLSTATE {code}: ")?;
        }
        f.write_str(&self.message)?;
        match self.sqlstate() {
            Some(UNDEFINED_TABLE | INVALID_SCHEMA_NAME) => f.write_str(
                "; create the tables with `lockfile postgres init URL` or the library's `LeaseOptions::init` (`lockfile postgres schema` prints them)",
            ),
            Some(INSUFFICIENT_PRIVILEGE) => f.write_str(
                "; the role needs USAGE on the schema and its sequence, and SELECT, INSERT, UPDATE and DELETE on its tables leases, history, runs and settings",
            ),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
