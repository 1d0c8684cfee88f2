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
    let silence = |v: &Verdict| matches!(v.kind, VerdictKind::Silent | VerdictKind::NeverSucceeded);
    // The set is silent only when its latest success is: the slot that has
    // it speaks for the set, without a slot's name.
    let latest = report
        .with_slots()
        .max_by_key(|s| s.last_success)
        .expect("a set has slot 0");
    let mut verdicts: Vec<Verdict> = opts
        .judge(alone(latest), now)
        .verdicts
        .into_iter()
        .filter(silence)
        .collect();
    for slot in report.with_slots() {
        let index = slot
            .owner
            .as_ref()
            .and_then(|o| o.slot)
            .map_or(0, |s| s.index);
        verdicts.extend(
            opts.judge(alone(slot), now)
                .verdicts
                .into_iter()
                .filter(|v| !silence(v))
                .map(|v| Verdict::new(v.kind, v.severity, format!("slot {index}: {}", v.message))),
        );
    }
    verdicts.extend(
        opts.saturated_after
            .and_then(|after| saturated(report, after)),
    );
    verdicts.sort_by_key(|v| std::cmp::Reverse(v.severity));
    verdicts
}

/// `saturated` (warning): every one of the set's N slots (the largest N its
/// holders' records state) held for longer than `after`.
fn saturated(report: &LockReport, after: Duration) -> Option<Verdict> {
    let held: Vec<&LockReport> = report
        .with_slots()
        .filter(|s| s.state == crate::LockState::Held)
        .collect();
    let n = held
        .iter()
        .filter_map(|s| s.owner.as_ref()?.slot)
        .map(|s| usize::from(s.of))
        .max()?;
    let youngest = held.iter().map(|s| s.age.unwrap_or_default()).min()?;
    (held.len() >= n && youngest > after).then(|| {
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
