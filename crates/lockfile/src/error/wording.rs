//! The words for processes and their uids in the contention and eviction
//! messages: what a message says when a figure could not be read, kept out
//! of the variants' attributes so that those stay one line each.

use crate::{Holder, OwnerRecord};

/// A lock's holder: its record, or, when it wrote none, the processes the
/// kernel names (`a holder that wrote no owner record: pid 18923 (flock)`);
/// then why it was not evicted, when an eviction was asked for.
pub(super) fn holder(
    owner: Option<&OwnerRecord>,
    holders: &[Holder],
    not_evicted: Option<String>,
) -> String {
    let mut said = OwnerRecord::describe(owner).to_string();
    if owner.is_none() && !holders.is_empty() {
        let pids: Vec<String> = holders.iter().map(Holder::to_string).collect();
        said.push_str(": ");
        said.push_str(&pids.join(", "));
    }
    if let Some(why) = not_evicted {
        said.push_str("; not evicted: ");
        said.push_str(&why);
    }
    said
}

/// Every slot held: the first few holders by slot, and how many more.
pub(super) fn slots_held(
    path: &std::path::Path,
    count: u16,
    holders: &[crate::slot::SlotHolder],
    waited: Option<std::time::Duration>,
) -> String {
    const NAMED: usize = 3;
    let mut said = match waited {
        // Whole seconds, as every message of a wait says.
        Some(waited) if count == 1 => format!(
            "gave up waiting for the one slot of `{}` after {}: ",
            crate::text::path(path),
            humantime::format_duration(std::time::Duration::from_secs(waited.as_secs()))
        ),
        Some(waited) => format!(
            "gave up waiting for any of the {count} slots of `{}` after {}: ",
            crate::text::path(path),
            humantime::format_duration(std::time::Duration::from_secs(waited.as_secs()))
        ),
        None if count == 1 => format!("the one slot of `{}` is held: ", crate::text::path(path)),
        None => format!(
            "all {count} slots of `{}` are held: ",
            crate::text::path(path)
        ),
    };
    let named: Vec<String> = holders
        .iter()
        .take(NAMED)
        .map(|h| {
            format!(
                "slot {} by {}",
                h.slot,
                holder(h.owner.as_deref(), &h.holders, None)
            )
        })
        .collect();
    said.push_str(&named.join("; "));
    if holders.len() > NAMED {
        said.push_str(&format!("; and {} more", holders.len() - NAMED));
    }
    said
}

/// A holder the kernel names by PID or not at all.
pub(super) fn unidentified(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("pid {pid}: its descriptors are not ours to read"),
        None => "the kernel names none that is visible from here".to_owned(),
    }
}

/// A uid, when it could be read.
pub(super) fn uid(uid: Option<u32>) -> String {
    match uid {
        Some(uid) => format!("uid {uid}"),
        None => "uid unknown".to_owned(),
    }
}

/// A process's real and effective uids, when they could be read.
pub(super) fn uids(uids: Option<(u32, u32)>) -> String {
    match uids {
        Some((real, effective)) => format!("real uid {real}, effective uid {effective}"),
        None => "uids that cannot be read".to_owned(),
    }
}

/// The uid a run's owner runs as, when it runs as one.
pub(super) fn owner_uid(owner: Option<u32>) -> String {
    match owner {
        Some(uid) => format!("the owner's uid {uid}"),
        None => "the owner's one uid".to_owned(),
    }
}

/// The stopped processes still alive when a wait ended.
pub(super) fn survivors(survivors: &[u32]) -> String {
    if survivors.is_empty() {
        return "another process took it first".to_owned();
    }
    let pids: Vec<String> = survivors.iter().map(|p| format!("pid {p}")).collect();
    format!("still alive: {}", pids.join(", "))
}
