//! Telling the monitoring system: run metrics for node_exporter's textfile
//! collector, `inspect --format prometheus`, healthchecks pings and quiet
//! skips. Checked against the real tools (promtool, node_exporter) and a
//! recording HTTP server on loopback.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::prometheus::{NodeExporter, file_samples, promtool_accepts, samples, value};
use common::{
    BoundedOutput, Dir, code, inspect_json, lockfile, run_output, s, start, stderr, wait_until,
};

// ---------------------------------------------------------------------------
// Helpers

/// A COMMAND that prints `ready`, then runs until `stop` exists (a minute
/// at most).
fn until_exists(stop: &Path) -> String {
    format!(
        "echo ready; for i in $(seq 1200); do [ -e '{}' ] && exit 0; sleep 0.05; done; exit 1",
        stop.display()
    )
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `lockfile ARGS` under umask 077: what we write must be 0644 regardless.
fn under_umask_077(args: &[&str]) -> Output {
    let mut cmd = lockfile();
    cmd.args(args);
    // SAFETY: umask(2) is async-signal-safe and cannot fail.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o077);
            Ok(())
        });
    }
    cmd.bounded_output()
}

/// The run metrics of `lock` under `job`, as a map from a metric's name
/// (with `/outcome` for the outcome counter) to its value.
fn run_figures(path: &Path, job: &str, lock: &Path) -> BTreeMap<String, f64> {
    file_samples(path)
        .into_iter()
        .filter(|sample| {
            sample.labels.get("lockfile_job").map(String::as_str) == Some(job)
                && sample.labels.get("lock").map(String::as_str) == Some(s(lock))
        })
        .map(|sample| {
            // Counters by outcome, and skips by reason, each under its own key.
            let key = match sample.labels.get("outcome").or(sample.labels.get("reason")) {
                Some(o) => format!("{}/{o}", sample.name),
                None => sample.name.clone(),
            };
            (key, sample.value)
        })
        .collect()
}

fn figure(figures: &BTreeMap<String, f64>, key: &str) -> f64 {
    *figures
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {figures:?}"))
}

/// Every `*.prom` file in `dir`, by name.
fn prom_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".prom"))
        .collect();
    names.sort();
    names
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

// ---------------------------------------------------------------------------
// Run metrics

#[test]
fn a_run_writes_its_metrics_for_the_textfile_collector() {
    let dir = Dir::new();
    let metrics = dir.path("metrics");
    std::fs::create_dir(&metrics).unwrap();
    let lock = dir.path("job.lock");
    let out = under_umask_077(&[
        "run",
        "--metrics-dir",
        s(&metrics),
        s(&lock),
        "-c",
        "echo done",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    // The default job of a -c run is `sh`.
    assert_eq!(prom_files(&metrics), ["lockfile-sh.prom"]);
    let file = metrics.join("lockfile-sh.prom");
    assert_eq!(mode(&file), 0o644, "readable by node_exporter");
    promtool_accepts(&file);
    let text = std::fs::read_to_string(&file).unwrap();
    for name in [
        "lockfile_run_running",
        "lockfile_run_last_start_timestamp_seconds",
        "lockfile_run_last_success_timestamp_seconds",
        "lockfile_run_last_exit_code",
        "lockfile_run_last_duration_seconds",
        "lockfile_run_consecutive_failures",
        "lockfile_run_skips_total",
        "lockfile_run_last_skip_timestamp_seconds",
        "lockfile_run_outcomes_total",
    ] {
        assert!(text.contains(&format!("# HELP {name} ")), "{name}: {text}");
        assert!(text.contains(&format!("# TYPE {name} ")), "{name}: {text}");
    }
    assert!(text.contains("# TYPE lockfile_run_skips_total counter"));
    assert!(text.contains("# TYPE lockfile_run_outcomes_total counter"));
    assert!(text.contains("# TYPE lockfile_run_running gauge"));

    let f = run_figures(&file, "sh", &lock);
    assert_eq!(figure(&f, "lockfile_run_running"), 0.0);
    assert_eq!(figure(&f, "lockfile_run_last_exit_code"), 0.0);
    assert_eq!(figure(&f, "lockfile_run_consecutive_failures"), 0.0);
    assert_eq!(figure(&f, "lockfile_run_skips_total/held"), 0.0);
    assert_eq!(figure(&f, "lockfile_run_last_skip_timestamp_seconds"), 0.0);
    assert_eq!(figure(&f, "lockfile_run_outcomes_total/succeeded"), 1.0);
    for outcome in ["failed", "timed_out", "hung", "evicted", "lease_lost"] {
        let key = format!("lockfile_run_outcomes_total/{outcome}");
        assert_eq!(figure(&f, &key), 0.0, "{outcome} starts at 0");
    }
    let started = figure(&f, "lockfile_run_last_start_timestamp_seconds");
    let succeeded = figure(&f, "lockfile_run_last_success_timestamp_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(started > 0.0 && started <= succeeded && succeeded <= now + 1.0);
    assert!(figure(&f, "lockfile_run_last_duration_seconds") >= 0.0);
    // Only the side lock is left beside the file: no temporary file.
    let mut names: Vec<String> = std::fs::read_dir(&metrics)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [".lockfile-sh.prom.lck", "lockfile-sh.prom"]);
}

#[test]
fn the_job_name_is_sanitised_in_the_file_name_and_kept_whole_in_the_label() {
    let dir = Dir::new();
    let lock = dir.path("odd \"lock\" \\ name.lock");
    let job = "nightly \"db\" backup\\x\nsecond line/é";
    let out = run_output(&[
        "run",
        "--metrics-dir",
        s(dir.tmp.path()),
        "--job",
        job,
        s(&lock),
        "true",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let name = "lockfile-nightly__db__backup_x_second_line__.prom";
    assert_eq!(prom_files(dir.tmp.path()), [name]);
    let file = dir.path(name);
    promtool_accepts(&file);
    let f = run_figures(&file, job, &lock);
    assert_eq!(figure(&f, "lockfile_run_outcomes_total/succeeded"), 1.0);
    // The label is `lockfile_job`, never `job`, which Prometheus reserves.
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("{job="), "{text}");
}

#[test]
fn the_metrics_dir_comes_from_the_environment_too() {
    let dir = Dir::new();
    let lock = dir.path("env.lock");
    let out = lockfile()
        .env("LOCKFILE_METRICS_DIR", dir.tmp.path())
        .args(["run", s(&lock), "true"])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(prom_files(dir.tmp.path()), ["lockfile-true.prom"]);
}

#[test]
fn counters_and_failures_in_a_row_survive_from_run_to_run() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let file = dir.path("lockfile-job.prom");
    let run = |script: &str| {
        let out = run_output(&[
            "run",
            "--metrics-dir",
            s(dir.tmp.path()),
            "--job",
            "job",
            s(&lock),
            "sh",
            "-c",
            script,
        ]);
        promtool_accepts(&file);
        (code(&out), run_figures(&file, "job", &lock))
    };
    let (rc, f) = run("true");
    assert_eq!(rc, 0);
    let first_success = figure(&f, "lockfile_run_last_success_timestamp_seconds");

    let (rc, f) = run("exit 3");
    assert_eq!(rc, 3);
    assert_eq!(figure(&f, "lockfile_run_last_exit_code"), 3.0);
    assert_eq!(figure(&f, "lockfile_run_consecutive_failures"), 1.0);

    // A signal: 128 + N, as the wrapper's own exit status.
    let (rc, f) = run("kill -TERM $$");
    assert_eq!(rc, 128 + 15);
    assert_eq!(figure(&f, "lockfile_run_last_exit_code"), 143.0);
    assert_eq!(figure(&f, "lockfile_run_consecutive_failures"), 2.0);
    assert_eq!(figure(&f, "lockfile_run_outcomes_total/failed"), 2.0);
    assert_eq!(figure(&f, "lockfile_run_outcomes_total/succeeded"), 1.0);
    assert_eq!(
        figure(&f, "lockfile_run_last_success_timestamp_seconds"),
        first_success,
        "a failure keeps the last success"
    );

    let (rc, f) = run("true");
    assert_eq!(rc, 0);
    assert_eq!(figure(&f, "lockfile_run_consecutive_failures"), 0.0);
    assert_eq!(figure(&f, "lockfile_run_outcomes_total/succeeded"), 2.0);
    assert_eq!(figure(&f, "lockfile_run_outcomes_total/failed"), 2.0);
    assert!(figure(&f, "lockfile_run_last_success_timestamp_seconds") >= first_success);
}

#[test]
fn a_skip_counts_in_the_same_file_and_keeps_the_holders_figures() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let stop = dir.path("stop");
    let file = dir.path("lockfile-job.prom");
    let metrics = ["--metrics-dir", s(dir.tmp.path()), "--job", "job"];
    let mut holder = start(&metrics, &lock, &until_exists(&stop));
    let held = run_figures(&file, "job", &lock);
    assert_eq!(figure(&held, "lockfile_run_running"), 1.0);

    for _ in 0..2 {
        let mut args = vec!["run", "-n"];
        args.extend(metrics);
        args.extend([s(&lock), "true"]);
        assert_eq!(code(&run_output(&args)), 75);
    }
    promtool_accepts(&file);
    let skipped = run_figures(&file, "job", &lock);
    assert_eq!(figure(&skipped, "lockfile_run_skips_total/held"), 2.0);
    assert!(figure(&skipped, "lockfile_run_last_skip_timestamp_seconds") > 0.0);
    for key in [
        "lockfile_run_running",
        "lockfile_run_last_start_timestamp_seconds",
        "lockfile_run_outcomes_total/succeeded",
    ] {
        assert_eq!(figure(&skipped, key), figure(&held, key), "{key}");
    }

    std::fs::write(&stop, "").unwrap();
    assert_eq!(holder.wait().0, 0);
    let after = run_figures(&file, "job", &lock);
    assert_eq!(figure(&after, "lockfile_run_running"), 0.0);
    assert_eq!(figure(&after, "lockfile_run_skips_total/held"), 2.0, "kept");
    assert_eq!(figure(&after, "lockfile_run_outcomes_total/succeeded"), 1.0);
}

#[test]
fn locks_under_one_job_share_the_file_and_each_writer_replaces_only_its_own() {
    let dir = Dir::new();
    let (a, b) = (dir.path("a.lock"), dir.path("b.lock"));
    let file = dir.path("lockfile-sh.prom");
    let run = |lock: &Path, script: &str| {
        run_output(&[
            "run",
            "--metrics-dir",
            s(dir.tmp.path()),
            s(lock),
            "-c",
            script,
        ])
    };
    assert_eq!(code(&run(&a, "true")), 0);
    assert_eq!(code(&run(&b, "exit 4")), 4);
    assert_eq!(code(&run(&a, "true")), 0);
    promtool_accepts(&file);
    let fa = run_figures(&file, "sh", &a);
    let fb = run_figures(&file, "sh", &b);
    assert_eq!(figure(&fa, "lockfile_run_outcomes_total/succeeded"), 2.0);
    assert_eq!(figure(&fa, "lockfile_run_last_exit_code"), 0.0);
    assert_eq!(figure(&fb, "lockfile_run_outcomes_total/failed"), 1.0);
    assert_eq!(figure(&fb, "lockfile_run_last_exit_code"), 4.0);
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.matches("# TYPE lockfile_run_running gauge").count(), 1);
}

/// A holder and many skippers write at once, while a reader keeps reading:
/// the file is never missing or torn, and no update is lost.
#[test]
fn concurrent_writers_never_tear_lose_or_remove_the_file() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let stop = dir.path("stop");
    let file = dir.path("lockfile-job.prom");
    let metrics_dir = dir.tmp.path().to_owned();
    let mut holder = start(
        &["--metrics-dir", s(&metrics_dir), "--job", "job"],
        &lock,
        &until_exists(&stop),
    );

    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (file, done) = (file.clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !done.load(Ordering::SeqCst) {
                let text = std::fs::read_to_string(&file).expect("the file is never missing");
                assert!(text.ends_with('\n'), "torn: {text:?}");
                assert!(
                    text.contains("lockfile_run_outcomes_total{")
                        && text.contains("lockfile_run_running{"),
                    "torn: {text:?}"
                );
                samples(&text);
                reads += 1;
            }
            reads
        })
    };

    const SKIPPERS: usize = 6;
    const EACH: usize = 5;
    let skippers: Vec<_> = (0..SKIPPERS)
        .map(|i| {
            let (lock, metrics_dir, stop) = (lock.clone(), metrics_dir.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut codes = Vec::new();
                for j in 0..EACH {
                    // Midway, the holder ends and writes its own update
                    // among the skippers'; later runs may take the lock.
                    if i == 0 && j == EACH / 2 {
                        std::fs::write(&stop, "").unwrap();
                    }
                    let out = run_output(&[
                        "run",
                        "-n",
                        "--metrics-dir",
                        s(&metrics_dir),
                        "--job",
                        "job",
                        s(&lock),
                        "true",
                    ]);
                    assert_eq!(
                        stderr(&out).matches("metrics").count(),
                        0,
                        "{}",
                        stderr(&out)
                    );
                    codes.push(code(&out));
                }
                codes
            })
        })
        .collect();
    let codes: Vec<i32> = skippers
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(holder.wait().0, 0);
    done.store(true, Ordering::SeqCst);
    let reads = reader.join().unwrap();
    assert!(reads > 0);

    let skips = codes.iter().filter(|&&c| c == 75).count() as f64;
    let ran = codes.iter().filter(|&&c| c == 0).count() as f64;
    assert_eq!(skips + ran, (SKIPPERS * EACH) as f64, "{codes:?}");
    promtool_accepts(&file);
    let f = run_figures(&file, "job", &lock);
    assert_eq!(
        figure(&f, "lockfile_run_skips_total/held"),
        skips,
        "no skip lost"
    );
    assert_eq!(
        figure(&f, "lockfile_run_outcomes_total/succeeded"),
        1.0 + ran,
        "no run lost"
    );
    assert_eq!(figure(&f, "lockfile_run_running"), 0.0);
}

#[test]
fn an_unwritable_metrics_dir_is_reported_once_and_changes_no_exit_status() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let not_a_dir = dir.path("file");
    std::fs::write(&not_a_dir, "").unwrap();
    let bad = not_a_dir.join("metrics");
    for (script, status) in [("echo out", 0), ("exit 5", 5)] {
        let out = run_output(&["run", "--metrics-dir", s(&bad), s(&lock), "-c", script]);
        assert_eq!(code(&out), status);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "reported once: {err}");
        assert!(err.contains(s(&bad)), "names the path: {err}");
    }
    let mut holder = start(&[], &lock, LOOP_READY);
    let out = run_output(&["run", "-n", "--metrics-dir", s(&bad), s(&lock), "true"]);
    assert_eq!(code(&out), 75);
    assert_eq!(stderr(&out).lines().count(), 2, "{}", stderr(&out));
    holder.signal("TERM");
    holder.wait();
}

/// A COMMAND that prints `ready` and runs a minute at most.
const LOOP_READY: &str = "echo ready; for i in $(seq 1200); do sleep 0.05; done";

#[test]
fn a_sigkilled_wrapper_leaves_running_behind_which_inspect_and_the_next_run_correct() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let file = dir.path("lockfile-job.prom");
    let metrics = ["--metrics-dir", s(dir.tmp.path()), "--job", "job"];
    let holder = start(&metrics, &lock, LOOP_READY);
    holder.signal("KILL");
    wait_until("the wrapper to die", || {
        !Path::new(&format!("/proc/{}/status", holder.pid())).exists()
            || std::fs::read_to_string(format!("/proc/{}/status", holder.pid()))
                .is_ok_and(|s| s.contains("State:\tZ"))
    });
    let f = run_figures(&file, "job", &lock);
    assert_eq!(
        figure(&f, "lockfile_run_running"),
        1.0,
        "nothing can prevent it"
    );

    // The truth: held by COMMAND, whose recorded owner is dead.
    let out = run_output(&["inspect", "--format", "prometheus", s(&lock)]);
    let lock_samples = samples(&stdout(&out));
    let l = s(&lock);
    assert_eq!(
        value(
            &lock_samples,
            "lockfile_lock_state",
            &[("lock", l), ("state", "held")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &lock_samples,
            "lockfile_lock_finding",
            &[("lock", l), ("kind", "owner_dead"), ("severity", "warning")]
        ),
        Some(1.0),
        "{}",
        stdout(&out)
    );

    drop(holder);
    wait_until("the lock to come free", || {
        code(&run_output(&["run", "-n", s(&lock), "true"])) == 0
    });
    let mut args = vec!["run"];
    args.extend(metrics);
    args.extend([s(&lock), "true"]);
    assert_eq!(code(&run_output(&args)), 0);
    let f = run_figures(&file, "job", &lock);
    assert_eq!(figure(&f, "lockfile_run_running"), 0.0, "corrected");
}

// ---------------------------------------------------------------------------
// inspect --format prometheus

#[test]
fn inspect_exports_lock_files_as_samples() {
    let dir = Dir::new();
    let locks = dir.path("locks");
    std::fs::create_dir(&locks).unwrap();
    let (held, free) = (locks.join("held.lock"), locks.join("free.lock"));
    assert_eq!(code(&run_output(&["run", s(&free), "true"])), 0);
    let holder = start(&[], &held, LOOP_READY);
    let not_a_dir = dir.path("file");
    std::fs::write(&not_a_dir, "").unwrap();
    let broken = not_a_dir.join("x.lock");

    let output = dir.path("export/locks.prom");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a = vec!["inspect", "--format", "prometheus", "--max-age", "0"];
        a.extend_from_slice(extra);
        a.extend([s(&locks), s(&broken), s(&held)]);
        a.into_iter().map(str::to_owned).collect()
    };
    let out = lockfile().args(args(&[])).bounded_output();
    // Aged (a warning) and a path that could not be inspected: 3.
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let text = stdout(&out);
    let file = dir.path("stdout.prom");
    std::fs::write(&file, &text).unwrap();
    promtool_accepts(&file);
    let all = samples(&text);
    let (h, f, b) = (s(&held), s(&free), s(&broken));
    for (lock, state) in [(h, "held"), (f, "free")] {
        for other in ["absent", "free", "held", "stale", "debris", "undecided"] {
            let want = if other == state { 1.0 } else { 0.0 };
            assert_eq!(
                value(
                    &all,
                    "lockfile_lock_state",
                    &[("lock", lock), ("state", other)]
                ),
                Some(want),
                "{lock} {other}: {text}"
            );
        }
        assert_eq!(
            value(&all, "lockfile_lock_inspect_error", &[("lock", lock)]),
            Some(0.0)
        );
    }
    assert_eq!(
        value(&all, "lockfile_lock_inspect_error", &[("lock", b)]),
        Some(1.0)
    );
    assert_eq!(
        value(&all, "lockfile_lock_state", &[("lock", b)]),
        None,
        "no state for a path that could not be inspected"
    );
    // `held` was given twice (in its directory and by name): once here.
    assert!(
        value(
            &all,
            "lockfile_lock_acquired_timestamp_seconds",
            &[("lock", h)]
        )
        .unwrap()
            > 0.0
    );
    assert!(
        value(
            &all,
            "lockfile_lock_heartbeat_timestamp_seconds",
            &[("lock", h)]
        )
        .unwrap()
            > 0.0
    );
    assert_eq!(
        value(
            &all,
            "lockfile_lock_acquired_timestamp_seconds",
            &[("lock", f)]
        ),
        None,
        "released"
    );
    assert_eq!(
        value(
            &all,
            "lockfile_lock_last_success_timestamp_seconds",
            &[("lock", h)]
        ),
        Some(0.0),
        "never"
    );
    assert!(
        value(
            &all,
            "lockfile_lock_last_success_timestamp_seconds",
            &[("lock", f)]
        )
        .unwrap()
            > 0.0
    );
    let pid = holder.pid().to_string();
    assert_eq!(
        value(&all, "lockfile_lock_holder", &[("lock", h), ("pid", &pid)]),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            &all,
            "lockfile_lock_finding",
            &[("lock", h), ("kind", "aged"), ("severity", "warning")]
        ),
        Some(1.0)
    );
    assert_eq!(value(&all, "lockfile_lock_finding", &[("lock", f)]), None);

    // --output: the same, atomically, mode 0644, whatever the exit status.
    std::fs::create_dir(dir.path("export")).unwrap();
    let with_output = args(&["--output", s(&output)]);
    let out = under_umask_077(&with_output.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert_eq!(stdout(&out), "", "the result goes to the file only");
    assert_eq!(mode(&output), 0o644);
    promtool_accepts(&output);
    let names: Vec<String> = std::fs::read_dir(dir.path("export"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["locks.prom"], "no temporary file left");
    assert_eq!(
        value(
            &file_samples(&output),
            "lockfile_lock_inspect_error",
            &[("lock", b)]
        ),
        Some(1.0)
    );

    // An --output that cannot be written: said, and the status says so.
    let out = run_output(&[
        "inspect",
        "--format",
        "prometheus",
        "--output",
        s(&broken),
        s(&free),
    ]);
    assert_eq!(code(&out), 3);
    assert!(stderr(&out).contains(s(&broken)), "{}", stderr(&out));
}

#[test]
fn json_is_short_for_format_json_and_the_two_cannot_be_mixed() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    assert_eq!(code(&run_output(&["run", s(&lock), "true"])), 0);
    let long = run_output(&["inspect", "--format", "json", s(&lock)]);
    let (status, short) = inspect_json(&lock, &[]);
    assert_eq!(code(&long), status);
    let long: serde_json::Value = serde_json::from_slice(&long.stdout).unwrap();
    assert_eq!(long, short);
    let table = run_output(&["inspect", "--format", "table", s(&lock)]);
    assert!(stdout(&table).starts_with("PATH"), "{}", stdout(&table));
    let both = run_output(&["inspect", "--json", "--format", "table", s(&lock)]);
    assert_eq!(code(&both), 64, "{}", stderr(&both));

    // --output works for every format.
    let output = dir.path("out.json");
    let out = run_output(&["inspect", "--json", "--output", s(&output), s(&lock)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    assert_eq!(written, short);
}

// ---------------------------------------------------------------------------
// node_exporter

#[test]
fn node_exporter_serves_our_files_without_a_scrape_error() {
    let dir = Dir::new();
    let textfiles = dir.path("textfiles");
    std::fs::create_dir(&textfiles).unwrap();
    let (a, b) = (dir.path("a.lock"), dir.path("b.lock"));
    let run = |lock: &Path, job: &str, script: &str| {
        run_output(&[
            "run",
            "--metrics-dir",
            s(&textfiles),
            "--job",
            job,
            s(lock),
            "sh",
            "-c",
            script,
        ])
    };
    assert_eq!(code(&run(&a, "backup \"nightly\"", "true")), 0);
    assert_eq!(code(&run(&b, "backup \"nightly\"", "exit 2")), 2);
    assert_eq!(code(&run(&b, "report", "true")), 0);
    let holder = start(&[], &a, LOOP_READY);
    let out = run_output(&[
        "inspect",
        "--format",
        "prometheus",
        "--output",
        s(&textfiles.join("locks.prom")),
        s(&a),
        s(&b),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for name in prom_files(&textfiles) {
        promtool_accepts(&textfiles.join(name));
    }

    let exporter = NodeExporter::start(&textfiles);
    let scraped = samples(&exporter.scrape());
    assert_eq!(
        value(&scraped, "node_textfile_scrape_error", &[]),
        Some(0.0),
        "node_exporter refused a file: {scraped:?}"
    );
    let (la, lb) = (s(&a), s(&b));
    let job = "backup \"nightly\"";
    assert_eq!(
        value(
            &scraped,
            "lockfile_run_outcomes_total",
            &[
                ("lockfile_job", job),
                ("lock", la),
                ("outcome", "succeeded")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &scraped,
            "lockfile_run_last_exit_code",
            &[("lockfile_job", job), ("lock", lb)]
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &scraped,
            "lockfile_run_outcomes_total",
            &[
                ("lockfile_job", "report"),
                ("lock", lb),
                ("outcome", "succeeded")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &scraped,
            "lockfile_lock_state",
            &[("lock", la), ("state", "held")]
        ),
        Some(1.0)
    );
    let pid = holder.pid().to_string();
    assert_eq!(
        value(
            &scraped,
            "lockfile_lock_holder",
            &[("lock", la), ("pid", &pid)]
        ),
        Some(1.0)
    );
    for file in [
        "lockfile-backup__nightly_.prom",
        "lockfile-report.prom",
        "locks.prom",
    ] {
        let path = textfiles.join(file);
        assert!(
            value(
                &scraped,
                "node_textfile_mtime_seconds",
                &[("file", s(&path))]
            )
            .is_some()
                || value(&scraped, "node_textfile_mtime_seconds", &[("file", file)]).is_some(),
            "{file} was read"
        );
    }
}

// ---------------------------------------------------------------------------
// Pings

/// A build without the `ping` feature refuses `--ping` as a usage error.
#[cfg(not(feature = "ping"))]
#[test]
fn ping_is_a_usage_error_in_a_build_without_the_feature() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let out = run_output(&["run", "--ping", "http://127.0.0.1:9/x", s(&lock), "true"]);
    assert_eq!(code(&out), 64);
    assert!(stderr(&out).contains("`ping` feature"), "{}", stderr(&out));
}

#[cfg(feature = "ping")]
mod pings {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::Instant;

    use super::*;
    use common::ping::{Answer, Behaviour, Request, Server};

    /// `lockfile ARGS` with no proxy from the environment: pings go to loopback.
    fn no_proxy(args: &[&str]) -> Command {
        let mut cmd = lockfile();
        for var in [
            "http_proxy",
            "https_proxy",
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "all_proxy",
        ] {
            cmd.env_remove(var);
        }
        cmd.args(args);
        cmd
    }

    /// A COMMAND that prints its run's token, which the pings' `rid` must
    /// carry.
    const ECHO_TOKEN: &str = "echo \"$LOCKFILE_TOKEN\"";

    /// `lockfile run --ping` to `server` of `sh -c SCRIPT` under `lock`.
    fn run_pinging(server: &Server, lock: &Path, script: &str) -> Output {
        no_proxy(&["run", "--ping", &server.url(), s(lock), "sh", "-c", script]).bounded_output()
    }

    fn targets(requests: &[Request]) -> Vec<String> {
        requests.iter().map(|r| r.target.clone()).collect()
    }

    #[test]
    fn pings_follow_the_healthchecks_protocol_with_the_runs_token() {
        let server = Server::start(Answer::Ok);
        let dir = Dir::new();
        let lock = dir.path("job.lock");
        let out = run_pinging(&server, &lock, ECHO_TOKEN);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(stderr(&out), "");
        let token = stdout(&out).trim().to_owned();
        assert!(!token.is_empty());
        let requests = server.wait_for(2);
        assert_eq!(
            targets(&requests),
            [
                format!("/ping/abc/start?rid={token}"),
                format!("/ping/abc?rid={token}")
            ]
        );
        assert!(requests.iter().all(|r| r.method == "POST"));

        let out = run_pinging(&server, &lock, "echo \"$LOCKFILE_TOKEN\"; exit 3");
        assert_eq!(code(&out), 3);
        let token = stdout(&out).trim().to_owned();
        let requests = server.wait_for(4);
        assert_eq!(
            targets(&requests[2..]),
            [
                format!("/ping/abc/start?rid={token}"),
                format!("/ping/abc/3?rid={token}")
            ]
        );
    }

    /// A run whose tick already ran is a skip: a `/log` ping naming the
    /// tick, and the skip counter's `already_ran` reason.
    #[test]
    fn a_tick_that_already_ran_pings_log_and_counts_as_already_ran() {
        let server = Server::start(Answer::Ok);
        let dir = Dir::new();
        let lock = dir.path("tick.lock");
        let metrics = dir.path("metrics");
        std::fs::create_dir(&metrics).unwrap();
        let url = server.url();
        let run = || {
            no_proxy(&[
                "run",
                "--once-per",
                "1h",
                "--ping",
                &url,
                "--metrics-dir",
                s(&metrics),
                "--job",
                "hourly",
                s(&lock),
                "true",
            ])
            .bounded_output()
        };
        assert_eq!(code(&run()), 0);
        let out = run();
        assert_eq!(code(&out), 75, "{}", stderr(&out));
        let requests = server.wait_for(3);
        assert_eq!(
            requests[2].target,
            "/ping/abc/log",
            "{:?}",
            targets(&requests)
        );
        assert!(
            requests[2].body.contains("already ran"),
            "{:?}",
            requests[2].body
        );
        let figures = file_samples(&metrics.join("lockfile-hourly.prom"));
        let skips = |reason| {
            value(
                &figures,
                "lockfile_run_skips_total",
                &[("lock", s(&lock)), ("reason", reason)],
            )
        };
        assert_eq!(
            (skips("already_ran"), skips("held")),
            (Some(1.0), Some(0.0))
        );
    }

    #[test]
    fn a_skip_pings_log_naming_the_holder_and_fail_behind_an_unhealthy_one() {
        let server = Server::start(Answer::Ok);
        let dir = Dir::new();
        let lock = dir.path("job.lock");
        let url = server.url();
        let holder = start(&["--job", "nightly"], &lock, LOOP_READY);

        let out = no_proxy(&["run", "-n", "--ping", &url, s(&lock), "true"]).bounded_output();
        assert_eq!(code(&out), 75);
        let requests = server.wait_for(1);
        assert_eq!(
            targets(&requests),
            ["/ping/abc/log"],
            "a skip is no run: no rid"
        );
        assert!(
            requests[0].body.contains(&format!("pid {}", holder.pid())),
            "{:?}",
            requests[0].body
        );
        assert!(requests[0].body.contains("nightly"));

        // The wrapper dies; COMMAND goes on holding the lock, unsupervised.
        holder.signal("KILL");
        wait_until("inspect to see the dead owner", || {
            let (_, v) = inspect_json(&lock, &[]);
            v[0]["findings"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f["kind"] == "owner_dead"))
        });
        let out = no_proxy(&["run", "-n", "--ping", &url, s(&lock), "true"]).bounded_output();
        assert_eq!(code(&out), 75);
        let requests = server.wait_for(2);
        assert_eq!(requests[1].target, "/ping/abc/fail", "the check goes down");
        assert!(
            requests[1].body.contains("unhealthy"),
            "{:?}",
            requests[1].body
        );
        assert!(requests[1].body.contains("dead"), "{:?}", requests[1].body);
    }

    #[test]
    fn a_server_that_never_answers_delays_the_run_a_bounded_time_and_changes_nothing() {
        let server = Server::start(Answer::Never);
        let dir = Dir::new();
        let lock = dir.path("job.lock");
        let url = server.url();
        for (script, status) in [("echo ran", 0), ("echo ran; exit 6", 6)] {
            let started = Instant::now();
            let out = no_proxy(&["run", "--ping", &url, s(&lock), "-c", script]).bounded_output();
            let took = started.elapsed();
            assert_eq!(code(&out), status, "{}", stderr(&out));
            assert_eq!(stdout(&out), "ran\n");
            let err = stderr(&out);
            assert_eq!(err.lines().count(), 1, "one line: {err}");
            assert!(err.contains("ping"), "{err}");
            // For the record, not as a threshold: the start ping holds COMMAND
            // back 3 s at most, the final one the exit 10 s at most.
            eprintln!("a run against a server that never answers took {took:?}");
        }
    }

    #[test]
    fn a_500_is_retried_and_changes_nothing() {
        let server = Server::start(Answer::Error500);
        let dir = Dir::new();
        let lock = dir.path("job.lock");
        let out = run_pinging(&server, &lock, ECHO_TOKEN);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let token = stdout(&out).trim().to_owned();
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "reported once: {err}");
        assert!(err.contains("500"), "{err}");
        // Three attempts of each ping; the start's first one carried a
        // body, which went once more bare.
        let requests = server.wait_for(7);
        let start = format!("/ping/abc/start?rid={token}");
        let success = format!("/ping/abc?rid={token}");
        assert_eq!(
            targets(&requests).iter().filter(|t| **t == start).count(),
            4
        );
        assert_eq!(
            targets(&requests).iter().filter(|t| **t == success).count(),
            3
        );
    }

    #[test]
    fn the_final_ping_carries_the_tail_of_the_output_which_still_reaches_the_wrappers_own() {
        let server = Server::start(Answer::Ok);
        let dir = Dir::new();
        let lock = dir.path("job.lock");
        let url = server.url();
        let script = "echo first line; echo to stderr >&2; printf 'the very end'; exit 2";
        let whole = "first line\nto stderr\nthe very end";

        // stdout and stderr are one file, as in cron's mail: one pipe, in order.
        let both = tempfile::tempfile().unwrap();
        let args = [
            "run",
            "--ping",
            &url,
            "--ping-log-bytes",
            "20",
            s(&lock),
            "-c",
            script,
        ];
        let status = no_proxy(&args)
            .stdin(Stdio::null())
            .stdout(both.try_clone().unwrap())
            .stderr(both.try_clone().unwrap())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(2));
        let mut seen = String::new();
        let mut both = both;
        use std::io::Seek;
        both.rewind().unwrap();
        both.read_to_string(&mut seen).unwrap();
        assert_eq!(seen, whole);
        let requests = server.wait_for(2);
        assert!(
            requests[1].target.starts_with("/ping/abc/2?rid="),
            "{requests:?}"
        );
        // The tail first, our line last.
        let (tail, ours) = requests[1].body.split_at(20);
        assert_eq!(tail, &whole[whole.len() - 20..]);
        assert!(
            ours.ends_with("(outcome failed, exit status 2)\n"),
            "{ours:?}"
        );
        // The start names host, pid and job, never the command line.
        let start = &requests[0].body;
        assert!(start.contains("job \"sh\""), "{start:?}");
        assert!(start.contains("pid "), "{start:?}");
        assert!(!start.contains("first line"), "{start:?}");

        // Apart, each stream reaches its own file.
        let args = [
            "run",
            "--ping",
            &url,
            "--ping-log-bytes",
            "1000",
            s(&lock),
            "-c",
            script,
        ];
        let out = no_proxy(&args).bounded_output();
        assert_eq!(code(&out), 2);
        assert_eq!(stdout(&out), "first line\nthe very end");
        assert_eq!(stderr(&out), "to stderr\n");
        let requests = server.wait_for(4);
        for part in ["first line\n", "to stderr\n", "the very end"] {
            assert!(requests[3].body.contains(part), "{:?}", requests[3].body);
        }
    }

    #[test]
    fn with_output_on_failure_the_final_ping_still_carries_the_tail() {
        let server = Server::start(Answer::Ok);
        let dir = Dir::new();
        let lock = dir.path("job.lock");
        let url = server.url();
        let run = |script: &str| {
            let args = [
                "run",
                "--ping",
                &url,
                "--ping-log-bytes",
                "12",
                "--output-on-failure",
                "--job",
                "backup",
                s(&lock),
                "-c",
                script,
            ];
            no_proxy(&args).bounded_output()
        };
        // Success: nothing printed, and the ping has the tail all the same.
        // (One stream: the tail of two pipes depends on which is read last.)
        let out = run("echo to stdout; printf 'all went well'");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!((stdout(&out), stderr(&out)), (String::new(), String::new()));
        let requests = server.wait_for(2);
        assert!(
            requests[1].target.starts_with("/ping/abc?rid="),
            "{requests:?}"
        );
        assert_eq!(requests[1].body, "ll went well");
        // Failure: printed, our line first, and the ping has the tail.
        let out = run("echo to stdout; printf 'it went bad'; exit 5");
        assert_eq!(code(&out), 5, "{}", stderr(&out));
        assert_eq!(stdout(&out), "to stdout\nit went bad");
        assert_eq!(
            stderr(&out),
            "lockfile: the run of job \"backup\" failed (exit status 5); its output follows\n"
        );
        let requests = server.wait_for(4);
        assert!(
            requests[3].target.starts_with("/ping/abc/5?rid="),
            "{requests:?}"
        );
        assert_eq!(
            requests[3].body,
            "\nit went badlockfile: the run failed (outcome failed, exit status 5)\n"
        );
    }

    /// 20 KB of output, the last lines numbered, for `--ping-log-bytes`.
    const TWENTY_KB: &str =
        "i=0; while [ $i -lt 2000 ]; do printf 'line %05d\n' $i; i=$((i+1)); done";

    #[test]
    fn the_server_keeps_the_end_of_the_job_within_its_limit() {
        let server = Server::start(Answer::Ok);
        let dir = Dir::new();
        let lock = dir.path("job.lock");
        let url = server.url();
        // Succeeded: the server's limit (10,000 bytes, from the start
        // ping's answer) caps what is sent, and what it keeps ends with
        // the job's last line.
        let args = [
            "run",
            "--ping",
            &url,
            "--ping-log-bytes",
            "20000",
            s(&lock),
            "-c",
            TWENTY_KB,
        ];
        let out = no_proxy(&args).bounded_output();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(out.stdout.len(), 22_000, "all output reaches our stdout");
        let requests = server.wait_for(2);
        let done = &requests[1];
        assert!(done.sent <= 10_000, "sent {} bytes", done.sent);
        assert!(
            done.body.ends_with("line 01999\n"),
            "{:?}",
            &done.body[done.body.len() - 40..]
        );
        eprintln!(
            "of 22,000 bytes of output, the server kept {} bytes, ending with the last line",
            done.body.len()
        );

        // Timed out: the run exits 124, pings /124, and what the server
        // keeps ends with the wrapper's line about it (after the job's last
        // output and the wrapper's own stop message).
        let script = format!("{TWENTY_KB}; sleep 30");
        let args = [
            "run",
            "--ping",
            &url,
            "--ping-log-bytes",
            "20000",
            "--max-runtime",
            "1",
            "--kill-after",
            "1",
            s(&lock),
            "-c",
            &script,
        ];
        let out = no_proxy(&args).bounded_output();
        assert_eq!(code(&out), 124, "{}", stderr(&out));
        let requests = server.wait_for(4);
        let done = &requests[3];
        assert!(
            done.target.starts_with("/ping/abc/124?rid="),
            "{}",
            done.target
        );
        assert!(done.sent <= 10_000, "sent {} bytes", done.sent);
        assert!(
            done.body
                .ends_with("(outcome timed_out, exit status 124)\n"),
            "{:?}",
            &done.body[done.body.len() - 200..]
        );
        assert!(done.body.contains("line 01999\n"), "the job's end is kept");
        assert!(
            done.body.contains("maximum runtime"),
            "the wrapper's line is kept"
        );
        eprintln!(
            "with a time-out, the server kept {} bytes: the job's last line, the wrapper's stop line and the final line",
            done.body.len()
        );
    }

    #[test]
    fn a_body_is_valid_utf8_for_a_server_that_filters_on_keywords() {
        let server = Server::behaving(Behaviour {
            answer: Answer::Ok,
            limit: 1_000,
            filter: true,
        });
        let dir = Dir::new();
        let lock = dir.path("job.lock");
        let url = server.url();
        // Three-byte characters, a tail that cuts inside one, and a byte
        // that is no UTF-8 at all.
        let script =
            "i=0; while [ $i -lt 700 ]; do printf '€'; i=$((i+1)); done; printf '\\377end\\n'";
        let args = [
            "run",
            "--ping",
            &url,
            "--ping-log-bytes",
            "2000",
            s(&lock),
            "-c",
            script,
        ];
        let out = no_proxy(&args).bounded_output();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(stderr(&out), "", "every ping was accepted");
        let requests = server.wait_for(2);
        let done = &requests[1];
        assert_eq!(done.target.split('?').next(), Some("/ping/abc"));
        assert!(done.sent <= 1_000, "sent {} bytes", done.sent);
        assert!(done.body.ends_with("€\u{FFFD}end\n"), "{:?}", done.body);
        assert!(done.body.starts_with('€'), "starts at a character boundary");
    }

    #[test]
    fn a_refused_body_goes_once_more_bare_so_that_the_event_is_never_lost() {
        let server = Server::start(Answer::RefuseBodies);
        let dir = Dir::new();
        let lock = dir.path("job.lock");
        let url = server.url();
        let args = [
            "run",
            "--ping",
            &url,
            "--ping-log-bytes",
            "100",
            s(&lock),
            "-c",
            "echo output; exit 7",
        ];
        let out = no_proxy(&args).bounded_output();
        assert_eq!(code(&out), 7, "{}", stderr(&out));
        assert_eq!(stderr(&out), "", "no failure to report");
        let requests = server.wait_for(4);
        let ends: Vec<&Request> = requests
            .iter()
            .filter(|r| r.target.starts_with("/ping/abc/7?"))
            .collect();
        assert_eq!(ends.len(), 2, "{requests:?}");
        assert!(ends[0].sent > 0);
        assert_eq!(ends[1].sent, 0);
    }

    #[test]
    fn ping_log_bytes_over_what_the_server_accepts_is_a_usage_error() {
        let dir = Dir::new();
        let lock = dir.path("job.lock");
        let args = [
            "run",
            "--ping",
            "http://127.0.0.1:9/x",
            "--ping-log-bytes",
            "2621441",
            s(&lock),
            "true",
        ];
        let out = run_output(&args);
        assert_eq!(code(&out), 64, "{}", stderr(&out));
        assert!(stderr(&out).contains("2.5 MiB"), "{}", stderr(&out));
        assert!(!lock.exists(), "refused before taking the lock");
    }

    #[test]
    fn bad_ping_options_are_usage_errors() {
        let dir = Dir::new();
        let lock = dir.path("job.lock");
        let out = run_output(&["run", "--ping-log-bytes", "10", s(&lock), "true"]);
        assert_eq!(
            code(&out),
            64,
            "--ping-log-bytes needs --ping: {}",
            stderr(&out)
        );
        let out = run_output(&["run", "--ping", "ftp://example.invalid/x", s(&lock), "true"]);
        assert_eq!(code(&out), 64);
        assert!(
            stderr(&out).contains("ftp://example.invalid/x"),
            "{}",
            stderr(&out)
        );
        assert!(!lock.exists(), "refused before taking the lock");
    }
}

// ---------------------------------------------------------------------------
// Quiet skips

#[test]
fn a_quiet_skip_behind_a_healthy_holder_prints_nothing() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let _holder = start(&[], &lock, LOOP_READY);
    let out = run_output(&["run", "-q", "-n", s(&lock), "true"]);
    assert_eq!(code(&out), 75);
    assert_eq!(stderr(&out), "");
    let out = run_output(&["run", "--quiet", "-w", "0.1", s(&lock), "true"]);
    assert_eq!(code(&out), 75);
    assert_eq!(stderr(&out), "");
    // Without -q, the one line that names the holder stays.
    let out = run_output(&["run", "-n", s(&lock), "true"]);
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

#[test]
fn a_quiet_skip_behind_a_dead_owner_still_speaks() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let holder = start(&[], &lock, LOOP_READY);
    holder.signal("KILL");
    wait_until("inspect to see the dead owner", || {
        let (_, v) = inspect_json(&lock, &[]);
        v[0]["findings"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["kind"] == "owner_dead"))
    });
    let out = run_output(&["run", "-q", "-n", s(&lock), "true"]);
    assert_eq!(code(&out), 75);
    let err = stderr(&out);
    assert!(err.contains("is held by"), "{err}");
    assert!(err.contains("unhealthy") && err.contains("dead"), "{err}");
}

#[test]
fn a_quiet_skip_behind_a_silent_heartbeat_still_speaks() {
    let dir = Dir::new();
    let lock = dir.path("job.lock");
    let holder = start(&["--heartbeat", "0.1"], &lock, LOOP_READY);
    // A stopped wrapper beats no more: its heartbeat falls silent.
    holder.signal("STOP");
    wait_until("inspect to see the silent heartbeat", || {
        let (_, v) = inspect_json(&lock, &[]);
        v[0]["findings"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["kind"] == "heartbeat_silent"))
    });
    let out = run_output(&["run", "-q", "-n", s(&lock), "true"]);
    holder.signal("CONT");
    assert_eq!(code(&out), 75);
    let err = stderr(&out);
    assert!(err.contains("no heartbeat for"), "{err}");
}

#[test]
fn a_holder_without_a_record_by_design_is_healthy_for_quiet() {
    let dir = Dir::new();
    // A script's own file: locked read-only, never written, no record.
    let script = dir.path("job.sh");
    std::fs::write(&script, "#!/bin/sh\necho a script\n").unwrap();
    let holder = start(&[], &script, LOOP_READY);
    holder.signal("KILL");
    let out = run_output(&["run", "-q", "-n", s(&script), "true"]);
    assert_eq!(code(&out), 75);
    assert_eq!(stderr(&out), "", "nothing to judge it by");
    drop(holder);
}

/// `fs.protected_regular` set to 0 while it lives, then put back: root's
/// run must meet our own rule on a planted file, not the kernel's refusal.
/// Serialised through a lock file with every other test that sets it.
struct ProtectedRegularOff {
    previous: String,
    _serial: std::fs::File,
}

const PROTECTED_REGULAR: &str = "/proc/sys/fs/protected_regular";

impl ProtectedRegularOff {
    fn new() -> ProtectedRegularOff {
        let serial = std::fs::File::create(
            std::env::temp_dir().join("lockfile-tests-protected-regular.lock"),
        )
        .unwrap();
        serial.lock().unwrap();
        let previous = std::fs::read_to_string(PROTECTED_REGULAR).unwrap();
        std::fs::write(PROTECTED_REGULAR, "0").unwrap();
        ProtectedRegularOff {
            previous,
            _serial: serial,
        }
    }
}

impl Drop for ProtectedRegularOff {
    fn drop(&mut self) {
        let _ = std::fs::write(PROTECTED_REGULAR, self.previous.trim());
    }
}

#[test]
#[ignore = "needs root: plants a lock file as an unprivileged attacker (setpriv)"]
fn a_planted_file_is_refused_by_run_and_its_success_in_9999_never_reads_as_0s_ago() {
    common::require_root("setpriv to an unprivileged uid");
    let dir = Dir::new();
    std::fs::set_permissions(dir.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // /tmp as it is: root's, sticky, everyone may write.
    let shared = dir.path("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let lock = shared.join("backup.lock");
    // The attacker may not reach the build's directory: she runs a link
    // (or copy) in the test's own, written before anything is forked.
    let exe = dir.path("lockfile");
    std::fs::hard_link(env!("CARGO_BIN_EXE_lockfile"), &exe)
        .or_else(|_| std::fs::copy(env!("CARGO_BIN_EXE_lockfile"), &exe).map(drop))
        .unwrap();
    let as_attacker = |script: &str, envs: &[(&str, &str)]| {
        let out = Command::new("setpriv")
            .args(["--reuid=64001", "--regid=64001", "--clear-groups"])
            .args(["sh", "-c", script])
            .envs(envs.iter().copied())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    // Her own run plants the file; then she dates its success to 9999.
    as_attacker(
        "\"$EXE\" run -n \"$LOCK\" true",
        &[("EXE", s(&exe)), ("LOCK", s(&lock))],
    );
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap();
    doc["last_success"] = "9999-12-31T00:00:00Z".into();
    let forged = doc.to_string();
    as_attacker(
        "printf %s \"$DOC\" > \"$LOCK\"",
        &[("DOC", &forged), ("LOCK", s(&lock))],
    );

    let out = run_output(&["check", "--expect-every", "1h", s(&lock)]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!said.contains("0s ago"), "{said}");
    assert!(
        said.contains("planted_file") && said.contains("future_time"),
        "{said}"
    );
    assert_eq!(code(&out), 2, "no success is believed: {said}");

    let _sysctl = ProtectedRegularOff::new();
    let out = run_output(&["run", "-n", s(&lock), "true"]);
    assert_eq!(code(&out), 73, "{}", stderr(&out));
    let line = stderr(&out);
    assert!(
        line.contains("uid 64001") && line.contains("protected_regular"),
        "{line}"
    );
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), forged, "untouched");
}

/// The package's alert rules pass promtool's checks and tests, and every
/// metric they name is one a real run or inspect writes (the lease metrics
/// are held to etcd's output in etcd.rs).
#[test]
fn the_alert_rules_pass_promtool_and_name_only_metrics_that_are_written() {
    let dir = common::prometheus::rules_dir();
    for args in [
        &["check", "rules", "lockfile-rules.yml"][..],
        &["test", "rules", "lockfile-rules.test.yml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .bounded_output();
        assert_eq!(
            code(&out),
            0,
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        );
    }

    let work = Dir::new();
    let metrics = work.path("metrics");
    std::fs::create_dir(&metrics).unwrap();
    let locks = work.path("locks");
    std::fs::create_dir(&locks).unwrap();
    // A job that succeeds after a failure, and one that never succeeded
    // (a finding, with --expect-every).
    let runs = [
        ("job.lock", "exit 3", 3),
        ("job.lock", "true", 0),
        ("never.lock", "exit 3", 3),
    ];
    for (lock, script, status) in runs {
        let lock = locks.join(lock);
        let out = run_output(&[
            "run",
            "--metrics-dir",
            s(&metrics),
            "--job",
            "job",
            s(&lock),
            "sh",
            "-c",
            script,
        ]);
        assert_eq!(code(&out), status, "{}", stderr(&out));
    }
    // A `--once-per` run, for the tick metrics (its own lock: no earlier
    // claim of this tick refuses it, wherever the tick's edge falls).
    let out = run_output(&[
        "run",
        "--once-per",
        "1m",
        "--metrics-dir",
        s(&metrics),
        "--job",
        "ticks",
        s(&locks.join("ticks.lock")),
        "true",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // A set of two slots (`--slots`), one held: the slot metrics.
    let set = locks.join("slots.lock");
    let _holder = common::start(&["--slots", "2"], &set, "echo ready; exec sleep 60");
    let out = run_output(&["run", "--slots", "2", s(&set), "true"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let mut written = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&metrics).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        written.extend(common::prometheus::sample_names(&text));
    }
    let out = lockfile()
        .args([
            "inspect",
            "--format",
            "prometheus",
            "--expect-every",
            "1s",
            s(&locks),
        ])
        .bounded_output();
    written.extend(common::prometheus::sample_names(&String::from_utf8_lossy(
        &out.stdout,
    )));
    let missing: Vec<String> = common::prometheus::rule_metrics()
        .into_iter()
        .filter(|name| !name.starts_with("lockfile_lease_") && !written.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "the rules name {missing:?}, which no run wrote: {written:?}"
    );
}
