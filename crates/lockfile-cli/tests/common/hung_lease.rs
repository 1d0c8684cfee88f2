//! A hung COMMAND under a lease, whatever the engine: `--watchdog` stops it
//! with its whole tree and releases the lease at once, so that the next
//! host takes over without waiting out the TTL; a COMMAND that beats runs
//! to its end.

use super::dead_wrapper::{MARK, marked};
use super::{BoundedOutput, Dir, code, lockfile, require_flock, s, stderr};

const LOCKFILE: &str = env!("CARGO_BIN_EXE_lockfile");

/// The lease that `lease` names (`--etcd URL`, or `--postgres URL`), with a
/// TTL far longer than the test: a COMMAND that never beats, whose tree (a
/// child in its session, one in a session of its own) holds an independent
/// flock(1) lock on a detector file while any of it lives. The run exits
/// 124 with the tree gone, and a contender that does not wait at all then
/// takes the lease (the release, not the TTL, freed it) and finds the
/// detector free.
pub(crate) fn a_command_that_never_beats_is_stopped_and_its_lease_freed_at_once(lease: &[&str]) {
    require_flock();
    let dir = Dir::new();
    let detector = dir.path("detector.lock");
    let overlap = dir.path("overlap");
    let mark = s(dir.tmp.path()).to_owned();
    let work = dir.path("tree.sh");
    std::fs::write(&work, "sleep 300 & setsid sleep 300 & wait\n").unwrap();
    let holder = format!(
        "flock -n {d} sh {w} || echo holder >> {o}",
        d = s(&detector),
        w = s(&work),
        o = s(&overlap)
    );
    let out = lockfile()
        .arg("run")
        .args(lease)
        .args(["--ttl", "600", "--watchdog", "1", "--kill-after", "1"])
        .args(["hung", "sh", "-c", &holder])
        .env(MARK, &mark)
        .bounded_output();
    let err = stderr(&out);
    assert_eq!(code(&out), 124, "{err}");
    assert!(err.contains("has not beaten for"), "{err}");
    assert_eq!(
        marked(&mark),
        Vec::new(),
        "the tree outlived its run: {err}"
    );

    // The history says why the run ended.
    let inspect = lockfile()
        .args(["inspect", "--json"])
        .args(lease)
        .arg("hung")
        .bounded_output();
    let report: serde_json::Value = serde_json::from_slice(&inspect.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", stderr(&inspect)));
    let report = report.as_array().map_or(&report, |all| &all[0]);
    assert_eq!(report["last_run"]["outcome"], "hung", "{report}");

    let contender = format!(
        "flock -n {d} true || echo contender >> {o}; echo \"$LOCKFILE_LEASE\"",
        d = s(&detector),
        o = s(&overlap)
    );
    let next = lockfile()
        .arg("run")
        .args(lease)
        .args(["-n", "hung", "sh", "-c", &contender])
        .bounded_output();
    assert_eq!(
        code(&next),
        0,
        "the lease was not released: {}",
        stderr(&next)
    );
    assert_eq!(String::from_utf8_lossy(&next.stdout).trim(), "hung");
    assert!(
        !overlap.exists(),
        "overlap: {}",
        std::fs::read_to_string(&overlap).unwrap_or_default()
    );
}

/// Under `--watchdog`, a COMMAND that beats through `lockfile beat` and
/// through `touch "$LOCKFILE_BEAT"` runs to its end; another run's token is
/// refused and leaves the beat file as it was; the beat file goes with the
/// run.
pub(crate) fn a_command_that_beats_runs_to_its_end(lease: &[&str]) {
    let dir = Dir::new();
    let result = dir.path("result");
    let script = format!(
        "for i in $(seq 10); do sleep 0.2; {LOCKFILE} beat || exit 9; done; \
         for i in $(seq 10); do sleep 0.2; touch \"$LOCKFILE_BEAT\" || exit 8; done; \
         before=$(stat -c %y \"$LOCKFILE_BEAT\"); \
         LOCKFILE_TOKEN=00000000-0000-4000-8000-000000000001 {LOCKFILE} beat; echo $? > {r}; \
         [ \"$(stat -c %y \"$LOCKFILE_BEAT\")\" = \"$before\" ] && echo unchanged >> {r}; \
         echo \"$LOCKFILE_BEAT\" >> {r}",
        r = s(&result)
    );
    let out = lockfile()
        .arg("run")
        .args(lease)
        .args(["--watchdog", "10", "beating", "sh", "-c", &script])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let result = std::fs::read_to_string(&result).unwrap();
    let lines: Vec<&str> = result.lines().collect();
    assert_eq!(lines[..2], ["1", "unchanged"], "{result}");
    assert!(stderr(&out).contains("another run"), "{}", stderr(&out));
    let beat_file = std::path::Path::new(lines[2]);
    assert!(
        !beat_file.exists(),
        "{} outlived its run",
        beat_file.display()
    );
    assert!(
        !beat_file.parent().unwrap().exists(),
        "{} outlived its run",
        beat_file.display()
    );
}
