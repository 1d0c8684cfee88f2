//! `LostReason`: why a held lease can no longer be trusted.

use std::fmt;
use std::time::Duration;

/// Why a held lease can no longer be trusted. See
/// [`LeaseSignal::check`](crate::LeaseSignal::check).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// No renewal succeeded in time: the local deadline (the send time of the
    /// last successful renewal plus the TTL) passed. The server may have
    /// expired the lease, or may not; the holder can no longer tell.
    DeadlinePassed {
        /// The lease's TTL.
        ttl: Duration,
        /// How long before the moment the loss was noticed the last
        /// successful renewal was sent. At least `ttl`.
        since_renewal: Duration,
    },
    /// The server answered a renewal that the lease no longer exists (etcd:
    /// a TTL of zero; a database: no row of ours).
    Expired,
    /// The key was deleted: by the server when the lease expired, or by
    /// someone else.
    KeyDeleted {
        /// The engine's revision of the deletion, when known (0 when not).
        revision: i64,
    },
    /// The key now belongs to another lease or another holder.
    KeyReplaced {
        /// The engine's revision of the change (0 when not known).
        revision: i64,
    },
    /// The guard released the lease. Not a failure, but work bound to the
    /// lease must stop all the same.
    Released,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostReason::DeadlinePassed { ttl, since_renewal } => write!(
                f,
                "no renewal succeeded within the lease's TTL of {} (the last successful one was sent {} ago); the server may have expired it",
                humantime::format_duration(*ttl),
                humantime::format_duration(millis(*since_renewal)),
            ),
            LostReason::Expired => {
                f.write_str("the server answered a renewal: the lease no longer exists")
            }
            LostReason::KeyDeleted { revision } => {
                write!(f, "the key was deleted at revision {revision}")
            }
            LostReason::KeyReplaced { revision } => write!(
                f,
                "the key was overwritten at revision {revision} and is no longer attached to this lease"
            ),
            LostReason::Released => f.write_str("the lease was released"),
        }
    }
}

/// `d` to the millisecond, for messages.
pub(crate) fn millis(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
