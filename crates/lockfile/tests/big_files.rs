//! A file longer than any record is never ours, whatever it begins with: a
//! disk image that starts with zeros, a text that starts with blank lines.
//! It is locked, and never written, truncated or removed.

use std::path::Path;

use lockfile::inspect::{Content, NoRecord};
use lockfile::reap::{ReapAction, ReapReason};
use lockfile::{Error, LockGuard, LockOptions, ReapOptions};

use crate::support::{fingerprint, lock_path, tempdir, write_aged};

/// The longest file that may be a record of ours.
const MAX_RECORD: usize = 64 * 1024;

/// Files whose first 64 KiB and more are zero bytes or whitespace: some of
/// them that and nothing else, some with data after it.
pub(crate) fn big_files() -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for (filler, filler_name) in [(0u8, "zeros"), (b' ', "spaces"), (b'\n', "newlines")] {
        for len in [MAX_RECORD + 1, 1_000_000] {
            files.push((format!("{filler_name}-{len}.lock"), vec![filler; len]));
            let mut with_data = vec![filler; MAX_RECORD + 1];
            with_data.extend(b"DATA".iter().cycle().take(len - with_data.len()));
            if len > MAX_RECORD + 1 {
                files.push((format!("{filler_name}-then-data-{len}.lock"), with_data));
            }
        }
    }
    // What a record of ours begins with, in a file too long to be one.
    let mut like_a_record = b"{\"format\":1,\"released\":false,\"owner\":{".to_vec();
    like_a_record.resize(MAX_RECORD + 1, b' ');
    files.push(("record-prefix-65537.lock".to_owned(), like_a_record));
    files
}

#[test]
fn a_big_file_is_refused_by_default_and_locked_without_a_record_when_allowed() {
    let dir = tempdir();
    for (name, content) in big_files() {
        let path = lock_path(&dir, &name);
        write_aged(&path, &content);
        let before = fingerprint(&path);

        for err in [
            LockGuard::try_acquire(&path).unwrap_err(),
            LockGuard::acquire(&path).unwrap_err(),
        ] {
            assert!(
                matches!(err, Error::ForeignContent { size, .. } if size == content.len() as u64),
                "{name}: {err:?}"
            );
        }
        assert_eq!(fingerprint(&path), before, "{name}: refusal changed it");

        let mut opts = LockOptions::new();
        opts.record_optional(true).remove_on_release(true);
        let acquires: [fn(&LockOptions, &Path) -> lockfile::Result<LockGuard>; 2] =
            [|o, p| o.try_acquire(p), |o, p| o.acquire(p)];
        for acquire in acquires {
            let guard = acquire(&opts, &path).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(guard.no_record(), Some(NoRecord::ForeignContent), "{name}");
            // Locked: nobody else gets it meanwhile.
            let contended = opts.try_acquire(&path).unwrap_err();
            assert!(contended.is_contended(), "{name}: {contended:?}");
            guard.heartbeat().unwrap();
            guard.release().unwrap();
            assert_eq!(fingerprint(&path), before, "{name}: the lock changed it");
        }

        let report = lockfile::inspect(&path).unwrap();
        assert_eq!(report.content, Some(Content::Foreign), "{name}");
        assert_eq!(report.size, content.len() as u64, "{name}");
        assert_eq!(fingerprint(&path), before, "{name}: inspect changed it");
    }
}

#[test]
fn reap_never_removes_a_big_file() {
    let dir = tempdir();
    let files = big_files();
    let mut before = Vec::new();
    for (name, content) in &files {
        let path = lock_path(&dir, name);
        write_aged(&path, content);
        before.push((path.clone(), fingerprint(&path)));
    }
    for remove in [false, true] {
        let report = lockfile::reap(dir.path(), ReapOptions::new().remove(remove)).unwrap();
        assert_eq!(report.entries.len(), files.len());
        for entry in &report.entries {
            assert_eq!(entry.action, ReapAction::Kept, "{entry:?}");
            assert!(
                matches!(entry.reason, ReapReason::ForeignContent),
                "{entry:?}"
            );
        }
        for (path, fingerprint_before) in &before {
            assert_eq!(&fingerprint(path), fingerprint_before, "{}", path.display());
        }
    }
}

/// The boundary: a file of exactly the longest record's length, all zeros,
/// is still a torn record of ours, and the next acquire replaces it.
#[test]
fn a_zero_filled_file_no_longer_than_a_record_is_still_torn_and_ours() {
    let dir = tempdir();
    let path = lock_path(&dir, "torn.lock");
    std::fs::write(&path, vec![0; MAX_RECORD]).unwrap();
    assert_eq!(
        lockfile::inspect(&path).unwrap().content,
        Some(Content::Torn)
    );
    let guard = LockGuard::try_acquire(&path).unwrap();
    let now = std::fs::read(&path).unwrap();
    assert!(now.len() < 4096, "the zeros were cut off");
    assert_eq!(
        lockfile::record::decode_record(&now).unwrap().token,
        guard.record().token
    );
}

/// A job name that would take the record past the longest a record may be
/// is refused before anything is created.
#[test]
fn a_job_name_too_long_for_a_record_is_refused_before_the_file_is_created() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut opts = LockOptions::new();
    opts.job("j".repeat(MAX_RECORD));
    for err in [
        opts.try_acquire(&path).unwrap_err(),
        opts.acquire(&path).unwrap_err(),
    ] {
        assert!(
            matches!(err, Error::RecordTooLarge { job_len, .. } if job_len == MAX_RECORD),
            "{err:?}"
        );
        assert!(err.to_string().contains("job.lock"), "{err}");
    }
    assert!(!path.exists());
    // A long name that fits is written, and the record stays within the cap.
    opts.job("j".repeat(MAX_RECORD / 2));
    let mut guard = opts.try_acquire(&path).unwrap();
    guard.record_success().unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len <= MAX_RECORD as u64, "{len}");
    guard.release().unwrap();
    assert_eq!(
        lockfile::inspect(&path).unwrap().content,
        Some(Content::Record)
    );
}
