//! `lockfile inspect --etcd --format prometheus`: leases as samples, one
//! sample set per lease, with the lock files' metric names where they mean
//! the same thing (and the same `# HELP`, so that node_exporter merges a
//! host's lock files and a fleet's leases into one family), an `engine`
//! label, and the lease's own figures: its fencing token and its TTL.
//!
//! As for lock files, `lockfile_lock_state` is a state set (every state of
//! a lease has a sample) and `lockfile_lock_inspect_error` is 0 for a lease
//! that was inspected; the others exist only while they are true.

use std::collections::HashSet;

use lockfile_lease::LeaseReport;
use lockfile_lease::report::LeaseState;

use crate::monitor::exposition::{self, Exposition, Family};
use crate::monitor::lock_metrics::{
    ACQUIRED, FINDING, HOLDER, INSPECT_ERROR, LAST_SUCCESS, SLOTS, SLOTS_HELD, STATE,
};

/// The states a lease can be in.
const STATES: [LeaseState; 2] = [LeaseState::Free, LeaseState::Held];

const FENCING_TOKEN: Family = Family::gauge(
    "lockfile_lease_fencing_token",
    "The fencing token of the lease's holder, while it is held.",
);
const TTL_REMAINING: Family = Family::gauge(
    "lockfile_lease_ttl_remaining_seconds",
    "What is left of the held lease's time to live, as its server counts it.",
);
const TTL: Family = Family::gauge(
    "lockfile_lease_ttl_seconds",
    "The time to live the held lease was granted.",
);

/// One lease's outcome: its report, or `None` when it could not be
/// inspected. `name` is `*` for a listing of every lease that failed.
pub(crate) struct Outcome<'a> {
    pub(crate) engine: &'a str,
    pub(crate) name: &'a str,
    pub(crate) report: Option<&'a LeaseReport>,
}

/// The samples of every outcome. A name given twice is exported once: a
/// repeated series would make the collector refuse the whole file. A set
/// of slots is exported lease by lease, as any lease is, plus the set's
/// size and how many hold it, on slot 0's name.
pub(crate) fn render(outcomes: &[Outcome<'_>]) -> String {
    let mut named = HashSet::new();
    let sets: Vec<(&str, &str, &LeaseReport)> = outcomes
        .iter()
        .filter_map(|o| Some((o.engine, o.name, o.report?)))
        .filter(|&(engine, lock, r)| !r.slots.is_empty() && named.insert((engine, lock)))
        .collect();
    let slots: Vec<Outcome<'_>> = sets
        .iter()
        .flat_map(|&(engine, _, r)| {
            r.slots.iter().map(move |slot| Outcome {
                engine,
                name: &slot.name,
                report: Some(slot),
            })
        })
        .collect();
    let mut seen = HashSet::new();
    let outcomes: Vec<&Outcome<'_>> = outcomes
        .iter()
        .chain(&slots)
        .filter(|o| seen.insert((o.engine, o.name)))
        .collect();
    let reports: Vec<(&str, &str, &LeaseReport)> = outcomes
        .iter()
        .filter_map(|o| Some((o.engine, o.name, o.report?)))
        .collect();
    let held = || {
        reports
            .iter()
            .filter(|(_, _, r)| r.state == LeaseState::Held)
    };
    let mut e = Exposition::default();
    e.family_of(
        &STATE,
        reports
            .iter()
            .flat_map(|&(engine, lock, r)| {
                STATES.iter().map(move |&s| {
                    let value = if r.state == s { 1.0 } else { 0.0 };
                    (
                        vec![("engine", engine), ("lock", lock), ("state", s.as_str())],
                        value,
                    )
                })
            })
            .collect(),
    );
    e.family_of(
        &ACQUIRED,
        held()
            .filter_map(|&(engine, lock, r)| {
                let owner = r.owner.as_ref()?;
                Some((
                    vec![("engine", engine), ("lock", lock)],
                    exposition::timestamp(owner.acquired_at),
                ))
            })
            .collect(),
    );
    e.family_of(
        &LAST_SUCCESS,
        reports
            .iter()
            .map(|&(engine, lock, r)| {
                let at = r.last_success.map_or(0.0, exposition::timestamp);
                (vec![("engine", engine), ("lock", lock)], at)
            })
            .collect(),
    );
    let holders: Vec<(&str, &str, String, String)> = held()
        .filter_map(|&(engine, lock, r)| {
            let owner = r.owner.as_ref()?;
            Some((
                engine,
                lock,
                owner.pid.to_string(),
                owner.hostname.to_string(),
            ))
        })
        .collect();
    e.family_of(
        &HOLDER,
        holders
            .iter()
            .map(|(engine, lock, pid, host)| {
                (
                    vec![
                        ("engine", *engine),
                        ("lock", *lock),
                        ("host", host.as_str()),
                        ("pid", pid.as_str()),
                    ],
                    1.0,
                )
            })
            .collect(),
    );
    e.family_of(
        &FENCING_TOKEN,
        held()
            .filter_map(|&(engine, lock, r)| {
                // A gauge is a float: tokens above 2^53 lose their last
                // digits here, never in `inspect --json`.
                #[allow(clippy::cast_precision_loss)]
                let token = r.fencing_token? as f64;
                Some((vec![("engine", engine), ("lock", lock)], token))
            })
            .collect(),
    );
    for (family, of) in [
        (
            &TTL_REMAINING,
            (|r: &LeaseReport| r.ttl_remaining) as fn(&LeaseReport) -> _,
        ),
        (&TTL, |r: &LeaseReport| r.ttl),
    ] {
        e.family_of(
            family,
            held()
                .filter_map(|&(engine, lock, r)| {
                    Some((
                        vec![("engine", engine), ("lock", lock)],
                        of(r)?.as_secs_f64(),
                    ))
                })
                .collect(),
        );
    }
    e.family_of(
        &FINDING,
        reports
            .iter()
            .flat_map(|&(engine, lock, r)| {
                let mut kinds = HashSet::new();
                r.findings
                    .iter()
                    .filter(move |f| kinds.insert(f.kind()))
                    .map(move |f| {
                        (
                            vec![
                                ("engine", engine),
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
    let in_force = |r: &LeaseReport| {
        lockfile::slot::in_force(
            r.with_slots()
                .map(|s| (s.state == LeaseState::Held, s.owner.as_ref())),
        )
    };
    e.family_of(
        &SLOTS,
        sets.iter()
            .map(|&(engine, lock, r)| {
                let labels = vec![("engine", engine), ("lock", lock)];
                (labels, in_force(r).1 as f64)
            })
            .collect(),
    );
    e.family_of(
        &SLOTS_HELD,
        sets.iter()
            .map(|&(engine, lock, r)| {
                let labels = vec![("engine", engine), ("lock", lock)];
                (labels, in_force(r).0 as f64)
            })
            .collect(),
    );
    e.family_of(
        &INSPECT_ERROR,
        outcomes
            .iter()
            .map(|o| {
                (
                    vec![("engine", o.engine), ("lock", o.name)],
                    if o.report.is_some() { 0.0 } else { 1.0 },
                )
            })
            .collect(),
    );
    e.into_string()
}
