//! The scan engine: one snapshot of the kernel's lock table and one clock
//! reading, shared by every file of an inspection.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::finding::{Finding, TimeField};
use super::liveness::{Liveness, holder_is_owner, holders, judge_owner};
use super::options::InspectOptions;
use super::report::{LockReport, LockState};
use crate::content::{Content, NoRecord};
use crate::error::Operation;
use crate::record::{DecodeError, LockDocument, MAX_RECORD_BYTES, Release};
use crate::sys::{self, KernelHold, KernelLocks, LockMode, ProcessIdentity};
use crate::trust::{self, DirFacts, Planted};
use crate::{Error, OwnerRecord, Result};

/// State shared by every file of one inspection: the options, the kernel's
/// lock table, our identity, one clock reading, and filesystem types per device.
pub(super) struct Scan<'a> {
    opts: &'a InspectOptions,
    locks: KernelLocks,
    me: Arc<ProcessIdentity>,
    now: SystemTime,
    network_fs: HashMap<u64, Option<&'static str>>,
    last_device: Option<(u64, Option<&'static str>)>,
    buf: Vec<u8>,
    /// Who inspects, for the planted rule.
    euid: u32,
    /// The directory every file of the scan sits in, when the scan is of a
    /// directory; otherwise each file's is looked at, when needed.
    dir: Option<DirFacts>,
}

impl<'a> Scan<'a> {
    pub(super) fn new(opts: &'a InspectOptions, path: &Path) -> Result<Scan<'a>> {
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
            last_device: None,
            buf: Vec::new(),
            euid: trust::euid(),
            dir: None,
        })
    }

    /// Every file of this scan sits in a directory with these facts.
    pub(super) fn in_dir(&mut self, dir: DirFacts) {
        self.dir = Some(dir);
    }

    /// Whether the file at `path`, owned by `uid`, is planted. Its
    /// directory is looked at only when the file is not the inspector's.
    fn planted(&self, path: &Path, uid: u32) -> Option<Planted> {
        if uid == self.euid {
            return None;
        }
        let dir = match self.dir {
            Some(dir) => dir,
            None => DirFacts::containing(path).ok()?,
        };
        trust::planted(uid, dir, self.euid)
    }

    pub(super) fn report(&mut self, path: PathBuf, file: Option<File>) -> Result<LockReport> {
        let mut report = self.examine_settled(path, file.as_ref())?;
        self.silence_findings(&mut report);
        report
            .findings
            .sort_by_key(|f| std::cmp::Reverse(f.severity()));
        Ok(report)
    }

    /// The report on the lock of the directory `dir` itself, when someone
    /// holds it: a row of its own beside the directory's lock files, so that
    /// the lock is never invisible. No silence finding: the row is there to
    /// show the holders, not as one of the lock files the alarm watches.
    pub(super) fn own_lock(&mut self, dir: &Path, file: &File) -> Result<Option<LockReport>> {
        let mut report = self.examine_settled(dir.to_path_buf(), Some(file))?;
        report
            .findings
            .sort_by_key(|f| std::cmp::Reverse(f.severity()));
        Ok((report.state == LockState::Held).then_some(report))
    }

    /// Examines the file until a verdict holds still: a live owner's lock
    /// that looks abandoned is looked at again once its content changed
    /// (it was being released, or taken anew, while we looked).
    fn examine_settled(&mut self, path: PathBuf, file: Option<&File>) -> Result<LockReport> {
        const ATTEMPTS: usize = 3;
        let mut report = empty_report(path);
        let Some(file) = file else {
            return Ok(report);
        };
        let mut attempt = 1;
        loop {
            // The path leaves the report while it is examined, which fills
            // the report in: one path per file, never copied.
            let path = std::mem::take(&mut report.path);
            let verdict = self.examine(&path, file, &mut report, attempt == ATTEMPTS);
            report.path = path;
            match verdict? {
                Verdict::Settled => return Ok(report),
                Verdict::Moving => {
                    report = empty_report(std::mem::take(&mut report.path));
                    attempt += 1;
                }
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

fn empty_report(path: PathBuf) -> LockReport {
    LockReport {
        path,
        state: LockState::Absent,
        owner: None,
        released: false,
        holders: Vec::new(),
        shared: false,
        age: None,
        heartbeat_age: None,
        last_success: None,
        last_run: None,
        size: 0,
        modified: None,
        content_error: None,
        content: None,
        no_record: None,
        findings: Vec::new(),
    }
}

/// What one read of a lock file gave: which file it is, and its content.
/// A directory has no content to read: only its lock is looked at.
// Made once per file and taken apart at once: a box would only cost an
// allocation per file.
#[allow(clippy::large_enum_variant)]
enum Read {
    File(Sample),
    Directory { dev: u64, ino: u64 },
}

/// Which file a lock file is, and its content.
struct Sample {
    dev: u64,
    ino: u64,
    /// The file's owner.
    uid: u32,
    /// How many bytes of `Scan::buf` are the file's.
    len: usize,
    doc: Option<LockDocument>,
    content_error: Option<DecodeError>,
}

impl Scan<'_> {
    /// Read, resolve the kernel's hold, decide the state, then the findings.
    /// `last_attempt`: judge even a file that keeps changing.
    fn examine(
        &mut self,
        path: &Path,
        file: &File,
        report: &mut LockReport,
        last_attempt: bool,
    ) -> Result<Verdict> {
        let sample = match self.read(path, file, report)? {
            Read::File(sample) => sample,
            Read::Directory { dev, ino } => {
                self.examine_directory(file, dev, ino, report);
                return Ok(Verdict::Settled);
            }
        };
        // What can be said of an unreleased local record's owner.
        let liveness = sample
            .doc
            .as_ref()
            .filter(|d| !d.released && d.owner.hostname == self.me.hostname)
            .map(|d| judge_owner(&d.owner, &self.me));
        let Some(hold) = self.resolve_hold(file, &sample, liveness.as_ref(), last_attempt) else {
            return Ok(Verdict::Moving);
        };
        report.state = state(&hold, sample.doc.as_ref(), sample.content_error.as_ref());
        if let KernelHold::Held { pids, shared } = &hold {
            report.holders = holders(pids, sample.dev, sample.ino);
            report.shared = *shared;
        }
        self.findings(path, file, sample, liveness, report);
        Ok(Verdict::Settled)
    }

    /// A directory's lock, as flock(1) takes one: held or free, by whom, and
    /// never a record.
    fn examine_directory(&mut self, dir: &File, dev: u64, ino: u64, report: &mut LockReport) {
        report.no_record = Some(NoRecord::Directory);
        match self.locks.hold(dir, dev, ino) {
            KernelHold::Free => report.state = LockState::Free,
            KernelHold::Held { pids, shared } => {
                report.state = LockState::Held;
                report.holders = holders(&pids, dev, ino);
                report.shared = shared;
            }
        }
        self.network_finding(dir, dev, report);
    }

    /// Reads the file's metadata and first bytes into the report and
    /// `self.buf`, and decodes them.
    fn read(&mut self, path: &Path, file: &File, report: &mut LockReport) -> Result<Read> {
        let meta = file
            .metadata()
            .map_err(|e| Error::from_io(Operation::Stat, path, e))?;
        if meta.file_type().is_dir() {
            report.size = meta.size();
            report.modified = meta.modified().ok();
            return Ok(Read::Directory {
                dev: meta.dev(),
                ino: meta.ino(),
            });
        }
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
        let len = sys::read_prefix(file, &mut self.buf)
            .map_err(|e| Error::from_io(Operation::Read, path, e))?;
        // At most MAX_RECORD_BYTES + 1 bytes were read. A longer file is
        // someone else's whatever those bytes are, by its size.
        let decoded = LockDocument::decode_file(&self.buf[..len], meta.size());
        report.content = Some(Content::from_decoded(&decoded));
        let (doc, content_error) = match decoded {
            Ok(doc) => (Some(doc), None),
            Err(e) => (None, Some(e)),
        };
        Ok(Read::File(Sample {
            dev: meta.dev(),
            ino: meta.ino(),
            uid: meta.uid(),
            len,
            doc,
            content_error,
        }))
    }

    /// Who holds the kernel lock, from the table, reconciled with the record;
    /// `None` when the file changed while we judged it.
    fn resolve_hold(
        &self,
        file: &File,
        sample: &Sample,
        liveness: Option<&Liveness>,
        last_attempt: bool,
    ) -> Option<KernelHold> {
        let (dev, ino) = (sample.dev, sample.ino);
        let hold = self.locks.hold(file, dev, ino);
        let owner_not_dead = matches!(liveness, Some(Liveness::Alive | Liveness::Unknown));
        let (KernelHold::Free, Some(doc), true) = (&hold, &sample.doc, owner_not_dead) else {
            return Some(hold);
        };
        // An unreleased record whose owner may live, on a file the table says
        // nobody holds: the table was read in pieces and skipped the lock, or
        // the owner took it after the table was read (for a directory, the
        // table is as old as the scan). The owner's own descriptors settle it
        // when we may look at them.
        let owner_hold = matches!(liveness, Some(Liveness::Alive))
            .then(|| sys::process_hold(doc.owner.pid, dev, ino))
            .flatten();
        if let Some(owner_hold) = owner_hold {
            Some(KernelHold::Held {
                pids: vec![i64::from(doc.owner.pid)],
                shared: owner_hold.mode == LockMode::Shared,
            })
        } else if !last_attempt && self.changed_since_read(file, sample.len) {
            // Or the owner released (or released and took it again) since we
            // read the record.
            None
        } else if let Ok(now) = KernelLocks::snapshot() {
            // Its descriptors are not ours to read (another user, another PID
            // namespace): ask the table again, now.
            Some(now.hold(file, dev, ino))
        } else {
            Some(hold)
        }
    }

    /// Everything worth telling about a file whose state is decided.
    fn findings(
        &mut self,
        path: &Path,
        file: &File,
        sample: Sample,
        liveness: Option<Liveness>,
        report: &mut LockReport,
    ) {
        report.content_error = sample.content_error.filter(|e| *e != DecodeError::Empty);
        report.no_record = self.no_record(sample.doc.as_ref(), report, sample.dev, sample.ino);
        // Its owner can write anything into a planted file, times included:
        // what it says is shown, but nothing in it acts.
        let planted = self.planted(path, sample.uid);
        if let Some(planted) = planted {
            report.findings.push(Finding::PlantedFile {
                owner_uid: planted.owner_uid,
                directory_owner_uid: planted.dir_owner_uid,
            });
        }
        let trusted = planted.is_none();
        if let Some(doc) = sample.doc {
            let success = doc
                .last_success
                .filter(|&t| self.believed(TimeField::LastSuccess, t, report));
            // Every impossible time is told, not only the first.
            let run = doc.last_run.as_deref().filter(|run| {
                run.times()
                    .map(|t| self.believed(TimeField::LastRun, t, report))
                    .fold(true, |all, one| all & one)
            });
            report.released = doc.released;
            report.last_success = success.filter(|_| trusted);
            report.last_run = run.filter(|_| trusted).cloned();
            // A record that the holders could not have written (they hold
            // the file read-only, or shared) is history, no evidence against
            // them. Nor is a record whose release nobody was to mark, once
            // nobody holds the lock: it was let go by a close.
            let open = !doc.released
                && (doc.owner.release == Release::Recorded || report.state == LockState::Held);
            if open && report.no_record.is_none() {
                let acquired = self.believed(TimeField::Acquired, doc.owner.acquired_at, report);
                let beat = report
                    .modified
                    .filter(|&m| self.believed(TimeField::Heartbeat, m, report));
                if trusted {
                    report.age = acquired.then(|| doc.owner.age(self.now));
                    report.heartbeat_age =
                        beat.map(|m| self.now.duration_since(m).unwrap_or_default());
                    self.owner_findings(&doc.owner, liveness, report);
                }
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
        self.network_finding(file, sample.dev, report);
    }

    /// Whether `time` is possible; a `future_time` finding when it is not.
    fn believed(&self, field: TimeField, time: SystemTime, report: &mut LockReport) -> bool {
        match trust::ahead(time, self.now) {
            Some(ahead) => {
                report
                    .findings
                    .push(Finding::FutureTime { field, time, ahead });
                false
            }
            None => true,
        }
    }

    /// A `network_filesystem` finding when `file` (on device `dev`) lives on
    /// one, asked once per device.
    fn network_finding(&mut self, file: &File, dev: u64, report: &mut LockReport) {
        // The files of a directory are almost always on one device: the
        // last answer serves them without a lookup.
        let network = match self.last_device {
            Some((last, network)) if last == dev => network,
            _ => {
                let network = *self
                    .network_fs
                    .entry(dev)
                    .or_insert_with(|| sys::network_filesystem(file));
                self.last_device = Some((dev, network));
                network
            }
        };
        if let Some(fs) = network {
            report.findings.push(Finding::NetworkFilesystem {
                filesystem: fs.to_owned(),
            });
        }
    }

    /// Why the file carries no record of its holders, when that is by design:
    /// they hold it shared, its content is not ours, or every holder holds it
    /// read-only (flock(1), or `lockfile run` on a file it may not write)
    /// and so could not have written the record in the file, if any. In the
    /// order [`NoRecord`] documents (a directory is told apart earlier).
    fn no_record(
        &self,
        doc: Option<&LockDocument>,
        report: &LockReport,
        dev: u64,
        ino: u64,
    ) -> Option<NoRecord> {
        if report.state == LockState::Held && report.shared {
            return Some(NoRecord::Shared);
        }
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
        if owner_holds {
            return None;
        }
        // Only now walk the holders' descriptors: a process that holds many
        // locks has as many descriptors to look at, for each of its files.
        let read_only = report.holders.iter().all(|h| {
            sys::process_hold(h.pid, dev, ino).map(|hold| hold.access)
                == Some(sys::HoldAccess::ReadOnly)
        });
        read_only.then_some(NoRecord::ReadOnly)
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
                recorded_host: owner.hostname.to_string(),
                local_host: self.me.hostname.to_string(),
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
        if let (Some(max_runtime), Some(age)) = (owner.max_runtime(), report.age)
            && age > max_runtime
        {
            report
                .findings
                .push(Finding::Overrunning { age, max_runtime });
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

/// A file's state, from who holds its lock and what it holds.
fn state(
    hold: &KernelHold,
    doc: Option<&LockDocument>,
    content_error: Option<&DecodeError>,
) -> LockState {
    match (hold, doc, content_error) {
        (KernelHold::Held { .. }, _, _) => LockState::Held,
        (KernelHold::Free, Some(doc), _) if doc.released => LockState::Free,
        // Nobody was to mark it released: a close let it go.
        (KernelHold::Free, Some(doc), _) if doc.owner.release == Release::Unrecorded => {
            LockState::Free
        }
        (KernelHold::Free, Some(_), _) => LockState::Stale,
        (KernelHold::Free, None, Some(DecodeError::Empty)) => LockState::Free,
        (KernelHold::Free, None, _) => LockState::Debris,
    }
}
