//! Replacing a file atomically, for files that others read at any moment:
//! node_exporter's textfile collector, or whatever reads `inspect --output`.

use std::fs::File;
use std::io::{self, Write as _};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::files::{self, FileError};

/// Replaces `path` with `contents` so that a reader sees the old file or the
/// new one, never a part: the bytes go to `tmp` first (which must be in the
/// same directory, and must not end in `.prom`, or the collector would read
/// it half-written), and a rename puts them in place. The file's mode is
/// 0644 whatever the umask, so that node_exporter, running as its own user,
/// can read it.
///
/// `path` is replaced only if it is a regular file (or absent): a FIFO, a
/// symlink or a directory planted there stays as it was. `tmp` is created
/// afresh, never followed or opened if something else has the name; a
/// regular file left there by a writer that died is removed first.
///
/// # Errors
///
/// The failed step, naming both paths.
pub(crate) fn write_atomically(path: &Path, tmp: &Path, contents: &[u8]) -> io::Result<()> {
    let named = |what: &str, e: io::Error| {
        let (tmp, path) = (crate::term::path(tmp), crate::term::path(path));
        io::Error::new(
            e.kind(),
            format!("cannot {what} `{tmp}` to replace `{path}`: {e}"),
        )
    };
    // Not checked again before the rename: a name swapped in meanwhile is
    // replaced, never written through, since rename(2) works on names.
    files::replaceable(path)?;
    let mut file = create_new(tmp)?;
    let written = file
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .and_then(|()| file.write_all(contents))
        .and_then(|()| file.sync_data())
        .map_err(|e| named("write", e))
        .and_then(|()| std::fs::rename(tmp, path).map_err(|e| named("rename", e)));
    if written.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    written
}

fn create_new(tmp: &Path) -> Result<File, FileError> {
    match files::create_new(tmp, 0o644) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            // The litter of a writer that died between create and rename:
            // a regular file, since anything else is refused as it is.
            std::fs::remove_file(tmp).map_err(|e| FileError::Io {
                op: "remove the stale",
                path: tmp.to_owned(),
                source: e,
            })?;
            files::create_new(tmp, 0o644)
        }
        other => other,
    }
}

/// A temporary name beside `path` for [`write_atomically`], private to this
/// process: `.NAME.PID.tmp`, which the collector never reads.
pub(crate) fn private_tmp(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_with_mode_0644() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.prom");
        let tmp = private_tmp(&path);
        assert!(!tmp.to_string_lossy().ends_with(".prom"));
        std::fs::write(&tmp, "litter").unwrap();
        write_atomically(&path, &tmp, b"a 1\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 1\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        assert!(!tmp.exists());
        let err = write_atomically(&dir.path().join("no/such.prom"), &tmp, b"").unwrap_err();
        assert!(err.to_string().contains("no/such.prom"), "{err}");
    }
}
