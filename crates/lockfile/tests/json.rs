//! The JSON contract: every report reads back as it was written, and a
//! reader of this version reads past what a later minor version adds.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::time::{Duration, SystemTime};

use lockfile::history::{Outcome, RunEnd};
use lockfile::inspect::{Content, Finding, InspectOptions};
use lockfile::{LockGuard, LockOptions, LockReport, LockState};
use serde_json::{Value, json};

use crate::support::{ChildHolder, lock_path, tempdir};

/// Writes `report`, reads it back, and checks that the copy writes the same
/// document and keeps what a reader relies on.
fn round_trip(report: &LockReport) -> Value {
    let written = serde_json::to_value(report).unwrap();
    assert_eq!(written["version"], 1, "{written}");
    let back: LockReport = serde_json::from_value(written.clone()).unwrap();
    assert_same(&serde_json::to_value(&back).unwrap(), &written, "");
    assert_eq!(back.path, report.path);
    assert_eq!(back.state, report.state);
    assert_eq!(back.owner, report.owner);
    assert_eq!(back.holders, report.holders);
    assert_eq!(back.last_run, report.last_run);
    assert_eq!(back.content, report.content);
    assert_eq!(back.content_error, report.content_error);
    assert_eq!(back.no_record, report.no_record);
    assert_eq!(back.findings.len(), report.findings.len());
    written
}

/// `a` and `b` are the same document: the same keys and values, numbers
/// equal to within a nanosecond's worth (seconds pass through `Duration`).
fn assert_same(a: &Value, b: &Value, at: &str) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let keys = |o: &serde_json::Map<String, Value>| o.keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(a), keys(b), "keys at {at:?}");
            for (key, value) in a {
                assert_same(value, &b[key], &format!("{at}.{key}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "length at {at:?}");
            for (i, (a, b)) in a.iter().zip(b).enumerate() {
                assert_same(a, b, &format!("{at}[{i}]"));
            }
        }
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-9 * x.abs().max(1.0),
                "{x} != {y} at {at:?}"
            );
        }
        (a, b) => assert_eq!(a, b, "at {at:?}"),
    }
}

#[test]
fn every_report_reads_back_as_it_was_written() {
    let dir = tempdir();
    let mut states = Vec::new();

    let absent = lock_path(&dir, "absent.lock");
    states.push(lockfile::inspect(&absent).unwrap());

    let free = lock_path(&dir, "free.lock");
    let mut guard = LockOptions::new()
        .heartbeat_interval(Duration::from_millis(1500))
        .try_acquire(&free)
        .unwrap();
    guard
        .record_outcome(RunEnd {
            outcome: Outcome::Failed,
            exit_code: Some(3),
            signal: None,
            started_at: SystemTime::now() - Duration::from_secs(1),
        })
        .unwrap();
    guard.release().unwrap();
    let report = lockfile::inspect(&free).unwrap();
    let owner = &round_trip(&report)["owner"];
    assert_eq!(owner["heartbeat_interval_ms"], 1500);
    assert_eq!(owner["heartbeat_interval_seconds"], 1.5);
    states.push(report);

    let held = lock_path(&dir, "held.lock");
    let (holder, _) = ChildHolder::hold(&held, "nightly");
    let stale = lock_path(&dir, "stale.lock");
    let (killed, _) = ChildHolder::hold(&stale, "killed");
    killed.kill();
    let debris = lock_path(&dir, "debris.lock");
    std::fs::write(&debris, "{\"format\": 1, \"pid\": ").unwrap();
    let foreign = lock_path(&dir, "foreign.lock");
    std::fs::write(&foreign, "#!/bin/sh\necho not a record\n").unwrap();
    let by_flock = lock_path(&dir, "flock.lock");
    // In a group of its own, killed whole on drop: flock(1) and its sleep,
    // which holds the lock too.
    struct Group(std::process::Child);
    impl Drop for Group {
        fn drop(&mut self) {
            let pid = rustix::process::Pid::from_raw(self.0.id() as i32).unwrap();
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            let _ = self.0.wait();
        }
    }
    let _flock = Group(
        Command::new("flock")
            .arg("-s")
            .arg(&by_flock)
            .args(["sleep", "60"])
            .process_group(0)
            .spawn()
            .expect("run flock(1)"),
    );
    crate::support::wait_until("flock(1) to hold its lock", || {
        lockfile::inspect(&by_flock).unwrap().state == LockState::Held
    });
    let bad = dir.path().join(OsStr::from_bytes(b"bad\xffname.lock"));
    LockGuard::try_acquire(&bad).unwrap().release().unwrap();

    for path in [&held, &stale, &debris, &foreign, &by_flock, &bad] {
        states.push(lockfile::inspect(path).unwrap());
    }
    for report in &states {
        round_trip(report);
    }
    let seen: Vec<LockState> = states.iter().map(|r| r.state).collect();
    for state in [
        LockState::Absent,
        LockState::Free,
        LockState::Held,
        LockState::Stale,
        LockState::Debris,
    ] {
        assert!(seen.contains(&state), "{state:?} in {seen:?}");
    }
    assert!(states.iter().any(|r| r.content == Some(Content::Foreign)));
    assert!(states.iter().any(|r| r.shared));
    assert!(states.iter().any(|r| !r.findings.is_empty()));
    let last = serde_json::to_value(states.last().unwrap()).unwrap();
    assert_eq!(last["path_escaped"], true, "{last}");

    holder.kill();
}

#[test]
fn keys_and_kinds_a_later_version_adds_are_read_past() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (holder, _) = ChildHolder::hold(&path, "nightly");
    let report = InspectOptions::new()
        .max_age(Duration::ZERO)
        .inspect(&path)
        .unwrap();
    let mut value = serde_json::to_value(&report).unwrap();
    let findings = report.findings.len();
    assert!(findings > 0, "{value}");
    value["added_later"] = json!({"nested": [1, 2]});
    value["owner"]["added_later"] = json!(true);
    value["findings"]
        .as_array_mut()
        .unwrap()
        .push(json!({"kind": "a_later_kind", "severity": "warning", "message": "…", "x": 1}));
    value["findings"][0]["added_later"] = json!("ignored");
    // A finding of a known kind that does not read is an error, not left
    // out: dropping it could read a hung holder as healthy.
    let mut broken = value.clone();
    broken["findings"][0]["age_seconds"] = json!("a string");
    let e = serde_json::from_value::<LockReport>(broken).unwrap_err();
    assert!(
        e.to_string().contains("age_seconds") || e.to_string().contains("f64"),
        "{e}"
    );
    let back: LockReport = serde_json::from_value(value).unwrap();
    assert_eq!(back.findings.len(), findings);
    let kinds = |r: &LockReport| r.findings.iter().map(Finding::kind).collect::<Vec<_>>();
    assert_eq!(kinds(&back), kinds(&report));
    assert_eq!(back.owner, report.owner);
    holder.kill();
}
