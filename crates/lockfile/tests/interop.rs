//! The lock excludes, and is excluded by, util-linux flock(1) and std's
//! `File::lock` on the same file.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use lockfile::{LockGuard, LockState};

use crate::support::{assert_acquirable, lock_path, require_flock, tempdir};

#[test]
fn flock_1_holding_excludes_us() {
    require_flock();
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    // In its own process group, so that flock(1) and the child it forks (which
    // inherits the lock) can be killed together.
    let mut flock = Command::new("flock")
        .arg(&path)
        .args(["sleep", "60"])
        .process_group(0)
        .spawn()
        .unwrap();
    while !lockfile::inspect(&path).is_ok_and(|r| r.state == LockState::Held) {
        assert!(flock.try_wait().unwrap().is_none(), "flock(1) exited early");
        std::thread::sleep(Duration::from_millis(5));
    }

    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert!(err.is_contended(), "{err:?}");
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert!(
        !report.holders.is_empty(),
        "the kernel names flock(1)'s process"
    );

    let group = format!("-{}", flock.id());
    assert!(
        Command::new("kill")
            .args(["-KILL", "--", &group])
            .status()
            .unwrap()
            .success()
    );
    flock.wait().unwrap();
    // The kernel drops the lock as the last holder dies; that takes a moment
    // after kill(2) returns, because exiting is asynchronous.
    let mut tries = 0;
    while LockGuard::try_acquire(&path).is_err() {
        tries += 1;
        assert!(tries < 1000, "the lock outlived flock(1) and its child");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn we_holding_exclude_flock_1() {
    require_flock();
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let guard = LockGuard::try_acquire(&path).unwrap();
    let status = Command::new("flock")
        .arg("-n")
        .arg(&path)
        .arg("true")
        .status()
        .unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "flock -n must fail while we hold the lock"
    );
    // flock(1) with -E reports the conflict with the status we ask for.
    let status = Command::new("flock")
        .args(["-n", "-E", "42"])
        .arg(&path)
        .arg("true")
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(42));
    guard.release().unwrap();
    let status = Command::new("flock")
        .arg("-n")
        .arg(&path)
        .arg("true")
        .status()
        .unwrap();
    assert!(status.success(), "flock -n succeeds once we released");
}

#[test]
fn std_file_lock_interoperates_both_ways() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let guard = LockGuard::try_acquire(&path).unwrap();
    let other = std::fs::File::open(&path).unwrap();
    assert!(matches!(
        other.try_lock(),
        Err(std::fs::TryLockError::WouldBlock)
    ));
    guard.release().unwrap();
    other.try_lock().unwrap();
    assert!(LockGuard::try_acquire(&path).unwrap_err().is_contended());
    other.unlock().unwrap();
    assert_acquirable(&path);
}
