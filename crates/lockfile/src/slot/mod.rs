//! At most N holders at once: N slots, each a lock file of its own with its
//! own owner record, so that a slot inherits everything a lock file
//! guarantees (the kernel frees it the moment its holder dies; `inspect`
//! names its holder; nothing is ever written into a file that is not ours).
//!
//! # Layout
//!
//! Slot 0 is the lock file itself; slot `k` (1 ≤ k < N) is a sibling whose
//! name adds `@k` before a `.lock` suffix, or at the end of a name without
//! one:
//!
//! | slot | `backup.lock` | `backup` |
//! |---|---|---|
//! | 0 | `backup.lock` | `backup` |
//! | 1 | `backup@1.lock` | `backup@1` |
//! | 2 | `backup@2.lock` | `backup@2` |
//!
//! Every slot is an ordinary lock file in the same directory, opened and
//! checked as every lock file is (no symlink followed, nothing waited on
//! that is not a regular file, planted files refused), and each holder's
//! record says which slot of how many it holds ([`OwnerRecord::slot`]).
//!
//! # N is each run's own
//!
//! A holder asking for N slots takes one of slots `0..N`. Nothing stores N
//! but the holders' records, so contenders that disagree (a crontab changed
//! on one host first) need no agreement: each takes only slots below its own
//! N, and slots at or above it count as taken until their holders end. The
//! number of holders therefore never exceeds the largest N in force. A plain
//! lock is slot 0 alone: `N = 1` is the plain lock, and a plain holder and
//! a slotted one on one name exclude each other on slot 0 (a half-migrated
//! crontab never runs more than the larger N at once).
//!
//! # Waiting for any slot
//!
//! flock(2) waits on one file at a time. A waiter for any of N slots tries
//! them, then sleeps on an inotify watch of the directory, woken when a
//! slot's file is written or closed by a writer (its holder's release, or
//! its death: the kernel closes a dead holder's descriptors), and tries
//! again the slots those events name. A waiter's own looks open the files
//! read-only, which inotify reports as a close without writing, so waiters
//! do not wake one another; a slot whose look fails (not a regular file, a
//! filesystem that refuses a lock through a read-only descriptor) is tried
//! only on the sweeps below. After a wake-up for others' files only (a busy
//! shared directory) it naps 10 ms before it listens again. Every second
//! it tries every slot anyway, for a holder that unlocked without closing,
//! or a filesystem without inotify. Where inotify is not to be had (not
//! Linux, or the user's limit of inotify instances reached) it tries every
//! slot every 100 ms.
//!
//! A slot that cannot be taken (a file planted in a shared directory, a
//! FIFO) never keeps another from being taken: it is named in the error
//! only when no slot could be taken.
//!
//! [`OwnerRecord::slot`]: crate::OwnerRecord::slot

mod count;
mod path;

use crate::{Holder, OwnerRecord};

pub use crate::record::Slot;
pub use count::{MAX_SLOTS, SlotCount};
pub(crate) use path::split_slot_name;
pub use path::{slot_of, slot_path};

/// One held slot, as a contention error names it
/// ([`Error::SlotsHeld`](crate::Error::SlotsHeld)).
#[derive(Debug)]
#[non_exhaustive]
pub struct SlotHolder {
    /// The slot.
    pub slot: u16,
    /// Its holder's owner record, when the file held a readable one.
    pub owner: Option<Box<OwnerRecord>>,
    /// The kernel's holders when no record names one.
    pub holders: Vec<Holder>,
}

/// How many of a set's slots are held, and the set's N, from each slot's
/// state (held or not) and record: N is the largest a holder of a held slot
/// recorded (a released record may be of an N since lowered, and a claim
/// outside 1 to 1,024, or below its own slot, is not believed), else the
/// number of slots seen.
///
/// ```
/// let (held, n) = lockfile::slot::in_force([(true, None), (false, None)]);
/// assert_eq!((held, n), (1, 2));
/// ```
pub fn in_force<'a>(
    slots: impl IntoIterator<Item = (bool, Option<&'a OwnerRecord>)>,
) -> (usize, usize) {
    let (mut held, mut seen, mut n) = (0, 0, 0);
    for (is_held, owner) in slots {
        seen += 1;
        if !is_held {
            continue;
        }
        held += 1;
        if let Some(slot) = owner.and_then(|o| o.slot)
            && slot.index < slot.of
            && slot.of <= MAX_SLOTS
        {
            n = n.max(usize::from(slot.of));
        }
    }
    (held, if n == 0 { seen } else { n })
}
