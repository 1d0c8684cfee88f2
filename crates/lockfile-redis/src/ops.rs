//! The lease layer's server operations, on Redis: [`RedisOps`] takes a
//! lease (one script: [`crate::acquire`]), waits (Pub/Sub, the holder's
//! expiry, a poll), renews it and releases it (a script each, only while
//! the key holds our token), and writes its run history
//! ([`crate::history`]). When to do each, and what the answers mean, is
//! the layer's.

use std::future::Future;
use std::time::{Duration, Instant};

use lockfile::history::LastRun;
use lockfile_lease::LeaseRequest;
use lockfile_lease::acquiring::Attempt;
use lockfile_lease::ops::{Granted, LeaseOps, Released, Run, Vocabulary};

use crate::script::{RELEASE, RENEW};
use crate::state::{Held, RedisOps};
use crate::{ENGINE, Operation, Result, acquire, history};

impl LeaseOps for RedisOps {
    type Held = Held;
    /// What is left of the holder's lease by the server's count.
    type Seen = Option<Duration>;

    const KIND: &'static str = ENGINE;
    const VOCABULARY: Vocabulary = Vocabulary::new(false, true);

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
    ) -> Result<Attempt<Granted<Held>, Option<Duration>>> {
        acquire::attempt(self, request, until).await
    }

    async fn wait(
        &mut self,
        seen: Option<Option<Duration>>,
        until: Option<Instant>,
    ) -> Result<bool> {
        Ok(acquire::wait(self, seen, until).await)
    }

    fn woken_by(&self) -> Option<&'static str> {
        Some(self.woken.as_str())
    }

    async fn renew(&mut self, held: &mut Held, within: Duration) -> Result<Option<Duration>> {
        let start = Instant::now();
        let ttl_ms = self.ttl_ms();
        let answer = async {
            let mut c = self.connection(within).await?;
            let left = within.saturating_sub(start.elapsed());
            RENEW
                .run(
                    &self.conn,
                    &mut c,
                    Operation::Renew,
                    left,
                    &[self.conn.key()],
                    &[held.token.as_bytes(), ttl_ms.as_bytes()],
                )
                .await
        }
        .await;
        match answer {
            Ok(redis::Value::Int(1)) => Ok(Some(self.ttl)),
            Ok(_) => Ok(None),
            Err(e) => {
                // The connection may be dead, or on a server that is no
                // longer the primary: a new one checks again.
                self.c = None;
                Err(e)
            }
        }
    }

    async fn release(&mut self, held: &mut Held, until: Instant) -> Result<Released> {
        let limit = self.conn.left_until(until);
        if limit.is_zero() {
            return Err(self.conn.unanswered(Operation::Release, limit));
        }
        let start = Instant::now();
        let mut c = self.connection(limit).await?;
        let answer = RELEASE
            .run(
                &self.conn,
                &mut c,
                Operation::Release,
                limit.saturating_sub(start.elapsed()),
                &[self.conn.key()],
                &[held.token.as_bytes(), self.keys.channel.as_bytes()],
            )
            .await;
        if answer.is_err() {
            self.c = None;
        }
        let freed = matches!(answer, Ok(redis::Value::Int(1)));
        Ok(Released::new(freed, answer.map(drop)))
    }

    fn record(
        &self,
        run: Run,
        until: Instant,
    ) -> impl Future<Output = Result<LastRun>> + Send + 'static {
        let history = self.history.clone();
        async move { history::record(&history, &run, until).await }
    }
}
