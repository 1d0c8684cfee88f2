//! `lockfile run --once-per` under a lock file: at most one finished run per
//! tick among contenders that fire as a fleet's drifting crons do, the
//! `owner_dead` record of a claim whose wrapper died, and `check
//! --once-per`'s missed-tick alarm. (The same under a lease: `etcd.rs`.)

mod common;

use common::ticks::{self, PERIOD};
use common::{BoundedOutput, code, lockfile, stderr};

#[test]
fn four_contenders_run_each_tick_once() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("backup.lock");
    let log = dir.path().join("runs.log");
    let first = ticks::next_tick();
    let (_, by_claimed) = ticks::fire(5, &[lock.to_str().unwrap()], |_| Vec::new(), &log);
    ticks::assert_once_per_tick(&by_claimed, first, 5);
}

#[test]
fn a_claim_whose_wrapper_died_is_run_again_in_its_tick() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("dead.lock");
    let lock = lock.to_str().unwrap();
    ticks::a_dead_claim_is_run_again(&[lock], &[lock]);
}

#[test]
fn a_failed_run_uses_up_its_tick() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("failing.lock");
    ticks::a_failed_run_uses_up_its_tick(&[lock.to_str().unwrap()]);
}

#[test]
fn the_metrics_carry_the_tick_claimed_and_a_skip_leaves_it() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("report.lock");
    ticks::the_tick_metrics_are_the_claims(&[lock.to_str().unwrap()]);
}

#[test]
fn check_alarms_on_missed_ticks() {
    let dir = tempfile::tempdir().unwrap();
    let lock = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let check = |period: &str, lock: &str| {
        lockfile()
            .args(["check", "--json", "--once-per", period, lock])
            .bounded_output()
    };
    let run = |period: &str, lock: &str| {
        let out = lockfile()
            .args(["run", "--once-per", period, lock, "true"])
            .bounded_output();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    };
    // No tick ever finished: critical, and no --expect-every is needed.
    let hourly = lock("hourly.lock");
    let out = check("1h", &hourly);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["verdicts"][0]["kind"], "missed_ticks", "{json}");
    // The tick ran: fine for the next hour and a half.
    run("1h", &hourly);
    assert_eq!(code(&check("1h", &hourly)), 0);
    // A tick of a second, five seconds ago: ticks were missed since, at
    // most 3 listed, and a count.
    let fast = lock("fast.lock");
    run("1s", &fast);
    std::thread::sleep(std::time::Duration::from_secs(5));
    let out = check("1s", &fast);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = json["verdicts"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("tick(s) missed") && message.contains(" more"),
        "{message}"
    );
    assert_eq!(
        message.matches('Z').count(),
        4,
        "the last finished one and 3 missed: {message}"
    );
}

#[test]
fn a_tick_from_the_future_never_mutes_the_missed_tick_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("forged.lock");
    let lock = lock.to_str().unwrap();
    let out = lockfile()
        .args(["run", "--once-per", "1h", lock, "true"])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // The run's tick moved to 9999, its times left as they were: a clock
    // far ahead, or a hand, wrote it.
    let record = std::fs::read_to_string(lock).unwrap();
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    let tick = record["last_run"]["tick"].as_str().unwrap().to_owned();
    let forged = serde_json::to_string(&record)
        .unwrap()
        .replace(&tick, &format!("9999{}", &tick[4..]));
    std::fs::write(lock, forged).unwrap();
    let out = lockfile()
        .args(["check", "--json", "--once-per", "1h", lock])
        .bounded_output();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = json["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["missed_ticks", "future_time"], "{json}");
}

#[test]
fn periods_whose_ticks_no_clock_reaches_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("long.lock");
    let lock = lock.to_str().unwrap();
    for period in ["367d", "40000d", "100000d"] {
        for args in [
            vec!["check", "--once-per", period, lock],
            vec!["run", "--once-per", period, lock, "true"],
        ] {
            let out = lockfile().args(&args).bounded_output();
            assert_eq!(code(&out), 64, "{args:?}: {}", stderr(&out));
            assert!(stderr(&out).contains("at most 366d"), "{}", stderr(&out));
        }
    }
    assert!(!std::path::Path::new(lock).exists(), "no run, no file");
}

#[test]
fn bad_schedules_and_combinations_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("x.lock");
    let lock = lock.to_str().unwrap();
    for args in [
        vec!["--once-per", "7m", lock, "true"],
        vec!["--once-per", "1h", "--tick-offset", "1h", lock, "true"],
        vec!["--tick-offset", "5m", lock, "true"],
        vec!["--once-per", "1h", "-s", lock, "true"],
        vec!["--once-per", "1h", "-F", lock, "true"],
        vec!["--once-per", "1h", "7"],
        vec!["--once-per", "1h", dir.path().to_str().unwrap(), "true"],
    ] {
        let out = lockfile().arg("run").args(&args).bounded_output();
        assert_eq!(code(&out), 64, "{args:?}: {}", stderr(&out));
    }
    // A file whose content is not ours cannot carry the claim: 73.
    std::fs::write(lock, "#!/bin/sh\necho a script that locks itself\n").unwrap();
    let out = lockfile()
        .args(["run", "--once-per", "1h", lock, "true"])
        .bounded_output();
    assert_eq!(code(&out), 73, "{}", stderr(&out));
    assert!(stderr(&out).contains("--once-per"), "{}", stderr(&out));
    assert_eq!(PERIOD.as_secs(), 10);
}

#[test]
fn a_late_cron_is_warned_and_a_quiet_skip_of_a_success_says_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("drift.lock");
    let lock = lock.to_str().unwrap();
    // Four seconds after a 10 s tick: more than a quarter period off.
    ticks::sleep_until(ticks::next_tick() + std::time::Duration::from_secs(4));
    let out = lockfile()
        .args([
            "run",
            "--once-per",
            "10s",
            lock,
            "sh",
            "-c",
            "echo \"$LOCKFILE_TICK\"",
        ])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("--tick-offset") && said.contains("CRON_TZ=UTC"),
        "{said}"
    );
    let tick = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(tick.ends_with("0Z"), "{tick}");
    // The same tick again, quietly: the run that used it succeeded.
    let out = lockfile()
        .args(["run", "-q", "--once-per", "10s", lock, "true"])
        .bounded_output();
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "a quiet skip of a tick that succeeded");
}
