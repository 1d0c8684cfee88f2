//! A heartbeat from the job itself, on a lock its wrapper holds: `lockfile
//! beat`, checked against the run's token.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::SystemTime;

use uuid::Uuid;

use crate::error::Operation;
use crate::record::{self, LockDocument};
use crate::{Error, Result, sys};

/// Proves that the run with `token` makes progress: sets the lock file's
/// modification time to now, but only while the file's record is that run's,
/// unreleased.
///
/// This is the beat of a job that runs under a wrapper holding the lock
/// (`lockfile run --watchdog`, which gives the job `LOCKFILE_PATH` and
/// `LOCKFILE_TOKEN`). The token check keeps a process that an earlier run
/// left behind from refreshing a later run's lock. A holder of the guard
/// itself calls [`LockGuard::heartbeat`](crate::LockGuard::heartbeat)
/// instead.
///
/// The check and the beat are two steps: a run that ends in between is still
/// beaten once. Any process that may write the file can also beat it by
/// setting its modification time (`touch`); only this form checks the token.
///
/// # Errors
///
/// [`Error::NotOurRun`] when the record belongs to another run or was
/// released (nothing is changed then); any other [`Error`] when the file
/// cannot be opened, read or touched.
///
/// # Examples
///
/// ```
/// # fn main() -> Result<(), lockfile::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("job.lock");
/// let guard = lockfile::LockGuard::try_acquire(&path)?;
/// lockfile::beat(&path, guard.record().token)?;
/// let other = uuid::Uuid::from_u128(7);
/// assert!(matches!(
///     lockfile::beat(&path, other),
///     Err(lockfile::Error::NotOurRun { .. })
/// ));
/// # Ok(())
/// # }
/// ```
pub fn beat(path: impl AsRef<Path>, token: Uuid) -> Result<()> {
    let path = path.as_ref();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.kind() {
            // Not created here: a missing file is just missing.
            std::io::ErrorKind::NotFound => Error::Io {
                op: Operation::Open,
                path: path.to_path_buf(),
                source: e,
            },
            _ => Error::from_io(Operation::Open, path, e).explain(),
        })?;
    let mut small = record::SmallRead::new();
    let content = record::read_content(&file, &mut small)
        .map_err(|e| Error::from_io(Operation::Read, path, e))?;
    let doc = LockDocument::decode(&content).ok();
    let theirs = doc.as_ref().filter(|d| !d.released).map(|d| d.owner.token);
    if theirs != Some(token) {
        return Err(Error::NotOurRun {
            path: path.to_path_buf(),
            token,
            found: theirs,
        });
    }
    sys::touch(&file, SystemTime::now()).map_err(|e| Error::from_io(Operation::Heartbeat, path, e))
}
