//! Before a service exits: the releases that leases dropped inside a
//! runtime left under way.
//!
//! A [`LeaseGuard`](crate::LeaseGuard) (or a leadership) dropped inside a
//! tokio runtime does not wait for its release: it asks the lease's thread
//! and returns, so that no worker is blocked. A process that exits right
//! after (a `main` that returns once its service was told to stop) would
//! end that thread before the server heard, and the next holder would wait
//! out the TTL. [`releases`] waits for them.

use std::sync::{Mutex, PoisonError};

use tokio::sync::oneshot;

use crate::error::Result;

/// The answers of the releases under way.
static UNDER_WAY: Mutex<Vec<oneshot::Receiver<Result<()>>>> = Mutex::new(Vec::new());

/// Keeps the answer of a release that nobody waits for, for [`releases`].
pub(crate) fn under_way(answer: oneshot::Receiver<Result<()>>) {
    let mut under_way = UNDER_WAY.lock().unwrap_or_else(PoisonError::into_inner);
    // Those answered already are done with.
    under_way
        .retain_mut(|answer| matches!(answer.try_recv(), Err(oneshot::error::TryRecvError::Empty)));
    under_way.push(answer);
}

/// Waits until every release that a lease dropped inside a runtime left
/// under way is done: each within about two request timeouts, never past
/// its lease's deadline. Call it before a service's `main` returns. The
/// releases' errors were logged (`release_failed`) by their threads.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// // ... the service ran, and was told to stop ...
/// lockfile_lease::shutdown::releases().await;
/// # });
/// ```
pub async fn releases() {
    let under_way = std::mem::take(&mut *UNDER_WAY.lock().unwrap_or_else(PoisonError::into_inner));
    for answer in under_way {
        let _ = answer.await;
    }
}
