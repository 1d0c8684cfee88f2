//! An acquire, driven the same way on every engine: the engine's attempts
//! and waits, judged by [`Acquiring`], until the lease is taken, refused or
//! waited for too long; then the `lock_acquired` event.

use crate::acquiring::{Acquiring, Next};
use crate::engine::LeaseRequest;
use crate::error::Result;
use crate::ops::{Granted, LeaseOps};

/// Takes the lease through `ops` as `request` says.
///
/// # Errors
///
/// As [`Engine::acquire`](crate::Engine::acquire).
pub(crate) async fn acquire<O: LeaseOps>(
    ops: &mut O,
    request: &LeaseRequest,
) -> Result<Granted<O::Held>> {
    let mut acquiring = Acquiring::new(ops.key(), ops.history_key(), request.wait);
    let until = acquiring.until();
    loop {
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
        let waited = match ops.wait(seen, until).await {
            Ok(waited) => waited,
            // The wait failed as an attempt can: waited out as one.
            Err(e) => {
                acquiring.retry_after(e)?;
                match ops.wait(None, until).await {
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
