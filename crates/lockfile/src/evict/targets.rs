//! Who is to be stopped: the owner, its descendants and every holder of the
//! kernel lock, each verified through a pidfd opened before anything about
//! it is read, so that no fact is taken from a process that reused a PID.
//! Steps 2 and 3 of the procedure.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::MetadataExt;

use crate::OwnerRecord;
use crate::error::EvictionRefused;
use crate::sys::{self, Pidfd, ProcessIdentity};

/// A process to stop, verified through its pidfd.
#[derive(Debug)]
pub(super) struct Target {
    pub(super) pidfd: Pidfd,
    /// Its real and effective uids, read while the pidfd was known to name it.
    uids: Option<(u32, u32)>,
}

impl Target {
    /// Whether it runs as `uid` alone: real and effective.
    pub(super) fn runs_as(&self, uid: u32) -> bool {
        self.uids == Some((uid, uid))
    }
}

/// Everyone to stop, and the one uid they all run as.
#[derive(Debug)]
pub(super) struct Targets {
    /// The owner first.
    pub(super) list: Vec<Target>,
    /// The owner's uid, which every target runs as, real and effective.
    pub(super) uid: u32,
}

/// Verifies the owner, its descendants and the lock's holders, each through
/// a pidfd opened before anything about it is read. Every holder of the
/// kernel lock must be in the owner's tree, and every process of the tree
/// must run as the owner's uid; as root, the lock file must belong to that
/// uid too.
pub(super) fn find_targets(
    owner: &OwnerRecord,
    start_time: u64,
    pid_namespace: u64,
    file: &File,
    id: &sys::Identity,
    me: &ProcessIdentity,
) -> Result<Targets, EvictionRefused> {
    use EvictionRefused as Why;
    let table = sys::process_table();
    let pid = resolve_pid(owner.pid, pid_namespace, me, &table)?;

    let pidfd = open_pidfd(pid)?.ok_or(Why::OwnerGone { pid })?;
    let stat = sys::process_stat(pid)
        .filter(|s| !s.exited)
        .ok_or(Why::OwnerGone { pid })?;
    let uids = sys::process_uids(pid);
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
    let owner_target = Target { pidfd, uids };
    let uid = owner_uid(&owner_target, file, me)?;
    let mut targets = vec![owner_target];
    adopt_descendants(&mut targets, &table)?;
    // Before the holders: another user's descriptors are not ours to read,
    // so its tree would only look unidentified.
    check_targets(&targets, uid, me)?;
    let tree: HashSet<u32> = targets.iter().map(|t| t.pidfd.pid()).collect();

    // Every process that holds the kernel lock: the table's takers, and
    // whoever holds it through an inherited or passed descriptor.
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
        // Opened before its descriptors are read: what they say is of the
        // process the pidfd names, if it still lives after.
        let Some(pidfd) = open_pidfd(holder)? else {
            continue;
        };
        let holds = sys::process_hold(holder, id.dev, id.ino).is_some();
        let readable = sys::descriptors_readable(holder);
        if pidfd.has_exited() {
            continue;
        }
        match (holds, readable) {
            // A taker the table still names that holds nothing now: the
            // lock lives on in inherited descriptors, and the PID may be
            // someone else's by now.
            (false, true) => continue,
            (false, false) => return Err(Why::UnidentifiedHolder { pid: Some(holder) }),
            // Sharing the owner's open file proves nothing about whose it
            // is: a descriptor can be passed to anyone (SCM_RIGHTS), or
            // outlive the run in a daemon that left its tree. Stopping such
            // a holder would let whoever wrote the record aim our signals.
            (true, _) => return Err(Why::UnrelatedHolder { pid: holder }),
        }
    }
    if holders == 0 {
        return Err(Why::UnidentifiedHolder { pid: None });
    }
    Ok(Targets { list: targets, uid })
}

/// The one uid the owner runs as, real and effective, which must be ours
/// unless we are root; as root, the lock file must belong to it too, so
/// that a record in another user's file cannot aim root's signals at a
/// third user's processes.
fn owner_uid(owner: &Target, file: &File, me: &ProcessIdentity) -> Result<u32, EvictionRefused> {
    let pid = owner.pidfd.pid();
    if pid == me.pid {
        return Err(EvictionRefused::WouldStopItself);
    }
    let uid = match owner.uids {
        Some((real, effective)) if real == effective => real,
        uids => {
            return Err(EvictionRefused::MixedUids {
                pid,
                uids,
                owner: uids.map(|(real, _)| real),
            });
        }
    };
    let euid = rustix::process::geteuid();
    if !euid.is_root() {
        if uid != euid.as_raw() {
            return Err(EvictionRefused::OtherUser {
                pid,
                uid: Some(uid),
            });
        }
        return Ok(uid);
    }
    let file_uid = file
        .metadata()
        .map_err(|source| EvictionRefused::Failed {
            what: "read the owner of the lock file held by",
            pid,
            source,
        })?
        .uid();
    if file_uid != uid {
        return Err(EvictionRefused::FileOfAnotherUser {
            file_uid,
            owner_uid: uid,
        });
    }
    Ok(uid)
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

/// Every target must run as the owner's `uid` (real and effective), and we
/// must not be among them. Root is no exception: a tree of mixed users is
/// not one run's.
fn check_targets(
    targets: &[Target],
    uid: u32,
    me: &ProcessIdentity,
) -> Result<(), EvictionRefused> {
    for target in targets {
        let pid = target.pidfd.pid();
        if pid == me.pid {
            return Err(EvictionRefused::WouldStopItself);
        }
        if !target.runs_as(uid) {
            return Err(EvictionRefused::MixedUids {
                pid,
                uids: target.uids,
                owner: Some(uid),
            });
        }
    }
    Ok(())
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
