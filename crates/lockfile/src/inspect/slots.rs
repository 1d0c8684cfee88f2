//! A lock file's slots shown under it (see [`crate::slot`]): one entry with
//! its N slots, found from the files' names and confirmed by their records,
//! never by being told N.

use std::collections::HashMap;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use super::open::{open_dir, open_error, open_for_inspect_at, open_one};
use super::scan::Scan;
use super::{InspectOptions, LockReport};
use crate::Result;
use crate::slot::{slot_of, split_slot_name};

impl InspectOptions {
    /// Inspects the lock file at `path` as [`inspect`](Self::inspect)
    /// does, with its slots, when it is slot 0 of a set: the files named as
    /// its slots whose records say they are, in
    /// [`LockReport::slots`]. Lists `path`'s directory to find them.
    ///
    /// # Errors
    ///
    /// As [`inspect`](Self::inspect); a slot's file that cannot be looked at
    /// is left out rather than failing the whole.
    pub fn inspect_slots(&self, path: impl AsRef<Path>) -> Result<LockReport> {
        let path = path.as_ref();
        let (Some(base), false) = (
            path.file_name(),
            path.as_os_str().as_bytes().ends_with(b"/"),
        ) else {
            return self.inspect(path);
        };
        let Ok(dir_fd) = open_dir(crate::paths::parent_dir(path)) else {
            return self.inspect(path);
        };
        let mut names = Vec::new();
        if let Ok(listing) = rustix::fs::Dir::read_from(&dir_fd) {
            for entry in listing.flatten() {
                let name = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes());
                if slot_of(base, name).is_some_and(|k| k > 0) {
                    names.push(name.to_owned());
                }
            }
        }
        if names.is_empty() {
            return self.inspect(path);
        }
        // One scan, one read of the kernel's lock table, for the whole set.
        let mut scan = Scan::new(self, path)?;
        let mut reports =
            vec![open_one(path).and_then(|file| scan.report(0, path.to_owned(), file))];
        for name in names {
            let slot_path = path.with_file_name(&name);
            let i = reports.len();
            reports.push(match open_for_inspect_at(&dir_fd, Path::new(&name)) {
                Ok(file) => scan.report(i, slot_path, Some(file)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => scan.report(i, slot_path, None),
                Err(e) => Err(open_error(&slot_path, e)),
            });
        }
        scan.settle(&mut reports);
        let mut reports = reports.into_iter();
        let mut report = reports.next().expect("slot 0's report")?;
        report.slots = reports.flatten().filter(is_slot).collect();
        sort(&mut report.slots);
        Ok(report)
    }
}

/// Moves the report of each slot's file (1 and up) under its slot 0's, when
/// both are among `reports` and the slot's record says it is that slot.
/// Everything else keeps its place.
pub(super) fn gather(reports: Vec<Result<LockReport>>) -> Vec<Result<LockReport>> {
    let mut bases: HashMap<PathBuf, usize> = HashMap::new();
    for (i, report) in reports.iter().enumerate() {
        if let Ok(report) = report {
            bases.insert(report.path.clone(), i);
        }
    }
    let mut out: Vec<Option<Result<LockReport>>> = reports.into_iter().map(Some).collect();
    for i in 0..out.len() {
        let Some(Ok(report)) = &out[i] else { continue };
        let Some(base) = base_path(report) else {
            continue;
        };
        let Some(&at) = bases.get(&base) else {
            continue;
        };
        if at == i || !matches!(out[at], Some(Ok(_))) {
            continue;
        }
        let Some(Ok(slot)) = out[i].take() else {
            unreachable!()
        };
        if let Some(Ok(base)) = &mut out[at] {
            base.slots.push(slot);
        }
    }
    out.into_iter()
        .flatten()
        .map(|r| {
            r.map(|mut report| {
                sort(&mut report.slots);
                report
            })
        })
        .collect()
}

/// The path of slot 0 of the set `report`'s file is a slot of, when its
/// name and its record both say it is one.
fn base_path(report: &LockReport) -> Option<PathBuf> {
    let (base, index) = split_slot_name(report.path.file_name()?)?;
    let recorded = report.owner.as_ref()?.slot?;
    (recorded.index == index).then(|| report.path.with_file_name(base))
}

fn is_slot(report: &LockReport) -> bool {
    base_path(report).is_some()
}

fn sort(slots: &mut [LockReport]) {
    slots.sort_by_key(|r| r.owner.as_ref().and_then(|o| o.slot).map(|s| s.index));
}
