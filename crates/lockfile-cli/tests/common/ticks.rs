//! Contenders for one tick each, as a fleet's crons fire them: for
//! `run --once-per`, under a lock file or a lease alike.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::lockfile;

/// The period of the tick tests.
pub(crate) const PERIOD: Duration = Duration::from_secs(10);

/// When each of the four contenders fires, after its tick: the drift of a
/// fleet's crons.
pub(crate) const OFFSETS: [Duration; 4] = [
    Duration::ZERO,
    Duration::from_millis(300),
    Duration::from_millis(800),
    Duration::from_secs(4),
];

/// Sleeps until `at` on the wall clock, with relative sleeps (as std's
/// sleep does) so that nothing depends on an absolute timer.
pub(crate) fn sleep_until(at: SystemTime) {
    if let Ok(left) = at.duration_since(SystemTime::now()) {
        std::thread::sleep(left);
    }
}

/// The next tick of [`PERIOD`] at least a second from now.
pub(crate) fn next_tick() -> SystemTime {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + Duration::from_secs(1);
    let period = PERIOD.as_secs();
    UNIX_EPOCH + Duration::from_secs(now.as_secs().div_ceil(period) * period)
}

/// One contender: `lockfile run -n --once-per 10s ARGS NAME` whose COMMAND
/// appends `TAG TICK` to `log` and runs 0.1 s. `prefix` wraps it (faketime).
pub(crate) fn contender(prefix: &[&str], args: &[&str], log: &Path, tag: &str) -> Child {
    let script = format!(
        "echo \"{tag} $LOCKFILE_TICK\" >> '{}'; sleep 0.1",
        log.display()
    );
    let mut cmd = match prefix.split_first() {
        None => lockfile(),
        Some((program, rest)) => {
            let mut cmd = super::in_a_standard_state(Command::new(program));
            cmd.args(rest).arg(env!("CARGO_BIN_EXE_lockfile"));
            cmd
        }
    };
    cmd.args(["run", "-n", "--once-per", "10s"])
        .args(args)
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd.spawn().expect("start a contender")
}

/// Runs `ticks` ticks of four contenders each (see [`OFFSETS`]); `args`
/// holds the engine's options and the lock or lease name, and `prefix` of
/// contender `i` wraps it. Returns how many runs each real tick saw (by the
/// tick the test fired them for, `0..ticks`) and how many each claimed tick
/// saw.
pub(crate) fn fire(
    ticks: u32,
    args: &[&str],
    prefix: impl Fn(usize) -> Vec<String>,
    log: &Path,
) -> (BTreeMap<u32, u32>, BTreeMap<String, u32>) {
    let first = next_tick();
    let mut children = Vec::new();
    for n in 0..ticks {
        let tick = first + PERIOD * n;
        for (i, offset) in OFFSETS.iter().enumerate() {
            sleep_until(tick + *offset);
            let prefix = prefix(i);
            let prefix: Vec<&str> = prefix.iter().map(String::as_str).collect();
            children.push(contender(&prefix, args, log, &n.to_string()));
        }
    }
    for mut child in children {
        assert!(
            super::wait_within_patience(&mut child).is_some(),
            "a contender still runs"
        );
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut by_real: BTreeMap<u32, u32> = (0..ticks).map(|n| (n, 0)).collect();
    let mut by_claimed: BTreeMap<String, u32> = BTreeMap::new();
    for line in text.lines() {
        let (real, claimed) = line.split_once(' ').unwrap();
        *by_real.entry(real.parse().unwrap()).or_default() += 1;
        *by_claimed.entry(claimed.to_owned()).or_default() += 1;
    }
    (by_real, by_claimed)
}

/// The prefix of contender `i` in the skew tests: the second one's clock
/// 20 s behind, the third's 20 s ahead, under libfaketime; the monotonic
/// clock, which a lease's deadline runs on, is left alone.
pub(crate) fn skewed(i: usize) -> Vec<String> {
    match i {
        1 => faked("-20"),
        2 => faked("+20"),
        _ => Vec::new(),
    }
}

/// The prefix that runs a command with its wall clock `offset` (libfaketime's
/// `+90`, `-20`, `+3650d`) away, its monotonic clock left alone.
pub(crate) fn faked(offset: &str) -> Vec<String> {
    [
        "env",
        "FAKETIME_DONT_FAKE_MONOTONIC=1",
        "faketime",
        "-f",
        offset,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Fails the test unless libfaketime is installed.
pub(crate) fn require_faketime() {
    assert!(
        Command::new("faketime").arg("--version").output().is_ok(),
        "this test needs libfaketime: install it (Debian: apt-get install faketime)"
    );
}

/// Asserts what a fleet with clocks in step must see: every tick the test
/// fired ran exactly once, and no tick ran twice.
pub(crate) fn assert_once_per_tick(
    by_claimed: &BTreeMap<String, u32>,
    first: SystemTime,
    ticks: u32,
) {
    for (tick, runs) in by_claimed {
        assert_eq!(*runs, 1, "tick {tick} ran {runs} times: {by_claimed:?}");
    }
    for n in 0..ticks {
        let tick = humantime::format_rfc3339_seconds(first + PERIOD * n).to_string();
        assert!(
            by_claimed.contains_key(&tick),
            "tick {tick} never ran: {by_claimed:?}"
        );
    }
}

/// A claimant SIGKILLed with its whole process group, then a contender in
/// the same tick: the contender runs the tick, and sees `owner_dead`
/// recorded for the dead claim while it runs. `args` holds the engine's
/// options and the name; `inspect` prints the name's JSON report.
pub(crate) fn a_dead_claim_is_run_again(args: &[&str], inspect: &[&str]) {
    // Far from a tick's edge, so that both runs belong to the same tick.
    let tick = next_tick();
    sleep_until(tick);
    let mut first: Vec<&str> = vec!["--once-per", "10s"];
    first.extend(args);
    first.extend(["sh", "-c", "echo ready; sleep 30"]);
    let (claimant, _) = super::Background::spawn(&first);
    drop(claimant); // SIGKILL, the whole group
    let report = format!(
        "{} {} --json {} > \"$OUT\"",
        env!("CARGO_BIN_EXE_lockfile"),
        "inspect",
        inspect.join(" ")
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let mut second = lockfile();
    second
        .args(["run", "--once-per", "10s"])
        .args(args)
        .args(["sh", "-c", &report])
        .env("OUT", &out);
    let status = super::BoundedOutput::bounded_output(&mut second);
    assert_eq!(super::code(&status), 0, "{}", super::stderr(&status));
    let seen: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let run = &seen[0]["last_run"];
    assert_eq!(run["outcome"], "owner_dead", "{seen}");
    let shown = humantime::format_rfc3339_micros(tick).to_string();
    assert_eq!(run["tick"], shown, "{seen}");
    assert_eq!(seen[0]["last_claimed_tick"]["tick"], shown, "{seen}");
    // The same tick, claimed again by the second run, which then ran it.
    let mut third = lockfile();
    third
        .args(["run", "--once-per", "10s"])
        .args(args)
        .args(["true"]);
    let skipped = super::BoundedOutput::bounded_output(&mut third);
    assert_eq!(super::code(&skipped), 75, "{}", super::stderr(&skipped));
    assert!(
        super::stderr(&skipped).contains("(succeeded)"),
        "{}",
        super::stderr(&skipped)
    );
}

/// A run that fails uses up its tick: a contender in the same tick skips,
/// and its line names the failure.
pub(crate) fn a_failed_run_uses_up_its_tick(args: &[&str]) {
    sleep_until(next_tick());
    let run = |script: &str| {
        let mut cmd = lockfile();
        cmd.args(["run", "--once-per", "10s"])
            .args(args)
            .args(["sh", "-c", script]);
        super::BoundedOutput::bounded_output(&mut cmd)
    };
    let failed = run("exit 3");
    assert_eq!(super::code(&failed), 3, "{}", super::stderr(&failed));
    let skipped = run("echo must not run; exit 9");
    assert_eq!(super::code(&skipped), 75, "{}", super::stderr(&skipped));
    let line = super::stderr(&skipped);
    assert!(
        line.contains("skipped: tick ") && line.contains("(failed)"),
        "{line}"
    );
    assert!(skipped.stdout.is_empty());
}

/// With `--metrics-dir`, a run writes the tick it claimed (the one COMMAND
/// got in `LOCKFILE_TICK`) and the period; a run of the same tick, refused
/// because it already ran, counts its skip and writes no tick: the alert on
/// missed ticks reads the claims only. `args` holds the engine's options
/// and the name.
pub(crate) fn the_tick_metrics_are_the_claims(args: &[&str]) {
    use super::prometheus::{file_samples, promtool_accepts, value};
    const LAST_TICK: &str = "lockfile_run_last_tick_timestamp_seconds";
    const PERIOD_SECONDS: &str = "lockfile_run_tick_period_seconds";
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("tick");
    let run = |metrics: &str| {
        let metrics = dir.path().join(metrics);
        std::fs::create_dir(&metrics).unwrap();
        let mut cmd = lockfile();
        cmd.args([
            "run",
            "--once-per",
            "10s",
            "--job",
            "report",
            "--metrics-dir",
        ])
        .arg(&metrics)
        .args(args)
        .args(["sh", "-c", "echo \"$LOCKFILE_TICK\" > \"$SEEN\""])
        .env("SEEN", &seen);
        let out = super::BoundedOutput::bounded_output(&mut cmd);
        (out, metrics.join("lockfile-report.prom"))
    };
    // Both runs in one tick, far from its edge.
    sleep_until(next_tick());
    let (ran, file) = run("ran");
    assert_eq!(super::code(&ran), 0, "{}", super::stderr(&ran));
    promtool_accepts(&file);
    let written = file_samples(&file);
    let job = [("lockfile_job", "report")];
    let shown = std::fs::read_to_string(&seen).unwrap();
    let tick = humantime::parse_rfc3339(shown.trim())
        .unwrap_or_else(|e| panic!("LOCKFILE_TICK {shown:?}: {e}"))
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert_eq!(value(&written, LAST_TICK, &job), Some(tick), "{written:?}");
    assert_eq!(tick % 10.0, 0.0, "{shown}");
    assert_eq!(value(&written, PERIOD_SECONDS, &job), Some(10.0));

    std::fs::remove_file(&seen).unwrap();
    let (skipped, file) = run("skipped");
    assert_eq!(super::code(&skipped), 75, "{}", super::stderr(&skipped));
    assert!(!seen.exists(), "COMMAND ran in a tick that already ran");
    let written = file_samples(&file);
    let reason = [("lockfile_job", "report"), ("reason", "already_ran")];
    assert_eq!(
        value(&written, "lockfile_run_skips_total", &reason),
        Some(1.0)
    );
    for name in [LAST_TICK, PERIOD_SECONDS] {
        assert_eq!(value(&written, name, &job), None, "{written:?}");
    }
}

/// Contenders whose clocks are 90 s and 300 s ahead, past the minute a
/// future time is forgiven: the first two contenders of each of three
/// ticks, taking turns at coming first, so that each clock writes a run
/// that the other, and the contenders in step, then judge. Under a lease
/// whose server dates every claim and run (`args`), each tick still runs
/// once.
pub(crate) fn clocks_minutes_ahead_still_run_each_tick_once(args: &[&str]) {
    require_faketime();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let first = next_tick();
    // `fire` asks for the prefixes in order, four per tick.
    let asked = std::cell::Cell::new(0_usize);
    let ahead = |i: usize| {
        let tick = asked.get() / OFFSETS.len();
        asked.set(asked.get() + 1);
        match (i, tick % 2) {
            (0, 0) | (1, 1) => faked("+90"),
            (0, 1) | (1, 0) => faked("+300"),
            _ => Vec::new(),
        }
    };
    let (_, by_claimed) = fire(3, args, ahead, &log);
    assert_once_per_tick(&by_claimed, first, 3);
}
