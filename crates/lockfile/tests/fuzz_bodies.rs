//! The bodies of the fuzz targets, as plain functions.
//!
//! `fuzz/fuzz_targets/*.rs` include this file (cargo-fuzz, nightly) and
//! `fuzz_corpus.rs` runs the same functions over the seed corpus on stable
//! Rust, so CI exercises every target without a nightly toolchain. Keep it
//! self-contained: only `std`, `lockfile` and `serde_json`.
//!
//! Each body panics when an invariant breaks; a panic is what the fuzzer
//! reports as a crash.

#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, SystemTime};

use lockfile::inspect::{Content, InspectOptions, NoRecord};
use lockfile::reap::ReapAction;
use lockfile::{Error, LockGuard, LockOptions, LockState, ReapOptions};

/// The longest file that may be a record of ours.
const MAX_RECORD: usize = 64 * 1024;

/// Decoding arbitrary bytes never panics, and whatever decodes is an owner
/// record that displays, ages and re-serialises stably.
pub(crate) fn decode_record(data: &[u8]) {
    let Ok(record) = lockfile::record::decode_record(data) else {
        return;
    };
    // The one-line description used in contention errors and `inspect`.
    let line = record.to_string();
    assert!(line.contains(&format!("pid {}", record.pid)), "{line}");
    let _ = record.age(SystemTime::now());
    let _ = record.heartbeat_interval();
    let _ = record.is_local();
    // Serialising is a normal form: what it prints parses back to a record
    // that prints the same. (The first pass may normalise: sub-microsecond
    // digits are dropped, out-of-range times clamped.)
    let first = serde_json::to_string(&record).expect("a decoded record serialises");
    let again: lockfile::OwnerRecord = serde_json::from_str(&first)
        .unwrap_or_else(|e| panic!("a serialised record does not parse back: {e}\n{first}"));
    let second = serde_json::to_string(&again).unwrap();
    assert_eq!(first, second, "serialisation is not stable");
}

/// Writes arbitrary bytes into a lock file in `dir`, then checks that
/// `inspect`, `reap`, `try_acquire` and `release` each behave: nobody holds
/// the file, so its state follows from its content alone, reap only ever
/// removes stale or debris files, content of ours is taken over by acquire,
/// and anyone else's is never written.
pub(crate) fn inspect_content(dir: &Path, data: &[u8]) {
    let path = dir.join("fuzz.lock");
    std::fs::write(&path, data).expect("write the lock file");

    let report = InspectOptions::new()
        .max_age(Duration::from_secs(1))
        .stale_after(Duration::from_secs(1))
        .expect_every(Duration::from_secs(1))
        .inspect(&path)
        .expect("inspect a regular file");
    let decoded = lockfile::record::decode_record(data);
    match &decoded {
        Ok(owner) => {
            assert!(
                matches!(report.state, LockState::Free | LockState::Stale),
                "a record that decodes is free or stale, not {}",
                report.state
            );
            assert_eq!(report.state == LockState::Free, report.released);
            assert_eq!(report.owner.as_ref(), Some(owner));
            assert!(report.content_error.is_none());
        }
        Err(_) => {
            // Only a whole file no longer than a record can be blank: a
            // longer one is someone else's, whatever it holds.
            let blank = data.len() <= MAX_RECORD && data.iter().all(u8::is_ascii_whitespace);
            let want = if blank {
                LockState::Free
            } else {
                LockState::Debris
            };
            assert_eq!(report.state, want);
            assert!(report.owner.is_none());
            assert_eq!(report.content_error.is_some(), !blank);
        }
    }
    if data.len() > MAX_RECORD {
        assert_eq!(
            report.content,
            Some(Content::Foreign),
            "longer than a record"
        );
    }
    assert!(report.holders.is_empty(), "nobody holds it");
    assert_eq!(report.size, data.len() as u64);
    // Every finding renders, and the report serialises as `inspect --json`
    // prints it.
    for finding in &report.findings {
        let _ = (finding.to_string(), finding.kind(), finding.severity());
    }
    serde_json::to_string(&report).expect("a report serialises");

    // A dry run decides from the same inspection; a real one removes exactly
    // what the dry run would, and nothing that is not litter.
    let dry = lockfile::reap(dir, &ReapOptions::new()).expect("reap (dry run)");
    let [entry] = dry.entries.as_slice() else {
        panic!("one lock file, one entry: {:?}", dry.entries);
    };
    assert_eq!(entry.state, Some(report.state));
    if entry.action == ReapAction::WouldRemove {
        assert!(matches!(report.state, LockState::Stale | LockState::Debris));
        assert!(report.last_success.is_none(), "the last success is kept");
    }
    let fixed = lockfile::reap(dir, ReapOptions::new().remove(true)).expect("reap");
    let removed = fixed.removed() == 1;
    assert_eq!(removed, entry.action == ReapAction::WouldRemove);
    assert_eq!(path.exists(), !removed);
    if removed {
        std::fs::write(&path, data).unwrap();
    }

    // Content of ours (or none) is taken over by the next acquire, which
    // leaves a record of its own that release marks released. Anyone else's
    // content is refused, and locked only without a record, byte for byte.
    if report.content == Some(Content::Foreign) {
        let err = LockGuard::try_acquire(&path).expect_err("foreign content is refused");
        assert!(matches!(err, Error::ForeignContent { .. }), "{err:?}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            data,
            "a refusal writes nothing"
        );
        let guard = LockOptions::new()
            .record_optional(true)
            .try_acquire(&path)
            .expect("lock foreign content without a record");
        assert_eq!(guard.no_record(), Some(NoRecord::ForeignContent));
        guard.release().expect("release");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            data,
            "locking writes nothing"
        );
        return;
    }
    let guard = LockGuard::try_acquire(&path).expect("acquire over content of ours");
    let token = guard.record().token;
    let content = std::fs::read(&path).unwrap();
    let written = lockfile::record::decode_record(&content).expect("acquire wrote a record");
    assert_eq!(written.token, token);
    // The last success is carried over from a previous record, never
    // invented.
    if let Some(carried) = guard.last_success() {
        assert_eq!(Some(carried), report.last_success);
    }
    guard.release().expect("release");
    let after = lockfile::inspect(&path).expect("inspect after release");
    assert_eq!(after.state, LockState::Free);
    assert_eq!(after.owner.map(|o| o.token), Some(token));
}
