//! Whatever sits at the lock path, nothing panics, the error names the path,
//! and no file other than the lock is touched.

use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};

use std::fs::File;
use std::path::Path;

use lockfile::inspect::{Content, NoRecord};
use lockfile::{Error, LockGuard, LockOptions, LockState};

use crate::support::{
    assert_acquirable, assert_not_regular, fingerprint, lock_path, require_flock, tempdir,
    write_aged,
};

const SCRIPT: &[u8] = b"#!/bin/sh\necho \"ran $0\"\n";

#[test]
fn foreign_content_is_refused_by_default_and_left_unchanged() {
    let dir = tempdir();
    for (name, content) in [
        ("script.sh", SCRIPT),
        ("data.lock", &b"precious data\n"[..]),
        ("pid.lock", b"12345\n"),
        ("other.lock", b"{\"format\": \"yaml\", \"indent\": 2}\n"),
    ] {
        let path = lock_path(&dir, name);
        write_aged(&path, content);
        let before = fingerprint(&path);
        let err = LockGuard::try_acquire(&path).unwrap_err();
        assert!(
            matches!(err, Error::ForeignContent { .. }),
            "{name}: {err:?}"
        );
        let message = err.to_string();
        assert!(message.contains(name), "{message}");
        assert!(
            message.contains(&format!("{} bytes", content.len())),
            "{message}"
        );
        let err = LockGuard::acquire(&path).unwrap_err();
        assert!(
            matches!(err, Error::ForeignContent { .. }),
            "{name}: {err:?}"
        );
        assert_eq!(fingerprint(&path), before, "{name} changed");
        // Nothing stays locked after the refusal.
        File::open(&path).unwrap().try_lock().unwrap();
        let report = lockfile::inspect(&path).unwrap();
        assert_eq!(report.content, Some(Content::Foreign), "{name}");
        assert_eq!(report.no_record, Some(NoRecord::ForeignContent), "{name}");
    }
}

#[test]
fn record_optional_locks_foreign_content_read_only_and_leaves_it_byte_for_byte() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.sh");
    // Written, made executable and aged by a child process: a file this
    // process wrote would be open for writing in every child that another
    // test's thread forks meanwhile, until that child execs, and executing
    // it then fails with ETXTBSY.
    let status = std::process::Command::new("sh")
        .args([
            "-c",
            "printf '%s' \"$2\" > \"$1\" && chmod 755 \"$1\" && touch -d @1600000000 \"$1\"",
            "sh",
        ])
        .arg(&path)
        .arg(std::str::from_utf8(SCRIPT).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    let before = fingerprint(&path);

    let mut guard = LockOptions::new()
        .record_optional(true)
        .remove_on_release(true)
        .heartbeat_interval(Duration::from_secs(1))
        .try_acquire(&path)
        .unwrap();
    assert_eq!(guard.no_record(), Some(NoRecord::ForeignContent));
    assert!(LockGuard::try_acquire(&path).unwrap_err().is_contended());
    guard.heartbeat().unwrap();
    guard.record_success().unwrap();
    // Linux refuses to execute a file that anyone holds open for writing:
    // the script that locks itself still runs.
    let out = std::process::Command::new(&path).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ran "));

    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert_eq!(report.content, Some(Content::Foreign));
    assert_eq!(report.no_record, Some(NoRecord::ForeignContent));
    assert!(report.owner.is_none());
    assert_eq!(report.holders[0].pid, std::process::id());
    assert!(report.findings.is_empty(), "{:?}", report.findings);

    guard.release().unwrap();
    assert!(path.exists(), "a file that is not ours is never removed");
    assert_eq!(fingerprint(&path), before, "the file changed");
    assert_acquirable_without_record(&path);
}

fn assert_acquirable_without_record(path: &Path) {
    let guard = LockOptions::new()
        .record_optional(true)
        .try_acquire(path)
        .unwrap();
    assert!(guard.no_record().is_some());
    drop(guard);
}

#[test]
fn a_held_empty_file_locked_read_only_by_flock_1_raises_no_finding() {
    require_flock();
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    std::fs::write(&path, "").unwrap();
    let mut flock = std::process::Command::new("flock")
        .arg(&path)
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    let started = Instant::now();
    let report = loop {
        let report = lockfile::inspect(&path).unwrap();
        if report.state == LockState::Held || started.elapsed() > Duration::from_secs(20) {
            break report;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = flock.kill();
    let _ = flock.wait();
    assert_eq!(report.state, LockState::Held);
    assert_eq!(report.content, Some(Content::Empty));
    assert_eq!(report.no_record, Some(NoRecord::ReadOnly));
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

#[test]
fn a_symlink_at_the_lock_path_is_refused_and_the_victim_is_unchanged() {
    let dir = tempdir();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "precious data\n").unwrap();
    let path = lock_path(&dir, "job.lock");
    symlink(&victim, &path).unwrap();

    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert!(matches!(err, Error::Symlink { .. }), "{err:?}");
    assert!(err.to_string().contains("job.lock"), "{err}");
    let err = LockGuard::acquire(&path).unwrap_err();
    assert!(matches!(err, Error::Symlink { .. }), "{err:?}");
    assert!(matches!(
        lockfile::inspect(&path),
        Err(Error::Symlink { .. })
    ));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious data\n");

    // A dangling symlink is refused too, and nothing is created behind it.
    let dangling = lock_path(&dir, "dangling.lock");
    symlink(dir.path().join("created-through-link"), &dangling).unwrap();
    assert!(matches!(
        LockGuard::try_acquire(&dangling),
        Err(Error::Symlink { .. })
    ));
    assert!(!dir.path().join("created-through-link").exists());
}

#[test]
fn an_empty_file_is_free() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    std::fs::write(&path, "").unwrap();
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Free);
    assert!(report.owner.is_none());
    assert_acquirable(&path);
}

#[test]
fn a_torn_record_is_debris_and_the_next_acquire_replaces_it() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut junk = b"{\"format\":1,\"released\":false,\"owner\":{\"pid\": 12, \"truncated".to_vec();
    junk.extend_from_slice(&[0xff, 0x00, 0xfe]);
    junk.resize(10_000, b'x');
    std::fs::write(&path, &junk).unwrap();
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Debris);
    assert_eq!(report.content, Some(Content::Torn));
    assert!(report.content_error.is_some());

    let guard = LockGuard::try_acquire(&path).unwrap();
    let content = std::fs::read(&path).unwrap();
    assert!(content.len() < 10_000, "the old tail was cut off");
    assert_eq!(
        lockfile::record::decode_record(&content).unwrap().token,
        guard.record().token
    );
}

/// A 1 GiB file of zeros is someone else's (a disk image), not a torn
/// record: it is never shrunk, only locked without a record when allowed.
#[test]
fn a_one_gib_lock_file_is_inspected_and_locked_without_reading_it_whole() {
    let dir = tempdir();
    let path = lock_path(&dir, "huge.lock");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(1 << 30).unwrap(); // sparse: costs no disk
    drop(file);
    let started = Instant::now();
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Debris);
    assert_eq!(report.content, Some(Content::Foreign));
    assert_eq!(report.size, 1 << 30);
    // Reading 1 GiB would take seconds; a bounded read is instant. This is a
    // sanity bound with a huge margin, not a benchmark.
    assert!(started.elapsed() < Duration::from_secs(5));
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert!(matches!(err, Error::ForeignContent { .. }), "{err:?}");
    let guard = LockOptions::new()
        .record_optional(true)
        .try_acquire(&path)
        .unwrap();
    assert_eq!(guard.no_record(), Some(NoRecord::ForeignContent));
    drop(guard);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 30);
}

#[test]
fn a_directory_at_the_lock_path_is_refused() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    std::fs::create_dir(&path).unwrap();
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert_not_regular(&err, "directory");
    // Nothing was created in it, and nothing holds it.
    assert_eq!(std::fs::read_dir(&path).unwrap().count(), 0);
    // inspect reports a directory's own lock (see tests/directory.rs).
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Free);
    assert_eq!(report.no_record, Some(NoRecord::Directory));
}

#[test]
fn a_fifo_at_the_lock_path_is_refused_without_hanging() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    rustix_mkfifo(&path);
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert_not_regular(&err, "FIFO");
    let err = LockGuard::acquire(&path).unwrap_err();
    assert_not_regular(&err, "FIFO");
    assert!(matches!(
        lockfile::inspect(&path),
        Err(Error::NotRegularFile { kind: "FIFO", .. })
    ));
}

#[test]
#[ignore = "needs root: creates a device node (mknod)"]
fn a_device_node_at_the_lock_path_is_refused() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    // /dev/null's twin: harmless to open, and not a regular file.
    let status = std::process::Command::new("mknod")
        .arg(&path)
        .args(["c", "1", "3"])
        .status()
        .expect("run mknod");
    assert!(
        status.success(),
        "mknod failed: this test needs root (CAP_MKNOD) to create a device node"
    );
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert_not_regular(&err, "character device");
    assert!(matches!(
        lockfile::inspect(&path),
        Err(Error::NotRegularFile { .. })
    ));
}

fn rustix_mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success());
}
