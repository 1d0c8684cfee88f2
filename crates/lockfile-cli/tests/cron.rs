//! What cron users put around a lock: `--jitter`, a delay stable for a host
//! and a job.

mod common;

use std::io::{BufRead as _, BufReader};
use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;

use common::{BoundedOutput, Dir, code, lockfile, s, signal, stderr, wait_within_patience};

/// The delay `lockfile run --verbose --jitter JITTER` says it waits, for
/// `seed` (None: this host's own), and the run's exit status.
fn jitter(seed: Option<&str>, jitter: &str, lock: &std::path::Path) -> (String, i32) {
    let mut cmd = lockfile();
    cmd.args([
        "run",
        "--verbose",
        "--jitter",
        jitter,
        "--job",
        "backup",
        "-n",
        s(lock),
        "true",
    ]);
    match seed {
        Some(seed) => cmd.env("LOCKFILE_JITTER_SEED", seed),
        None => cmd.env_remove("LOCKFILE_JITTER_SEED"),
    };
    let out = cmd.bounded_output();
    let said = stderr(&out);
    let waiting = said
        .lines()
        .find_map(|l| l.strip_prefix(&format!("lockfile: --jitter {jitter}: waiting ")))
        .unwrap_or_else(|| panic!("no jitter line: {said}"))
        .to_owned();
    (waiting, code(&out))
}

#[test]
fn the_jitter_is_the_same_on_every_run_of_a_host_and_differs_across_hosts() {
    let dir = Dir::new();
    let lock = dir.path("backup.lock");
    let (first, status) = jitter(Some("host-a"), "200ms", &lock);
    assert_eq!(status, 0);
    for _ in 0..2 {
        assert_eq!(jitter(Some("host-a"), "200ms", &lock).0, first);
    }
    let hosts: std::collections::BTreeSet<String> = (0..8)
        .map(|host| jitter(Some(&format!("host-{host}")), "200ms", &lock).0)
        .collect();
    assert!(
        hosts.len() > 4,
        "eight hosts, {} delays: {hosts:?}",
        hosts.len()
    );
    // This host's own (its machine id, or its hostname): stable too.
    let own = jitter(None, "200ms", &lock).0;
    assert_eq!(jitter(None, "200ms", &lock).0, own);
}

#[test]
fn a_jitter_of_half_the_period_or_more_is_a_usage_error_and_takes_nothing() {
    let dir = Dir::new();
    let lock = dir.path("tick.lock");
    let out = lockfile()
        .args([
            "run",
            "--once-per",
            "1m",
            "--jitter",
            "30s",
            s(&lock),
            "true",
        ])
        .bounded_output();
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("--jitter 30s") && said.contains("--once-per 1m"),
        "{said}"
    );
    assert!(!lock.exists());
    // Less is taken. A period of a day leaves a run that starts near its
    // half-period edge no chance to pass it in the 100 ms (which one near a
    // minute's would have: its tick is then refused as too late).
    let out = lockfile()
        .args([
            "run",
            "--once-per",
            "1d",
            "--jitter",
            "100ms",
            s(&lock),
            "true",
        ])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn sigterm_during_the_jitter_ends_the_run_before_it_takes_or_writes_anything() {
    let dir = Dir::new();
    let lock = dir.path("backup.lock");
    let metrics = dir.path("metrics");
    std::fs::create_dir(&metrics).unwrap();
    // Killed on drop, so that a failure leaves no run sleeping for an hour.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = lockfile()
        .args([
            "run",
            "--verbose",
            "--jitter",
            "1h",
            "--job",
            "backup",
            "--metrics-dir",
            s(&metrics),
        ])
        .args([s(&lock), "true"])
        .env("LOCKFILE_JITTER_SEED", "a")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut child = Killed(child);
    let seconds: f64 = line
        .trim()
        .strip_prefix("lockfile: --jitter 1h: waiting ")
        .and_then(|rest| rest.strip_suffix("s before taking the lock"))
        .unwrap_or_else(|| panic!("{line}"))
        .parse()
        .unwrap();
    assert!(seconds > 60.0, "this seed waits {seconds}s");
    signal(child.0.id(), "TERM");
    let status = wait_within_patience(&mut child.0).expect("the run ends on SIGTERM");
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status}");
    assert!(!lock.exists(), "the lock file was created");
    assert_eq!(
        std::fs::read_dir(&metrics).unwrap().count(),
        0,
        "metrics were written"
    );
}
