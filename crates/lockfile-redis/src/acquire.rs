//! Taking a lease: one script that sets the lease's key if it is free,
//! draws the fencing token and, with a tick to claim, writes the claim into
//! the run history if it has not changed since it was read (with the
//! server's clock: [`crate::history::read_current`]). A waiting acquire
//! asks again when the holder releases (a Pub/Sub message), when its lease
//! expires by the server's count, and at least every poll interval.

use std::future::poll_fn;
use std::time::{Duration, Instant};

use futures_core::Stream;
use lockfile::OwnerRecord;
use lockfile_lease::LeaseRequest;
use lockfile_lease::ops::{Granted, stored_record};
use lockfile_lease::waiting::{self, Woken};

use crate::script::{self, ACQUIRE, MAX_VALUE};
use crate::state::{Held, RedisOps};
use crate::{Error, Operation, Result, history};

/// One attempt: when contended, it saw what is left of the holder's lease
/// by the server's count (`None`: no expiry, a key not written by us).
type Attempt = lockfile_lease::acquiring::Attempt<Granted<Held>, Option<Duration>>;

/// One attempt, every request of it ending by `until` too.
pub(crate) async fn attempt(
    ops: &mut RedisOps,
    request: &LeaseRequest,
    until: Option<Instant>,
) -> Result<Attempt> {
    let answer = take(ops, request, ops.conn.within(until)).await;
    if answer.is_err() {
        ops.c = None;
    }
    if let Ok(Attempt::Acquired(_)) = &answer {
        // The subscription's connection closes here.
        ops.pubsub = None;
    }
    answer
}

async fn take(ops: &mut RedisOps, request: &LeaseRequest, limit: Duration) -> Result<Attempt> {
    let start = Instant::now();
    let mut c = ops.connection(limit).await?;
    let left = || limit.saturating_sub(start.elapsed());
    let (value, record) = stored_record(request, ops.ttl);
    let (mut version, mut doc, mut claim) = (String::new(), Vec::new(), None);
    if let Some(tick) = &request.tick {
        let (kept, read_version, now) = history::read_current(&ops.history, &mut c, left()).await?;
        match kept.claimed(tick, &record, now) {
            Ok((next, ours)) => {
                version = read_version;
                doc = next.encode();
                claim = Some(ours);
            }
            Err(decision) => {
                return Err(Error::refused_tick(
                    &ops.keys.lease,
                    decision,
                    kept.last_claimed_tick.as_ref(),
                )
                .expect("a refusal"));
            }
        }
    }
    let granted_at = Instant::now();
    let keys = [ops.keys.lease.as_str(), &ops.keys.token, &ops.keys.history];
    let ttl_ms = ops.ttl_ms();
    let most = MAX_VALUE.to_string();
    let args: [&[u8]; 5] = [
        value.as_bytes(),
        ttl_ms.as_bytes(),
        version.as_bytes(),
        &doc,
        most.as_bytes(),
    ];
    let reply = ACQUIRE
        .run(&ops.conn, &mut c, Operation::Acquire, left(), &keys, &args)
        .await?;
    let fields = script::fields(&ops.conn, Operation::Acquire, reply)?;
    let token = || {
        String::from_utf8(script::bytes(&fields, 1))
            .ok()
            .filter(|t| t.parse::<u64>().is_ok())
    };
    match script::int(&fields, 0) {
        Some(1) => {
            let Some(token) = token() else {
                return Err(ops.conn.error(
                    Operation::Acquire,
                    "the acquire script answered a token that is not a number",
                ));
            };
            let fencing_token = token.parse().expect("checked above");
            let mut granted =
                Granted::new(fencing_token, ops.ttl, record, granted_at, Held { token });
            granted.claim = claim;
            Ok(Attempt::Acquired(Box::new(granted)))
        }
        Some(0) => {
            let owner = OwnerRecord::from_json(&script::bytes(&fields, 2))
                .ok()
                .map(Box::new);
            // A key written by another client may hold no token of ours.
            let fencing_token = token().and_then(|t| t.parse().ok()).unwrap_or(0);
            let remaining = script::int(&fields, 4)
                .and_then(|ms| u64::try_from(ms).ok())
                .map(Duration::from_millis);
            Ok(Attempt::Contended {
                owner,
                fencing_token,
                seen: remaining,
            })
        }
        Some(2) => Ok(Attempt::Raced),
        Some(3) => Err(ops.conn.error(
            Operation::Acquire,
            format!(
                "the fencing token counter `{}` holds {}, 2^53 or more: no larger token can be \
                 drawn from it exactly (no holder of ours wrote it)",
                ops.keys.token,
                lockfile::text::quoted_bytes(&script::bytes(&fields, 1))
            ),
        )),
        _ => Err(ops.conn.error(
            Operation::Acquire,
            format!("the acquire script answered {fields:?}"),
        )),
    }
}

/// Waits before the next attempt: for the holder, whose lease has
/// `remaining` by the server's count, or, without one, after a failure.
/// False once `until` has passed.
pub(crate) async fn wait(
    ops: &mut RedisOps,
    seen: Option<Option<Duration>>,
    until: Option<Instant>,
) -> bool {
    let poll = lockfile_lease::engine::poll_interval(ops.ttl);
    let remaining = match seen {
        Some(remaining) => {
            if !ops.subscribe_tried {
                ops.subscribe_tried = true;
                let limit = until.map_or(ops.conn.request_timeout, |u| ops.conn.left_until(u));
                if subscribe(ops, limit).await {
                    // A release before the subscription told no one: ask
                    // again at once.
                    ops.woken = Woken::Listening;
                    return true;
                }
            }
            remaining
        }
        None => {
            ops.c = None;
            None
        }
    };
    let Some((pause, timer)) = waiting::pause(remaining, poll, until) else {
        return false;
    };
    let hearing = ops.woken.hears();
    let sleep = tokio::time::sleep(pause);
    let mut sleep = std::pin::pin!(sleep);
    ops.woken = loop {
        tokio::select! {
            biased;
            () = released(&mut ops.pubsub) => {
                if hearing {
                    break Woken::Notification;
                }
                // Not heard, but read: the client queues every message
                // that comes, and anyone may publish a flood of them.
            }
            () = &mut sleep => break timer,
        }
    };
    true
}

/// Subscribes to the lease's releases within `limit`; false when the
/// server refuses (an ACL without the channel: the waiter polls).
async fn subscribe(ops: &mut RedisOps, limit: Duration) -> bool {
    let start = Instant::now();
    let subscribed = async {
        let mut pubsub = ops.conn.pubsub(limit).await?;
        ops.conn
            .call(
                Operation::Watch,
                limit.saturating_sub(start.elapsed()),
                pubsub.subscribe(&ops.keys.channel),
            )
            .await?;
        Ok::<_, Error>(pubsub)
    }
    .await;
    match subscribed {
        Ok(pubsub) => {
            ops.pubsub = Some(pubsub);
            true
        }
        Err(e) => {
            tracing::debug!(error = %e, "cannot subscribe to releases; polling");
            false
        }
    }
}

/// Returns when a message comes on the subscription; never, when there is
/// none or it ends (and is dropped).
async fn released(pubsub: &mut Option<redis::aio::PubSub>) {
    if let Some(p) = pubsub {
        let ended = {
            let mut messages = std::pin::pin!(p.on_message());
            poll_fn(|cx| messages.as_mut().poll_next(cx))
                .await
                .is_none()
        };
        if !ended {
            return;
        }
        *pubsub = None;
    }
    std::future::pending().await
}
