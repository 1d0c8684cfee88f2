use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use lockfile::inspect::Finding;
use lockfile::record::Release;
use lockfile::{Error, LockGuard, LockOptions, LockState};

use crate::support::{ChildHolder, FlockHolder, assert_acquirable, lock_path, tempdir};

#[test]
fn try_acquire_reports_contention_and_names_the_child_holder() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (child, token) = ChildHolder::hold(&path, "nightly");

    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert!(err.is_contended(), "{err:?}");
    let owner = err.owner().expect("the holder's record");
    assert_eq!(owner.pid, child.pid());
    assert_eq!(owner.token.to_string(), token);
    assert_eq!(owner.job.as_deref(), Some("nightly"));
    let msg = err.to_string();
    assert!(msg.contains(&format!("pid {}", child.pid())), "{msg}");
    assert!(msg.contains("nightly"), "{msg}");
    assert!(matches!(err, Error::Contended { .. }));
}

#[test]
fn sigkill_of_the_holder_frees_the_lock_at_once() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (child, _) = ChildHolder::hold(&path, "victim");
    let pid = child.pid();
    child.kill();

    // The file is litter now; the kernel already released the lock.
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Stale);
    assert!(
        report
            .findings
            .iter()
            .any(|f| matches!(f, Finding::OwnerDead { .. })),
        "{:?}",
        report.findings
    );
    let guard = LockGuard::try_acquire(&path).expect("acquire right after the kill");
    assert_ne!(guard.record().pid, pid);
}

#[test]
fn a_bounded_wait_wakes_when_the_holder_releases() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut child = ChildHolder::spawn(&format!("hold-for\t{}\t300\tkeep", path.display()));
    child.expect_line("ready ");
    let started = Instant::now();
    let guard = LockOptions::new()
        .timeout(Duration::from_secs(30))
        .acquire(&path)
        .expect("the holder releases long before the timeout");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(guard.record().pid, std::process::id());
    assert_eq!(child.wait(), 0);
}

#[test]
fn a_bounded_wait_times_out_with_the_holder_named() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (child, _) = ChildHolder::hold(&path, "slow");
    let err = LockOptions::new()
        .timeout(Duration::from_millis(150))
        .acquire(&path)
        .unwrap_err();
    match &err {
        Error::Timeout { waited, owner, .. } => {
            assert!(*waited >= Duration::from_millis(150));
            assert_eq!(owner.as_ref().unwrap().pid, child.pid());
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(err.is_contended());
}

#[test]
fn a_waiter_on_an_unlinked_file_retries_on_the_new_one() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    // The holder releases by unlinking the file while we wait on its inode.
    let mut child = ChildHolder::spawn(&format!("hold-for\t{}\t200\tremove", path.display()));
    child.expect_line("ready ");
    let guard = LockGuard::acquire(&path).unwrap();
    assert_eq!(child.wait(), 0);
    let at_path = std::fs::metadata(&path).expect("our retry created a fresh file");
    let fd = std::fs::File::open(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&guard)
    ))
    .unwrap();
    assert_eq!(fd.metadata().unwrap().ino(), at_path.ino());
    assert!(LockGuard::try_acquire(&path).unwrap_err().is_contended());
}

/// Waits until a thread of this process is queued on the lock of the file
/// with inode `ino` (a `->` line of `/proc/locks`).
fn wait_for_a_waiter(ino: u64) {
    crate::support::wait_until("a waiter queued on the lock", || {
        std::fs::read_to_string("/proc/locks").is_ok_and(|locks| {
            locks
                .lines()
                .any(|l| l.contains("->") && l.contains(&format!(":{ino} ")))
        })
    });
}

/// A thread that acquires `path`, waiting up to 20 s.
fn spawn_waiter(path: &std::path::Path) -> std::thread::JoinHandle<lockfile::Result<LockGuard>> {
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        LockOptions::new()
            .timeout(Duration::from_secs(20))
            .acquire(&path)
    })
}

/// The inode that the guard's descriptor refers to.
fn locked_inode(guard: &LockGuard) -> u64 {
    rustix::fs::fstat(guard).unwrap().st_ino as u64
}

/// Another file renamed over a held lock file leaves the old one without a
/// name (link count 0): a waiter on it starts over on the new file.
#[test]
fn a_waiter_on_a_file_renamed_over_retries_on_the_new_one() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let first = LockGuard::acquire(&path).unwrap();
    let old = std::fs::metadata(&path).unwrap().ino();
    let waiter = spawn_waiter(&path);
    wait_for_a_waiter(old);
    let replacement = dir.path().join("replacement");
    std::fs::write(&replacement, "").unwrap();
    std::fs::rename(&replacement, &path).unwrap();
    first.release().unwrap();
    let guard = waiter.join().unwrap().unwrap();
    let new = std::fs::metadata(&path).unwrap().ino();
    assert_ne!(new, old);
    assert_eq!(
        locked_inode(&guard),
        new,
        "the lock is on the file at the path"
    );
}

/// A hard-linked lock file: a link count above one does not say which name
/// is left, so the path is compared, and release never removes one name of
/// several.
#[test]
fn a_hard_linked_lock_file_is_checked_by_its_path_and_never_removed() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    LockGuard::acquire(&path).unwrap().release().unwrap();
    let alias = dir.path().join("alias");
    std::fs::hard_link(&path, &alias).unwrap();
    let ino = std::fs::metadata(&path).unwrap().ino();
    let first = LockOptions::new()
        .remove_on_release(true)
        .acquire(&path)
        .unwrap();
    let waiter = spawn_waiter(&path);
    wait_for_a_waiter(ino);
    first.release().unwrap();
    let guard = waiter.join().unwrap().unwrap();
    assert_eq!(locked_inode(&guard), ino);
    assert!(path.exists() && alias.exists(), "no name was removed");
    // Both names lead to the one lock.
    let through_alias = LockGuard::try_acquire(&alias).unwrap_err();
    assert!(through_alias.is_contended(), "{through_alias}");
}

#[test]
fn release_marks_the_record_released_and_keeps_the_last_owner() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let guard = LockOptions::new().job("tidy").acquire(&path).unwrap();
    let token = guard.record().token;
    guard.release().unwrap();
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Free);
    assert!(report.released);
    assert_eq!(report.owner.unwrap().token, token);
    assert_acquirable(&path);
}

#[test]
fn dropping_the_guard_releases_too() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    drop(LockGuard::acquire(&path).unwrap());
    assert_eq!(lockfile::inspect(&path).unwrap().state, LockState::Free);
    assert_acquirable(&path);
}

#[test]
fn heartbeat_moves_the_modification_time() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let guard = LockGuard::acquire(&path).unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(600);
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(old).unwrap();
    assert!(lockfile::inspect(&path).unwrap().heartbeat_age.unwrap() >= Duration::from_secs(600));
    guard.heartbeat().unwrap();
    assert!(lockfile::inspect(&path).unwrap().heartbeat_age.unwrap() < Duration::from_secs(600));
}

#[test]
fn success_is_carried_from_one_holder_to_the_next() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut guard = LockGuard::acquire(&path).unwrap();
    assert_eq!(guard.last_success(), None);
    guard.record_success().unwrap();
    let first = guard.last_success().unwrap();
    guard.release().unwrap();
    let guard = LockGuard::acquire(&path).unwrap();
    assert_eq!(guard.last_success(), Some(first));
    drop(guard);
    assert_eq!(lockfile::inspect(&path).unwrap().last_success, Some(first));
}

#[test]
fn a_missing_directory_is_named_in_the_error() {
    let dir = tempdir();
    let path = dir.path().join("no/such/dir/job.lock");
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert!(matches!(err, Error::DirectoryNotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("no/such/dir"), "{err}");
    assert!(!dir.path().join("no").exists());
}

/// A file where a directory should be (`/etc/passwd/x.lock`) is named, with
/// the path, and never touched.
#[test]
fn a_file_where_the_directory_should_be_is_named_in_the_error() {
    let dir = tempdir();
    let file = dir.path().join("passwd");
    std::fs::write(&file, "root:x:0:0\n").unwrap();
    for path in [file.join("x.lock"), file.join("deeper/x.lock")] {
        let err = LockGuard::try_acquire(&path).unwrap_err();
        assert!(matches!(err, Error::NotADirectory { .. }), "{err:?}");
        assert_eq!(err.path(), path);
        assert!(
            err.to_string().ends_with(&format!(
                "`{}` is not a directory (a lock file's directory must be one)",
                file.display()
            )),
            "{err}"
        );
        assert_eq!(
            std::io::Error::from(err).kind(),
            std::io::ErrorKind::NotADirectory
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "root:x:0:0\n");
}

#[test]
fn several_processes_never_overlap_while_reap_loops() {
    let dir = tempdir();
    let path = lock_path(&dir, "shared.lock");
    let marker = dir.path().join("inside.marker");
    let children: Vec<ChildHolder> = (0..4)
        .map(|_| {
            ChildHolder::spawn(&format!(
                "contend\t{}\t{}\t150",
                path.display(),
                marker.display()
            ))
        })
        .collect();
    let mut children = children;
    let (mut reaped, mut killed) = (0, 0);
    while killed < 10
        || children
            .iter_mut()
            .any(|c| c.child.try_wait().unwrap().is_none())
    {
        // Leave litter behind: a holder that dies without releasing.
        if killed < 10 {
            let (holder, _) = ChildHolder::hold(&path, "doomed");
            holder.kill();
            killed += 1;
        }
        let report = lockfile::reap(dir.path(), lockfile::ReapOptions::new().remove(true)).unwrap();
        reaped += report.removed();
        let _ = lockfile::inspect(&path).unwrap();
    }
    for child in children {
        assert_eq!(child.wait(), 0, "a child saw an overlap or failed");
    }
    assert_eq!(killed, 10);
    eprintln!("reaped {reaped} stale files while contending");
}

#[test]
fn a_long_record_still_carries_the_last_success() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    // A job name long enough to push the record past the first read.
    let job = "j".repeat(5000);
    let mut guard = LockOptions::new().job(job.as_str()).acquire(&path).unwrap();
    guard.record_success().unwrap();
    let first = guard.last_success().unwrap();
    guard.release().unwrap();
    let guard = LockOptions::new().job(job.as_str()).acquire(&path).unwrap();
    assert_eq!(guard.last_success(), Some(first));
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert_eq!(err.owner().unwrap().job.as_deref(), Some(job.as_str()));
}

#[test]
fn a_record_whose_release_is_unrecorded_is_free_once_nobody_holds_it() {
    let dir = tempdir();
    let path = lock_path(&dir, "exec.lock");
    // As flock(1)'s -F leaves it: the holder execs away, nobody marks the
    // release.
    let guard = LockOptions::new()
        .release(Release::Unrecorded)
        .try_acquire(&path)
        .unwrap();
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert_eq!(report.owner.as_ref().unwrap().release, Release::Unrecorded);
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    guard.disown();
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Free);
    assert!(!report.released);
    assert!(report.findings.is_empty(), "{:?}", report.findings);

    // The same holder with its release recorded, gone without marking it,
    // leaves litter.
    let guard = LockGuard::try_acquire(&path).unwrap();
    assert_eq!(guard.record().release, Release::Recorded);
    guard.disown();
    assert_eq!(lockfile::inspect(&path).unwrap().state, LockState::Stale);
}

/// A holder that writes no record (util-linux flock(1)) is still named: by
/// the pid and command the kernel's lock table shows, in the error's
/// message and through `Error::holders`, as `inspect` names it.
#[test]
fn a_contention_error_names_a_holder_that_wrote_no_record() {
    let dir = tempdir();
    let path = lock_path(&dir, "flocked.lock");
    let theirs = FlockHolder::start(&[], &path);
    for err in [
        LockGuard::try_acquire(&path).unwrap_err(),
        LockOptions::new()
            .timeout(Duration::from_millis(50))
            .acquire(&path)
            .unwrap_err(),
    ] {
        assert!(err.is_contended(), "{err}");
        assert!(err.owner().is_none(), "{err}");
        let pids: Vec<u32> = err.holders().iter().map(|h| h.pid).collect();
        assert_eq!(pids, [theirs.pid()], "{err}");
        assert_eq!(err.holders()[0].command.as_deref(), Some("flock"));
        let message = err.to_string();
        assert!(
            message.ends_with(&format!(
                "a holder that wrote no owner record: pid {} (flock)",
                theirs.pid()
            )),
            "{message}"
        );
    }
    drop(theirs);
    // A holder that wrote a record is named by it: the kernel is not asked.
    let (_child, _) = ChildHolder::hold(&path, "recorded");
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert!(err.owner().is_some(), "{err}");
    assert!(err.holders().is_empty(), "{err}");
}
