//! The board: a file every process of a run maps into memory, holding
//! counters, one slot per worker, and the log of acquisitions.
//!
//! Atomics in a `MAP_SHARED` mapping are shared between processes, and a
//! counter bumped by a process that is SIGKILLed a moment later survives it,
//! which pipes and exit codes would not give us.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

use anyhow::{Context, Result, bail};

/// Workers a run can have.
pub(crate) const MAX_SLOTS: usize = 256;
/// Acquisitions the log keeps; later ones are counted but not timed.
pub(crate) const LOG_CAPACITY: usize = 1 << 21;
const MAGIC: u64 = 0x6c6f_636b_746f_7274;

/// What a slot's holder is doing. Stored before the fact it describes is
/// over and after it has begun, so that a process found dead in `Holding`
/// certainly died holding the lock.
pub(crate) mod state {
    pub(crate) const IDLE: u32 = 0;
    pub(crate) const WAITING: u32 = 1;
    /// Set after the lock was taken and before anything else happens.
    pub(crate) const HOLDING: u32 = 2;
    /// Set before the release starts: a death now is not counted as a
    /// holder's death, since the lock may already be free.
    pub(crate) const RELEASING: u32 = 3;
    pub(crate) const FINISHED: u32 = 4;
}

/// One worker's public state.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) state: AtomicU32,
    /// Which lock the section holds.
    pub(crate) lock: AtomicU32,
    /// The process inside the section: a library worker, or the section
    /// process under `lockfile run`.
    pub(crate) pid: AtomicU32,
    /// `lockfile run` workers: the wrapper running now, and the round it runs.
    pub(crate) wrapper_pid: AtomicU32,
    pub(crate) wrapper_round: AtomicU32,
    /// The round of the section in progress (run workers).
    pub(crate) section_round: AtomicU32,
    /// Critical sections this slot completed: the one count of them. The
    /// run's total is the sum over the slots, not a second counter, which a
    /// SIGKILL landing between the two increments would leave one short.
    pub(crate) done: AtomicU64,
}

impl Slot {
    /// Shows this process inside its section on lock `k`. `HOLDING` comes
    /// last: a process found dead in it certainly held lock `k`.
    pub(crate) fn enter(&self, k: u32) {
        self.lock.store(k, SeqCst);
        self.pid.store(std::process::id(), SeqCst);
        self.state.store(state::HOLDING, SeqCst);
    }
}

/// One acquisition: when (CLOCK_MONOTONIC, ns) and which lock (+1, so that
/// zero means "never written": a process may die between the two stores).
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Acquisition {
    pub(crate) at_ns: AtomicU64,
    pub(crate) lock_plus_one: AtomicU64,
}

/// The run's configuration and counters. All zero in a fresh file, which is a
/// valid value for every field.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Board {
    magic: AtomicU64,
    pub(crate) stop: AtomicU32,
    pub(crate) locks: AtomicU32,
    pub(crate) rounds: AtomicU64,
    pub(crate) hold_us: AtomicU64,
    /// Self-test: library workers skip the lock, so the detector must see
    /// overlaps.
    pub(crate) sabotage: AtomicU32,
    /// Self-test of the fencing judgment: library lease workers log their
    /// tokens in reverse order, so the run must report inversions.
    pub(crate) sabotage_fencing: AtomicU32,

    pub(crate) overlaps: AtomicU64,
    /// Detector checks that found it held by a holder that was exiting.
    pub(crate) detector_waits: AtomicU64,
    pub(crate) record_mismatches: AtomicU64,
    pub(crate) unlinked_while_held: AtomicU64,
    pub(crate) errors: AtomicU64,
    /// Lease mode: fencing tokens not larger than the previous section's on
    /// the same name, as the detector's log orders them.
    pub(crate) fencing_inversions: AtomicU64,
    /// Lease mode: sections whose lease was lost by the time they ended (the
    /// holder outlived its deadline, or `lockfile run` stopped COMMAND).
    pub(crate) leases_lost: AtomicU64,

    pub(crate) reaped: AtomicU64,
    pub(crate) reap_passes: AtomicU64,
    pub(crate) inspections: AtomicU64,
    pub(crate) probe_contradictions: AtomicU64,
    pub(crate) stale_while_owner_alive: AtomicU64,
    pub(crate) stale_reports: AtomicU64,

    pub(crate) probe_attempts: AtomicU64,
    pub(crate) probe_failures: AtomicU64,
    /// The probe's phase counter: `seq % 4` is 0 free, 1 acquiring, 2 held,
    /// 3 releasing. See `watchers::probe`.
    pub(crate) probe_seq: AtomicU64,
    /// The low 64 bits of the probe's current token, valid in phase 2.
    pub(crate) probe_token: AtomicU64,

    pub(crate) acquisitions: AtomicU64,
    pub(crate) slots: [Slot; MAX_SLOTS],
    pub(crate) log: [Acquisition; LOG_CAPACITY],
}

impl Board {
    /// Creates the board file of a run in `dir` and maps it.
    pub(crate) fn create(
        dir: &Path,
        locks: u32,
        rounds: u64,
        hold_us: u64,
    ) -> Result<&'static Board> {
        let path = board_path(dir);
        let file = File::create_new(&path).with_context(|| format!("create {}", path.display()))?;
        // Sparse: the log's pages cost nothing until written.
        file.set_len(std::mem::size_of::<Board>() as u64)?;
        let board = map(&file, &path)?;
        board.locks.store(locks, SeqCst);
        board.rounds.store(rounds, SeqCst);
        board.hold_us.store(hold_us, SeqCst);
        board.magic.store(MAGIC, SeqCst);
        Ok(board)
    }

    /// Maps the board of the run in `dir`, created by the coordinator.
    pub(crate) fn open(dir: &Path) -> Result<&'static Board> {
        let path = board_path(dir);
        let file = File::options()
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| format!("open {}", path.display()))?;
        let board = map(&file, &path)?;
        if board.magic.load(SeqCst) != MAGIC {
            bail!("{} is not a torture board", path.display());
        }
        Ok(board)
    }

    pub(crate) fn slot(&self, index: usize) -> &Slot {
        &self.slots[index]
    }

    /// Critical sections completed by every slot.
    pub(crate) fn sections(&self) -> u64 {
        self.slots.iter().map(|s| s.done.load(SeqCst)).sum()
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(SeqCst) != 0
    }

    /// Logs an acquisition of `lock` at `at_ns`.
    pub(crate) fn log_acquisition(&self, lock: u32, at_ns: u64) {
        let i = self.acquisitions.fetch_add(1, SeqCst) as usize;
        if let Some(entry) = self.log.get(i) {
            entry.at_ns.store(at_ns, SeqCst);
            entry.lock_plus_one.store(u64::from(lock) + 1, SeqCst);
        }
    }

    /// Every fully written acquisition: (lock, time), sorted by time.
    pub(crate) fn acquisitions(&self) -> Vec<(u32, u64)> {
        let n = (self.acquisitions.load(SeqCst) as usize).min(LOG_CAPACITY);
        let mut all: Vec<(u32, u64)> = self.log[..n]
            .iter()
            .filter_map(|e| {
                let lock = e.lock_plus_one.load(SeqCst).checked_sub(1)?;
                let at = e.at_ns.load(SeqCst);
                (at != 0).then_some((lock as u32, at))
            })
            .collect();
        all.sort_by_key(|&(_, at)| at);
        all
    }

    /// Counts an unexpected error and says what it was.
    pub(crate) fn error(&self, what: impl std::fmt::Display) {
        self.errors.fetch_add(1, SeqCst);
        eprintln!(
            "lockfile-torture: ERROR [pid {}]: {what}",
            std::process::id()
        );
    }
}

fn board_path(dir: &Path) -> PathBuf {
    dir.join("board")
}

fn map(file: &File, path: &Path) -> Result<&'static Board> {
    use std::os::fd::AsRawFd;
    let len = std::mem::size_of::<Board>();
    let actual = file.metadata()?.len();
    if actual != len as u64 {
        bail!("{} holds {actual} bytes, not {len}", path.display());
    }
    // SAFETY: a fresh shared mapping of the whole file, which is exactly
    // `size_of::<Board>()` bytes long (checked above). Page alignment exceeds
    // `Board`'s alignment; every field is an atomic integer, for which any
    // bit pattern (and zero in particular) is valid, so the memory is a valid
    // `Board` however other processes wrote it. The mapping is never unmapped,
    // hence `'static`; closing the file afterwards does not end the mapping.
    unsafe {
        let ptr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("map {}", path.display()));
        }
        Ok(&*(ptr as *const Board))
    }
}

/// CLOCK_MONOTONIC in nanoseconds. The clock is system-wide, so times taken
/// in different processes compare.
pub(crate) fn now_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A small xorshift generator: the harness needs variety, not quality, and no
/// process should repeat another's choices.
#[derive(Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        let mixed = (seed ^ u64::from(std::process::id()).rotate_left(32) ^ now_ns())
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Rng(mixed | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What a worker process starts from: the run's board and layout, its own
/// slot, and the run's numbers of locks and of rounds.
pub(crate) struct Seat {
    pub(crate) board: &'static Board,
    pub(crate) layout: Layout,
    pub(crate) slot: &'static Slot,
    pub(crate) locks: u32,
    pub(crate) rounds: u64,
}

impl Seat {
    /// The seat of slot `index` in the run in `dir`.
    pub(crate) fn open(dir: &Path, index: usize) -> Result<Seat> {
        let board = Board::open(dir)?;
        Ok(Seat {
            board,
            layout: Layout {
                dir: dir.to_path_buf(),
            },
            slot: board.slot(index),
            locks: board.locks.load(SeqCst),
            rounds: board.rounds.load(SeqCst),
        })
    }
}

/// The layout of a run's directory.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) dir: PathBuf,
}

impl Layout {
    pub(crate) fn locks_dir(&self) -> PathBuf {
        self.dir.join("locks")
    }
    pub(crate) fn lock(&self, k: u32) -> PathBuf {
        self.locks_dir().join(format!("job-{k}.lock"))
    }
    /// The independent detector of lock `k`, outside the reaped directory.
    pub(crate) fn detector(&self, k: u32) -> PathBuf {
        self.dir.join("detectors").join(format!("job-{k}.detector"))
    }
    pub(crate) fn probe_dir(&self) -> PathBuf {
        self.dir.join("probe")
    }
    pub(crate) fn probe_lock(&self) -> PathBuf {
        self.probe_dir().join("probe.lock")
    }
    pub(crate) fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }
}
