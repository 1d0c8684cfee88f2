//! Who is to be stopped: the owner, its descendants and every holder of the
//! kernel lock, each verified through a pidfd opened before anything about
//! it is read, so that no fact is taken from a process that reused a PID.
//! Steps 2 and 3 of the procedure.

use std::collections::{HashMap, HashSet};
use std::fs::File;

use super::refused::EvictionRefused;
use crate::OwnerRecord;
use crate::sys::{self, Pidfd, ProcessIdentity};

/// A process to stop, verified through its pidfd.
#[derive(Debug)]
pub(super) struct Target {
    pub(super) pidfd: Pidfd,
    /// Its real and effective uids, read while the pidfd was known to name it.
    uids: Option<(u32, u32)>,
}

/// Verifies the owner, its descendants and the lock's holders, each through
/// a pidfd opened before anything about it is read. The owner comes first.
pub(super) fn find_targets(
    owner: &OwnerRecord,
    start_time: u64,
    pid_namespace: u64,
    file: &File,
    id: &sys::Identity,
    me: &ProcessIdentity,
) -> Result<Vec<Target>, EvictionRefused> {
    use EvictionRefused as Why;
    let table = sys::process_table();
    let pid = resolve_pid(owner.pid, pid_namespace, me, &table)?;

    let pidfd = open_pidfd(pid)?.ok_or(Why::OwnerGone { pid })?;
    let stat = sys::process_stat(pid)
        .filter(|s| !s.exited)
        .ok_or(Why::OwnerGone { pid })?;
    let uids = sys::process_uids(pid);
    let owner_holds = sys::process_hold(pid, id.dev, id.ino).is_some();
    if pidfd.has_exited() {
        return Err(Why::OwnerGone { pid });
    }
    if stat.start_time != start_time {
        return Err(Why::PidReused {
            pid,
            recorded: start_time,
            found: stat.start_time,
        });
    }
    let mut targets = vec![Target { pidfd, uids }];
    adopt_descendants(&mut targets, &table)?;
    // Before the holders: another user's descriptors are not ours to read,
    // so its tree would only look unidentified.
    check_targets(&targets, me)?;
    let tree: HashSet<u32> = targets.iter().map(|t| t.pidfd.pid()).collect();

    // Every process that holds the kernel lock: the table's takers, and
    // whoever holds it through an inherited descriptor.
    let table_err = |source| Why::Failed {
        what: "read the kernel lock table to judge",
        pid,
        source,
    };
    let mut candidates = sys::processes_holding(id.dev, id.ino);
    if let sys::KernelHold::Held { pids: takers, .. } = sys::KernelLocks::snapshot()
        .map_err(table_err)?
        .hold(file, id.dev, id.ino)
    {
        for taker in takers {
            match u32::try_from(taker) {
                Ok(p) if p > 0 => candidates.push(p),
                // Outside our PID namespace: nothing can be verified of it.
                _ => return Err(Why::UnidentifiedHolder { pid: None }),
            }
        }
    }
    candidates.sort_unstable();
    candidates.dedup();
    let mut holders = 0;
    for holder in candidates {
        if tree.contains(&holder) {
            holders += usize::from(sys::process_hold(holder, id.dev, id.ino).is_some());
            continue;
        }
        let Some(pidfd) = open_pidfd(holder)? else {
            continue;
        };
        let holds = sys::process_hold(holder, id.dev, id.ino).is_some();
        let readable = sys::descriptors_readable(holder);
        let uids = sys::process_uids(holder);
        if pidfd.has_exited() {
            continue;
        }
        match (holds, readable) {
            // A taker the table still names that holds nothing now: the
            // lock lives on in inherited descriptors, and the PID may be
            // someone else's by now.
            (false, true) => continue,
            (false, false) => return Err(Why::UnidentifiedHolder { pid: Some(holder) }),
            (true, _) if !owner_holds => return Err(Why::UnrelatedHolder { pid: holder }),
            // It shares the owner's own lock (an exclusive flock is one
            // lock): it got the descriptor from the owner's run.
            (true, _) => {}
        }
        holders += 1;
        targets.push(Target { pidfd, uids });
    }
    if holders == 0 {
        return Err(Why::UnidentifiedHolder { pid: None });
    }
    // A holder outside the owner's tree brings its own descendants: all of
    // it is the hung run's.
    adopt_descendants(&mut targets, &table)?;
    check_targets(&targets, me)?;
    Ok(targets)
}

/// Adds the descendants of `targets`, from `table` (parent links), each
/// verified through its pidfd: its parent is a target whose own pidfd still
/// lives after the child's parent link was read. Returns how many were added.
pub(super) fn adopt_descendants(
    targets: &mut Vec<Target>,
    table: &[(u32, sys::ProcStat)],
) -> Result<usize, EvictionRefused> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (pid, stat) in table {
        children.entry(stat.parent).or_default().push(*pid);
    }
    let mut known: HashSet<u32> = targets.iter().map(|t| t.pidfd.pid()).collect();
    let before = targets.len();
    let mut next = 0;
    while next < targets.len() {
        let parent = targets[next].pidfd.pid();
        for &child in children.get(&parent).into_iter().flatten() {
            if !known.insert(child) {
                continue;
            }
            let Some(pidfd) = open_pidfd(child)? else {
                continue;
            };
            let is_child =
                sys::process_stat(child).is_some_and(|s| !s.exited && s.parent == parent);
            let uids = sys::process_uids(child);
            if is_child && !pidfd.has_exited() && !targets[next].pidfd.has_exited() {
                targets.push(Target { pidfd, uids });
            }
        }
        next += 1;
    }
    Ok(targets.len() - before)
}

/// Every target must be of our uid (or we root), and we not among them.
fn check_targets(targets: &[Target], me: &ProcessIdentity) -> Result<(), EvictionRefused> {
    for target in targets {
        let pid = target.pidfd.pid();
        if pid == me.pid {
            return Err(EvictionRefused::WouldStopItself);
        }
        if let Some(uid) = not_ours(target) {
            return Err(EvictionRefused::OtherUser { pid, uid });
        }
    }
    Ok(())
}

/// `Some` when the target is not ours to stop (it is of another uid, and we
/// are not root): that uid, when it could be read.
pub(super) fn not_ours(target: &Target) -> Option<Option<u32>> {
    let euid = rustix::process::geteuid();
    if euid.is_root() {
        return None;
    }
    let ours = euid.as_raw();
    match target.uids {
        Some((real, effective)) if real == ours && effective == ours => None,
        Some((real, effective)) => Some(Some(if real == ours { effective } else { real })),
        None => Some(None),
    }
}

/// Opens a pidfd; `None` when no process has the PID.
fn open_pidfd(pid: u32) -> Result<Option<Pidfd>, EvictionRefused> {
    match Pidfd::open(pid) {
        Ok(pidfd) => Ok(Some(pidfd)),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => Err(EvictionRefused::Unsupported {
            why: "this kernel has no pidfd_open(2) (Linux 5.3 or later), and signalling by PID could hit a process that reused it",
        }),
        Err(source) => Err(EvictionRefused::Failed {
            what: "open a pidfd for",
            pid,
            source,
        }),
    }
}

/// The owner's PID in our namespace. A record from another PID namespace
/// (a container's) is resolved through the processes in that namespace whose
/// innermost PID is the recorded one.
fn resolve_pid(
    pid: u32,
    pid_namespace: u64,
    me: &ProcessIdentity,
    table: &[(u32, sys::ProcStat)],
) -> Result<u32, EvictionRefused> {
    if me.pid_namespace == Some(pid_namespace) {
        return Ok(pid);
    }
    let mut found = table.iter().map(|(p, _)| *p).filter(|&p| {
        sys::pid_namespace(Some(p)) == Some(pid_namespace) && sys::innermost_pid(p) == Some(pid)
    });
    match (found.next(), found.next()) {
        (Some(here), None) => Ok(here),
        _ => Err(EvictionRefused::OtherPidNamespace { pid_namespace }),
    }
}
