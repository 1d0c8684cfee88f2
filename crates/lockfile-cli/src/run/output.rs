//! `--output-on-failure`: COMMAND's output kept while it runs, and printed
//! only when the run fails, as chronic(1) does, so that cron mails nothing
//! for a run that succeeded.
//!
//! What one stream keeps ([`Kept`]) is bounded: at most `--output-limit`
//! bytes (16 MiB by default), its first half and its last half once the
//! stream is longer, with a line of ours where the middle was cut. The first
//! MiB stays in memory; past it, the stream goes to a private temporary file
//! (see [`private_file`]), which no name points to and which goes away with
//! its descriptor, so that a killed wrapper leaves nothing behind. Should no
//! such file be possible, the stream keeps what fits in memory, its head
//! and its tail, and the line says why.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// What a stream keeps in memory before it goes to a temporary file.
const IN_MEMORY: u64 = 1 << 20;

/// How much is copied at a time from the temporary file.
const CHUNK: usize = 64 * 1024;

/// Where the kept bytes are.
#[derive(Debug)]
enum Area {
    Memory(Vec<u8>),
    File(File),
}

/// The bytes one stream keeps: the head and the tail of what it carried.
///
/// Byte `p` of the stream sits at offset `p` of the area while `p` is in
/// the head; after it, the tail is a ring: byte `p` sits at
/// `head + (p - head) % tail`. While the stream is no longer than
/// `head + tail`, the area is the stream itself, in order.
#[derive(Debug)]
pub(crate) struct Kept {
    head: u64,
    tail: u64,
    /// Every byte the stream carried, kept or not.
    seen: u64,
    area: Area,
    /// What went wrong with the temporary file, said where the output is
    /// cut.
    trouble: Option<String>,
    /// What stays in memory before the area goes to a file in `dir`.
    in_memory: u64,
    dir: PathBuf,
}

impl Kept {
    /// A stream that keeps at most `limit` bytes.
    pub(crate) fn new(limit: u64) -> Kept {
        Kept::with_memory(limit, IN_MEMORY, temporary_dir())
    }

    fn with_memory(limit: u64, in_memory: u64, dir: PathBuf) -> Kept {
        let head = limit / 2;
        Kept {
            head,
            tail: limit - head,
            seen: 0,
            area: Area::Memory(Vec::new()),
            trouble: None,
            in_memory,
            dir,
        }
    }

    /// Adds what the stream carried next.
    pub(crate) fn push(&mut self, mut data: &[u8]) {
        let after = self.seen.saturating_add(data.len() as u64);
        if matches!(self.area, Area::Memory(_)) && after.min(self.head + self.tail) > self.in_memory
        {
            self.spill();
        }
        if self.seen < self.head {
            let n = data.len().min(usize_of(self.head - self.seen));
            self.write_at(self.seen, &data[..n]);
            self.seen += n as u64;
            data = &data[n..];
        }
        if data.is_empty() {
            return;
        }
        // Only the last `tail` bytes of what is left can stay.
        let skip = data.len().saturating_sub(usize_of(self.tail));
        self.seen += skip as u64;
        data = &data[skip..];
        while !data.is_empty() {
            let at = (self.seen - self.head) % self.tail;
            let n = data.len().min(usize_of(self.tail - at));
            self.write_at(self.head + at, &data[..n]);
            self.seen += n as u64;
            data = &data[n..];
        }
    }

    /// Moves the area to a temporary file. Should none be possible, keeps
    /// to memory, with a head and a tail that fit: the area holds bytes
    /// `0..seen` in order (no more than `in_memory`), which the smaller
    /// layout puts where they are already.
    fn spill(&mut self) {
        let Area::Memory(bytes) = &self.area else {
            return;
        };
        let moved = private_file(&self.dir).and_then(|(file, _)| {
            file.write_all_at(bytes, 0)?;
            Ok(file)
        });
        match moved {
            Ok(file) => self.area = Area::File(file),
            Err(e) => {
                let dir = crate::term::path(&self.dir);
                self.trouble = Some(format!("no temporary file in {dir}: {e}"));
                self.head = self.in_memory / 2;
                self.tail = self.in_memory - self.head;
            }
        }
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) {
        match &mut self.area {
            Area::Memory(bytes) => {
                let (start, end) = (usize_of(offset), usize_of(offset) + data.len());
                if bytes.len() < end {
                    bytes.resize(end, 0);
                }
                bytes[start..end].copy_from_slice(data);
            }
            Area::File(file) => {
                if let Err(e) = file.write_all_at(data, offset) {
                    // A full disk: what could not be written reads back as
                    // zeroes or old bytes; say so where the output is cut.
                    self.trouble
                        .get_or_insert_with(|| format!("the temporary file failed: {e}"));
                }
            }
        }
    }

    /// Whether the stream carried nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.seen == 0
    }

    /// Writes what was kept to `out`: the whole stream, or its head, a line
    /// saying how much was cut, and its tail.
    ///
    /// # Errors
    ///
    /// A failed write to `out`, or a failed read of the temporary file.
    pub(crate) fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        let kept = self.head + self.tail;
        if self.seen <= kept {
            return self.copy(0, self.seen, out);
        }
        self.copy(0, self.head, out)?;
        let cut = self.seen - kept;
        let newline = match &self.area {
            _ if self.head == 0 => "",
            Area::Memory(bytes) if bytes[usize_of(self.head) - 1] == b'\n' => "",
            Area::File(file) if last_byte(file, self.head)? == b'\n' => "",
            _ => "\n",
        };
        let mut line = format!(
            "lockfile: {cut} bytes of output cut here; the first {} and the last {} are kept",
            self.head, self.tail
        );
        if let Some(why) = &self.trouble {
            line.push_str(&format!(" ({why})"));
        }
        writeln!(out, "{newline}{}", crate::term::line(&line))?;
        if self.tail == 0 {
            return Ok(());
        }
        // The oldest byte kept, and where the ring holds it.
        let oldest = self.head + (self.seen - self.tail - self.head) % self.tail;
        self.copy(oldest, kept, out)?;
        self.copy(self.head, oldest, out)
    }

    /// Copies area offsets `start..end` to `out`.
    fn copy(&self, start: u64, end: u64, out: &mut dyn Write) -> io::Result<()> {
        match &self.area {
            Area::Memory(bytes) => out.write_all(&bytes[usize_of(start)..usize_of(end)]),
            Area::File(file) => {
                let mut buf = vec![0u8; CHUNK];
                let mut at = start;
                while at < end {
                    let n = usize_of(end - at).min(CHUNK);
                    file.read_exact_at(&mut buf[..n], at)?;
                    out.write_all(&buf[..n])?;
                    at += n as u64;
                }
                Ok(())
            }
        }
    }
}

fn last_byte(file: &File, end: u64) -> io::Result<u8> {
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, end - 1)?;
    Ok(byte[0])
}

/// An offset within the area, which is no larger than memory allows (in
/// memory) or than a file's offsets (in a file): a `usize` on the 64-bit
/// platforms this runs on.
fn usize_of(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// `$TMPDIR`, or `/tmp`.
fn temporary_dir() -> PathBuf {
    std::env::var_os("TMPDIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
}

/// A file for our eyes only, read and write, mode 0600, in `dir` (which
/// the user named, through `$TMPDIR`, and may be a symlink): made with
/// `O_TMPFILE`, it has no name at all; where the file system cannot (an old
/// kernel, some network file systems), it is created under a fresh random
/// name that must not exist (`O_EXCL` and `O_NOFOLLOW`, so that nothing
/// planted there, a symlink least of all, is ever followed or written), and
/// unlinked at once. Returns the file and the name it had, if any.
///
/// # Errors
///
/// Either way failed: the directory is missing, or not writable.
pub(crate) fn private_file(dir: &Path) -> io::Result<(File, Option<PathBuf>)> {
    let unnamed = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o600)
        .open(dir);
    match unnamed {
        Ok(file) => return Ok((file, None)),
        // EOPNOTSUPP: the file system has no O_TMPFILE; EISDIR: the kernel
        // does not know the flag and read it as O_DIRECTORY.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) => {}
        Err(e) => return Err(e),
    }
    let (file, path) = unlinked_file(dir)?;
    Ok((file, Some(path)))
}

/// [`private_file`] where `O_TMPFILE` is not to be had: a new file under a
/// random name, unlinked at once; returns the name it had.
fn unlinked_file(dir: &Path) -> io::Result<(File, PathBuf)> {
    let mut name = OsString::from(".lockfile-output-");
    name.push(uuid::Uuid::new_v4().simple().to_string());
    let path = dir.join(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(&path)?;
    // Ours, created by this open: no one else's name is removed.
    std::fs::remove_file(&path)?;
    Ok((file, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(k: &Kept) -> String {
        let mut out = Vec::new();
        k.write_to(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The stream `0123456789abcdef0123…` of `n` bytes.
    fn stream(n: usize) -> Vec<u8> {
        (0..n).map(|i| b"0123456789abcdef"[i % 16]).collect()
    }

    fn text(bytes: &[u8]) -> &str {
        std::str::from_utf8(bytes).unwrap()
    }

    fn keeping(limit: u64, in_memory: u64) -> Kept {
        Kept::with_memory(limit, in_memory, std::env::temp_dir())
    }

    fn pushed(mut k: Kept, data: &[u8], step: usize) -> Kept {
        for part in data.chunks(step) {
            k.push(part);
        }
        k
    }

    #[test]
    fn a_short_stream_is_kept_whole() {
        let data = stream(10);
        for step in [1, 3, 10] {
            let k = pushed(keeping(10, 4), &data, step);
            assert_eq!(kept(&k), "0123456789");
            assert!(!k.is_empty());
        }
        assert!(Kept::new(10).is_empty());
        assert_eq!(kept(&Kept::new(10)), "");
    }

    #[test]
    fn a_long_stream_keeps_its_head_and_its_tail_and_says_how_much_was_cut() {
        let data = stream(100);
        let want = format!(
            "{}\nlockfile: 90 bytes of output cut here; the first 5 and the last 5 are kept\n{}",
            text(&data[..5]),
            text(&data[95..])
        );
        // In memory, and gone to a file (past 4 bytes), in steps that wrap
        // the ring at every place.
        for in_memory in [1 << 20, 4] {
            for step in [1, 2, 3, 7, 100] {
                let k = pushed(keeping(10, in_memory), &data, step);
                assert_eq!(matches!(k.area, Area::File(_)), in_memory == 4);
                assert_eq!(kept(&k), want, "step {step}, memory {in_memory}");
            }
        }
    }

    #[test]
    fn a_head_that_ends_a_line_gets_no_second_newline() {
        for in_memory in [1 << 20, 1] {
            let mut k = keeping(4, in_memory);
            k.push(b"a\nlong line\nb\n");
            assert_eq!(
                kept(&k),
                "a\nlockfile: 10 bytes of output cut here; the first 2 and the last 2 are kept\nb\n"
            );
        }
    }

    #[test]
    fn a_limit_of_nothing_keeps_only_the_line() {
        let mut k = Kept::new(0);
        k.push(b"abc");
        assert_eq!(
            kept(&k),
            "lockfile: 3 bytes of output cut here; the first 0 and the last 0 are kept\n"
        );
    }

    #[test]
    fn without_a_temporary_file_the_stream_keeps_what_fits_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let data = stream(50);
        for step in [1, 50] {
            let k = pushed(Kept::with_memory(100, 8, missing.clone()), &data, step);
            assert!(matches!(k.area, Area::Memory(_)));
            let said = kept(&k);
            let (head, rest) = said.split_once('\n').unwrap();
            let (line, tail) = rest.split_once('\n').unwrap();
            assert_eq!(head, text(&data[..4]));
            assert_eq!(tail, text(&data[46..]));
            assert!(
                line.starts_with("lockfile: 42 bytes of output cut here; the first 4 and the last 4 are kept (no temporary file in ")
                    && line.contains("missing"),
                "{line}"
            );
        }
    }

    #[test]
    fn the_private_file_has_no_name_left_and_mode_0600() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let (file, name) = private_file(dir.path()).unwrap();
        let meta = file.metadata().unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(meta.nlink(), 0, "{name:?}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // Where there is no O_TMPFILE: the same, once unlinked.
        let (file, name) = unlinked_file(dir.path()).unwrap();
        let meta = file.metadata().unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(meta.nlink(), 0);
        assert!(name.starts_with(dir.path()) && !name.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
