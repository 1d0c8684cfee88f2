//! `inspect`: who holds a lock, since when, and is it still beating.
//!
//! Inspecting never takes the lock. On Linux the kernel's holder comes from
//! `/proc/locks`, so a concurrent `try_acquire` is never made to fail.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Serialize, Serializer};

use crate::error::Operation;
use crate::record::{Content, DecodeError, LockDocument, MAX_RECORD_BYTES, NoRecord};
use crate::sys::{self, KernelHold, KernelLocks, ProcessIdentity};
use crate::{Error, OwnerRecord, Result};

/// The state of one lock file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LockState {
    /// There is no file at the path.
    Absent,
    /// Nobody holds the kernel lock, and the file is empty or its record says
    /// the lock was released cleanly: the normal resting state of a lock.
    Free,
    /// Someone holds the kernel lock.
    Held,
    /// Nobody holds the kernel lock, but the record names an owner that never
    /// released it: the litter of a dead owner, harmless to the next acquire.
    Stale,
    /// Nobody holds the kernel lock, and the content is not an owner record
    /// (malformed, truncated, binary, oversized). Harmless to the next acquire.
    Debris,
}

impl LockState {
    /// The lowercase name used in JSON and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            LockState::Absent => "absent",
            LockState::Free => "free",
            LockState::Held => "held",
            LockState::Stale => "stale",
            LockState::Debris => "debris",
        }
    }
}

impl fmt::Display for LockState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How serious a finding is, in monitoring-plugin terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth a look; nothing is blocked yet.
    Warning,
    /// A job is blocked, hung, or not running.
    Critical,
}

impl Severity {
    /// `warning` or `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something worth telling about a lock file, with the numbers that prove it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Finding {
    /// Held for longer than [`InspectOptions::max_age`].
    Aged {
        /// How long the lock has been held.
        #[serde(rename = "age_seconds", serialize_with = "secs")]
        age: Duration,
        /// The threshold it crossed.
        #[serde(rename = "threshold_seconds", serialize_with = "secs")]
        threshold: Duration,
    },
    /// Held, but the heartbeat has been silent for longer than the threshold:
    /// a hung owner blocks every later run.
    HeartbeatSilent {
        /// Time since the last heartbeat.
        #[serde(rename = "silent_seconds", serialize_with = "secs")]
        silent: Duration,
        /// The threshold it crossed.
        #[serde(rename = "threshold_seconds", serialize_with = "secs")]
        threshold: Duration,
    },
    /// The record was written on another host; its PID means nothing here.
    ForeignHost {
        /// The host named in the record.
        recorded_host: String,
        /// This host.
        local_host: String,
    },
    /// The recorded process is gone, or its PID now belongs to another process.
    OwnerDead {
        /// The recorded PID.
        pid: u32,
        /// How we know: no such process, another start time, another boot.
        reason: String,
    },
    /// The processes holding the kernel lock are not the one the record names.
    HolderMismatch {
        /// The PID in the record, if the file holds a record.
        recorded_pid: Option<u32>,
        /// The processes that hold the kernel lock.
        holders: Vec<Holder>,
    },
    /// The lock lives on a network or FUSE filesystem, where kernel locks may
    /// not cross hosts (or may not work at all).
    NetworkFilesystem {
        /// The filesystem type (`nfs`, `cifs`, `fuse`, ...).
        filesystem: String,
    },
    /// [`InspectOptions::expect_every`] is set but no success was ever
    /// recorded in this lock file (or there is no lock file).
    NeverSucceeded {
        /// The expected period.
        #[serde(rename = "expect_every_seconds", serialize_with = "secs")]
        expect_every: Duration,
    },
    /// The last recorded success is older than [`InspectOptions::expect_every`].
    Silent {
        /// Time since the last success.
        #[serde(rename = "since_success_seconds", serialize_with = "secs")]
        since_success: Duration,
        /// The expected period.
        #[serde(rename = "expect_every_seconds", serialize_with = "secs")]
        expect_every: Duration,
    },
}

impl Finding {
    /// The finding's stable name: `aged`, `heartbeat_silent`, `foreign_host`,
    /// `owner_dead`, `holder_mismatch`, `network_filesystem`,
    /// `never_succeeded` or `silent`.
    pub fn kind(&self) -> &'static str {
        match self {
            Finding::Aged { .. } => "aged",
            Finding::HeartbeatSilent { .. } => "heartbeat_silent",
            Finding::ForeignHost { .. } => "foreign_host",
            Finding::OwnerDead { .. } => "owner_dead",
            Finding::HolderMismatch { .. } => "holder_mismatch",
            Finding::NetworkFilesystem { .. } => "network_filesystem",
            Finding::NeverSucceeded { .. } => "never_succeeded",
            Finding::Silent { .. } => "silent",
        }
    }

    /// Critical: `heartbeat_silent` (a hung owner blocks every later run),
    /// `never_succeeded` and `silent` (the job is not getting done). Every
    /// other finding is a warning.
    pub fn severity(&self) -> Severity {
        match self {
            Finding::HeartbeatSilent { .. }
            | Finding::NeverSucceeded { .. }
            | Finding::Silent { .. } => Severity::Critical,
            _ => Severity::Warning,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |d: &Duration| humantime::format_duration(Duration::from_secs(d.as_secs()));
        match self {
            Finding::Aged { age, threshold } => {
                write!(f, "held for {}, longer than {}", d(age), d(threshold))
            }
            Finding::HeartbeatSilent { silent, threshold } => write!(
                f,
                "no heartbeat for {}, longer than {}: the holder may be hung",
                d(silent),
                d(threshold)
            ),
            Finding::ForeignHost {
                recorded_host,
                local_host,
            } => write!(
                f,
                "the record names host {recorded_host:?}, not this host {local_host:?}: its PID cannot be checked from here"
            ),
            Finding::OwnerDead { pid, reason } => {
                write!(f, "the recorded owner pid {pid} is dead: {reason}")
            }
            Finding::HolderMismatch {
                recorded_pid,
                holders,
            } => {
                f.write_str("the kernel lock is held by ")?;
                if holders.is_empty() {
                    f.write_str("a process not visible from here")?;
                }
                for (i, h) in holders.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{h}")?;
                }
                match recorded_pid {
                    Some(pid) => write!(f, ", not by the recorded owner pid {pid}"),
                    None => f.write_str(", which wrote no record"),
                }
            }
            Finding::NetworkFilesystem { filesystem } => write!(
                f,
                "the lock lives on a {filesystem} filesystem, where kernel locks may not exclude other hosts; use a lease across hosts"
            ),
            Finding::NeverSucceeded { expect_every } => write!(
                f,
                "no successful run was ever recorded (one is expected every {})",
                d(expect_every)
            ),
            Finding::Silent {
                since_success,
                expect_every,
            } => write!(
                f,
                "the last successful run was {} ago; one is expected every {}",
                d(since_success),
                d(expect_every)
            ),
        }
    }
}

/// A process that holds a kernel lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Holder {
    /// Its PID in our PID namespace.
    pub pid: u32,
    /// Its command name, when readable.
    pub command: Option<String>,
}

impl Holder {
    pub(crate) fn from_pid(pid: u32) -> Holder {
        Holder {
            pid,
            command: sys::command_name(pid),
        }
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {}", self.pid)?;
        if let Some(c) = &self.command {
            write!(f, " ({c})")?;
        }
        Ok(())
    }
}

/// What `inspect` found about one lock file.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LockReport {
    /// The lock file.
    pub path: PathBuf,
    /// Its state.
    pub state: LockState,
    /// The owner record in the file, released or not, when there is one.
    pub owner: Option<OwnerRecord>,
    /// Whether the record says its owner released the lock cleanly.
    pub released: bool,
    /// The processes holding the kernel lock (empty unless `Held`; empty too
    /// when the holder is not visible from this PID namespace).
    pub holders: Vec<Holder>,
    /// How long the recorded owner has held (or, when stale, had held) the
    /// lock; `None` when the record is released or missing.
    pub age: Option<Duration>,
    /// Time since the last heartbeat (the file's modification time), for
    /// held and stale files.
    pub heartbeat_age: Option<Duration>,
    /// The last success recorded in the file.
    pub last_success: Option<SystemTime>,
    /// The file's size in bytes.
    pub size: u64,
    /// The file's modification time: the last heartbeat, record write or release.
    pub modified: Option<SystemTime>,
    /// Why the content is not a record, for `Debris` (and for a held file
    /// whose holder wrote none).
    pub content_error: Option<DecodeError>,
    /// What the file holds: a record of ours, nothing, a torn record, or
    /// someone else's content. `None` when there is no file.
    pub content: Option<Content>,
    /// Why the file carries no record of its holders, when that is by
    /// design: its content is not ours, or they hold it read-only. Such
    /// holders raise no `holder_mismatch` or `owner_dead` finding.
    pub no_record: Option<NoRecord>,
    /// Everything worth telling, most severe first.
    pub findings: Vec<Finding>,
}

impl LockReport {
    /// The most severe finding's severity, or `None` when all is well.
    pub fn severity(&self) -> Option<Severity> {
        self.findings.iter().map(Finding::severity).max()
    }
}

impl Serialize for LockReport {
    /// The JSON shape of `lockfile inspect --json`.
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct FindingJson<'a> {
            severity: Severity,
            message: String,
            #[serde(flatten)]
            finding: &'a Finding,
        }
        #[derive(Serialize)]
        struct ReportJson<'a> {
            path: &'a Path,
            state: LockState,
            owner: Option<&'a OwnerRecord>,
            released: bool,
            holder_pid: Option<u32>,
            holders: &'a [Holder],
            age_seconds: Option<f64>,
            heartbeat_age_seconds: Option<f64>,
            #[serde(serialize_with = "opt_time")]
            last_success: Option<SystemTime>,
            size: u64,
            content_error: Option<String>,
            content: Option<Content>,
            no_record: Option<NoRecord>,
            findings: Vec<FindingJson<'a>>,
        }
        ReportJson {
            path: &self.path,
            state: self.state,
            owner: self.owner.as_ref(),
            released: self.released,
            holder_pid: self.holders.first().map(|h| h.pid),
            holders: &self.holders,
            age_seconds: self.age.map(|d| d.as_secs_f64()),
            heartbeat_age_seconds: self.heartbeat_age.map(|d| d.as_secs_f64()),
            last_success: self.last_success,
            size: self.size,
            content_error: self.content_error.as_ref().map(ToString::to_string),
            content: self.content,
            no_record: self.no_record,
            findings: self
                .findings
                .iter()
                .map(|finding| FindingJson {
                    severity: finding.severity(),
                    message: finding.to_string(),
                    finding,
                })
                .collect(),
        }
        .serialize(s)
    }
}

fn secs<S: Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn opt_time<S: Serializer>(t: &Option<SystemTime>, s: S) -> std::result::Result<S::Ok, S::Error> {
    crate::record::rfc3339::option::serialize(t, s)
}

/// Thresholds for `inspect`. None is hard-coded; each has a documented default.
///
/// ```
/// use std::time::Duration;
/// # fn main() -> Result<(), lockfile::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// let report = lockfile::InspectOptions::new()
///     .max_age(Duration::from_secs(3600))
///     .expect_every(Duration::from_secs(86400))
///     .inspect(dir.path().join("nightly.lock"))?;
/// assert_eq!(report.state, lockfile::LockState::Absent);
/// assert_eq!(report.findings[0].kind(), "never_succeeded");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct InspectOptions {
    max_age: Option<Duration>,
    stale_after: Option<Duration>,
    expect_every: Option<Duration>,
}

impl InspectOptions {
    /// Options with every default.
    pub fn new() -> InspectOptions {
        InspectOptions::default()
    }

    /// Report `aged` when a lock has been held longer than this.
    ///
    /// Default: off. How long a run may take is the job's business; a lock
    /// held for long is not wrong in itself (a hung one is: see
    /// [`stale_after`](InspectOptions::stale_after)).
    pub fn max_age(&mut self, max_age: Duration) -> &mut Self {
        self.max_age = Some(max_age);
        self
    }

    /// Report `heartbeat_silent` when a held lock's heartbeat is older than this.
    ///
    /// Default: three times the heartbeat interval the holder promised in its
    /// record; off when it promised none.
    pub fn stale_after(&mut self, stale_after: Duration) -> &mut Self {
        self.stale_after = Some(stale_after);
        self
    }

    /// Expect a recorded success at least this often: report `never_succeeded`
    /// or `silent` otherwise. The alarm on silence: a job that never starts
    /// produces no error of its own.
    ///
    /// Default: off.
    pub fn expect_every(&mut self, period: Duration) -> &mut Self {
        self.expect_every = Some(period);
        self
    }

    /// Inspects one lock file with these options. See [`inspect`].
    ///
    /// # Errors
    ///
    /// As [`inspect`].
    pub fn inspect(&self, path: impl AsRef<Path>) -> Result<LockReport> {
        let path = path.as_ref();
        let mut scan = Scan::new(self, path)?;
        let file = match open_for_inspect(path) {
            Ok(file) => Some(file),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(open_error(path, e)),
        };
        scan.report(path, file)
    }

    /// Inspects every `*.lock` file in a directory with these options. See
    /// [`inspect_dir`].
    ///
    /// # Errors
    ///
    /// As [`inspect_dir`].
    pub fn inspect_dir(&self, dir: impl AsRef<Path>) -> Result<Vec<Result<LockReport>>> {
        let dir = dir.as_ref();
        let mut scan = Scan::new(self, dir)?;
        let dir_fd = open_dir(dir)?;
        let mut reports = Vec::new();
        for name in lock_file_names(dir, &dir_fd)? {
            let path = dir.join(&name);
            let report = match open_for_inspect_at(&dir_fd, Path::new(&name)) {
                Ok(file) => scan.report(&path, Some(file)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => scan.report(&path, None),
                Err(e) => Err(open_error(&path, e)),
            };
            reports.push(report);
        }
        Ok(reports)
    }
}

/// Inspects one lock file with default [`InspectOptions`], without taking the
/// lock.
///
/// # Errors
///
/// [`Error::Symlink`] or [`Error::NotRegularFile`] when something other than
/// a regular file sits at the path; [`Error::PermissionDenied`] when it
/// cannot be read; [`Error::Io`] when `/proc/locks` cannot be read. A missing
/// file is not an error: its state is [`LockState::Absent`].
///
/// # Examples
///
/// ```
/// # fn main() -> Result<(), lockfile::Error> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("job.lock");
/// let guard = lockfile::LockGuard::try_acquire(&path)?;
/// let report = lockfile::inspect(&path)?;
/// assert_eq!(report.state, lockfile::LockState::Held);
/// assert_eq!(report.owner.unwrap().token, guard.record().token);
/// assert_eq!(report.holders[0].pid, std::process::id());
/// # Ok(())
/// # }
/// ```
pub fn inspect(path: impl AsRef<Path>) -> Result<LockReport> {
    InspectOptions::new().inspect(path)
}

/// Inspects every `*.lock` file in `dir` (sorted by name) with default
/// [`InspectOptions`]. One entry per file: a file that cannot be inspected (a
/// symlink, a FIFO, an unreadable file) gets its own error, and the scan goes
/// on.
///
/// The kernel's lock table is read once for the whole directory, and no lock
/// is taken.
///
/// # Errors
///
/// [`Error::DirectoryNotFound`] or [`Error::PermissionDenied`] when the
/// directory cannot be listed.
pub fn inspect_dir(dir: impl AsRef<Path>) -> Result<Vec<Result<LockReport>>> {
    InspectOptions::new().inspect_dir(dir)
}

/// The names of the `*.lock` entries of the open directory `dir_fd`, sorted.
/// Listed through the descriptor the files are then opened from, so that a
/// directory renamed or replaced meanwhile cannot mix two listings.
fn lock_file_names(dir: &Path, dir_fd: &rustix::fd::OwnedFd) -> Result<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStrExt;
    let read_err = |e: rustix::io::Errno| Error::from_io(Operation::ReadDir, dir, e.into());
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir_fd).map_err(read_err)? {
        let name = entry.map_err(read_err)?.file_name().to_bytes().to_owned();
        if name.ends_with(b".lock") {
            names.push(std::ffi::OsStr::from_bytes(&name).to_owned());
        }
    }
    names.sort();
    Ok(names)
}

fn open_dir(dir: &Path) -> Result<rustix::fd::OwnedFd> {
    rustix::fs::open(
        dir,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| Error::from_io(Operation::ReadDir, dir, e.into()))
}

fn inspect_flags() -> rustix::fs::OFlags {
    use rustix::fs::OFlags;
    // Never follow a symlink, never hang on a FIFO, never adopt a terminal.
    OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC
}

pub(crate) fn open_for_inspect(path: &Path) -> io::Result<File> {
    open_for_inspect_at(rustix::fs::CWD, path)
}

/// Opens `path` (relative to `dir`) read-only, for a look that changes
/// nothing: no symlink followed, no FIFO waited on, no access time updated.
fn open_for_inspect_at(dir: impl rustix::fd::AsFd, path: &Path) -> io::Result<File> {
    use rustix::fs::OFlags;
    sys::open_noatime(path, |path, extra| {
        rustix::fs::openat(
            &dir,
            path,
            OFlags::RDONLY | inspect_flags() | OFlags::from_bits_retain(extra as _),
            rustix::fs::Mode::empty(),
        )
        .map(File::from)
        .map_err(io::Error::from)
    })
}

fn open_error(path: &Path, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) => Error::Symlink {
            op: Operation::Read,
            path: path.to_path_buf(),
        },
        _ => Error::from_io(Operation::Read, path, e),
    }
}

/// State shared by every file of one inspection: the options, the kernel's
/// lock table, our identity, one clock reading, and filesystem types per device.
struct Scan<'a> {
    opts: &'a InspectOptions,
    locks: KernelLocks,
    me: Arc<ProcessIdentity>,
    now: SystemTime,
    network_fs: HashMap<u64, Option<&'static str>>,
    buf: Vec<u8>,
}

impl<'a> Scan<'a> {
    fn new(opts: &'a InspectOptions, path: &Path) -> Result<Scan<'a>> {
        let locks = KernelLocks::snapshot().map_err(|e| Error::Io {
            op: Operation::Read,
            path: path.to_path_buf(),
            source: io::Error::new(e.kind(), format!("cannot read the kernel lock table: {e}")),
        })?;
        Ok(Scan {
            opts,
            locks,
            me: sys::process_identity(),
            now: SystemTime::now(),
            network_fs: HashMap::new(),
            buf: Vec::new(),
        })
    }

    fn report(&mut self, path: &Path, file: Option<File>) -> Result<LockReport> {
        let mut report = self.examine_settled(path, file.as_ref())?;
        self.silence_findings(&mut report);
        report
            .findings
            .sort_by_key(|f| std::cmp::Reverse(f.severity()));
        Ok(report)
    }

    /// Examines the file until a verdict holds still: a live owner's lock
    /// that looks abandoned is looked at again once its content changed
    /// (it was being released, or taken anew, while we looked).
    fn examine_settled(&mut self, path: &Path, file: Option<&File>) -> Result<LockReport> {
        const ATTEMPTS: usize = 3;
        let mut attempt = 1;
        loop {
            let mut report = empty_report(path);
            let Some(file) = file else {
                return Ok(report);
            };
            match self.examine(path, file, &mut report, attempt == ATTEMPTS)? {
                Verdict::Settled => return Ok(report),
                Verdict::Moving => attempt += 1,
            }
        }
    }
}

/// Whether a file's examination can stand.
enum Verdict {
    Settled,
    /// The file changed while we judged it: look again.
    Moving,
}

fn empty_report(path: &Path) -> LockReport {
    LockReport {
        path: path.to_path_buf(),
        state: LockState::Absent,
        owner: None,
        released: false,
        holders: Vec::new(),
        age: None,
        heartbeat_age: None,
        last_success: None,
        size: 0,
        modified: None,
        content_error: None,
        content: None,
        no_record: None,
        findings: Vec::new(),
    }
}

impl Scan<'_> {
    /// `last_attempt`: judge even a file that keeps changing.
    fn examine(
        &mut self,
        path: &Path,
        file: &File,
        report: &mut LockReport,
        last_attempt: bool,
    ) -> Result<Verdict> {
        let meta = file
            .metadata()
            .map_err(|e| Error::from_io(Operation::Stat, path, e))?;
        if !meta.file_type().is_file() {
            return Err(Error::NotRegularFile {
                op: Operation::Read,
                path: path.to_path_buf(),
                kind: sys::file_kind(rustix::fs::FileType::from_raw_mode(meta.mode())),
            });
        }
        report.size = meta.size();
        report.modified = meta.modified().ok();
        let want = usize::try_from(meta.size())
            .unwrap_or(usize::MAX)
            .min(MAX_RECORD_BYTES + 1);
        self.buf.resize(want, 0);
        let n = sys::read_prefix(file, &mut self.buf)
            .map_err(|e| Error::from_io(Operation::Read, path, e))?;
        // At most MAX_RECORD_BYTES + 1 bytes were read: a larger file
        // decodes as too large.
        let decoded = LockDocument::decode(&self.buf[..n]);
        report.content = Some(Content::from_decoded(&decoded));
        let (doc, content_error) = match decoded {
            Ok(doc) => (Some(doc), None),
            Err(e) => (None, Some(e)),
        };
        // What can be said of an unreleased local record's owner.
        let liveness = doc
            .as_ref()
            .filter(|d| !d.released && d.owner.hostname == self.me.hostname)
            .map(|d| judge_owner(&d.owner, &self.me));
        let mut hold = self.locks.hold(file, meta.dev(), meta.ino());
        let owner_not_dead = matches!(liveness, Some(Liveness::Alive | Liveness::Unknown));
        if let (KernelHold::Free, Some(doc), true) = (&hold, &doc, owner_not_dead) {
            // An unreleased record whose owner may live, on a file the table
            // says nobody holds: the table was read in pieces and skipped the
            // lock, or the owner took it after the table was read (for a
            // directory, the table is as old as the scan). The owner's own
            // descriptors settle it when we may look at them.
            if matches!(liveness, Some(Liveness::Alive))
                && sys::process_holds(doc.owner.pid, meta.dev(), meta.ino())
            {
                hold = KernelHold::Held(vec![i64::from(doc.owner.pid)]);
            } else if !last_attempt && self.changed_since_read(file, n) {
                // Or the owner released (or released and took it again)
                // since we read the record.
                return Ok(Verdict::Moving);
            } else if let Ok(now) = KernelLocks::snapshot() {
                // Its descriptors are not ours to read (another user, another
                // PID namespace): ask the table again, now.
                hold = now.hold(file, meta.dev(), meta.ino());
            }
        }
        report.state = match (&hold, &doc, &content_error) {
            (KernelHold::Held(_), _, _) => LockState::Held,
            (KernelHold::Free, Some(doc), _) if doc.released => LockState::Free,
            (KernelHold::Free, Some(_), _) => LockState::Stale,
            (KernelHold::Free, None, Some(DecodeError::Empty)) => LockState::Free,
            (KernelHold::Free, None, _) => LockState::Debris,
        };
        if let KernelHold::Held(pids) = &hold {
            report.holders = holders(pids, meta.dev(), meta.ino());
        }
        report.content_error = content_error.filter(|e| *e != DecodeError::Empty);
        report.no_record = self.no_record(doc.as_ref(), report, meta.dev(), meta.ino());
        if let Some(doc) = doc {
            report.released = doc.released;
            report.last_success = doc.last_success;
            // A record that the holders could not have written (they hold
            // the file read-only) is history, no evidence against them.
            if !doc.released && report.no_record.is_none() {
                report.age = Some(doc.owner.age(self.now));
                report.heartbeat_age = report
                    .modified
                    .map(|m| self.now.duration_since(m).unwrap_or_default());
                self.owner_findings(&doc.owner, liveness, report);
            }
            if report.state == LockState::Held && report.no_record.is_none() {
                self.holder_findings(&doc, report);
            }
            report.owner = Some(doc.owner);
        } else if report.state == LockState::Held && report.no_record.is_none() {
            // Held, and no record at all, by a holder that could have written
            // one: another program that locks the file read-write without
            // writing a record, or an acquire caught between lock and write.
            report.findings.push(Finding::HolderMismatch {
                recorded_pid: None,
                holders: report.holders.clone(),
            });
        }
        let network = *self
            .network_fs
            .entry(meta.dev())
            .or_insert_with(|| sys::network_filesystem(file));
        if let Some(fs) = network {
            report.findings.push(Finding::NetworkFilesystem {
                filesystem: fs.to_owned(),
            });
        }
        Ok(Verdict::Settled)
    }

    /// Why the file carries no record of its holders, when that is by design:
    /// its content is not ours, or every holder holds it read-only (flock(1),
    /// or `lockfile run` on a file it may not write) and so could not have
    /// written the record in the file, if any.
    fn no_record(
        &self,
        doc: Option<&LockDocument>,
        report: &LockReport,
        dev: u64,
        ino: u64,
    ) -> Option<NoRecord> {
        if report.content == Some(Content::Foreign) {
            return Some(NoRecord::ForeignContent);
        }
        if report.state != LockState::Held || report.holders.is_empty() {
            return None;
        }
        let owner_holds = doc.is_some_and(|d| {
            !d.released
                && report
                    .holders
                    .iter()
                    .any(|h| holder_is_owner(h.pid, &d.owner, &self.me))
        });
        let read_only = report
            .holders
            .iter()
            .all(|h| sys::process_hold_access(h.pid, dev, ino) == Some(sys::HoldAccess::ReadOnly));
        (!owner_holds && read_only).then_some(NoRecord::ReadOnly)
    }

    /// Whether the first `n` bytes read into `self.buf` are no longer the file's.
    fn changed_since_read(&self, file: &File, n: usize) -> bool {
        let mut again = vec![0; n + 1];
        match sys::read_prefix(file, &mut again) {
            Ok(m) => again[..m] != self.buf[..n],
            Err(_) => true,
        }
    }

    /// Findings about an unreleased record's owner.
    /// `liveness` is `None` for a record from another host.
    fn owner_findings(
        &self,
        owner: &OwnerRecord,
        liveness: Option<Liveness>,
        report: &mut LockReport,
    ) {
        if owner.hostname != self.me.hostname {
            report.findings.push(Finding::ForeignHost {
                recorded_host: owner.hostname.clone(),
                local_host: self.me.hostname.clone(),
            });
        } else if let Some(Liveness::Dead(reason)) = liveness {
            report.findings.push(Finding::OwnerDead {
                pid: owner.pid,
                reason,
            });
        }
        if report.state != LockState::Held {
            return;
        }
        if let (Some(max), Some(age)) = (self.opts.max_age, report.age)
            && age > max
        {
            report.findings.push(Finding::Aged {
                age,
                threshold: max,
            });
        }
        let threshold = self.opts.stale_after.or_else(|| {
            owner
                .heartbeat_interval()
                .map(|i| i.checked_mul(3).unwrap_or(Duration::MAX))
        });
        if let (Some(threshold), Some(silent)) = (threshold, report.heartbeat_age)
            && silent > threshold
        {
            report
                .findings
                .push(Finding::HeartbeatSilent { silent, threshold });
        }
    }

    /// Compares the kernel's holders with the record.
    fn holder_findings(&self, doc: &LockDocument, report: &mut LockReport) {
        if doc.owner.hostname != self.me.hostname {
            // A foreign record on a lock held here: the holder wrote no record
            // of its own (yet), or the directory is shared across hosts.
            report.findings.push(Finding::HolderMismatch {
                recorded_pid: None,
                holders: report.holders.clone(),
            });
            return;
        }
        let matches = report
            .holders
            .iter()
            .any(|h| holder_is_owner(h.pid, &doc.owner, &self.me));
        if doc.released || !matches {
            report.findings.push(Finding::HolderMismatch {
                recorded_pid: (!doc.released).then_some(doc.owner.pid),
                holders: report.holders.clone(),
            });
        }
    }

    fn silence_findings(&self, report: &mut LockReport) {
        let Some(expect_every) = self.opts.expect_every else {
            return;
        };
        match report.last_success {
            None => report
                .findings
                .push(Finding::NeverSucceeded { expect_every }),
            Some(t) => {
                let since_success = self.now.duration_since(t).unwrap_or_default();
                if since_success > expect_every {
                    report.findings.push(Finding::Silent {
                        since_success,
                        expect_every,
                    });
                }
            }
        }
    }
}

/// Resolves the kernel's view into live processes. `/proc/locks` names the
/// process that took the lock; when that one is gone (or invisible from our
/// namespace) the lock lives on in a descriptor someone inherited, so look
/// for that someone.
fn holders(kernel_pids: &[i64], dev: u64, ino: u64) -> Vec<Holder> {
    let visible: Vec<u32> = kernel_pids
        .iter()
        .filter_map(|&p| u32::try_from(p).ok())
        .filter(|&p| p > 0 && sys::pid_exists(p))
        .collect();
    let pids = if visible.len() == kernel_pids.len() {
        visible
    } else {
        sys::processes_holding(dev, ino)
    };
    pids.into_iter().map(Holder::from_pid).collect()
}

/// Whether the process `pid` (in our namespace) is the one the record names,
/// which may have written its PID from inside a container's PID namespace.
fn holder_is_owner(pid: u32, owner: &OwnerRecord, me: &ProcessIdentity) -> bool {
    match (owner.pid_namespace, me.pid_namespace) {
        (Some(theirs), Some(ours)) if theirs != ours => {
            sys::pid_namespace(Some(pid)) == Some(theirs)
                && sys::innermost_pid(pid) == Some(owner.pid)
        }
        _ => pid == owner.pid,
    }
}

/// What can be said about a recorded local owner.
pub(crate) enum Liveness {
    Alive,
    Dead(String),
    /// Recorded in another PID namespace: the number cannot be checked here.
    Unknown,
}

/// Judges a local record's owner by boot id, PID and start time, never by PID
/// alone: PIDs are reused, and restart at 1 in every container.
pub(crate) fn judge_owner(owner: &OwnerRecord, me: &ProcessIdentity) -> Liveness {
    if let (Some(theirs), Some(ours)) = (&owner.boot_id, &me.boot_id)
        && theirs != ours
    {
        return Liveness::Dead(format!(
            "the host rebooted since (boot id {theirs}, now {ours})"
        ));
    }
    if let (Some(theirs), Some(ours)) = (owner.pid_namespace, me.pid_namespace)
        && theirs != ours
    {
        return Liveness::Unknown;
    }
    if !sys::pid_exists(owner.pid) {
        return Liveness::Dead(format!("no process with pid {} exists", owner.pid));
    }
    if let Some(stat) = sys::process_stat(owner.pid) {
        if stat.exited {
            return Liveness::Dead(format!(
                "pid {} has exited or is exiting (its locks are gone)",
                owner.pid
            ));
        }
        if let Some(theirs) = owner.start_time
            && theirs != stat.start_time
        {
            return Liveness::Dead(format!(
                "pid {} now belongs to another process (started at tick {}, the owner at tick {theirs})",
                owner.pid, stat.start_time
            ));
        }
    }
    Liveness::Alive
}
