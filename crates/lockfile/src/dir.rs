//! A default lock directory that an unprivileged user can always create.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::Operation;
use crate::{Error, Result};

/// A lock directory this user owns, created (mode `0700`) if missing.
///
/// In order:
/// 1. `$LOCKFILE_DIR`, if set (created if missing, used as is otherwise);
/// 2. `$XDG_STATE_HOME/lockfile`;
/// 3. `$HOME/.local/state/lockfile`;
/// 4. `lockfile-UID` under the system's temporary directory, which must
///    then be a real directory owned by this user (not a symlink someone
///    planted).
///
/// Not `/var/run` or `/run/lock`: an unprivileged user cannot create
/// directories there, and a job that cannot create its lock directory never
/// runs. Not `$XDG_RUNTIME_DIR` either: it is emptied at logout and reboot,
/// and with it the last success that silence alarms rely on.
///
/// # Errors
///
/// [`Error::PermissionDenied`] (and the other variants of [`Error`]) when the
/// directory cannot be created, or when the temporary-directory fallback
/// exists but is not a private directory of this user.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> Result<(), lockfile::Error> {
/// let dir = lockfile::default_lock_dir()?;
/// let guard = lockfile::LockGuard::try_acquire(dir.join("doc-example.lock"))?;
/// # Ok(())
/// # }
/// ```
pub fn default_lock_dir() -> Result<PathBuf> {
    let env_dir = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = env_dir("LOCKFILE_DIR") {
        create(&dir)?;
        return Ok(dir);
    }
    let state_home = env_dir("XDG_STATE_HOME")
        .filter(|d| d.is_absolute())
        .or_else(|| env_dir("HOME").map(|home| home.join(".local/state")));
    if let Some(state) = state_home {
        let dir = state.join("lockfile");
        create(&dir)?;
        return Ok(dir);
    }
    let euid = rustix::process::geteuid().as_raw();
    let dir = std::env::temp_dir().join(format!("lockfile-{euid}"));
    create(&dir)?;
    let meta = std::fs::symlink_metadata(&dir)
        .map_err(|e| Error::from_io(Operation::CreateDir, &dir, e).explain())?;
    if !meta.is_dir() || meta.uid() != euid || meta.permissions().mode() & 0o022 != 0 {
        return Err(Error::PermissionDenied {
            op: Operation::CreateDir,
            hint: format!(
                "`{}` exists but is not a private directory of uid {euid} (owner uid {}, mode {:o}); set LOCKFILE_DIR",
                crate::text::path(&dir),
                meta.uid(),
                meta.mode() & 0o7777
            ),
            euid,
            path: dir,
            source: None,
        });
    }
    Ok(dir)
}

fn create(dir: &Path) -> Result<()> {
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(Error::from_io(Operation::CreateDir, dir, e).explain()),
    }
}
