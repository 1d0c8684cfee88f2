//! What the benchmark programs share: the statistics of rounds measured
//! against a floor of the same round, and how figures are written in their
//! Markdown tables. `compare` (the lock file) and `leases` (the lease
//! engines) are its binaries.

pub mod clock;
pub mod format;
pub mod fs;
pub mod markdown;
pub mod stats;
