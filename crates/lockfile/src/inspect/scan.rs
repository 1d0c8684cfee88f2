//! The scan engine: one snapshot of the kernel's lock table and one clock
//! reading, shared by every file of an inspection.
//!
//! # Never calling a held lock `stale` or `free`
//!
//! The table is read once, before any file. A file it does not list, whose
//! record names a live local owner that never released it, is in doubt: the
//! owner may have taken the lock after the table was read, or the table,
//! read in pieces, may have skipped it. Such a file is looked at again once
//! every other file has been read, by the protocol below; every other file
//! is decided at once, so a scan of a steady directory pays nothing for it.
//!
//! 1. The table is read again, after the record (once for all the files in
//!    doubt). If it lists the lock, the lock is held.
//! 2. If that table came in pieces, the owner's descriptors say whether it
//!    holds the lock: exact, but a walk over all of them, so done at most
//!    once per process for the files read before it, and within a budget of
//!    descriptors per scan. Past the budget the file is `undecided`.
//! 3. The record is read again. Only if it did not change is the verdict of
//!    step 1 (and 2) about this record: an owner takes the lock before it
//!    writes its record, and marks the record released before it lets the
//!    lock go, so a record that stayed unreleased throughout was held
//!    throughout, if its owner is one of ours and alive. Then a table that
//!    does not list the lock means nobody held it: `stale`. A record that
//!    changed is examined anew (from step 1, up to [`LOOKS`] times in all;
//!    then it is `undecided`).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::finding::{Finding, TimeField, Undecided};
use super::liveness::{Liveness, holder_is_owner, holders, judge_owner};
use super::options::{BelievedHistory, InspectOptions};
use super::report::{LockReport, LockState};
use crate::content::{Content, NoRecord};
use crate::error::Operation;
use crate::record::{DecodeError, LockDocument, MAX_RECORD_BYTES, Release};
use crate::sys::{self, DescriptorWalk, KernelHold, KernelLocks, LockMode, ProcessIdentity};
use crate::trust::{self, DirFacts, Planted};
use crate::{Error, OwnerRecord, Result};

/// How many times a file in doubt is read before it is `undecided`: an
/// owner that takes and releases its lock in a loop changes its record
/// between two reads now and then, but not this many times in a row.
const LOOKS: usize = 4;

/// The most process descriptors one scan walks in all. A walk of 19,000
/// descriptors costs a few times as much as reading 1,500 lock files, and
/// one is needed only when the table came in pieces: this allows one such
/// walk, however many processes the records in a directory name.
pub(crate) const WALK_BUDGET: usize = 24_576;

/// State shared by every file of one inspection: the options, the kernel's
/// lock table, our identity, one clock reading, and filesystem types per device.
pub(super) struct Scan<'a> {
    opts: &'a InspectOptions,
    /// The newest read of the kernel's lock table.
    locks: KernelLocks,
    /// When `locks` was read, on the scan's own clock ([`Scan::tick`]).
    locks_read_at: u64,
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
    /// The files in doubt, to be looked at again (see the module's docs).
    doubts: Vec<Doubt>,
    walks: Walks,
    /// What was found of each recorded owner: many records may name one.
    owners: HashMap<OwnerKey, Liveness>,
    /// Orders the scan's reads of records, of the table and of descriptors:
    /// a read is evidence about a record only when it came after it.
    ticks: u64,
}

/// What tells one recorded owner from another, for [`Scan::judge`].
type OwnerKey = (u32, Option<u64>, Option<u64>, Option<Arc<str>>);

/// A file the table could not settle, with what its first look found.
struct Doubt {
    /// Where its report goes among the scan's.
    slot: usize,
    file: File,
    report: LockReport,
    sample: Sample,
    liveness: Option<Liveness>,
    /// Its content as read, to tell whether it changed since.
    content: Vec<u8>,
    read_at: u64,
    looks: usize,
}

impl<'a> Scan<'a> {
    pub(super) fn new(opts: &'a InspectOptions, path: &Path) -> Result<Scan<'a>> {
        let locks = KernelLocks::snapshot().map_err(|e| table_error(path, &e))?;
        Ok(Scan {
            opts,
            locks,
            locks_read_at: 0,
            me: sys::process_identity(),
            now: SystemTime::now(),
            network_fs: HashMap::new(),
            last_device: None,
            buf: Vec::new(),
            euid: trust::euid(),
            dir: None,
            doubts: Vec::new(),
            walks: Walks {
                left: WALK_BUDGET,
                done: HashMap::new(),
            },
            owners: HashMap::new(),
            ticks: 0,
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

    /// Whether a recorded owner lives, judged once per scan: a process
    /// that dies meanwhile leaves records the table does not list, which
    /// are `stale` whether it is judged alive or dead.
    fn judge(&mut self, owner: &OwnerRecord) -> Liveness {
        let key = (
            owner.pid,
            owner.start_time,
            owner.pid_namespace,
            owner.boot_id.clone(),
        );
        if let Some(known) = self.owners.get(&key) {
            return known.clone();
        }
        let liveness = judge_owner(owner, &self.me);
        self.owners.insert(key, liveness.clone());
        liveness
    }

    fn tick(&mut self) -> u64 {
        self.ticks += 1;
        self.ticks
    }

    /// The report on one file, to be put in `slot` of the scan's reports. A
    /// file in doubt gets a placeholder there until [`Scan::settle`].
    pub(super) fn report(
        &mut self,
        slot: usize,
        path: PathBuf,
        file: Option<File>,
    ) -> Result<LockReport> {
        let mut report = empty_report(path);
        let Some(file) = file else {
            self.finish(&mut report);
            return Ok(report);
        };
        match self.examine(&file, &mut report)? {
            Verdict::Settled => {
                self.finish(&mut report);
                Ok(report)
            }
            Verdict::Doubt(sample, liveness) => {
                let placeholder = empty_report(report.path.clone());
                self.doubt(slot, file, report, sample, liveness, 1);
                Ok(placeholder)
            }
        }
    }

    /// Looks again at the files in doubt, by the protocol in the module's
    /// docs, and puts their reports in their slots.
    pub(super) fn settle(&mut self, reports: &mut [Result<LockReport>]) {
        while !self.doubts.is_empty() {
            // Every record in doubt was read before this table.
            match KernelLocks::snapshot() {
                Ok(locks) => {
                    self.locks = locks;
                    self.locks_read_at = self.tick();
                }
                Err(e) => {
                    for d in std::mem::take(&mut self.doubts) {
                        reports[d.slot] = Err(table_error(&d.report.path, &e));
                    }
                    return;
                }
            }
            for d in std::mem::take(&mut self.doubts) {
                let slot = d.slot;
                if let Some(report) = self.reconsider(d) {
                    reports[slot] = report;
                }
            }
        }
    }

    /// The report on the lock of the directory `dir` itself, when someone
    /// holds it: a row of its own beside the directory's lock files, so that
    /// the lock is never invisible. No silence finding: the row is there to
    /// show the holders, not as one of the lock files the alarm watches.
    pub(super) fn own_lock(&mut self, dir: &Path, file: &File) -> Result<Option<LockReport>> {
        let mut report = empty_report(dir.to_path_buf());
        // A directory has no record, so it is never in doubt.
        if let Verdict::Doubt(..) = self.examine(file, &mut report)? {
            return Ok(None);
        }
        report
            .findings
            .sort_by_key(|f| std::cmp::Reverse(f.severity()));
        Ok((report.state == LockState::Held).then_some(report))
    }

    /// The findings that need the whole report, in order of severity.
    fn finish(&self, report: &mut LockReport) {
        self.silence_findings(report);
        report
            .findings
            .sort_by_key(|f| std::cmp::Reverse(f.severity()));
    }

    fn doubt(
        &mut self,
        slot: usize,
        file: File,
        report: LockReport,
        sample: Sample,
        liveness: Option<Liveness>,
        looks: usize,
    ) {
        let content = self.buf[..sample.len].to_vec();
        let read_at = self.tick();
        self.doubts.push(Doubt {
            slot,
            file,
            report,
            sample,
            liveness,
            content,
            read_at,
            looks,
        });
    }

    /// Steps 1 to 3 for one file in doubt: its report, or `None` when it is
    /// in doubt again (its record changed), for the next table.
    fn reconsider(&mut self, d: Doubt) -> Option<Result<LockReport>> {
        let (dev, ino) = (d.sample.dev, d.sample.ino);
        let hold = self.locks.hold(&d.file, dev, ino);
        if let KernelHold::Held { .. } = hold {
            return Some(Ok(self.conclude_doubt(d, hold)));
        }
        let owner = d.sample.doc.as_ref().map(|doc| doc.owner.pid);
        if !self.locks.read_whole()
            && let (Some(Liveness::Alive), Some(pid)) = (&d.liveness, owner)
        {
            match self.walks.hold(pid, dev, ino, d.read_at, &mut self.ticks) {
                Walked::Holds(h) => {
                    let hold = KernelHold::Held {
                        pids: vec![i64::from(pid)],
                        shared: h.mode == LockMode::Shared,
                    };
                    return Some(Ok(self.conclude_doubt(d, hold)));
                }
                Walked::OverBudget => {
                    let why = Undecided::WalkBudget {
                        budget: WALK_BUDGET,
                    };
                    return Some(Ok(self.undecided(d, why)));
                }
                // Another user's process: the table is all there is.
                Walked::DoesNotHold | Walked::Unreadable => {}
            }
        }
        if !changed(&d.file, &d.content) {
            return Some(Ok(self.conclude_doubt(d, hold)));
        }
        if d.looks >= LOOKS {
            let why = Undecided::KeptChanging { looks: d.looks };
            return Some(Ok(self.undecided(d, why)));
        }
        // Taken or released meanwhile: look at it anew, before the next
        // table.
        let mut report = empty_report(d.report.path);
        match self.examine(&d.file, &mut report) {
            Err(e) => Some(Err(e)),
            Ok(Verdict::Settled) => {
                self.finish(&mut report);
                Some(Ok(report))
            }
            Ok(Verdict::Doubt(sample, liveness)) => {
                self.doubt(d.slot, d.file, report, sample, liveness, d.looks + 1);
                None
            }
        }
    }

    fn conclude_doubt(&mut self, d: Doubt, hold: KernelHold) -> LockReport {
        let mut report = d.report;
        self.conclude(&d.file, d.sample, d.liveness, &hold, &mut report);
        self.finish(&mut report);
        report
    }

    /// A file whose state could not be told: what its record says, and why.
    fn undecided(&self, d: Doubt, reason: Undecided) -> LockReport {
        let mut report = d.report;
        report.state = LockState::Undecided;
        report.content_error = d.sample.content_error;
        if let Some(doc) = d.sample.doc {
            report.released = doc.released;
            report.last_success = doc.last_success;
            report.last_run = doc.last_run.as_deref().cloned();
            report.last_claimed_tick = doc.last_claimed_tick.as_deref().cloned();
            report.owner = Some(doc.owner);
        }
        report.findings.push(Finding::Undecided { reason });
        report
    }
}

/// The descriptor walks of one scan: each process's descriptors are walked
/// once, and again only for a record read after that walk, within
/// [`WALK_BUDGET`] descriptors in all.
struct Walks {
    left: usize,
    /// Each walked process, and when it was walked.
    done: HashMap<u32, (u64, DescriptorWalk)>,
}

/// What a process's descriptors say about one lock.
enum Walked {
    Holds(sys::ProcessHold),
    DoesNotHold,
    OverBudget,
    Unreadable,
}

impl Walks {
    /// How `pid` holds the lock on (dev, ino), from a walk made after tick
    /// `after` (a descriptor it opened since the walk is not seen).
    fn hold(&mut self, pid: u32, dev: u64, ino: u64, after: u64, ticks: &mut u64) -> Walked {
        let fresh = self.done.get(&pid).is_some_and(|(at, _)| *at > after);
        if !fresh {
            *ticks += 1;
            let walk = sys::walk_descriptors(pid, &mut self.left);
            self.done.insert(pid, (*ticks, walk));
        }
        match self.done.get(&pid).map(|(_, walk)| walk) {
            Some(DescriptorWalk::Open(open)) => match open.hold(dev, ino) {
                Some(h) => Walked::Holds(h),
                None => Walked::DoesNotHold,
            },
            Some(DescriptorWalk::OverBudget) => Walked::OverBudget,
            Some(DescriptorWalk::Unreadable) | None => Walked::Unreadable,
        }
    }
}

fn table_error(path: &Path, e: &io::Error) -> Error {
    Error::Io {
        op: Operation::Read,
        path: path.to_path_buf(),
        source: io::Error::new(e.kind(), format!("cannot read the kernel lock table: {e}")),
    }
}

/// Whether a file's examination can stand.
// Taken apart as soon as it is made, as `Read` is: a box would only cost an
// allocation per file in doubt.
#[allow(clippy::large_enum_variant)]
enum Verdict {
    Settled,
    /// The table does not list the lock, and the record names a live owner
    /// that never released it: look again (see the module's docs).
    Doubt(Sample, Option<Liveness>),
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
        last_claimed_tick: None,
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

/// Whether `file` no longer starts with exactly `content`.
fn changed(file: &File, content: &[u8]) -> bool {
    let mut again = vec![0; content.len() + 1];
    match sys::read_prefix(file, &mut again) {
        Ok(n) => again[..n] != *content,
        Err(_) => true,
    }
}

impl Scan<'_> {
    /// Reads the file, resolves the kernel's hold from the table, then
    /// decides the state and the findings, unless the file is in doubt.
    fn examine(&mut self, file: &File, report: &mut LockReport) -> Result<Verdict> {
        // The path leaves the report while it is read, which fills the
        // report in: one path per file, never copied.
        let path = std::mem::take(&mut report.path);
        let read = self.read(&path, file, report);
        report.path = path;
        let sample = match read? {
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
            .map(|d| self.judge(&d.owner));
        let hold = self.locks.hold(file, sample.dev, sample.ino);
        let owner_not_dead = matches!(liveness, Some(Liveness::Alive | Liveness::Unknown));
        if hold == KernelHold::Free && owner_not_dead {
            return Ok(Verdict::Doubt(sample, liveness));
        }
        self.conclude(file, sample, liveness, &hold, report);
        Ok(Verdict::Settled)
    }

    /// The state from the hold, then the findings.
    fn conclude(
        &mut self,
        file: &File,
        sample: Sample,
        liveness: Option<Liveness>,
        hold: &KernelHold,
        report: &mut LockReport,
    ) {
        report.state = state(hold, sample.doc.as_ref(), sample.content_error.as_ref());
        if let KernelHold::Held { pids, shared } = hold {
            report.holders = holders(&self.locks, pids, sample.dev, sample.ino);
            report.shared = *shared;
        }
        self.findings(file, sample, liveness, report);
    }

    /// A directory's lock, as flock(1) takes one: held or free, by whom, and
    /// never a record.
    fn examine_directory(&mut self, dir: &File, dev: u64, ino: u64, report: &mut LockReport) {
        report.no_record = Some(NoRecord::Directory);
        match self.locks.hold(dir, dev, ino) {
            KernelHold::Free => report.state = LockState::Free,
            KernelHold::Held { pids, shared } => {
                report.state = LockState::Held;
                report.holders = holders(&self.locks, &pids, dev, ino);
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

    /// Everything worth telling about a file whose state is decided.
    fn findings(
        &mut self,
        file: &File,
        sample: Sample,
        liveness: Option<Liveness>,
        report: &mut LockReport,
    ) {
        report.content_error = sample.content_error.filter(|e| *e != DecodeError::Empty);
        report.no_record = self.no_record(sample.doc.as_ref(), report, sample.dev, sample.ino);
        // Its owner can write anything into a planted file, times included:
        // what it says is shown, but nothing in it acts.
        let planted = self.planted(&report.path, sample.uid);
        if let Some(planted) = planted {
            report.findings.push(Finding::PlantedFile {
                owner_uid: planted.owner_uid,
                directory_owner_uid: planted.dir_owner_uid,
            });
        }
        let trusted = planted.is_none();
        if let Some(doc) = sample.doc {
            let history = InspectOptions::believed_history(
                BelievedHistory::new(
                    doc.last_run.as_deref().cloned(),
                    doc.last_success,
                    doc.last_claimed_tick.as_deref().cloned(),
                ),
                self.now,
                &mut report.findings,
            );
            report.released = doc.released;
            if trusted {
                report.last_success = history.last_success;
                report.last_run = history.last_run;
                report.last_claimed_tick = history.last_claimed_tick;
            }
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
        InspectOptions::believed(field, time, self.now, &mut report.findings)
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
    /// order [`NoRecord`](crate::inspect::NoRecord) documents (a directory is told apart earlier).
    fn no_record(
        &mut self,
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
        // Only now walk the holders' descriptors, once per process for the
        // whole scan: a process that holds many locks has as many
        // descriptors to look at.
        let read_only = report.holders.iter().all(|h| {
            let walked = self
                .walks
                .hold(h.pid, dev, ino, self.locks_read_at, &mut self.ticks);
            matches!(walked, Walked::Holds(hold) if hold.access == sys::HoldAccess::ReadOnly)
        });
        read_only.then_some(NoRecord::ReadOnly)
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
        if let Some(age) = report.age {
            self.opts.age_findings(owner, age, &mut report.findings);
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
        self.opts
            .silence_findings(report.last_success, self.now, &mut report.findings);
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
