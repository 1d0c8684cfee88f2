//! What one lease's operations keep between calls on etcd: its
//! connections, and what the server granted.

use std::time::Duration;

use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper};

use crate::conn::Conn;
use crate::{Error, LeaseOptions, Operation, Result, history_key_for, key_for};

/// One lease name's operations on etcd, with their connections.
pub(crate) struct EtcdOps {
    /// About the lease's key.
    pub(crate) conn: Conn,
    /// About the run history's key.
    pub(crate) history: Conn,
    /// The TTL to ask for, in etcd's whole seconds.
    pub(crate) ttl_secs: i64,
    /// The connection the acquire and the renewals go over, until one
    /// fails.
    pub(crate) client: Option<Client>,
}

/// What the renewals and the release need of a lease taken.
pub(crate) struct Held {
    pub(crate) lease_id: i64,
    /// The key's create revision.
    pub(crate) token: u64,
    /// The TTL etcd granted.
    pub(crate) ttl: Duration,
    /// The keepalive stream, opened by the first renewal and dropped after
    /// a failed one.
    pub(crate) stream: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    /// A renewal was sent on the stream and its answer not read: it was
    /// cancelled (the guard's request came first).
    pub(crate) unanswered: bool,
}

impl Held {
    pub(crate) fn new(lease_id: i64, token: u64, ttl: Duration) -> Held {
        Held {
            lease_id,
            token,
            ttl,
            stream: None,
            unanswered: false,
        }
    }
}

impl EtcdOps {
    /// The operations on `name`, with the TTL `ttl` (whole seconds, rounded
    /// up). Connects only when asked to.
    pub(crate) fn new(opts: &LeaseOptions, name: &str, ttl: Duration) -> Result<EtcdOps> {
        let conn = Conn::new(opts, &key_for(name)?)?;
        let history = conn.for_key(&history_key_for(name)?);
        let ttl_secs = ttl_seconds(&conn, ttl)?;
        Ok(EtcdOps {
            conn,
            history,
            ttl_secs,
            client: None,
        })
    }
}

/// The TTL in etcd's whole seconds, rounded up.
fn ttl_seconds(conn: &Conn, ttl: Duration) -> Result<i64> {
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    if secs == 0 {
        return Err(Error::InvalidOptions {
            op: Operation::Grant,
            key: conn.key().to_owned(),
            reason: "the TTL is zero".to_owned(),
        });
    }
    i64::try_from(secs).map_err(|_| Error::InvalidOptions {
        op: Operation::Grant,
        key: conn.key().to_owned(),
        reason: format!("a TTL of {secs}s is too long"),
    })
}
