//! The last success, which silence alarms (`inspect` with `expect_every`,
//! `lockfile check`) rely on, must come from a real owner record.

use lockfile::inspect::Finding;
use lockfile::inspect::InspectOptions;
use lockfile::{LockGuard, LockState};

use crate::support::{lock_path, tempdir};

/// Regression: a file that is not an owner record (debris: torn, truncated or
/// hand-edited), but starts like one and has a timestamp where our records
/// keep the last success, hands that "success" to the next holder.
///
/// `inspect` rightly reports the file as debris with no last success, but
/// `acquire` only peeks at the prefix and the timestamp at its fixed offset
/// (`record::peek`) without checking that the document decodes, carries the
/// timestamp into its own record, and from then on `lockfile check` reports
/// OK for a job that never succeeded. Suggested fix: in `write_record`,
/// carry `last_success` only when the previous document decodes (a full
/// parse only when a success was peeked, so the common path stays cheap).
#[test]
fn acquire_never_carries_a_last_success_out_of_debris() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    std::fs::write(
        &path,
        br#"{"format":1,"released":true,"last_success":"2026-11-30T14:07:32.123456Z" torn"#,
    )
    .unwrap();
    let before = lockfile::inspect(&path).unwrap();
    assert_eq!(before.state, LockState::Debris);
    assert_eq!(before.last_success, None);

    let guard = LockGuard::try_acquire(&path).unwrap();
    assert_eq!(guard.last_success(), None, "a success out of nowhere");
    guard.release().unwrap();
    let report = InspectOptions::new()
        .expect_every(std::time::Duration::from_secs(86_400))
        .inspect(&path)
        .unwrap();
    assert_eq!(report.last_success, None);
    assert!(
        matches!(report.findings[..], [Finding::NeverSucceeded { .. }]),
        "{:?}",
        report.findings
    );
}

/// `record_success` fills the last run as well as the last success, so that
/// a library holder's report reads as the command's does.
#[test]
fn record_success_also_records_the_last_run() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut guard = LockGuard::try_acquire(&path).unwrap();
    guard.record_success().unwrap();
    guard.release().unwrap();
    let report = lockfile::inspect(&path).unwrap();
    let run = report.last_run.expect("a last run");
    assert_eq!(run.outcome, lockfile::history::Outcome::Succeeded);
    assert_eq!(
        (run.exit_code, run.signal, run.consecutive_failures),
        (None, None, 0)
    );
    assert_eq!(report.last_success, Some(run.finished_at));
    assert!(run.started_at <= run.finished_at);
}
