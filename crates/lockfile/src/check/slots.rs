//! A set of slots judged as one job (see [`crate::slot`]): each slot's own
//! verdicts (a hung or overrunning holder, a slot whose runs keep failing),
//! silence judged on the set's latest success, and `saturated` when every
//! slot has been held too long.

use std::time::{Duration, SystemTime};

use super::{CheckOptions, Health, Subject, Verdict, VerdictKind};
use crate::inspect::Severity;

impl CheckOptions {
    /// Judges `report` as [`judge`](Self::judge) does, or, when it is slot
    /// 0 of a set ([`Subject::slots`]), the set as one job: each slot's
    /// verdicts, named `slot K: …`; silence on the set's latest success and
    /// `failing` on its latest finished run (an old failure of a slot that
    /// no run has taken since is not the job's state); and
    /// [`saturated_after`](Self::saturated_after).
    pub fn judge_set<R: Subject + Clone>(&self, report: R, now: SystemTime) -> Health<R> {
        if report.slots().is_empty() {
            return self.judge(report, now);
        }
        let verdicts = verdicts(self, &report, now);
        Health::new(verdicts, report, now)
    }
}

/// The set with its slots.
fn with_slots<R: Subject>(report: &R) -> impl Iterator<Item = &R> {
    std::iter::once(report).chain(report.slots())
}

/// Every verdict on the set whose slot 0 `report` is, the worst first.
fn verdicts<R: Subject + Clone>(opts: &CheckOptions, report: &R, now: SystemTime) -> Vec<Verdict> {
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
    let latest_success = with_slots(report).max_by_key(|s| s.last_success());
    let latest_run = with_slots(report).max_by_key(|s| s.last_run().map(|run| run.finished_at));
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
            opts.judge(slot.alone(), now)
                .verdicts
                .into_iter()
                .filter(|v| kinds.contains(&v.kind))
                .map(|v| named(slot, v)),
        );
    }
    for slot in with_slots(report) {
        verdicts.extend(
            opts.judge(slot.alone(), now)
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
fn named<R: Subject>(slot: &R, v: Verdict) -> Verdict {
    let index = slot.slot().map_or(0, |s| s.index);
    Verdict::new(v.kind, v.severity, format!("slot {index}: {}", v.message))
}

/// `saturated` (warning): every one of the set's N slots (see
/// [`crate::slot::in_force`]) held for longer than `after`.
fn saturated<R: Subject>(report: &R, after: Duration) -> Option<Verdict> {
    let held = || with_slots(report).filter_map(Subject::held);
    let (count, n) = crate::slot::in_force(held().map(|(_, owner)| (true, owner)));
    let youngest = held().map(|(age, _)| age).min()?;
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
