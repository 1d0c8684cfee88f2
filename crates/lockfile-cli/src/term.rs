//! Text for a person's terminal. What we print comes partly from others: a
//! record's hostname and job, a path, a process's name (which any process
//! sets for itself with `prctl(PR_SET_NAME)`). Printed raw, an escape
//! sequence in any of them rewrites the terminal of the admin who reads it
//! (its title, its screen, what a later paste runs). So every human-readable
//! line is escaped on its way out: a backslash becomes `\\`; ESC, BEL,
//! newline and tab become `\e`, `\a`, `\n` and `\t`; every other C0 byte,
//! DEL and every byte of a C1 code point becomes `\xHH`. Machine output
//! (JSON, the exposition format) has escaping rules of its own and is left
//! alone.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text`, escaped as the module says.
pub(crate) fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\x1b' => out.push_str("\\e"),
            '\x07' => out.push_str("\\a"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => {
                let mut bytes = [0; 4];
                for b in c.encode_utf8(&mut bytes).bytes() {
                    let _ = write!(out, "\\x{b:02x}");
                }
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether `c` is printed escaped: a backslash, a C0 control, DEL or a C1
/// control.
fn needs_escape(c: char) -> bool {
    c == '\\' || c.is_control()
}

/// `bytes` (a path, as the kernel holds it), escaped: valid UTF-8 as
/// [`escape`] says, and every byte of invalid UTF-8 as `\xHH`.
pub(crate) fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&escape(chunk.valid()));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// A path for a person: [`escape_bytes`] of its bytes.
pub(crate) fn path(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    escape_bytes(path.as_os_str().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_the_rest_is_left_alone() {
        assert!(matches!(escape("plain höst-1 ✓"), Cow::Borrowed(_)));
        assert_eq!(
            escape("vm\x1b]0;PWNED\x07\x1b[2J"),
            "vm\\e]0;PWNED\\a\\e[2J"
        );
        assert_eq!(escape("a\\b\nc\td"), "a\\\\b\\nc\\td");
        assert_eq!(escape("\x00\x7f\u{9b}"), "\\x00\\x7f\\xc2\\x9b");
        assert_eq!(escape_bytes(b"/tmp/x\xff\x1b.lock"), "/tmp/x\\xff\\e.lock");
    }
}
