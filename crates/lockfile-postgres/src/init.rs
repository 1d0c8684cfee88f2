//! `init`: applying the schema's DDL ([`crate::schema::ddl`]) to the
//! server, as `lockfile postgres init` does.

use crate::conn::{self, Conn};
use crate::schema::ddl;
use crate::{LeaseOptions, Operation, Result};

impl LeaseOptions {
    /// Creates the schema, its sequence and its tables if they do not exist,
    /// and (again) the fence's functions ([`ddl`]), as `lockfile postgres
    /// init` does. Safe to run again, and
    /// from several hosts at once. With `history_days`, sets the run
    /// history's retention. Needs a role that may create the schema (or
    /// owns it); the jobs' role then needs only
    /// [`grants`](crate::schema::grants).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`](crate::Error::InvalidOptions) for a bad
    /// URL or schema name, or a server error naming its SQLSTATE.
    pub fn init(&self, history_days: Option<u32>) -> Result<()> {
        let conn = Conn::new(self, &self.schema)?;
        let ddl = ddl(&self.schema, history_days);
        conn::block_on(&self.schema, || async {
            let client = conn.connect().await?;
            conn.batch(&client, Operation::Schema, conn.request_timeout, &ddl)
                .await
        })
    }
}
