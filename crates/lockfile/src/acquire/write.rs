//! Writing the owner record once the lock is ours: over our own previous
//! record only, carrying its history along.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use crate::content::NoRecord;
use crate::error::Operation;
use crate::evict::Eviction;
use crate::guard::LockGuard;
use crate::record::{self, LockDocument, Release, peek};
use crate::trust;
use crate::{Error, LockOptions, OwnerRecord, Result};

/// The guard of a lock whose file takes no record: who we are, written
/// nowhere.
pub(super) fn without_record(
    opts: &LockOptions,
    path: &Path,
    file: File,
    reason: NoRecord,
    started: Instant,
) -> LockGuard {
    let doc = LockDocument::new(owner(opts), None, None);
    acquired(path, &doc.owner, Some(reason), None, started);
    LockGuard::new(
        file,
        path.to_path_buf(),
        doc,
        Some(reason),
        0,
        opts.remove_on_release,
    )
}

/// Emits `lock_acquired`: who took the lock, why it carries no record when
/// it does not, and the previous owner when that one died holding it.
pub(crate) fn acquired(
    path: &Path,
    owner: &OwnerRecord,
    no_record: Option<NoRecord>,
    previous_owner: Option<&OwnerRecord>,
    started: Instant,
) {
    tracing::info!(
        name: "lock_acquired",
        event = "lock_acquired",
        path = %path.display(),
        pid = owner.pid,
        token = %owner.token,
        job = owner.job.as_deref().unwrap_or(""),
        waited_ms = started.elapsed().as_millis() as u64,
        no_record = no_record.map(NoRecord::as_str),
        previous_owner_pid = previous_owner.map(|o| o.pid),
        previous_owner_host = previous_owner.map(|o| &*o.hostname),
    );
}

pub(super) fn foreign_content(path: &Path, file: &File, content: &[u8]) -> Error {
    const PREVIEW: usize = 32;
    let size = file.metadata().map_or(content.len() as u64, |m| m.len());
    let shown = &content[..content.len().min(PREVIEW)];
    let mut preview = shown.escape_ascii().to_string();
    if content.len() > PREVIEW {
        preview.push('…');
    }
    Error::ForeignContent {
        path: path.to_path_buf(),
        size,
        preview,
    }
}

/// This process's record, with the promises the options make.
pub(crate) fn owner(opts: &LockOptions) -> OwnerRecord {
    let mut owner = OwnerRecord::current(opts.job.as_deref(), opts.heartbeat_interval);
    owner.heartbeat_source = opts.heartbeat_source;
    owner.max_runtime_ms = opts.max_runtime.map(record::millis);
    owner.kill_after_ms = opts.kill_after.map(record::millis);
    owner.release = opts.release;
    owner
}

/// Writes `owner`'s record over the previous one of ours, carrying its
/// history (last success, last run) along, or, after an eviction, the
/// evicted run's end. Returns it and its length.
pub(crate) fn write_record(
    owner: OwnerRecord,
    path: &Path,
    file: &File,
    previous: &[u8],
    started: Instant,
    eviction: Option<Eviction>,
) -> Result<(LockDocument, usize)> {
    let write_err = |e: io::Error| Error::from_io(Operation::Write, path, e);
    // Parse the previous document only when it has something to carry (a
    // success) or to report (an owner that died holding the lock); the
    // common case, our own released record without a success, costs no
    // parse. A document that does not parse carries nothing: a torn record
    // must not hand a "success" to the silence alarm.
    let previous_doc = peek(previous)
        .filter(|p| p.has_history || !p.released)
        .and_then(|_| LockDocument::decode(previous).ok());
    // Nor is a time no run can have recorded yet carried on: a success "in
    // 9999" would keep the silence alarm quiet for ever.
    let now = record::now();
    let last_success = previous_doc
        .as_ref()
        .and_then(|doc| doc.last_success)
        .filter(|&t| trust::possible(t, now));
    let last_run = previous_doc
        .as_ref()
        .and_then(|doc| doc.last_run.as_deref())
        .filter(|run| run.times().all(|t| trust::possible(t, now)))
        .map(|run| Box::new(run.clone()));
    // A record whose release was never going to be marked tells of no death.
    let dead_owner = previous_doc
        .filter(|doc| !doc.released && doc.owner.release == Release::Recorded)
        .map(|doc| doc.owner);
    let mut doc = LockDocument::new(owner, last_success, last_run);
    if let Some(eviction) = eviction {
        eviction.record_into(&mut doc);
    }
    let written_len = doc.encode_then(|buf| {
        file.write_all_at(buf, 0).map_err(write_err)?;
        // The previous content might be longer (a larger record, or a torn
        // one): cut it off.
        if previous.len() > buf.len() {
            file.set_len(buf.len() as u64).map_err(write_err)?;
        }
        Ok(buf.len())
    })?;
    acquired(path, &doc.owner, None, dead_owner.as_ref(), started);
    Ok((doc, written_len))
}
