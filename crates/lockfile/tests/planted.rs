//! Lock files that someone else may have written: planted files in shared
//! sticky directories, and times no run can have recorded. The attacks are
//! played for real, as root against an unprivileged attacker (setpriv); the
//! rules that need no second user run unprivileged.

use std::ffi::OsStr;
use std::fs::File;
use std::path::Path;
use std::time::{Duration, SystemTime};

use lockfile::inspect::{Finding, InspectOptions, TimeField};
use lockfile::{Error, LockGuard, LockOptions, LockState};

use crate::support::{
    ATTACKER, ChildHolder, ProtectedRegularOff, as_attacker, as_user, lock_path, require_root,
    shared_sticky_dir, tempdir,
};

/// The last success of the attack: the last day there is.
const DOOMSDAY: &str = "9999-12-31T00:00:00Z";

/// Sets top-level fields of the lock file's record.
fn forge(path: &Path, fields: &[(&str, serde_json::Value)]) -> Vec<u8> {
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    for (key, value) in fields {
        doc[*key] = value.clone();
    }
    serde_json::to_vec(&doc).unwrap()
}

fn future_times(findings: &[Finding]) -> Vec<TimeField> {
    findings
        .iter()
        .filter_map(|f| match f {
            Finding::FutureTime { field, .. } => Some(*field),
            _ => None,
        })
        .collect()
}

fn planted_owner(findings: &[Finding]) -> Option<u32> {
    findings.iter().find_map(|f| match f {
        Finding::PlantedFile { owner_uid, .. } => Some(*owner_uid),
        _ => None,
    })
}

/// Inspects with a success expected every hour.
fn inspect_expecting(path: &Path) -> lockfile::LockReport {
    InspectOptions::new()
        .expect_every(Duration::from_secs(3600))
        .inspect(path)
        .unwrap()
}

#[test]
fn a_success_in_the_future_is_reported_not_believed_and_not_carried_forward() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut guard = LockGuard::try_acquire(&path).unwrap();
    guard.record_success().unwrap();
    guard.release().unwrap();
    let forged = forge(&path, &[("last_success", DOOMSDAY.into())]);
    std::fs::write(&path, forged).unwrap();

    let report = inspect_expecting(&path);
    assert_eq!(future_times(&report.findings), [TimeField::LastSuccess]);
    assert_eq!(report.last_success, None, "never \"0 s ago\"");
    assert!(
        report
            .findings
            .iter()
            .any(|f| matches!(f, Finding::NeverSucceeded { .. })),
        "the silence alarm speaks: {:?}",
        report.findings
    );
    let json = serde_json::to_value(&report).unwrap();
    let finding = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "future_time")
        .unwrap();
    assert_eq!(finding["field"], "last_success");
    assert_eq!(finding["severity"], "warning");
    assert!(finding["time"].as_str().unwrap().starts_with("9999-12-31"));

    // A later run does not carry it on: the next record forgets it.
    let guard = LockGuard::try_acquire(&path).unwrap();
    assert_eq!(guard.last_success(), None);
    guard.release().unwrap();
    let report = inspect_expecting(&path);
    assert_eq!(future_times(&report.findings), []);
    assert_eq!(report.last_success, None);
}

#[test]
fn a_last_run_in_the_future_is_reported_and_not_carried_forward() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let mut guard = LockGuard::try_acquire(&path).unwrap();
    guard
        .record_outcome(lockfile::history::RunEnd {
            outcome: lockfile::history::Outcome::Failed,
            exit_code: Some(1),
            signal: None,
            started_at: SystemTime::now(),
        })
        .unwrap();
    guard.release().unwrap();
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["last_run"]["finished_at"] = DOOMSDAY.into();
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();

    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(future_times(&report.findings), [TimeField::LastRun]);
    assert!(report.last_run.is_none());
    let guard = LockGuard::try_acquire(&path).unwrap();
    assert!(guard.last_run().is_none(), "{:?}", guard.last_run());
    guard.release().unwrap();
}

#[test]
fn a_heartbeat_in_the_future_is_reported_and_never_reads_as_fresh() {
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let (mut holder, _) = ChildHolder::hold(&path, "beating");
    File::open(&path)
        .unwrap()
        .set_modified(SystemTime::now() + Duration::from_secs(3600))
        .unwrap();
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert_eq!(future_times(&report.findings), [TimeField::Heartbeat]);
    assert_eq!(report.heartbeat_age, None);
    assert!(holder.running());
}

#[test]
#[ignore = "needs root: another user's file in a directory only root may write"]
fn another_users_file_in_a_private_directory_is_normal() {
    require_root("chown");
    let dir = tempdir();
    let path = lock_path(&dir, "job.lock");
    let guard = LockGuard::try_acquire(&path).unwrap();
    guard.release().unwrap();
    // root's /var/lock/jobs, with a job's file owned by its service user.
    std::os::unix::fs::chown(&path, Some(ATTACKER), Some(ATTACKER)).unwrap();
    let report = lockfile::inspect(&path).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let reports = lockfile::inspect_dir(dir.path()).unwrap();
    let report = reports[0].as_ref().unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    LockGuard::try_acquire(&path).unwrap().release().unwrap();
}

/// The attacker's file in the shared directory: a record of her own run
/// (the test binary, run as her, takes the lock and exits).
fn plant(shared: &Path) -> std::path::PathBuf {
    let path = shared.join("job.lock");
    let mut child = ChildHolder::spawn_under(
        as_user(ATTACKER),
        &format!("try-acquire\t{}", path.display()),
    );
    let outcome = child.expect_line("outcome ");
    assert!(outcome.starts_with("outcome acquired"), "{outcome}");
    child.wait();
    path
}

#[test]
#[ignore = "needs root: plants a file as an unprivileged attacker (setpriv)"]
fn root_refuses_to_lock_a_planted_file() {
    require_root("setpriv");
    let (_dir, shared) = shared_sticky_dir();
    let path = plant(&shared);
    let before = std::fs::read(&path).unwrap();
    // The kernel's rule off: our own must refuse.
    let _sysctl = ProtectedRegularOff::new();

    for opts in [
        LockOptions::new(),
        LockOptions::new().record_optional(true).clone(),
        LockOptions::new()
            .evict_after(Duration::from_millis(1))
            .clone(),
    ] {
        let err = opts.try_acquire(&path).unwrap_err();
        assert!(
            matches!(
                err,
                Error::PlantedFile { owner_uid: ATTACKER, dir_owner_uid: 0, ref path }
                    if path.ends_with("job.lock")
            ),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains("uid 64001") && message.contains("protected_regular"),
            "{message}"
        );
    }
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing was written");
    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(planted_owner(&report.findings), Some(ATTACKER));
    let finding = report
        .findings
        .iter()
        .find(|f| matches!(f, Finding::PlantedFile { .. }))
        .unwrap();
    assert_eq!(finding.kind(), "planted_file");
    assert_eq!(finding.severity(), lockfile::inspect::Severity::Warning);
}

#[test]
#[ignore = "needs root: plants a file as an unprivileged attacker (setpriv)"]
fn a_success_in_9999_in_a_planted_file_is_not_believed() {
    require_root("setpriv");
    let (_dir, shared) = shared_sticky_dir();
    let path = plant(&shared);
    // She rewrites her own file: the kernel lets her.
    let forged = forge(&path, &[("last_success", DOOMSDAY.into())]);
    as_attacker(
        "sh",
        &[
            OsStr::new("-c"),
            OsStr::new("printf %s \"$DOC\" > \"$FILE\""),
        ],
        &[
            ("DOC", std::str::from_utf8(&forged).unwrap()),
            ("FILE", path.to_str().unwrap()),
        ],
    );

    let report = inspect_expecting(&path);
    assert_eq!(planted_owner(&report.findings), Some(ATTACKER));
    assert_eq!(future_times(&report.findings), [TimeField::LastSuccess]);
    assert_eq!(report.last_success, None);
    assert!(
        !report
            .findings
            .iter()
            .any(|f| matches!(f, Finding::Silent { .. })),
        "{:?}",
        report.findings
    );
}

#[test]
#[ignore = "needs root: plants a file as an unprivileged attacker (setpriv)"]
fn a_backdated_planted_file_gets_no_healthy_root_job_evicted() {
    require_root("setpriv");
    let (_dir, shared) = shared_sticky_dir();
    let path = shared.join("job.lock");
    // A healthy root job with a watchdog, promising a beat every minute,
    // whose file then belongs to the attacker: as it would had she planted
    // it before root's job took it under a release that did not refuse it.
    let (mut holder, _, _) = ChildHolder::hold_silent(&path, 60_000, "command", Some(1_000), false);
    std::os::unix::fs::chown(&path, Some(ATTACKER), Some(ATTACKER)).unwrap();
    // She backdates it by an hour: her file, her times.
    let hour_ago = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 3600;
    as_attacker(
        "touch",
        &[
            OsStr::new("-c"),
            OsStr::new("-d"),
            OsStr::new(&format!("@{hour_ago}")),
            path.as_os_str(),
        ],
        &[],
    );
    let _sysctl = ProtectedRegularOff::new();

    let report = lockfile::inspect(&path).unwrap();
    assert_eq!(report.state, LockState::Held);
    assert_eq!(planted_owner(&report.findings), Some(ATTACKER));
    assert_eq!(report.heartbeat_age, None, "its mtime is hers to set");
    assert_eq!(report.unhealthy(), None);

    let err = LockOptions::new()
        .evict_after(Duration::from_secs(1))
        .kill_after(Duration::from_millis(200))
        .try_acquire(&path)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::PlantedFile {
                owner_uid: ATTACKER,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(holder.running(), "the healthy job was signalled");
}
