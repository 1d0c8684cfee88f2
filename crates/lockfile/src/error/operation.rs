//! What the crate was doing when an error happened.

use std::fmt;

/// What the crate was doing when an error happened. Shown in messages as
/// "cannot OPERATION `PATH`".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
    /// Opening or creating the lock file.
    Open,
    /// Taking or releasing the kernel lock.
    Lock,
    /// Checking the file's identity (`stat`).
    Stat,
    /// Reading the owner record.
    Read,
    /// Writing the owner record.
    Write,
    /// Refreshing the heartbeat.
    Heartbeat,
    /// Listing a directory of lock files.
    ReadDir,
    /// Removing a lock file.
    Remove,
    /// Creating a lock directory.
    CreateDir,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Open => "open lock file",
            Operation::Lock => "lock",
            Operation::Stat => "stat lock file",
            Operation::Read => "read owner record from",
            Operation::Write => "write owner record to",
            Operation::Heartbeat => "refresh heartbeat of",
            Operation::ReadDir => "list lock directory",
            Operation::Remove => "remove lock file",
            Operation::CreateDir => "create lock directory",
        })
    }
}
