//! A set of slots judged as one job (see [`crate::slot`]): each slot's own
//! verdicts (a hung or overrunning holder, a slot whose runs keep failing),
//! silence judged on the set's latest success, and `saturated` when every
//! slot has been held too long.

use std::time::{Duration, SystemTime};

use super::{CheckOptions, Verdict, VerdictKind};
use crate::LockReport;
use crate::inspect::Severity;

/// Every verdict on the set whose slot 0 `report` is, the worst first.
pub(super) fn verdicts(opts: &CheckOptions, report: &LockReport, now: SystemTime) -> Vec<Verdict> {
    let of_set = |v: &Verdict| {
        matches!(
            v.kind,
            VerdictKind::Silent | VerdictKind::NeverSucceeded | VerdictKind::Failing
        )
    };
    // The set is silent only when its latest success is, and failing only
    // when its latest finished run is one of a failing streak: the slot
    // that has each speaks for the set (an old failure of a slot that no
    // run has taken since is not the job's state).
    let latest_success = report.with_slots().max_by_key(|s| s.last_success);
    let latest_run = report
        .with_slots()
        .max_by_key(|s| s.last_run.as_ref().map(|run| run.finished_at));
    let mut verdicts: Vec<Verdict> = Vec::new();
    for (slot, kinds) in [
        (
            latest_success,
            &[VerdictKind::Silent, VerdictKind::NeverSucceeded][..],
        ),
        (latest_run, &[VerdictKind::Failing][..]),
    ] {
        let Some(slot) = slot else { continue };
        verdicts.extend(
            opts.judge(alone(slot), now)
                .verdicts
                .into_iter()
                .filter(|v| kinds.contains(&v.kind))
                .map(|v| named(slot, v)),
        );
    }
    for slot in report.with_slots() {
        verdicts.extend(
            opts.judge(alone(slot), now)
                .verdicts
                .into_iter()
                .filter(|v| !of_set(v))
                .map(|v| named(slot, v)),
        );
    }
    verdicts.extend(
        opts.saturated_after
            .and_then(|after| saturated(report, after)),
    );
    verdicts.sort_by_key(|v| std::cmp::Reverse(v.severity));
    verdicts
}

/// `v`, its message naming the slot it is about: `slot 2: …`.
fn named(slot: &LockReport, v: Verdict) -> Verdict {
    let index = slot
        .owner
        .as_ref()
        .and_then(|o| o.slot)
        .map_or(0, |s| s.index);
    Verdict::new(v.kind, v.severity, format!("slot {index}: {}", v.message))
}

/// `saturated` (warning): every one of the set's N slots (the largest N its
/// holders' records state) held for longer than `after`.
fn saturated(report: &LockReport, after: Duration) -> Option<Verdict> {
    let held = || {
        report
            .with_slots()
            .filter(|s| s.state == crate::LockState::Held)
    };
    let (count, n) = crate::slot::in_force(held().map(|s| (true, s.owner.as_ref())));
    let youngest = held().map(|s| s.age.unwrap_or_default()).min()?;
    (count >= n && youngest > after).then(|| {
        Verdict::new(
            VerdictKind::Saturated,
            Severity::Warning,
            format!(
                "all {n} slots have been held for longer than {} (the most recent taken {} ago)",
                humantime::format_duration(after),
                humantime::format_duration(Duration::from_secs(youngest.as_secs()))
            ),
        )
    })
}

/// A slot's report without the set, for the verdicts on one lock file.
fn alone(report: &LockReport) -> LockReport {
    let mut one = report.clone();
    one.slots = Vec::new();
    one
}
