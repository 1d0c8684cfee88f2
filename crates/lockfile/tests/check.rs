//! Health checks through the library: the verdicts, their order, the
//! plugin line and the exit code, on real lock files and real holders.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use lockfile::check::{CheckOptions, Status, VerdictKind};
use lockfile::history::{Outcome, RunEnd};
use lockfile::tick::Schedule;
use lockfile::{LockGuard, LockOptions};

use crate::support::{ChildHolder, lock_path, tempdir};

fn failed(exit_code: i32) -> RunEnd {
    RunEnd {
        outcome: Outcome::Failed,
        exit_code: Some(exit_code),
        signal: None,
        started_at: SystemTime::now() - Duration::from_secs(1),
    }
}

fn kinds<R>(health: &lockfile::check::Health<R>) -> Vec<VerdictKind> {
    health.verdicts.iter().map(|v| v.kind).collect()
}

#[test]
fn a_recent_success_is_ok_and_its_line_says_when() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut guard = LockGuard::try_acquire(&path).unwrap();
    guard.record_success().unwrap();
    guard.release().unwrap();

    let health = CheckOptions::new()
        .expect_every(Duration::from_secs(3600))
        .check(&path)
        .unwrap();
    assert_eq!(health.status, Status::Ok, "{health}");
    assert!(health.verdicts.is_empty());
    assert!(health.is_healthy());
    // The age in whole seconds: "0s" unless a second passed meanwhile.
    let line = health.to_string();
    let prefix = format!("OK: `{}`: last success ", lockfile::text::path(&path));
    assert!(
        line.starts_with(&prefix) && line.ends_with("s ago"),
        "{line}"
    );
    assert_eq!(ExitCode::from(health.status), ExitCode::from(0));
}

#[test]
fn failures_in_a_row_are_failing_from_the_threshold_on() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    for code in [3, 4] {
        let mut guard = LockGuard::try_acquire(&path).unwrap();
        guard.record_outcome(failed(code)).unwrap();
        guard.release().unwrap();
    }
    let health = lockfile::check::check(&path).unwrap();
    assert_eq!(health.status, Status::Critical);
    assert_eq!(kinds(&health), [VerdictKind::Failing]);
    let message = &health.verdicts[0].message;
    assert!(
        message.starts_with(
            "2 run(s) in a row failed (at most 1 allowed); the last one failed, exit status 4"
        ),
        "{message}"
    );
    assert!(health.to_string().starts_with("CRITICAL: `"), "{health}");
    assert!(!health.is_healthy());

    // Its JSON carries the contract's version and the plugin's code, and
    // reads back.
    let json = serde_json::to_value(&health).unwrap();
    assert_eq!(
        (json["version"].clone(), json["code"].clone()),
        (1.into(), 2.into())
    );
    assert_eq!(json["verdicts"][0]["kind"], "failing");
    let back: lockfile::check::Health<lockfile::LockReport> = serde_json::from_value(json).unwrap();
    assert_eq!(back.verdicts, health.verdicts);
    assert_eq!(back.status, health.status);
    assert_eq!(back.report.last_run, health.report.last_run);

    let health = CheckOptions::new().max_failures(3).check(&path).unwrap();
    assert_eq!(health.status, Status::Ok, "{health}");
    // Zero failures allowed would alarm on every success: it counts as one.
    let mut guard = LockGuard::try_acquire(&path).unwrap();
    guard.record_success().unwrap();
    guard.release().unwrap();
    let health = CheckOptions::new().max_failures(0).check(&path).unwrap();
    assert_eq!(health.status, Status::Ok, "{health}");
}

#[test]
fn no_success_ever_and_a_job_that_stopped_are_told_apart() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    LockGuard::try_acquire(&path).unwrap().release().unwrap();
    let mut opts = CheckOptions::new();
    opts.expect_every(Duration::from_secs(60));
    let health = opts.check(&path).unwrap();
    assert_eq!(kinds(&health), [VerdictKind::NeverSucceeded]);

    let mut guard = LockGuard::try_acquire(&path).unwrap();
    guard.record_success().unwrap();
    guard.release().unwrap();
    assert_eq!(opts.check(&path).unwrap().status, Status::Ok);
    // Aged by two minutes, the success is older than once a minute.
    let mut text = std::fs::read_to_string(&path).unwrap();
    let success = serde_json::from_str::<serde_json::Value>(&text).unwrap()["last_success"]
        .as_str()
        .unwrap()
        .to_owned();
    let earlier = humantime::parse_rfc3339(&success).unwrap() - Duration::from_secs(120);
    let earlier = humantime::format_rfc3339_micros(earlier).to_string();
    assert_eq!(earlier.len(), success.len());
    text = text.replace(&success, &earlier);
    std::fs::write(&path, text).unwrap();
    let health = opts.check(&path).unwrap();
    assert_eq!(kinds(&health), [VerdictKind::Silent], "{health}");
    assert_eq!(health.status, Status::Critical);
}

#[test]
fn a_hung_holder_is_critical_and_sorted_before_a_warning() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (_holder, _) = ChildHolder::hold(&path, "hung");
    // Age the heartbeat (the file's mtime) by ten minutes.
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(600))
        .unwrap();
    let health = CheckOptions::new()
        .stale_after(Duration::from_secs(60))
        .max_age(Duration::ZERO)
        .check(&path)
        .unwrap();
    assert_eq!(health.status, Status::Critical, "{health}");
    assert_eq!(
        kinds(&health),
        [VerdictKind::Hung, VerdictKind::Overrunning],
        "{health}"
    );
    let line = health.to_string();
    assert!(line.contains("hung: "), "{line}");
    assert!(line.contains("; overrunning: "), "{line}");
}

#[test]
fn ticks_that_passed_without_a_run_are_missed() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    LockOptions::new()
        .try_acquire(&path)
        .unwrap()
        .release()
        .unwrap();
    let schedule = Schedule::new(Duration::from_secs(60), Duration::ZERO).unwrap();
    let health = CheckOptions::new().once_per(schedule).check(&path).unwrap();
    assert_eq!(kinds(&health), [VerdictKind::MissedTicks]);
    assert!(
        health.verdicts[0]
            .message
            .starts_with("no tick has finished yet (once per 1m;"),
        "{health}"
    );
}
