//! Faults of a lease's holder and of its server, whatever the engine: its
//! wrapper killed (a waiting contender gets in within the TTL), its whole
//! run stopped past the TTL (its late write is refused by the fenced store,
//! and it exits 79 once continued), its server stopped or cut off (COMMAND
//! stopped, exit 79); and the alert rules' lease metrics, as written. Each takes `lease`, the engine's options
//! (`--postgres URL`, `--redis URL`).

use std::time::{Duration, Instant};

use lockfile_examples::FencedStore;
use lockfile_test_support::stopped::stop_outside_a_write;

use super::fenced::{Event, Writer};
use super::{Background, BoundedOutput, LOOP, code, lockfile, stderr};

/// Whether `pid` lives (a zombie has exited).
pub(crate) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// The wrapper of a run with a 3 s TTL is SIGKILLed (and its COMMAND): a
/// contender waiting on the lease runs within the TTL and a renewal
/// interval of the kill, and finds COMMAND gone.
pub(crate) fn a_killed_wrapper_lets_a_waiting_contender_in_within_the_ttl(lease: &[&str]) {
    let ttl = Duration::from_secs(3);
    let mut args = lease.to_vec();
    args.extend(["--ttl", "3", "orphan", "sh", "-c", "echo $$; exec sleep 60"]);
    let (mut wrapper, command_pid) = Background::spawn(&args);
    let command_pid: u32 = command_pid.parse().unwrap();
    let contender = {
        let lease: Vec<String> = lease.iter().map(|s| (*s).to_owned()).collect();
        std::thread::spawn(move || {
            let out = lockfile()
                .args(["run", "-w", "30"])
                .args(&lease)
                .arg("orphan")
                .args([
                    "sh",
                    "-c",
                    &format!(
                        "if kill -0 {command_pid} 2>/dev/null; then echo alive; else echo gone; fi"
                    ),
                ])
                .bounded_output();
            (out, Instant::now())
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let killed_at = Instant::now();
    // The wrapper's whole process group: the wrapper and its command.
    super::signal(wrapper.pid(), "KILL");
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &command_pid.to_string()])
        .status();
    assert_eq!(wrapper.reap(), -1, "killed by a signal");
    let (out, acquired_by) = contender.join().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "gone");
    let took = acquired_by - killed_at;
    eprintln!("SIGKILL: the waiting contender ran {took:?} after the kill (TTL {ttl:?})");
    // The lease lapses within the TTL of the last renewal, which was at most
    // a renewal interval before the kill; the contender polls every 300 ms.
    assert!(took <= ttl + ttl / 3 + Duration::from_secs(2), "{took:?}");
}

/// The store's history, as what it must be: the first holder's writes,
/// then, from the new holder's first write on, never a lower token.
pub(crate) fn assert_fenced(store: &FencedStore, old: u64, new: u64) {
    let history = store.history().unwrap();
    let first_new = history
        .iter()
        .position(|w| w.token == new)
        .unwrap_or_else(|| panic!("the new holder's write is missing: {history:?}"));
    assert!(
        history[..first_new].iter().all(|w| w.token == old),
        "{history:?}"
    );
    assert!(
        history[first_new..].iter().all(|w| w.token >= new),
        "the store accepted the old token after the new one: {history:?}"
    );
}

/// `lockfile run` whose whole process group is stopped (SIGSTOP) past its
/// TTL: a contender takes the lease with a larger token and writes to the
/// fenced store. When the group continues, in the worst order (COMMAND
/// before the wrapper), COMMAND's late write is refused by the store; the
/// wrapper then finds its deadline passed, kills COMMAND and exits 79.
/// `writer` is the name of the test binary's test that writes
/// (`common::fenced::write_if_requested`).
pub(crate) fn a_run_stopped_past_its_ttl_is_fenced_off_and_exits_79(lease: &[&str], writer: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store.json");
    let store = FencedStore::new(&store_path);
    let a = Writer::new(&store_path, dir.path().join("a.log"));
    let mut args = lease.to_vec();
    args.extend(["--ttl", "2", "paused"]);
    let (mut wrapper, _) = Background::start(a.run(writer, &args));
    let (a_pid, a_token) = a.started();
    a.wait_for("a first accepted write", |e| {
        matches!(e, Event::Accepted { .. })
    });

    // The whole process group: wrapper and COMMAND.
    let pgid = wrapper.pid();
    stop_outside_a_write(
        a_pid,
        || store.busy().expect("try the store's lock"),
        || super::signal_group(pgid, "STOP"),
        || super::signal_group(pgid, "CONT"),
    );
    let stopped_at = Instant::now();
    let seen = a.events().len();
    let b = Writer::new(&store_path, dir.path().join("b.log")).writes(1);
    let mut args = vec!["-w", "20"];
    args.extend(lease);
    args.extend(["--ttl", "2", "paused"]);
    let out = b.run(writer, &args).bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let took = stopped_at.elapsed();
    let (_, b_token) = b.started();
    assert_eq!(b.events()[1], Event::Accepted { batch: 1 });
    assert!(b_token > a_token, "tokens rise: {a_token} then {b_token}");
    assert_eq!(a.events().len(), seen, "nothing runs in a stopped group");

    // COMMAND first, alone: it writes before its wrapper can stop it.
    super::signal(a_pid, "CONT");
    let late = a.wait_for("the late write", |e| matches!(e, Event::Refused { .. }));
    assert!(
        matches!(late, Event::Refused { highest, .. } if highest == b_token),
        "{late:?}"
    );
    super::signal_group(wrapper.pid(), "CONT");
    let (status, err) = wrapper.wait();
    eprintln!(
        "SIGSTOP past the TTL (2s): the contender ran {took:?} after the stop, token {a_token} -> {b_token}\n{err}"
    );
    assert_eq!(status, 79, "{err}");
    assert!(err.contains("the lease on `paused` is lost"), "{err}");
    assert!(!alive(a_pid), "COMMAND was killed: {err}");
    // Every write COMMAND attempted after the contender's was refused.
    let after: Vec<Event> = a.events()[seen..].to_vec();
    assert!(!after.is_empty());
    assert!(
        after
            .iter()
            .all(|e| matches!(e, Event::Refused { highest, .. } if *highest == b_token)),
        "{after:?}"
    );
    assert_fenced(&store, a_token, b_token);
}

/// A run with a 2 s TTL whose server `stop` stops answering (and `restart`
/// brings back after): COMMAND is sent SIGTERM before the lease can lapse,
/// and the run exits 79.
pub(crate) fn a_stopped_server_stops_the_command_and_the_run_exits_79(
    lease: &[&str],
    stop: impl FnOnce(),
    restart: impl FnOnce(),
) {
    let script = format!("trap 'echo stopped >&2; exit 0' TERM; echo ready; {LOOP}");
    let mut args = lease.to_vec();
    args.extend(["--ttl", "2", "down", "sh", "-c", &script]);
    let (mut wrapper, ready) = Background::spawn(&args);
    assert_eq!(ready, "ready");
    stop();
    let (status, err) = wrapper.wait();
    restart();
    assert_eq!(status, 79, "{err}");
    assert!(err.contains("stopped"), "the command saw SIGTERM: {err}");
}

/// A run with a 3 s TTL whose server is reached through `proxy` (`lease`
/// names the proxy's address): once the proxy turns into a black hole, the
/// wrapper kills COMMAND (which ignores SIGTERM) and exits 79 within the TTL
/// and a second of the cut.
pub(crate) fn behind_a_black_hole_the_wrapper_exits_within_the_ttl_and_a_second(
    lease: &[&str],
    proxy: &lockfile_test_support::Proxy,
) {
    let ttl = Duration::from_secs(3);
    let script = format!("trap '' TERM; echo $$; {LOOP}");
    let mut args = lease.to_vec();
    args.extend(["--ttl", "3", "holed", "sh", "-c", &script]);
    let (mut wrapper, pid) = Background::spawn(&args);
    let pid: u32 = pid.parse().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let cut = Instant::now();
    proxy.blackhole();
    let (status, exited) = loop {
        if let Some(status) = wrapper.try_code() {
            break (status, cut.elapsed());
        }
        assert!(
            cut.elapsed() < Duration::from_secs(60),
            "{}",
            wrapper.stderr_so_far()
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let err = wrapper.stderr_so_far();
    eprintln!("black hole, TTL 3s: the wrapper exited {exited:?} after the cut\n{err}");
    assert_eq!(status, 79, "{err}");
    assert!(!alive(pid), "the command was killed: {err}");
    assert!(exited <= ttl + Duration::from_secs(1), "{exited:?}: {err}");
}

/// Every lease metric the package's alert rules name is one that inspect
/// writes for a lease held on the server `lease` names.
pub(crate) fn the_alert_rules_name_only_lease_metrics_that_are_written(lease: &[&str]) {
    let mut args = lease.to_vec();
    args.extend(["rules", "sh", "-c", "echo ready; exec sleep 60"]);
    let (holder, line) = Background::spawn(&args);
    assert_eq!(line, "ready");
    let out = lockfile()
        .args(["inspect", "--format", "prometheus"])
        .args(lease)
        .arg("rules")
        .bounded_output();
    let written = super::prometheus::sample_names(&String::from_utf8_lossy(&out.stdout));
    drop(holder);
    let missing: Vec<String> = super::prometheus::rule_metrics()
        .into_iter()
        .filter(|name| name.starts_with("lockfile_lease_") && !written.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "the rules name {missing:?}, which inspect did not write: {written:?}"
    );
}
