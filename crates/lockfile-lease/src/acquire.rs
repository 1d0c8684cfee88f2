//! An acquire, driven the same way on every engine: the engine's attempts
//! and waits, judged by [`Acquiring`], until the lease is taken, refused or
//! waited for too long; then the `lock_acquired` event.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;

use crate::acquiring::{Acquiring, Next};
use crate::error::{Error, Operation, Result};
use crate::ops::{Granted, LeaseOps};
use crate::request::LeaseRequest;

/// Takes the lease through `ops` as `request` says, unless `abandoned`
/// completes first (the caller stopped waiting).
///
/// An abandoned acquire stops at the next wait or before the next attempt,
/// never in the middle of an attempt: an attempt cut short could leave a
/// lease granted on the server that nobody releases. One that completes
/// after the abandonment is handed over all the same, and released at once
/// by the lease's thread, since nobody takes it.
///
/// # Errors
///
/// As [`Engine::acquire`](crate::Engine::acquire).
pub(crate) async fn acquire<O: LeaseOps>(
    ops: &mut O,
    request: &LeaseRequest,
    abandoned: impl Future<Output = ()>,
) -> Result<Granted<O::Held>> {
    let mut abandoned = pin!(abandoned);
    let mut acquiring = Acquiring::new(ops.key(), ops.history_key(), request.wait);
    let until = acquiring.until();
    let key = ops.key().to_owned();
    let given_up = || Error::Io {
        op: Operation::Acquire,
        key: key.clone(),
        source: std::io::Error::other("the caller stopped waiting for the lease"),
    };
    loop {
        if poll_fn(|cx| Poll::Ready(abandoned.as_mut().poll(cx).is_ready())).await {
            return Err(given_up());
        }
        let attempt = ops.attempt(request, until).await;
        let seen = match acquiring.judge(attempt)? {
            Next::Again => continue,
            Next::Acquired(granted) => {
                acquired::<O>(ops, &granted, &acquiring);
                return Ok(*granted);
            }
            Next::Wait(seen) => Some(seen),
            Next::Retry => None,
        };
        let wait = tokio::select! {
            waited = ops.wait(seen, until) => waited,
            () = abandoned.as_mut() => return Err(given_up()),
        };
        let waited = match wait {
            Ok(waited) => waited,
            // The wait failed as an attempt can: waited out as one.
            Err(e) => {
                acquiring.retry_after(e)?;
                let wait = tokio::select! {
                    waited = ops.wait(None, until) => waited,
                    () = abandoned.as_mut() => return Err(given_up()),
                };
                match wait {
                    Ok(waited) => waited,
                    Err(e) => acquiring.retry_after(e).map(|()| true)?,
                }
            }
        };
        if !waited {
            return Err(acquiring.timed_out());
        }
    }
}

/// The `lock_acquired` event, with the engine's own fields as its
/// [`Vocabulary`](crate::ops::Vocabulary) names them.
fn acquired<O: LeaseOps>(ops: &O, granted: &Granted<O::Held>, acquiring: &Acquiring) {
    let (ttl_s, ttl_ms) = if O::VOCABULARY.ttl_in_seconds {
        (Some(granted.ttl.as_secs()), None)
    } else {
        (None, Some(granted.ttl.as_millis() as u64))
    };
    tracing::info!(
        name: "lock_acquired",
        event = "lock_acquired",
        key = %ops.key(),
        fencing_token = granted.fencing_token,
        lease_id = granted.lease_id,
        ttl_s,
        ttl_ms,
        token = %granted.record.token,
        job = granted.record.job.as_deref().unwrap_or(""),
        waited_ms = acquiring.waited().as_millis() as u64,
        woken_by = ops.woken_by(),
    );
}
