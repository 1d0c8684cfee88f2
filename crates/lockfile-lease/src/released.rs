//! `Released`: how a release went, when it went.

use crate::Error;

/// What [`LeaseGuard::release`](crate::LeaseGuard::release) found: the
/// lease released while still held, or after it had been lost. Either way
/// renewal has stopped and nothing is left to do; only what was done under
/// a lost lease may have overlapped another holder.
///
/// ```no_run
/// # fn demo(guard: lockfile_lease::LeaseGuard) -> lockfile_lease::Result<()> {
/// if let Some(loss) = guard.release()?.loss() {
///     eprintln!("the work may have overlapped another holder: {loss}");
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a lease lost before its release means the work may have overlapped another holder: see `loss()`"]
#[non_exhaustive]
pub enum Released {
    /// Released while held: no one else held it meanwhile.
    WhileHeld,
    /// It had been lost before the release (its deadline passed without a
    /// renewal, or the server took it away): the loss, as
    /// [`LeaseGuard::check`](crate::LeaseGuard::check) would have said it,
    /// an [`Error::LeaseLost`].
    AfterLoss(Error),
}

impl Released {
    /// Whether the lease had been lost before the release.
    pub fn was_lost(&self) -> bool {
        matches!(self, Released::AfterLoss(_))
    }

    /// The loss, when the lease had been lost before the release.
    pub fn loss(&self) -> Option<&Error> {
        match self {
            Released::AfterLoss(loss) => Some(loss),
            Released::WhileHeld => None,
        }
    }
}
