//! At most N holders of a name across hosts: N leases, one per slot, each
//! with its own owner record and fencing token, taken through [`Engine`]
//! alone, so that every engine has slots without a line of its own.
//!
//! Slot 0 is the lease `NAME` itself; slot `k` is the lease `NAME@k`, as a
//! lock file's slots are named (see [`lockfile::slot`]). N is each
//! holder's own: a holder asking for N takes one of slots `0..N`, and the
//! number of holders never exceeds the largest N in force; `N = 1` is the
//! plain lease.
//!
//! **Waiting for any slot.** An engine waits on one lease at a time (a
//! watch, a notification, a poll). A waiter tries every slot, then waits on
//! one of them with the engine's own wait for at most
//! [`poll_interval`] of the TTL (a second at
//! most), then tries every slot again, taking the slots in turn: a freed
//! slot is taken at once when it is the one waited on, and otherwise within
//! that interval. Each try is a whole [`Engine::acquire`] (a connection,
//! and on etcd a lease grant and revoke), so a round costs N of them: a
//! large N under a lease costs the server N acquisitions a second per
//! waiter.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use lockfile::check::{CheckOptions, Health};
use lockfile::record::Slot;
use lockfile::slot::SlotCount;
use lockfile::wait::Wait;

use crate::engine::{Engine, poll_interval};
use crate::lease::Lease;
use crate::report::LeaseState;
use crate::request::LeaseRequest;
use crate::{Error, LeaseReport, Result};

/// The lease name of slot `index` of `name`: `name` itself for slot 0,
/// else `name@index`.
///
/// ```
/// assert_eq!(lockfile_lease::slots::slot_name("backup", 0), "backup");
/// assert_eq!(lockfile_lease::slots::slot_name("backup", 2), "backup@2");
/// ```
pub fn slot_name(name: &str, index: u16) -> String {
    match index {
        0 => name.to_owned(),
        k => format!("{name}@{k}"),
    }
}

/// Takes one of `slots` slot leases of `name` on `engine` (see the
/// [module](self)), as `request` says: without waiting, or waiting for any
/// slot to come free. The lease's record says which slot it is
/// ([`OwnerRecord::slot`](lockfile::OwnerRecord::slot)).
///
/// # Errors
///
/// [`Error::SlotsHeld`] naming every slot's holder when all are held (and
/// the wait, if any, ended); a refused name (the longest slot's name must be
/// a valid name too); any other error of [`Engine::acquire`] on a slot.
/// A tick's claim is refused ([`Error::InvalidOptions`]): a run history is
/// one lease's, and slots are many.
pub fn acquire_slot(
    engine: &dyn Engine,
    name: &str,
    slots: SlotCount,
    request: &LeaseRequest,
) -> Result<Box<dyn Lease>> {
    let count = slots.get();
    crate::name::check_name(name)?;
    crate::name::check_name(&slot_name(name, count - 1))?;
    if request.tick.is_some() {
        return Err(Error::InvalidOptions {
            op: crate::error::Operation::Acquire,
            key: name.to_owned(),
            reason: "a tick's claim lives in one lease's run history, and slots are many: slots do not claim ticks".to_owned(),
        });
    }
    let started = Instant::now();
    let mut attempt = request.clone();
    let interval = poll_interval(request.ttl.unwrap_or(Duration::from_secs(10)));
    let mut turn = 0u16;
    loop {
        let mut holders = Vec::with_capacity(usize::from(count));
        for index in 0..count {
            // A round of N acquires takes a while: a bounded wait ends on
            // time, naming the holders seen so far.
            if let Wait::Until(deadline) = request.wait
                && index > 0
                && Instant::now() >= deadline
            {
                break;
            }
            attempt.wait = Wait::No;
            match try_slot(engine, name, index, count, &mut attempt)? {
                Ok(lease) => return Ok(lease),
                Err(contended) => holders.push(contended),
            }
        }
        let now = Instant::now();
        let until = match request.wait {
            Wait::No => None,
            Wait::Until(deadline) if deadline <= now => {
                return Err(held(name, count, holders, Some(now - started)));
            }
            Wait::Until(deadline) => Some(deadline.min(now + interval)),
            Wait::Forever => Some(now + interval),
        };
        let Some(until) = until else {
            return Err(held(name, count, holders, None));
        };
        // One slot, in turn, waited for the engine's way.
        attempt.wait = Wait::Until(until);
        if let Ok(lease) = try_slot(engine, name, turn, count, &mut attempt)? {
            return Ok(lease);
        }
        turn = (turn + 1) % count;
    }
}

/// One attempt on slot `index`: the lease, or the contention that names its
/// holder; any other error ends the acquire.
fn try_slot(
    engine: &dyn Engine,
    name: &str,
    index: u16,
    count: u16,
    request: &mut LeaseRequest,
) -> Result<std::result::Result<Box<dyn Lease>, Error>> {
    request.slot = Some(Slot { index, of: count });
    match engine.acquire(&slot_name(name, index), request) {
        Ok(lease) => Ok(Ok(lease)),
        Err(e) if e.is_contended() => Ok(Err(e)),
        Err(e) => Err(e),
    }
}

/// Inspects the lease on `name` with its slots, when it is slot 0 of a set:
/// the leases `NAME@1` … `NAME@(N-1)`, each kept when its record says it is
/// that slot or when it is free (a released lease keeps no record). N is
/// the largest its slots' holders record (at most 1,024), found from the
/// records, never told: when slot 0 is free and so says nothing, the set is
/// looked for in the listing of every lease ([`Engine::inspect_all`]).
///
/// # Errors
///
/// As [`Engine::inspect`] of `name`; a slot that cannot be inspected is
/// left out.
pub fn inspect_slots(engine: &dyn Engine, name: &str) -> Result<LeaseReport> {
    let mut report = engine.inspect(name)?;
    let mut n = believed_of(&report, 0);
    if n == 0 {
        let listed = engine.inspect_all().ok().map(gather);
        return Ok(listed
            .and_then(|all| all.into_iter().find(|r| r.name == name))
            .unwrap_or(report));
    }
    let mut index = 1;
    while index < n {
        if let Ok(slot) = engine.inspect(&slot_name(name, index)) {
            n = n.max(believed_of(&slot, index));
            if is_slot(&slot, index) {
                report.slots.push(slot);
            }
        }
        index += 1;
    }
    Ok(report)
}

/// Inspects the lease on `name` with its slots ([`inspect_slots`]) and
/// judges it now, as [`Engine::check`] does, or, when it is slot 0 of a
/// set, the set as one job ([`CheckOptions::judge_set`]).
///
/// # Errors
///
/// As [`inspect_slots`]: a check says `UNKNOWN` for them.
pub fn check(engine: &dyn Engine, name: &str, opts: &CheckOptions) -> Result<Health<LeaseReport>> {
    let now = SystemTime::now();
    let report = inspect_slots(engine, name)?.judged(opts.inspect_options(), now);
    Ok(opts.judge_set(report, now))
}

/// Gathers a listing of leases ([`Engine::inspect_all`]): each slot's lease
/// (`NAME@K`, its record saying it is slot K, or free with K below the N of
/// its set's holders) moves under its slot 0's report. Everything else
/// keeps its place.
pub fn gather(reports: Vec<LeaseReport>) -> Vec<LeaseReport> {
    let mut n_of: HashMap<String, u16> = HashMap::new();
    for report in &reports {
        let (base, index) = base_of(&report.name).unwrap_or((report.name.as_str(), 0));
        let n = believed_of(report, index);
        if n > 0 {
            let most = n_of.entry(base.to_owned()).or_default();
            *most = (*most).max(n);
        }
    }
    let mut out: Vec<LeaseReport> = Vec::with_capacity(reports.len());
    let mut slots: Vec<(String, LeaseReport)> = Vec::new();
    for report in reports {
        match base_of(&report.name) {
            Some((base, index))
                if n_of.get(base).is_some_and(|&n| index < n) && is_slot(&report, index) =>
            {
                slots.push((base.to_owned(), report));
            }
            _ => out.push(report),
        }
    }
    let at: HashMap<String, usize> = out
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.clone(), i))
        .collect();
    for (base, slot) in slots {
        match at.get(&base) {
            Some(&i) => out[i].slots.push(slot),
            None => out.push(slot),
        }
    }
    for report in &mut out {
        report
            .slots
            .sort_by_key(|s| base_of(&s.name).map(|(_, i)| i));
    }
    out
}

/// `NAME@K` → (`NAME`, K), for 1 ≤ K < 1,024 written without leading
/// zeros: the names [`slot_name`] gives.
fn base_of(name: &str) -> Option<(&str, u16)> {
    let (base, digits) = name.rsplit_once('@')?;
    if base.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index: u16 = digits.parse().ok()?;
    (index < lockfile::slot::MAX_SLOTS).then_some((base, index))
}

/// The N that the holder of slot `index` recorded, when it is believed:
/// its record names that slot, below an N of at most 1,024. Else 0.
fn believed_of(report: &LeaseReport, index: u16) -> u16 {
    report
        .owner
        .as_ref()
        .and_then(|o| o.slot)
        .filter(|s| s.index == index && s.index < s.of && s.of <= lockfile::slot::MAX_SLOTS)
        .map_or(0, |s| s.of)
}

/// Whether the lease is slot `index` of a set: its record says so, or it
/// is free.
fn is_slot(report: &LeaseReport, index: u16) -> bool {
    match report.owner.as_ref() {
        Some(owner) => owner.slot.is_some_and(|s| s.index == index),
        None => report.state == LeaseState::Free,
    }
}

fn held(name: &str, count: u16, holders: Vec<Error>, waited: Option<Duration>) -> Error {
    Error::SlotsHeld {
        name: name.to_owned(),
        count,
        waited,
        holders,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Holding;

    fn held(name: &str, slot: Option<(u16, u16)>) -> LeaseReport {
        let mut owner = lockfile::OwnerRecord::current(Some("job"), None);
        owner.slot = slot.map(|(index, of)| Slot { index, of });
        let value = serde_json::to_vec(&owner).unwrap();
        LeaseReport::free("test", name, name).held(Holding {
            value: &value,
            fencing_token: 1,
            lease_id: None,
            ttl: None,
            ttl_remaining: None,
        })
    }

    fn names(reports: &[LeaseReport]) -> Vec<(String, Vec<String>)> {
        reports
            .iter()
            .map(|r| {
                (
                    r.name.clone(),
                    r.slots.iter().map(|s| s.name.clone()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn slot_names_parse_back_and_nothing_else_does() {
        for index in [1, 9, 10, 1023] {
            assert_eq!(base_of(&slot_name("a@b", index)), Some(("a@b", index)));
        }
        for name in [
            "x", "x@", "@1", "x@0", "x@01", "x@1024", "x@+1", "x@1a", "x@1@",
        ] {
            assert_eq!(base_of(name), None, "{name}");
        }
    }

    #[test]
    fn a_listing_gathers_slots_whose_records_say_so_and_free_ones_below_n() {
        let listing = vec![
            held("gpu", Some((0, 3))),
            held("gpu@1", Some((1, 3))),
            LeaseReport::free("test", "gpu@2", "gpu@2"),
            // Free, but at or above N: not a slot of this set.
            LeaseReport::free("test", "gpu@3", "gpu@3"),
            // Held by a plain holder, or claiming another slot: its own entry.
            held("gpu@5", None),
            held("other@1", Some((2, 3))),
            held("plain", None),
            LeaseReport::free("test", "plain@1", "plain@1"),
        ];
        let gathered = gather(listing);
        assert_eq!(
            names(&gathered),
            [
                (
                    "gpu".to_owned(),
                    vec!["gpu@1".to_owned(), "gpu@2".to_owned()]
                ),
                ("gpu@3".to_owned(), vec![]),
                ("gpu@5".to_owned(), vec![]),
                ("other@1".to_owned(), vec![]),
                ("plain".to_owned(), vec![]),
                ("plain@1".to_owned(), vec![]),
            ]
        );
    }

    #[test]
    fn slots_whose_slot_0_is_missing_stay_entries_of_their_own() {
        let gathered = gather(vec![held("gpu@1", Some((1, 2)))]);
        assert_eq!(names(&gathered), [("gpu@1".to_owned(), vec![])]);
    }
}
