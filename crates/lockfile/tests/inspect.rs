use std::process::Command;
use std::time::Duration;

use lockfile::inspect::Finding;
use lockfile::inspect::InspectOptions;
use lockfile::{LockGuard, LockState};

use crate::support::{ChildHolder, leave_background_holder, lock_path, tempdir};

#[test]
fn inspect_of_a_held_lock_shows_the_holders_pid_host_and_token() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (child, token) = ChildHolder::hold(&path, "reporting");
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    let owner = report.owner.as_ref().unwrap();
    assert_eq!(owner.pid, child.pid());
    assert_eq!(owner.token.to_string(), token);
    assert_eq!(&*owner.hostname, hostname());
    assert_eq!(report.holders.len(), 1);
    assert_eq!(report.holders[0].pid, child.pid());
    assert!(report.findings.is_empty(), "{:?}", report.findings);

    // Inspecting takes no lock: the child still holds it, we still cannot.
    assert!(LockGuard::try_acquire(&path).unwrap_err().is_contended());
}

#[test]
fn a_live_pid_that_belongs_to_another_process_is_owner_dead() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (child, _) = ChildHolder::hold(&path, "reused");
    child.kill();
    // Simulate PID reuse: point the dead owner's record at a live process
    // that started at another time (PID 1, the oldest there is).
    let text = std::fs::read_to_string(&path).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["owner"]["pid"] = 1.into();
    std::fs::write(&path, doc.to_string()).unwrap();

    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Stale);
    let dead = report
        .findings
        .iter()
        .find(|f| matches!(f, Finding::OwnerDead { .. }))
        .expect("owner_dead although the pid is alive");
    assert!(dead.to_string().contains("another process"), "{dead}");
}

#[test]
fn a_hung_holder_is_heartbeat_silent_and_an_old_one_is_aged() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (_child, _) = ChildHolder::hold(&path, "hung");
    // Age the heartbeat (the file's mtime) by ten minutes.
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(std::time::SystemTime::now() - Duration::from_secs(600))
        .unwrap();

    let report = InspectOptions::new()
        .stale_after(Duration::from_secs(60))
        .max_age(Duration::ZERO)
        .inspect(&path)
        .unwrap();
    let findings = &report.findings;
    assert!(
        findings
            .iter()
            .any(|f| matches!(f, Finding::HeartbeatSilent { .. })),
        "{findings:?}"
    );
    assert!(
        findings.iter().any(|f| matches!(f, Finding::Aged { .. })),
        "{findings:?}"
    );
    assert_eq!(
        report.severity(),
        Some(lockfile::inspect::Severity::Critical)
    );
    // The child promised a heartbeat every 60 s: by default silence is judged
    // against three intervals, so ten minutes is silent too.
    let report = lockfile::inspect(&path).unwrap();
    assert!(
        report
            .findings
            .iter()
            .any(|f| matches!(f, Finding::HeartbeatSilent { .. }))
    );
}

#[test]
fn silence_alarm_findings() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let day = Duration::from_secs(86_400);
    let findings = |path: &std::path::Path| -> Vec<Finding> {
        InspectOptions::new()
            .expect_every(day)
            .inspect(path)
            .unwrap()
            .findings
    };
    let never = |f: &[Finding]| matches!(f, [Finding::NeverSucceeded { .. }]);
    assert!(never(&findings(&path)), "absent file");
    LockGuard::acquire(&path).unwrap().release().unwrap();
    assert!(never(&findings(&path)), "never recorded");
    let mut guard = LockGuard::acquire(&path).unwrap();
    guard.record_success().unwrap();
    guard.release().unwrap();
    assert!(findings(&path).is_empty());
    // Age the recorded success by two days.
    let text = std::fs::read_to_string(&path).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["last_success"] = "2001-01-01T00:00:00Z".into();
    std::fs::write(&path, doc.to_string()).unwrap();
    assert!(
        matches!(findings(&path)[..], [Finding::Silent { .. }]),
        "{:?}",
        findings(&path)
    );
}

#[test]
fn inspect_dir_reports_every_lock_file_and_errors_per_file() {
    let dir = tempdir();
    let held = lock_path(&dir, "a-held.lock");
    let (_child, _) = ChildHolder::hold(&held, "a");
    LockGuard::acquire(lock_path(&dir, "b-free.lock"))
        .unwrap()
        .release()
        .unwrap();
    std::fs::write(lock_path(&dir, "c-debris.lock"), "garbage").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", lock_path(&dir, "d-link.lock")).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a lock").unwrap();

    let reports = lockfile::inspect_dir(dir.path()).unwrap();
    assert_eq!(reports.len(), 4);
    let states: Vec<_> = reports[..3]
        .iter()
        .map(|r| r.as_ref().unwrap().state)
        .collect();
    assert_eq!(
        states,
        [LockState::Held, LockState::Free, LockState::Debris]
    );
    assert!(matches!(reports[3], Err(lockfile::Error::Symlink { .. })));

    let missing = lockfile::inspect_dir(dir.path().join("missing")).unwrap_err();
    assert!(
        matches!(missing, lockfile::Error::DirectoryNotFound { .. }),
        "{missing:?}"
    );
}

#[test]
fn inspect_names_a_background_process_that_inherited_the_lock() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let bg = leave_background_holder(&path);
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert_eq!(
        report.holders.iter().map(|h| h.pid).collect::<Vec<_>>(),
        [bg]
    );
    // The background shell may not have exec'ed `sleep` yet.
    let mut tries = 0;
    while lockfile::inspect(&path).unwrap().holders[0]
        .command
        .as_deref()
        != Some("sleep")
    {
        tries += 1;
        assert!(tries < 2000, "the holder is never named `sleep`");
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = Command::new("kill").arg(bg.to_string()).status();
}

fn hostname() -> String {
    String::from_utf8(Command::new("uname").arg("-n").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn a_killed_owner_not_yet_reaped_is_dead() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut child, _) = ChildHolder::hold(&path, "zombie");
    // Kill it but do not reap it: its PID still answers kill(pid, 0).
    child.child.kill().unwrap();
    let stat = format!("/proc/{}/stat", child.pid());
    let mut tries = 0;
    while !std::fs::read_to_string(&stat).is_ok_and(|s| s.contains(") Z ")) {
        tries += 1;
        assert!(tries < 2000, "the child never became a zombie");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The thread-group leader shows Z while its other threads may still be
    // exiting with the shared descriptors: wait for the kernel to let go.
    let mut report = lockfile::inspect(&path).unwrap();
    while report.state == LockState::Held {
        tries += 1;
        assert!(tries < 2000, "the lock outlived its zombie owner");
        std::thread::sleep(Duration::from_millis(5));
        report = lockfile::inspect(&path).unwrap();
    }
    assert_eq!(report.state, LockState::Stale);
    let dead = report
        .findings
        .iter()
        .find(|f| matches!(f, Finding::OwnerDead { .. }))
        .expect("a zombie is dead");
    assert!(dead.to_string().contains("has exited"), "{dead}");
}
