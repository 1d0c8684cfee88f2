//! How an engine that is told of releases (PostgreSQL's notifications,
//! Redis's Pub/Sub) waits for a holder: until the holder's expiry by the
//! server's count, the poll interval, or a message, whichever comes first;
//! and what woke it, for the `woken_by` of `lock_acquired`.
//!
//! Any client that may send on the channel can send anything: a message
//! proves nothing, and a flood of them must not become a flood of acquire
//! attempts. So a message wakes a waiter only if its last pause was not
//! itself ended by one ([`Woken::hears`]): the first after a timed pause
//! wakes it at once (an honest release is seen without delay), and the
//! pause after that is a timed one. An honest release that comes during
//! that pause is seen when it ends, a poll interval later at the most.

use std::time::{Duration, Instant};

/// What ended a waiting acquire's last pause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Woken {
    /// Nothing: the first attempt.
    Nothing,
    /// Asked again at once, once subscribed to releases: a release before
    /// that told no one.
    Listening,
    /// A message about the lease's release.
    Notification,
    /// The poll interval (or a retry after a failure).
    Poll,
    /// The time the holder's lease expires by the server's count.
    Expiry,
}

impl Woken {
    /// As `woken_by` names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Woken::Nothing => "nothing",
            Woken::Listening => "listening",
            Woken::Notification => "notification",
            Woken::Poll => "poll",
            Woken::Expiry => "expiry",
        }
    }

    /// Whether a message may end the next pause: not when it ended the
    /// last.
    pub fn hears(self) -> bool {
        self != Woken::Notification
    }
}

/// The next timed pause of a waiter whose holder has `remaining` of its
/// lease by the server's count (`None`: unknown, or no expiry), polling
/// every `poll`, until `until`: how long, and what it is when it ends.
/// `None` once `until` has passed.
///
/// A holder that dies sends no message: its lease's expiry, a millisecond
/// after the time the server gave (rounded to the millisecond), ends the
/// pause when that comes before the next poll.
///
/// ```
/// use std::time::{Duration, Instant};
/// use lockfile_lease::waiting::{Woken, pause};
/// let poll = Duration::from_secs(1);
/// let expiring = pause(Some(Duration::from_millis(300)), poll, None);
/// assert_eq!(expiring, Some((Duration::from_millis(301), Woken::Expiry)));
/// assert_eq!(pause(None, poll, None), Some((poll, Woken::Poll)));
/// assert_eq!(pause(None, poll, Some(Instant::now())), None);
/// ```
pub fn pause(
    remaining: Option<Duration>,
    poll: Duration,
    until: Option<Instant>,
) -> Option<(Duration, Woken)> {
    let now = Instant::now();
    if until.is_some_and(|until| now >= until) {
        return None;
    }
    let mut next = match remaining {
        Some(left) if left + Duration::from_millis(1) < poll => {
            (left + Duration::from_millis(1), Woken::Expiry)
        }
        _ => (poll, Woken::Poll),
    };
    if let Some(until) = until
        && until - now < next.0
    {
        next = (until - now, Woken::Poll);
    }
    Some(next)
}
