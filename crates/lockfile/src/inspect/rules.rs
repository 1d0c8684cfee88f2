//! The findings rules: what is worth telling about a file once its state
//! is decided, from its record, the kernel's holders and the clock; and
//! its state itself.

use std::time::{Duration, SystemTime};

use super::finding::{Finding, TimeField};
use super::liveness::{Liveness, holder_is_owner};
use super::options::{BelievedHistory, InspectOptions};
use super::report::{LockReport, LockState};
use crate::OwnerRecord;
use crate::record::{DecodeError, LockDocument, Release};
use crate::sys::{KernelHold, ProcessIdentity};
use crate::trust::Planted;

/// What the rules judge against: the options, who inspects, and the
/// scan's one clock reading.
pub(super) struct Context<'a> {
    pub(super) opts: &'a InspectOptions,
    pub(super) me: &'a ProcessIdentity,
    pub(super) now: SystemTime,
}

/// The findings of a file whose state, holders and `no_record` are decided:
/// a planted file first, then what its record says (its history, its
/// owner, its holders).
pub(super) fn record_findings(
    cx: &Context<'_>,
    doc: Option<LockDocument>,
    planted: Option<Planted>,
    liveness: Option<Liveness>,
    report: &mut LockReport,
) {
    if let Some(planted) = planted {
        report.findings.push(Finding::PlantedFile {
            owner_uid: planted.owner_uid,
            directory_owner_uid: planted.dir_owner_uid,
        });
    }
    let trusted = planted.is_none();
    if let Some(doc) = doc {
        let history = InspectOptions::believed_history(
            BelievedHistory::new(
                doc.last_run.as_deref().cloned(),
                doc.last_success,
                doc.last_claimed_tick.as_deref().cloned(),
            ),
            cx.now,
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
            let acquired = believed(cx, TimeField::Acquired, doc.owner.acquired_at, report);
            let beat = report
                .modified
                .filter(|&m| believed(cx, TimeField::Heartbeat, m, report));
            if trusted {
                report.age = acquired.then(|| doc.owner.age(cx.now));
                report.heartbeat_age = beat.map(|m| cx.now.duration_since(m).unwrap_or_default());
                owner_findings(cx, &doc.owner, liveness, report);
            }
        }
        if report.state == LockState::Held && report.no_record.is_none() {
            holder_findings(cx, &doc, report);
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
}

/// Whether `time` is possible; a `future_time` finding when it is not.
fn believed(cx: &Context<'_>, field: TimeField, time: SystemTime, report: &mut LockReport) -> bool {
    InspectOptions::believed(field, time, cx.now, &mut report.findings)
}

/// Findings about an unreleased record's owner.
/// `liveness` is `None` for a record from another host.
fn owner_findings(
    cx: &Context<'_>,
    owner: &OwnerRecord,
    liveness: Option<Liveness>,
    report: &mut LockReport,
) {
    if owner.hostname != cx.me.hostname {
        report.findings.push(Finding::ForeignHost {
            recorded_host: owner.hostname.to_string(),
            local_host: cx.me.hostname.to_string(),
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
        cx.opts.age_findings(owner, age, &mut report.findings);
    }
    let threshold = cx.opts.stale_after.or_else(|| {
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
fn holder_findings(cx: &Context<'_>, doc: &LockDocument, report: &mut LockReport) {
    if doc.owner.hostname != cx.me.hostname {
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
        .any(|h| holder_is_owner(h.pid, &doc.owner, cx.me));
    if doc.released || !matches {
        report.findings.push(Finding::HolderMismatch {
            recorded_pid: (!doc.released).then_some(doc.owner.pid),
            holders: report.holders.clone(),
        });
    }
}

/// The silence alarm's findings, from the report's last success.
pub(super) fn silence_findings(cx: &Context<'_>, report: &mut LockReport) {
    cx.opts
        .silence_findings(report.last_success, cx.now, &mut report.findings);
}

/// A file's state, from who holds its lock and what it holds.
pub(super) fn state(
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
