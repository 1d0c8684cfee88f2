//! How many slots: 1 to 1,024.

use std::fmt;
use std::num::NonZeroU16;

/// The largest number of slots: 1,024.
pub const MAX_SLOTS: u16 = 1024;

/// A number of slots, 1 to [`MAX_SLOTS`].
///
/// ```
/// use lockfile::slot::SlotCount;
/// assert_eq!(SlotCount::new(3).map(SlotCount::get), Some(3));
/// assert!(SlotCount::new(0).is_none());
/// assert!(SlotCount::new(1025).is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlotCount(NonZeroU16);

impl SlotCount {
    /// `n` slots, when 1 ≤ n ≤ [`MAX_SLOTS`].
    pub fn new(n: u64) -> Option<SlotCount> {
        u16::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_SLOTS)
            .and_then(NonZeroU16::new)
            .map(SlotCount)
    }

    /// The number.
    pub fn get(self) -> u16 {
        self.0.get()
    }
}

impl fmt::Display for SlotCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
