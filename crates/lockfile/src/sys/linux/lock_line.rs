//! The one line format in which the kernel prints a lock, both in
//! `/proc/locks` and in the `lock:` lines of `/proc/PID/fdinfo/FD`. Its own
//! file, because the lock table and the walk over descriptors both parse it.

/// One lock as the kernel prints it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct LockLine {
    /// A `flock` lock; otherwise a POSIX (`fcntl`, `lockf`) or OFD lock,
    /// which does not conflict with `flock` on Linux but marks a file that
    /// another tool uses.
    pub(super) flock: bool,
    /// A shared lock (`READ`: `LOCK_SH`, or a POSIX read lock), held
    /// together with any other shared holders; otherwise exclusive (`WRITE`).
    pub(super) shared: bool,
    /// The PID that took the lock, translated into our namespace; zero or
    /// negative when that process is not visible from here.
    pub(super) pid: i64,
    /// The device of the filesystem (the superblock's, which on btrfs is not
    /// the one `stat` reports).
    pub(super) dev: u64,
    pub(super) ino: u64,
}

/// Parses `2: FLOCK  ADVISORY  WRITE 1831 fe:00:10010694 0 EOF`. Waiters
/// (`2: -> FLOCK ...`) hold nothing and are skipped.
pub(super) fn parse_lock_line(line: &str) -> Option<LockLine> {
    let mut fields = line.split_whitespace();
    fields.next()?; // "N:"
    let kind = fields.next()?;
    if kind == "->" {
        return None;
    }
    fields.next()?; // ADVISORY or MANDATORY
    // READ or WRITE (or, for a lease being broken, UNLCK).
    let shared = fields.next()? == "READ";
    let pid = fields.next()?.parse().ok()?;
    let mut dev_ino = fields.next()?.split(':');
    let major = u32::from_str_radix(dev_ino.next()?, 16).ok()?;
    let minor = u32::from_str_radix(dev_ino.next()?, 16).ok()?;
    let ino = dev_ino.next()?.parse().ok()?;
    Some(LockLine {
        flock: kind == "FLOCK",
        shared,
        pid,
        dev: rustix::fs::makedev(major, minor),
        ino,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_locks_lines() {
        assert_eq!(
            parse_lock_line("2: FLOCK  ADVISORY  WRITE 1831 fe:00:10010694 0 EOF"),
            Some(LockLine {
                flock: true,
                shared: false,
                pid: 1831,
                dev: rustix::fs::makedev(0xfe, 0),
                ino: 10010694
            })
        );
        assert_eq!(
            parse_lock_line("1: FLOCK  ADVISORY  READ -1 00:2d:77 0 EOF")
                .map(|l| (l.pid, l.shared)),
            Some((-1, true))
        );
        // The same line format in /proc/PID/fdinfo, after its "lock:" tag.
        assert_eq!(
            parse_lock_line("1: FLOCK  ADVISORY  READ  2207 00:2d:9 0 EOF").map(|l| l.shared),
            Some(true)
        );

        assert_eq!(
            parse_lock_line("2: -> FLOCK  ADVISORY  WRITE 1861 fe:00:10010694 0 EOF"),
            None
        );
        assert_eq!(
            parse_lock_line("1: POSIX  ADVISORY  WRITE 1836 fe:00:382078 0 EOF").map(|l| l.flock),
            Some(false)
        );
        assert_eq!(
            parse_lock_line("3: OFDLCK ADVISORY  READ  -1 00:05:1234 0 EOF").map(|l| l.flock),
            Some(false)
        );
        assert_eq!(parse_lock_line("garbage"), None);
        assert_eq!(parse_lock_line(""), None);
    }
}
