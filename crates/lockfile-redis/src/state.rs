//! What one lease's operations keep between calls on Redis: the keys, the
//! connection, the subscription a waiter listens on, and what the server
//! granted.

use std::time::Duration;

use lockfile_lease::waiting::Woken;

use crate::conn::{Conn, Connection};
use crate::key::Keys;
use crate::{Error, LeaseOptions, Operation, Result};

/// One lease name's operations on Redis.
pub(crate) struct RedisOps {
    /// About the lease's key.
    pub(crate) conn: Conn,
    /// About the run history's key.
    pub(crate) history: Conn,
    pub(crate) keys: Keys,
    /// The TTL, in Redis's milliseconds.
    pub(crate) ttl: Duration,
    /// The connection the acquire, the renewals and the release go over,
    /// until one fails.
    pub(crate) c: Option<Connection>,
    /// A waiter's subscription to the lease's releases.
    pub(crate) pubsub: Option<redis::aio::PubSub>,
    /// A subscription was tried (once per acquire: a server that refuses
    /// it is polled).
    pub(crate) subscribe_tried: bool,
    pub(crate) woken: Woken,
}

/// What the renewals and the release need of a lease taken.
pub(crate) struct Held {
    /// The fencing token, as the lease's key holds it.
    pub(crate) token: String,
}

impl RedisOps {
    /// The operations on `name`, with the TTL `ttl`. Connects only when
    /// asked to.
    pub(crate) fn new(opts: &LeaseOptions, name: &str, ttl: Duration) -> Result<RedisOps> {
        let keys = Keys::new(&opts.prefix, name)?;
        let conn = Conn::new(opts, &keys.lease)?;
        if ttl < Duration::from_millis(1) || ttl > MAX_TTL {
            return Err(Error::InvalidOptions {
                op: Operation::Acquire,
                key: keys.lease.clone(),
                reason: format!(
                    "a TTL of {} cannot be a lease: it must be from 1 ms to 1 day",
                    humantime::format_duration(ttl)
                ),
            });
        }
        Ok(RedisOps {
            history: conn.for_key(&keys.history),
            conn,
            keys,
            ttl,
            c: None,
            pubsub: None,
            subscribe_tried: false,
            woken: Woken::Nothing,
        })
    }

    /// The TTL in milliseconds, rounded up, as the scripts take it.
    pub(crate) fn ttl_ms(&self) -> String {
        let ms =
            self.ttl.as_millis() + u128::from(!self.ttl.subsec_nanos().is_multiple_of(1_000_000));
        ms.to_string()
    }

    /// The kept connection, or a new one within `limit`.
    pub(crate) async fn connection(&mut self, limit: Duration) -> Result<Connection> {
        match &self.c {
            Some(c) => Ok(c.clone()),
            None => {
                let c = self.conn.connect(limit).await?;
                self.c = Some(c.clone());
                Ok(c)
            }
        }
    }
}

/// The longest TTL: a day, as PostgreSQL's engine allows. A longer one
/// would block the next holder for longer than any job should wait on a
/// dead one.
const MAX_TTL: Duration = Duration::from_secs(86_400);
