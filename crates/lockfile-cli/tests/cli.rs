//! Drives the real `lockfile` binary: real processes, real signals.

mod common;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{
    Background, BoundedOutput, Dir, FORWARDED, LOOP, code, copy_executable, in_a_standard_state,
    inspect_json, lockfile, require_root, run_output, s, signal, start, stderr, wait_until,
    wait_within_patience, with_signals,
};

/// Waits until another `lockfile run -n` would get the lock.
fn wait_until_free(lock: &Path) {
    wait_until("the lock to come free", || {
        code(&run_output(&["run", "-n", s(lock), "true"])) == 0
    });
}

#[test]
fn contention_exits_with_the_conflict_status_and_names_the_holder() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let holder = start(&["--job", "nightly"], &lock, "echo ready; sleep 30");

    let out = run_output(&["run", "-n", s(&lock), "true"]);
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(&format!("pid {}", holder.pid())), "{err}");
    assert!(err.contains("nightly"), "{err}");
    assert!(err.contains("for "), "how long it has held the lock: {err}");

    let out = run_output(&["run", "-n", "-E", "9", s(&lock), "true"]);
    assert_eq!(code(&out), 9);
    let started = Instant::now();
    let out = run_output(&["run", "-w", "0.2", s(&lock), "true"]);
    assert_eq!(code(&out), 75);
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(
        stderr(&out).contains("gave up after waiting"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_commands_exit_status_passes_through() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    assert_eq!(
        code(&run_output(&["run", s(&lock), "sh", "-c", "exit 7"])),
        7
    );
    assert_eq!(code(&run_output(&["run", s(&lock), "true"])), 0);
    let killed = run_output(&["run", s(&lock), "sh", "-c", "kill -TERM $$"]);
    assert_eq!(code(&killed), 128 + 15);
    let shell = run_output(&["run", s(&lock), "-c", "exit 3"]);
    assert_eq!(code(&shell), 3);
    let missing = run_output(&["run", s(&lock), "/no/such/program"]);
    assert_eq!(code(&missing), 127, "{}", stderr(&missing));
    assert!(stderr(&missing).contains("/no/such/program"));
    // The lock is free after every one of them.
    assert_eq!(code(&run_output(&["run", "-n", s(&lock), "true"])), 0);
}

#[test]
fn signals_are_forwarded_and_the_lock_released_after_the_command_ends() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    for (sig, status) in [("TERM", 42), ("INT", 43), ("HUP", 44)] {
        let script = format!("trap 'exit {status}' {sig}; echo ready; {LOOP}");
        let mut run = start(&[], &lock, &script);
        run.signal(sig);
        let (code, err) = run.wait();
        assert_eq!(code, status, "SIG{sig} reached the command: {err}");
        assert_eq!(
            inspect_json(&lock, &[]).1[0]["state"],
            "free",
            "released after SIG{sig}"
        );
    }
}

#[test]
#[ignore = "needs root: a PID namespace (unshare --pid)"]
fn signals_are_forwarded_in_a_pid_namespace_that_hides_the_session_leader() {
    require_root("unshare --pid");
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    // The wrapper as a container's first process: PID 1 of a new PID
    // namespace, where its session's leader is out of sight and getsid(2)
    // returns 0.
    let mut cmd = in_a_standard_state(Command::new("unshare"));
    cmd.args([
        "--pid",
        "--fork",
        "--kill-child",
        env!("CARGO_BIN_EXE_lockfile"),
    ])
    .args(["run", s(&lock), "sh", "-c"])
    .arg(format!("trap 'exit 42' TERM; echo ready; {LOOP}"));
    let (mut run, line) = Background::start(cmd);
    assert_eq!(line, "ready");
    let unshare = run.pid();
    let children =
        std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children")).unwrap();
    let wrapper: u32 = children.trim().parse().expect("unshare's one child");
    signal(wrapper, "TERM");
    let (code, err) = run.wait();
    assert_eq!(code, 42, "SIGTERM reached the command: {err}");
    assert_eq!(inspect_json(&lock, &[]).1[0]["state"], "free");
}

#[test]
fn a_signal_ignored_at_start_stays_ignored_by_the_command() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    // As `nohup lockfile run ...` starts it.
    let mut cmd = with_signals(lockfile(), &[libc::SIGHUP], libc::SIG_IGN);
    cmd.args(["run", s(&lock), "sh", "-c"]).arg(format!(
        "echo $(grep SigIgn /proc/$$/status | cut -f2); {LOOP}"
    ));
    let (mut run, ignored) = Background::start(cmd);
    let ignored = u64::from_str_radix(&ignored, 16).unwrap();
    assert_ne!(ignored & (1 << (libc::SIGHUP - 1)), 0, "{ignored:#x}");

    run.signal("HUP");
    run.signal("TERM");
    let (code, err) = run.wait();
    assert_eq!(
        code,
        128 + libc::SIGTERM,
        "SIGTERM ended it, not SIGHUP: {err}"
    );
}

#[test]
fn a_wrapper_started_with_sigchld_ignored_still_sees_the_command_end() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    // As a parent that set SIGCHLD to SIG_IGN starts it: the kernel would
    // reap COMMAND itself, and a wrapper waiting for SIGCHLD would wait
    // forever.
    let mut cmd = with_signals(lockfile(), &[libc::SIGCHLD], libc::SIG_IGN);
    // Not a shell: dash sets its own SIGCHLD disposition.
    cmd.args(["run", s(&lock), "grep", "SigIgn", "/proc/self/status"]);
    let (mut run, line) = Background::start(cmd);
    let ignored = u64::from_str_radix(line.trim_start_matches("SigIgn:").trim(), 16).unwrap();
    assert_ne!(
        ignored & (1 << (libc::SIGCHLD - 1)),
        0,
        "COMMAND inherits SIGCHLD ignored, as it would without the wrapper: {ignored:#x}"
    );
    let (code, err) = run.wait();
    assert_eq!(code, 0, "{err}");
    wait_until_free(&lock);
}

#[test]
fn sigkill_of_the_wrapper_never_lets_a_second_command_start() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let done = dir.path("done");
    let script = format!("echo ready; sleep 1; touch {}", s(&done));
    let mut run = start(&["--heartbeat", "0.1"], &lock, &script);
    let wrapper = run.pid();
    run.signal("KILL");
    assert_eq!(run.reap(), -1, "killed by a signal");

    // The command inherited the lock: it still runs, and still excludes.
    let out = run_output(&["run", "-n", s(&lock), "true"]);
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let (_, report) = inspect_json(&lock, &[]);
    assert_eq!(report[0]["state"], "held");
    let holder = report[0]["holder_pid"].as_u64().unwrap();
    assert_ne!(
        holder,
        u64::from(wrapper),
        "the kernel names the surviving command"
    );
    let kinds: Vec<&str> = report[0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"owner_dead"), "{kinds:?}");
    assert!(kinds.contains(&"holder_mismatch"), "{kinds:?}");

    // Once the command finishes, the next run gets the lock.
    wait_until("the orphaned command to finish", || done.exists());
    wait_until_free(&lock);
}

#[test]
fn a_background_process_left_behind_is_named_and_keeps_the_lock() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let out = run_output(&[
        "run",
        s(&lock),
        "sh",
        "-c",
        "sleep 30 >/dev/null 2>&1 & exit 0",
    ]);
    assert_eq!(code(&out), 0);
    let err = stderr(&out);
    assert!(err.contains("background process"), "{err}");
    // The background shell may not have exec'ed `sleep` yet when named.
    assert!(err.contains("holding it: pid "), "{err}");

    let mut report = Value::Null;
    wait_until("inspect to name the sleeper", || {
        report = inspect_json(&lock, &[]).1;
        report[0]["holders"][0]["command"] == "sleep"
    });
    assert_eq!(report[0]["state"], "held");
    let holders = report[0]["holders"].as_array().unwrap();
    let sleeper = holders[0]["pid"].as_u64().unwrap();
    assert_eq!(code(&run_output(&["run", "-n", s(&lock), "true"])), 75);
    signal(u32::try_from(sleeper).unwrap(), "TERM");
    wait_until_free(&lock);
}

#[test]
fn the_heartbeat_is_kept_while_the_command_runs() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let run = start(&["--heartbeat", "0.05"], &lock, "echo ready; sleep 30");
    let mtime = || std::fs::metadata(&lock).unwrap().modified().unwrap();
    let first = mtime();
    wait_until("a heartbeat", || mtime() > first);
    let (_, report) = inspect_json(&lock, &[]);
    assert_eq!(report[0]["owner"]["heartbeat_interval_ms"], 50);
    drop(run);
}

#[test]
#[ignore = "needs root: a PID namespace with its own /proc (unshare --pid --mount-proc)"]
fn inspect_in_a_container_finds_a_holder_whose_lock_taker_exited() {
    require_root("unshare --pid --mount-proc");
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let pid_file = dir.path("sleep.pid");
    // In a PID namespace with its own /proc, the kernel's lock table prints
    // no line for a lock whose taker (flock(1) here) exited, although the
    // background process it started still holds the lock.
    let script = format!(
        "flock {lock} -c 'sleep 30 >/dev/null 2>&1 & echo $! > {pids}'; \
         {bin} inspect --json {lock}; kill $(cat {pids})",
        lock = s(&lock),
        pids = s(&pid_file),
        bin = env!("CARGO_BIN_EXE_lockfile"),
    );
    let out = in_a_standard_state(Command::new("unshare"))
        .args(["--pid", "--fork", "--mount-proc", "sh", "-c", &script])
        .bounded_output();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("inspect --json printed no JSON ({e}): {}", stderr(&out)));
    assert_eq!(report[0]["state"], "held", "{report}");
    assert_eq!(report[0]["holders"][0]["command"], "sleep", "{report}");
}

#[test]
fn inspect_json_has_the_documented_shape() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let run = start(&["--job", "shape"], &lock, "echo ready; sleep 30");
    let (status, report) = inspect_json(&lock, &[]);
    assert_eq!(status, 0);
    let r = &report.as_array().unwrap()[0];
    assert_eq!(r["path"], s(&lock));
    assert_eq!(r["state"], "held");
    for key in ["pid", "hostname", "token", "job", "acquired_at"] {
        assert!(!r["owner"][key].is_null(), "owner.{key} in {r}");
    }
    assert_eq!(r["owner"]["pid"].as_u64(), Some(u64::from(run.pid())));
    assert_eq!(r["owner"]["job"], "shape");
    assert_eq!(r["holder_pid"].as_u64(), Some(u64::from(run.pid())));
    assert!(r["age_seconds"].is_f64());
    assert!(r["heartbeat_age_seconds"].is_f64());
    assert!(r["findings"].as_array().unwrap().is_empty());

    // A warning (aged) exits 1 and carries kind, message and the numbers.
    let (status, report) = inspect_json(&lock, &["--max-age", "0"]);
    assert_eq!(status, 1);
    let finding = &report[0]["findings"][0];
    assert_eq!(finding["kind"], "aged");
    assert!(finding["message"].as_str().unwrap().contains("held for"));
    assert!(finding["age_seconds"].is_f64());
    // A critical finding (never succeeded) exits 2.
    let (status, report) = inspect_json(&lock, &["--expect-every", "60"]);
    assert_eq!(status, 2);
    assert_eq!(report[0]["findings"][0]["kind"], "never_succeeded");
    drop(run);

    // A path that cannot be inspected exits 3 and still gets an object.
    let link = dir.path("link.lock");
    symlink("/etc/hostname", &link).unwrap();
    let (status, report) = inspect_json(&link, &[]);
    assert_eq!(status, 3);
    assert!(
        report[0]["error"]
            .as_str()
            .unwrap()
            .contains("symbolic link")
    );
    // An absent lock file is not an error.
    let (status, report) = inspect_json(&dir.path("absent.lock"), &[]);
    assert_eq!((status, report[0]["state"].as_str()), (0, Some("absent")));
}

#[test]
fn inspect_prints_an_aligned_table_for_a_directory() {
    let dir = Dir::new();
    let _run = start(
        &["--job", "tabled"],
        &dir.path("a.lock"),
        "echo ready; sleep 30",
    );
    assert_eq!(
        code(&run_output(&["run", s(&dir.path("b.lock")), "true"])),
        0
    );
    let out = run_output(&["inspect", s(dir.tmp.path())]);
    assert_eq!(code(&out), 0);
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("PATH"), "{text}");
    let state_col = lines[0].find("STATE").unwrap();
    assert_eq!(&lines[1][state_col..state_col + 4], "held", "{text}");
    assert_eq!(&lines[2][state_col..state_col + 4], "free", "{text}");
    assert!(lines[1].contains("tabled"));
}

#[test]
fn reap_never_touches_a_held_lock_and_reports_every_file() {
    let dir = Dir::new();
    let held = dir.path("held.lock");
    let _run = start(&[], &held, "echo ready; sleep 30");
    std::fs::write(dir.path("junk.lock"), "{\"format\":1,\"released\":tr").unwrap();

    let out = run_output(&["reap", "--json", s(dir.tmp.path())]);
    assert_eq!(code(&out), 0);
    let entries: Value = serde_json::from_slice(&out.stdout).unwrap();
    let entries = entries.as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["path"], s(&held));
    assert_eq!(entries[0]["action"], "kept");
    assert!(entries[0]["reason"].as_str().unwrap().contains("held by"));
    assert_eq!(entries[1]["action"], "would_remove");

    let out = run_output(&["reap", "--fix", s(dir.tmp.path())]);
    assert_eq!(code(&out), 0);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("removed"), "{text}");
    assert!(held.exists());
    assert!(!dir.path("junk.lock").exists());

    let missing = run_output(&["reap", s(&dir.path("missing"))]);
    assert_eq!(code(&missing), 1);
    assert!(stderr(&missing).contains("does not exist"));
}

#[test]
fn check_alarms_on_silence() {
    let dir = Dir::new();
    let lock = dir.path("nightly.lock");
    let out = run_output(&["check", "--expect-every", "3600", s(&lock)]);
    assert_eq!(code(&out), 2, "a job that never ran is silent");
    assert!(String::from_utf8_lossy(&out.stdout).contains("no successful run"));

    assert_eq!(code(&run_output(&["run", s(&lock), "false"])), 1);
    let out = run_output(&["check", "--expect-every", "3600", s(&lock)]);
    assert_eq!(code(&out), 2, "a failure is not a success");

    assert_eq!(code(&run_output(&["run", s(&lock), "true"])), 0);
    let out = run_output(&["check", "--expect-every", "3600", s(&lock)]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));

    let out = run_output(&["check", "--expect-every", "0.001", s(&lock)]);
    std::thread::sleep(Duration::from_millis(5));
    let later = run_output(&["check", "--expect-every", "0.001", s(&lock)]);
    assert!(code(&out) == 2 || code(&later) == 2);
    assert!(String::from_utf8_lossy(&later.stdout).contains("last successful run"));
}

/// Every duration option takes plain seconds or a duration with units, and
/// the units reach the library.
#[test]
fn durations_take_seconds_or_units() {
    let dir = Dir::new();
    let lock = dir.path("hourly.lock");
    let out = run_output(&["run", "-w", "1m", "--heartbeat", "1m", s(&lock), "true"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for every in ["1h", "1h30m", "90m", "3600"] {
        let out = run_output(&["check", "--expect-every", every, s(&lock)]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(code(&out), 0, "--expect-every {every}: {stdout}");
        assert!(stdout.starts_with("OK: "), "{stdout}");
    }
    // A millisecond ago is long past: silent.
    std::thread::sleep(Duration::from_millis(5));
    let out = run_output(&["check", "--expect-every", "1ms", s(&lock)]);
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("last successful run"));

    let (status, report) = inspect_json(
        &lock,
        &[
            "--max-age",
            "2h",
            "--stale-after",
            "90s",
            "--expect-every",
            "1d",
        ],
    );
    assert_eq!(status, 0, "{report}");
    assert_eq!(report[0]["findings"], Value::Array(Vec::new()), "{report}");

    // Debris written just now is kept while younger than --older-than.
    std::fs::write(dir.path("junk.lock"), "{\"format\":1,\"released\":tr").unwrap();
    let reap = |older_than: &str| {
        let out = run_output(&[
            "reap",
            "--json",
            "--older-than",
            older_than,
            s(dir.tmp.path()),
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let entries: Value = serde_json::from_slice(&out.stdout).unwrap();
        entries
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["path"] == s(&dir.path("junk.lock")))
            .cloned()
            .unwrap_or_else(|| panic!("no entry for junk.lock: {entries}"))
    };
    let kept = reap("1h");
    assert_eq!(kept["action"], "kept", "{kept}");
    assert!(
        kept["reason"]
            .as_str()
            .unwrap()
            .contains("more recently than the 1h threshold"),
        "{kept}"
    );
    assert_eq!(reap("0s")["action"], "would_remove");

    let out = run_output(&["check", "--expect-every", "1 fortnight", s(&lock)]);
    assert_eq!(code(&out), 64);
    assert!(
        stderr(&out).contains("`1 fortnight` is not a duration"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn usage_errors_exit_64_and_lock_errors_name_the_path() {
    let out = run_output(&["run"]);
    assert_eq!(code(&out), 64);
    let out = run_output(&["run", "-w", "soon", "/tmp/x.lock", "true"]);
    assert_eq!(code(&out), 64);
    assert!(stderr(&out).contains("soon"));
    let out = run_output(&["frobnicate"]);
    assert_eq!(code(&out), 64);
    assert_eq!(code(&run_output(&["--help"])), 0);

    let dir = Dir::new();
    let missing = dir.path("no/such/dir/job.lock");
    let out = run_output(&["run", s(&missing), "true"]);
    assert_eq!(code(&out), 73);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no/such/dir"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let victim = dir.path("victim");
    std::fs::write(&victim, "keep me").unwrap();
    let link = dir.path("link.lock");
    symlink(&victim, &link).unwrap();
    let out = run_output(&["run", s(&link), "true"]);
    assert_eq!(code(&out), 73);
    assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
}

#[test]
fn log_format_json_writes_the_librarys_events() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let out = run_output(&["--log-format", "json", "run", s(&lock), "true"]);
    assert_eq!(code(&out), 0);
    let events: Vec<Value> = stderr(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(names, ["lock_acquired", "lock_released"], "{events:?}");
    let out = lockfile()
        .args(["run", s(&lock), "true"])
        .env("LOCKFILE_LOG_FORMAT", "json")
        .bounded_output();
    assert!(stderr(&out).contains("\"lock_acquired\""));
}

#[test]
fn the_command_gets_the_lock_path_and_token_and_126_when_not_executable() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let out = run_output(&[
        "run",
        s(&lock),
        "sh",
        "-c",
        "echo \"$LOCKFILE_PATH\"; echo \"$LOCKFILE_TOKEN\"",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(s(&lock)));
    let (_, report) = inspect_json(&lock, &[]);
    assert_eq!(lines.next(), report[0]["owner"]["token"].as_str());

    let not_executable = dir.path("script.sh");
    std::fs::write(&not_executable, "#!/bin/sh\ntrue\n").unwrap();
    let out = run_output(&["run", s(&lock), s(&not_executable)]);
    assert_eq!(code(&out), 126, "{}", stderr(&out));
}

#[test]
fn a_closed_stderr_never_gives_up_a_lock_held_by_a_background_process() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    // The wrapper's stderr is a pipe nobody reads: its warning about the
    // background process cannot be written, and must not matter.
    let mut run = lockfile()
        .args([
            "run",
            s(&lock),
            "sh",
            "-c",
            "sleep 30 >/dev/null 2>&1 & exit 0",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(run.stderr.take());
    let status = wait_within_patience(&mut run).expect("`lockfile run` ends");
    assert_eq!(status.code(), Some(0));
    let out = run_output(&["run", "-n", s(&lock), "true"]);
    assert_eq!(code(&out), 75, "the background sleep still holds the lock");
    let (_, report) = inspect_json(&lock, &[]);
    let sleeper = report[0]["holders"][0]["pid"].as_u64().unwrap();
    signal(u32::try_from(sleeper).unwrap(), "TERM");
}

#[test]
fn a_closed_stdout_is_no_panic() {
    let dir = Dir::new();
    for i in 0..50 {
        assert_eq!(
            code(&run_output(&[
                "run",
                s(&dir.path(&format!("{i}.lock"))),
                "true"
            ])),
            0
        );
    }
    let mut inspect = lockfile()
        .args(["inspect", s(dir.tmp.path())])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(inspect.stdout.take());
    let out = inspect.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

#[test]
fn an_absurd_heartbeat_interval_is_no_panic() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let out = run_output(&["run", "--heartbeat", "1e19", s(&lock), "true"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn a_terminal_hangup_reaches_the_command() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let mark = dir.path("hup.mark");
    let ready = dir.path("ready.mark");
    // script(1) runs the wrapper as the session leader of a new terminal.
    // Killing script(1) hangs the terminal up, and the kernel sends SIGHUP
    // to the session leader alone: the wrapper must pass it on.
    let inner = format!(
        "{} run {} sh -c 'trap \"echo hup > {}; exit 0\" HUP; touch {}; {LOOP}'",
        env!("CARGO_BIN_EXE_lockfile"),
        s(&lock),
        s(&mark),
        s(&ready)
    );
    let mut script = with_signals(Command::new("script"), &FORWARDED, libc::SIG_DFL)
        .args(["-qfc", &inner, "/dev/null"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("this test needs script(1) (Debian: bsdutils)");
    // Wait for COMMAND itself: a hangup between taking the lock and
    // starting COMMAND ends the run before it began.
    wait_until("the command to run under the lock", || ready.exists());
    assert_eq!(inspect_json(&lock, &[]).1[0]["state"], "held");
    script.kill().unwrap();
    script.wait().unwrap();
    wait_until("the command to see the hangup", || mark.exists());
    wait_until("the lock to come free", || {
        inspect_json(&lock, &[]).1[0]["state"] == "free"
    });
}

/// One binary does everything: a copy of it alone in a directory, with
/// nothing of ours on PATH, answers every command line, and keeps the
/// `flock` personality through a symlink.
#[test]
fn a_copy_of_the_binary_alone_answers_every_command_line() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let bin = dir.path("bin");
    std::fs::create_dir(&bin).unwrap();
    let alone = bin.join("lockfile");
    copy_executable(Path::new(env!("CARGO_BIN_EXE_lockfile")), &alone);
    std::os::unix::fs::symlink("lockfile", bin.join("flock")).unwrap();
    let system = "/usr/bin:/bin";
    let run = |program: &Path, args: &[&str]| {
        in_a_standard_state(Command::new(program))
            .args(args)
            .env("PATH", system)
            .bounded_output()
    };
    let ok = |args: &[&str]| {
        let out = run(&alone, args);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        out
    };

    let help = ok(&["--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("inspect"));
    let version = ok(&["--version"]);
    assert!(String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
    ok(&["run", "-n", "--job", "alone", s(&lock), "true"]);
    // A run whose COMMAND beats, as a --watchdog COMMAND does.
    ok(&[
        "run",
        "--job",
        "alone",
        "--watchdog",
        "10",
        s(&lock),
        "--",
        s(&alone),
        "beat",
    ]);
    let out = ok(&["inspect", "--json", s(&lock)]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report[0]["owner"]["job"], "alone", "{report}");
    ok(&["check", "--expect-every", "1h", s(&lock)]);
    ok(&["reap", s(dir.tmp.path())]);
    // A ping that cannot be delivered (nothing listens on port 1) changes
    // nothing but a line on stderr: the HTTP client is in the binary.
    let out = ok(&[
        "run",
        "--ping",
        "http://127.0.0.1:1/ping/x",
        s(&lock),
        "true",
    ]);
    assert!(stderr(&out).contains("ping"), "{}", stderr(&out));
    let out = run(&bin.join("flock"), &["-n", s(&lock), "true"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

/// The binary loads on the LTS distributions of today: it needs no symbol
/// version above glibc 2.34 (Ubuntu 22.04 has 2.35, RHEL 9 2.34), and no
/// packed relative relocations (`GLIBC_ABI_DT_RELR`, glibc 2.36).
///
/// The floor is 2.34 because std itself links against symbols of that
/// version on current toolchains (in glibc 2.34 libpthread and libdl moved
/// into libc, and their symbols got new versions). Raise it only with a
/// reason written here.
///
/// The versions a binary needs depend on the glibc it is linked against, so
/// this holds only on a build host whose glibc is at most 2.36 (Debian 12,
/// the CI's). Elsewhere it says that it is skipped, and why.
#[test]
fn the_binary_needs_no_glibc_above_2_34() {
    let host = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    let Some(host) = host.as_deref().and_then(|v| v.strip_prefix("glibc ")) else {
        eprintln!("skipped: the build host has no glibc (getconf GNU_LIBC_VERSION)");
        return;
    };
    let host = parse_version(host).expect("glibc's version");
    if host > (2, 36) {
        eprintln!(
            "skipped: the build host's glibc {host:?} is newer than 2.36: a binary linked against it may need newer versions"
        );
        return;
    }
    let out = Command::new("readelf")
        .args(["--version-info", "--wide", env!("CARGO_BIN_EXE_lockfile")])
        .output()
        .expect("this test needs readelf (Debian: binutils)");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("GLIBC_ABI_DT_RELR"),
        "the binary needs packed relative relocations (glibc 2.36)"
    );
    let needed: Vec<(u32, u32)> = text
        .split_whitespace()
        .filter_map(|word| word.strip_prefix("GLIBC_"))
        .filter_map(parse_version)
        .collect();
    assert!(
        !needed.is_empty(),
        "no glibc symbol versions found:\n{text}"
    );
    let highest = needed.into_iter().max().unwrap();
    assert!(
        highest <= (2, 34),
        "the binary needs GLIBC_{}.{}",
        highest.0,
        highest.1
    );
}

/// `2.34` (or `2.3.4`) as (2, 34).
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// What a record holds and what a process calls itself are others' words:
/// an escape sequence in a job name or a process name (set with
/// `prctl(PR_SET_NAME)`) reaches no terminal raw, on stderr or in a table.
#[test]
fn escape_sequences_from_records_and_process_names_are_printed_escaped() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let job = "x\x1b]0;PWNED\x07\x1b[2J";
    // COMMAND names itself with an escape sequence, then says it is ready.
    let script = "import ctypes, time; ctypes.CDLL(None).prctl(15, b'\\x1b[2Jevil', 0, 0, 0); print('ready', flush=True); time.sleep(60)";
    let (mut holder, line) = Background::spawn(&["--job", job, s(&lock), "python3", "-c", script]);
    assert_eq!(line, "ready", "{}", holder.stderr_so_far());
    let raw = |text: &str| text.contains('\x1b') || text.contains('\x07');

    let out = run_output(&["run", "-n", s(&lock), "true"]);
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(!raw(&err), "{err:?}");
    assert!(err.contains("]0;PWNED"), "{err}");

    let out = run_output(&["inspect", s(&lock)]);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!raw(&table), "{table:?}");
    assert!(table.contains("x\\e]0;PWNED\\a\\e[2J"), "{table}");
    assert!(!table.contains("\x1b[2Jevil"), "{table:?}");
    // JSON keeps the data as it is, in JSON's own escapes.
    let (_, report) = inspect_json(&lock, &[]);
    assert_eq!(report[0]["owner"]["job"], job);

    holder.signal("TERM");
    holder.reap();
}

/// A job name is escaped once, in the one way every line uses: in a
/// conflict line it keeps its quotes, and ESC, a C0 control, DEL and a
/// backslash inside them read `\e`, `\xHH` and `\\` (never Rust's
/// `\u{1b}`, nor an escape escaped again); the table shows the same bytes
/// the same way, without the quotes.
#[test]
fn a_job_name_with_control_bytes_is_escaped_exactly_once_in_a_conflict_line() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let job = "j\x1b[8m\x01\x7f\\n";
    let shown = "j\\e[8m\\x01\\x7f\\\\n";
    let mut holder = common::start(&["--job", job], &lock, &format!("echo ready; {LOOP}"));

    let out = run_output(&["run", "-n", s(&lock), "true"]);
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("job \"{shown}\"")), "{err}");
    assert!(!err.contains("u{1b}"), "{err}");
    assert!(!err.contains("\\\\e"), "{err}");
    assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "{err:?}");

    let out = run_output(&["inspect", s(&lock)]);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(table.contains(&format!(" {shown} ")), "{table}");

    holder.signal("TERM");
    holder.reap();
}

/// The text events quote a string field as the lines do, escaped once: a
/// job name with ESC reads `job="j\e[8m"`, not Rust's `\u{1b}` escaped
/// again; a message is escaped once too.
#[test]
fn a_job_name_is_escaped_exactly_once_in_a_text_event() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let out = run_output(&[
        "--log-format",
        "text",
        "run",
        "--job",
        "j\x1b[8m\\",
        s(&lock),
        "true",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("lock_acquired"), "{err}");
    assert!(err.contains("job=\"j\\e[8m\\\\\""), "{err}");
    assert!(!err.contains("u{1b}"), "{err}");
    assert!(!err.contains("\\\\e"), "{err}");
    assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "{err:?}");
}

/// The structured events carry others' strings too: a holder's hostname
/// from a record that anyone who can write the file planted. Text events
/// escape it as the human lines do (no raw ESC, BEL, CR or newline, no
/// colour codes on a stderr that is not a terminal); JSON events keep the
/// value, in escapes that JSON readers decode to the same string.
#[test]
fn structured_events_escape_what_others_wrote() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let host = "h\x1b]0;PWNED\x07\r\x1b[2J\u{9b}31m\nlockfile: forged\u{7f}";
    let record = serde_json::json!({
        "format": 1,
        "released": false,
        "owner": {
            "pid": 1,
            "hostname": host,
            "boot_id": "7391e741-d913-47ce-a5c8-95fc8068d337",
            "start_time": 1,
            "token": "7d9e34b2-2f34-4977-81b7-df75223c97d9",
            "job": "planted",
            "acquired_at": "2026-01-01T00:00:00Z",
            "heartbeat_interval_ms": 30000,
        }
    });
    std::fs::write(&lock, record.to_string()).unwrap();
    let mut holder = Command::new("flock");
    holder.args([s(&lock), "sh", "-c", &format!("echo ready; {LOOP}")]);
    let (_holder, line) = Background::start(holder);
    assert_eq!(line, "ready");

    let out = run_output(&["--log-format", "text", "run", "-n", s(&lock), "true"]);
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("lock_contended"), "{err}");
    assert!(err.contains("]0;PWNED"), "{err}");
    let raw = |c: char| c.is_control() && c != '\n';
    assert!(!err.chars().any(raw), "{err:?}");
    assert!(!err.contains("\nlockfile: forged"), "{err:?}");

    let out = run_output(&["--log-format", "json", "run", "-n", s(&lock), "true"]);
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(!err.chars().any(raw), "{err:?}");
    let event: Value = err
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["event"] == "lock_contended")
        .unwrap_or_else(|| panic!("no lock_contended event: {err}"));
    assert_eq!(event["holder_host"], host, "{err}");
}
