//! The tree of processes below this one, read from `/proc`: what the stop
//! sequence signals, what a wrapper waits for, and what the keeper kills
//! once its wrapper is gone.

use std::sync::atomic::{AtomicI32, Ordering};

use lockfile::process::ProcessHandle;
use rustix::process::{Pid, WaitOptions};

/// The keeper of this wrapper's COMMAND (see `keeper`), once spawned: a
/// process of ours, in the tree but never one of its targets.
static KEEPER: AtomicI32 = AtomicI32::new(0);

/// Leaves `keeper` out of [`descendants`] from now on.
pub(crate) fn set_keeper(keeper: Pid) {
    KEEPER.store(keeper.as_raw_nonzero().get(), Ordering::Relaxed);
}

/// The children of `parent` (of each of its threads), from
/// `/proc/PID/task/TID/children`.
fn children_of(parent: Pid) -> Vec<Pid> {
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", parent.as_raw_nonzero())) else {
        return found;
    };
    for task in tasks.flatten() {
        let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        found.extend(
            children
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .filter_map(Pid::from_raw),
        );
    }
    found
}

/// Every living descendant of this process but the keeper, read down the
/// tree.
pub(crate) fn descendants() -> Vec<Pid> {
    let keeper = Pid::from_raw(KEEPER.load(Ordering::Relaxed));
    let mut found: Vec<Pid> = Vec::new();
    let mut queue = vec![rustix::process::getpid()];
    while let Some(parent) = queue.pop() {
        for pid in children_of(parent) {
            if !found.contains(&pid) && !queue.contains(&pid) {
                queue.push(pid);
                if Some(pid) != keeper {
                    found.push(pid);
                }
            }
        }
    }
    found
}

/// Every descendant of this process, each behind a handle that a reused
/// PID cannot redirect, and each verified to be ours: a child of ours has
/// its PID until we reap it, so it needs no more; a deeper one is believed
/// to be the child of its parent only while both are seen alive after
/// `/proc` said so.
pub(crate) fn verified_descendants() -> Vec<ProcessHandle> {
    let me = rustix::process::getpid();
    let mut found: Vec<ProcessHandle> = children_of(me)
        .into_iter()
        .filter_map(|pid| ProcessHandle::open(pid.as_raw_nonzero().get().unsigned_abs()).ok())
        .collect();
    let mut next = 0;
    while next < found.len() {
        let parent = found[next].pid();
        let Some(parent_pid) = i32::try_from(parent).ok().and_then(Pid::from_raw) else {
            next += 1;
            continue;
        };
        for pid in children_of(parent_pid) {
            let pid = pid.as_raw_nonzero().get().unsigned_abs();
            if found.iter().any(|h| h.pid() == pid) {
                continue;
            }
            let Ok(child) = ProcessHandle::open(pid) else {
                continue;
            };
            // The child's parent, read while the child lived, then the
            // parent seen alive after that read: so `parent` was still our
            // process, not another that reused its PID.
            if child.parent() == Some(parent) && !found[next].has_exited() {
                found.push(child);
            }
        }
        next += 1;
    }
    found
}

/// Whether any child is still alive, reaping those that already exited.
pub(crate) fn has_children() -> bool {
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some(_)) | Err(rustix::io::Errno::INTR) => {}
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}
