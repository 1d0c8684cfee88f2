//! `docs/json.md` lists every key that `inspect --json`, `check --json` and
//! `reap --json` write for lock files, and no other: real runs leave lock
//! files in every state, and their output is held to the page.

mod common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;

use serde_json::Value;

use common::json_doc::{Documented, Keys, gather, inspect_section};
use common::{Dir, code, lockfile, run_output, s, signal, start, stderr};

/// What a command printed on stdout, as JSON.
fn json_of(args: &[&str]) -> Value {
    let out = run_output(args);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {}", stderr(&out)))
}

#[test]
fn docs_json_lists_every_key_written_and_no_other() {
    let dir = Dir::new();
    let path = |name: &str| dir.path(name);

    // A success that claimed a tick and promised a runtime; a failure.
    let ok = path("ok.lock");
    let out = run_output(&[
        "run",
        "-n",
        "--once-per",
        "1m",
        "--max-runtime",
        "1h",
        s(&ok),
        "true",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run_output(&["run", "-n", s(&path("failed.lock")), "false"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    // A record left by an owner that never released it (stale), and one that
    // evicted a hung run and whose release goes unrecorded.
    let record: Value = serde_json::from_slice(&std::fs::read(&ok).unwrap()).unwrap();
    let mut stale = record.clone();
    stale["released"] = false.into();
    std::fs::write(path("stale.lock"), stale.to_string()).unwrap();
    let mut evicted = record.clone();
    evicted["owner"]["evicted"] = serde_json::json!({
        "token": "6e1c7c1e-5d2b-4f3f-9a59-1f1f5b0f2a10",
        "pid": 4242,
        "job": "nightly",
        "silent_seconds": 93.5
    });
    evicted["owner"]["release"] = "unrecorded".into();
    std::fs::write(path("evicted.lock"), evicted.to_string()).unwrap();
    // Debris, someone else's file, and a name that is not UTF-8.
    std::fs::write(path("debris.lock"), "{\"format\": 1, \"pid\": ").unwrap();
    std::fs::write(path("foreign.lock"), "#!/bin/sh\necho not a record\n").unwrap();
    let bad = dir.tmp.path().join(OsStr::from_bytes(b"bad\xffname.lock"));
    let out = lockfile()
        .args(["run", "-n"])
        .arg(&bad)
        .arg("true")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A lock held by a COMMAND whose wrapper was killed: held, its owner dead.
    let orphaned = path("orphaned.lock");
    let mut orphan = start(&[], &orphaned, "echo ready; exec sleep 60");
    signal(orphan.pid(), "KILL");
    orphan.reap();
    // A set of two slots: slot 0 held, slot 1 taken and released.
    let set = path("set.lock");
    let _slot_holder = start(&["--slots", "2"], &set, "echo ready; exec sleep 60");
    let out = run_output(&["run", "-n", "--slots", "2", s(&set), "true"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // A lock held by its wrapper, silent past a short threshold.
    let held = path("held.lock");
    let holder = start(&[], &held, "echo ready; exec sleep 60");

    let mut seen = Keys::new();
    let gather_inspect = |value: &Value, seen: &mut Keys| {
        for item in value.as_array().expect("inspect --json prints an array") {
            gather(item, inspect_section(item), seen);
        }
    };
    gather_inspect(
        &json_of(&["inspect", "--json", "--max-age", "0s", s(dir.tmp.path())]),
        &mut seen,
    );
    // A file that cannot be inspected: a path through a regular file.
    let through = path("foreign.lock/x.lock");
    gather_inspect(&json_of(&["inspect", "--json", s(&through)]), &mut seen);
    let mut bad_through = path("foreign.lock").into_os_string();
    bad_through.push(OsStr::from_bytes(b"/bad\xff.lock"));
    let out = lockfile()
        .args(["inspect", "--json"])
        .arg(&bad_through)
        .output()
        .unwrap();
    gather_inspect(&serde_json::from_slice(&out.stdout).unwrap(), &mut seen);
    for args in [
        &[
            "check",
            "--json",
            "--expect-every",
            "1s",
            "--max-age",
            "0s",
            s(&held),
        ][..],
        &["check", "--json", "--expect-every", "1h", s(&ok)],
        &["check", "--json", "--expect-every", "1s", s(&through)],
    ] {
        gather(&json_of(args), "check", &mut seen);
    }
    for entry in json_of(&["reap", "--json", s(dir.tmp.path())])
        .as_array()
        .unwrap()
    {
        gather(entry, "reap", &mut seen);
    }
    drop(holder);

    Documented::read().assert_matches(
        &seen,
        &[
            "inspect",
            "inspect-error",
            "owner",
            "evicted",
            "holder",
            "last_run",
            "claim",
            "finding",
            "check",
            "verdict",
            "reap",
        ],
        &[],
    );
}
