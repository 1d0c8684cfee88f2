//! `lockfile run --slots N` under a lease, whatever the engine: a lease per
//! slot (`NAME`, `NAME@1`, …) with its own fencing token, the slot in
//! COMMAND's environment and in the record, a refusal naming every holder,
//! a killed holder's slot taken by a waiter, and the bound under chaos.
//! Each takes `lease`, the engine's options (`--etcd ENDPOINTS`, …).

use std::collections::HashMap;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime};

use super::lease_run::{inspect, run, start};
use super::{code, lockfile, signal_group, stderr};

/// Two runs take slots 0 and 1 with rising tokens; a third is refused,
/// naming both; a waiter takes the slot of a holder SIGKILLed with its
/// command, with a larger token, once its TTL ran out.
pub(crate) fn n_runs_hold_n_slot_leases(lease: &[&str]) {
    let script = "echo \"$LOCKFILE_SLOT $LOCKFILE_LEASE $LOCKFILE_FENCING_TOKEN\"; exec sleep 60";
    let extra = ["--slots", "2", "--ttl", "2", "--job", "gpu"];
    let (first, line) = start(lease, &extra, "gpu", script);
    let zero: Vec<String> = line.split(' ').map(str::to_owned).collect();
    assert_eq!(zero[..2], ["0", "gpu"], "{line}");
    let (second, line) = start(lease, &extra, "gpu", script);
    let one: Vec<String> = line.split(' ').map(str::to_owned).collect();
    assert_eq!(one[..2], ["1", "gpu@1"], "{line}");

    let out = run(lease, &["-n", "--slots", "2"], "gpu", "true");
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("all 2 slots of `gpu` are held"), "{err}");
    assert!(err.contains(&format!("pid {}", first.pid())), "{err}");

    let out = inspect(lease, &["gpu@1"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json[0]["owner"]["slot"],
        serde_json::json!({"index": 1, "of": 2}),
        "{json:#}"
    );
    // The set is one entry, by its name and in the listing of every lease.
    for args in [&["gpu"][..], &[]] {
        let out = inspect(lease, args);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let entries = json.as_array().unwrap();
        let set: Vec<_> = entries.iter().filter(|e| e["name"] == "gpu").collect();
        assert_eq!(set.len(), 1, "{json:#}");
        assert_eq!(set[0]["owner"]["slot"]["index"], 0, "{json:#}");
        assert_eq!(set[0]["slots"][0]["name"], "gpu@1", "{json:#}");
        assert!(entries.iter().all(|e| e["name"] != "gpu@1"), "{json:#}");
    }
    // Metrics: every slot's lease, and the set's size and holders.
    let out = lockfile()
        .args(["inspect", "--format", "prometheus"])
        .args(lease)
        .arg("gpu")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let engine = lease[0].trim_start_matches("--");
    for sample in [
        format!("lockfile_lock_slots{{engine=\"{engine}\",lock=\"gpu\"}} 2\n"),
        format!("lockfile_lock_slots_held{{engine=\"{engine}\",lock=\"gpu\"}} 2\n"),
        format!("lockfile_lock_state{{engine=\"{engine}\",lock=\"gpu@1\",state=\"held\"}} 1\n"),
    ] {
        assert!(text.contains(&sample), "{sample} in:\n{text}");
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text.as_bytes()).unwrap();
    super::prometheus::promtool_accepts(file.path());
    // `check` judges the set: both slots held, so saturated past 0 s.
    let out = lockfile()
        .args([
            "check",
            "--json",
            "--expect-every",
            "1h",
            "--saturated-after",
            "0s",
        ])
        .args(lease)
        .arg("gpu")
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = json["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"saturated"), "{json:#}");
    assert_eq!(json["report"]["slots"][0]["name"], "gpu@1", "{json:#}");
    let out = lockfile()
        .arg("inspect")
        .args(lease)
        .arg("gpu")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("note: slots: 2 of 2 held") && text.contains("  gpu@1 "),
        "{text}"
    );

    let waiter = {
        let lease: Vec<String> = lease.iter().map(|s| (*s).to_owned()).collect();
        std::thread::spawn(move || {
            let lease: Vec<&str> = lease.iter().map(String::as_str).collect();
            let extra = ["-w", "30", "--slots", "2", "--ttl", "2"];
            start(
                &lease,
                &extra,
                "gpu",
                "echo \"$LOCKFILE_SLOT $LOCKFILE_FENCING_TOKEN\"; exec sleep 60",
            )
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    signal_group(second.pid(), "KILL");
    let (third, line) = waiter.join().unwrap();
    let (slot, token) = line.split_once(' ').unwrap();
    assert_eq!(slot, "1", "{line}");
    assert!(
        token.parse::<u64>().unwrap() > one[2].parse::<u64>().unwrap(),
        "a larger token than the killed holder's: {line} after {one:?}"
    );
    // Slot 0 released: its lease keeps no record, and the set is still
    // found, from the listing.
    let mut first = first;
    first.signal("TERM");
    first.reap();
    let out = inspect(lease, &["gpu"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json[0]["state"], "free", "{json:#}");
    assert_eq!(json[0]["slots"][0]["name"], "gpu@1", "{json:#}");
    assert_eq!(json[0]["slots"][0]["state"], "held", "{json:#}");
    drop((first, second, third));
}

/// At most N sections at once while runs are SIGKILLed with their
/// commands: each section logs its start and end on the wall clock; a
/// killed run's section ends when it was killed (its successor can only
/// start once its lease expired, a TTL later). Returns sections, kills and
/// the most seen at once.
pub(crate) fn the_bound_holds_under_chaos(lease: &[&str]) -> (usize, usize, usize) {
    const N: usize = 2;
    const RUNS: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sections");
    std::fs::write(&log, b"").unwrap();
    let script = format!(
        "echo \"start $(date +%s%N) $RUN\" >> {0}; sleep 0.4; echo \"end $(date +%s%N) $RUN\" >> {0}",
        log.display()
    );
    let mut next_id = 0usize;
    let mut spawn = || {
        next_id += 1;
        let child = lockfile()
            .args(["run", "-w", "120", "--slots", &N.to_string(), "--ttl", "2"])
            .args(lease)
            .args(["chaos", "sh", "-c", &script])
            .env("RUN", next_id.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        (next_id, child)
    };
    let mut runs: Vec<(usize, Child)> = (0..RUNS).map(|_| spawn()).collect();
    let mut killed_at: HashMap<usize, u128> = HashMap::new();
    let end = Instant::now() + Duration::from_secs(15);
    let mut turn = 0;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(700));
        for run in &mut runs {
            if run.1.try_wait().unwrap().is_some() {
                *run = spawn();
            }
        }
        turn = (turn + 1) % RUNS;
        let (id, child) = &mut runs[turn];
        killed_at.insert(*id, now_ns());
        signal_group(child.id(), "KILL");
        child.wait().unwrap();
        runs[turn] = spawn();
    }
    for (id, child) in &mut runs {
        killed_at.insert(*id, now_ns());
        signal_group(child.id(), "KILL");
        child.wait().unwrap();
    }
    // Each section from its start to its end, or to its run's kill.
    let text = std::fs::read_to_string(&log).unwrap();
    let mut starts: HashMap<usize, u128> = HashMap::new();
    let mut ends: HashMap<usize, u128> = HashMap::new();
    for line in text.lines() {
        let mut parts = line.split(' ');
        let (what, at, id) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        let (at, id): (u128, usize) = (at.parse().unwrap(), id.parse().unwrap());
        match what {
            "start" => starts.insert(id, at),
            _ => ends.insert(id, at),
        };
    }
    let mut events: Vec<(u128, i32)> = Vec::new();
    for (id, start) in &starts {
        let end = ends
            .get(id)
            .or(killed_at.get(id))
            .copied()
            .expect("every run ends or is killed");
        events.push((*start, 1));
        events.push((end, -1));
    }
    // At one instant, an end before a start.
    events.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in events {
        now += step;
        most = most.max(now);
    }
    let kills = killed_at.len() - RUNS;
    eprintln!(
        "slots chaos on a lease: {} sections, {kills} runs SIGKILLed, at most {most} at once (N = {N})",
        starts.len()
    );
    assert!(
        starts.len() >= 5,
        "too few sections to judge: {}",
        starts.len()
    );
    assert!(
        most as usize <= N,
        "{most} sections at once with {N} slots:\n{text}"
    );
    (starts.len(), kills, most as usize)
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}
