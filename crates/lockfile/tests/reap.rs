use lockfile::{LockGuard, LockState, ReapAction, ReapOptions};

use crate::support::{ChildHolder, lock_path, tempdir};

#[test]
fn reap_never_removes_a_held_lock_and_removes_litter() {
    let dir = tempdir();
    let held = lock_path(&dir, "held.lock");
    let (_child, _) = ChildHolder::hold(&held, "busy");
    let stale = lock_path(&dir, "stale.lock");
    let (dead, _) = ChildHolder::hold(&stale, "dead");
    dead.kill();
    let debris = lock_path(&dir, "debris.lock");
    std::fs::write(&debris, "\u{0}\u{1}binary").unwrap();
    let free = lock_path(&dir, "free.lock");
    LockGuard::acquire(&free).unwrap().release().unwrap();

    let dry = lockfile::reap(dir.path(), &ReapOptions::new()).unwrap();
    let actions: Vec<_> = dry
        .entries
        .iter()
        .map(|e| (e.state.unwrap(), e.action))
        .collect();
    assert_eq!(
        actions,
        [
            (LockState::Debris, ReapAction::WouldRemove),
            (LockState::Free, ReapAction::Kept),
            (LockState::Held, ReapAction::Kept),
            (LockState::Stale, ReapAction::WouldRemove),
        ]
    );
    assert!(
        stale.exists() && debris.exists(),
        "a dry run removes nothing"
    );

    let fixed = lockfile::reap(dir.path(), ReapOptions::new().remove(true)).unwrap();
    assert_eq!(fixed.removed(), 2);
    assert!(held.exists() && free.exists());
    assert!(!stale.exists() && !debris.exists());
    let held_entry = fixed.entries.iter().find(|e| e.path == held).unwrap();
    assert!(
        held_entry.reason.contains("held by pid"),
        "{}",
        held_entry.reason
    );
}

#[test]
fn reap_keeps_foreign_records_unless_told_and_says_why() {
    let dir = tempdir();
    let path = lock_path(&dir, "foreign.lock");
    let (dead, _) = ChildHolder::hold(&path, "elsewhere");
    dead.kill();
    let text = std::fs::read_to_string(&path).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["owner"]["hostname"] = "some-other-host".into();
    std::fs::write(&path, doc.to_string()).unwrap();

    let report = lockfile::reap(dir.path(), ReapOptions::new().remove(true)).unwrap();
    assert_eq!(report.entries[0].action, ReapAction::Kept);
    assert!(
        report.entries[0].reason.contains("some-other-host"),
        "{}",
        report.entries[0].reason
    );
    assert!(path.exists());
    let inspected = lockfile::inspect(&path).unwrap();
    assert!(
        inspected
            .findings
            .iter()
            .any(|f| f.kind() == "foreign_host")
    );

    let report = lockfile::reap(
        dir.path(),
        ReapOptions::new().remove(true).include_foreign(true),
    )
    .unwrap();
    assert_eq!(report.entries[0].action, ReapAction::Removed);
    assert!(!path.exists());
}

#[test]
fn reap_keeps_young_files_and_the_last_success() {
    let dir = tempdir();
    let young = lock_path(&dir, "young.lock");
    std::fs::write(&young, "junk").unwrap();
    let report = lockfile::reap(
        dir.path(),
        ReapOptions::new()
            .remove(true)
            .older_than(std::time::Duration::from_secs(3600)),
    )
    .unwrap();
    assert_eq!(report.entries[0].action, ReapAction::Kept);
    assert!(
        report.entries[0].reason.contains("more recently"),
        "{}",
        report.entries[0].reason
    );

    // A stale file that carries the job's last success is kept: the silence
    // alarm needs it, and the next acquire reuses the file anyway.
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut guard = LockGuard::acquire(&path).unwrap();
    guard.record_success().unwrap();
    guard.disown();
    assert_eq!(lockfile::inspect(&path).unwrap().state, LockState::Stale);
    let report = lockfile::reap(dir.path(), ReapOptions::new().remove(true)).unwrap();
    assert_eq!(report.entries[0].action, ReapAction::Kept);
    assert!(
        report.entries[0].reason.contains("last success"),
        "{}",
        report.entries[0].reason
    );
    assert!(path.exists());
}
