//! The file COMMAND beats on under `--watchdog` when the hold has no lock
//! file of its own (a lease): a private file of the run's, `beat` in a
//! directory that only we may enter (made in `$TMPDIR`, else `/tmp`),
//! holding the run's token. COMMAND finds it through `LOCKFILE_BEAT`;
//! `lockfile beat` checks the token and touches it (so does `touch
//! "$LOCKFILE_BEAT"`), and the watchdog reads its modification time through
//! the wrapper's own descriptor, never through the path.
//!
//! Nobody else can plant, swap or remove anything in the directory (its
//! name is new and random, made with mkdir, so that nothing planted is
//! taken for it), which goes with the run. A wrapper killed by SIGKILL leaves it behind (a
//! directory and a 37-byte file); nothing ever reads it again.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use uuid::Uuid;

/// The most a beat file can hold: a token and a newline.
const MAX_LEN: u64 = 64;

/// A run's beat file; removed, with its directory, when dropped.
pub(crate) struct BeatFile {
    file: File,
    dir: PathBuf,
    path: PathBuf,
}

impl BeatFile {
    /// Makes the directory (a new random name, mode 0700) and an empty
    /// file in it.
    pub(crate) fn create() -> io::Result<BeatFile> {
        let dir = std::env::temp_dir().join(format!("lockfile-beat.{}", Uuid::new_v4().simple()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot make the directory `{}` for the beat file: {e}",
                        crate::term::path(&dir)
                    ),
                )
            })?;
        let path = dir.join("beat");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| {
                let _ = std::fs::remove_dir(&dir);
                io::Error::new(
                    e.kind(),
                    format!("cannot create `{}`: {e}", crate::term::path(&path)),
                )
            })?;
        Ok(BeatFile { file, dir, path })
    }

    /// Writes the run's token, which `lockfile beat` checks.
    pub(crate) fn write_token(&mut self, token: Uuid) -> io::Result<()> {
        writeln!(self.file, "{token}").map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot write `{}`: {e}", crate::term::path(&self.path)),
            )
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// When COMMAND last beat (or the file was made).
    pub(crate) fn modified(&self) -> Option<SystemTime> {
        self.file.metadata().and_then(|m| m.modified()).ok()
    }
}

/// Why `lockfile beat` refused a beat file.
#[derive(Debug)]
pub(crate) enum BeatError {
    Io {
        path: PathBuf,
        source: io::Error,
    },
    /// Not a regular file of a token or two: never touched.
    NotABeatFile {
        path: PathBuf,
    },
    /// Another run's beat file.
    NotOurRun {
        path: PathBuf,
        token: Uuid,
    },
}

impl std::fmt::Display for BeatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BeatError::Io { path, source } => {
                write!(f, "cannot beat on `{}`: {source}", crate::term::path(path))
            }
            BeatError::NotABeatFile { path } => write!(
                f,
                "`{}` is not a run's beat file (not a regular file holding a run's token): left as it is",
                crate::term::path(path)
            ),
            BeatError::NotOurRun { path, token } => write!(
                f,
                "`{}` is the beat file of another run, not of run {token}",
                crate::term::path(path)
            ),
        }
    }
}

/// `lockfile beat` under a hold without a lock file: checks that `path` is
/// the beat file of run `token`, then sets its modification time to now.
/// Opens without following a symlink or blocking, and writes no byte.
pub(crate) fn beat(path: &Path, token: Uuid) -> Result<(), BeatError> {
    let io_error = |source| BeatError::Io {
        path: path.to_owned(),
        source,
    };
    let not_one = || BeatError::NotABeatFile {
        path: path.to_owned(),
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io_error)?;
    let meta = file.metadata().map_err(io_error)?;
    if !meta.file_type().is_file() || meta.len() > MAX_LEN {
        return Err(not_one());
    }
    let mut content = String::new();
    (&file)
        .take(MAX_LEN)
        .read_to_string(&mut content)
        .map_err(|_| not_one())?;
    let theirs: Uuid = content.trim_end().parse().map_err(|_| not_one())?;
    if theirs != token {
        return Err(BeatError::NotOurRun {
            path: path.to_owned(),
            token,
        });
    }
    let now = rustix::fs::Timespec {
        tv_sec: 0,
        tv_nsec: rustix::fs::UTIME_NOW,
    };
    let times = rustix::fs::Timestamps {
        last_access: now,
        last_modification: now,
    };
    rustix::fs::futimens(&file, &times).map_err(|e| io_error(e.into()))
}

impl Drop for BeatFile {
    fn drop(&mut self) {
        // Through paths, in a directory that only we may write: nobody
        // can have swapped a name in it.
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}
