//! Fault injection: full and read-only filesystems, permissions, PID and UTS
//! namespaces, hostile content. Most of these tests need root (tmpfs and
//! loop mounts, `unshare`, `setpriv`): they are ignored with the reason
//! (`needs root: ...`), which cargo prints, and `scripts/test.sh` runs them
//! as root (`--include-ignored`). Run without root anyway, they fail with a
//! plain message: they never pass by doing nothing.
//!
//! Each case ends in a clear error or a correct classification; nothing
//! panics, and no file other than the lock is touched.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use lockfile::inspect::Finding;
use lockfile::inspect::NoRecord;
use lockfile::reap::ReapAction;
use lockfile::{Error, LockGuard, LockOptions, LockState, ReapOptions};

use crate::support::{
    ChildHolder, assert_acquirable, leave_background_holder, lock_path, require_root, tempdir,
};

/// A tmpfs mounted for one test, unmounted on drop (also after a failure).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(options: &str) -> Tmpfs {
        require_root("mounting a tmpfs");
        let dir = tempdir();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "lockfile-test"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(status.success(), "mount -t tmpfs -o {options} failed");
        Tmpfs { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The same files through a read-only bind mount, unmounted on drop.
    ///
    /// Not a remount of the tmpfs itself: a remount to read-only fails with
    /// EBUSY while any file on it is open for writing, and a child that
    /// another test thread forks holds a copy of every descriptor until it
    /// execs, the lock file's included. A new bind mount has no writers.
    fn read_only_view(&self) -> ReadOnlyView {
        let view = ReadOnlyView { dir: tempdir() };
        let bind = Command::new("mount")
            .arg("--bind")
            .arg(self.dir.path())
            .arg(view.dir.path())
            .status()
            .expect("run mount");
        assert!(bind.success(), "mount --bind failed");
        let read_only = Command::new("mount")
            .args(["-o", "remount,bind,ro"])
            .arg(view.dir.path())
            .status()
            .expect("run mount");
        assert!(read_only.success(), "mount -o remount,bind,ro failed");
        view
    }
}

/// A read-only bind mount of a [`Tmpfs`].
struct ReadOnlyView {
    dir: tempfile::TempDir,
}

impl ReadOnlyView {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for ReadOnlyView {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// A btrfs filesystem in a loop-mounted image file, unmounted on drop. On
/// btrfs, `stat` reports a per-subvolume device number that differs from the
/// one the kernel's lock tables print.
struct Btrfs {
    dir: tempfile::TempDir,
    _image: tempfile::NamedTempFile,
}

impl Btrfs {
    fn mount() -> Btrfs {
        require_root("mounting a btrfs image");
        let image = tempfile::NamedTempFile::new().unwrap();
        image.as_file().set_len(128 << 20).unwrap(); // sparse
        let mkfs = Command::new("mkfs.btrfs")
            .arg("-q")
            .arg(image.path())
            .status()
            .expect("this test needs mkfs.btrfs (Debian: btrfs-progs)");
        assert!(mkfs.success(), "mkfs.btrfs failed");
        let dir = tempdir();
        let status = Command::new("mount")
            .args(["-o", "loop"])
            .arg(image.path())
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "cannot loop-mount a btrfs image");
        Btrfs { dir, _image: image }
    }
}

impl Drop for Btrfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
#[ignore = "needs root: loop-mounts a btrfs image (mkfs.btrfs)"]
fn on_btrfs_inspect_finds_the_holder_and_an_inheritor() {
    let fs = Btrfs::mount();
    let path = fs.dir.path().join("job.lock");
    let (holder, _) = ChildHolder::hold(&path, "on-btrfs");
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held, "{:?}", report.findings);
    assert_eq!(report.holders[0].pid, holder.pid());
    let reaped = lockfile::reap(fs.dir.path(), ReapOptions::new().remove(true)).unwrap();
    assert_eq!(reaped.entries[0].action, ReapAction::Kept);
    holder.kill();

    // A background process that inherited the lock is found through its
    // descriptors once the process that took the lock is gone.
    let bg = leave_background_holder(&path);
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert_eq!(
        report.holders.iter().map(|h| h.pid).collect::<Vec<_>>(),
        [bg]
    );
    let _ = Command::new("kill").arg(bg.to_string()).status();
}

/// Runs a child `action` as the unprivileged user `nobody` (uid 65534).
fn spawn_as_nobody(action: &str) -> ChildHolder {
    require_root("setpriv to an unprivileged uid");
    ChildHolder::spawn_under(
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ],
        action,
    )
}

fn assert_not_held(path: &Path) {
    let probe = std::fs::File::open(path).unwrap();
    probe
        .try_lock()
        .expect("a failed acquire must not leave the lock held");
}

#[test]
#[ignore = "needs root: mounts a tmpfs"]
fn a_full_disk_fails_the_acquire_cleanly_and_leaves_nothing_held() {
    let fs = Tmpfs::mount("size=4k");
    // Fill the filesystem's only page.
    let filler = fs.path("filler");
    std::fs::write(&filler, vec![7u8; 4096]).unwrap();
    assert!(
        std::fs::write(fs.path("more"), b"x").is_err(),
        "the tmpfs is full"
    );

    let path = fs.path("job.lock");
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert!(matches!(err, Error::NoSpace { .. }), "{err:?}");
    assert!(err.to_string().contains("job.lock"), "{err}");
    assert!(err.to_string().contains("no space"), "{err}");
    assert_not_held(&path);
    assert_eq!(std::fs::read(&filler).unwrap(), vec![7u8; 4096]);

    // Once there is room, the same path works.
    std::fs::remove_file(&filler).unwrap();
    assert_acquirable(&path);
}

#[test]
#[ignore = "needs root: mounts a tmpfs and a read-only view of it"]
fn a_read_only_filesystem_is_named_as_such() {
    let fs = Tmpfs::mount("size=64k");
    let existing = fs.path("existing.lock");
    LockGuard::acquire(&existing).unwrap().release().unwrap();
    let ro = fs.read_only_view();
    let existing = ro.path("existing.lock");

    let err = LockGuard::try_acquire(ro.path("new.lock")).unwrap_err();
    assert!(matches!(err, Error::ReadOnlyFilesystem { .. }), "{err:?}");
    assert!(err.to_string().contains("read-only"), "{err}");
    let err = LockGuard::try_acquire(&existing).unwrap_err();
    assert!(matches!(err, Error::ReadOnlyFilesystem { .. }), "{err:?}");
    // Inspecting only reads, so it still works.
    assert_eq!(lockfile::inspect(&existing).unwrap().state, LockState::Free);
}

#[test]
#[ignore = "needs root: mounts a tmpfs and a read-only view of it"]
fn a_file_on_a_read_only_filesystem_is_locked_read_only_when_the_record_is_optional() {
    let fs = Tmpfs::mount("size=64k");
    let path = fs.path("job.lock");
    LockGuard::acquire(&path).unwrap().release().unwrap();
    let before = std::fs::read(&path).unwrap();
    let ro = fs.read_only_view();
    let path = ro.path("job.lock");
    let guard = LockOptions::new()
        .record_optional(true)
        .try_acquire(&path)
        .unwrap();
    assert_eq!(guard.no_record(), Some(NoRecord::ReadOnly));
    guard.heartbeat().unwrap();
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert_eq!(report.no_record, Some(NoRecord::ReadOnly));
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    guard.release().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
#[ignore = "needs root: runs a child as another user (setpriv)"]
fn a_file_the_user_may_only_read_is_locked_read_only_and_left_alone() {
    require_root("setpriv to an unprivileged uid");
    let dir = tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = lock_path(&dir, "job.lock");
    LockGuard::acquire(&path).unwrap().release().unwrap(); // root's, mode 0644
    let before = std::fs::read(&path).unwrap();
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let mut child = spawn_as_nobody(&format!("hold-record-optional\t{}", path.display()));
    assert_eq!(child.expect_line("ready "), "ready read_only");
    assert!(LockGuard::try_acquire(&path).unwrap_err().is_contended());
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert_eq!(report.no_record, Some(NoRecord::ReadOnly));
    assert_eq!(report.holders[0].pid, child.pid());
    // The released record of the last owner is history, not evidence
    // against a holder that could not have written one.
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    child.kill();
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        modified
    );
}

#[test]
#[ignore = "needs root: runs a child as another user (setpriv)"]
fn a_directory_the_user_cannot_write_names_the_path_and_the_uid() {
    require_root("setpriv to an unprivileged uid");
    let dir = tempdir();
    // The child runs as `nobody` and must be able to reach the directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = lock_path(&dir, "job.lock");
    let mut child = spawn_as_nobody(&format!("try-acquire\t{}", path.display()));
    let outcome = child.expect_line("outcome ");
    assert!(outcome.contains("PermissionDenied"), "{outcome}");
    assert!(outcome.contains("euid 65534"), "{outcome}");
    assert!(
        outcome.contains(&dir.path().display().to_string()),
        "{outcome}"
    );
    assert!(
        outcome.contains("owned by uid 0"),
        "says who owns it: {outcome}"
    );
    assert!(!path.exists());
}

#[test]
#[ignore = "needs root: runs a child as another user (setpriv)"]
fn a_lock_owned_by_another_user_names_the_owner() {
    require_root("setpriv to an unprivileged uid");
    let dir = tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = lock_path(&dir, "job.lock");
    LockGuard::acquire(&path).unwrap().release().unwrap(); // root's, mode 0644
    let before = std::fs::read(&path).unwrap();
    let mut child = spawn_as_nobody(&format!("try-acquire\t{}", path.display()));
    let outcome = child.expect_line("outcome ");
    assert!(outcome.contains("PermissionDenied"), "{outcome}");
    assert!(outcome.contains("the file"), "{outcome}");
    assert!(outcome.contains("mode 644"), "{outcome}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
#[ignore = "needs root: a PID namespace (unshare --pid)"]
fn a_holder_in_a_pid_namespace_is_judged_by_its_namespace() {
    require_root("unshare --pid");
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut holder = ChildHolder::spawn_under(
        &["unshare", "--pid", "--fork", "--kill-child"],
        &format!("hold\t{}\tcontained", path.display()),
    );
    holder.expect_line("ready ");

    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    let owner = report.owner.as_ref().unwrap();
    assert!(
        owner.pid <= 2,
        "the PID inside the namespace: {}",
        owner.pid
    );
    assert_eq!(report.holders.len(), 1);
    let findings = &report.findings;
    assert!(
        !findings
            .iter()
            .any(|f| matches!(f, Finding::HolderMismatch { .. })),
        "the kernel's holder is the record's owner, seen from outside: {findings:?}"
    );
    assert!(
        !findings
            .iter()
            .any(|f| matches!(f, Finding::OwnerDead { .. })),
        "{findings:?}"
    );

    // Its recorded PID is alive on the host (init), yet once the holder is
    // killed the lock is stale and free at once.
    assert!(Path::new(&format!("/proc/{}", owner.pid)).exists());
    // Kill the holder itself (by its host PID); `unshare` then reaps it and exits.
    let host_pid = report.holders[0].pid.to_string();
    assert!(
        Command::new("kill")
            .args(["-KILL", &host_pid])
            .status()
            .unwrap()
            .success()
    );
    holder.wait();
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Stale);
    let guard = LockGuard::try_acquire(&path).expect("acquirable at once");
    drop(guard);
}

#[test]
#[ignore = "needs root: a UTS namespace (unshare --uts)"]
fn a_holder_under_another_hostname_is_foreign_and_kept_by_reap() {
    require_root("unshare --uts");
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    // spawn_under appends the test binary as `$0` of the script.
    let script = "hostname far-away-host && exec \"$0\" --exact child_process_entry --nocapture --test-threads=1 -q";
    let mut holder = ChildHolder::spawn_under(
        &["unshare", "--uts", "sh", "-c", script],
        &format!("hold\t{}\telsewhere", path.display()),
    );
    holder.expect_line("ready ");

    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(&*report.owner.as_ref().unwrap().hostname, "far-away-host");
    assert!(
        report
            .findings
            .iter()
            .any(|f| matches!(f, Finding::ForeignHost { .. }))
    );
    holder.kill();

    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Stale);
    assert!(
        report
            .findings
            .iter()
            .any(|f| matches!(f, Finding::ForeignHost { .. }))
    );
    let reaped = lockfile::reap(dir.path(), ReapOptions::new().remove(true)).unwrap();
    assert_eq!(reaped.entries[0].action, ReapAction::Kept);
    assert!(
        reaped.entries[0]
            .reason
            .to_string()
            .contains("far-away-host")
    );
    assert!(path.exists());
    let reaped = lockfile::reap(
        dir.path(),
        ReapOptions::new().remove(true).include_foreign(true),
    )
    .unwrap();
    assert_eq!(reaped.entries[0].action, ReapAction::Removed);
}

/// Records that lie: a future timestamp, negative and absurd numbers,
/// non-UTF-8 bytes. Each is classified, never a panic, and the next acquire
/// replaces it.
#[test]
fn hostile_records_are_classified_and_replaced() {
    let dir = tempdir();
    let token = "00000000-0000-4000-8000-000000000001";
    let record = |owner: &str| format!(r#"{{"format":1,"released":false,"owner":{owner}}}"#);
    let cases: Vec<(&str, Vec<u8>, LockState)> = vec![
        (
            "future",
            record(&format!(
                r#"{{"pid":999999,"hostname":"h","token":"{token}","acquired_at":"2999-01-01T00:00:00Z"}}"#
            ))
            .into_bytes(),
            LockState::Stale,
        ),
        (
            "negative",
            record(&format!(
                r#"{{"pid":-5,"hostname":"h","token":"{token}","acquired_at":"2026-01-01T00:00:00Z"}}"#
            ))
            .into_bytes(),
            LockState::Debris,
        ),
        (
            "absurd",
            record(&format!(
                r#"{{"pid":4294967295,"hostname":"h","token":"{token}","acquired_at":"2026-01-01T00:00:00Z","start_time":18446744073709551615,"heartbeat_interval_ms":18446744073709551615}}"#
            ))
            .into_bytes(),
            LockState::Stale,
        ),
        (
            "overflow",
            record(&format!(
                r#"{{"pid":1e400,"hostname":"h","token":"{token}","acquired_at":"2026-01-01T00:00:00Z"}}"#
            ))
            .into_bytes(),
            LockState::Debris,
        ),
        ("non-utf8", b"{\"format\":1,\"released\":\xff\xfe}".to_vec(), LockState::Debris),
        ("nul bytes", vec![0u8; 600], LockState::Debris),
    ];
    for (name, bytes, expected) in cases {
        let path = lock_path(&dir, &format!("{name}.lock"));
        std::fs::write(&path, &bytes).unwrap();
        let report = lockfile::inspect(&path).unwrap();
        assert_eq!(report.state, expected, "{name}");
        if let Some(age) = report.age {
            assert!(
                age < Duration::from_secs(86_400 * 365 * 5),
                "{name}: age {age:?}"
            );
        }
        let guard = LockGuard::try_acquire(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let now = std::fs::read(&path).unwrap();
        assert_eq!(
            lockfile::record::decode_record(&now).unwrap().token,
            guard.record().token
        );
    }
}

#[test]
fn a_one_gib_lock_file_is_inspected_in_bounded_memory() {
    let dir = tempdir();
    let path = lock_path(&dir, "huge.lock");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(1 << 30).unwrap();
    drop(file);
    let mut child = ChildHolder::spawn(&format!("inspect-peak-memory\t{}", path.display()));
    let outcome = child.expect_line("outcome ");
    let mut words = outcome.split_whitespace().skip(1);
    assert_eq!(words.next(), Some("debris"), "{outcome}");
    let peak_kib: u64 = words.next().unwrap().parse().unwrap();
    // Reading the file whole would need a GiB; the bounded read needs 64 KiB.
    assert!(peak_kib < 256 * 1024, "peak memory {peak_kib} KiB");
}

#[test]
#[ignore = "needs root: runs a child as another user (setpriv)"]
fn a_holder_that_does_not_own_a_shared_lock_file_can_still_beat() {
    require_root("setpriv to an unprivileged uid");
    let dir = tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = lock_path(&dir, "shared.lock");
    LockGuard::acquire(&path).unwrap().release().unwrap();
    // A lock shared by several users: root's file, writable by all.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut child = spawn_as_nobody(&format!("heartbeat\t{}", path.display()));
    let outcome = child.expect_line("outcome ");
    assert_eq!(outcome, "outcome beat");
}
