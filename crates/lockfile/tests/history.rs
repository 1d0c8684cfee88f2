//! The run history a lock file keeps across holders, and beats checked
//! against the run's token.

use std::time::{Duration, SystemTime};

use lockfile::history::{Outcome, RunEnd};
use lockfile::reap::ReapAction;
use lockfile::{Error, LockGuard, LockOptions, LockState, ReapOptions};

use crate::support::{lock_path, tempdir};

fn end(outcome: Outcome, exit_code: Option<i32>, signal: Option<i32>) -> RunEnd {
    RunEnd {
        outcome,
        exit_code,
        signal,
        started_at: SystemTime::now() - Duration::from_secs(2),
    }
}

#[test]
fn the_last_run_survives_later_holders_and_counts_failures_in_a_row() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut guard = LockGuard::try_acquire(&path).unwrap();
    guard
        .record_outcome(end(Outcome::Failed, Some(3), None))
        .unwrap();
    guard.release().unwrap();

    let mut guard = LockGuard::try_acquire(&path).unwrap();
    let carried = guard.last_run().expect("carried to the next holder");
    assert_eq!(carried.outcome, Outcome::Failed);
    assert_eq!(carried.exit_code, Some(3));
    guard
        .record_outcome(end(Outcome::Hung, None, Some(15)))
        .unwrap();
    guard.release().unwrap();

    let report = lockfile::inspect(&path).unwrap();
    let run = report.last_run.as_ref().unwrap();
    assert_eq!(run.outcome, Outcome::Hung);
    assert_eq!(run.signal, Some(15));
    assert_eq!(run.consecutive_failures, 2);
    assert!(run.last_failure_at.is_some());
    let span = run.finished_at.duration_since(run.started_at).unwrap();
    assert!((run.duration_seconds - span.as_secs_f64()).abs() < 1e-3);
    assert!(run.duration_seconds > 1.0, "it started two seconds ago");
    let json = serde_json::to_value(&report).unwrap();
    for key in [
        "started_at",
        "finished_at",
        "duration_seconds",
        "exit_code",
        "signal",
        "outcome",
        "consecutive_failures",
        "last_failure_at",
    ] {
        assert!(json["last_run"].get(key).is_some(), "{key}: {json}");
    }
    assert_eq!(json["last_run"]["outcome"], "hung");

    let mut guard = LockGuard::try_acquire(&path).unwrap();
    guard
        .record_outcome(end(Outcome::Succeeded, Some(0), None))
        .unwrap();
    assert!(
        guard.last_success().is_some(),
        "a success is a last success"
    );
    guard.release().unwrap();
    let run = lockfile::inspect(&path).unwrap().last_run.unwrap();
    assert_eq!(run.consecutive_failures, 0);
    assert!(
        run.last_failure_at.is_some(),
        "the last failure stays known"
    );
}

#[test]
fn reap_keeps_a_stale_file_that_carries_a_run_history() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut guard = LockGuard::try_acquire(&path).unwrap();
    guard
        .record_outcome(end(Outcome::Failed, Some(1), None))
        .unwrap();
    guard.disown(); // as if the holder died: stale
    assert_eq!(lockfile::inspect(&path).unwrap().state, LockState::Stale);
    let report = lockfile::reap(dir.path(), ReapOptions::new().remove(true)).unwrap();
    assert_eq!(report.entries[0].action, ReapAction::Kept, "{report:?}");
    assert!(path.exists());
}

#[test]
fn the_record_carries_its_promises() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let guard = LockOptions::new()
        .heartbeat_interval(Duration::from_secs(2))
        .heartbeat_source(lockfile::record::HeartbeatSource::Command)
        .max_runtime(Duration::from_millis(90_500))
        .try_acquire(&path)
        .unwrap();
    let report = lockfile::inspect(&path).unwrap();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["owner"]["heartbeat_source"], "command");
    assert_eq!(json["owner"]["max_runtime_seconds"], 90.5);
    assert_eq!(
        report.owner.unwrap().max_runtime(),
        Some(Duration::from_millis(90_500))
    );
    drop(guard);
}

#[test]
fn a_beat_from_another_run_is_refused_and_changes_nothing() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let guard = LockGuard::try_acquire(&path).unwrap();
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let before = std::fs::read(&path).unwrap();

    let stranger = uuid::Uuid::from_u128(42);
    let err = lockfile::beat(&path, stranger).unwrap_err();
    assert!(matches!(err, Error::NotOurRun { .. }), "{err:?}");
    assert!(err.to_string().contains("job.lock"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), old);

    lockfile::beat(&path, guard.record().token).unwrap();
    assert!(std::fs::metadata(&path).unwrap().modified().unwrap() > old);

    let token = guard.record().token;
    guard.release().unwrap();
    assert!(
        matches!(
            lockfile::beat(&path, token),
            Err(Error::NotOurRun { found: None, .. })
        ),
        "a released record takes no beats"
    );
}
