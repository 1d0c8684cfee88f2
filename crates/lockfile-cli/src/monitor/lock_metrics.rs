//! `lockfile inspect --format prometheus`: the state of lock files as
//! samples, whoever holds them and whether or not a run writes metrics of
//! its own. This is the truth at the moment of the scrape, where a run's
//! `lockfile_run_running` is what the run last wrote (a SIGKILLed wrapper
//! leaves 1 behind).
//!
//! `lockfile_lock_state` is a state set: every state of every lock has a
//! sample, 1 for the current one and 0 for the others, so that a selector
//! such as `lockfile_lock_state{state="stale"} == 1` always has a series to
//! compare, and a lock that stops being held changes a value rather than
//! making a series disappear. Likewise `lockfile_lock_inspect_error` is 0
//! for a path that was inspected. The others exist only while they are
//! true: a holder, a finding, an acquisition time.

use std::collections::HashSet;
use std::path::PathBuf;

use lockfile::{LockReport, LockState};

use crate::monitor::exposition::{self, Exposition, Family};

const STATES: [LockState; 6] = [
    LockState::Absent,
    LockState::Free,
    LockState::Held,
    LockState::Stale,
    LockState::Debris,
    LockState::Undecided,
];

pub(crate) const STATE: Family = Family::gauge(
    "lockfile_lock_state",
    "1 for the lock's current state (a lock file: absent, free, held, stale, debris, undecided; a lease: free, held), 0 for the others.",
);
pub(crate) const ACQUIRED: Family = Family::gauge(
    "lockfile_lock_acquired_timestamp_seconds",
    "When the recorded owner took the lock, while its record is not released (a lease: while held).",
);
const HEARTBEAT: Family = Family::gauge(
    "lockfile_lock_heartbeat_timestamp_seconds",
    "The last heartbeat of a held or stale lock (the file's modification time).",
);
pub(crate) const LAST_SUCCESS: Family = Family::gauge(
    "lockfile_lock_last_success_timestamp_seconds",
    "The last success recorded for the lock (0: never).",
);
pub(crate) const HOLDER: Family = Family::gauge(
    "lockfile_lock_holder",
    "1 for each process that holds the lock (a lease: its recorded holder, with its host).",
);
pub(crate) const FINDING: Family = Family::gauge(
    "lockfile_lock_finding",
    "1 for each kind of finding about the lock, with its severity.",
);
pub(crate) const INSPECT_ERROR: Family = Family::gauge(
    "lockfile_lock_inspect_error",
    "1 when the path could not be inspected, 0 when it was.",
);

pub(crate) const SLOTS: Family = Family::gauge(
    "lockfile_lock_slots",
    "For slot 0 of a set of slots (run --slots; a lease: NAME): how many slots there are, the largest N its holders' records state.",
);
pub(crate) const SLOTS_HELD: Family = Family::gauge(
    "lockfile_lock_slots_held",
    "For slot 0 of a set of slots (run --slots; a lease: NAME): how many of its slots are held.",
);

/// A set's slots held and its N ([`lockfile::slot::in_force`]).
fn in_force(r: &LockReport) -> (usize, usize) {
    lockfile::slot::in_force(
        r.with_slots()
            .map(|s| (s.state == LockState::Held, s.owner.as_ref())),
    )
}

/// The samples of every outcome. A path given twice (or a file and its
/// directory) is exported once: a repeated series would make the collector
/// refuse the whole file.
pub(crate) fn render(outcomes: &[(PathBuf, lockfile::Result<LockReport>)]) -> String {
    let mut seen = HashSet::new();
    // A set of slots is exported slot by slot, each under its own file's
    // path, as any lock file is, plus the set's size and how many hold it.
    let outcomes: Vec<(String, Option<&LockReport>)> = outcomes
        .iter()
        .flat_map(|(path, r)| {
            let slots = r.as_ref().map(|r| &r.slots[..]).unwrap_or_default();
            std::iter::once((path, r.as_ref().ok()))
                .chain(slots.iter().map(|slot| (&slot.path, Some(slot))))
        })
        .filter(|(path, _)| seen.insert((*path).clone()))
        .map(|(path, r)| (path.to_string_lossy().into_owned(), r))
        .collect();
    let reports: Vec<(&str, &LockReport)> = outcomes
        .iter()
        .filter_map(|(lock, r)| Some((lock.as_str(), (*r)?)))
        .collect();

    let mut e = Exposition::default();
    e.family_of(
        &STATE,
        reports
            .iter()
            .flat_map(|&(lock, r)| {
                STATES.iter().map(move |&s| {
                    let value = if r.state == s { 1.0 } else { 0.0 };
                    (vec![("lock", lock), ("state", s.as_str())], value)
                })
            })
            .collect(),
    );
    e.family_of(
        &ACQUIRED,
        reports
            .iter()
            .filter_map(|&(lock, r)| {
                let owner = r.owner.as_ref().filter(|_| !r.released)?;
                Some((
                    vec![("lock", lock)],
                    exposition::timestamp(owner.acquired_at),
                ))
            })
            .collect(),
    );
    e.family_of(
        &HEARTBEAT,
        reports
            .iter()
            .filter(|(_, r)| r.heartbeat_age.is_some())
            .filter_map(|&(lock, r)| {
                Some((vec![("lock", lock)], exposition::timestamp(r.modified?)))
            })
            .collect(),
    );
    e.family_of(
        &LAST_SUCCESS,
        reports
            .iter()
            .map(|&(lock, r)| {
                let at = r.last_success.map_or(0.0, exposition::timestamp);
                (vec![("lock", lock)], at)
            })
            .collect(),
    );
    let pids: Vec<(&str, String)> = reports
        .iter()
        .flat_map(|&(lock, r)| {
            let mut pids: Vec<u32> = r.holders.iter().map(|h| h.pid).collect();
            pids.sort_unstable();
            pids.dedup();
            pids.into_iter().map(move |pid| (lock, pid.to_string()))
        })
        .collect();
    e.family_of(
        &HOLDER,
        pids.iter()
            .map(|(lock, pid)| (vec![("lock", *lock), ("pid", pid.as_str())], 1.0))
            .collect(),
    );
    e.family_of(
        &FINDING,
        reports
            .iter()
            .flat_map(|&(lock, r)| {
                let mut kinds = HashSet::new();
                r.findings
                    .iter()
                    .filter(move |f| kinds.insert(f.kind()))
                    .map(move |f| {
                        (
                            vec![
                                ("lock", lock),
                                ("kind", f.kind()),
                                ("severity", f.severity().as_str()),
                            ],
                            1.0,
                        )
                    })
            })
            .collect(),
    );
    e.family_of(
        &SLOTS,
        reports
            .iter()
            .filter(|(_, r)| !r.slots.is_empty())
            .map(|&(lock, r)| (vec![("lock", lock)], in_force(r).1 as f64))
            .collect(),
    );
    e.family_of(
        &SLOTS_HELD,
        reports
            .iter()
            .filter(|(_, r)| !r.slots.is_empty())
            .map(|&(lock, r)| (vec![("lock", lock)], in_force(r).0 as f64))
            .collect(),
    );
    e.family_of(
        &INSPECT_ERROR,
        outcomes
            .iter()
            .map(|(lock, r)| {
                (
                    vec![("lock", lock.as_str())],
                    if r.is_some() { 0.0 } else { 1.0 },
                )
            })
            .collect(),
    );
    e.into_string()
}
