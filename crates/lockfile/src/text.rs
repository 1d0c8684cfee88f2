//! How the crate's messages show what others chose: a job name, a hostname,
//! a process's name, a path. Any of them can hold an escape sequence (which
//! would rewrite the terminal of whoever reads the message) or, for a path,
//! bytes that are not UTF-8 (which a lossy conversion turns into U+FFFD, a
//! name that is not the file's). So every message shows them escaped, once,
//! in one way that reads back to the bytes:
//!
//! - a backslash is `\\`; ESC, BEL, newline and tab are `\e`, `\a`, `\n`
//!   and `\t`;
//! - every other C0 control, DEL and each byte of a C1 control is `\xHH`;
//! - each byte of a path that is not UTF-8 is `\xHH` too;
//! - everything else (printable ASCII, other Unicode) is left as it is.
//!
//! Names are quoted (`job "nightly"`), and a quote inside them is `\"`, so
//! that a name cannot end its quotes early; paths stand in backticks as
//! they are. The `lockfile` command prints its own lines the same way.
//!
//! ```
//! use std::ffi::OsStr;
//! use std::os::unix::ffi::OsStrExt as _;
//! use std::path::Path;
//!
//! assert_eq!(lockfile::text::escape("j\x1b[8m\x7f"), "j\\e[8m\\x7f");
//! assert_eq!(lockfile::text::quoted("a \"b\"").to_string(), "\"a \\\"b\\\"\"");
//! let path = Path::new(OsStr::from_bytes(b"/run/bad\xffname.lock"));
//! assert_eq!(lockfile::text::path(path).to_string(), "/run/bad\\xffname.lock");
//! ```

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

/// `text`, escaped as the module says (borrowed when nothing needs it).
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let _ = write_escaped(&mut out, text, None);
    Cow::Owned(out)
}

/// `bytes` (a file name, as the kernel holds it), escaped as the module
/// says: valid UTF-8 as [`escape`], every other byte as `\xHH`.
pub fn escape_bytes(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => escape(text),
        Err(_) => {
            let mut out = String::with_capacity(bytes.len() + 8);
            let _ = write_escaped_bytes(&mut out, bytes, None);
            Cow::Owned(out)
        }
    }
}

/// `text` in double quotes, escaped as the module says, with a quote inside
/// as `\"`: how messages name a job or a host.
pub fn quoted(text: &str) -> Quoted<'_> {
    Quoted(text.as_bytes())
}

/// [`quoted`] for bytes that may not be UTF-8 (a preview of a file's
/// content).
pub fn quoted_bytes(bytes: &[u8]) -> Quoted<'_> {
    Quoted(bytes)
}

/// `path`'s bytes, escaped as the module says: how messages name a file.
pub fn path(path: &Path) -> ShownPath<'_> {
    ShownPath(path)
}

/// A name in double quotes, escaped: see [`quoted`].
#[derive(Clone, Copy, Debug)]
pub struct Quoted<'a>(&'a [u8]);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        write_escaped_bytes(f, self.0, Some('"'))?;
        f.write_char('"')
    }
}

/// A path, escaped from its bytes: see [`path`].
#[derive(Clone, Copy, Debug)]
pub struct ShownPath<'a>(&'a Path);

impl fmt::Display for ShownPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_escaped_bytes(f, self.0.as_os_str().as_bytes(), None)
    }
}

/// Whether `c` is written escaped: a backslash, a C0 control, DEL or a C1
/// control.
fn needs_escape(c: char) -> bool {
    c == '\\' || c.is_control()
}

/// Writes `bytes` escaped; `quote`, when given, as `\"` too.
fn write_escaped_bytes(
    out: &mut impl fmt::Write,
    bytes: &[u8],
    quote: Option<char>,
) -> fmt::Result {
    for chunk in bytes.utf8_chunks() {
        write_escaped(out, chunk.valid(), quote)?;
        for b in chunk.invalid() {
            write!(out, "\\x{b:02x}")?;
        }
    }
    Ok(())
}

/// Writes `text` escaped; `quote`, when given, as `\"` too.
fn write_escaped(out: &mut impl fmt::Write, text: &str, quote: Option<char>) -> fmt::Result {
    for c in text.chars() {
        match c {
            '\\' => out.write_str("\\\\")?,
            '\x1b' => out.write_str("\\e")?,
            '\x07' => out.write_str("\\a")?,
            '\n' => out.write_str("\\n")?,
            '\t' => out.write_str("\\t")?,
            c if Some(c) == quote => {
                out.write_char('\\')?;
                out.write_char(c)?;
            }
            c if needs_escape(c) => {
                let mut bytes = [0; 4];
                for b in c.encode_utf8(&mut bytes).bytes() {
                    write!(out, "\\x{b:02x}")?;
                }
            }
            c => out.write_char(c)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn controls_and_invalid_bytes_are_escaped_and_the_rest_is_left_alone() {
        assert!(matches!(escape("plain höst-1 ✓"), Cow::Borrowed(_)));
        assert_eq!(
            escape("vm\x1b]0;PWNED\x07\x1b[2J"),
            "vm\\e]0;PWNED\\a\\e[2J"
        );
        assert_eq!(escape("a\\b\nc\td\r"), "a\\\\b\\nc\\td\\x0d");
        assert_eq!(escape("\x00\x7f\u{9b}"), "\\x00\\x7f\\xc2\\x9b");
        assert_eq!(escape_bytes(b"/tmp/x\xff\x1b.lock"), "/tmp/x\\xff\\e.lock");
        assert!(matches!(escape_bytes(b"/tmp/x.lock"), Cow::Borrowed(_)));
        let p = Path::new(OsStr::from_bytes(b"/tmp/bad\xff\\name.lock"));
        assert_eq!(path(p).to_string(), "/tmp/bad\\xff\\\\name.lock");
    }

    #[test]
    fn a_quoted_name_cannot_end_its_quotes_early() {
        assert_eq!(quoted("nightly").to_string(), "\"nightly\"");
        assert_eq!(
            quoted("j\x1b[8m\", job \"x").to_string(),
            "\"j\\e[8m\\\", job \\\"x\""
        );
        assert_eq!(quoted_bytes(b"#!\xff\"").to_string(), "\"#!\\xff\\\"\"");
    }
}
