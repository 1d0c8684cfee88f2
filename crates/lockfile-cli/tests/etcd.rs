//! `lockfile run --etcd` and `lockfile inspect --etcd` against a real etcd
//! server that each test starts on loopback ports (Debian: `etcd-server`).
//! Without an `etcd` binary these tests fail and say what to install.

mod common;

use std::net::TcpListener;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::lease_faults::alive;
use common::prometheus::{NodeExporter, promtool_accepts, samples, value};
use common::{Background, BoundedOutput, LOOP, code, lockfile, stderr, wait_until};
use lockfile_test_support::{Proxy, etcd as server};

/// A single-member etcd of this test's own, killed when dropped.
struct Etcd {
    server: server::Etcd,
    endpoint: String,
}

impl Etcd {
    /// Starts it, ready when our own inspect gets an answer.
    fn start() -> Etcd {
        let server = server::Etcd::start_until(|endpoint| {
            let probe = lockfile()
                .args(["inspect", "--json", "--etcd", endpoint, "probe"])
                .bounded_output();
            code(&probe) == 0
        });
        let endpoint = server.endpoint();
        Etcd { server, endpoint }
    }

    fn inspect(&self, args: &[&str]) -> Output {
        common::lease_run::inspect(&["--etcd", &self.endpoint], args)
    }
}

/// Starts `lockfile run --etcd ENDPOINT EXTRA NAME sh -c SCRIPT`; returns the
/// first line SCRIPT prints.
fn start(etcd: &Etcd, extra: &[&str], name: &str, script: &str) -> (Background, String) {
    common::lease_run::start(&["--etcd", &etcd.endpoint], extra, name, script)
}

#[test]
fn the_command_runs_with_a_fencing_token_and_its_status_passes_through() {
    let etcd = Etcd::start();
    let out = lockfile()
        .args(["run", "--etcd", &etcd.endpoint, "--ttl", "3", "tokens"])
        .args(["sh", "-c", "echo \"$LOCKFILE_FENCING_TOKEN\"; exit 7"])
        .bounded_output();
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    let first: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let out = lockfile()
        .args(["run", "--etcd", &etcd.endpoint, "tokens"])
        .args(["sh", "-c", "echo \"$LOCKFILE_FENCING_TOKEN\""])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let second: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(second > first, "tokens rise: {first} then {second}");
    // Released after each run.
    let report: Value = serde_json::from_slice(&etcd.inspect(&["tokens"]).stdout).unwrap();
    assert_eq!(report[0]["state"], "free");
}

#[test]
fn contention_exits_with_the_conflict_status_and_inspect_names_the_holder() {
    let etcd = Etcd::start();
    let (holder, token) = start(
        &etcd,
        &["--job", "report"],
        "nightly",
        "echo \"$LOCKFILE_TOKEN\"; sleep 30",
    );

    let out = lockfile()
        .args(["run", "-n", "--etcd", &etcd.endpoint, "nightly", "true"])
        .bounded_output();
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("pid {}", holder.pid())), "{err}");
    assert!(err.contains("report"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let out = etcd.inspect(&["nightly"]);
    assert_eq!(code(&out), 0);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &report[0];
    assert_eq!(r["state"], "held");
    for key in ["pid", "hostname", "token", "job", "acquired_at"] {
        assert!(!r["owner"][key].is_null(), "owner.{key} in {r}");
    }
    // COMMAND knows its run by the token of the record, as under a file.
    assert_eq!(r["owner"]["token"], token, "{r}");
    assert!(r["fencing_token"].as_u64().unwrap() > 0);
    assert!(r["ttl_remaining_seconds"].as_f64().is_some());

    let table = lockfile()
        .args(["inspect", "--etcd", &etcd.endpoint, "nightly"])
        .bounded_output();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("NAME"), "{text}");
    assert!(text.contains("held") && text.contains("report"), "{text}");
}

#[test]
fn sigkill_of_the_wrapper_kills_the_command_before_a_contender_acquires() {
    let etcd = Etcd::start();
    let (mut wrapper, command_pid) =
        start(&etcd, &["--ttl", "2"], "orphan", "echo $$; exec sleep 60");
    let command_pid: u32 = command_pid.parse().unwrap();
    assert!(alive(command_pid));
    wrapper.signal("KILL");
    assert_eq!(wrapper.reap(), -1, "killed by a signal");

    // The kernel kills the command as its parent dies; nobody renews the
    // lease, which lapses within the TTL. The contender's command checks
    // that the first one is gone by the time it runs.
    let out = lockfile()
        .args(["run", "-w", "10", "--etcd", &etcd.endpoint, "orphan"])
        .args([
            "sh",
            "-c",
            &format!("if kill -0 {command_pid} 2>/dev/null; then echo alive; else echo gone; fi"),
        ])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "gone");
    assert!(!alive(command_pid));
}

#[test]
fn a_command_that_never_beats_is_stopped_with_its_tree_and_the_lease_freed_at_once() {
    let etcd = Etcd::start();
    common::hung_lease::a_command_that_never_beats_is_stopped_and_its_lease_freed_at_once(&[
        "--etcd",
        &etcd.endpoint,
    ]);
}

#[test]
fn a_command_that_beats_under_a_lease_runs_to_its_end() {
    let etcd = Etcd::start();
    common::hung_lease::a_command_that_beats_runs_to_its_end(&["--etcd", &etcd.endpoint]);
}

#[test]
fn sigkill_of_the_wrapper_kills_the_whole_tree_before_a_second_holder_runs() {
    let etcd = Etcd::start();
    common::dead_wrapper::a_killed_wrappers_tree_dies_before_its_lease_lapses(&[
        "--etcd",
        &etcd.endpoint,
    ]);
}

#[test]
fn a_lapsing_lease_stops_the_command_before_the_deadline_and_exits_79() {
    let etcd = Etcd::start();
    let (mut wrapper, ready) = start(
        &etcd,
        &["--ttl", "2"],
        "paused",
        &format!("trap 'echo stopped >&2; exit 0' TERM; echo ready; {LOOP}"),
    );
    assert_eq!(ready, "ready");
    // Freeze etcd past the TTL: renewals fail, the deadline approaches, the
    // command gets SIGTERM a third of a TTL before it.
    etcd.server.pause();
    let (status, err) = wrapper.wait();
    etcd.server.resume();
    assert_eq!(status, 79, "{err}");
    assert!(err.contains("sending SIGTERM"), "{err}");
    assert!(err.contains("stopped"), "the command saw SIGTERM: {err}");

    // Only now can a contender acquire, and the command is long gone.
    let out = lockfile()
        .args([
            "run",
            "-w",
            "10",
            "--etcd",
            &etcd.endpoint,
            "paused",
            "true",
        ])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn output_on_failure_under_a_lease_prints_a_failing_run_only_and_names_a_lost_lease() {
    let etcd = Etcd::start();
    let run = |name: &str, script: &str| {
        lockfile()
            .args(["run", "--output-on-failure", "--etcd", &etcd.endpoint])
            .args(["--ttl", "2", name, "sh", "-c", script])
            .bounded_output()
    };
    let out = run("quiet", "echo noise; echo noise >&2");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!((&out.stdout[..], &out.stderr[..]), (&b""[..], &b""[..]));
    let out = run("failing", "echo to stdout; echo to stderr >&2; exit 3");
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "to stdout\n");
    assert_eq!(
        stderr(&out),
        "lockfile: the run of job \"sh\" failed (exit status 3); its output follows\nto stderr\n"
    );

    // Renewals fail while COMMAND runs: it is stopped, and the output says
    // that the lease was lost. The job's own line is kept, not printed, so
    // it leaves a mark to say that it runs.
    let dir = tempfile::tempdir().unwrap();
    let running = dir.path().join("running");
    let script = format!("echo working; touch '{}'; {LOOP}", running.display());
    let out = std::thread::scope(|scope| {
        let job = scope.spawn(|| run("paused", &script));
        wait_until("the job to run", || running.exists());
        etcd.server.pause();
        let out = job.join().unwrap();
        etcd.server.resume();
        out
    });
    assert_eq!(code(&out), 79, "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "working\n");
    // The release's own lines come first (printed as it happens), then
    // ours, then what was kept, our line about the SIGTERM among it.
    let said = stderr(&out);
    let ours = said
        .find("lockfile: the run of job \"sh\" lost its lease and was stopped (exit status 79")
        .unwrap_or_else(|| panic!("{said}"));
    let kept = said
        .find("sending SIGTERM")
        .unwrap_or_else(|| panic!("{said}"));
    assert!(ours < kept, "{said}");
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_by_the_deadline() {
    let etcd = Etcd::start();
    let (mut wrapper, pid) = start(
        &etcd,
        &["--ttl", "2", "--grace", "0.5"],
        "stubborn",
        &format!("trap '' TERM; echo $$; {LOOP}"),
    );
    let pid: u32 = pid.parse().unwrap();
    etcd.server.pause();
    let (status, err) = wrapper.wait();
    assert!(!alive(pid), "the command was killed");
    etcd.server.resume();
    assert_eq!(status, 79, "{err}");
    assert!(err.contains("sending SIGKILL"), "{err}");
}

#[test]
fn an_unreachable_etcd_is_a_clear_error() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = lockfile()
        .args([
            "run",
            "--etcd",
            &format!("http://127.0.0.1:{port}"),
            "nowhere",
            "true",
        ])
        .bounded_output();
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    assert!(stderr(&out).contains("nowhere"), "{}", stderr(&out));
}

/// A server that accepts connections and never answers: `-w 1` is the
/// bound of every request of the acquire, not the 5 s request timeout.
#[test]
fn a_bounded_wait_bounds_the_requests_to_a_silent_server() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    // Accepted and kept open, never answered, until the test ends.
    std::thread::spawn(move || {
        let kept: Vec<_> = listener.incoming().collect();
        drop(kept);
    });
    let out = lockfile()
        .args(["run", "-w", "1", "--etcd", &endpoint, "silent", "true"])
        .bounded_output();
    let err = stderr(&out);
    assert_eq!(code(&out), 69, "{err}");
    assert!(err.contains(&endpoint), "names the server: {err}");
    // The bound the request was given, as the error states it: the wait's
    // end and a second more.
    let within = err
        .split("no answer within ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .and_then(|bound| humantime::parse_duration(bound.trim()).ok())
        .unwrap_or_else(|| panic!("{err}"));
    assert!(within <= Duration::from_secs(2), "{err}");
}

#[test]
fn a_lapsing_lease_stops_everything_the_command_started() {
    let etcd = Etcd::start();
    // COMMAND starts a background process and waits for it.
    let (mut wrapper, background) =
        start(&etcd, &["--ttl", "2"], "family", "sleep 60 & echo $!; wait");
    let background: u32 = background.parse().unwrap();
    assert!(alive(background));
    etcd.server.pause();
    let (status, err) = wrapper.wait();
    etcd.server.resume();
    assert_eq!(status, 79, "{err}");
    assert!(
        !alive(background),
        "the background process outlived the lease: {err}"
    );
}

#[test]
fn background_processes_left_behind_keep_the_lease_until_they_exit() {
    let etcd = Etcd::start();
    let (mut wrapper, line) = start(
        &etcd,
        &["--ttl", "3"],
        "leftover",
        "sleep 2 >/dev/null 2>&1 & echo started",
    );
    assert_eq!(line, "started");
    // COMMAND itself has exited; its background sleep still works under the
    // lease, so nobody else may take it.
    std::thread::sleep(Duration::from_millis(300));
    let out = lockfile()
        .args(["run", "-n", "--etcd", &etcd.endpoint, "leftover", "true"])
        .bounded_output();
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let (status, err) = wrapper.wait();
    assert_eq!(status, 0, "{err}");
    assert!(err.contains("background process"), "{err}");
    let out = lockfile()
        .args(["run", "-n", "--etcd", &etcd.endpoint, "leftover", "true"])
        .bounded_output();
    assert_eq!(code(&out), 0, "released once they exited: {}", stderr(&out));
}

#[test]
fn an_invalid_lease_name_is_a_usage_error() {
    let etcd = Etcd::start();
    let out = lockfile()
        .args(["run", "--etcd", &etcd.endpoint, "../escape", "true"])
        .bounded_output();
    assert_eq!(code(&out), 64, "{}", stderr(&out));
}

#[test]
fn the_lease_durations_take_units() {
    let etcd = Etcd::start();
    let (mut holder, ready) = start(
        &etcd,
        &["--ttl", "1m", "--grace", "5s", "-w", "30s"],
        "units",
        &format!("trap 'exit 0' TERM; echo ready; {LOOP}"),
    );
    assert_eq!(ready, "ready");
    let report: Value = serde_json::from_slice(&etcd.inspect(&["units"]).stdout).unwrap();
    assert_eq!(report[0]["state"], "held", "{report}");
    assert_eq!(report[0]["ttl_seconds"], 60.0, "{report}");
    holder.signal("TERM");
    let (status, err) = holder.wait();
    assert_eq!(status, 0, "{err}");
}

#[test]
fn runs_and_skips_under_a_lease_write_the_same_metrics() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let (metrics, stop) = (dir.path().to_str().unwrap(), dir.path().join("stop"));
    let script = format!(
        "echo ready; for i in $(seq 1200); do [ -e '{}' ] && exit 0; sleep 0.05; done; exit 1",
        stop.display()
    );
    let extra = ["--metrics-dir", metrics, "--job", "report"];
    let (mut holder, line) = start(&etcd, &extra, "nightly", &script);
    assert_eq!(line, "ready");
    let file = dir.path().join("lockfile-report.prom");
    let sample = |name: &str| {
        let text = std::fs::read_to_string(&file).unwrap();
        // A skip counts under the reason it had: the lease was held.
        let reason = if name == "lockfile_run_skips_total" {
            ",reason=\"held\""
        } else {
            ""
        };
        let prefix = format!("{name}{{lockfile_job=\"report\",lock=\"nightly\"{reason}}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    assert_eq!(sample("lockfile_run_running"), "1");

    // A lease holder keeps no heartbeat to judge it by: quiet.
    let out = lockfile()
        .args(["run", "-n", "-q", "--etcd", &etcd.endpoint])
        .args(extra)
        .args(["nightly", "true"])
        .bounded_output();
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    assert_eq!(sample("lockfile_run_skips_total"), "1");

    std::fs::write(&stop, "").unwrap();
    assert_eq!(holder.wait().0, 0);
    assert_eq!(sample("lockfile_run_running"), "0");
    assert_eq!(sample("lockfile_run_last_exit_code"), "0");
    assert_eq!(sample("lockfile_run_skips_total"), "1");

    // The lease's state as samples too: free now, its last success set.
    let out = lockfile()
        .args([
            "inspect",
            "--etcd",
            &etcd.endpoint,
            "--format",
            "prometheus",
        ])
        .arg("nightly")
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let scraped = samples(&String::from_utf8_lossy(&out.stdout));
    let lease = [("engine", "etcd"), ("lock", "nightly")];
    assert_eq!(
        value(
            &scraped,
            "lockfile_lock_state",
            &[lease[0], lease[1], ("state", "free")]
        ),
        Some(1.0)
    );
    assert!(
        value(
            &scraped,
            "lockfile_lock_last_success_timestamp_seconds",
            &lease
        )
        .unwrap()
            > 0.0
    );
}

/// The deadline a wrapper's "is about to lapse in N s" line names: the
/// moment the line was read, taken just before the read that preceded it
/// (so that the deadline is never put later than it was), plus N.
fn announced_deadline(stderr: &str, read_before: Instant) -> Option<Instant> {
    let line = stderr
        .lines()
        .find(|l| l.contains("is about to lapse in "))?;
    let (_, rest) = line.split_once("is about to lapse in ")?;
    let (secs, _) = rest.split_once("s:")?;
    Some(read_before + Duration::from_secs_f64(secs.parse().ok()?))
}

/// The connection to etcd black-holed (nothing forwarded, nothing closed),
/// TTL 3 s, a command that ignores SIGTERM: it is killed just before the
/// lease's deadline, and the wrapper exits within half a second of that
/// deadline rather than waiting on a server that does not answer.
#[test]
fn behind_a_black_hole_the_wrapper_exits_within_half_a_second_of_the_deadline() {
    let etcd = Etcd::start();
    let proxy = Proxy::start(etcd.endpoint.trim_start_matches("http://"));
    let endpoint = proxy.endpoint();
    let script = format!("trap '' TERM; echo $$; {LOOP}");
    let (mut wrapper, pid) = Background::spawn(&[
        "--etcd", &endpoint, "--ttl", "3", "holed", "sh", "-c", &script,
    ]);
    let pid: u32 = pid.parse().unwrap();
    // A few renewals go through the proxy first.
    std::thread::sleep(Duration::from_millis(1500));
    let cut = Instant::now();
    proxy.blackhole();
    let mut deadline = None;
    let mut previous_read = Instant::now();
    let (status, exited) = loop {
        let read_at = Instant::now();
        if let Some(status) = wrapper.try_code() {
            break (status, Instant::now());
        }
        if deadline.is_none() {
            deadline = announced_deadline(&wrapper.stderr_so_far(), previous_read);
        }
        previous_read = read_at;
        assert!(
            cut.elapsed() < Duration::from_secs(60),
            "the wrapper still runs a minute after the cut: {}",
            wrapper.stderr_so_far()
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let err = wrapper.stderr_so_far();
    let deadline = deadline.unwrap_or_else(|| panic!("no deadline announced: {err}"));
    let late = exited.saturating_duration_since(deadline);
    let figures = format!(
        "black hole, TTL 3s: the deadline came {:.3}s after the cut; the wrapper exited {:.3}s after the cut, {:+.3}s from the deadline",
        deadline.saturating_duration_since(cut).as_secs_f64(),
        exited.duration_since(cut).as_secs_f64(),
        if exited >= deadline {
            late.as_secs_f64()
        } else {
            -deadline.duration_since(exited).as_secs_f64()
        },
    );
    eprintln!("{figures}\n{err}");
    assert_eq!(status, 79, "{figures}; {err}");
    assert!(!alive(pid), "the command was killed: {err}");
    assert!(
        late <= Duration::from_millis(500),
        "{figures}; its stderr: {err}"
    );
}

/// `lockfile run --etcd NAME sh -c SCRIPT` to its end: its exit status.
fn run_script(etcd: &Etcd, name: &str, script: &str) -> i32 {
    let out = lockfile()
        .args(["run", "--etcd", &etcd.endpoint, name, "sh", "-c", script])
        .bounded_output();
    code(&out)
}

/// The `last_run` object `inspect --etcd --json` shows for `name`.
fn last_run(etcd: &Etcd, name: &str) -> Value {
    let report: Value = serde_json::from_slice(&etcd.inspect(&[name]).stdout).unwrap();
    assert_eq!(report[0]["state"], "free", "{report}");
    report[0]["last_run"].clone()
}

#[test]
fn the_run_history_outlives_the_lease_and_counts_failures_in_a_row() {
    let etcd = Etcd::start();
    assert!(last_run(&etcd, "history").is_null(), "no run yet");
    assert_eq!(run_script(&etcd, "history", "exit 3"), 3);
    // The lease's key went with the lease; the history stayed.
    let first = last_run(&etcd, "history");
    assert_eq!(first["outcome"], "failed", "{first}");
    assert_eq!(first["exit_code"], 3);
    assert!(first["signal"].is_null());
    assert_eq!(first["consecutive_failures"], 1);
    assert_eq!(first["last_failure_at"], first["finished_at"]);

    // The same keys as a lock file's history.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("history.lock");
    let out = lockfile()
        .arg("run")
        .arg(&file)
        .args(["sh", "-c", "exit 3"])
        .bounded_output();
    assert_eq!(code(&out), 3);
    let out = lockfile()
        .args(["inspect", "--json"])
        .arg(&file)
        .bounded_output();
    let local: Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys = |v: &Value| {
        let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    };
    assert_eq!(keys(&first), keys(&local[0]["last_run"]));

    // A later holder's failure counts on; a signal is told apart.
    assert_eq!(run_script(&etcd, "history", "kill -KILL $$"), 137);
    let second = last_run(&etcd, "history");
    assert_eq!(second["consecutive_failures"], 2, "{second}");
    assert!(second["exit_code"].is_null());
    assert_eq!(second["signal"], 9);
    assert_eq!(second["outcome"], "failed");

    // A success resets the count and keeps the time of the last failure.
    assert_eq!(run_script(&etcd, "history", "true"), 0);
    let ok = last_run(&etcd, "history");
    assert_eq!(ok["outcome"], "succeeded", "{ok}");
    assert_eq!(ok["consecutive_failures"], 0);
    assert_eq!(ok["exit_code"], 0);
    assert_eq!(ok["last_failure_at"], second["last_failure_at"]);
    assert!(ok["duration_seconds"].as_f64().unwrap() >= 0.0);

    // The table's LAST RUN column shows the outcome.
    let table = lockfile()
        .args(["inspect", "--etcd", &etcd.endpoint, "history"])
        .bounded_output();
    let text = String::from_utf8_lossy(&table.stdout);
    let header = text.lines().next().unwrap();
    assert!(header.ends_with("LAST RUN"), "{text}");
    assert!(
        text.lines().nth(1).unwrap().ends_with("succeeded"),
        "{text}"
    );
}

/// etcd stops answering long enough for the stop policy to stop COMMAND,
/// then comes back before the deadline: the run is recorded `lease_lost`,
/// a failure like any other.
#[test]
fn a_run_stopped_for_its_lease_is_recorded_lease_lost() {
    let etcd = Etcd::start();
    assert_eq!(run_script(&etcd, "lapsing", "exit 1"), 1);
    let (mut wrapper, ready) = start(
        &etcd,
        &["--ttl", "3"],
        "lapsing",
        &format!("trap 'exit 0' TERM; echo ready; {LOOP}"),
    );
    assert_eq!(ready, "ready");
    etcd.server.pause();
    // SIGTERM comes a third of a TTL before the deadline: etcd is back in
    // time for the history to be written.
    let started = Instant::now();
    while !wrapper.stderr_so_far().contains("sending SIGTERM") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no SIGTERM: {}",
            wrapper.stderr_so_far()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    etcd.server.resume();
    let (status, err) = wrapper.wait();
    assert_eq!(status, 79, "{err}");
    let run = last_run(&etcd, "lapsing");
    assert_eq!(run["outcome"], "lease_lost", "{run}; {err}");
    assert_eq!(run["exit_code"], 0, "the command's own status: {run}");
    assert_eq!(run["consecutive_failures"], 2, "{run}");
}

/// `--max-runtime` under a lease, as for a file lock: COMMAND (here a
/// `sleep 60`) and what it started are stopped through the stop sequence,
/// the run exits 124, says why, and the lease's history says `timed_out`.
#[test]
fn the_maximum_runtime_stops_the_command_and_its_tree_under_a_lease() {
    let etcd = Etcd::start();
    let spawned = Instant::now();
    let (mut wrapper, pids) = start(
        &etcd,
        &["--max-runtime", "2"],
        "overrun",
        "sleep 60 & echo \"$$ $!\"; exec sleep 60",
    );
    let pids: Vec<u32> = pids.split(' ').map(|p| p.parse().unwrap()).collect();
    let (status, err) = wrapper.wait();
    assert_eq!(status, 124, "{err}");
    // Measured from COMMAND's start, which came after the spawn.
    assert!(spawned.elapsed() >= Duration::from_secs(2), "{err}");
    assert!(
        err.contains(
            "job \"sh\" reached its maximum runtime of 2s: stopping it and everything it started"
        ),
        "{err}"
    );
    assert!(!err.contains("the lease on"), "the lease was fine: {err}");
    for pid in pids {
        assert!(!alive(pid), "pid {pid} outlived the stop: {err}");
    }
    let run = last_run(&etcd, "overrun");
    assert_eq!(run["outcome"], "timed_out", "{run}; {err}");
    assert_eq!(run["signal"], 15, "{run}");
}

/// `--kill-after` under the maximum runtime, and the leftovers: a COMMAND
/// that ignores SIGTERM is killed after it, and a background process that
/// COMMAND left behind is stopped at the limit too.
#[test]
fn under_a_lease_the_maximum_runtime_kills_after_kill_after_and_stops_leftovers() {
    let etcd = Etcd::start();
    let (mut wrapper, pid) = start(
        &etcd,
        &["--max-runtime", "1", "--kill-after", "0.5"],
        "stubborn-overrun",
        &format!("trap '' TERM; echo $$; {LOOP}"),
    );
    let pid: u32 = pid.parse().unwrap();
    let (status, err) = wrapper.wait();
    assert_eq!(status, 124, "{err}");
    assert!(!alive(pid), "SIGKILL followed SIGTERM: {err}");
    let run = last_run(&etcd, "stubborn-overrun");
    assert_eq!(run["outcome"], "timed_out", "{run}");
    assert_eq!(run["signal"], 9, "{run}");

    let (mut wrapper, leftover) = start(
        &etcd,
        &["--max-runtime", "1"],
        "leftover-overrun",
        "sleep 60 >/dev/null 2>&1 & echo $!",
    );
    let leftover: u32 = leftover.parse().unwrap();
    let (status, err) = wrapper.wait();
    assert_eq!(status, 124, "{err}");
    assert!(err.contains("maximum runtime of 1s"), "{err}");
    assert!(!alive(leftover), "the leftover outlived the limit: {err}");
    let run = last_run(&etcd, "leftover-overrun");
    assert_eq!(run["outcome"], "timed_out", "{run}");
    assert_eq!(run["exit_code"], 0, "COMMAND's own status: {run}");
}

/// The maximum runtime has begun stopping a COMMAND that ignores SIGTERM,
/// with a `--kill-after` far longer than the TTL, when the lease starts to
/// lapse: the stop policy still kills it before the deadline, and the run
/// is reported as the lease's, `lease_lost` and 79.
#[test]
fn a_lapsing_lease_kills_a_command_the_maximum_runtime_is_stopping() {
    let etcd = Etcd::start();
    let (mut wrapper, pid) = start(
        &etcd,
        &["--ttl", "3", "--max-runtime", "0.5", "--kill-after", "1h"],
        "overrun-lapsing",
        &format!("trap '' TERM; echo $$; {LOOP}"),
    );
    let pid: u32 = pid.parse().unwrap();
    let started = Instant::now();
    while !wrapper.stderr_so_far().contains("maximum runtime") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no maximum runtime: {}",
            wrapper.stderr_so_far()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    etcd.server.pause();
    // SIGKILL is promised for before the deadline: etcd is back in time for
    // the history to be written.
    while !wrapper.stderr_so_far().contains("get SIGKILL before then") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the lease's policy did not act: {}",
            wrapper.stderr_so_far()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    etcd.server.resume();
    // Without the lease's policy, nothing would kill it for an hour.
    let (status, err) = wrapper.wait();
    assert_eq!(status, 79, "{err}");
    assert!(!alive(pid), "the command was killed: {err}");
    assert!(err.contains("sending SIGKILL"), "{err}");
    let run = last_run(&etcd, "overrun-lapsing");
    assert_eq!(run["outcome"], "lease_lost", "{run}; {err}");
    assert_eq!(run["signal"], 9, "{run}");
}

// ---------------------------------------------------------------------------
// `check --etcd` and leases in Prometheus

/// `lockfile check --etcd ENDPOINT --json ARGS NAME`: its status and JSON.
fn check(etcd: &Etcd, args: &[&str], name: &str) -> (i32, Value) {
    let out = lockfile()
        .args(["check", "--json", "--etcd", &etcd.endpoint])
        .args(args)
        .arg(name)
        .bounded_output();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        )
    });
    (code(&out), json)
}

/// The kinds of a check's verdicts.
fn verdicts(json: &Value) -> Vec<String> {
    json["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["kind"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn check_gives_a_lease_the_verdicts_of_a_lock_file() {
    let etcd = Etcd::start();
    let hour = ["--expect-every", "1h"];

    // Nothing ever ran: never_succeeded, critical.
    let (status, json) = check(&etcd, &hour, "report");
    assert_eq!(
        (status, verdicts(&json)),
        (2, vec!["never_succeeded".to_owned()]),
        "{json}"
    );
    assert_eq!(json["report"]["engine"], "etcd");
    assert_eq!(json["report"]["name"], "report");

    // A success: OK, and the text names the lease.
    assert_eq!(run_script(&etcd, "report", "true"), 0);
    let (status, json) = check(&etcd, &hour, "report");
    assert_eq!(status, 0, "{json}");
    assert!(json["verdicts"].as_array().unwrap().is_empty(), "{json}");
    let out = lockfile()
        .args([
            "check",
            "--etcd",
            &etcd.endpoint,
            "--expect-every",
            "1h",
            "report",
        ])
        .bounded_output();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("OK: etcd lease `report`: last success "),
        "{text}"
    );

    // Then a failure: failing, critical; the last success is kept.
    assert_eq!(run_script(&etcd, "report", "exit 4"), 4);
    let (status, json) = check(&etcd, &hour, "report");
    assert_eq!(
        (status, verdicts(&json)),
        (2, vec!["failing".to_owned()]),
        "{json}"
    );
    assert!(json["report"]["last_success"].is_string(), "{json}");
    // Allowed one more failure in a row: OK again.
    let (status, _) = check(
        &etcd,
        &["--expect-every", "1h", "--max-failures", "2"],
        "report",
    );
    assert_eq!(status, 0);

    // Silent: the last success is older than expected. (Only a lower bound
    // on time is relied on: a second has passed since it.)
    std::thread::sleep(Duration::from_millis(1100));
    let (status, json) = check(
        &etcd,
        &["--expect-every", "1", "--max-failures", "9"],
        "report",
    );
    assert_eq!(
        (status, verdicts(&json)),
        (2, vec!["silent".to_owned()]),
        "{json}"
    );

    // `hung` cannot be told for a lease: --stale-after is refused.
    let out = lockfile()
        .args(["check", "--etcd", &etcd.endpoint, "--expect-every", "1h"])
        .args(["--stale-after", "1m", "report"])
        .bounded_output();
    assert_eq!(code(&out), 64, "{}", stderr(&out));

    // An etcd that does not answer: UNKNOWN (3), naming the key.
    let out = lockfile()
        .args([
            "check",
            "--etcd",
            "http://127.0.0.1:1",
            "--expect-every",
            "1h",
            "report",
        ])
        .bounded_output();
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("UNKNOWN: ") && text.contains("lockfile/locks/report"),
        "{text}"
    );
}

#[test]
fn a_holder_past_its_recorded_maximum_runtime_is_overrunning() {
    let etcd = Etcd::start();
    assert_eq!(run_script(&etcd, "overrun", "true"), 0, "a success first");
    // COMMAND ignores the SIGTERM of its maximum runtime, and the wrapper
    // waits a minute before SIGKILL: the lease stays held past the limit.
    let dir = tempfile::tempdir().unwrap();
    let stop = dir.path().join("stop");
    let script = format!(
        "trap '' TERM; echo ready; while [ ! -e '{}' ]; do sleep 0.05; done",
        stop.display()
    );
    let (mut wrapper, _) = start(
        &etcd,
        &["--max-runtime", "1", "--kill-after", "60"],
        "overrun",
        &script,
    );
    let report: Value = serde_json::from_slice(&etcd.inspect(&["overrun"]).stdout).unwrap();
    assert_eq!(report[0]["owner"]["max_runtime_seconds"], 1.0, "{report}");
    // Past the limit, `check` warns (1) and `inspect` reports the finding.
    let mut json = Value::Null;
    common::wait_until("the holder overruns", || {
        let (status, j) = check(
            &etcd,
            &["--expect-every", "1h", "--max-failures", "9"],
            "overrun",
        );
        json = j;
        status == 1
    });
    assert_eq!(verdicts(&json), ["overrunning"], "{json}");
    let report: Value = serde_json::from_slice(&etcd.inspect(&["overrun"]).stdout).unwrap();
    assert_eq!(report[0]["findings"][0]["kind"], "overrunning", "{report}");
    assert_eq!(report[0]["findings"][0]["severity"], "warning", "{report}");
    // --max-age says the same of any holder.
    let (status, json) = check(
        &etcd,
        &["--expect-every", "1h", "--max-age", "1"],
        "overrun",
    );
    assert_eq!(status, 1, "{json}");
    assert!(verdicts(&json).iter().all(|k| k == "overrunning"), "{json}");

    std::fs::write(&stop, "").unwrap();
    let (status, _) = wrapper.wait();
    assert_eq!(status, 124, "stopped at its maximum runtime");
}

#[test]
fn a_fleets_leases_reach_prometheus_beside_the_hosts_lock_files() {
    let etcd = Etcd::start();
    let (holder, _) = start(
        &etcd,
        &["--job", "held-job"],
        "held",
        "echo ready; sleep 30",
    );
    assert_eq!(run_script(&etcd, "failed", "exit 1"), 1);
    assert_eq!(run_script(&etcd, "fine", "true"), 0);
    let dir = tempfile::tempdir().unwrap();
    let textfiles = dir.path().join("textfiles");
    std::fs::create_dir(&textfiles).unwrap();

    // Every lease under the prefix, held or with a history: no NAME given.
    let leases = textfiles.join("leases.prom");
    let out = lockfile()
        .args([
            "inspect",
            "--etcd",
            &etcd.endpoint,
            "--format",
            "prometheus",
        ])
        .args(["--expect-every", "1h", "--output"])
        .arg(&leases)
        .bounded_output();
    // `failed` never succeeded: a critical finding, status 2.
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    promtool_accepts(&leases);
    // A lock file of this host, exported beside them.
    let lock = dir.path().join("local.lock");
    let (_local, _) =
        Background::spawn(&[lock.to_str().unwrap(), "sh", "-c", "echo ready; sleep 30"]);
    let locks = textfiles.join("locks.prom");
    let out = lockfile()
        .args(["inspect", "--format", "prometheus", "--output"])
        .arg(&locks)
        .arg(&lock)
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    promtool_accepts(&locks);

    let exporter = NodeExporter::start(&textfiles);
    let scraped = samples(&exporter.scrape());
    assert_eq!(
        value(&scraped, "node_textfile_scrape_error", &[]),
        Some(0.0),
        "node_exporter refused a file: {scraped:?}"
    );
    let etcd_label = ("engine", "etcd");
    let state = |lock: &str, state: &str| {
        value(
            &scraped,
            "lockfile_lock_state",
            &[etcd_label, ("lock", lock), ("state", state)],
        )
    };
    assert_eq!(state("held", "held"), Some(1.0));
    assert_eq!(state("held", "free"), Some(0.0));
    assert_eq!(state("failed", "free"), Some(1.0));
    assert_eq!(state("fine", "free"), Some(1.0));
    let pid = holder.pid().to_string();
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    assert_eq!(
        value(
            &scraped,
            "lockfile_lock_holder",
            &[etcd_label, ("lock", "held"), ("host", &host), ("pid", &pid)]
        ),
        Some(1.0)
    );
    let held = [etcd_label, ("lock", "held")];
    assert!(value(&scraped, "lockfile_lease_fencing_token", &held).unwrap() > 0.0);
    let left = value(&scraped, "lockfile_lease_ttl_remaining_seconds", &held).unwrap();
    let ttl = value(&scraped, "lockfile_lease_ttl_seconds", &held).unwrap();
    assert!(left <= ttl && ttl > 0.0, "{left} of {ttl}");
    assert!(value(&scraped, "lockfile_lock_acquired_timestamp_seconds", &held).unwrap() > 0.0);
    assert_eq!(
        value(
            &scraped,
            "lockfile_lock_finding",
            &[
                etcd_label,
                ("lock", "failed"),
                ("kind", "never_succeeded"),
                ("severity", "critical")
            ]
        ),
        Some(1.0)
    );
    assert!(
        value(
            &scraped,
            "lockfile_lock_last_success_timestamp_seconds",
            &[etcd_label, ("lock", "fine")]
        )
        .unwrap()
            > 0.0
    );
    assert_eq!(
        value(
            &scraped,
            "lockfile_lock_inspect_error",
            &[etcd_label, ("lock", "fine")]
        ),
        Some(0.0)
    );
    // The host's lock file, in the same families.
    assert_eq!(
        value(
            &scraped,
            "lockfile_lock_state",
            &[("lock", lock.to_str().unwrap()), ("state", "held")]
        ),
        Some(1.0)
    );

    // A name that cannot be inspected is an error sample, and UNKNOWN.
    let out = lockfile()
        .args([
            "inspect",
            "--etcd",
            &etcd.endpoint,
            "--format",
            "prometheus",
        ])
        .args(["fine", "no/such"])
        .bounded_output();
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let scraped = samples(&text);
    assert_eq!(
        value(
            &scraped,
            "lockfile_lock_inspect_error",
            &[etcd_label, ("lock", "no/such")]
        ),
        Some(1.0),
        "{text}"
    );
}

#[test]
fn every_engine_shares_one_json_shape() {
    let etcd = Etcd::start();
    let (_holder, _) = start(
        &etcd,
        &["--max-runtime", "1h"],
        "shaped",
        "echo ready; sleep 30",
    );
    let out = etcd.inspect(&["shaped", "no/such"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let reports: Value = serde_json::from_slice(&out.stdout).unwrap();
    let held = &reports[0];
    for key in [
        "engine",
        "name",
        "key",
        "state",
        "owner",
        "fencing_token",
        "lease_id",
        "ttl_seconds",
        "ttl_remaining_seconds",
        "last_run",
        "last_success",
        "findings",
    ] {
        assert!(held.get(key).is_some(), "{key} in {held}");
    }
    assert_eq!(held["engine"], "etcd");
    assert_eq!(held["key"], "lockfile/locks/shaped");
    assert!(held["lease_id"].as_i64().is_some(), "{held}");
    assert_eq!(held["owner"]["max_runtime_seconds"], 3600.0, "{held}");
    let failed = &reports[1];
    assert_eq!(failed["engine"], "etcd");
    assert_eq!(failed["name"], "no/such");
    assert!(
        failed["error"].as_str().unwrap().contains("no/such"),
        "{failed}"
    );
}

// ---------------------------------------------------------------------------
// `--once-per` under a lease

#[test]
fn four_contenders_on_a_lease_run_each_tick_once() {
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let first = common::ticks::next_tick();
    let args = ["--etcd", &etcd.endpoint, "--ttl", "2", "fleet"];
    let (_, by_claimed) = common::ticks::fire(5, &args, |_| Vec::new(), &log);
    common::ticks::assert_once_per_tick(&by_claimed, first, 5);
    // The lease's report shows the last claim and the last run's tick.
    let report: Value = serde_json::from_slice(&etcd.inspect(&["fleet"]).stdout).unwrap();
    assert!(
        report[0]["last_claimed_tick"]["tick"].is_string(),
        "{report}"
    );
    assert_eq!(
        report[0]["last_run"]["tick"], report[0]["last_claimed_tick"]["tick"],
        "{report}"
    );
}

/// Under etcd the local clock dates a run: contenders whose clocks are 20 s
/// off, twice a 10 s period's half, claim other ticks than the fleet's, and
/// a real tick runs more than once. What the docs say, shown.
#[test]
fn on_etcd_clocks_skewed_past_half_a_period_run_a_tick_twice() {
    common::ticks::require_faketime();
    let etcd = Etcd::start();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let args = ["--etcd", &etcd.endpoint, "--ttl", "2", "skewed"];
    let (by_real, by_claimed) = common::ticks::fire(3, &args, common::ticks::skewed, &log);
    let runs: u32 = by_real.values().sum();
    assert!(
        runs > 3,
        "3 real ticks ran {runs} times: {by_real:?}, claimed {by_claimed:?}"
    );
    assert!(by_real.values().any(|&n| n >= 2), "{by_real:?}");
}

#[test]
fn a_dead_claim_on_a_lease_is_run_again_in_its_tick() {
    let etcd = Etcd::start();
    common::ticks::a_dead_claim_is_run_again(
        &["--etcd", &etcd.endpoint, "--ttl", "2", "dead"],
        &["--etcd", &etcd.endpoint, "dead"],
    );
}

#[test]
fn a_failed_run_uses_up_its_tick_on_a_lease() {
    let etcd = Etcd::start();
    common::ticks::a_failed_run_uses_up_its_tick(&["--etcd", &etcd.endpoint, "failing"]);
}

#[test]
fn check_once_per_alarms_on_a_lease_that_missed_ticks() {
    let etcd = Etcd::start();
    let ran = lockfile()
        .args([
            "run",
            "--etcd",
            &etcd.endpoint,
            "--once-per",
            "1s",
            "ticking",
            "true",
        ])
        .bounded_output();
    assert_eq!(code(&ran), 0, "{}", stderr(&ran));
    let (status, json) = check(&etcd, &["--once-per", "1s"], "ticking");
    assert!(status == 0 || verdicts(&json) == ["missed_ticks"], "{json}");
    std::thread::sleep(Duration::from_secs(3));
    let (status, json) = check(&etcd, &["--once-per", "1s"], "ticking");
    assert_eq!(
        (status, verdicts(&json)),
        (2, vec!["missed_ticks".to_owned()]),
        "{json}"
    );
}

/// A host whose clock is 10 years ahead dates its run (etcd keeps no clock
/// of its own): an honest host's `check` does not believe those times, and
/// neither the silence alarm nor the missed-tick alarm is muted.
#[test]
fn a_run_dated_years_ahead_never_mutes_check_on_a_lease() {
    common::ticks::require_faketime();
    let etcd = Etcd::start();
    let faked = common::ticks::faked("+3650d");
    let out = std::process::Command::new(&faked[0])
        .args(&faked[1..])
        .arg(env!("CARGO_BIN_EXE_lockfile"))
        .args([
            "run",
            "--etcd",
            &etcd.endpoint,
            "--once-per",
            "1h",
            "ahead",
            "true",
        ])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (status, json) = check(&etcd, &["--expect-every", "1h"], "ahead");
    let kinds = verdicts(&json);
    assert_eq!(status, 2, "{json}");
    assert!(kinds.contains(&"never_succeeded".to_owned()), "{json}");
    assert!(kinds.contains(&"future_time".to_owned()), "{json}");
    assert!(json["report"]["last_success"].is_null(), "{json}");
    let (status, json) = check(&etcd, &["--once-per", "1h"], "ahead");
    assert_eq!(status, 2, "{json}");
    assert!(
        verdicts(&json).contains(&"missed_ticks".to_owned()),
        "{json}"
    );
}

/// Credentials in an endpoint are the user to authenticate as; every
/// message shows the endpoints rebuilt, the password as `***`, and an
/// endpoint that cannot be read for certain is refused by its position.
#[test]
fn a_password_in_an_endpoint_is_never_shown() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoints =
        format!("http://root:Zq%2F%3F%40%23%20Zq@127.0.0.1:{closed},127.0.0.1:{closed}");
    let shown = format!("http://root:***@127.0.0.1:{closed},127.0.0.1:{closed}");
    for format in ["text", "json"] {
        let out = lockfile()
            .args([
                "--log-format",
                format,
                "run",
                "--etcd",
                &endpoints,
                "x",
                "true",
            ])
            .bounded_output();
        let err = stderr(&out);
        assert_eq!(code(&out), 69, "{err}");
        assert!(err.contains(&shown), "{err}");
        assert!(!err.contains("Zq"), "{err}");
    }
    let out = lockfile()
        .args(["inspect", "--json", "--etcd", &endpoints])
        .bounded_output();
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(json.contains(&shown), "{json}");
    assert!(
        !json.contains("Zq") && !stderr(&out).contains("Zq"),
        "{json}"
    );
    for raw in [
        format!("http://root:Zq/Zq@127.0.0.1:{closed}"),
        format!("http://root:Zq@Zq@127.0.0.1:{closed}"),
        format!("127.0.0.1:{closed},http://root:Zq#Zq@127.0.0.1:{closed}"),
    ] {
        let out = lockfile()
            .args(["run", "--etcd", &raw, "x", "true"])
            .bounded_output();
        let err = stderr(&out);
        assert_eq!(code(&out), 64, "{err}");
        assert!(err.contains("cannot be read at byte"), "{err}");
        assert!(!err.contains("Zq"), "{err}");
    }
}

#[test]
fn docs_json_lists_every_key_of_a_lease() {
    let etcd = Etcd::start();
    common::json_doc::assert_lease_keys(&["--etcd", &etcd.endpoint]);
}

/// Every lease metric the package's alert rules name is one that inspect
/// writes for a held lease.
#[test]
fn the_alert_rules_name_only_lease_metrics_that_are_written() {
    let etcd = Etcd::start();
    common::lease_faults::the_alert_rules_name_only_lease_metrics_that_are_written(&[
        "--etcd",
        &etcd.endpoint,
    ]);
}

#[test]
fn slots_take_one_lease_each_and_a_waiter_takes_a_killed_holders_slot() {
    let etcd = Etcd::start();
    let lease = ["--etcd", &etcd.endpoint];
    common::lease_slots::n_runs_hold_n_slot_leases(&lease);
}

#[test]
fn at_most_n_slot_holders_at_once_while_holders_are_killed() {
    let etcd = Etcd::start();
    let lease = ["--etcd", &etcd.endpoint];
    common::lease_slots::the_bound_holds_under_chaos(&lease);
}
