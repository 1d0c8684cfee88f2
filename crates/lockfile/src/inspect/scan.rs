//! The scan engine: one snapshot of the kernel's lock table and one clock
//! reading, shared by every file of an inspection.
//!
//! A file in doubt, one the table does not list whose record names a live
//! local owner that never released it, is looked at again by the protocol
//! in [`doubt`](super::doubt); the findings are the rules of
//! [`rules`](super::rules).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use super::doubt::{self, Doubt, Reconsidered, Walked, Walks};
use super::finding::Finding;
use super::liveness::{Liveness, holder_is_owner, judge_owner};
use super::options::InspectOptions;
use super::report::{LockReport, LockState, empty_report};
use super::rules::{self, Context};
use super::sample::{Read, Sample};
use crate::content::{Content, NoRecord};
use crate::error::Operation;
use crate::record::{DecodeError, LockDocument, MAX_RECORD_BYTES};
use crate::sys::{self, KernelHold, KernelLocks, ProcessIdentity};
use crate::trust::{self, DirFacts, Planted};
use crate::{Error, Holder, OwnerRecord, Result};

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
            walks: Walks::new(),
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
        rules::silence_findings(&self.rules(), report);
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

    /// Steps 1 to 3 for one file in doubt (see [`doubt`](super::doubt)):
    /// its report, or `None` when it is in doubt again (its record changed),
    /// for the next table.
    fn reconsider(&mut self, d: Doubt) -> Option<Result<LockReport>> {
        match doubt::reconsider(&d, &self.locks, &mut self.walks, &mut self.ticks) {
            Reconsidered::Conclude(hold) => Some(Ok(self.conclude_doubt(d, hold))),
            Reconsidered::Undecided(why) => Some(Ok(d.undecided(why))),
            Reconsidered::Changed => {
                // Taken or released meanwhile: look at it anew, before the
                // next table.
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
        }
    }

    fn conclude_doubt(&mut self, d: Doubt, hold: KernelHold) -> LockReport {
        let mut report = d.report;
        self.conclude(&d.file, d.sample, d.liveness, &hold, &mut report);
        self.finish(&mut report);
        report
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
        report.state = rules::state(hold, sample.doc.as_ref(), sample.content_error.as_ref());
        if let KernelHold::Held { pids, shared } = hold {
            report.holders = Holder::resolve(&self.locks, pids, sample.dev, sample.ino);
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
                report.holders = Holder::resolve(&self.locks, &pids, dev, ino);
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
        rules::record_findings(&self.rules(), sample.doc, planted, liveness, report);
        self.network_finding(file, sample.dev, report);
    }

    /// What the findings rules judge against.
    fn rules(&self) -> Context<'_> {
        Context {
            opts: self.opts,
            me: &self.me,
            now: self.now,
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
}
