//! The slot a holder took, in its record.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which slot of how many a holder holds, as its owner record says
/// (`"slot": {"index": 1, "of": 3}`). Written by the holder: another user's
/// record may say anything, so a reader takes it as a claim, not a fact.
// Exhaustive: a slot is an index and a count, and records of every version
// spell it so.
#[allow(clippy::exhaustive_structs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Slot {
    /// The slot, from 0.
    pub index: u16,
    /// How many slots the holder asked for (its N).
    pub of: u16,
}

impl fmt::Display for Slot {
    /// `slot 1 of 3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "slot {} of {}", self.index, self.of)
    }
}
