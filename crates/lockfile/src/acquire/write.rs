//! Writing the owner record once the lock is ours: over our own previous
//! record only, carrying its history along.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Instant;

use super::kernel::unlocked;
use crate::clock;
use crate::content::NoRecord;
use crate::evict::Eviction;
use crate::guard::LockGuard;
use crate::record::{LockDocument, MAX_RECORD_BYTES, Release, peek};
use crate::record_file::{too_large, write_document};
use crate::trust;
use crate::{Claim, Error, LockOptions, OwnerRecord, Result, TickClaim, TickDecision};

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

/// Step 5, then the guard: writes the record over `previous` (our own
/// content, read under the lock) and hands the lock to a guard; unlocks
/// when the write fails, so that no lock without a record is left behind.
pub(super) fn with_record(
    opts: &LockOptions,
    path: &Path,
    file: File,
    previous: &[u8],
    started: Instant,
    eviction: Option<Eviction>,
    pinned: Option<OwnedFd>,
) -> Result<LockGuard> {
    let (doc, written_len) = match write_record(
        owner(opts),
        path,
        &file,
        previous,
        started,
        eviction,
        opts.claim_tick.as_ref(),
    ) {
        Ok(written) => written,
        Err(e) => return Err(unlocked(&file, e)),
    };
    let guard = LockGuard::new(
        file,
        path.to_path_buf(),
        doc,
        None,
        written_len,
        opts.remove_on_release,
    );
    Ok(guard.with_pinned_dir(pinned))
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
        path = %crate::text::path(path),
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
    // Escaped as every message shows others' bytes, a quote included, so
    // that it stands inside the message's quotes (which are the error's).
    let quoted = crate::text::quoted_bytes(shown).to_string();
    let mut preview = quoted[1..quoted.len() - 1].to_owned();
    if content.len() > PREVIEW {
        preview.push('…');
    }
    Error::ForeignContent {
        path: path.to_path_buf(),
        size,
        preview,
    }
}

/// What a record's history (a last success, a last run) and an eviction's
/// fixed fields add to it at most, padding included: a unit test holds the
/// largest of them to it.
pub(crate) const HISTORY_ROOM: usize = 1024;

/// A job name this short always leaves its record far below the cap: every
/// other field is short and bounded (a hostname is at most 64 bytes), and a
/// JSON escape at most sextuples a byte. Longer names cost one encoding.
const SURELY_FITS: usize = 4096;

/// Refuses options whose record, with the longest history it may carry,
/// could be longer than [`MAX_RECORD_BYTES`]: a file that long is someone
/// else's by definition, so a record of ours must never reach it. Called
/// before the lock file is opened, so that nothing is created or locked.
pub(crate) fn check_record_fits(opts: &LockOptions, path: &Path) -> Result<()> {
    let Some(job) = opts.job.as_deref().filter(|job| job.len() > SURELY_FITS) else {
        return Ok(());
    };
    let doc = LockDocument::new(owner(opts), None, None);
    let size = doc.encode_then(<[u8]>::len) + HISTORY_ROOM;
    if size > MAX_RECORD_BYTES {
        return Err(too_large(path, size, job.len()));
    }
    Ok(())
}

/// This process's record, with the promises the options make.
pub(crate) fn owner(opts: &LockOptions) -> OwnerRecord {
    let mut owner = OwnerRecord::current(opts.job.as_deref(), opts.heartbeat_interval);
    owner.heartbeat_source = opts.heartbeat_source;
    owner.max_runtime_ms = opts.max_runtime.map(clock::millis);
    owner.kill_after_ms = opts.kill_after.map(clock::millis);
    owner.release = opts.release;
    owner.slot = opts.slot;
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
    claim: Option<&TickClaim>,
) -> Result<(LockDocument, usize)> {
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
    let now = clock::now();
    let last_success = previous_doc
        .as_ref()
        .and_then(|doc| doc.last_success)
        .filter(|&t| trust::possible(t, now));
    let mut last_run = previous_doc
        .as_ref()
        .and_then(|doc| doc.last_run.as_deref())
        .filter(|run| run.times().all(|t| trust::possible(t, now)))
        .map(|run| Box::new(run.clone()));
    let mut last_claimed_tick = previous_doc
        .as_ref()
        .and_then(|doc| doc.last_claimed_tick.clone());
    if let Some(claim) = claim {
        match claim.decide(now, last_claimed_tick.as_deref(), last_run.as_deref()) {
            TickDecision::TooLate { tick } => {
                return Err(Error::TooLate {
                    path: path.to_path_buf(),
                    tick,
                });
            }
            TickDecision::AlreadyRan { tick, run } => {
                return Err(Error::TickUsed {
                    path: path.to_path_buf(),
                    tick,
                    run,
                    claim: last_claimed_tick,
                });
            }
            TickDecision::Run { tick, unfinished } => {
                if let Some(unfinished) = unfinished {
                    let dead = unfinished.owner_dead(last_run.as_deref(), now);
                    last_run = Some(Box::new(dead));
                }
                last_claimed_tick = Some(Box::new(Claim::by(&owner, tick, now)));
            }
        }
    }
    // A record whose release was never going to be marked tells of no death.
    let dead_owner = previous_doc
        .filter(|doc| !doc.released && doc.owner.release == Release::Recorded)
        .map(|doc| doc.owner);
    let mut doc = LockDocument::new(owner, last_success, last_run);
    doc.last_claimed_tick = last_claimed_tick;
    if let Some(eviction) = eviction {
        eviction.record_into(&mut doc);
    }
    let write = |doc: &LockDocument| write_document(file, path, doc, previous.len());
    let mut written = write(&doc)?;
    // The evicted run's job name is the one field of another run's: its own
    // record fitted, but both names together may not. It is only a label.
    if written.is_err()
        && let Some(evicted) = doc.owner.evicted.as_deref_mut()
        && evicted.job.take().is_some()
    {
        written = write(&doc)?;
    }
    let written_len = match written {
        Ok(len) => len,
        Err(size) => {
            let job_len = doc.owner.job.as_deref().map_or(0, str::len);
            return Err(too_large(path, size, job_len));
        }
    };
    acquired(path, &doc.owner, None, dead_owner.as_ref(), started);
    Ok((doc, written_len))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::history::{LastRun, Outcome};
    use crate::record::Evicted;

    fn encoded_len(doc: &LockDocument) -> usize {
        doc.encode_then(<[u8]>::len)
    }

    /// The room left for history is enough for the longest one: every
    /// number at its longest, every optional field there.
    #[test]
    fn the_history_room_holds_the_longest_history_and_eviction() {
        let latest = UNIX_EPOCH + Duration::from_secs(253_402_300_799) - Duration::from_nanos(1);
        let mut owner = OwnerRecord::current(Some("nightly"), Some(Duration::MAX));
        let bare = encoded_len(&LockDocument::new(owner.clone(), None, None));
        owner.max_runtime_ms = Some(u64::MAX);
        owner.kill_after_ms = Some(u64::MAX);
        owner.evicted = Some(Box::new(Evicted {
            token: uuid::Uuid::max(),
            pid: u32::MAX,
            job: None,
            silent_ms: u64::MAX,
        }));
        let run = LastRun {
            started_at: latest,
            finished_at: latest,
            duration_seconds: -f64::MAX,
            exit_code: Some(i32::MIN),
            signal: Some(i32::MIN),
            outcome: Outcome::LeaseLost,
            consecutive_failures: u32::MAX,
            last_failure_at: Some(latest),
            tick: Some(latest),
            token: Some(uuid::Uuid::max().to_string()),
        };
        let mut longest = owner.clone();
        longest.pid = u32::MAX;
        longest.hostname = "h".repeat(64).into();
        let mut doc = LockDocument::new(owner, Some(latest), Some(Box::new(run)));
        doc.last_claimed_tick = Some(Box::new(Claim::by(&longest, latest, latest)));
        let full = encoded_len(&doc);
        assert!(
            full <= bare + HISTORY_ROOM,
            "{full} > {bare} + {HISTORY_ROOM}"
        );
    }

    /// A job name whose record could pass the cap is refused before anything
    /// is opened; the longest accepted one fits with its history.
    #[test]
    fn a_record_that_could_pass_the_cap_is_refused_up_front() {
        let path = Path::new("/nonexistent/job.lock");
        let mut opts = LockOptions::new();
        opts.job("j".repeat(MAX_RECORD_BYTES));
        assert!(matches!(
            check_record_fits(&opts, path),
            Err(Error::RecordTooLarge { job_len, max: MAX_RECORD_BYTES, .. })
                if job_len == MAX_RECORD_BYTES
        ));
        // Control characters take six bytes each in JSON.
        opts.job("\u{1}".repeat(MAX_RECORD_BYTES / 6));
        assert!(check_record_fits(&opts, path).is_err());
        opts.job("j".repeat(SURELY_FITS));
        assert!(check_record_fits(&opts, path).is_ok());
        opts.job("\u{1}".repeat(SURELY_FITS));
        let doc = LockDocument::new(owner(&opts), None, None);
        assert!(encoded_len(&doc) + HISTORY_ROOM <= MAX_RECORD_BYTES);
    }
}
