//! A hung job cannot hold the lock forever: `lockfile run --watchdog`,
//! `--max-runtime` and `--kill-after`, with real processes, real signals
//! and the beats of `lockfile beat`.

mod common;

use std::path::Path;
use std::time::Instant;

use common::{Background, Dir, code, inspect_json, run_output, s, stderr};

const LOCKFILE: &str = env!("CARGO_BIN_EXE_lockfile");

/// Whether `pid` has exited (gone, or a zombie nobody reaped yet).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let after_name = &stat[stat.rfind(')').unwrap() + 1..];
            matches!(after_name.split_whitespace().next(), Some("Z" | "X"))
        }
    }
}

/// The pids a COMMAND wrote into `file`, one per line.
fn pids(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

/// A shell snippet that starts a background sleep, a grandchild that left
/// for a session of its own, and records both pids in `file`.
fn spawn_a_tree(file: &Path) -> String {
    format!(
        "sleep 60 & echo $! >> {f}; setsid sh -c 'echo $$ >> {f}; exec sleep 60' & \
         while [ $(wc -l < {f}) -lt 2 ]; do sleep 0.01; done; ",
        f = s(file)
    )
}

fn outcome(lock: &Path) -> serde_json::Value {
    inspect_json(lock, &[]).1[0]["last_run"]["outcome"].clone()
}

#[test]
fn a_command_that_stops_beating_is_stopped_with_its_tree_and_the_next_run_proceeds() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let tree = dir.path("tree");
    // It beats once, then hangs.
    let script = format!(
        "{tree}{LOCKFILE} beat && echo ready && sleep 60",
        tree = spawn_a_tree(&tree)
    );
    let (mut run, line) = Background::spawn(&[
        "--watchdog",
        "2",
        "--kill-after",
        "1",
        s(&lock),
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(line, "ready");
    let started = Instant::now();
    let (status, err) = run.wait();
    let took = started.elapsed();
    assert_eq!(status, 124, "{err}");
    assert!(err.contains("has not beaten for"), "{err}");
    assert!(err.contains("watchdog 2s"), "{err}");
    for pid in pids(&tree) {
        assert!(gone(pid), "pid {pid} outlived the stop");
    }
    eprintln!("stopped {took:?} after the last beat (watchdog 2 s, kill-after 1 s)");
    assert_eq!(outcome(&lock), "hung");
    let next = run_output(&["run", "-n", s(&lock), "true"]);
    assert_eq!(code(&next), 0, "{}", stderr(&next));
}

#[test]
fn a_command_that_beats_is_never_stopped() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let script = format!("for i in $(seq 10); do sleep 1; {LOCKFILE} beat || exit 9; done");
    let out = run_output(&["run", "--watchdog", "2", s(&lock), "sh", "-c", &script]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(outcome(&lock), "succeeded");
    // The record says who beats, and how often it promised to.
    let (_, report) = inspect_json(&lock, &[]);
    assert_eq!(report[0]["owner"]["heartbeat_source"], "command");
    assert_eq!(report[0]["owner"]["heartbeat_interval_ms"], 2000);
}

#[test]
fn touching_the_lock_file_is_a_beat_too() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let script = "for i in $(seq 6); do sleep 0.5; touch \"$LOCKFILE_PATH\"; done";
    let out = run_output(&["run", "--watchdog", "2", s(&lock), "sh", "-c", script]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn the_maximum_runtime_stops_the_command_and_its_tree() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let tree = dir.path("tree");
    let script = format!("{}echo ready; sleep 60", spawn_a_tree(&tree));
    let (mut run, line) =
        Background::spawn(&["--max-runtime", "2s", s(&lock), "sh", "-c", &script]);
    assert_eq!(line, "ready");
    let (status, err) = run.wait();
    assert_eq!(status, 124, "{err}");
    assert!(err.contains("maximum runtime of 2s"), "{err}");
    for pid in pids(&tree) {
        assert!(gone(pid), "pid {pid} outlived the stop");
    }
    assert_eq!(outcome(&lock), "timed_out");
    let (_, report) = inspect_json(&lock, &[]);
    assert_eq!(report[0]["last_run"]["signal"], 15);
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_kill_after() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let pid_file = dir.path("pid");
    let script = format!(
        "trap '' TERM; echo $$ > {}; echo ready; while :; do sleep 0.05; done",
        s(&pid_file)
    );
    let (mut run, _) = Background::spawn(&[
        "--max-runtime",
        "1",
        "--kill-after",
        "0.5",
        s(&lock),
        "sh",
        "-c",
        &script,
    ]);
    let (status, err) = run.wait();
    assert_eq!(status, 124, "{err}");
    assert!(gone(pids(&pid_file)[0]), "SIGKILL followed SIGTERM");
    let (_, report) = inspect_json(&lock, &[]);
    assert_eq!(report[0]["last_run"]["signal"], 9);
}

#[test]
fn a_process_left_behind_is_stopped_at_the_limit_too() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let pid_file = dir.path("pid");
    // COMMAND exits at once and leaves a sleep holding the lock.
    let script = format!("sleep 60 & echo $! > {}; echo ready", s(&pid_file));
    let (mut run, _) = Background::spawn(&["--max-runtime", "1", s(&lock), "sh", "-c", &script]);
    let (status, err) = run.wait();
    assert_eq!(status, 124, "{err}");
    assert!(err.contains("limits apply to them"), "{err}");
    assert!(gone(pids(&pid_file)[0]), "the leftover outlived the limit");
    let next = run_output(&["run", "-n", s(&lock), "true"]);
    assert_eq!(code(&next), 0, "{}", stderr(&next));
}

#[test]
fn a_watchdog_on_a_file_that_is_not_ours_is_refused_before_the_command_runs() {
    let dir = Dir::new();
    let data = dir.path("data.lock");
    let ran = dir.path("ran");
    std::fs::write(&data, "the user's text\n").unwrap();
    let before = std::fs::read(&data).unwrap();
    let modified = std::fs::metadata(&data).unwrap().modified().unwrap();
    let out = run_output(&["run", "--watchdog", "2", s(&data), "touch", s(&ran)]);
    assert_eq!(code(&out), 73, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--watchdog needs one"),
        "{}",
        stderr(&out)
    );
    assert!(!ran.exists(), "COMMAND must not run");
    assert_eq!(std::fs::read(&data).unwrap(), before);
    assert_eq!(
        std::fs::metadata(&data).unwrap().modified().unwrap(),
        modified
    );
}

#[test]
fn a_beat_of_another_run_is_refused_and_outside_a_run_is_a_usage_error() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let result = dir.path("result");
    // Inside the run, a process that carries an earlier run's token (a
    // leftover of that run) beats: refused, and the time is left alone.
    let script = format!(
        "before=$(stat -c %Y.%y \"$LOCKFILE_PATH\"); \
         LOCKFILE_TOKEN=00000000-0000-4000-8000-000000000001 {LOCKFILE} beat; echo $? > {r}; \
         [ \"$(stat -c %Y.%y \"$LOCKFILE_PATH\")\" = \"$before\" ] && echo unchanged >> {r}",
        r = s(&result)
    );
    let out = run_output(&["run", "--watchdog", "5", s(&lock), "sh", "-c", &script]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&result).unwrap(), "1\nunchanged\n");
    assert!(stderr(&out).contains("belongs to run"), "{}", stderr(&out));

    let outside = common::lockfile()
        .arg("beat")
        .env_remove("LOCKFILE_PATH")
        .env_remove("LOCKFILE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(outside.status.code(), Some(64), "{outside:?}");
}

#[test]
fn without_a_watchdog_the_record_says_the_wrapper_beats() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let probe = format!(
        "{LOCKFILE} inspect --json \"$LOCKFILE_PATH\" > {}",
        s(&dir.path("held.json"))
    );
    let out = run_output(&["run", s(&lock), "sh", "-c", &probe]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let held: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path("held.json")).unwrap()).unwrap();
    assert_eq!(held[0]["owner"]["heartbeat_source"], "wrapper");
    assert_eq!(outcome(&lock), "succeeded");
    let failed = run_output(&["run", s(&lock), "sh", "-c", "exit 3"]);
    assert_eq!(code(&failed), 3);
    let (_, report) = inspect_json(&lock, &[]);
    assert_eq!(report[0]["last_run"]["outcome"], "failed");
    assert_eq!(report[0]["last_run"]["exit_code"], 3);
    assert_eq!(report[0]["last_run"]["consecutive_failures"], 1);
}

#[test]
fn the_maximum_runtime_is_recorded_for_inspect() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let probe = format!(
        "{LOCKFILE} inspect --json \"$LOCKFILE_PATH\" > {}",
        s(&dir.path("held.json"))
    );
    let out = run_output(&[
        "run",
        "--max-runtime",
        "1h30m",
        s(&lock),
        "sh",
        "-c",
        &probe,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let held: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path("held.json")).unwrap()).unwrap();
    assert_eq!(held[0]["owner"]["max_runtime_seconds"], 5400.0);
}

fn check(lock: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["check", "--expect-every", "1h"];
    args.extend_from_slice(extra);
    args.push(s(lock));
    let out = run_output(&args);
    (
        code(&out),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn check_tells_success_failure_and_each_outcome_apart() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let (status, line) = check(&lock, &[]);
    assert_eq!((status, line.starts_with("CRITICAL")), (2, true), "{line}");
    assert!(line.contains("never_succeeded"), "{line}");

    assert_eq!(code(&run_output(&["run", s(&lock), "true"])), 0);
    let (status, line) = check(&lock, &[]);
    assert_eq!(status, 0, "{line}");
    assert!(line.starts_with("OK"), "{line}");

    // A failure makes check critical at once (--max-failures 1)...
    assert_eq!(
        code(&run_output(&["run", s(&lock), "sh", "-c", "exit 3"])),
        3
    );
    let (status, line) = check(&lock, &[]);
    assert_eq!(status, 2, "{line}");
    assert!(line.starts_with("CRITICAL: "), "{line}");
    assert!(line.contains("failing: 1 run(s) in a row failed"), "{line}");
    assert!(line.contains("exit status 3"), "{line}");
    // ...unless more are allowed.
    let (status, line) = check(&lock, &["--max-failures", "2"]);
    assert_eq!(status, 0, "{line}");

    // Every outcome but success is a failure: a run stopped by its limit too.
    let timed_out = run_output(&["run", "--max-runtime", "0.2", s(&lock), "sleep", "30"]);
    assert_eq!(code(&timed_out), 124);
    let (status, line) = check(&lock, &["--max-failures", "2"]);
    assert_eq!(status, 2, "{line}");
    assert!(line.contains("2 run(s) in a row failed"), "{line}");
    assert!(line.contains("timed_out"), "{line}");

    let out = run_output(&["check", "--json", "--expect-every", "1h", s(&lock)]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["status"], "CRITICAL");
    assert_eq!(json["code"], 2);
    assert_eq!(json["verdicts"][0]["kind"], "failing");
    assert_eq!(json["verdicts"][0]["severity"], "critical");
    assert_eq!(json["report"]["last_run"]["outcome"], "timed_out");
}

#[test]
fn check_calls_a_silent_holder_hung_and_a_long_one_overrunning() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    assert_eq!(code(&run_output(&["run", s(&lock), "true"])), 0);
    // A holder whose command promised to beat every minute, and does not.
    let (_run, ready) = Background::spawn(&[
        "--watchdog",
        "60",
        s(&lock),
        "sh",
        "-c",
        "echo ready; sleep 30",
    ]);
    assert_eq!(ready, "ready");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (status, line) = check(&lock, &["--stale-after", "0.1"]);
    assert_eq!(status, 2, "{line}");
    assert!(line.contains("hung: no heartbeat"), "{line}");
    let (status, line) = check(&lock, &["--max-age", "0.1"]);
    assert_eq!(status, 1, "{line}");
    assert!(line.starts_with("WARNING: "), "{line}");
    assert!(line.contains("overrunning"), "{line}");
}

#[test]
fn a_stopped_watchdog_holder_is_evicted_with_its_tree_and_two_commands_never_overlap() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let detector = dir.path("detector.lock");
    let tree = dir.path("tree");
    let overlap = dir.path("overlap");
    // The holder's COMMAND takes an independent flock(1) lock for as long
    // as it works, and hangs without beating.
    let work = dir.path("work.sh");
    std::fs::write(
        &work,
        format!("{}echo ready; sleep 60\n", spawn_a_tree(&tree)),
    )
    .unwrap();
    let hung = format!(
        "flock -n {d} sh {w} || echo holder >> {o}",
        d = s(&detector),
        w = s(&work),
        o = s(&overlap)
    );
    let (holder, line) = Background::spawn(&[
        "--watchdog",
        "2",
        "--kill-after",
        "1",
        s(&lock),
        "sh",
        "-c",
        &hung,
    ]);
    assert_eq!(line, "ready");
    // Its wrapper is stopped: its own watchdog cannot act any more.
    holder.signal("STOP");

    let probe = dir.path("probe.json");
    let contender = format!(
        "{LOCKFILE} inspect --json \"$LOCKFILE_PATH\" > {p}; flock -n {d} true || echo contender >> {o}",
        p = s(&probe),
        d = s(&detector),
        o = s(&overlap)
    );
    let out = run_output(&[
        "run",
        "--evict-after",
        "1",
        "--kill-after",
        "1",
        "-w",
        "30",
        s(&lock),
        "sh",
        "-c",
        &contender,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("evicted pid"), "{}", stderr(&out));
    assert!(
        !overlap.exists(),
        "{}",
        std::fs::read_to_string(&overlap).unwrap_or_default()
    );
    for pid in pids(&tree) {
        assert!(gone(pid), "pid {pid} of the evicted tree lives on");
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&probe).unwrap()).unwrap();
    assert_eq!(report[0]["owner"]["evicted"]["job"], "sh");
    assert!(
        report[0]["owner"]["evicted"]["silent_seconds"]
            .as_f64()
            .unwrap()
            > 1.0
    );
    assert_eq!(report[0]["last_run"]["outcome"], "evicted");
    let mut holder = holder;
    assert_eq!(
        holder.reap(),
        143,
        "the evicted wrapper exits as on SIGTERM"
    );
}

#[test]
fn a_wrapper_kept_heartbeat_is_never_evicted_and_the_refusal_says_why() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let (_holder, line) = Background::spawn(&[s(&lock), "sh", "-c", "echo ready; sleep 30"]);
    assert_eq!(line, "ready");
    let out = run_output(&["run", "-n", "--evict-after", "0.1", s(&lock), "true"]);
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(stderr(&out).contains("not evicted"), "{}", stderr(&out));
    assert!(stderr(&out).contains("wrapper"), "{}", stderr(&out));
}
