//! The names of a lock file's slots (see the [module](super)'s layout).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Path, PathBuf};

use super::count::MAX_SLOTS;

const SUFFIX: &[u8] = b".lock";

/// The file of slot `index` of the lock file `base`: `base` itself for slot
/// 0, else `base` with `@index` before its `.lock` suffix (or at the end of
/// a name without one).
///
/// ```
/// use std::path::Path;
/// use lockfile::slot::slot_path;
/// assert_eq!(slot_path(Path::new("/run/lock/backup.lock"), 0), Path::new("/run/lock/backup.lock"));
/// assert_eq!(slot_path(Path::new("/run/lock/backup.lock"), 2), Path::new("/run/lock/backup@2.lock"));
/// assert_eq!(slot_path(Path::new("backup"), 1), Path::new("backup@1"));
/// ```
pub fn slot_path(base: &Path, index: u16) -> PathBuf {
    if index == 0 {
        return base.to_owned();
    }
    let Some(name) = base.file_name() else {
        // No file name (`..`, `/`): the lock itself refuses such a path.
        return base.to_owned();
    };
    base.with_file_name(slot_name(name, index))
}

/// The file name of slot `index` (≥ 1) of the lock file named `name`.
fn slot_name(name: &OsStr, index: u16) -> OsString {
    let bytes = name.as_bytes();
    let (stem, suffix) = match bytes.strip_suffix(SUFFIX) {
        Some(stem) if !stem.is_empty() => (stem, SUFFIX),
        _ => (bytes, &b""[..]),
    };
    let mut out = Vec::with_capacity(bytes.len() + 6);
    out.extend_from_slice(stem);
    out.push(b'@');
    out.extend_from_slice(index.to_string().as_bytes());
    out.extend_from_slice(suffix);
    OsString::from_vec(out)
}

/// Which slot of the lock file named `base` the file named `name` would be,
/// by its name alone: `Some(0)` for `base` itself, `Some(k)` for its slot
/// `k` (1 ≤ k < 1,024, written without leading zeros). Whether it is one is
/// for its record to say.
///
/// ```
/// use std::ffi::OsStr;
/// use lockfile::slot::slot_of;
/// let base = OsStr::new("backup.lock");
/// assert_eq!(slot_of(base, OsStr::new("backup@3.lock")), Some(3));
/// assert_eq!(slot_of(base, OsStr::new("backup@03.lock")), None);
/// assert_eq!(slot_of(base, OsStr::new("backup@1024.lock")), None);
/// assert_eq!(slot_of(base, OsStr::new("other@1.lock")), None);
/// ```
pub fn slot_of(base: &OsStr, name: &OsStr) -> Option<u16> {
    if base == name {
        return Some(0);
    }
    let (base, name) = (base.as_bytes(), name.as_bytes());
    let (stem, name) = match base.strip_suffix(SUFFIX) {
        Some(stem) if !stem.is_empty() => (stem, name.strip_suffix(SUFFIX)?),
        _ => (base, name),
    };
    let digits = name.strip_prefix(stem)?.strip_prefix(b"@")?;
    index_of(digits)
}

/// The slot a file named `name` would be of some lock file, and that lock
/// file's name: `backup@2.lock` → (`backup.lock`, 2). `None` for a name
/// that no slot ≥ 1 has.
pub(crate) fn split_slot_name(name: &OsStr) -> Option<(OsString, u16)> {
    let bytes = name.as_bytes();
    let (body, suffix) = match bytes.strip_suffix(SUFFIX) {
        Some(body) => (body, SUFFIX),
        None => (bytes, &b""[..]),
    };
    let at = body.iter().rposition(|&b| b == b'@')?;
    let (stem, digits) = (&body[..at], &body[at + 1..]);
    if stem.is_empty() {
        return None;
    }
    let index = index_of(digits)?;
    let mut base = stem.to_vec();
    base.extend_from_slice(suffix);
    Some((OsString::from_vec(base), index))
}

/// `1` to `1023` in decimal without leading zeros.
fn index_of(digits: &[u8]) -> Option<u16> {
    if digits.is_empty() || digits.len() > 4 || digits[0] == b'0' {
        return None;
    }
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u16 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    (n < MAX_SLOTS).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for base in [
            "backup.lock",
            "backup",
            "a.b.lock",
            ".lock",
            "x@1.lock",
            "é.lock",
        ] {
            let base = OsStr::new(base);
            for index in [0, 1, 9, 10, 1023] {
                let path = slot_path(Path::new(base), index);
                let name = path.file_name().unwrap();
                assert_eq!(slot_of(base, name), Some(index), "{base:?} {index}");
                if index > 0 {
                    assert_eq!(split_slot_name(name), Some((base.to_owned(), index)));
                }
            }
        }
    }

    #[test]
    fn refuses_what_no_slot_is_named() {
        let base = OsStr::new("backup.lock");
        for name in [
            "backup@0.lock",
            "backup@.lock",
            "backup@+1.lock",
            "backup@1x.lock",
            "backup@1",
            "backup@1.lock.lock",
            "backup1.lock",
            "backupx@1.lock",
        ] {
            assert_eq!(slot_of(base, OsStr::new(name)), None, "{name}");
        }
        assert_eq!(split_slot_name(OsStr::new("@1.lock")), None);
        assert_eq!(split_slot_name(OsStr::new("plain.lock")), None);
    }

    #[test]
    fn a_directory_path_keeps_its_file_name() {
        assert_eq!(slot_path(Path::new("dir/"), 1), Path::new("dir@1"));
        assert_eq!(slot_path(Path::new(".."), 1), Path::new(".."));
    }
}
