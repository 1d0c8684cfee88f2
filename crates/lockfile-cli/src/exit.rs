//! Exit statuses, documented in docs/command.md.

/// A usage error (EX_USAGE).
pub const USAGE: i32 = 64;

/// `run`: the lock is held by someone else, unless `-E` says otherwise.
/// EX_TEMPFAIL: "try again later", which is what a skipped run means. flock(1)
/// uses 1, which is indistinguishable from a failing job; `-E 1` restores it.
pub const CONFLICT: u8 = 75;

/// `run`: the lock file cannot be opened, created, locked or written
/// (EX_CANTCREAT): missing directory, permission, read-only filesystem, a
/// symlink at the path, a full disk.
pub const CANNOT_LOCK: i32 = 73;

/// EX_UNAVAILABLE: with a lease (`--etcd`), its server could not be reached
/// or refused the request; in the flock(1) personality, COMMAND could not be
/// executed.
pub const UNAVAILABLE: i32 = 69;

/// `run` under a lease: the lease was lost, or about to lapse, while COMMAND ran, and
/// COMMAND was stopped (or may have run unprotected). Distinct from the
/// conflict status: this run did start.
pub const LEASE_LOST: i32 = 79;
/// A run stopped by its watchdog or maximum runtime, as timeout(1) exits.
pub const LIMIT: i32 = 124;

/// `run`: COMMAND was found but could not be executed (as in the shell).
pub const NOT_EXECUTABLE: i32 = 126;

/// `run`: COMMAND was not found (as in the shell).
pub const NOT_FOUND: i32 = 127;

/// `run`: an internal failure around COMMAND (EX_OSERR), for example when it
/// could not be waited for.
pub const OS_ERROR: i32 = 71;

/// flock(1)'s statuses where they differ: the data could not be locked
/// (EX_DATAERR), the lock file could not be opened (EX_NOINPUT), or COMMAND
/// could not be executed (EX_UNAVAILABLE).
pub const DATA_ERROR: i32 = 65;
pub const NO_INPUT: i32 = 66;

/// Success. (The monitoring-plugin statuses of `inspect` and `check` are
/// `lockfile::inspect::Status`.)
pub const OK: i32 = 0;
