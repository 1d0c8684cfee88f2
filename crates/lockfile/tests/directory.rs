//! A directory as the lock, as flock(1) takes one: locked read-only with
//! `record_optional`, nothing in it created or changed, excluding and
//! excluded by flock(1), and never invisible to `inspect`.

use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::Path;
use std::time::{Duration, SystemTime};

use lockfile::inspect::NoRecord;
use lockfile::{Error, LockGuard, LockOptions, LockState};

use crate::support::{
    ChildHolder, FlockHolder, assert_not_regular, flock_try, lock_path, require_flock, tempdir,
    wait_until,
};

fn optional() -> LockOptions {
    let mut opts = LockOptions::new();
    opts.record_optional(true);
    opts
}

/// A directory's entries and times: everything a lock must leave alone.
fn listing(dir: &Path) -> (Vec<std::ffi::OsString>, SystemTime, u64) {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    let meta = std::fs::metadata(dir).unwrap();
    (names, meta.modified().unwrap(), meta.ctime() as u64)
}

#[test]
fn a_directory_is_locked_without_a_record_and_left_unchanged() {
    let dir = tempdir();
    let target = lock_path(&dir, "spool");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("queued.txt"), "job 1\n").unwrap();
    // Without record_optional a directory is still refused.
    let err = LockGuard::try_acquire(&target).unwrap_err();
    assert_not_regular(&err, "directory");
    let err = LockOptions::new()
        .shared(true)
        .try_acquire(&target)
        .unwrap_err();
    assert_not_regular(&err, "directory");
    std::thread::sleep(Duration::from_millis(20));
    let before = listing(&target);

    let mut guard = optional()
        .heartbeat_interval(Duration::from_secs(1))
        .remove_on_release(true)
        .try_acquire(&target)
        .unwrap();
    assert_eq!(guard.no_record(), Some(NoRecord::Directory));
    guard.heartbeat().unwrap();
    guard.record_success().unwrap();
    assert!(optional().try_acquire(&target).unwrap_err().is_contended());

    let report = lockfile::inspect(&target).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert_eq!(report.no_record, Some(NoRecord::Directory));
    assert_eq!(report.content, None);
    assert!(report.owner.is_none());
    assert_eq!(report.holders[0].pid, std::process::id());
    assert!(report.findings.is_empty(), "{:?}", report.findings);

    guard.release().unwrap();
    assert!(target.is_dir(), "a directory is never removed");
    assert_eq!(listing(&target), before, "the directory changed");
    let report = lockfile::inspect(&target).unwrap();
    assert_eq!(report.state, LockState::Free);
    assert_eq!(report.no_record, Some(NoRecord::Directory));
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["no_record"], "directory");
    assert_eq!(json["content"], serde_json::Value::Null);
}

#[test]
fn directory_locks_exclude_flock_1_both_ways() {
    require_flock();
    let dir = tempdir();
    let target = lock_path(&dir, "spool");
    std::fs::create_dir(&target).unwrap();
    let before = listing(&target);

    let ours = optional().try_acquire(&target).unwrap();
    assert_eq!(flock_try("-x", &target), 1);
    assert_eq!(flock_try("-s", &target), 1);
    ours.release().unwrap();
    assert_eq!(flock_try("-x", &target), 0);

    let theirs = FlockHolder::start(&[], &target);
    let err = optional().try_acquire(&target).unwrap_err();
    assert!(err.is_contended(), "{err:?}");
    assert!(err.owner().is_none());
    let report = lockfile::inspect(&target).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert!(report.holders.iter().any(|h| h.pid == theirs.pid()));
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    drop(theirs);

    // Shared on both sides: held together.
    let theirs = FlockHolder::start(&["-s"], &target);
    let ours = optional().shared(true).try_acquire(&target).unwrap();
    assert_eq!(ours.no_record(), Some(NoRecord::Directory));
    let report = lockfile::inspect(&target).unwrap();
    assert!(report.shared);
    assert_eq!(report.no_record, Some(NoRecord::Directory));
    assert!(report.holders.len() >= 2, "{:?}", report.holders);
    drop(ours);
    drop(theirs);
    assert_eq!(listing(&target), before, "the directory changed");
}

#[test]
fn inspect_dir_shows_the_directory_s_own_lock_only_while_it_is_held() {
    let dir = tempdir();
    let (holder, _) = ChildHolder::hold(&dir.path().join("job.lock"), "job");
    let rows = lockfile::inspect_dir(dir.path()).unwrap();
    assert_eq!(rows.len(), 1, "a directory nobody holds adds no row");

    let guard = optional().try_acquire(dir.path()).unwrap();
    let rows = lockfile::inspect_dir(dir.path()).unwrap();
    assert_eq!(rows.len(), 2);
    let own = rows[0].as_ref().unwrap();
    assert_eq!(own.path, dir.path());
    assert_eq!(own.state, LockState::Held);
    assert_eq!(own.no_record, Some(NoRecord::Directory));
    assert_eq!(own.holders[0].pid, std::process::id());
    let file = rows[1].as_ref().unwrap();
    assert_eq!(file.path, dir.path().join("job.lock"));
    assert_eq!(file.holders[0].pid, holder.pid());

    // The silence alarm is about the lock files: the directory's own row
    // raises nothing.
    let rows = lockfile::inspect::InspectOptions::new()
        .expect_every(Duration::from_secs(60))
        .inspect_dir(dir.path())
        .unwrap();
    assert!(rows[0].as_ref().unwrap().findings.is_empty());
    assert!(!rows[1].as_ref().unwrap().findings.is_empty());

    // reap looks at the lock files only, and the directory stays locked.
    let reaped = lockfile::reap(dir.path(), lockfile::ReapOptions::new().remove(true)).unwrap();
    assert_eq!(reaped.entries.len(), 1);
    assert_eq!(reaped.entries[0].path, dir.path().join("job.lock"));
    guard.release().unwrap();
    assert_eq!(lockfile::inspect_dir(dir.path()).unwrap().len(), 1);
}

#[test]
fn a_lock_directory_named_like_a_lock_file_is_reported_as_a_directory_lock() {
    let dir = tempdir();
    let sub = lock_path(&dir, "sub.lock");
    std::fs::create_dir(&sub).unwrap();
    let guard = optional().try_acquire(&sub).unwrap();
    let rows = lockfile::inspect_dir(dir.path()).unwrap();
    assert_eq!(rows.len(), 1);
    let row = rows[0].as_ref().unwrap();
    assert_eq!(
        (row.state, row.no_record),
        (LockState::Held, Some(NoRecord::Directory))
    );
    let reaped = lockfile::reap(dir.path(), lockfile::ReapOptions::new().remove(true)).unwrap();
    assert_eq!(reaped.removed(), 0);
    drop(guard);
    assert!(sub.is_dir());
}

#[test]
fn a_symlink_to_a_directory_is_refused() {
    let dir = tempdir();
    let target = lock_path(&dir, "real");
    std::fs::create_dir(&target).unwrap();
    symlink(&target, lock_path(&dir, "link")).unwrap();
    // The kernel follows `link/` even under O_NOFOLLOW: it is refused all the
    // same.
    for name in ["link", "link/", "link/.", "link//"] {
        let link = dir.path().join(name);
        let err = optional().try_acquire(&link).unwrap_err();
        assert!(matches!(err, Error::Symlink { .. }), "{name}: {err:?}");
        assert!(
            matches!(lockfile::inspect(&link), Err(Error::Symlink { .. })),
            "{name}"
        );
    }
    // A file named with a trailing slash is not a directory, and nothing is
    // created for a missing one.
    std::fs::write(lock_path(&dir, "file"), "").unwrap();
    for name in ["file/", "missing/"] {
        let path = dir.path().join(name);
        let err = optional().try_acquire(&path).unwrap_err();
        assert!(!err.is_contended(), "{name}: {err:?}");
        assert!(err.to_string().contains(name), "{err}");
    }
    assert!(lockfile::inspect(dir.path().join("file/")).is_err());
    assert!(!lock_path(&dir, "missing").exists());
    // A real directory named with a trailing slash is the directory.
    let guard = optional().try_acquire(dir.path().join("real/")).unwrap();
    assert_eq!(guard.no_record(), Some(NoRecord::Directory));
    assert!(optional().try_acquire(&target).unwrap_err().is_contended());
}

#[test]
fn a_directory_replaced_while_waiting_is_locked_at_its_new_identity() {
    let dir = tempdir();
    let target = lock_path(&dir, "spool");
    std::fs::create_dir(&target).unwrap();
    let first = optional().try_acquire(&target).unwrap();
    let waiter = std::thread::spawn({
        let target = target.clone();
        move || optional().timeout(Duration::from_secs(20)).acquire(&target)
    });
    // Let the waiter open the first directory (a second descriptor of it in
    // this process) and block on its lock.
    let first_ino = std::fs::metadata(&target).unwrap().ino();
    wait_until("the waiter to open the directory", || {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|fd| std::fs::metadata(fd.path()).is_ok_and(|m| m.ino() == first_ino))
            .count()
            >= 2
    });
    std::thread::sleep(Duration::from_millis(50));
    let moved = lock_path(&dir, "spool.old");
    std::fs::rename(&target, &moved).unwrap();
    std::fs::create_dir(&target).unwrap();
    first.release().unwrap();

    let guard = waiter.join().unwrap().unwrap();
    let held = rustix::fs::fstat(guard.as_fd()).unwrap();
    let at_path = std::fs::metadata(&target).unwrap();
    assert_eq!(
        held.st_ino as u64,
        at_path.ino(),
        "the lock is on the directory at the path"
    );
    // The directory that was moved away is free: the waiter let go of it.
    drop(optional().try_acquire(&moved).unwrap());
}
