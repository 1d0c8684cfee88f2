//! What a lock file's path says without a look at the disk.

use std::path::Path;

/// The directory `path` is in: `.` for a bare file name.
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
