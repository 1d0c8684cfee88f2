//! Runs the torture harness in a short configuration: real processes, real
//! SIGKILLs, the `lockfile` command built for the occasion.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Builds the `lockfile` command into the target directory and profile of
/// this test's own build, where the harness looks for it, and returns its
/// path.
fn lockfile_bin() -> PathBuf {
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
struct Run {
    output: Output,
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Fails the test unless `ok`, with `why` and everything the harness
    /// printed: its whole summary, and on stderr what went wrong.
    fn check(&self, ok: bool, why: impl std::fmt::Display) {
        assert!(
            ok,
            "{why}\n--- the harness exited with {}; its summary (stdout):\n{}--- its stderr:\n{}",
            self.output.status,
            self.stdout(),
            String::from_utf8_lossy(&self.output.stderr)
        );
    }

    /// The number that follows `label` at the start of a summary line.
    fn figure(&self, label: &str) -> u64 {
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
    fn line(&self, label: &str) -> String {
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

fn torture(args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_lockfile-torture"))
        .args(args)
        .arg("--lockfile-bin")
        .arg(lockfile_bin())
        .output()
        .expect("run lockfile-torture");
    Run { output }
}

#[test]
fn a_short_torture_run_passes_and_does_what_it_says() {
    let (workers, rounds) = (6, 40);
    let run = torture(&[
        "--workers",
        &workers.to_string(),
        "--rounds",
        &rounds.to_string(),
        "--kill-every",
        "10",
    ]);
    run.check(
        run.output.status.code() == Some(0),
        "the run failed: an overlap, a held lock unlinked or its record overwritten, an acquisition failed because of inspect, or an unexpected error",
    );
    run.check(
        run.line("result").contains("PASS"),
        "the summary does not say PASS",
    );
    // At least: a driver whose wrapper was killed starts its next round
    // while the orphaned command may still complete the previous one.
    let sections = run.figure("critical sections completed");
    run.check(
        sections >= workers * rounds,
        format_args!(
            "{sections} critical sections completed, fewer than {workers} workers x {rounds} rounds"
        ),
    );
    for label in [
        "overlaps",
        "acquisitions failed because of inspect",
        "unexpected errors",
    ] {
        let n = run.figure(label);
        run.check(n == 0, format_args!("{label}: {n}"));
    }
    // The run did what it claims: it killed holders, and the probe and the
    // inspector ran.
    run.check(
        run.figure("holders killed (SIGKILL)") > 0,
        "nobody was killed",
    );
    let probe = run.line("acquisitions failed because of inspect");
    run.check(
        !probe.contains("probe: 0 "),
        format_args!("the probe never ran: {probe}"),
    );
    run.check(
        !probe.contains("inspector: 0 "),
        format_args!("the inspector never ran: {probe}"),
    );
}

#[test]
fn the_detector_sees_overlaps_when_exclusion_is_sabotaged() {
    // Without this, a harness whose detector never fires would pass forever.
    let run = torture(&[
        "--sabotage",
        "--workers",
        "4",
        "--run-workers",
        "0",
        "--rounds",
        "30",
        "--locks",
        "1",
        "--hold-us",
        "3000",
        "--kill-every",
        "0",
    ]);
    run.check(
        run.output.status.code() == Some(1),
        "a sabotaged run must fail",
    );
    run.check(run.figure("overlaps") > 0, "the detector saw nothing");
}
