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
        .args([
            "build",
            "--quiet",
            "-p",
            "lockfile-cli",
            "--bin",
            "lockfile",
        ])
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

fn torture(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_lockfile-torture"))
        .args(args)
        .arg("--lockfile-bin")
        .arg(lockfile_bin())
        .output()
        .expect("run lockfile-torture");
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The number that follows `label` at the start of a summary line.
fn figure(stdout: &str, label: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label:?} line in the summary:\n{stdout}"));
    line[label.len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figure in {line:?}"))
}

#[test]
fn a_short_torture_run_passes_and_does_what_it_says() {
    let (workers, rounds) = (6, 40);
    let out = torture(&[
        "--workers",
        &workers.to_string(),
        "--rounds",
        &rounds.to_string(),
        "--kill-every",
        "10",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "the run failed");
    assert!(stdout.contains("result") && stdout.contains("PASS"));
    // At least: a driver whose wrapper was killed starts its next round
    // while the orphaned command may still complete the previous one.
    assert!(figure(&stdout, "critical sections completed") >= workers * rounds);
    assert_eq!(figure(&stdout, "overlaps"), 0);
    assert_eq!(figure(&stdout, "acquisitions failed because of inspect"), 0);
    assert_eq!(figure(&stdout, "unexpected errors"), 0);
    // The run did what it claims: it killed holders, and the probe and the
    // inspector ran.
    assert!(
        figure(&stdout, "holders killed (SIGKILL)") > 0,
        "nobody was killed"
    );
    let probe = stdout
        .lines()
        .find(|l| l.starts_with("acquisitions failed because of inspect"))
        .unwrap();
    assert!(!probe.contains("probe: 0 "), "the probe never ran: {probe}");
    assert!(
        !probe.contains("inspector: 0 "),
        "the inspector never ran: {probe}"
    );
}

#[test]
fn the_detector_sees_overlaps_when_exclusion_is_sabotaged() {
    // Without this, a harness whose detector never fires would pass forever.
    let out = torture(&[
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a sabotaged run must fail");
    assert!(figure(&stdout, "overlaps") > 0, "the detector saw nothing");
}
