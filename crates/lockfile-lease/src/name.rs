//! Which strings may name a lease, in every engine.

use crate::{Error, Result};

/// The longest lease name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 200;

/// Checks that `name` may name a lease.
///
/// A name is 1 to [`MAX_NAME_LEN`] ASCII letters, digits and `-` `_` `.` `:`
/// `@`, and is neither `.` nor `..`. Anything else is refused rather than
/// escaped, so that a name reads the same in every engine's listing (an etcd
/// key, a table row) and on every screen: `/` would nest one name under
/// another in a key space, and control characters, spaces and non-ASCII
/// text make names that look alike but differ.
///
/// # Errors
///
/// [`Error::InvalidName`] saying what is wrong with the name.
///
/// # Examples
///
/// ```
/// assert!(lockfile_lease::name::check_name("nightly-backup").is_ok());
/// assert!(lockfile_lease::name::check_name("../etc").is_err());
/// assert!(lockfile_lease::name::check_name("").is_err());
/// ```
pub fn check_name(name: &str) -> Result<()> {
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
            '/' => "it contains `/`, which would nest the name under another".to_owned(),
            // Shown as every message shows others' text (`\n`, `\e`,
            // `\x00`), with its code point for a space that looks like none.
            c if c.is_control() || c.is_whitespace() => format!(
                "it contains the character '{}' (U+{:04X})",
                lockfile::text::escape(c.encode_utf8(&mut [0; 4])),
                u32::from(c)
            ),
            c => format!("it contains `{c}`"),
        };
        return Err(invalid(format!(
            "{what}; a name may hold only ASCII letters, digits and `-` `_` `.` `:` `@`"
        )));
    }
    Ok(())
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@')
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
            assert!(check_name(name).is_ok(), "{name}");
        }
        assert!(check_name(&"x".repeat(MAX_NAME_LEN)).is_ok());
    }

    #[test]
    fn refuses_names_that_escape_or_confuse() {
        for (name, says) in [
            ("", "empty"),
            (".", "path components"),
            ("..", "path components"),
            ("../x", "nest the name"),
            ("a/b", "nest"),
            ("/", "nest"),
            ("a b", "' '"),
            ("a\nb", "'\\n'"),
            ("a\0", "'\\x00' (U+0000)"),
            ("a\x1b[2J", "'\\e' (U+001B)"),
            ("a\u{a0}b", "(U+00A0)"),
            ("café", "`é`"),
            ("a*", "`*`"),
        ] {
            let err = check_name(name).unwrap_err();
            assert!(
                matches!(err, Error::InvalidName { .. }),
                "{name:?}: {err:?}"
            );
            assert!(err.to_string().contains(says), "{name:?}: {err}");
        }
        let err = check_name(&"x".repeat(MAX_NAME_LEN + 1)).unwrap_err();
        assert!(err.to_string().contains("the limit is 200"), "{err}");
    }
}
