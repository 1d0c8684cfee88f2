//! The renewal task: a keepalive every third of the TTL, each held to a short
//! answer time, reconnecting after any failure.
//!
//! It only reports; the session decides. A renewal that errors or goes
//! unanswered may still have reached etcd, so it proves nothing either way:
//! the session judges loss by the deadline, not by errors.

use std::time::{Duration, Instant};

use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper};
use tokio::sync::mpsc::UnboundedSender;

use crate::Operation;
use crate::conn::Conn;

/// What the background tasks tell the session.
#[derive(Debug)]
pub(crate) enum Report {
    /// A renewal sent at `sent` was answered with this TTL.
    Renewed { sent: Instant, ttl: Duration },
    /// A renewal failed or was not answered in time.
    Failed(crate::Error),
    /// etcd answered a renewal with TTL 0: the lease is gone.
    Expired,
    /// The key was deleted or replaced.
    KeyLost(crate::LostReason),
}

pub(crate) async fn renew(
    conn: Conn,
    mut client: Client,
    lease_id: i64,
    ttl: Duration,
    granted_at: Instant,
    reports: UnboundedSender<Report>,
) {
    let interval = ttl / 3;
    // An answer slower than this is treated as none: the renewal is retried
    // on a fresh connection while there is still time before the deadline.
    let answer_within = conn.request_timeout.min(interval);
    let retry_after = (interval / 4).max(Duration::from_millis(50));
    let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    let mut next = granted_at + interval;
    loop {
        tokio::time::sleep_until(next.into()).await;
        let sent = Instant::now();
        let answer = conn
            .call_within(
                Operation::Renew,
                answer_within,
                renew_once(&mut client, &mut stream, lease_id, ttl),
            )
            .await;
        match answer {
            Ok(Some(granted)) => {
                let report = Report::Renewed { sent, ttl: granted };
                if reports.send(report).is_err() {
                    return;
                }
                next = sent + interval;
            }
            Ok(None) => {
                let _ = reports.send(Report::Expired);
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, "lease renewal failed; reconnecting");
                if reports.send(Report::Failed(e)).is_err() {
                    return;
                }
                // The stream may be stuck behind a dead connection: drop it
                // and the client's connections, and start afresh.
                stream = None;
                if let Ok(fresh) = conn.connect().await {
                    client = fresh;
                }
                next = Instant::now() + retry_after;
            }
        }
    }
}

/// One renewal: `Some(ttl)` when etcd renewed the lease, `None` when it
/// answered that the lease does not exist.
async fn renew_once(
    client: &mut Client,
    stream: &mut Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    lease_id: i64,
    ttl: Duration,
) -> Result<Option<Duration>, etcd_client::Error> {
    let Some((keeper, responses)) = stream else {
        // Opening the stream sends a first renewal and waits for its answer.
        return match client.lease_keep_alive(lease_id).await {
            Ok(opened) => {
                *stream = Some(opened);
                Ok(Some(ttl))
            }
            // etcd answers a renewal of a lease it no longer has with TTL 0,
            // which the client reports as this variant; a failure to send is
            // the same variant, told apart only by its message. Ask etcd:
            // a lease it does not have has a time-to-live of -1.
            Err(e @ etcd_client::Error::LeaseKeepAliveError(_)) => {
                let live = client.lease_time_to_live(lease_id, None).await?;
                if live.ttl() < 0 { Ok(None) } else { Err(e) }
            }
            Err(e) => Err(e),
        };
    };
    keeper.keep_alive().await?;
    match responses.message().await? {
        Some(resp) => match u64::try_from(resp.ttl()) {
            Ok(secs) if secs > 0 => Ok(Some(Duration::from_secs(secs))),
            _ => Ok(None),
        },
        None => Err(etcd_client::Error::LeaseKeepAliveError(
            "etcd closed the keepalive stream".to_owned(),
        )),
    }
}
