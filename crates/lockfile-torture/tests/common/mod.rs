//! Runs the torture harness: builds the `lockfile` command it drives, and
//! reads the summary it prints.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Builds the `lockfile` command into the target directory and profile of
/// this test's own build, where the harness looks for it, and returns its
/// path. With the lease engines this build of the harness has, so that every
/// test of one `cargo test` builds the same command.
pub fn lockfile_bin() -> PathBuf {
    let torture = Path::new(env!("CARGO_BIN_EXE_lockfile-torture"));
    let bin_dir = torture.parent().expect("the harness has a directory");
    let target_dir = bin_dir.parent().expect("a profile directory has a parent");
    let profile = match bin_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => panic!("unexpected target layout: {}", bin_dir.display()),
    };
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "lockfile-cli", "--bins"])
        .args(engine_features())
        .args(["--profile", profile])
        .arg("--manifest-path")
        .arg(&workspace)
        .env("CARGO_TARGET_DIR", target_dir)
        .status()
        .expect("run cargo to build the lockfile command");
    assert!(status.success(), "building the lockfile command failed");
    let bin = bin_dir.join("lockfile");
    assert!(
        bin.is_file(),
        "the lockfile command is not at {} after building it",
        bin.display()
    );
    bin
}

/// A finished harness run.
pub struct Run {
    pub output: Output,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Fails the test unless `ok`, with `why` and everything the harness
    /// printed: its whole summary, and on stderr what went wrong.
    pub fn check(&self, ok: bool, why: impl std::fmt::Display) {
        assert!(
            ok,
            "{why}\n--- the harness exited with {}; its summary (stdout):\n{}--- its stderr:\n{}",
            self.output.status,
            self.stdout(),
            String::from_utf8_lossy(&self.output.stderr)
        );
    }

    /// Fails the test unless the run passed: it exited 0 (else `failure`
    /// says what that means), its summary says PASS, and each figure named
    /// in `zero` is 0.
    pub fn check_passed(&self, failure: &str, zero: &[&str]) {
        self.check(self.output.status.code() == Some(0), failure);
        self.check(
            self.line("result").contains("PASS"),
            "the summary does not say PASS",
        );
        for label in zero {
            let n = self.figure(label);
            self.check(n == 0, format_args!("{label}: {n}"));
        }
    }

    /// The number that follows `label` at the start of a summary line.
    pub fn figure(&self, label: &str) -> u64 {
        let stdout = self.stdout();
        let number = stdout
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok());
        self.check(
            number.is_some(),
            format_args!("the summary has no {label:?} line with a number"),
        );
        number.unwrap_or_default()
    }

    /// The summary line that starts with `label`.
    pub fn line(&self, label: &str) -> String {
        let line = self
            .stdout()
            .lines()
            .find(|l| l.starts_with(label))
            .map(str::to_owned);
        self.check(
            line.is_some(),
            format_args!("the summary has no {label:?} line"),
        );
        line.unwrap_or_default()
    }
}

pub fn torture(args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_lockfile-torture"))
        .args(args)
        .arg("--lockfile-bin")
        .arg(lockfile_bin())
        .output()
        .expect("run lockfile-torture");
    Run { output }
}

/// `--features` for the lease engines of this build.
fn engine_features() -> Vec<String> {
    let features: Vec<&str> = [
        cfg!(feature = "etcd").then_some("etcd"),
        cfg!(feature = "postgres").then_some("postgres"),
        cfg!(feature = "redis").then_some("redis"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if features.is_empty() {
        Vec::new()
    } else {
        vec!["--features".to_owned(), features.join(",")]
    }
}

/// A short lease run against the server `engine` names (`--postgres URL`
/// or `--etcd ENDPOINTS`), checked: it passed, it killed holders and timed
/// takeovers, and every section logged its fencing token.
pub fn lease_torture_passes(engine: &[&str]) {
    let mut args = engine.to_vec();
    args.extend([
        "--ttl",
        "2",
        "--workers",
        "6",
        "--locks",
        "3",
        "--rounds",
        "100000",
        "--seconds",
        "12",
        "--hold-us",
        "200000",
        "--kill-every",
        "500",
    ]);
    let run = torture(&args);
    run.check_passed(
        "the lease run failed: an overlap, a fencing token out of order, or an unexpected error",
        &[
            "overlaps",
            "fencing tokens out of order",
            "unexpected errors",
        ],
    );
    let sections = run.figure("critical sections completed");
    run.check(sections > 0, "no critical section completed");
    // Every completed section logged its token first; killed ones may have.
    let fencing = run.line("fencing tokens out of order");
    let logged: u64 = fencing
        .split("(of ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_default();
    run.check(
        logged >= sections,
        format_args!("{logged} tokens logged for {sections} sections: {fencing}"),
    );
    run.check(
        run.figure("holders killed (SIGKILL)") > 0,
        "nobody was killed",
    );
    // Some kill left a lease standing until its TTL ran out, and the next
    // holder on its name was timed.
    let expired: Vec<String> = [
        "  after a library holder's death",
        "  after a `lockfile run` wrapper's death",
    ]
    .into_iter()
    .map(|label| run.line(label))
    .collect();
    run.check(
        expired.iter().any(|l| !l.ends_with("n/a")),
        format_args!("no takeover after a lease expired was timed: {expired:?}"),
    );
}

/// Lease runs whose exclusion or fencing is broken on purpose fail, and say
/// so: proof that the detector and the fencing judgment can fire.
pub fn lease_sabotage_is_caught(engine: &[&str]) {
    for (sabotage, label) in [
        ("--sabotage", "overlaps"),
        ("--sabotage-fencing", "fencing tokens out of order"),
    ] {
        let mut args = engine.to_vec();
        args.extend([
            sabotage,
            "--workers",
            "4",
            "--run-workers",
            "0",
            "--locks",
            "1",
            "--rounds",
            "30",
            "--hold-us",
            "3000",
            "--kill-every",
            "0",
        ]);
        let run = torture(&args);
        run.check(
            run.output.status.code() == Some(1),
            format_args!("a run with {sabotage} must fail"),
        );
        run.check(
            run.figure(label) > 0,
            format_args!("{sabotage}: no {label} reported"),
        );
    }
}
