//! `lockfile run` as a flock(1) drop-in: a file that is not ours is locked
//! and left byte for byte as it was.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::SystemTime;

use common::{Dir, code, inspect_json, require_root, run_output, s, stderr};

/// Everything a lock must leave alone in a file that is not ours: bytes,
/// size and modification time.
fn fingerprint(path: &Path) -> (Vec<u8>, u64, SystemTime) {
    let meta = std::fs::metadata(path).unwrap();
    (
        std::fs::read(path).unwrap(),
        meta.len(),
        meta.modified().unwrap(),
    )
}

#[test]
fn the_script_that_locks_itself_runs_under_its_own_lock_and_stays_byte_identical() {
    let dir = Dir::new();
    let script = dir.path("myjob.sh");
    let log = dir.path("log");
    let lockfile = env!("CARGO_BIN_EXE_lockfile");
    // flock(1)'s manual: the script re-executes itself under its own lock.
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             [ \"${{FLOCKER}}\" != \"$0\" ] && exec env FLOCKER=\"$0\" {lockfile} run -n \"$0\" \"$0\" \"$@\" || :\n\
             echo \"locked run $*\" >> {log}\n\
             {lockfile} run -n \"$0\" true || echo \"excluded $?\" >> {log}\n",
            log = s(&log)
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = fingerprint(&script);

    let out = std::process::Command::new(&script)
        .arg("one")
        .env_remove("FLOCKER")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "locked run one\nexcluded 75\n",
        "the script ran once, under its own lock"
    );
    assert_eq!(fingerprint(&script), before, "the script changed");
}

#[test]
fn a_text_lock_file_is_locked_without_a_record_and_left_unchanged() {
    let dir = Dir::new();
    let data = dir.path("data.lock");
    std::fs::write(&data, "text the user keeps here\n").unwrap();
    let before = fingerprint(&data);
    let probe = format!(
        "{} inspect --json {} > {}",
        env!("CARGO_BIN_EXE_lockfile"),
        s(&data),
        s(&dir.path("held.json"))
    );
    let out = run_output(&[
        "run",
        "--heartbeat",
        "0.05",
        s(&data),
        "sh",
        "-c",
        &format!("sleep 0.3; {probe}"),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(fingerprint(&data), before, "the file changed");

    let held: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path("held.json")).unwrap()).unwrap();
    assert_eq!(held[0]["state"], "held");
    assert_eq!(held[0]["content"], "foreign");
    assert_eq!(held[0]["no_record"], "foreign_content");
    assert_eq!(held[0]["owner"], serde_json::Value::Null);
    assert_eq!(held[0]["findings"], serde_json::json!([]));

    let (status, free) = inspect_json(&data, &[]);
    assert_eq!(free[0]["state"], "debris");
    assert_eq!(free[0]["content"], "foreign");
    assert_eq!(status, 0, "nothing is wrong with it");
    // reap keeps it and says why.
    let out = run_output(&["reap", "--fix", s(dir.tmp.path())]);
    assert!(data.exists(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(fingerprint(&data), before);
}

#[test]
#[ignore = "needs root: runs the command as another user (setpriv)"]
fn a_file_read_only_to_the_caller_is_locked_read_only_and_left_unchanged() {
    require_root("setpriv to an unprivileged uid");
    let dir = Dir::new();
    std::fs::set_permissions(dir.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let lock = dir.path("job.lock");
    std::fs::write(&lock, "").unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = fingerprint(&lock);
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_lockfile"))
        .args(["run", "-n", s(&lock), "sh", "-c"])
        .arg(format!(
            "{} run -n {} true; echo $?",
            env!("CARGO_BIN_EXE_lockfile"),
            s(&lock)
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "75\n",
        "the lock excluded a second run"
    );
    assert_eq!(fingerprint(&lock), before, "the file changed");
}
