//! A path in the JSON documents (`inspect --json`, `reap --json`).
//!
//! A path is bytes, and JSON strings are Unicode: serde's own form fails
//! on a path that is not UTF-8, and anyone who may create a file in a
//! shared lock directory can name one so (`bad\xff.lock`), which would
//! make every report of the directory fail. So a path is written as:
//!
//! - `"path": "…"`, the path itself, when it is UTF-8 (every path of ours);
//! - otherwise `"path": "…"` with each byte that is not UTF-8 written as
//!   `\xHH` and each backslash as `\\`, and `"path_escaped": true`. Reading
//!   `\\` as a backslash and `\xHH` as the byte HH gives the path back,
//!   byte for byte.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Path, PathBuf};

use serde::ser::{Serialize, SerializeMap as _, Serializer};

/// `path` as the `path` (and `path_escaped`) entries of a JSON object;
/// flatten it into the object (`#[serde(flatten)]`), or serialise it alone
/// for an object of its own.
// Exhaustive on purpose: a wrapper to build around a path, with nothing
// else it could ever hold.
#[allow(clippy::exhaustive_structs)]
#[derive(Clone, Copy, Debug)]
pub struct JsonPath<'a>(pub &'a Path);

impl JsonPath<'_> {
    /// The string the `path` entry holds, and whether it is escaped.
    pub fn text(&self) -> (Cow<'_, str>, bool) {
        let bytes = self.0.as_os_str().as_bytes();
        if let Ok(text) = std::str::from_utf8(bytes) {
            return (Cow::Borrowed(text), false);
        }
        let mut out = String::with_capacity(bytes.len() + 8);
        for chunk in bytes.utf8_chunks() {
            out.push_str(&chunk.valid().replace('\\', "\\\\"));
            for b in chunk.invalid() {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
        (Cow::Owned(out), true)
    }
}

impl JsonPath<'_> {
    /// The path a `path` entry (and its `path_escaped`) names, byte for
    /// byte: `\\` is a backslash and `\xHH` the byte HH when `escaped`,
    /// and the text is the path itself when not.
    pub fn read(text: &str, escaped: bool) -> PathBuf {
        if !escaped {
            return PathBuf::from(text);
        }
        let mut out = Vec::with_capacity(text.len());
        let mut rest = text.as_bytes();
        while let Some((&b, tail)) = rest.split_first() {
            // Two hex digits, nothing else (`from_str_radix` takes a sign).
            let hex = |h: &u8, l: &u8| {
                let digit = |c: u8| char::from(c).to_digit(16);
                u8::try_from(digit(*h)? * 16 + digit(*l)?).ok()
            };
            match (b, tail) {
                (b'\\', [b'\\', tail @ ..]) => {
                    out.push(b'\\');
                    rest = tail;
                }
                (b'\\', [b'x', h, l, tail @ ..]) if hex(h, l).is_some() => {
                    out.extend(hex(h, l));
                    rest = tail;
                }
                _ => {
                    out.push(b);
                    rest = tail;
                }
            }
        }
        PathBuf::from(std::ffi::OsString::from_vec(out))
    }
}

impl Serialize for JsonPath<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (text, escaped) = self.text();
        let mut map = s.serialize_map(Some(1 + usize::from(escaped)))?;
        map.serialize_entry("path", &text)?;
        if escaped {
            map.serialize_entry("path_escaped", &true)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn utf8_paths_are_as_they_are_and_others_round_trip() {
        let plain = Path::new("/run/lock/a\\b é.lock");
        assert_eq!(
            serde_json::to_value(JsonPath(plain)).unwrap(),
            serde_json::json!({ "path": "/run/lock/a\\b é.lock" })
        );
        let raw: &[u8] = b"/tmp/bad\xffname\\x41\xc3.lock";
        let path = Path::new(OsStr::from_bytes(raw));
        let value = serde_json::to_value(JsonPath(path)).unwrap();
        assert_eq!(value["path_escaped"], true);
        let text = value["path"].as_str().unwrap();
        assert_eq!(text, "/tmp/bad\\xffname\\\\x41\\xc3.lock");
        assert_eq!(JsonPath::read(text, true).as_os_str().as_bytes(), raw);
        assert_eq!(
            JsonPath::read("/run/a\\xff", false),
            Path::new("/run/a\\xff")
        );
    }
}
