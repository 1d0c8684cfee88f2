//! How a lease name becomes an etcd key.

use crate::{Error, Result};

/// Every lease lives under this prefix: the name `nightly` is the key
/// `lockfile/locks/nightly`.
///
/// The prefix is fixed so that every program using this crate (and the
/// `lockfile` command) agrees on where a name lives, and so that
/// `etcdctl get --prefix lockfile/locks/` lists every lease. Grant access to
/// this prefix and [`HISTORY_PREFIX`], and nothing else, in etcd's
/// role-based access control.
pub const KEY_PREFIX: &str = "lockfile/locks/";

/// Every lease's run history lives under this prefix, in a key of its own:
/// the name `nightly` keeps its history in `lockfile/history/nightly`.
///
/// The lease's key goes with its lease (released, or expired); the history
/// key has no lease, so that how the last run ended outlives it and later
/// holders. Grant this prefix too in etcd's role-based access control: a
/// holder that may not write it still runs, and says that its history was
/// not written.
pub const HISTORY_PREFIX: &str = "lockfile/history/";

/// The longest name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 200;

/// The etcd key for a lease name.
///
/// A name is 1 to [`MAX_NAME_LEN`] ASCII letters, digits and `-` `_` `.` `:`
/// `@`, and is neither `.` nor `..`. Anything else is refused rather than
/// escaped, so that a name always reads the same in a key listing: `/` would
/// nest the key under another name's, and control characters, spaces and
/// non-ASCII text make keys that look alike but differ.
///
/// # Errors
///
/// [`Error::InvalidName`] saying what is wrong with the name.
///
/// # Examples
///
/// ```
/// assert_eq!(lockfile_etcd::key_for("nightly-backup")?, "lockfile/locks/nightly-backup");
/// assert!(lockfile_etcd::key_for("../etc").is_err());
/// assert!(lockfile_etcd::key_for("").is_err());
/// # Ok::<(), lockfile_etcd::Error>(())
/// ```
pub fn key_for(name: &str) -> Result<String> {
    let invalid = |reason: String| Error::InvalidName {
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() {
        return Err(invalid("the name is empty".to_owned()));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(invalid(format!(
            "the name is {} bytes long; the limit is {MAX_NAME_LEN}",
            name.len()
        )));
    }
    if name == "." || name == ".." {
        return Err(invalid(
            "`.` and `..` are path components, not names".to_owned(),
        ));
    }
    if let Some(c) = name.chars().find(|&c| !allowed(c)) {
        let what = match c {
            '/' => format!("it contains `/`, which would place the key outside `{KEY_PREFIX}NAME`"),
            c if c.is_control() || c.is_whitespace() => {
                format!("it contains the character {c:?}")
            }
            c => format!("it contains `{c}`"),
        };
        return Err(invalid(format!(
            "{what}; a name may hold only ASCII letters, digits and `-` `_` `.` `:` `@`"
        )));
    }
    Ok(format!("{KEY_PREFIX}{name}"))
}

/// The etcd key that keeps the run history of a lease name:
/// `lockfile/history/NAME` ([`HISTORY_PREFIX`]).
///
/// # Errors
///
/// [`Error::InvalidName`], as [`key_for`].
///
/// # Examples
///
/// ```
/// assert_eq!(lockfile_etcd::history_key_for("nightly")?, "lockfile/history/nightly");
/// # Ok::<(), lockfile_etcd::Error>(())
/// ```
pub fn history_key_for(name: &str) -> Result<String> {
    key_for(name)?;
    Ok(format!("{HISTORY_PREFIX}{name}"))
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@')
}

/// The lease name of a key under [`KEY_PREFIX`], if it is one.
pub(crate) fn name_of(key: &[u8]) -> Option<&str> {
    std::str::from_utf8(key.strip_prefix(KEY_PREFIX.as_bytes())?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        for name in [
            "a",
            "nightly-backup",
            "db.vacuum",
            "host:job@eu_1",
            "A.B-c_9",
        ] {
            assert_eq!(key_for(name).unwrap(), format!("lockfile/locks/{name}"));
        }
        assert!(key_for(&"x".repeat(MAX_NAME_LEN)).is_ok());
    }

    #[test]
    fn refuses_names_that_escape_or_confuse() {
        for (name, says) in [
            ("", "empty"),
            (".", "path components"),
            ("..", "path components"),
            ("../x", "outside `lockfile/locks/NAME`"),
            ("a/b", "outside"),
            ("/", "outside"),
            ("a b", "' '"),
            ("a\nb", "'\\n'"),
            ("a\0", "'\\0'"),
            ("café", "`é`"),
            ("a*", "`*`"),
        ] {
            let err = key_for(name).unwrap_err();
            assert!(
                matches!(err, Error::InvalidName { .. }),
                "{name:?}: {err:?}"
            );
            assert!(err.to_string().contains(says), "{name:?}: {err}");
        }
        let err = key_for(&"x".repeat(MAX_NAME_LEN + 1)).unwrap_err();
        assert!(err.to_string().contains("the limit is 200"), "{err}");
    }

    #[test]
    fn names_round_trip_through_keys() {
        let key = key_for("job-1").unwrap();
        assert_eq!(name_of(key.as_bytes()), Some("job-1"));
        assert_eq!(name_of(b"other/prefix"), None);
    }

    #[test]
    fn the_history_key_is_outside_the_lease_prefix_and_refuses_the_same_names() {
        let key = history_key_for("job-1").unwrap();
        assert_eq!(key, "lockfile/history/job-1");
        // Not a lease: listing the leases never shows a history.
        assert_eq!(name_of(key.as_bytes()), None);
        assert!(matches!(
            history_key_for("../x"),
            Err(Error::InvalidName { .. })
        ));
    }
}
