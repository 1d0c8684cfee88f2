//! `lockfile run --postgres`, `inspect --postgres`, `check --postgres` and
//! `lockfile postgres schema|init` against a real PostgreSQL that each test
//! starts on loopback ports, directly and through a real PgBouncer in
//! transaction pooling mode (Debian: `postgresql`, `pgbouncer`).

mod common;
/// The PostgreSQL engine's test servers.
#[allow(dead_code, unreachable_pub)]
#[path = "../../lockfile-postgres/tests/common/pg.rs"]
mod pg;
/// The etcd crate's black hole: a proxy that stops forwarding and closes
/// nothing.
#[allow(dead_code, unreachable_pub)]
#[path = "../../lockfile-etcd/tests/common/proxy.rs"]
mod proxy;

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{Background, BoundedOutput, LOOP, code, lockfile, stderr};
use pg::{PASSWORD, Postgres};
use proxy::Proxy;

/// A server with the schema created by `lockfile postgres init`.
fn server() -> Postgres {
    let pg = Postgres::start();
    let out = lockfile()
        .args(["postgres", "init", &pg.url()])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    pg
}

fn inspect(url: &str, args: &[&str]) -> Output {
    lockfile()
        .args(["inspect", "--json", "--postgres", url])
        .args(args)
        .bounded_output()
}

fn run(url: &str, extra: &[&str], name: &str, script: &str) -> Output {
    lockfile()
        .args(["run", "--postgres", url])
        .args(extra)
        .args([name, "sh", "-c", script])
        .bounded_output()
}

fn start(url: &str, extra: &[&str], name: &str, script: &str) -> (Background, String) {
    let mut args = vec!["--postgres", url];
    args.extend(extra);
    args.extend([name, "sh", "-c", script]);
    Background::spawn(&args)
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn runs_skips_tokens_history_and_the_json_shape_as_under_etcd() {
    let mut pg = server();
    for url in [pg.url(), pg.bouncer_url()] {
        let out = run(
            &url,
            &["--ttl", "3"],
            "tokens",
            "echo \"$LOCKFILE_FENCING_TOKEN $LOCKFILE_LEASE\"; exit 7",
        );
        assert_eq!(code(&out), 7, "{}", stderr(&out));
        let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let (first, lease) = line.split_once(' ').unwrap();
        assert_eq!(lease, "tokens");
        let first: u64 = first.parse().unwrap();
        let out = run(&url, &[], "tokens", "echo \"$LOCKFILE_FENCING_TOKEN\"");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let second: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert!(second > first, "tokens rise: {first} then {second}");

        let (_holder, ready) = start(
            &url,
            &["--job", "report", "--max-runtime", "1h"],
            "held",
            "echo ready; sleep 30",
        );
        assert_eq!(ready, "ready");
        let out = lockfile()
            .args(["run", "-n", "--postgres", &url, "held", "true"])
            .bounded_output();
        assert_eq!(code(&out), 75, "{}", stderr(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
        assert!(stderr(&out).contains("report"), "{}", stderr(&out));

        let out = inspect(&url, &["held", "tokens", "no/such"]);
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
        assert_eq!(held["engine"], "postgres");
        assert_eq!(held["state"], "held");
        assert_eq!(held["key"], "lockfile.leases/held");
        assert!(held["lease_id"].is_null());
        assert_eq!(held["owner"]["max_runtime_seconds"], 3600.0, "{held}");
        assert_eq!(held["owner"]["job"], "report");
        let free = &reports[1];
        assert_eq!(free["state"], "free");
        assert_eq!(free["last_run"]["outcome"], "succeeded", "{free}");
        assert_eq!(free["last_run"]["consecutive_failures"], 0, "{free}");
        assert!(reports[2]["error"].as_str().unwrap().contains("no/such"));
        let out = inspect(&url, &[]);
        let all: Value = serde_json::from_slice(&out.stdout).unwrap();
        let names: Vec<&str> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"held") && names.contains(&"tokens"),
            "{names:?}"
        );
    }
    // Every run's end, in the runs table: two per URL.
    assert_eq!(
        pg.psql("SELECT count(*) FROM lockfile.runs WHERE name = 'tokens'"),
        "4"
    );
}

#[test]
fn check_gives_a_lease_its_verdicts() {
    let pg = server();
    let url = pg.url();
    let out = lockfile()
        .args([
            "check",
            "--json",
            "--expect-every",
            "1h",
            "--postgres",
            &url,
            "never",
        ])
        .bounded_output();
    assert_eq!(code(&out), 2, "never succeeded: {}", stderr(&out));
    assert_eq!(code(&run(&url, &[], "checked", "true")), 0);
    let out = lockfile()
        .args([
            "check",
            "--expect-every",
            "1h",
            "--postgres",
            &url,
            "checked",
        ])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn sigkill_of_the_wrapper_lets_a_waiting_contender_in_within_the_ttl_and_one_renewal() {
    let mut pg = server();
    let url = pg.bouncer_url();
    let ttl = Duration::from_secs(3);
    let (mut wrapper, command_pid) =
        start(&url, &["--ttl", "3"], "orphan", "echo $$; exec sleep 60");
    let command_pid: u32 = command_pid.parse().unwrap();
    let contender = {
        let url = url.clone();
        std::thread::spawn(move || {
            let out = lockfile()
                .args(["run", "-w", "30", "--postgres", &url, "orphan"])
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
    common::signal(wrapper.pid(), "KILL");
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

#[test]
fn a_missing_table_a_bad_password_a_refused_port_and_a_read_only_server_exit_69_in_one_line() {
    let pg = Postgres::start();
    let expect_69 = |url: &str, says: &[&str]| {
        let out = run(url, &[], "x", "true");
        let err = stderr(&out);
        assert_eq!(code(&out), 69, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            !err.contains(PASSWORD) && !err.contains("wrong-pw"),
            "{err}"
        );
        for s in says {
            assert!(err.contains(s), "{s:?} in {err}");
        }
    };
    expect_69(&pg.url(), &["SQLSTATE 42P01", "lockfile postgres init"]);
    expect_69(&pg.url().replace(PASSWORD, "wrong-pw"), &["SQLSTATE 28P01"]);
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    expect_69(
        &format!("postgres://lease:{PASSWORD}@127.0.0.1:{closed}/postgres"),
        &["Connection refused"],
    );
    let out = lockfile()
        .args(["postgres", "init", &pg.url()])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Idempotent.
    let out = lockfile()
        .args(["postgres", "init", &pg.url(), "--history-days", "7"])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(pg.psql("SELECT history_days FROM lockfile.settings"), "7");
    pg.psql("ALTER DATABASE postgres SET default_transaction_read_only = on");
    expect_69(&pg.url(), &["SQLSTATE 25006"]);
}

#[test]
fn the_url_comes_from_the_environment_and_the_schema_can_be_named() {
    let pg = Postgres::start();
    let out = lockfile()
        .args(["postgres", "init", "--postgres-schema", "jobs"])
        .env("LOCKFILE_POSTGRES_URL", pg.url())
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = lockfile()
        .args(["run", "--postgres-schema", "jobs", "envjob", "true"])
        .env("LOCKFILE_POSTGRES_URL", pg.url())
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // An explicit --etcd wins over the variable; a schema without
    // PostgreSQL is a usage error.
    let out = lockfile()
        .args([
            "run",
            "--etcd",
            "http://127.0.0.1:1",
            "-n",
            "etcdjob",
            "true",
        ])
        .env("LOCKFILE_POSTGRES_URL", pg.url())
        .bounded_output();
    assert_ne!(code(&out), 0);
    assert!(
        !stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
    let out = lockfile()
        .args(["run", "--postgres-schema", "jobs", "x.lock", "true"])
        .env_remove("LOCKFILE_POSTGRES_URL")
        .bounded_output();
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    assert_eq!(pg.psql("SELECT count(*) FROM jobs.runs"), "1");
    let schema = lockfile()
        .args(["postgres", "schema", "--postgres-schema", "jobs"])
        .bounded_output();
    assert_eq!(code(&schema), 0);
    let ddl = String::from_utf8_lossy(&schema.stdout);
    assert!(
        ddl.contains("CREATE TABLE IF NOT EXISTS jobs.leases"),
        "{ddl}"
    );
    assert!(
        ddl.contains("GRANT USAGE ON SEQUENCE jobs.fencing_tokens"),
        "{ddl}"
    );
}

#[test]
fn a_server_down_for_longer_than_the_ttl_stops_the_command_and_the_run_exits_79() {
    let pg = server();
    let (mut wrapper, ready) = start(
        &pg.url(),
        &["--ttl", "2"],
        "down",
        &format!("trap 'echo stopped >&2; exit 0' TERM; echo ready; {LOOP}"),
    );
    assert_eq!(ready, "ready");
    pg.stop();
    let (status, err) = wrapper.wait();
    pg.start_again();
    assert_eq!(status, 79, "{err}");
    assert!(err.contains("stopped"), "the command saw SIGTERM: {err}");
}

#[test]
fn behind_a_black_hole_the_wrapper_exits_within_the_ttl_and_a_second_of_the_cut() {
    let pg = server();
    let proxy = Proxy::start(&format!("127.0.0.1:{}", pg.port));
    let url = pg.url().replace(
        &format!("127.0.0.1:{}", pg.port),
        proxy.endpoint().trim_start_matches("http://"),
    );
    let ttl = Duration::from_secs(3);
    let script = format!("trap '' TERM; echo $$; {LOOP}");
    let (mut wrapper, pid) = Background::spawn(&[
        "--postgres",
        &url,
        "--ttl",
        "3",
        "holed",
        "sh",
        "-c",
        &script,
    ]);
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

// ---------------------------------------------------------------------------
// `--once-per` on PostgreSQL: the database's clock decides

#[test]
fn four_contenders_run_each_tick_once_through_pgbouncer() {
    let mut pg = server();
    let url = pg.bouncer_url();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let first = common::ticks::next_tick();
    let args = ["--postgres", &url, "--ttl", "2", "fleet"];
    let (_, by_claimed) = common::ticks::fire(5, &args, |_| Vec::new(), &log);
    common::ticks::assert_once_per_tick(&by_claimed, first, 5);
    let report: Value = serde_json::from_slice(&inspect(&url, &["fleet"]).stdout).unwrap();
    assert_eq!(
        report[0]["last_run"]["tick"], report[0]["last_claimed_tick"]["tick"],
        "{report}"
    );
}

/// Contenders whose clocks are 20 s off, twice half a 10 s period: the
/// database's clock dates every run, so each tick still runs once.
#[test]
fn clocks_skewed_past_half_a_period_still_run_each_tick_once() {
    common::ticks::require_faketime();
    let pg = server();
    let url = pg.url();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let first = common::ticks::next_tick();
    let args = ["--postgres", &url, "--ttl", "2", "skewed"];
    let (_, by_claimed) = common::ticks::fire(3, &args, common::ticks::skewed, &log);
    common::ticks::assert_once_per_tick(&by_claimed, first, 3);
}

#[test]
fn a_dead_claim_on_postgres_is_run_again_in_its_tick() {
    let pg = server();
    let url = pg.url();
    common::ticks::a_dead_claim_is_run_again(
        &["--postgres", &url, "--ttl", "2", "dead"],
        &["--postgres", &url, "dead"],
    );
}

#[test]
fn a_failed_run_uses_up_its_tick_on_postgres() {
    let pg = server();
    let url = pg.url();
    common::ticks::a_failed_run_uses_up_its_tick(&["--postgres", &url, "failing"]);
}

/// A holder through `url` whose COMMAND prints `ready`, then runs until
/// the file `go` exists.
fn hold_until(url: &str, name: &str, go: &std::path::Path) -> Background {
    let (holder, ready) = start(
        url,
        &["--ttl", "30"],
        name,
        &format!(
            "echo ready; while [ ! -e '{}' ]; do sleep 0.02; done",
            go.display()
        ),
    );
    assert_eq!(ready, "ready");
    holder
}

/// Starts `cmd` (a `lockfile --log-format json run …`) with its stderr in
/// `log`.
fn spawn_logging(cmd: &mut std::process::Command, log: &std::path::Path) -> std::process::Child {
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// The JSON events in `log` so far.
fn events_in(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn count(events: &[Value], event: &str) -> usize {
    events.iter().filter(|e| e["event"] == event).count()
}

/// Sessions subscribed to the default schema's channel.
fn listeners(pg: &Postgres) -> String {
    pg.psql(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE query = 'LISTEN \"lockfile.leases\"' AND pid <> pg_backend_pid()",
    )
}

/// `lockfile run -w --postgres-listen`: the waiter subscribes once the lease
/// is found held and asks again; the holder's release (through PgBouncer)
/// then wakes it by notification, not by its poll a second later.
/// LOCKFILE_POSTGRES_LISTEN_URL does the same when the option is absent.
#[test]
fn a_waiting_run_with_postgres_listen_is_woken_by_the_release() {
    let mut pg = server();
    let pooled = pg.bouncer_url();
    let direct = pg.url();
    let dir = common::Dir::new();
    for (name, by_option) in [("listened", true), ("listened-env", false)] {
        // The previous waiter's session is gone.
        common::wait_until("no listening session", || listeners(&pg) == "0");
        let go = dir.path(&format!("{name}.go"));
        let mut holder = hold_until(&pooled, name, &go);
        let log = dir.path(&format!("{name}.log"));
        let mut cmd = lockfile();
        cmd.args(["--log-format", "json", "run", "-w", "60"]).args([
            "--postgres",
            &pooled,
            "--ttl",
            "30",
        ]);
        if by_option {
            cmd.args(["--postgres-listen", &direct]);
        } else {
            cmd.env("LOCKFILE_POSTGRES_LISTEN_URL", &direct);
        }
        let mut waiter = spawn_logging(cmd.args([name, "true"]), &log);
        common::wait_until("the waiter's listening session", || listeners(&pg) == "1");
        // The attempt it made once subscribed, or a poll after it.
        let seen = count(&events_in(&log), "lock_contended");
        common::wait_until("the waiter's attempt after subscribing", || {
            count(&events_in(&log), "lock_contended") > seen
        });
        std::fs::write(&go, "").unwrap();
        assert_eq!(holder.wait().0, 0);
        let status = common::wait_within_patience(&mut waiter).expect("the waiter exits");
        let events = events_in(&log);
        assert_eq!(status.code(), Some(0), "{events:?}");
        let acquired = events
            .iter()
            .find(|e| e["event"] == "lock_acquired")
            .unwrap_or_else(|| panic!("{events:?}"));
        assert_eq!(acquired["woken_by"], "notification", "{events:?}");
        assert_eq!(count(&events, "listen_failed"), 0, "{events:?}");
    }
}

/// A listen URL that cannot be used costs a warning and the wait polls;
/// --postgres-listen without PostgreSQL is a usage error, and so is it with
/// etcd.
#[test]
fn a_bad_postgres_listen_url_warns_and_polls_and_without_postgres_it_is_a_usage_error() {
    let pg = server();
    let wrong = pg.url().replace(PASSWORD, "wrong-pw");
    let dir = common::Dir::new();
    let go = dir.path("go");
    let mut holder = hold_until(&pg.url(), "unheard", &go);
    let log = dir.path("log");
    let mut cmd = lockfile();
    cmd.args([
        "--log-format",
        "json",
        "run",
        "-w",
        "60",
        "--postgres",
        &pg.url(),
    ])
    .args(["--postgres-listen", &wrong, "unheard", "true"]);
    let mut waiter = spawn_logging(&mut cmd, &log);
    common::wait_until("the listener's warning", || {
        count(&events_in(&log), "listen_failed") == 1
    });
    std::fs::write(&go, "").unwrap();
    assert_eq!(holder.wait().0, 0);
    let status = common::wait_within_patience(&mut waiter).expect("the waiter exits");
    let events = events_in(&log);
    assert_eq!(status.code(), Some(0), "{events:?}");
    let warning = events
        .iter()
        .find(|e| e["event"] == "listen_failed")
        .unwrap();
    assert_eq!(warning["level"], "WARN", "{warning}");
    assert!(
        warning["error"].as_str().unwrap().contains("28P01"),
        "{warning}"
    );
    assert_eq!(count(&events, "listen_failed"), 1, "{events:?}");
    let acquired = events
        .iter()
        .find(|e| e["event"] == "lock_acquired")
        .unwrap();
    assert_eq!(acquired["woken_by"], "poll", "{events:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("wrong-pw"), "{text}");

    let out = lockfile()
        .args(["run", "--postgres-listen", &pg.url(), "x.lock", "true"])
        .env_remove("LOCKFILE_POSTGRES_URL")
        .bounded_output();
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--postgres-listen"),
        "{}",
        stderr(&out)
    );
    let out = lockfile()
        .args(["run", "--etcd", "http://127.0.0.1:1"])
        .args(["--postgres-listen", &pg.url(), "x", "true"])
        .bounded_output();
    assert_eq!(code(&out), 64, "{}", stderr(&out));
}
