//! The kernel's lock table, `/proc/locks`: who took the `flock` lock on each
//! file, read once per snapshot without taking any lock, so that looking
//! never makes a concurrent `try_acquire` fail. Also the mount table, because
//! the lock table names files by their superblock's device.

use std::collections::HashMap;
use std::fs::File;
use std::io;

use super::lock_line::parse_lock_line;
use super::process_walk::{OpenFiles, holding_among, open_files};
use super::procfs::read_proc;
use crate::sys::{KernelHold, LockMode, process_identity};

/// A snapshot of the kernel's lock table, read from `/proc/locks` once and
/// shared by every file of a directory scan. Reading it takes no lock, so it
/// never makes a concurrent `try_acquire` fail.
#[derive(Debug, Default)]
pub(crate) struct KernelLocks {
    /// `flock` holders by (superblock device, inode).
    held: HashMap<(u64, u64), FlockHolders>,
    /// Holders of POSIX and OFD locks, by (superblock device, inode).
    others: HashMap<(u64, u64), Vec<i64>>,
    /// Every inode in the table: a file whose inode is not here is not
    /// locked, without asking which device the table would call it.
    inodes: std::collections::HashSet<u64>,
    /// The superblock device of each mount seen, from `/proc/self/mountinfo`.
    mounts: std::sync::OnceLock<HashMap<u64, u64>>,
    /// Whether the table leaves out locks whose taker is gone: it does in
    /// any PID namespace but the first (a container's), and shows them there
    /// only in the descriptors that still hold them.
    hides_orphaned_locks: bool,
    /// Who has which file open, read on first need: when the table hides
    /// orphaned locks, or names a taker that is gone.
    open_files: std::sync::OnceLock<OpenFiles>,
    /// Whether one `read(2)` returned the whole table, which is then what
    /// the kernel's lock list held at one instant (see [`read_lock_table`]).
    whole: bool,
}

/// Who took the `flock` lock on one file, and whether every one of them
/// holds it shared.
#[derive(Debug)]
struct FlockHolders {
    pids: Vec<i64>,
    shared: bool,
}

/// The inode of the first PID namespace, the kernel's `PROC_PID_INIT_INO`.
const INIT_PID_NAMESPACE: u64 = 0xEFFF_FFFC;

impl KernelLocks {
    /// # Errors
    ///
    /// When `/proc/locks` cannot be read (no `/proc` mounted).
    pub(crate) fn snapshot() -> io::Result<KernelLocks> {
        let mut locks = KernelLocks {
            hides_orphaned_locks: process_identity()
                .pid_namespace
                .is_some_and(|ns| ns != INIT_PID_NAMESPACE),
            ..KernelLocks::default()
        };
        let (table, whole) = read_lock_table()?;
        locks.add(&table);
        locks.whole = whole;
        if !whole {
            // Read in pieces, the table may have skipped a lock that was held
            // all along; it would have to be skipped twice to be missed.
            locks.add(&read_lock_table()?.0);
        }
        Ok(locks)
    }

    fn add(&mut self, table: &[u8]) {
        for lock in String::from_utf8_lossy(table)
            .lines()
            .filter_map(parse_lock_line)
        {
            self.inodes.insert(lock.ino);
            let key = (lock.dev, lock.ino);
            if !lock.flock {
                let pids = self.others.entry(key).or_default();
                if !pids.contains(&lock.pid) {
                    pids.push(lock.pid);
                }
                continue;
            }
            // A shared lock has a line per open file that holds it: every
            // one of them is a holder.
            let holders = self.held.entry(key).or_insert(FlockHolders {
                pids: Vec::new(),
                shared: true,
            });
            holders.shared &= lock.shared;
            if !holders.pids.contains(&lock.pid) {
                holders.pids.push(lock.pid);
            }
        }
    }

    /// Who holds the `flock` lock on `file` (whose `stat` says dev, ino).
    pub(crate) fn hold(&self, file: &File, dev: u64, ino: u64) -> KernelHold {
        let listed = self
            .inodes
            .contains(&ino)
            .then(|| self.held.get(&(self.table_device(file, dev), ino)))
            .flatten();
        match listed {
            Some(holders) => KernelHold::Held {
                pids: holders.pids.clone(),
                shared: holders.shared,
            },
            // In a container the kernel prints no line for a lock whose
            // taker exited while a child it started still holds it (the
            // taker's PID no longer translates into this namespace). Only
            // the descriptors tell; walking them costs a scan of every
            // process, done once per snapshot and short in a container.
            None if self.hides_orphaned_locks => {
                let open = self.open_files.get_or_init(open_files);
                let holders = holding_among(open, dev, ino);
                if holders.is_empty() {
                    KernelHold::Free
                } else {
                    KernelHold::Held {
                        shared: holders.iter().all(|(_, h)| h.mode == LockMode::Shared),
                        pids: holders.iter().map(|(pid, _)| i64::from(*pid)).collect(),
                    }
                }
            }
            None => KernelHold::Free,
        }
    }

    /// Whether the table was read in one piece, and so shows the lock list
    /// as it was at one instant: a lock it does not list was not held then.
    /// A table read in pieces may have skipped a lock that was held
    /// throughout, however unlikely after the second read.
    pub(crate) fn read_whole(&self) -> bool {
        self.whole
    }

    /// Every process with a descriptor holding the `flock` lock on
    /// (dev, ino), from one walk of every process's descriptors per
    /// snapshot, however many files ask.
    pub(crate) fn processes_holding(&self, dev: u64, ino: u64) -> Vec<u32> {
        let open = self.open_files.get_or_init(open_files);
        holding_among(open, dev, ino)
            .into_iter()
            .map(|(pid, _)| pid)
            .collect()
    }

    /// Who holds POSIX or OFD locks on `file`: another tool's locks.
    pub(crate) fn other_lockers(&self, file: &File, dev: u64, ino: u64) -> Vec<i64> {
        if !self.inodes.contains(&ino) {
            return Vec::new();
        }
        self.others
            .get(&(self.table_device(file, dev), ino))
            .cloned()
            .unwrap_or_default()
    }

    /// The device number the lock table prints for `file`: its filesystem's
    /// superblock device, from the mount it lives on. `stat` reports another
    /// number on some filesystems (btrfs gives every subvolume its own), and
    /// a lock compared against that one would never be found.
    fn table_device(&self, file: &File, stat_dev: u64) -> u64 {
        let mount = rustix::fs::statx(
            file,
            "",
            rustix::fs::AtFlags::EMPTY_PATH,
            rustix::fs::StatxFlags::MNT_ID,
        )
        .ok()
        .filter(|st| st.stx_mask & rustix::fs::StatxFlags::MNT_ID.bits() != 0)
        .map(|st| st.stx_mnt_id);
        let mounts = self.mounts.get_or_init(read_mounts);
        mount
            .and_then(|id| mounts.get(&id).copied())
            .unwrap_or(stat_dev)
    }
}

/// Whether the `flock` lock on `file` is held shared right now, from a fresh
/// read of the table: a contention error then names no record, since shared
/// holders keep none.
pub(crate) fn held_shared(file: &File) -> bool {
    let Ok(id) = super::identity_of(file) else {
        return false;
    };
    KernelLocks::snapshot().is_ok_and(|locks| {
        matches!(
            locks.hold(file, id.dev, id.ino),
            KernelHold::Held { shared: true, .. }
        )
    })
}

/// Mount id to superblock device, from `/proc/self/mountinfo`:
/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw`.
fn read_mounts() -> HashMap<u64, u64> {
    let Some(text) = read_proc("/proc/self/mountinfo") else {
        return HashMap::new();
    };
    String::from_utf8_lossy(&text)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let id = fields.next()?.parse().ok()?;
            fields.next()?;
            let (major, minor) = fields.next()?.split_once(':')?;
            Some((
                id,
                rustix::fs::makedev(major.parse().ok()?, minor.parse().ok()?),
            ))
        })
        .collect()
}

/// Reads `/proc/locks` whole; the flag says whether one `read(2)` got it all.
///
/// The kernel builds the table while holding the lock list's lock, but only
/// for one `read` call, which returns at most a page. The next call resumes
/// by entry index in a list that may have changed meanwhile: when a lock
/// listed earlier is released in between, every later entry moves up one
/// index and one is skipped. A table read in one call is consistent.
fn read_lock_table() -> io::Result<(Vec<u8>, bool)> {
    use std::io::Read;
    let mut file = File::open("/proc/locks")?;
    let mut table = Vec::new();
    // At least a page per read; std's read_to_end would start with 32 bytes.
    let mut chunk = [0u8; 16 * 1024];
    let mut reads = 0;
    loop {
        match file.read(&mut chunk) {
            Ok(0) => return Ok((table, reads <= 1)),
            Ok(n) => {
                table.extend_from_slice(&chunk[..n]);
                reads += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
