//! The lease layer's server operations, on PostgreSQL: [`PgOps`] takes a
//! lease (one statement, or a transaction with the tick's claim:
//! [`crate::acquire`]), waits (a poll, the holder's expiry, a notification:
//! [`crate::listen`]), renews it and releases it (an `UPDATE` each, only
//! while the row has our token), and writes its run history
//! ([`crate::history`]). When to do each, and what the answers mean, is the
//! layer's.

use std::future::Future;
use std::time::{Duration, Instant};

use lockfile::history::LastRun;
use lockfile_lease::LeaseRequest;
use lockfile_lease::acquiring::Attempt;
use lockfile_lease::ops::{Granted, LeaseOps, Released, Run, Vocabulary};
use tokio_postgres::types::Type;

use crate::acquire::{self, column};
use crate::state::{Held, PgOps, connection};
use crate::{ENGINE, Operation, Result, history};

impl LeaseOps for PgOps {
    type Held = Held;
    /// What is left of the holder's lease, by the server's clock.
    type Seen = Duration;

    const KIND: &'static str = ENGINE;
    const VOCABULARY: Vocabulary = Vocabulary::new(false, false);

    fn key(&self) -> &str {
        self.conn.key()
    }

    fn history_key(&self) -> &str {
        self.history.key()
    }

    fn request_timeout(&self) -> Duration {
        self.conn.request_timeout
    }

    async fn attempt(
        &mut self,
        request: &LeaseRequest,
        until: Option<Instant>,
    ) -> Result<Attempt<Granted<Held>, Duration>> {
        acquire::attempt(self, request, until).await
    }

    async fn wait(&mut self, seen: Option<Duration>, until: Option<Instant>) -> Result<bool> {
        Ok(acquire::wait(self, seen, until).await)
    }

    fn woken_by(&self) -> Option<&'static str> {
        Some(self.woken.as_str())
    }

    async fn renew(&mut self, held: &mut Held, within: Duration) -> Result<Option<Duration>> {
        let until = Instant::now() + within;
        let token = i64::try_from(held.token).unwrap_or(i64::MAX);
        let answer = async {
            let c = connection(&self.conn, &mut self.client, within).await?;
            let rows = self
                .conn
                .query(
                    c,
                    Operation::Renew,
                    self.conn.left_until(until),
                    &self.conn.sql.renew,
                    &[(&self.name, Type::TEXT), (&token, Type::INT8)],
                )
                .await?;
            match rows.first() {
                None => Ok(None),
                Some(row) => {
                    let ms: i64 = column(&self.conn, Operation::Renew, row, 0)?;
                    Ok(Some(Duration::from_millis(ms.unsigned_abs())))
                }
            }
        }
        .await;
        if answer.is_err() {
            // The connection may be dead, or on a server that became
            // read-only (25006): a new one finds the primary again.
            self.client = None;
        }
        answer
    }

    async fn release(&mut self, held: &mut Held, until: Instant) -> Result<Released> {
        let limit = self.conn.left_until(until);
        if limit.is_zero() {
            return Err(self.conn.unanswered(Operation::Release, limit));
        }
        let token = i64::try_from(held.token).unwrap_or(i64::MAX);
        let c = connection(&self.conn, &mut self.client, limit).await?;
        let rows = self
            .conn
            .query(
                c,
                Operation::Release,
                self.conn.left_until(until),
                &self.conn.sql.release,
                &[(&self.name, Type::TEXT), (&token, Type::INT8)],
            )
            .await;
        if rows.is_err() {
            self.client = None;
        }
        let expired = matches!(&rows, Ok(rows) if !rows.is_empty());
        Ok(Released::new(expired, rows.map(drop)))
    }

    fn record(
        &self,
        run: Run,
        until: Instant,
    ) -> impl Future<Output = Result<LastRun>> + Send + 'static {
        let history = self.history.clone();
        let name = self.name.clone();
        async move { history::record(&history, &name, &run, until).await }
    }
}
