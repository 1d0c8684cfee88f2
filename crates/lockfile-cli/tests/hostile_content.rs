//! Files that are not ours, however they begin: a file longer than any
//! record (a disk image that starts with zeros, a text that starts with
//! blank lines) is locked by `run` and by the `flock` form, kept by
//! `reap --fix`, and left byte for byte with its modification time.

mod common;

use common::{BoundedOutput, Dir, code, run_output, s, stderr};
use lockfile_test_support::foreign::{fingerprint, write_aged};

/// The longest file that may be a record of ours.
const MAX_RECORD: usize = 64 * 1024;

/// Zero-prefixed and whitespace-prefixed files of 65,537 bytes and of 1 MB,
/// some with data after the first 64 KiB.
fn big_files() -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for (filler, filler_name) in [(0u8, "zeros"), (b' ', "spaces"), (b'\n', "newlines")] {
        for len in [MAX_RECORD + 1, 1_000_000] {
            files.push((format!("{filler_name}-{len}.lock"), vec![filler; len]));
            if len > MAX_RECORD + 1 {
                let mut with_data = vec![filler; MAX_RECORD + 1];
                with_data.extend(b"DATA".iter().cycle().take(len - with_data.len()));
                files.push((format!("{filler_name}-then-data-{len}.lock"), with_data));
            }
        }
    }
    files
}

/// COMMAND runs under the lock: a second run inside it is excluded (75),
/// which it reports on stdout.
const EXCLUDED_INSIDE: &str = "\"$LOCKFILE\" run -n \"$LOCK\" true; echo $?";

#[test]
fn run_locks_a_big_file_and_leaves_it_unchanged() {
    let dir = Dir::new();
    for (name, content) in big_files() {
        let path = dir.path(&name);
        write_aged(&path, &content);
        let before = fingerprint(&path);

        let out = run_output(&["run", "-n", s(&path), "--", "true"]);
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        assert_eq!(fingerprint(&path), before, "{name}: run changed it");

        let out = common::lockfile()
            .args(["run", "-n", s(&path), "--", "sh", "-c", EXCLUDED_INSIDE])
            .env("LOCKFILE", env!("CARGO_BIN_EXE_lockfile"))
            .env("LOCK", &path)
            .bounded_output();
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "75\n",
            "{name}: the lock excluded a second run"
        );
        assert_eq!(fingerprint(&path), before, "{name}: run changed it");
    }
}

#[test]
fn the_flock_form_locks_a_big_file_and_leaves_it_unchanged() {
    let dir = Dir::new();
    for (name, content) in big_files() {
        let path = dir.path(&name);
        write_aged(&path, &content);
        let before = fingerprint(&path);

        let out = run_output(&["flock", s(&path), "true"]);
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        assert_eq!(fingerprint(&path), before, "{name}: flock changed it");

        // Held by the flock form, the file excludes a run.
        let out = common::lockfile()
            .args(["flock", s(&path), "sh", "-c", EXCLUDED_INSIDE])
            .env("LOCKFILE", env!("CARGO_BIN_EXE_lockfile"))
            .env("LOCK", &path)
            .bounded_output();
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "75\n", "{name}");
        assert_eq!(fingerprint(&path), before, "{name}: flock changed it");
    }
}

#[test]
fn reap_fix_keeps_every_big_file() {
    let dir = Dir::new();
    let files = big_files();
    let mut before = Vec::new();
    for (name, content) in &files {
        let path = dir.path(name);
        write_aged(&path, content);
        before.push((path.clone(), fingerprint(&path)));
    }
    let out = run_output(&["reap", "--fix", "--json", s(dir.tmp.path())]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let entries: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let entries = entries.as_array().unwrap();
    assert_eq!(entries.len(), files.len());
    for entry in entries {
        assert_eq!(entry["action"], "kept", "{entry}");
        assert_eq!(entry["reason_kind"], "foreign_content", "{entry}");
    }
    let out = run_output(&["reap", "--fix", s(dir.tmp.path())]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for (path, fingerprint_before) in &before {
        assert_eq!(
            &fingerprint(path),
            fingerprint_before,
            "{}: reap changed it",
            path.display()
        );
    }
}

#[test]
fn a_job_name_too_long_for_a_record_is_a_usage_error() {
    let dir = Dir::new();
    let path = dir.path("job.lock");
    let job = "j".repeat(MAX_RECORD);
    let out = run_output(&["run", "-n", "--job", &job, s(&path), "--", "true"]);
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("job name"), "{err}");
    assert!(err.contains("job.lock"), "{err}");
    assert!(!path.exists(), "nothing was created");
}
