//! `LockOptions`: the builder for everything about taking a lock.

use std::time::Duration;

use crate::{HeartbeatSource, Release};

/// Options for taking a lock; finish with [`acquire`](LockOptions::acquire)
/// or [`try_acquire`](LockOptions::try_acquire).
///
/// ```
/// use std::time::Duration;
/// use lockfile::LockOptions;
///
/// # fn main() -> Result<(), lockfile::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("nightly.lock");
/// let guard = LockOptions::new()
///     .job("nightly-backup")
///     .timeout(Duration::from_secs(10))
///     .heartbeat_interval(Duration::from_secs(30))
///     .acquire(&path)?;
/// assert_eq!(guard.record().job.as_deref(), Some("nightly-backup"));
/// guard.release()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct LockOptions {
    pub(crate) job: Option<String>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) heartbeat_interval: Option<Duration>,
    pub(crate) mode: u32,
    pub(crate) remove_on_release: bool,
    pub(crate) record_optional: bool,
    pub(crate) shared: bool,
    pub(crate) heartbeat_source: Option<HeartbeatSource>,
    pub(crate) max_runtime: Option<Duration>,
    pub(crate) evict_after: Option<Duration>,
    pub(crate) kill_after: Option<Duration>,
    pub(crate) release: Release,
    pub(crate) claim_tick: Option<crate::TickClaim>,
    /// The slot an attempt on one slot's file writes into the record (set
    /// by [`acquire_slot`](LockOptions::acquire_slot) alone).
    pub(crate) slot: Option<crate::record::Slot>,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions::new()
    }
}

impl LockOptions {
    /// Options with every default.
    pub fn new() -> LockOptions {
        LockOptions {
            job: None,
            timeout: None,
            heartbeat_interval: None,
            mode: 0o644,
            remove_on_release: false,
            record_optional: false,
            shared: false,
            heartbeat_source: None,
            max_runtime: None,
            evict_after: None,
            kill_after: None,
            release: Release::Recorded,
            claim_tick: None,
            slot: None,
        }
    }

    /// The job name written into the owner record, shown by `inspect` and in
    /// contention errors.
    ///
    /// Default: none.
    pub fn job(&mut self, name: impl Into<String>) -> &mut Self {
        self.job = Some(name.into());
        self
    }

    /// The longest [`acquire`](LockOptions::acquire) waits before returning
    /// [`Error::Timeout`](crate::Error::Timeout).
    ///
    /// The wait is the kernel's: it wakes the moment the holder releases, not
    /// on the next tick of a polling loop, and uses no CPU meanwhile.
    ///
    /// Default: none, wait as long as it takes.
    pub fn timeout(&mut self, timeout: Duration) -> &mut Self {
        self.timeout = Some(timeout);
        self
    }

    /// How often the holder promises to call [`LockGuard::heartbeat`](crate::LockGuard::heartbeat).
    ///
    /// The promise is written into the owner record; `inspect` reports a
    /// `heartbeat_silent` finding when the heartbeat is older than three
    /// intervals (unless told another threshold). Nothing beats for you: a
    /// heartbeat proves that the work makes progress, which a background
    /// thread could not.
    ///
    /// Default: none, no promise, and no `heartbeat_silent` finding unless
    /// `inspect` is given a threshold.
    pub fn heartbeat_interval(&mut self, interval: Duration) -> &mut Self {
        self.heartbeat_interval = Some(interval);
        self
    }

    /// Who will keep the heartbeat, written into the record so that `inspect`
    /// can tell a beat that proves progress from one that only proves a
    /// wrapper lives.
    ///
    /// Default: none said (a library holder beats for itself).
    pub fn heartbeat_source(&mut self, source: HeartbeatSource) -> &mut Self {
        self.heartbeat_source = Some(source);
        self
    }

    /// The longest the holder means to hold the lock, written into the record
    /// so that `inspect` and `lockfile check` can tell a holder that is past
    /// its own limit. A promise: nothing enforces it here (`lockfile run
    /// --max-runtime` does).
    ///
    /// Default: none.
    pub fn max_runtime(&mut self, limit: Duration) -> &mut Self {
        self.max_runtime = Some(limit);
        self
    }

    /// Run at most once per tick of a schedule: once the lock is held,
    /// claim the tick the run's start belongs to, in the same write as the
    /// owner record, unless a finished run used it up
    /// ([`Error::TickUsed`](crate::Error::TickUsed)) or the lock came more than half a period after
    /// it ([`Error::TooLate`](crate::Error::TooLate)). Either way the lock is let go and nothing is
    /// written. A claim that never finished (its holder died) is recorded as
    /// an `owner_dead` run first. [`LockGuard::record_outcome`](crate::LockGuard::record_outcome) marks the
    /// run's end with its tick.
    ///
    /// A lock held without a record (see [`LockGuard::no_record`](crate::LockGuard::no_record)) claims
    /// nothing: check it before running.
    pub fn claim_tick(&mut self, claim: crate::TickClaim) -> &mut Self {
        self.claim_tick = Some(claim);
        self
    }

    /// **Kills another process**: when the lock is held by a holder whose
    /// heartbeat has been silent for longer than `silence`, and longer than
    /// the holder itself promised, stop the holder and take the lock.
    ///
    /// A holder is not hung before it breaks its own promise: its silence
    /// must pass its recorded
    /// [`heartbeat_interval`](LockOptions::heartbeat_interval), and for a
    /// `lockfile run --watchdog` holder ([`HeartbeatSource::Command`](crate::record::HeartbeatSource::Command)) that
    /// interval plus its recorded [`kill_after`](LockOptions::kill_after)
    /// (10 s when it recorded none, the command's default), so that its own
    /// watchdog always gets the first chance to act.
    ///
    /// It evicts only when all of these hold; otherwise it behaves as
    /// without this option, and the contention error says why it did not
    /// ([`Error::not_evicted`](crate::Error::not_evicted), an
    /// [`EvictionRefused`](crate::error::EvictionRefused)):
    ///
    /// - the holder promised a heartbeat: its record carries an interval and
    ///   the heartbeat is not a wrapper's ([`HeartbeatSource::Wrapper`](crate::record::HeartbeatSource::Wrapper) only
    ///   proves that the wrapper lives). A file without a record of ours
    ///   (flock(1), another tool), or a record without a promise, is never
    ///   evicted;
    /// - the recorded owner runs on this host, in this boot, in our PID
    ///   namespace or one we can resolve, and its recorded start time
    ///   matches the live process: never by PID alone;
    /// - every process that holds the kernel lock is identified (from the
    ///   kernel's lock table and every process's descriptors), and is the
    ///   owner, one of its descendants, or shares the lock the owner itself
    ///   holds;
    /// - every process to stop is of our uid (real and effective), or we
    ///   are root, and this process is not among them.
    ///
    /// What it stops, and nothing else: the verified owner; its
    /// descendants, found by their parent links (a process that called
    /// setsid is still one, unless it was reparented out of the owner's
    /// tree, which a `lockfile run` wrapper as a subreaper prevents); every
    /// process that holds the kernel lock, with its descendants; and what
    /// these fork while being stopped. Not the owner's parent, not a process that reused a PID the
    /// record names, not a process that only has the file open. Each is
    /// opened as a pidfd first, verified through `/proc`, and signalled only
    /// through its pidfd, so a PID reused at any point is never hit.
    ///
    /// How: SIGTERM then SIGCONT to all (a stopped process cannot act on
    /// SIGTERM); SIGKILL to the survivors after this process's own
    /// [`kill_after`](LockOptions::kill_after) (10 s by default), or at the
    /// end of the wait if that comes first; then a wait for the kernel lock
    /// to come free: within the [`timeout`](LockOptions::timeout) when one
    /// is given, and with [`try_acquire`](LockOptions::try_acquire) for up
    /// to kill-after + 1 s, the only case where `try_acquire` waits. While
    /// [`acquire`](LockOptions::acquire) waits, the holder is judged again at
    /// the moment its promise would be broken (and at least every minute).
    ///
    /// What it leaves: a `lock_evicted` event (pid, job, token, silent
    /// seconds) when it stops a holder; in the new record,
    /// [`OwnerRecord::evicted`](crate::OwnerRecord::evicted) (also [`LockGuard::evicted`](crate::LockGuard::evicted));
    /// and as the last run, the evicted run with outcome
    /// [`Outcome::Evicted`](crate::history::Outcome::Evicted), its failures in a row
    /// counted on.
    ///
    /// Silence is the lock file's modification time against the wall
    /// clock: a step of the clock forward by more than `silence` makes a
    /// healthy holder look hung. Judging a held lock reads the kernel's lock
    /// table and every process's descriptors under `/proc`. Only on Linux
    /// (pidfds, Linux 5.3 or later); elsewhere eviction is always refused,
    /// and the refusal says why.
    ///
    /// Default: none, never evict.
    ///
    /// [`HeartbeatSource::Command`]: crate::record::HeartbeatSource::Command
    /// [`HeartbeatSource::Wrapper`]: crate::record::HeartbeatSource::Wrapper
    /// [`OwnerRecord::evicted`]: crate::OwnerRecord::evicted
    pub fn evict_after(&mut self, silence: Duration) -> &mut Self {
        self.evict_after = Some(silence);
        self
    }

    /// The time between SIGTERM and SIGKILL when this process stops
    /// another: a holder it evicts ([`evict_after`](LockOptions::evict_after)).
    /// Also written into the record as a promise, so that an evictor waits
    /// this much longer for a holder that stops its own job (`lockfile run
    /// --watchdog` sets it to its `--kill-after`).
    ///
    /// Default: none recorded; an eviction waits 10 s.
    pub fn kill_after(&mut self, grace: Duration) -> &mut Self {
        self.kill_after = Some(grace);
        self
    }

    /// Whether the holder will be there to mark its release in the record,
    /// written into it so that `inspect` can tell a lock let go cleanly from
    /// one whose owner died holding it.
    ///
    /// [`Release::Unrecorded`](crate::record::Release::Unrecorded) is for a holder that hands the lock on and
    /// goes away before it ends: a process that execs its command in place
    /// (flock(1)'s `-F`), which then holds the lock until it exits, and
    /// marks nothing. Once nobody holds such a lock, `inspect` calls the file
    /// `free`, not `stale`, and raises no `owner_dead`; the price is that a
    /// holder that died cannot be told from one that finished. A guard that
    /// is released still marks its record released.
    ///
    /// Default: [`Release::Recorded`](crate::record::Release::Recorded).
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfile::{LockOptions, LockState};
    /// use lockfile::record::Release;
    /// # fn main() -> Result<(), lockfile::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("exec.lock");
    /// let guard = LockOptions::new().release(Release::Unrecorded).try_acquire(&path)?;
    /// assert_eq!(guard.record().release, Release::Unrecorded);
    /// guard.disown(); // as an exec would: nobody marks the release
    /// assert_eq!(lockfile::inspect(&path)?.state, LockState::Free);
    /// # Ok(())
    /// # }
    /// ```
    pub fn release(&mut self, release: Release) -> &mut Self {
        self.release = release;
        self
    }

    /// The permission bits of a newly created lock file, before the umask.
    /// An existing file keeps its mode.
    ///
    /// `flock` works on a descriptor opened for reading, so anyone who may
    /// read the file may also hold its lock, and so keep the job from running.
    /// Where other users must not be able to do that, use `0o600`, or keep
    /// lock files in a directory only the job's user can enter (as
    /// [`default_lock_dir`](crate::default_lock_dir) is). For a lock shared by
    /// several users, use `0o666` with a suitable umask: holders that do not
    /// own the file can still refresh its heartbeat.
    ///
    /// Default: `0o644`: anyone may read the owner record (and `inspect`).
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }

    /// Whether releasing also unlinks the lock file.
    ///
    /// Removal is safe here (it happens while the lock is held, and every
    /// acquirer re-checks the file's identity after locking), but it erases
    /// the last owner's record and the last success that
    /// [`LockGuard::record_success`](crate::LockGuard::record_success) wrote.
    ///
    /// The acquire then opens the file's directory too, and the release
    /// unlinks the file's name there, only while it still names the locked
    /// file: a directory on the path renamed or swapped for a symlink
    /// meanwhile cannot make it unlink another file.
    ///
    /// Default: false; the released record stays for diagnosis.
    pub fn remove_on_release(&mut self, remove: bool) -> &mut Self {
        self.remove_on_release = remove;
        self
    }

    /// Whether a file that cannot take an owner record is locked anyway,
    /// without one, rather than refused.
    ///
    /// Three kinds of file cannot take a record:
    ///
    /// - a file holding someone else's content (a script that locks itself,
    ///   as in flock(1)'s manual, a data file, another tool's lock or PID
    ///   file). Its bytes, size and times are left exactly as they are, and it
    ///   is locked through a read-only descriptor, so that it can still be
    ///   executed while locked;
    /// - a file this process may read but not write (its mode, a read-only
    ///   mount), which is locked read-only, as flock(1) locks every file;
    /// - a directory, as flock(1) locks one: it is opened read-only (never
    ///   created, and a symlink is not followed) and nothing in it is created
    ///   or changed.
    ///
    /// Exclusion is the same either way: the kernel lock does not care how
    /// the file was opened, and a directory's lock excludes flock(1) on that
    /// directory. What is lost is what the record gives: `inspect` names the
    /// holder from the kernel's table but has no job, token or heartbeat to
    /// show, and no success is recorded.
    /// [`LockGuard::no_record`](crate::LockGuard::no_record) says which case applies.
    ///
    /// Default: false. Such files fail with
    /// [`Error::ForeignContent`](crate::Error::ForeignContent) (nothing
    /// written), with the error that refused writing
    /// ([`Error::PermissionDenied`](crate::Error::PermissionDenied),
    /// [`Error::ReadOnlyFilesystem`](crate::Error::ReadOnlyFilesystem)), or,
    /// for a directory, with
    /// [`Error::NotRegularFile`](crate::Error::NotRegularFile).
    pub fn record_optional(&mut self, optional: bool) -> &mut Self {
        self.record_optional = optional;
        self
    }

    /// Whether the lock is shared (`LOCK_SH`, flock(1)'s `-s`) rather than
    /// exclusive.
    ///
    /// Any number of shared holders hold the lock together, and together they
    /// exclude every exclusive holder (ours, flock(1)'s `-x`, std's
    /// [`File::lock`](std::fs::File::lock)), which in turn excludes them.
    /// That is a readers-writer lock: readers of a resource take it shared, the
    /// one writer exclusive.
    ///
    /// A shared lock never writes a record: with many holders at once, there
    /// is no one owner to name. The file is opened read-only (created, empty,
    /// when missing) and left exactly as it is, whatever it holds, so
    /// [`record_optional`](Self::record_optional) is not needed for content
    /// that is not ours; it still decides whether a directory is locked. The
    /// guard says [`NoRecord::Shared`](crate::inspect::NoRecord::Shared), and `inspect`
    /// lists every holder from the kernel's table, with
    /// [`no_record`](crate::LockReport::no_record) `Shared` and no finding
    /// against an older record left in the file.
    ///
    /// A shared request against an exclusive holder, and an exclusive request
    /// against shared holders, fail with
    /// [`Error::Contended`](crate::Error::Contended) (or wait, as
    /// [`acquire`](Self::acquire) does). Shared holders have no record, so
    /// the error against them carries no owner.
    ///
    /// Default: false, an exclusive lock.
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfile::LockOptions;
    /// use lockfile::inspect::NoRecord;
    /// # fn main() -> Result<(), lockfile::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("cache.lock");
    /// let reader = LockOptions::new().shared(true).try_acquire(&path)?;
    /// let other_reader = LockOptions::new().shared(true).try_acquire(&path)?;
    /// assert_eq!(reader.no_record(), Some(NoRecord::Shared));
    /// // The writer waits for both readers.
    /// assert!(LockOptions::new().try_acquire(&path).unwrap_err().is_contended());
    /// # drop((reader, other_reader));
    /// # Ok(())
    /// # }
    /// ```
    pub fn shared(&mut self, shared: bool) -> &mut Self {
        self.shared = shared;
        self
    }

    pub(crate) fn lock_mode(&self) -> crate::sys::LockMode {
        if self.shared {
            crate::sys::LockMode::Shared
        } else {
            crate::sys::LockMode::Exclusive
        }
    }
}
