//! Whatever sits at the lock path, nothing panics, the error names the path,
//! and no file other than the lock is touched.

use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};

use lockfile::{Error, LockGuard, LockState};

use crate::support::{assert_acquirable, lock_path, tempdir};

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
fn a_malformed_file_is_debris_and_the_next_acquire_replaces_it() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut junk = b"{\"pid\": 12, \"truncated".to_vec();
    junk.extend_from_slice(&[0xff, 0x00, 0xfe]);
    junk.resize(10_000, b'x');
    std::fs::write(&path, &junk).unwrap();
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Debris);
    assert!(report.content_error.is_some());

    let guard = LockGuard::try_acquire(&path).unwrap();
    let content = std::fs::read(&path).unwrap();
    assert!(content.len() < 10_000, "the old tail was cut off");
    assert_eq!(
        lockfile::decode_record(&content).unwrap().token,
        guard.record().token
    );
}

#[test]
fn a_one_gib_lock_file_is_inspected_and_acquired_without_reading_it_whole() {
    let dir = tempdir();
    let path = lock_path(&dir, "huge.lock");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(1 << 30).unwrap(); // sparse: costs no disk
    drop(file);
    let started = Instant::now();
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Debris);
    assert_eq!(report.size, 1 << 30);
    // Reading 1 GiB would take seconds; a bounded read is instant. This is a
    // sanity bound with a huge margin, not a benchmark.
    assert!(started.elapsed() < Duration::from_secs(5));
    let guard = LockGuard::try_acquire(&path).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() < 4096);
    drop(guard);
}

#[test]
fn a_directory_at_the_lock_path_is_refused() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    std::fs::create_dir(&path).unwrap();
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotRegularFile {
                kind: "directory",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(matches!(
        lockfile::inspect(&path),
        Err(Error::NotRegularFile { .. })
    ));
}

#[test]
fn a_fifo_at_the_lock_path_is_refused_without_hanging() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    rustix_mkfifo(&path);
    let err = LockGuard::try_acquire(&path).unwrap_err();
    assert!(
        matches!(err, Error::NotRegularFile { kind: "FIFO", .. }),
        "{err:?}"
    );
    let err = LockGuard::acquire(&path).unwrap_err();
    assert!(
        matches!(err, Error::NotRegularFile { kind: "FIFO", .. }),
        "{err:?}"
    );
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
    assert!(
        matches!(
            err,
            Error::NotRegularFile {
                kind: "character device",
                ..
            }
        ),
        "{err:?}"
    );
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
