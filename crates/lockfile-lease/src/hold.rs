//! Holding a lease, the same way on every engine: renew every third of the
//! TTL, keep the deadline, notice the loss; after a loss, stop renewing and
//! let the lease go on the server as soon as it answers, so that the next
//! holder need not wait out the TTL; write the run history when asked; and
//! release, never waiting on the server past the deadline.
//!
//! Every request goes to the engine's [`LeaseOps`]; every decision, and
//! every event (`renewal_failed`, `lock_released`; `lease_lost` comes from
//! the [`Renewals`]), is made here.

use std::time::{Duration, Instant};

use crate::error::{LostReason, Result};
use crate::history::write_until;
use crate::ops::{Granted, LeaseOps, Run};
use crate::session::{Request, Requests};
use crate::signal::Renewals;

/// Holds the lease `granted` through `ops` until the guard asks for its
/// release (or is gone), answering its requests meanwhile.
pub(crate) async fn hold<O: LeaseOps>(
    mut ops: O,
    mut granted: Granted<O::Held>,
    renewals: Renewals,
    mut requests: Requests,
) {
    let mut next = granted.granted_at + granted.ttl / 3;
    let mut cleaned = false;
    let mut watch = tokio::spawn(ops.watch(&granted.held));
    let mut watching = true;
    // The run history's writes under way: each bounded by the deadline
    // (`write_until`), and ended before the release, so that a record asked
    // for before a release is written before it.
    let mut records = tokio::task::JoinSet::new();
    // Whether the loss has been noticed, and the clean-up begun.
    let mut cleaning = false;
    let request = loop {
        if !cleaning && renewals.lost().is_some() {
            // Stop renewing and watching a lease we no longer trust, and
            // let it go on the server at once: the next holder need not
            // wait for it to expire.
            cleaning = true;
            watch.abort();
            watching = false;
            next = Instant::now();
        }
        let deadline = renewals.deadline();
        tokio::select! {
            biased;
            request = requests.recv() => match request {
                Some(Request::Record(end, reply)) => {
                    // On a task of its own, so that renewals go on being
                    // made while it waits on the server.
                    let until = write_until(renewals.deadline(), Instant::now(), ops.request_timeout());
                    let run = Run {
                        end,
                        record: granted.record.clone(),
                        fencing_token: granted.fencing_token,
                        claim: granted.claim.clone(),
                    };
                    let write = ops.record(run, until);
                    let key = ops.history_key().to_owned();
                    records.spawn(async move {
                        // Nobody waits for it (an awaited record cancelled):
                        // say so when it fails.
                        if let Some(Err(e)) = reply.send(write.await) {
                            tracing::warn!(name: "record_failed", event = "record_failed", key = %key, error = %e);
                        }
                    });
                }
                other => break other,
            },
            taken = &mut watch, if watching => {
                watching = false;
                if let Ok(reason) = taken {
                    renewals.lose(reason);
                }
            }
            // Noticed on time even while a renewal waits on the server.
            () = tokio::time::sleep_until(deadline.into()), if !cleaning => {
                renewals.poll(Instant::now());
            }
            () = step(&mut ops, &mut granted, &renewals, &mut next, &mut cleaned) => {}
        }
    };
    watch.abort();
    while records.join_next().await.is_some() {}
    // A deadline that passed unnoticed is a loss all the same.
    renewals.poll(Instant::now());
    let until = renewals.deadline();
    let result = match renewals.lost() {
        Some(reason) => {
            // One more attempt, not the rest of a clean-up under way.
            if !cleaned && Instant::now() < until {
                let _ = release(&mut ops, &mut granted, until).await;
            }
            Err(renewals.lost_error(reason))
        }
        None => release(&mut ops, &mut granted, until).await,
    };
    renewals.lose(LostReason::Released);
    // Nobody to tell (a guard dropped inside a runtime, an acquire given up
    // after the grant): a failure is logged here, as a drop would have.
    let untold = match request {
        Some(Request::Release(reply)) => reply.send(result),
        _ => Some(result),
    };
    if let Some(Err(e)) = untold
        && !e.is_lost()
    {
        tracing::warn!(name: "release_failed", event = "release_failed", error = %e);
    }
}

/// Waits for what is due next (a renewal, the deadline, a clean-up after a
/// loss) and does it.
async fn step<O: LeaseOps>(
    ops: &mut O,
    granted: &mut Granted<O::Held>,
    renewals: &Renewals,
    next: &mut Instant,
    cleaned: &mut bool,
) {
    let interval = granted.ttl / 3;
    let lost = renewals.lost().is_some();
    let wake = if lost {
        *next
    } else {
        (*next).min(renewals.deadline())
    };
    tokio::time::sleep_until(wake.into()).await;
    if !lost && renewals.poll(Instant::now()) {
        tracing::debug!(key = %ops.key(), "the lease's deadline passed: renewals stop");
        return;
    }
    if Instant::now() < *next {
        return;
    }
    if lost {
        if !*cleaned {
            // Nothing waits on this but the next holder: a connection and
            // a request or two, each within the request timeout.
            let until = Instant::now() + ops.request_timeout() * 2;
            *cleaned = release(ops, granted, until).await.is_ok();
        }
        *next = Instant::now() + interval.max(Duration::from_millis(200));
        return;
    }
    // An answer slower than this is treated as none: the renewal is sent
    // again on a fresh connection while there is still time.
    let answer_within = ops.request_timeout().min(interval);
    let sent = Instant::now();
    match ops.renew(&mut granted.held, answer_within).await {
        Ok(Some(ttl)) => {
            renewals.renewed(sent, ttl);
            *next = sent + interval;
        }
        Ok(None) => renewals.lose(LostReason::Expired),
        // It may have reached the server all the same: it proves nothing,
        // only the deadline says the lease is lost.
        Err(e) => {
            tracing::warn!(
                name: "renewal_failed",
                event = "renewal_failed",
                key = %ops.key(),
                error = %e,
            );
            renewals.renewal_failed();
            *next = Instant::now() + (interval / 4).max(Duration::from_millis(50));
        }
    }
}

/// Frees the lease on the server if it is still ours, by `until`, with
/// the `lock_released` event once the server was asked.
async fn release<O: LeaseOps>(
    ops: &mut O,
    granted: &mut Granted<O::Held>,
    until: Instant,
) -> Result<()> {
    let released = ops.release(&mut granted.held, until).await?;
    let (deleted, expired) = if O::VOCABULARY.release_deletes {
        (Some(released.freed), None)
    } else {
        (None, Some(released.freed))
    };
    tracing::info!(
        name: "lock_released",
        event = "lock_released",
        key = %ops.key(),
        fencing_token = granted.fencing_token,
        deleted,
        expired,
    );
    released.result
}
