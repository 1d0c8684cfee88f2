//! `lockfile run --slots N` on lock files: at most N at once, which slot
//! COMMAND got, the refusals, and inspect, check, metrics and reap on a set
//! of slots, with real processes. The same under every lease engine is in
//! `common/lease_slots.rs`, called from each engine's tests.

mod common;

use serde_json::Value;

use common::{Background, Dir, code, inspect_json, run_output, s, start, stderr, wait_until};

#[test]
fn n_runs_hold_n_slots_and_the_next_is_told_who_holds_each() {
    let dir = Dir::new();
    let lock = dir.path("backup.lock");
    let script = "echo \"$LOCKFILE_SLOT $LOCKFILE_PATH\"; sleep 30";
    let (first, line) = Background::spawn(&[
        "--slots",
        "2",
        "--job",
        "backup",
        s(&lock),
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(line, format!("0 {}", s(&lock)));
    let (second, line) = Background::spawn(&["--slots", "2", s(&lock), "sh", "-c", script]);
    assert_eq!(line, format!("1 {}", s(&dir.path("backup@1.lock"))));

    let out = run_output(&["run", "-n", "--slots", "2", s(&lock), "true"]);
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("all 2 slots of `"), "{err}");
    assert!(
        err.contains(&format!("slot 0 by pid {}", first.pid())),
        "{err}"
    );
    assert!(err.contains("slot 1 by pid"), "{err}");
    assert!(err.ends_with("; not running\n"), "{err}");
    // A bounded wait says how long it waited.
    let out = run_output(&["run", "-w", "0.2", "--slots", "2", s(&lock), "true"]);
    assert_eq!(code(&out), 75);
    assert!(
        stderr(&out).contains("gave up waiting for any of the 2 slots"),
        "{}",
        stderr(&out)
    );
    drop((first, second));
}

#[test]
fn the_first_line_of_the_script_is_the_slot_it_got_and_a_waiter_gets_the_freed_one() {
    let dir = Dir::new();
    let lock = dir.path("w.lock");
    let runs: Vec<Background> = (0..3)
        .map(|_| start(&["--slots", "3"], &lock, "echo ready; sleep 30"))
        .collect();
    let mut waiter = std::process::Command::new(env!("CARGO_BIN_EXE_lockfile"));
    waiter.args([
        "run",
        "--slots",
        "3",
        s(&lock),
        "sh",
        "-c",
        "echo $LOCKFILE_SLOT; sleep 30",
    ]);
    let waiter = std::thread::spawn(move || Background::start(waiter));
    // SIGKILL one holder's whole group: the kernel frees its slot.
    let mut runs = runs;
    let killed = runs.remove(1);
    let slot_of_killed = {
        let report = lockfile::inspect(dir.path("w@1.lock")).unwrap();
        assert_eq!(report.state, lockfile::LockState::Held);
        report.owner.unwrap().pid
    };
    assert_eq!(slot_of_killed, killed.pid(), "the second run holds slot 1");
    drop(killed);
    let (waiter, line) = waiter.join().unwrap();
    assert_eq!(line, "1");
    drop((runs, waiter));
}

#[test]
fn slots_and_a_plain_run_never_exceed_the_larger_n() {
    let dir = Dir::new();
    let lock = dir.path("mixed.lock");
    let plain = start(&[], &lock, "echo ready; sleep 30");
    // `--slots 1` is the plain lock.
    assert_eq!(
        code(&run_output(&[
            "run",
            "-n",
            "--slots",
            "1",
            s(&lock),
            "true"
        ])),
        75
    );
    let slotted = start(&["--slots", "2"], &lock, "echo ready; sleep 30");
    assert_eq!(
        code(&run_output(&[
            "run",
            "-n",
            "--slots",
            "2",
            s(&lock),
            "true"
        ])),
        75
    );
    assert_eq!(code(&run_output(&["run", "-n", s(&lock), "true"])), 75);
    drop((plain, slotted));
}

#[test]
fn a_bad_number_of_slots_or_a_combination_slots_cannot_take_exits_64() {
    let dir = Dir::new();
    let lock = dir.path("r.lock");
    let l = s(&lock);
    for (args, says) in [
        (vec!["run", "--slots", "0", l, "true"], "from 1 to 1024"),
        (vec!["run", "--slots=-1", l, "true"], "from 1 to 1024"),
        (vec!["run", "--slots", "x", l, "true"], "from 1 to 1024"),
        (vec!["run", "--slots", "1025", l, "true"], "from 1 to 1024"),
        (vec!["run", "--slots", "2", "-s", l, "true"], "--shared"),
        (vec!["run", "--slots", "2", "-F", l, "true"], "--no-fork"),
        (
            vec!["run", "--slots", "2", "--once-per", "1h", l, "true"],
            "--once-per",
        ),
        (vec!["run", "--slots", "2", "9"], "a COMMAND"),
        (
            vec!["run", "--slots", "2", "--evict-after", "1m", l, "true"],
            "--evict-after",
        ),
    ] {
        let out = run_output(&args);
        assert_eq!(code(&out), 64, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    assert!(!lock.exists(), "nothing taken or created");
    let out = run_output(&["run", "--slots", "2", s(dir.tmp.path()), "true"]);
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));
    // The flock(1) personality has no slots.
    let link = dir.path("flock");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_lockfile"), &link).unwrap();
    let out = std::process::Command::new(&link)
        .args(["--slots", "2", l, "true"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(64),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn inspect_shows_a_set_as_one_entry_with_each_slot_and_its_holder() {
    let dir = Dir::new();
    let lock = dir.path("set.lock");
    let holder = start(
        &["--slots", "3", "--job", "gpu"],
        &lock,
        "echo ready; sleep 30",
    );
    assert_eq!(
        code(&run_output(&["run", "--slots", "3", s(&lock), "true"])),
        0,
        "slot 1, then free"
    );
    let _other = start(&[], &dir.path("other.lock"), "echo ready; sleep 30");

    for target in [dir.tmp.path(), lock.as_path()] {
        let (_, json) = inspect_json(target, &[]);
        let entries: Vec<&Value> = json
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["path"] == s(&lock))
            .collect();
        assert_eq!(entries.len(), 1, "{json:#}");
        let set = entries[0];
        assert_eq!(set["state"], "held");
        assert_eq!(
            set["owner"]["slot"],
            serde_json::json!({"index": 0, "of": 3})
        );
        assert_eq!(set["holder_pid"], holder.pid());
        let slots = set["slots"].as_array().unwrap();
        assert_eq!(slots.len(), 1, "slot 2 was never taken");
        assert_eq!(slots[0]["path"], s(&dir.path("set@1.lock")));
        assert_eq!(slots[0]["state"], "free");
        assert_eq!(slots[0]["owner"]["slot"]["index"], 1);
        assert!(
            json.as_array()
                .unwrap()
                .iter()
                .all(|e| e["path"] != s(&dir.path("set@1.lock"))),
            "a slot is not an entry of its own"
        );
    }
    let out = run_output(&["inspect", s(dir.tmp.path())]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("note: slots: 1 of 3 held"), "{table}");
    assert!(
        table.contains(&format!("  {}", s(&dir.path("set@1.lock")))),
        "{table}"
    );
}

#[test]
fn a_file_named_like_a_slot_without_a_slot_record_stays_an_entry_of_its_own() {
    let dir = Dir::new();
    let lock = dir.path("a.lock");
    assert_eq!(code(&run_output(&["run", s(&lock), "true"])), 0);
    // A plain lock that only looks like slot 1 of `a.lock`.
    assert_eq!(
        code(&run_output(&["run", s(&dir.path("a@1.lock")), "true"])),
        0
    );
    let (_, json) = inspect_json(dir.tmp.path(), &[]);
    let paths: Vec<&Value> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["path"])
        .collect();
    assert_eq!(paths, [s(&lock), s(&dir.path("a@1.lock"))]);
    assert!(json[0].get("slots").is_none());
}

#[test]
fn check_judges_each_slot_and_says_saturated() {
    let dir = Dir::new();
    let lock = dir.path("sat.lock");
    // A success, so that the job is not silent.
    assert_eq!(
        code(&run_output(&["run", "--slots", "2", s(&lock), "true"])),
        0
    );
    let _runs: Vec<Background> = (0..2)
        .map(|_| start(&["--slots", "2"], &lock, "echo ready; sleep 30"))
        .collect();
    let check = |extra: &[&str]| {
        let mut args = vec!["check", "--json", "--expect-every", "1h"];
        args.extend(extra);
        args.push(s(&lock));
        let out = run_output(&args);
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        (code(&out), json)
    };
    // Held, each slot well within every limit: OK.
    let (status, json) = check(&["--saturated-after", "1h"]);
    assert_eq!(status, 0, "{json:#}");
    assert_eq!(json["report"]["slots"].as_array().unwrap().len(), 1);
    wait_until("both slots held for over a second", || {
        let (status, json) = check(&["--saturated-after", "1s"]);
        status == 1 && json["verdicts"][0]["kind"] == "saturated"
    });
    // Each slot's verdicts, named: slot 1 overrunning.
    let (status, json) = check(&["--max-age", "1s"]);
    assert_eq!(status, 1, "{json:#}");
    let messages: Vec<&str> = json["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["message"].as_str().unwrap())
        .collect();
    assert!(
        messages.iter().any(|m| m.starts_with("slot 1: ")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.starts_with("slot 0: ")),
        "{messages:?}"
    );
}

#[test]
fn check_finds_the_set_silent_only_when_its_latest_success_is_old() {
    let dir = Dir::new();
    let lock = dir.path("quiet.lock");
    // Slot 0 failed; slot 1 succeeded later.
    let holder = start(&["--slots", "2"], &lock, "echo ready; sleep 30");
    assert_eq!(
        code(&run_output(&["run", "--slots", "2", s(&lock), "true"])),
        0
    );
    drop(holder);
    let out = run_output(&["check", "--expect-every", "1h", s(&lock)]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn metrics_count_a_sets_slots_and_holders_and_export_each_slot() {
    let dir = Dir::new();
    let lock = dir.path("m.lock");
    let _held = start(&["--slots", "3"], &lock, "echo ready; sleep 30");
    assert_eq!(
        code(&run_output(&["run", "--slots", "3", s(&lock), "true"])),
        0
    );
    let out = run_output(&["inspect", "--format", "prometheus", s(dir.tmp.path())]);
    let text = String::from_utf8(out.stdout).unwrap();
    let l = s(&lock);
    assert!(
        text.contains(&format!("lockfile_lock_slots{{lock=\"{l}\"}} 3\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("lockfile_lock_slots_held{{lock=\"{l}\"}} 1\n")),
        "{text}"
    );
    let one = s(&dir.path("m@1.lock")).to_owned();
    assert!(
        text.contains(&format!(
            "lockfile_lock_state{{lock=\"{one}\",state=\"free\"}} 1\n"
        )),
        "{text}"
    );
    let file = dir.path("m.prom");
    std::fs::write(&file, &text).unwrap();
    common::prometheus::promtool_accepts(&file);
}

#[test]
fn reap_removes_a_dead_slots_file_and_keeps_the_held_ones() {
    let dir = Dir::new();
    let lock = dir.path("r.lock");
    let _held = start(&["--slots", "2"], &lock, "echo ready; sleep 30");
    let killed = start(&["--slots", "2"], &lock, "echo ready; sleep 30");
    drop(killed); // SIGKILLed: its record is never marked released
    let out = run_output(&["reap", "--json", s(dir.tmp.path())]);
    let entries: Value = serde_json::from_slice(&out.stdout).unwrap();
    let by_path = |p: &std::path::Path| {
        entries
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["path"] == s(p))
            .cloned()
            .unwrap()
    };
    assert_eq!(by_path(&lock)["action"], "kept");
    assert_eq!(by_path(&dir.path("r@1.lock"))["action"], "would_remove");
    assert_eq!(code(&run_output(&["reap", "--fix", s(dir.tmp.path())])), 0);
    assert!(lock.exists() && !dir.path("r@1.lock").exists());
}

#[test]
fn a_nested_plain_run_does_not_inherit_the_outer_slot() {
    let dir = Dir::new();
    let outer = dir.path("outer.lock");
    let inner = dir.path("inner.lock");
    let script = format!(
        "echo \"outer=$LOCKFILE_SLOT\"; {} run {} sh -c 'echo \"inner=${{LOCKFILE_SLOT-unset}}\"'",
        env!("CARGO_BIN_EXE_lockfile"),
        s(&inner)
    );
    let out = run_output(&["run", "--slots", "2", s(&outer), "sh", "-c", &script]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "outer=0\ninner=unset\n"
    );
}

#[test]
fn check_says_failing_only_when_the_sets_latest_run_failed() {
    let dir = Dir::new();
    let lock = dir.path("f.lock");
    // Slot 1 fails once while slot 0 is held; then runs in slot 0 succeed.
    let holder = start(&["--slots", "2"], &lock, "echo ready; sleep 30");
    assert_eq!(
        code(&run_output(&["run", "--slots", "2", s(&lock), "false"])),
        1
    );
    let check = || {
        let out = run_output(&["check", "--expect-every", "1h", s(&lock)]);
        (
            code(&out),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (status, line) = check();
    assert_eq!(status, 2, "{line}");
    assert!(line.contains("failing: slot 1: "), "{line}");
    drop(holder);
    wait_until("slot 0 free", || {
        code(&run_output(&[
            "run",
            "-n",
            "--slots",
            "2",
            s(&lock),
            "true",
        ])) == 0
    });
    let (status, line) = check();
    assert_eq!(
        status, 0,
        "slot 1's old failure is not the job's state: {line}"
    );
}
