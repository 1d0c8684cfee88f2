//! Shared locks (`LockOptions::shared`, flock(1)'s `-s`): held together with
//! other shared holders, excluding and excluded by exclusive ones, ours and
//! util-linux flock(1)'s in every combination; no record is ever written, and
//! `inspect` lists every holder.

use std::path::Path;
use std::time::{Duration, Instant};

use lockfile::inspect::{Content, NoRecord};
use lockfile::{Error, LockGuard, LockOptions, LockState};

use crate::support::{
    ChildHolder, FlockHolder, assert_acquirable, flock_try, lock_path, require_flock, tempdir,
};

fn shared() -> LockOptions {
    let mut opts = LockOptions::new();
    opts.shared(true);
    opts
}

#[test]
fn shared_holders_hold_together_and_exclude_an_exclusive_one_both_ways() {
    let dir = tempdir();
    let path = lock_path(&dir, "cache.lock");
    let a = shared().try_acquire(&path).unwrap();
    let b = shared().try_acquire(&path).unwrap();
    assert_eq!(a.no_record(), Some(NoRecord::Shared));
    assert_eq!(b.no_record(), Some(NoRecord::Shared));
    assert_eq!(std::fs::read(&path).unwrap(), b"", "no record is written");

    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert!(
        matches!(err, Error::Contended { owner: None, .. }),
        "{err:?}"
    );
    drop(a);
    assert!(LockGuard::try_acquire(&path).unwrap_err().is_contended());
    b.release().unwrap();

    // And the other way: an exclusive holder keeps shared requests out, and
    // the error names it.
    let writer = LockOptions::new().job("writer").try_acquire(&path).unwrap();
    let err = shared().try_acquire(&path).unwrap_err();
    assert!(err.is_contended(), "{err:?}");
    assert_eq!(err.owner().unwrap().token, writer.record().token);
    writer.release().unwrap();
    shared().try_acquire(&path).unwrap().release().unwrap();
    assert_acquirable(&path);
}

#[test]
fn a_bounded_shared_wait_gets_the_lock_when_the_exclusive_holder_lets_go() {
    let dir = tempdir();
    let path = lock_path(&dir, "cache.lock");
    let (holder, _) = ChildHolder::hold(&path, "writer");
    let started = Instant::now();
    let err = shared()
        .timeout(Duration::from_millis(50))
        .acquire(&path)
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(err.owner().unwrap().pid, holder.pid());

    let waiter = std::thread::spawn({
        let path = path.clone();
        move || shared().timeout(Duration::from_secs(20)).acquire(&path)
    });
    std::thread::sleep(Duration::from_millis(50));
    holder.kill();
    let guard = waiter.join().unwrap().unwrap();
    assert_eq!(guard.no_record(), Some(NoRecord::Shared));
}

#[test]
fn shared_and_exclusive_interoperate_with_flock_1_in_every_combination() {
    require_flock();
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");

    // Ours shared: flock -s joins, flock -x is kept out.
    let ours = shared().try_acquire(&path).unwrap();
    assert_eq!(flock_try("-s", &path), 0);
    assert_eq!(flock_try("-x", &path), 1);
    drop(ours);

    // Ours exclusive: both are kept out.
    let ours = LockGuard::try_acquire(&path).unwrap();
    assert_eq!(flock_try("-s", &path), 1);
    assert_eq!(flock_try("-x", &path), 1);
    ours.release().unwrap();

    // flock -s holding: we join shared, and are kept out exclusive.
    let theirs = FlockHolder::start(&["-s"], &path);
    let joined = shared().try_acquire(&path).unwrap();
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert!(err.is_contended(), "{err:?}");
    drop(joined);
    drop(theirs);

    // flock -x holding: both of ours are kept out.
    let theirs = FlockHolder::start(&["-x"], &path);
    assert!(shared().try_acquire(&path).unwrap_err().is_contended());
    assert!(LockGuard::try_acquire(&path).unwrap_err().is_contended());
    drop(theirs);
    eventually_acquirable(&path);
}

fn eventually_acquirable(path: &Path) {
    crate::support::wait_until("the lock to come free", || {
        LockGuard::try_acquire(path).is_ok()
    });
}

#[test]
fn inspect_lists_every_shared_holder_and_blames_no_one_for_an_old_record() {
    require_flock();
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    // An unreleased record left by a holder that died: the litter shared
    // holders find in the file.
    let (dead, _) = ChildHolder::hold(&path, "gone");
    let dead_pid = dead.pid();
    dead.kill();
    eventually_acquirable_shared(&path);
    let before = std::fs::read(&path).unwrap();
    assert_eq!(lockfile::inspect(&path).unwrap().state, LockState::Stale);

    let ours = shared().try_acquire(&path).unwrap();
    let theirs = FlockHolder::start(&["-s"], &path);
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert!(report.shared);
    assert_eq!(report.no_record, Some(NoRecord::Shared));
    assert_eq!(report.content, Some(Content::Record));
    let pids: Vec<u32> = report.holders.iter().map(|h| h.pid).collect();
    assert!(pids.contains(&std::process::id()), "{pids:?}");
    assert!(pids.contains(&theirs.pid()), "{pids:?}");
    // The record in the file is shown for what it is, and raises nothing.
    assert_eq!(report.owner.as_ref().unwrap().pid, dead_pid);
    assert!(report.age.is_none());
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["no_record"], "shared");
    assert_eq!(json["shared"], true);
    assert_eq!(json["holders"].as_array().unwrap().len(), pids.len());

    // An exclusive request names no one: the record is not the holders'.
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert!(
        matches!(err, Error::Contended { owner: None, .. }),
        "{err:?}"
    );
    drop(theirs);
    ours.release().unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "shared holders wrote"
    );
    crate::support::wait_until("flock(1) to let go", || {
        lockfile::inspect(&path).is_ok_and(|r| r.state == LockState::Stale && !r.shared)
    });
}

fn eventually_acquirable_shared(path: &Path) {
    crate::support::wait_until("the lock to come free", || {
        shared().try_acquire(path).is_ok()
    });
}

#[test]
fn a_shared_lock_leaves_foreign_and_read_only_files_byte_for_byte() {
    let dir = tempdir();
    let path = lock_path(&dir, "script.sh");
    std::fs::write(&path, b"#!/bin/sh\necho hi\n").unwrap();
    let before = std::fs::read(&path).unwrap();
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    // No record_optional needed: a shared lock writes nothing anyway.
    let mut guard = shared()
        .heartbeat_interval(Duration::from_secs(1))
        .remove_on_release(true)
        .try_acquire(&path)
        .unwrap();
    assert_eq!(guard.no_record(), Some(NoRecord::Shared));
    guard.heartbeat().unwrap();
    guard.record_success().unwrap();
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.no_record, Some(NoRecord::Shared));
    assert_eq!(report.content, Some(Content::Foreign));
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    guard.release().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        modified
    );

    // A missing file is created empty, as flock(1) creates it.
    let fresh = lock_path(&dir, "fresh.lock");
    shared().try_acquire(&fresh).unwrap().release().unwrap();
    assert_eq!(std::fs::read(&fresh).unwrap(), b"");
}
