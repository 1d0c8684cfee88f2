//! Text for a person's terminal. What we print comes partly from others: a
//! record's hostname and job, a path, a process's name (which any process
//! sets for itself with `prctl(PR_SET_NAME)`), a server's message. Printed
//! raw, an escape sequence in any of them rewrites the terminal of the admin
//! who reads it (its title, its screen, what a later paste runs); a path
//! converted lossily names no file. So each such string is escaped once,
//! where it is put into a line, the way the library's messages do
//! (`lockfile::text`): a backslash becomes `\\`; ESC, BEL, newline and tab
//! become `\e`, `\a`, `\n` and `\t`; every other C0 byte, DEL, every byte
//! of a C1 code point and every byte of a path that is not UTF-8 becomes
//! `\xHH`. Then every whole line goes through [`line`], which escapes the
//! control characters that are still in it (a message whose parts nobody
//! escaped, an OS's or a server's) and nothing else, so that what was
//! escaped is never escaped twice. Machine output (JSON, the exposition
//! format) has escaping rules of its own and is left alone.

use std::borrow::Cow;

/// A string from others (a job name, a host, a lease name), escaped for a
/// line: `lockfile::text::escape`.
pub(crate) fn escape(text: &str) -> Cow<'_, str> {
    lockfile::text::escape(text)
}

/// A path for a person: its bytes escaped, `lockfile::text::path`.
pub(crate) fn path(path: &std::path::Path) -> String {
    lockfile::text::path(path).to_string()
}

/// A whole line, its parts already escaped where they were put in: the
/// control characters left in it are escaped as [`escape`] escapes them,
/// and nothing else is touched (not a backslash, which is either an escape
/// already made or harmless), so no raw control reaches the terminal and
/// nothing is escaped twice.
pub(crate) fn line(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut bytes = [0; 4];
    for c in text.chars() {
        if c.is_control() {
            out.push_str(&lockfile::text::escape(c.encode_utf8(&mut bytes)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_escapes_its_controls_and_leaves_what_was_escaped() {
        assert!(matches!(line("plain höst-1 ✓ a\\b"), Cow::Borrowed(_)));
        assert_eq!(
            line("vm\x1b]0;PWNED\x07\x1b[2J\r\n"),
            "vm\\e]0;PWNED\\a\\e[2J\\x0d\\n"
        );
        assert_eq!(line("\x00\x7f\u{9b}"), "\\x00\\x7f\\xc2\\x9b");
        // Once escaped, a line is left as it is.
        let once = escape("j\x1b[8m\\");
        assert_eq!(once, "j\\e[8m\\\\");
        assert_eq!(line(&once), once);
    }
}
