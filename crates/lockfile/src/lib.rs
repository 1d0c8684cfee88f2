//! Run-once locks for cron jobs, pipelines and services that stay trustworthy
//! when their holder dies without cleaning up.
//!
//! ```
//! # fn main() -> Result<(), lockfile::Error> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("nightly.lock");
//! match lockfile::LockGuard::try_acquire(&path) {
//!     Ok(mut guard) => {
//!         for batch in 0..3 {
//!             // ... work on the batch ...
//!             guard.heartbeat()?; // "still working"
//!         }
//!         guard.record_success()?; // for the silence alarm
//!         guard.release()?;
//!     }
//!     // Someone else holds it; the error names them (pid, host, job, since).
//!     Err(e) if e.is_contended() => eprintln!("skipped: {e}"),
//!     Err(e) => return Err(e),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The package is `lockfile-core` (on crates.io, `lockfile` is another
//! project's crate), imported as `lockfile`: `lockfile-core = "0.1"` in
//! `Cargo.toml`.
//!
//! With the `tokio` feature (off by default), a job in async code waits
//! for its lock without blocking a runtime's thread (see `waiter`: one
//! thread waits for every such waiter of the process):
//!
//! ```
//! # #[cfg(feature = "tokio")]
//! # #[tokio::main]
//! # async fn main() -> Result<(), lockfile::Error> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("nightly.lock");
//! let mut guard = lockfile::LockOptions::new()
//!     .job("nightly")
//!     .timeout(std::time::Duration::from_secs(60))
//!     .acquire_async(&path)
//!     .await?; // Error::Timeout names the holder, as `acquire`'s does
//! guard.heartbeat()?; // a few syscalls, fine from async code
//! guard.record_success()?;
//! guard.release()?;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "tokio"))]
//! # fn main() {}
//! ```
//!
//! # The kernel is the authority
//!
//! A lock made of "the file exists", or of "the PID in the file is alive",
//! wedges silently the first time its holder dies without cleaning up: a
//! SIGKILL, an OOM kill, a reboot, a recreated container. Every later run sees
//! the lock and politely exits.
//!
//! This crate takes an advisory `flock(2)` lock on an open file instead. The
//! kernel owns that lock on behalf of the open file and drops it when the last
//! descriptor closes, which happens when the process dies for any reason.
//! The next run acquires at once; nothing has to be cleaned up first. The lock
//! excludes, and is excluded by, util-linux `flock(1)` and std's
//! [`File::lock`](std::fs::File::lock) on the same file. It may also be taken
//! shared ([`LockOptions::shared`], flock(1)'s `-s`): shared holders hold it
//! together, and exclude every exclusive holder, in both directions.
//!
//! Advisory means the lock binds only those who take it: it does not stop
//! anyone from reading, writing or deleting the file. It is one lock per open
//! file description: two opens of one path conflict even within a process,
//! while a descriptor inherited across `fork`/`exec` shares the lock.
//!
//! # Why stale files exist, and why they are harmless here
//!
//! The lock file stays on disk after the lock is released, and after its
//! holder died. The file is not the lock; it is a notice board. A file left by a
//! dead holder is litter: `inspect` reports it `stale` (or `debris` when its
//! content is not a record), the next `acquire` takes it over, and [`reap()`]
//! removes it safely if you like a tidy directory.
//!
//! Deleting lock files is where other libraries broke exclusion: a process
//! waiting on the old inode wakes up holding a lock on a file that no longer
//! has a name, while a newcomer locks a fresh file at the same path. Here a
//! file is only unlinked by someone holding its lock, and every acquirer
//! checks after locking that the file it locked still has its name, retrying
//! when it lost it.
//!
//! # The protocol
//!
//! Every step below is one or two system calls; the numbers are referred to
//! in the code.
//!
//! 1. **Open** the path with `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC`,
//!    read-write and creating it when missing; read-only for a shared lock,
//!    a file that is not ours or may not be written, and a directory (never
//!    created). A symlink is never followed (not even one named `link/`).
//! 2. **Lock** the open file with `flock(LOCK_EX)` (`LOCK_SH` for a shared
//!    lock): at once, until a deadline (a per-thread timer interrupts the
//!    wait), or for as long as it takes. Before a wait, `fstat` refuses
//!    anything but a regular file (or an allowed directory), so that a FIFO
//!    or a device is never waited on, and a planted file (see the
//!    [threat model](#threat-model)), whose owner could hold it forever.
//! 3. **Check the identity**: `fstat` of the locked descriptor refuses what
//!    is not a regular file, or is planted, and its link count says whether the file still
//!    has a name. Unlinking it (reap, a release that removes) or renaming
//!    another file over it leaves it none: close and start again at step 1.
//!    A file with more than one name (hard links, a directory) may have lost
//!    just this one, so its descriptor is compared with a `stat` of the
//!    path, (device, inode).
//! 4. **Read** the first bytes and classify them ([`Content`](crate::inspect::Content)); a directory
//!    and a shared lock skip to the end here, writing nothing. Content that
//!    is not ours is never written: the acquire fails, or (with
//!    [`LockOptions::record_optional`]) unlocks, reopens read-only and starts
//!    again at step 1 without writing anything.
//! 5. **Write the record** over the previous one with one `pwrite` at offset
//!    0, carrying its history along (the last success, the last run), and cut
//!    off a longer previous content.
//! 6. **Beat**: `futimens` sets the file's modification time.
//! 7. **Release**: one `pwrite` turns the record's `released` flag to `true`;
//!    with [`LockOptions::remove_on_release`], unlink the file's name in the
//!    directory pinned when the file was opened (never the path again, which
//!    a swapped directory may lead elsewhere by then), but only if that name
//!    still names our inode; then `flock(LOCK_UN)` and close. (Dying instead
//!    skips all of it, and the kernel releases the lock anyway.)
//! 8. **Reap** a dead owner's file: open the directory once, and do all that
//!    follows through that descriptor (`openat`, `unlinkat`, no symlink
//!    followed). Inspect the file without locking, then take its lock with a
//!    non-blocking `flock`, re-check under the lock that its name still names
//!    that inode with the same size, modification time and content and that
//!    no other tool holds a POSIX lock on it, look at the name once more,
//!    unlink, close.
//!
//! A descriptor lock ([`LockOptions::try_acquire_descriptor`]) skips steps
//! 1 and 3 (it has no path of its own) and writes its record through a fresh
//! open file of `/proc/self/fd/N`, so that the shell's offset, `O_APPEND` and
//! lock are left alone.
//!
//! **Why exclusion holds.** A guard claims "I hold the lock on the inode that
//! the path names". Two guards for one path would need two inodes named by
//! the path at their step 3, so the first one's inode must have lost the name
//! in between: been unlinked, or had another file renamed over it. Either
//! leaves it without a name (link count 0) unless it has others, and then
//! the path is compared. Only steps 7 and 8 unlink, and both do it while holding the
//! lock on the inode they unlink, which the first guard still holds: neither
//! can run. A process that was waiting on an inode that got unlinked wakes up
//! at step 3, sees the mismatch and starts again on the new file. So the
//! claim can only break if something outside this protocol renames or
//! deletes the file while it is held (an operator's `mv` or `rm`): the
//! kernel lock then still excludes everyone who opened the old inode, but a
//! newcomer locks the new file. A rename of the file itself (`mv job.lock
//! old.lock`) keeps its link count at 1, so a process that was waiting on it
//! wakes up holding what is now `old.lock`. A `stat` of the path would catch
//! that waiter, but not the holder, who already shares the path with every
//! newcomer: such a rename breaks exclusion whatever a waiter checks, so
//! step 3 does not pay a syscall on every acquire for it.
//!
//! **Who may be evicted.** With [`LockOptions::evict_after`], an acquire may
//! stop a hung holder (see [A hung holder](#a-hung-holder)), but only under
//! one rule: every process that holds the kernel lock is the recorded owner,
//! verified by PID, start time and boot id through a pidfd, or one of its
//! descendants; every one of them runs as the owner's uid, real and
//! effective; that uid is the caller's, or, when the caller is root, the
//! lock file's owner (`st_uid`). A process that merely shares the owner's
//! open file (a descriptor passed over a socket, or kept by a daemon that
//! left the owner's tree) fails the rule: the record is written by whoever
//! can write the file, and must never aim a signal at someone else's
//! process. When the rule fails nothing is signalled, and the acquire
//! behaves as without eviction, saying why ([`EvictionRefused`](crate::error::EvictionRefused)).
//!
//! **Why reap never unlinks a held lock.** It unlinks only in step 8, while
//! it holds the file's lock itself; a holder would have made its non-blocking
//! `flock` fail, and a holder who comes after the unlink is at step 3 of a
//! fresh file.
//!
//! # What the owner record is for
//!
//! Right after taking the lock, the holder writes an [`OwnerRecord`] into the
//! file: a format version, pid, hostname, boot id, PID namespace, process
//! start time, a random per-run token, the job name, when it was acquired and
//! the heartbeat it promised. The record is diagnostics, never enforcement.
//! It answers "who holds this, since when, and is it still beating"
//! ([`inspect()`]), names the holder in contention errors, and lets `inspect`
//! judge a dead owner by boot id and start time rather than by a PID, which
//! may have been reused, may be 1 in every container, and means nothing on
//! another host. [`LockGuard::heartbeat`] refreshes the file's modification
//! time; release marks the record released rather than erasing it, so the
//! last owner stays visible.
//!
//! # A hung holder
//!
//! The kernel frees the lock of a dead holder, but a live, hung one keeps it
//! for as long as it hangs. A holder that promised a heartbeat
//! ([`LockOptions::heartbeat_interval`]) and stopped beating is reported
//! `heartbeat_silent` by `inspect`; with [`LockOptions::evict_after`] a
//! contender **kills it** and takes the lock, but only a holder that broke
//! its own promise, is identified beyond doubt (host, boot, PID namespace,
//! start time, every process holding the lock), and is ours to signal. The
//! processes are opened as pidfds and verified before any signal, so a
//! reused PID is never hit. Anything less, and the acquire behaves as
//! without the option, saying why ([`EvictionRefused`](crate::error::EvictionRefused)).
//!
//! # Files that are not ours
//!
//! A record is written only into a file that is empty or already holds a
//! record of ours (or a torn one: cut short, or zero-filled by a crash), and
//! only when the whole file is so: a file longer than the longest record
//! (64 KiB, by `fstat`) is someone else's whatever it begins with, such as a
//! disk image that starts with zeros. Records never grow that long; a job
//! name that would make one is refused ([`Error::RecordTooLarge`]). Any
//! other content ([`Content::Foreign`](crate::inspect::Content::Foreign)) belongs to someone else: a script that
//! locks itself, as in flock(1)'s manual, a data file, another tool's lock.
//! By default acquiring such a file fails with [`Error::ForeignContent`] and
//! writes nothing. With [`LockOptions::record_optional`] it is locked through a
//! read-only descriptor and left byte for byte as it is (so that the script
//! can still be executed), and so is a file this process may only read. The
//! guard then says why there is no record ([`LockGuard::no_record`]), and
//! writes nothing, ever: no heartbeat, no success, no release mark.
//!
//! The other forms of flock(1) keep no record either, by design
//! ([`NoRecord`](crate::inspect::NoRecord) names each):
//!
//! - **A directory** is locked, with `record_optional`, through a read-only
//!   descriptor of it (never created, no symlink followed); nothing in it is
//!   created or changed. [`inspect()`] of the directory reports its own lock,
//!   and [`inspect_dir`] adds a row for it while someone holds it, so that the
//!   lock is never invisible.
//! - **A shared lock** ([`LockOptions::shared`]) has many holders at once and
//!   no one owner to name: it writes nothing, whatever the file holds.
//!   `inspect` lists every holder from the kernel's table, and an older record
//!   left in the file is no evidence against them.
//! - **A descriptor** that the calling shell keeps open (`exec 9>job.lock;
//!   flock -n 9`), locked with [`LockOptions::try_acquire_descriptor`]: the
//!   lock belongs to the shell's open file and outlives this process. A
//!   record is written only into an empty or own file, through an open file
//!   of our own, and only when the parent process provably shares the locked
//!   one; it names the parent, and says that its release is not recorded
//!   ([`Release::Unrecorded`]), so that the file reads `free`, not `stale`,
//!   once the shell has let go. [`unlock_descriptor`](crate::descriptor::unlock_descriptor) is `flock -u 9`.
//!
//! A holder that keeps no record by design raises no `holder_mismatch` or
//! `owner_dead` finding in `inspect`, and [`reap()`] never removes a file that
//! is not ours, nor a directory.
//!
//! # Threat model
//!
//! This section is the one place that says whom the crate defends against,
//! and how. A lock file lives in a directory, and **whoever may write that
//! directory may put any file at any name in it**, with any content, any
//! modification time and any owner they can have. In a private directory
//! (the caller's own, or root's `/var/lock/jobs`) that is only the trusted
//! owner, and everything below is moot. In a shared directory (`/tmp`,
//! `/run/lock`, a team's lock directory) it is every user who may write
//! it, and a lock file there may have been written by an attacker before
//! the first run. What follows from that:
//!
//! - **Planted files.** A file is *planted* when it sits in a sticky
//!   directory that its group or everyone may write, and neither the caller
//!   (its effective uid) nor the directory's owner owns it: the kernel's
//!   `fs.protected_regular` rule, applied whatever that sysctl says. Its
//!   owner can unlink it while it is held (so a second run starts beside
//!   the first), rewrite its record and set its times. Acquiring refuses it
//!   ([`Error::PlantedFile`]), before any wait or write. [`inspect()`] reports
//!   it (`planted_file`) and trusts nothing in it that acts: no heartbeat,
//!   no success, no run history, no eviction. A file of another user in a
//!   directory that is not shared this way is normal: only the directory's
//!   owner could have put it there.
//! - **Future times.** A time in a record (acquisition, heartbeat, last
//!   success, last run) more than a minute ahead of the clock is one no run
//!   can have written: `inspect` reports it (`future_time`) and does not
//!   believe it (never "0 s ago"), and no later run carries it forward.
//! - **Eviction.** A record names a process, and whoever writes the file
//!   writes the record: so eviction signals only the verified owner's own
//!   tree, all of one uid, which is the caller's or, for root, the lock
//!   file's owner (see the rule in [the protocol](#the-protocol)). A
//!   descriptor passed to another process is never reason to signal it.
//! - **Big files are never ours.** A lock may be taken on a data file in
//!   place: a record is written only over content that is empty or already
//!   ours, and a file longer than any record (64 KiB, by `fstat`) is never
//!   ours, whatever its first bytes are. It is locked without a record and
//!   left byte for byte ([Files that are not ours](#files-that-are-not-ours)).
//!   A record that would pass 64 KiB is refused ([`Error::RecordTooLarge`]).
//! - **Unlink relative to a pinned directory.** A file is only unlinked
//!   under its lock, through the directory that was opened (and listed, for
//!   [`reap()`]), and only while the name still refers to the inode that was
//!   checked: a directory component swapped meanwhile cannot turn an unlink
//!   in one directory into an unlink in another.
//! - **Unsafe opens of side files.** The `lockfile` command opens every file
//!   besides the lock (metrics, their side locks and temporary files, an
//!   output file) as the lock is opened: no symlink followed, no FIFO waited
//!   on, regular files only, reads bounded. A planted FIFO or a symlink to
//!   `/dev/zero` costs one line on stderr, never a hang; metrics it did not
//!   write (another user's file, impossible figures) are not carried forward.
//! - **Terminal escapes in output.** Host names, job names, paths and
//!   process names come from files and other processes: the command's
//!   human-readable output escapes control characters in them, so that none
//!   reaches an administrator's terminal raw. JSON output escapes them by
//!   its nature.
//!
//! What stays out of reach: the advisory lock binds only those who take it,
//! and a user who may write the directory may always hold a lock on a file
//! of their own there, and so keep a job from running. Put the locks of
//! jobs that matter in a directory only trusted users may write.
//!
//! # Caveats
//!
//! - **Network filesystems.** `flock` on NFS is emulated with byte-range
//!   locks and crosses hosts only when the lock daemon works; some mounts give
//!   no exclusion at all. `inspect` reports a `network_filesystem` finding.
//!   Across hosts, use a lease (the `lockfile-etcd` crate).
//! - **Containers.** A lock excludes processes that see the same file (the
//!   same inode): two containers with separate filesystems do not exclude
//!   each other. PIDs recorded inside a PID namespace are judged as such.
//!   Inside a PID namespace the kernel's lock table leaves out a lock whose
//!   taker has exited, even while a process it started still holds it;
//!   `inspect` then finds the holder by reading every process's descriptors,
//!   once per scan.
//! - **Inherited descriptors.** A child that inherits the lock's descriptor
//!   holds the lock as long as it lives. The descriptor is opened with
//!   `O_CLOEXEC`, so only a deliberate hand-over (as `lockfile run` does) passes
//!   it on; `inspect` names every process that holds it.
//!
//! # Platform notes
//!
//! Linux is the tested platform. There, `inspect` learns who holds a lock from
//! `/proc/locks` (and `/proc/PID/fdinfo` when the process that took it has
//! gone), without touching the lock. The kernel hands `/proc/locks` out a
//! page per `read(2)`, and a table read in pieces can skip an entry when
//! other locks come and go meanwhile; so a table that took more than one read
//! is read twice and merged. A file the table does not list, whose record
//! names a live local owner that never released it, may have been taken
//! since the table was read, or skipped by it: before it is called `stale`,
//! the table is read again (once for all such files of a scan), the owner's
//! own descriptors (`/proc/PID/fdinfo`) are asked when that table came in
//! pieces, and the record is read again, which must not have changed. A
//! scan walks each process's descriptors at most once for the files read
//! before the walk, and a bounded number of descriptors in all, so that
//! records planted to name processes with many descriptors cannot make it
//! slow; a file it cannot settle within that is
//! [`LockState::Undecided`], never `stale` or `free`. A
//! bounded wait blocks in `flock(2)` and is woken at its deadline by a
//! per-thread POSIX timer that sends the real-time signal `SIGRTMAX-3`; the
//! crate installs a no-op handler for it on first use unless the application
//! already handles that signal, in which case bounded waits fall back to
//! polling (1 ms doubling to 50 ms). The process's identity (hostname, boot
//! id, start time, PID namespace) is read once and cached; the cache holds
//! the PID it was read for, and a forked child, whose PID differs, reads its
//! own, so that a child never writes its parent's identity.
//!
//! Other Unix systems compile with fallbacks: `inspect` probes a file with a
//! shared, then an exclusive, non-blocking lock for a few microseconds (a
//! concurrent `try_acquire` in that instant reports contention), bounded
//! waits poll, and records carry no boot id, start time or PID namespace.
//! Without `/proc`, a contention error against shared holders may name an
//! older record left in the file, and a descriptor lock never writes a record
//! (no fresh open file of a descriptor can be had, and no parent shown to
//! share it).
//!
//! On Linux, a descriptor lock tells whether the parent shares the locked
//! open file with kcmp(2); where kcmp is not allowed (the default seccomp
//! profile of many container runtimes), the exclusive lock itself tells,
//! from the parent's `/proc/PID/fdinfo`.
//!
//! # Events
//!
//! The crate emits [`tracing`](https://docs.rs/tracing) events with stable
//! names, each also carrying an `event` field with the same name:
//! `lock_acquired`, `lock_contended` (holder pid, host, age),
//! `lock_released`, `stale_lock_removed`, `heartbeat` (at trace level) and
//! `lock_evicted` (at warn level: the evicted pid, job, token and how long
//! its heartbeat had been silent).

#![deny(missing_docs)]
#![deny(unsafe_code)]
// Whether a public type may grow is decided for each, on purpose: every
// exhaustive one says why.
#![warn(clippy::exhaustive_enums, clippy::exhaustive_structs)]
#![cfg(unix)]

mod acquire;
mod beat;
pub mod check;
mod clock;
mod content;
pub mod descriptor;
mod dir;
pub mod error;
mod evict;
mod guard;
pub mod history;
mod holder;
pub mod inspect;
pub mod json;
mod options;
mod paths;
pub mod process;
pub mod reap;
pub mod record;
mod record_file;
mod rfc3339;
pub mod slot;
pub mod text;
pub mod tick;
mod trust;
#[cfg(feature = "tokio")]
pub mod waiter;
// The one module allowed `unsafe`: the deny above keeps it from spreading unreviewed.
#[allow(unsafe_code)]
mod sys;
pub mod wait;

// The root: what a program that adds a guard to its `main` needs. The rest
// lives in the modules above.
pub use beat::beat;
pub use dir::default_lock_dir;
pub use error::{Error, Result};
pub use guard::LockGuard;
pub use inspect::{LockReport, LockState, inspect, inspect_dir};
pub use options::LockOptions;
pub use reap::{ReapOptions, ReapReport, reap};
pub use record::OwnerRecord;

// Inside the crate, every type by its short name.
pub(crate) use history::{LastRun, Outcome, RunEnd};
pub(crate) use holder::Holder;
pub(crate) use inspect::{Finding, InspectOptions, Undecided};
pub(crate) use record::{DecodeError, Evicted, HeartbeatSource, Release};
pub(crate) use tick::{Claim, TickClaim, TickDecision};
pub(crate) use wait::Wait;

// The front page's examples run as doctests, so that they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
