//! Where a lease lives in Redis: the keys and the channel of one name, all
//! under one prefix and one hash tag.
//!
//! For the name `NAME` and the prefix `P` (`lockfile:` by default):
//!
//! | key | type | expiry | what |
//! |---|---|---|---|
//! | `P{NAME}:lease` | hash: `token`, `owner` | the TTL | the lease and its owner record |
//! | `P{NAME}:token` | string | none | the last fencing token drawn |
//! | `P{NAME}:history` | hash: `version`, `doc` | none | the run history |
//! | `P{NAME}:released` | channel | | a release's message to waiters |
//!
//! The braces make `NAME` the hash tag of every key of the name, so that
//! a script that touches several of them stays legal if a cluster proxy
//! ever routes it. A lease name holds only ASCII letters, digits and
//! `-_.:@` ([`check_name`]), never a brace, so that the tag is the whole
//! name; `:` inside a name is harmless, since every key ends with its
//! fixed suffix after the closing brace: two names never share a key.

use lockfile_lease::name::check_name;

use crate::{Error, Operation, Result};

/// The longest prefix accepted, in bytes.
pub const MAX_PREFIX_LEN: usize = 100;

/// The keys and the channel of one lease name.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    pub(crate) lease: String,
    pub(crate) token: String,
    pub(crate) history: String,
    pub(crate) channel: String,
}

impl Keys {
    /// The keys of `name` under `prefix`.
    pub(crate) fn new(prefix: &str, name: &str) -> Result<Keys> {
        check_name(name)?;
        check_prefix(prefix).map_err(|reason| Error::InvalidOptions {
            op: Operation::Connect,
            key: format!("{prefix}{{{name}}}"),
            reason,
        })?;
        let key = |suffix: &str| format!("{prefix}{{{name}}}:{suffix}");
        Ok(Keys {
            lease: key("lease"),
            token: key("token"),
            history: key("history"),
            channel: key("released"),
        })
    }
}

/// Checks that `prefix` may prefix every key: printable ASCII without
/// braces, at most [`MAX_PREFIX_LEN`] bytes.
pub(crate) fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.len() > MAX_PREFIX_LEN {
        return Err(format!(
            "the key prefix is {} bytes long; the limit is {MAX_PREFIX_LEN}",
            prefix.len()
        ));
    }
    if let Some(c) = prefix
        .chars()
        .find(|c| !c.is_ascii_graphic() || matches!(c, '{' | '}'))
    {
        return Err(format!(
            "the key prefix holds {}: it may hold printable ASCII only, without `{{` or `}}` \
             (the lease name is each key's hash tag)",
            match c {
                '{' | '}' => format!("`{c}`"),
                c => format!("U+{:04X}", u32::from(c)),
            }
        ));
    }
    Ok(())
}

/// The name whose key of kind `suffix` is `key` under `prefix`, if it is
/// one of ours.
pub(crate) fn name_of<'k>(prefix: &str, key: &'k [u8], suffix: &str) -> Option<&'k str> {
    let key = std::str::from_utf8(key).ok()?;
    let name = key
        .strip_prefix(prefix)?
        .strip_prefix('{')?
        .strip_suffix(suffix)?
        .strip_suffix("}:")?;
    check_name(name).is_ok().then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_a_name_shares_its_hash_tag() {
        let keys = Keys::new("lockfile:", "nightly:eu@db-1").unwrap();
        assert_eq!(keys.lease, "lockfile:{nightly:eu@db-1}:lease");
        assert_eq!(keys.history, "lockfile:{nightly:eu@db-1}:history");
        assert_eq!(keys.token, "lockfile:{nightly:eu@db-1}:token");
        assert_eq!(keys.channel, "lockfile:{nightly:eu@db-1}:released");
        assert_eq!(
            name_of("lockfile:", keys.lease.as_bytes(), "lease"),
            Some("nightly:eu@db-1")
        );
        assert_eq!(name_of("lockfile:", keys.lease.as_bytes(), "history"), None);
        assert_eq!(name_of("lockfile:", b"lockfile:{a}b}:lease", "lease"), None);
    }

    #[test]
    fn names_and_prefixes_that_would_break_the_tag_are_refused() {
        assert!(Keys::new("lockfile:", "a{b}").is_err());
        assert!(Keys::new("lock{", "a").is_err());
        assert!(Keys::new("lock ", "a").is_err());
        assert!(Keys::new(&"p".repeat(101), "a").is_err());
        assert!(Keys::new("", "a").is_ok());
    }
}
