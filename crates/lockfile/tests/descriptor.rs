//! Descriptor mode, as flock(1)'s `flock -n 9` in `exec 9>file`: a child
//! locks the shell's descriptor, and the lock stays with the shell. A record
//! is written only for an empty or own file that the shell really shares,
//! and names the shell; nothing is ever written into a file that is not ours.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::Duration;

use lockfile::inspect::{Content, NoRecord};
use lockfile::record::Release;
use lockfile::{LockGuard, LockOptions, LockState};

use crate::support::{
    ChildHolder, FlockHolder, flock_status, lock_path, require_flock, tempdir, wait_until,
};

/// The shell of `flock -n 9`: opens the lock on descriptor 9 with `$REDIR`
/// (`>>`, `<`, `<>`), has a child lock it (`$ACTION`), says `held`, then
/// keeps the descriptor (and so the lock) open until killed, as `sleep`.
const HOLDING_SHELL: &str = r#"
eval 'exec 9'"$REDIR"'"$LOCK"'
LOCKFILE_TEST_CHILD="$ACTION" "$@" || exit 1
echo "held $$"
exec sleep 60
"#;

fn lock_action(how: &str) -> String {
    format!("lock-fd\t9\t{how}")
}

/// Starts a shell whose child locks `path` through descriptor 9; returns it
/// once it holds the lock, with what the child said.
fn shell_holding(path: &Path, redir: &str, how: &str) -> (ChildHolder, String) {
    let action = lock_action(how);
    let mut shell = ChildHolder::spawn_shell(
        HOLDING_SHELL,
        &[
            ("LOCK", path.to_str().unwrap()),
            ("REDIR", redir),
            ("ACTION", &action),
        ],
    );
    let outcome = shell.expect_line("outcome ");
    shell.expect_line("held ");
    (shell, outcome)
}

fn flock_try(path: &Path, option: &str) -> i32 {
    flock_status(&[
        OsStr::new("-n"),
        OsStr::new(option),
        path.as_os_str(),
        OsStr::new("true"),
    ])
}

/// `/proc/PID/fdinfo/FD` of another process, as text.
fn fdinfo(pid: u32, fd: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap()
}

#[test]
fn the_record_names_the_shell_which_keeps_the_lock_after_the_child_exits() {
    require_flock();
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (shell, outcome) = shell_holding(&path, ">>", "exclusive");
    assert_eq!(outcome, format!("outcome recorded {}", shell.pid()));

    // The shell's own open file is untouched: its offset, its O_APPEND, its
    // lock.
    let info = fdinfo(shell.pid(), 9);
    assert!(info.contains("pos:\t0\n"), "{info}");
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
        .unwrap();
    assert_ne!(flags & libc::O_APPEND as u32, 0, "{info}");
    assert!(
        info.contains("FLOCK"),
        "the shell's open file holds the lock: {info}"
    );

    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    let owner = report.owner.as_ref().unwrap();
    assert_eq!(owner.pid, shell.pid());
    assert_eq!(owner.release, Release::Unrecorded);
    assert_eq!(owner.job.as_deref(), Some("descriptor-job"));
    assert_eq!(owner.heartbeat_interval(), None);
    assert!(
        report.holders.iter().any(|h| h.pid == shell.pid()),
        "{:?}",
        report.holders
    );
    assert_eq!(report.no_record, None);
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["owner"]["release"], "unrecorded");

    // It excludes flock(1) and us, and names the shell.
    assert_eq!(flock_try(&path, "-x"), 1);
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert_eq!(err.owner().unwrap().pid, shell.pid());

    // Once the shell is gone, nobody holds it and nobody marked it: free, not
    // stale, and no finding against the dead shell.
    shell.kill();
    wait_until("the shell's lock to go", || {
        lockfile::inspect(&path).is_ok_and(|r| r.state != LockState::Held)
    });
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Free);
    assert!(!report.released);
    assert!(report.age.is_none());
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let reaped = lockfile::reap(dir.path(), lockfile::ReapOptions::new().remove(true)).unwrap();
    assert_eq!(reaped.removed(), 0);
    LockGuard::try_acquire(&path).unwrap().release().unwrap();
}

#[test]
fn a_shell_that_only_reads_the_file_still_gets_a_record() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    std::fs::write(&path, "").unwrap();
    let (shell, outcome) = shell_holding(&path, "<", "exclusive");
    assert_eq!(outcome, format!("outcome recorded {}", shell.pid()));
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.owner.unwrap().pid, shell.pid());
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

#[test]
fn a_foreign_file_locked_through_a_descriptor_is_left_byte_for_byte() {
    let dir = tempdir();
    for redir in ["<", ">>", "<>"] {
        let path = lock_path(&dir, "job.sh");
        std::fs::write(&path, b"#!/bin/sh\necho locked\n").unwrap();
        let before = std::fs::read(&path).unwrap();
        let (shell, outcome) = shell_holding(&path, redir, "exclusive");
        assert_eq!(outcome, "outcome no_record foreign_content", "{redir}");
        assert!(LockGuard::try_acquire(&path).unwrap_err().is_contended());
        let report = lockfile::inspect(&path).unwrap();
        assert_eq!(report.state, LockState::Held);
        assert_eq!(report.content, Some(Content::Foreign));
        drop(shell);
        assert_eq!(std::fs::read(&path).unwrap(), before, "{redir}");
    }
}

#[test]
fn shared_and_directory_descriptors_write_nothing_and_interoperate_with_flock_1() {
    require_flock();
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (shell, outcome) = shell_holding(&path, ">>", "shared");
    assert_eq!(outcome, "outcome no_record shared");
    assert_eq!(std::fs::read(&path).unwrap(), b"");
    assert_eq!(flock_try(&path, "-s"), 0);
    assert_eq!(flock_try(&path, "-x"), 1);
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!((report.state, report.shared), (LockState::Held, true));
    assert_eq!(report.no_record, Some(NoRecord::Shared));
    drop(shell);

    let target = lock_path(&dir, "spool");
    std::fs::create_dir(&target).unwrap();
    let (shell, outcome) = shell_holding(&target, "<", "exclusive");
    assert_eq!(outcome, "outcome no_record directory");
    assert_eq!(flock_try(&target, "-x"), 1);
    let report = lockfile::inspect(&target).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert!(report.holders.iter().any(|h| h.pid == shell.pid()));
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    drop(shell);
}

#[test]
fn a_descriptor_lock_is_contended_by_flock_1_and_by_our_holders() {
    require_flock();
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let theirs = FlockHolder::start(&[], &path);
    for how in ["exclusive", "shared", "exclusive wait"] {
        let mut shell = ChildHolder::spawn_shell(
            HOLDING_SHELL,
            &[
                ("LOCK", path.to_str().unwrap()),
                ("REDIR", ">>"),
                ("ACTION", &lock_action(how)),
            ],
        );
        assert_eq!(
            shell.expect_line("outcome "),
            "outcome contended none",
            "{how}"
        );
        assert_eq!(shell.wait(), 1, "{how}");
    }
    drop(theirs);

    let (holder, _) = ChildHolder::hold(&path, "holder");
    let mut shell = ChildHolder::spawn_shell(
        HOLDING_SHELL,
        &[
            ("LOCK", path.to_str().unwrap()),
            ("REDIR", ">>"),
            ("ACTION", &lock_action("shared")),
        ],
    );
    assert_eq!(
        shell.expect_line("outcome "),
        format!("outcome contended {}", holder.pid())
    );
    // The holder's record is untouched.
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.owner.unwrap().pid, holder.pid());
}

#[test]
fn unlock_marks_the_shell_s_record_released_and_lets_others_in() {
    require_flock();
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let go = lock_path(&dir, "go");
    let unlock = "unlock-fd\t9";
    let action = lock_action("exclusive");
    let mut shell = ChildHolder::spawn_shell(
        r#"
        exec 9>>"$LOCK"
        LOCKFILE_TEST_CHILD="$ACTION" "$@" || exit 1
        echo locked
        while [ ! -e "$GO" ]; do sleep 0.01; done
        LOCKFILE_TEST_CHILD="$UNLOCK" "$@"
        echo unlocked
        exec sleep 60
        "#,
        &[
            ("LOCK", path.to_str().unwrap()),
            ("GO", go.to_str().unwrap()),
            ("ACTION", &action),
            ("UNLOCK", unlock),
        ],
    );
    shell.expect_line("locked");
    assert_eq!(lockfile::inspect(&path).unwrap().state, LockState::Held);
    std::fs::write(&go, "").unwrap();
    assert_eq!(
        shell.expect_line("outcome "),
        format!("outcome marked {}", shell.pid())
    );
    shell.expect_line("unlocked");
    // The shell still has the descriptor open, but holds no lock.
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Free);
    assert!(report.released);
    assert_eq!(report.owner.unwrap().pid, shell.pid());
    assert_eq!(flock_try(&path, "-x"), 0);
    LockGuard::try_acquire(&path).unwrap().release().unwrap();
}

#[test]
fn unlock_leaves_a_record_that_is_not_the_shell_s_alone() {
    require_flock();
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    // A dead holder's unreleased record, then flock(1) itself locks fd 9.
    let (dead, _) = ChildHolder::hold(&path, "gone");
    dead.kill();
    wait_until("the dead holder's lock to go", || {
        lockfile::inspect(&path).is_ok_and(|r| r.state == LockState::Stale)
    });
    let before = std::fs::read(&path).unwrap();
    let go = lock_path(&dir, "go");
    let mut shell = ChildHolder::spawn_shell(
        r#"
        exec 9>>"$LOCK"
        flock -n 9 || exit 1
        echo locked
        while [ ! -e "$GO" ]; do sleep 0.01; done
        LOCKFILE_TEST_CHILD="$UNLOCK" "$@"
        echo unlocked
        exec sleep 60
        "#,
        &[
            ("LOCK", path.to_str().unwrap()),
            ("GO", go.to_str().unwrap()),
            ("UNLOCK", "unlock-fd\t9"),
        ],
    );
    shell.expect_line("locked");
    assert!(LockGuard::try_acquire(&path).unwrap_err().is_contended());
    std::fs::write(&go, "").unwrap();
    assert_eq!(shell.expect_line("outcome "), "outcome unmarked");
    shell.expect_line("unlocked");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(flock_try(&path, "-x"), 0);
}

#[test]
fn a_live_holder_s_record_is_never_overwritten_through_its_own_descriptor() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    // The way `lockfile run` hands its lock to COMMAND: a shell that
    // inherits the holder's open file.
    let mut guard = LockOptions::new()
        .job("wrapper")
        .try_acquire(&path)
        .unwrap();
    let inherited = guard.share_with_children().unwrap();
    let before = std::fs::read(&path).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&inherited).to_string();
    let action = format!("lock-fd\t{fd}\texclusive");
    let mut shell = ChildHolder::spawn_shell(
        r#"LOCKFILE_TEST_CHILD="$ACTION" "$@"; echo done"#,
        &[("ACTION", &action)],
    );
    assert_eq!(
        shell.expect_line("outcome "),
        "outcome no_record descriptor"
    );
    shell.expect_line("done");
    drop(inherited);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(
        lockfile::inspect(&path).unwrap().owner.unwrap().token,
        guard.record().token
    );
    guard.release().unwrap();
}

#[test]
fn a_descriptor_the_parent_does_not_share_is_locked_without_a_record() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let file = std::fs::File::create(&path).unwrap();
    let lock = LockOptions::new()
        .try_acquire_descriptor(file.as_fd())
        .unwrap();
    assert_eq!(lock.no_record(), Some(NoRecord::Descriptor));
    assert!(lock.record().is_none());
    assert_eq!(lock.path(), path.as_path());
    assert!(!lock.is_shared());
    assert_eq!(std::fs::read(&path).unwrap(), b"");
    assert!(LockGuard::try_acquire(&path).unwrap_err().is_contended());
    // Locking again converts the lock of the same open file, as flock(2)
    // does: no conflict with itself.
    let again = LockOptions::new()
        .shared(true)
        .try_acquire_descriptor(file.as_fd())
        .unwrap();
    assert!(again.is_shared());
    assert_eq!(
        lockfile::descriptor::unlock_descriptor(file.as_fd()).unwrap(),
        None
    );
    LockGuard::try_acquire(&path).unwrap().release().unwrap();
    // Unlocking an open file that holds nothing does nothing.
    assert_eq!(
        lockfile::descriptor::unlock_descriptor(file.as_fd()).unwrap(),
        None
    );
    let bounded = LockOptions::new()
        .timeout(Duration::from_millis(10))
        .acquire_descriptor(file.as_fd())
        .unwrap();
    assert_eq!(bounded.fd(), std::os::fd::AsRawFd::as_raw_fd(&file));
}
