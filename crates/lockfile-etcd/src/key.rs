//! How a lease name becomes an etcd key.

#[cfg(test)]
use crate::Error;
use crate::Result;

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

/// The etcd key for a lease name: [`KEY_PREFIX`] and the name.
///
/// The name must pass [`check_name`](lockfile_lease::name::check_name): 1 to
/// [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) ASCII letters, digits and `-` `_` `.` `:` `@`.
///
/// # Errors
///
/// [`Error::InvalidName`](crate::Error::InvalidName) saying what is wrong with the name.
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
    lockfile_lease::name::check_name(name)?;
    Ok(format!("{KEY_PREFIX}{name}"))
}

/// The etcd key that keeps the run history of a lease name:
/// `lockfile/history/NAME` ([`HISTORY_PREFIX`]).
///
/// # Errors
///
/// [`Error::InvalidName`](crate::Error::InvalidName), as [`key_for`].
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

/// The lease name of a key under [`KEY_PREFIX`], if it is one.
pub(crate) fn name_of(key: &[u8]) -> Option<&str> {
    std::str::from_utf8(key.strip_prefix(KEY_PREFIX.as_bytes())?).ok()
}

/// The lease name of a key under [`HISTORY_PREFIX`], if it is one.
pub(crate) fn history_name_of(key: &[u8]) -> Option<&str> {
    std::str::from_utf8(key.strip_prefix(HISTORY_PREFIX.as_bytes())?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_the_prefix_and_a_checked_name() {
        assert_eq!(key_for("a.b-c").unwrap(), "lockfile/locks/a.b-c");
        assert!(matches!(key_for("../x"), Err(Error::InvalidName { .. })));
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
