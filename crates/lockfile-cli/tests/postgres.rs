//! `lockfile run --postgres`, `inspect --postgres`, `check --postgres` and
//! `lockfile postgres schema|init` against a real PostgreSQL that each test
//! starts on loopback ports, directly and through a real PgBouncer in
//! transaction pooling mode (Debian: `postgresql`, `pgbouncer`).

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use lockfile_examples::FencedStore;
use serde_json::Value;

use common::fenced::{Event, Writer};
use common::lease_faults::alive;
use common::{Background, BoundedOutput, code, lockfile, stderr, wait_until};
use lockfile_test_support::Proxy;
use lockfile_test_support::postgres::{self as pg, PASSWORD, Postgres};

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
    common::lease_run::inspect(&["--postgres", url], args)
}

fn run(url: &str, extra: &[&str], name: &str, script: &str) -> Output {
    common::lease_run::run(&["--postgres", url], extra, name, script)
}

fn start(url: &str, extra: &[&str], name: &str, script: &str) -> (Background, String) {
    common::lease_run::start(&["--postgres", url], extra, name, script)
}

/// A lease's holder is named as a lock file's is: its job name escaped
/// once, in quotes, ESC as `\e`, a C0 control and DEL as `\xHH`, a
/// backslash as `\\` (never Rust's `\u{1b}`, nor an escape escaped again),
/// in the conflict line; the table shows the same bytes the same way.
#[test]
fn a_job_name_with_control_bytes_is_escaped_exactly_once_in_a_lease_conflict_line() {
    let pg = server();
    let url = pg.url();
    let job = "j\x1b[8m\x01\x7f\\n";
    let shown = "j\\e[8m\\x01\\x7f\\\\n";
    let (mut holder, line) = start(&url, &["--job", job], "held", "echo ready; sleep 30");
    assert_eq!(line, "ready", "{}", holder.stderr_so_far());

    let out = lockfile()
        .args(["run", "-n", "--postgres", &url, "held", "true"])
        .bounded_output();
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("job \"{shown}\"")), "{err}");
    assert!(!err.contains("u{1b}"), "{err}");
    assert!(!err.contains("\\\\e"), "{err}");
    assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "{err:?}");

    let out = lockfile()
        .args(["inspect", "--postgres", &url, "held"])
        .bounded_output();
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(table.contains(&format!(" {shown} ")), "{table}");
    assert!(
        !table.chars().any(|c| c.is_control() && c != '\n'),
        "{table:?}"
    );

    holder.signal("TERM");
    holder.reap();
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

        let (_holder, token) = start(
            &url,
            &["--job", "report", "--max-runtime", "1h"],
            "held",
            "echo \"$LOCKFILE_TOKEN\"; sleep 30",
        );
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
        // COMMAND knows its run by the token of the record, as under a file.
        assert_eq!(held["owner"]["token"], token, "{held}");
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
    common::lease_faults::a_killed_wrapper_lets_a_waiting_contender_in_within_the_ttl(&[
        "--postgres",
        &pg.bouncer_url(),
    ]);
}

#[test]
fn a_command_that_never_beats_is_stopped_with_its_tree_and_the_lease_freed_at_once() {
    let pg = server();
    common::hung_lease::a_command_that_never_beats_is_stopped_and_its_lease_freed_at_once(&[
        "--postgres",
        &pg.url(),
    ]);
}

#[test]
fn a_command_that_beats_under_a_lease_runs_to_its_end() {
    let pg = server();
    common::hung_lease::a_command_that_beats_runs_to_its_end(&["--postgres", &pg.url()]);
}

#[test]
fn sigkill_of_the_wrapper_kills_the_whole_tree_before_a_second_holder_runs() {
    let pg = server();
    common::dead_wrapper::a_killed_wrappers_tree_dies_before_its_lease_lapses(&[
        "--postgres",
        &pg.url(),
    ]);
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
    // No GRANT without a role named, only how to print them.
    assert!(!ddl.contains("\nGRANT"), "{ddl}");
    assert!(
        ddl.contains("lockfile postgres schema --postgres-schema jobs --role ROLE"),
        "{ddl}"
    );
    let schema = lockfile()
        .args([
            "postgres",
            "schema",
            "--postgres-schema",
            "jobs",
            "--role",
            "app",
        ])
        .bounded_output();
    assert_eq!(code(&schema), 0);
    let ddl = String::from_utf8_lossy(&schema.stdout);
    assert!(
        ddl.contains("GRANT USAGE ON SEQUENCE jobs.fencing_tokens TO app;"),
        "{ddl}"
    );
}

/// `lockfile postgres schema` with these arguments.
fn print_schema(args: &[&str]) -> Output {
    lockfile()
        .args(["postgres", "schema"])
        .args(args)
        .bounded_output()
}

#[test]
fn a_role_or_schema_that_would_need_quoting_is_refused_and_a_plain_role_gets_exactly_its_grants() {
    // Unquoted, `JobsApp` would grant to `jobsapp`; the injection would be
    // run as SQL by whoever applies the output; `user` is a reserved key
    // word and would be a syntax error. Each is refused, naming the cause,
    // and nothing is printed.
    for (args, cause) in [
        (&["--role", "JobsApp"][..], "cannot name the role"),
        (
            &["--role", "x; ALTER ROLE x SUPERUSER; --"][..],
            "cannot name the role",
        ),
        (&["--role", "user"][..], "reserved key word"),
        (&["--postgres-schema", "user"][..], "reserved key word"),
    ] {
        let out = print_schema(args);
        assert_eq!(code(&out), 64, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(cause), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // A role that passes is granted exactly what the output says, on a
    // real server.
    let pg = Postgres::start();
    let out = print_schema(&["--postgres-schema", "jobs", "--role", "jobs_app"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    pg.psql("CREATE ROLE jobs_app");
    pg.psql(&String::from_utf8_lossy(&out.stdout));
    for table in ["leases", "history", "runs", "settings"] {
        assert_eq!(
            pg.psql(&format!(
                "SELECT has_table_privilege('jobs_app', 'jobs.{table}', 'SELECT, INSERT, UPDATE, DELETE')"
            )),
            "t",
            "{table}"
        );
    }
    // The fence: through its function alone, never its table.
    assert_eq!(
        pg.psql("SELECT has_function_privilege('jobs_app', 'jobs.fence(text, bigint)', 'EXECUTE')"),
        "t"
    );
    assert_eq!(
        pg.psql("SELECT has_table_privilege('jobs_app', 'jobs.fences', 'SELECT, INSERT, UPDATE, DELETE')"),
        "f"
    );
    assert_eq!(
        pg.psql("SELECT has_function_privilege('jobs_app', 'jobs.fence_reset(text)', 'EXECUTE')"),
        "f"
    );
}

/// `lockfile postgres schema | psql -v ON_ERROR_STOP=1`, as the owner of a
/// fresh database on a server that has no role of ours: the script runs to
/// its end (no GRANT to a role that does not exist), and the tables it made
/// take a run, its history and a skip.
#[test]
fn the_schema_pipes_into_psql_as_the_databases_owner_with_no_other_role() {
    let pg = Postgres::start();
    pg.psql("CREATE ROLE owner_only LOGIN PASSWORD 'owner-pw'");
    pg.psql("CREATE DATABASE fresh OWNER owner_only");
    let url = format!("postgres://owner_only:owner-pw@127.0.0.1:{}/fresh", pg.port);
    let schema = print_schema(&[]);
    assert_eq!(code(&schema), 0, "{}", stderr(&schema));
    let mut psql = Command::new(pg.psql_program())
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = psql.stdin.take().unwrap();
        stdin.write_all(&schema.stdout).unwrap();
    }
    let applied = psql.wait_with_output().unwrap();
    assert_eq!(
        applied.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    assert!(
        applied.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );

    let out = run(&url, &[], "piped", "echo ran");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ran");
    let (_holder, line) = start(&url, &[], "piped", "echo ready; sleep 30");
    assert_eq!(line, "ready");
    let out = lockfile()
        .args(["run", "-n", "--postgres", &url, "piped", "true"])
        .bounded_output();
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let count = Command::new(pg.psql_program())
        .args(["-X", "-q", "-At", "-d", &url, "-c"])
        .arg("SELECT count(*) FROM lockfile.runs WHERE name = 'piped'")
        .bounded_output();
    assert_eq!(String::from_utf8_lossy(&count.stdout).trim(), "1");
}

#[test]
fn the_embedded_reserved_key_words_are_the_live_servers() {
    let pg = Postgres::start();
    let live = pg.psql(
        "SELECT string_agg(word, ' ' ORDER BY word) FROM pg_get_keywords() WHERE catcode = 'R'",
    );
    let mut embedded = lockfile_postgres::schema::RESERVED_KEY_WORDS.to_vec();
    embedded.sort_unstable();
    assert_eq!(live, embedded.join(" "));
}

#[test]
fn a_failing_acquire_statement_is_reported_as_the_acquire_not_the_owner_record() {
    let pg = server();
    // A role with every grant but those on the leases table: the acquire
    // statement itself fails on the server, for real.
    pg.psql("CREATE ROLE no_leases LOGIN PASSWORD 'no-leases-pw'");
    pg.psql(&lockfile_postgres::schema::grants("lockfile", "no_leases"));
    pg.psql("REVOKE ALL ON lockfile.leases FROM no_leases");
    let url = pg.url().replacen(
        &format!("{}:{PASSWORD}@", pg::USER),
        "no_leases:no-leases-pw@",
        1,
    );
    let out = run(&url, &[], "noleases", "true");
    let err = stderr(&out);
    assert_eq!(code(&out), 69, "{err}");
    assert!(err.contains("acquire"), "{err}");
    assert!(err.contains("42501"), "{err}");
    assert!(!err.contains("owner record"), "{err}");
    assert!(!err.contains("no-leases-pw"), "{err}");
}

#[test]
fn a_bounded_wait_bounds_the_requests_to_a_silent_server() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = listener.local_addr().unwrap().to_string();
    let url = format!("postgres://lease@{server}/postgres");
    // Accepted and kept open, never answered, until the test ends.
    std::thread::spawn(move || {
        let kept: Vec<_> = listener.incoming().collect();
        drop(kept);
    });
    let out = lockfile()
        .args(["run", "-w", "1", "--postgres", &url, "silent", "true"])
        .bounded_output();
    let err = stderr(&out);
    assert_eq!(code(&out), 69, "{err}");
    assert!(err.contains(&server), "names the server: {err}");
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
fn a_server_down_for_longer_than_the_ttl_stops_the_command_and_the_run_exits_79() {
    let pg = server();
    common::lease_faults::a_stopped_server_stops_the_command_and_the_run_exits_79(
        &["--postgres", &pg.url()],
        || pg.stop(),
        || pg.start_again(),
    );
}

#[test]
fn behind_a_black_hole_the_wrapper_exits_within_the_ttl_and_a_second_of_the_cut() {
    let pg = server();
    let proxy = Proxy::start(&format!("127.0.0.1:{}", pg.port));
    let url = pg.url().replace(
        &format!("127.0.0.1:{}", pg.port),
        proxy.endpoint().trim_start_matches("http://"),
    );
    common::lease_faults::behind_a_black_hole_the_wrapper_exits_within_the_ttl_and_a_second(
        &["--postgres", &url],
        &proxy,
    );
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

/// Contenders whose clocks are 90 s and 300 s ahead, past the minute a
/// future time is forgiven: the server dates each run's finish, so nobody
/// disbelieves it, and each tick still runs once, by the command's own log
/// and by the `runs` table.
#[test]
fn clocks_minutes_ahead_still_run_each_tick_once() {
    let pg = server();
    let url = pg.url();
    common::ticks::clocks_minutes_ahead_still_run_each_tick_once(&[
        "--postgres",
        &url,
        "--ttl",
        "2",
        "ahead",
    ]);
    assert_eq!(
        pg.psql(
            "SELECT count(*) FROM lockfile.runs WHERE name = 'ahead' AND outcome = 'succeeded'"
        ),
        "3"
    );
}

/// A host whose clock is ten years ahead writes no time of its own into the
/// run history: the run's finish and start, in the document and in `runs`,
/// lie between the server's times before and after the run.
#[test]
fn a_host_ten_years_ahead_writes_the_servers_times() {
    common::ticks::require_faketime();
    let pg = server();
    let url = pg.url();
    let before = pg.psql("SELECT extract(epoch FROM clock_timestamp())");
    let faked = common::ticks::faked("+3650d");
    let mut cmd = common::in_a_standard_state(Command::new(&faked[0]));
    cmd.args(&faked[1..])
        .arg(env!("CARGO_BIN_EXE_lockfile"))
        .args(["run", "--postgres", &url, "--once-per", "1h", "decade"])
        .args(["sh", "-c", "sleep 0.2"]);
    let out = cmd.bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let after = pg.psql("SELECT extract(epoch FROM clock_timestamp())");
    let times = pg.psql(
        "SELECT string_agg(extract(epoch FROM t)::text, ' ') FROM ( \
           SELECT (record #>> '{last_run,finished_at}')::timestamptz AS t FROM lockfile.history WHERE name = 'decade' \
           UNION ALL SELECT (record #>> '{last_run,started_at}')::timestamptz FROM lockfile.history WHERE name = 'decade' \
           UNION ALL SELECT (record #>> '{last_success,finished_at}')::timestamptz FROM lockfile.history WHERE name = 'decade' \
           UNION ALL SELECT (record #>> '{last_claimed_tick,claimed_at}')::timestamptz FROM lockfile.history WHERE name = 'decade' \
           UNION ALL SELECT finished_at FROM lockfile.runs WHERE name = 'decade' \
           UNION ALL SELECT started_at FROM lockfile.runs WHERE name = 'decade') AS all_times",
    );
    let (before, after): (f64, f64) = (before.parse().unwrap(), after.parse().unwrap());
    let times: Vec<f64> = times.split(' ').map(|t| t.parse().unwrap()).collect();
    assert_eq!(times.len(), 6, "{times:?}");
    for t in &times {
        assert!(
            before <= *t && *t <= after,
            "{t} not within the server's {before}..{after}: {times:?}"
        );
    }
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

/// `lockfile` with a home of its own, so that no `~/.postgresql/` of the
/// machine's takes part.
fn lockfile_at_home(home: &std::path::Path) -> std::process::Command {
    let mut cmd = lockfile();
    cmd.env("HOME", home)
        .env_remove("PGSSLMODE")
        .env_remove("PGSSLROOTCERT");
    cmd
}

fn encrypted(pg: &Postgres, app: &str) -> String {
    pg.psql(&format!(
        "SELECT bool_and(s.ssl) || ' ' || count(*) FROM pg_stat_ssl s \
         JOIN pg_stat_activity a USING (pid) WHERE a.application_name = '{app}'"
    ))
}

#[test]
fn run_over_tls_with_verify_full_from_the_url_or_the_environment() {
    let pg = Postgres::start_with_tls("DNS:localhost");
    let home = tempfile::tempdir().unwrap();
    let ca = pg.root_cert();
    let url = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        pg.url_at("localhost"),
        ca.display()
    );
    let out = lockfile_at_home(home.path())
        .args(["postgres", "init", &url])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Renewed every third of a second for two seconds, then released: a
    // lost lease would exit 79.
    let out = lockfile_at_home(home.path())
        .args(["run", "--postgres", &url, "--ttl", "1", "tls", "sh", "-c"])
        .arg("sleep 2; echo \"$LOCKFILE_FENCING_TOKEN\"")
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = lockfile_at_home(home.path())
        .args(["inspect", "--json", "--postgres", &url, "tls"])
        .bounded_output();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report[0]["state"], "free", "{report}");
    assert_eq!(report[0]["last_run"]["outcome"], "succeeded", "{report}");

    // The same from libpq's variables, with the holder's connection
    // seen encrypted by the server.
    let mut cmd = lockfile_at_home(home.path());
    cmd.env("PGSSLMODE", "verify-full")
        .env("PGSSLROOTCERT", &ca)
        .arg("run")
        .arg("--postgres")
        .arg(format!(
            "{}?application_name=cli-tls",
            pg.url_at("localhost")
        ))
        .args(["held", "sh", "-c", "echo ready; sleep 30"]);
    let (holder, ready) = Background::start(cmd);
    assert_eq!(ready, "ready");
    assert_eq!(encrypted(&pg, "cli-tls"), "true 1");
    drop(holder);
}

#[test]
fn a_certificate_that_does_not_verify_or_a_server_without_tls_exits_69_in_one_line() {
    let pg = Postgres::start_with_tls("DNS:localhost");
    let plain = Postgres::start();
    let home = tempfile::tempdir().unwrap();
    let expect = |url: &str, status: i32, says: &[&str]| {
        let out = lockfile_at_home(home.path())
            .args(["run", "--postgres", url, "x", "true"])
            .bounded_output();
        let err = stderr(&out);
        assert_eq!(code(&out), status, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!err.contains(PASSWORD), "{err}");
        for s in says {
            assert!(err.contains(s), "{s:?} in {err}");
        }
    };
    let ca = pg.root_cert();
    expect(
        &format!(
            "{}?sslmode=verify-full&sslrootcert={}",
            pg.url(),
            ca.display()
        ),
        69,
        &[
            "127.0.0.1",
            "certificate verify failed",
            "not valid for name \"127.0.0.1\"",
        ],
    );
    let other = pg.other_root_cert();
    expect(
        &format!(
            "{}?sslmode=verify-full&sslrootcert={}",
            pg.url_at("localhost"),
            other.display()
        ),
        69,
        &["certificate verify failed", "not signed by a CA in"],
    );
    // No sslrootcert: libpq's default file, which this home lacks.
    expect(
        &format!("{}?sslmode=verify-full", pg.url_at("localhost")),
        69,
        &[&format!(
            "root certificate file `{}` does not exist",
            home.path().join(".postgresql/root.crt").display()
        )],
    );
    expect(
        &format!("{}?sslmode=require", plain.url()),
        69,
        &["server does not support TLS"],
    );
    expect(
        &format!("{}?sslmode=verify_full", plain.url()),
        64,
        &["invalid sslmode \"verify_full\""],
    );
    // Once the default file exists, verify-full uses it.
    std::fs::create_dir(home.path().join(".postgresql")).unwrap();
    std::fs::copy(&ca, home.path().join(".postgresql/root.crt")).unwrap();
    let url = format!("{}?sslmode=verify-full", pg.url_at("localhost"));
    let out = lockfile_at_home(home.path())
        .args(["postgres", "init", &url])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

// ---------------------------------------------------------------------------
// Faults a fencing token answers: a stopped holder, a server clock that steps

/// The test that runs as COMMAND in the fault tests below: a writer to a
/// fenced store (see `common::fenced`).
const WRITER: &str = "fenced_writer_entry";

#[test]
fn fenced_writer_entry() {
    common::fenced::write_if_requested();
}

#[test]
fn a_run_stopped_past_its_ttl_is_fenced_off_and_exits_79_once_continued() {
    let mut pg = server();
    common::lease_faults::a_run_stopped_past_its_ttl_is_fenced_off_and_exits_79(
        &["--postgres", &pg.bouncer_url()],
        WRITER,
    );
}

/// The server's wall clock steps forward past the TTL while A holds: by the
/// database's clock A's lease has expired, so B takes it at once with a
/// larger token, while A's monotonic deadline is still far ahead and A
/// still believes it holds. The store refuses A's next write; A's next
/// renewal, which checks its token and the expiry, finds the lease gone:
/// the run stops COMMAND and exits 79 long before A's own deadline.
#[test]
fn a_server_clock_stepped_past_the_ttl_hands_over_the_lease_and_the_holder_stops_at_its_next_renewal()
 {
    let mut pg = Postgres::start_with_steppable_clock(&[]);
    let out = lockfile()
        .args(["postgres", "init", &pg.url()])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let url = pg.bouncer_url();
    // Renewals every 10 s: the step and B's run fit well before A's first.
    let ttl = Duration::from_secs(30);
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store.json");
    let store = FencedStore::new(&store_path);
    let a = Writer::new(&store_path, dir.path().join("a.log"));
    let (mut wrapper, _) =
        Background::start(a.run(WRITER, &["--postgres", &url, "--ttl", "30", "stepped"]));
    let (a_pid, a_token) = a.started();
    let started = Instant::now();
    a.wait_for("a first accepted write", |e| {
        matches!(e, Event::Accepted { .. })
    });

    let ahead = ttl * 2;
    pg.step_clock(ahead);
    let stepped_at = Instant::now();
    // The server's clock did step, and psql's (the real one) did not.
    let server_now: f64 = pg
        .psql("SELECT extract(epoch FROM clock_timestamp())")
        .parse()
        .unwrap();
    let real_now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        server_now - real_now > ahead.as_secs_f64() - 5.0,
        "the server's clock is {:.1}s ahead",
        server_now - real_now
    );

    let b = Writer::new(&store_path, dir.path().join("b.log")).writes(1);
    let out = b
        .run(
            WRITER,
            &["-n", "--postgres", &url, "--ttl", "30", "stepped"],
        )
        .bounded_output();
    assert_eq!(code(&out), 0, "B takes the lease at once: {}", stderr(&out));
    let handed_over = stepped_at.elapsed();
    let (_, b_token) = b.started();
    assert!(b_token > a_token, "tokens rise: {a_token} then {b_token}");
    assert_eq!(
        wrapper.try_code(),
        None,
        "A still runs, believing it holds: {}",
        wrapper.stderr_so_far()
    );
    let late = a.wait_for("A's late write", |e| matches!(e, Event::Refused { .. }));
    assert!(
        matches!(late, Event::Refused { highest, .. } if highest == b_token),
        "{late:?}"
    );

    let (status, err) = wrapper.wait();
    let exited = started.elapsed();
    eprintln!(
        "server clock stepped {ahead:?} ahead (TTL {ttl:?}): B's run was done {handed_over:?} after the step, token {a_token} -> {b_token}; A exited {exited:?} after it acquired\n{err}"
    );
    assert_eq!(status, 79, "{err}");
    // Declared by the renewal's answer, not by the deadline.
    assert!(
        err.contains("the lease on `stepped` is lost (the server answered a renewal"),
        "{err}"
    );
    assert!(exited < ttl, "A stopped {exited:?} after acquiring");
    assert!(!alive(a_pid), "COMMAND was killed: {err}");
    common::lease_faults::assert_fenced(&store, a_token, b_token);
}

// ---------------------------------------------------------------------------
// A serializable server default: 40001 and 40P01 retried, and counted

/// The `statement_retried` events in a `--log-format json` stderr, each
/// checked for its shape: a JSON object with the lease's key, the
/// statement's operation, a retryable SQLSTATE and the attempt that failed.
fn retries(stderr: &str, name: &str) -> Vec<Value> {
    let events: Vec<Value> = stderr
        .lines()
        .filter(|l| l.contains("statement_retried"))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for e in &events {
        assert_eq!(e["event"], "statement_retried", "{e}");
        assert_eq!(e["level"], "INFO", "{e}");
        assert_eq!(e["key"], format!("lockfile.leases/{name}"), "{e}");
        assert!(!e["op"].as_str().unwrap_or("").is_empty(), "{e}");
        assert!(
            matches!(e["sqlstate"].as_str(), Some("40001" | "40P01")),
            "{e}"
        );
        assert!((1..5).contains(&e["attempt"].as_u64().unwrap_or(0)), "{e}");
    }
    events
}

/// Under `default_transaction_isolation = serializable`, a transaction of
/// psql's that updates the lease's row and commits while the holder's
/// renewal waits on that row makes the renewal fail with 40001 ("could not
/// serialize access due to concurrent update"), every time: the renewal is
/// sent again, once, succeeds, and the run goes on to exit 0. Contending
/// runs meanwhile stay one at a time with rising tokens, however many
/// statements they retried.
#[test]
fn under_a_serializable_default_a_conflicting_update_is_retried_once_and_contention_stays_correct()
{
    let mut pg = Postgres::start_with(&["default_transaction_isolation=serializable"]);
    let out = lockfile()
        .args(["postgres", "init", &pg.url()])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        pg.psql("SHOW default_transaction_isolation"),
        "serializable"
    );
    let url = pg.bouncer_url();
    let dir = tempfile::tempdir().unwrap();
    let done = dir.path().join("done");

    // Renewals every 3 s, each answered within 3 s.
    let (mut holder, ready) = Background::spawn(&[
        "--log-format",
        "json",
        "--postgres",
        &url,
        "--ttl",
        "9",
        "retried",
        "sh",
        "-c",
        &format!(
            "echo ready; for i in $(seq 1200); do [ -e '{}' ] && exit 0; sleep 0.05; done; exit 1",
            done.display()
        ),
    ]);
    assert_eq!(ready, "ready");
    let mut psql = Command::new(pg.psql_program())
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &pg.url()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut session = psql.stdin.take().unwrap();
    use std::io::Write as _;
    // Read committed: should a renewal commit while psql's update waits,
    // psql's transaction goes on with the new row instead of failing.
    // The holder's statements keep the server's default, serializable.
    session
        .write_all(
            b"BEGIN ISOLATION LEVEL READ COMMITTED;\n\
              UPDATE lockfile.leases SET renewed_at = renewed_at WHERE name = 'retried';\n",
        )
        .unwrap();
    session.flush().unwrap();
    // The row is psql's until it commits; the holder's next renewal waits.
    wait_until("psql's update", || {
        pg.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' \
             AND query LIKE 'UPDATE lockfile.leases%'",
        ) == "1"
    });
    wait_until("the renewal to wait on the row", || {
        pg.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND query LIKE '%renewed_at = pg_catalog.statement_timestamp()%'",
        ) == "1"
    });
    session.write_all(b"COMMIT;\n").unwrap();
    drop(session);
    assert!(psql.wait().unwrap().success());
    wait_until("the retry", || {
        !retries(&holder.stderr_so_far(), "retried").is_empty()
    });
    // The retried renewal answered: the holder's lease is still the row's.
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(&done, b"").unwrap();
    let (status, err) = holder.wait();
    assert_eq!(status, 0, "{err}");
    let retried = retries(&err, "retried");
    assert_eq!(retried.len(), 1, "{err}");
    assert_eq!(retried[0]["sqlstate"], "40001", "{err}");
    assert_eq!(retried[0]["attempt"], 1, "{err}");
    assert_eq!(retried[0]["op"], "Renew", "{err}");
    assert!(!err.contains("renewal_failed"), "{err}");
    assert!(!err.contains("\"lease_lost\""), "{err}");

    // Contention: four contenders, five runs each, one at a time.
    let held = dir.path().join("held");
    let tokens = dir.path().join("tokens");
    let script = format!(
        "mkdir '{held}' || exit 99; echo \"$LOCKFILE_FENCING_TOKEN\" >> '{tokens}'; sleep 0.02; rmdir '{held}'",
        held = held.display(),
        tokens = tokens.display()
    );
    let contenders: Vec<_> = (0..4)
        .map(|_| {
            let (url, script) = (url.clone(), script.clone());
            std::thread::spawn(move || {
                (0..5)
                    .map(|_| {
                        lockfile()
                            .args(["--log-format", "json", "run", "-w", "60"])
                            .args(["--postgres", &url, "--ttl", "5", "serial"])
                            .args(["sh", "-c", &script])
                            .bounded_output()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut count = 0;
    for out in contenders.into_iter().flat_map(|t| t.join().unwrap()) {
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        count += retries(&stderr(&out), "serial").len();
    }
    let tokens: Vec<u64> = std::fs::read_to_string(&tokens)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(tokens.len(), 20);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    eprintln!("serializable: 20 contended runs retried {count} statement(s)");
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

/// A password holding every byte that ends a part of a URL or of the
/// `key=value` form (`/`, `?`, `@`, `#`, a blank, a newline, a `%2F`
/// that must stay as it is, a quote, a backslash); `Zq` marks every piece
/// of it, so that no piece may show anywhere.
const ODD: &str = "Zq/1?Zq@2#Zq 3\nZq%2F4'Zq\\5";

/// `text` with every byte but letters and digits percent-encoded.
fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A superuser `odd` whose password is [`ODD`]; its URL and its
/// `key=value` string to `port`.
fn odd_role(pg: &Postgres) -> impl Fn(u16) -> [String; 3] {
    pg.psql(&format!(
        "CREATE ROLE odd LOGIN SUPERUSER PASSWORD '{}'",
        ODD.replace('\'', "''")
    ));
    |port| {
        [
            format!(
                "postgresql://odd:{}@127.0.0.1:{port}/postgres",
                encoded(ODD)
            ),
            format!(
                "host=127.0.0.1 port={port}\nuser=odd password='{}' dbname=postgres",
                ODD.replace('\\', "\\\\").replace('\'', "\\'")
            ),
            // libpq decodes a query's key names too.
            format!(
                "postgres://127.0.0.1:{port}/postgres?user=odd&pass%77ord={}",
                encoded(ODD)
            ),
        ]
    }
}

fn no_secret(what: &str, text: &str) {
    assert!(
        !text.contains("Zq"),
        "a piece of the password in {what}: {text}"
    );
}

#[test]
fn a_password_holding_any_byte_authenticates_and_shows_nowhere() {
    let pg = server();
    let urls = odd_role(&pg);
    for url in urls(pg.port) {
        let out = run(&url, &[], "odd", "echo ran");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
        no_secret("stderr", &stderr(&out));
    }
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for (url, shown) in urls(closed).iter().zip([
        format!("postgresql://odd:***@127.0.0.1:{closed}/postgres"),
        format!("host=127.0.0.1 port={closed} user=odd password=*** dbname=postgres"),
        format!("postgres://127.0.0.1:{closed}/postgres?user=odd&password=***"),
    ]) {
        for format in ["text", "json"] {
            let out = lockfile()
                .args(["--log-format", format, "run", "--postgres", url])
                .args(["odd", "echo", "ran"])
                .bounded_output();
            assert_eq!(code(&out), 69, "{}", stderr(&out));
            let err = stderr(&out);
            assert!(err.contains(&shown), "{shown:?} in {err}");
            no_secret("stderr", &err);
            no_secret("stdout", &String::from_utf8_lossy(&out.stdout));
        }
        let out = inspect(url, &[]);
        let json = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(json.contains(&shown), "{json}");
        no_secret("inspect --json", &json);
        no_secret("inspect's stderr", &stderr(&out));
        let out = lockfile()
            .args([
                "check",
                "--json",
                "--expect-every",
                "1h",
                "--postgres",
                url,
                "odd",
            ])
            .bounded_output();
        let json = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(json.contains(&shown), "{json}");
        no_secret("check --json", &json);
    }
}

#[test]
fn a_connection_string_that_cannot_be_read_for_certain_is_refused_by_position_never_shown() {
    for (url, form) in [
        // The password raw: a `/`, a `?`, an `@`, a `#`, a blank, a newline.
        (
            format!("postgresql://odd:{ODD}@127.0.0.1:1/postgres"),
            "a postgresql:// URL) cannot be read at byte 26",
        ),
        (
            "postgres://odd:Zq#Zq@127.0.0.1:1/postgres".to_owned(),
            "a postgres:// URL) cannot be read at byte 17",
        ),
        (
            "postgres://odd:Zq@Zq@127.0.0.1:1/postgres".to_owned(),
            "a postgres:// URL) cannot be read at byte 20",
        ),
        (
            "host=127.0.0.1 port=1 password='Zq Zq".to_owned(),
            "a key=value string) cannot be read at byte 31",
        ),
        (
            "host=127.0.0.1 port=1 password=Zq Zq".to_owned(),
            "a key=value string) cannot be read at byte 36",
        ),
    ] {
        for args in [
            vec!["run", "--postgres", &url, "odd", "true"],
            vec!["inspect", "--json", "--postgres", &url],
            vec![
                "check",
                "--json",
                "--expect-every",
                "1h",
                "--postgres",
                &url,
                "odd",
            ],
            vec![
                "run",
                "--postgres-listen",
                &url,
                "--postgres",
                "postgres://127.0.0.1:1/x",
                "odd",
                "true",
            ],
        ] {
            let out = lockfile().args(&args).bounded_output();
            let err = stderr(&out);
            assert_eq!(code(&out), 64, "{args:?}: {err}");
            assert!(err.contains(form), "{form:?} in {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            no_secret("stderr", &err);
            no_secret("stdout", &String::from_utf8_lossy(&out.stdout));
        }
    }
}

#[cfg(feature = "ping")]
#[test]
fn a_failed_renewal_reaches_the_log_and_the_ping_with_the_url_rebuilt() {
    use common::ping::{Answer, Server};
    let pg = server();
    let urls = odd_role(&pg);
    let dir = tempfile::tempdir().unwrap();
    for format in ["text", "json"] {
        let proxy = Proxy::start(&format!("127.0.0.1:{}", pg.port));
        let port: u16 = proxy
            .endpoint()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let pings = Server::start(Answer::Ok);
        let [url, ..] = urls(port);
        let ping = pings.url();
        let done = dir.path().join(format);
        // COMMAND outlives the failed renewal (it ignores the SIGTERM
        // before the lapse), so that the event is written while its
        // output is captured; it ends once the test has seen the event.
        let script = format!(
            "trap '' TERM; echo ready; for i in $(seq 1200); do [ -e '{}' ] && exit 0; sleep 0.05; done",
            done.display()
        );
        let (mut wrapper, ready) = Background::spawn(&[
            "--log-format",
            format,
            "--postgres",
            &url,
            "--ttl",
            "6",
            "--ping",
            &ping,
            "--ping-log-bytes",
            "100000",
            "renewed",
            "sh",
            "-c",
            &script,
        ]);
        assert_eq!(ready, "ready");
        proxy.blackhole();
        wait_until("a failed renewal", || {
            wrapper.stderr_so_far().contains("renewal_failed")
        });
        std::fs::write(&done, b"").unwrap();
        let (_, err) = wrapper.wait();
        assert!(err.contains("odd:***@127.0.0.1"), "{err}");
        no_secret("stderr", &err);
        let requests = pings.wait_for(2);
        let last = &requests.last().unwrap().body;
        assert!(last.contains("renewal_failed"), "{format}: {last}");
        assert!(last.contains("odd:***@127.0.0.1"), "{format}: {last}");
        for r in &requests {
            no_secret("a ping", &r.body);
        }
    }
}

/// A role with only the documented grants writes an expiry of `'infinity'`
/// and a history version at the largest bigint into one name's rows:
/// `inspect --postgres` of every name still lists every name, and a
/// `--once-per` run of the poisoned name runs and is recorded.
#[test]
fn a_row_poisoned_by_a_dml_role_costs_neither_the_listing_nor_the_names_runs() {
    let pg = server();
    let url = pg.url();
    for name in ["poisoned", "other"] {
        let out = run(&url, &[], name, "true");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    pg.psql("CREATE ROLE vandal NOLOGIN");
    pg.psql(&lockfile_postgres::schema::grants("lockfile", "vandal"));
    pg.psql(
        "SET ROLE vandal; \
         UPDATE lockfile.leases SET expires_at = 'infinity' WHERE name = 'poisoned'; \
         UPDATE lockfile.history SET version = 9223372036854775807 WHERE name = 'poisoned'; \
         RESET ROLE",
    );
    let out = inspect(&url, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    let states: Vec<(&str, &str)> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [("other", "free"), ("poisoned", "free")], "{all}");
    assert!(
        all[1]["content_error"]
            .as_str()
            .is_some_and(|e| e.contains("treated as expired")),
        "{all}"
    );
    assert!(all[0].get("content_error").is_none(), "{all}");
    let out = run(&url, &["--once-per", "1h"], "poisoned", "echo ran");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ran");
    assert_eq!(
        pg.psql("SELECT version FROM lockfile.history WHERE name = 'poisoned'"),
        "2"
    );
    assert_eq!(
        pg.psql("SELECT count(*) FROM lockfile.runs WHERE name = 'poisoned'"),
        "2"
    );
}

/// What a hostile server answers every statement with, after letting the
/// client in.
#[derive(Clone, Copy, Debug)]
enum Flood {
    /// A row description, then data rows without end.
    Rows,
    /// A row description, then data rows of 512 KiB without end.
    BigRows,
    /// A row description, then one data row declaring 1 GiB, and zeros.
    HugeRow,
}

/// A hostile PostgreSQL server on a loopback port: it speaks enough of the
/// protocol to let any client in without a password (AuthenticationOk,
/// BackendKeyData, ReadyForQuery), then floods the first statement as
/// `flood` says until the client hangs up. Returns its URL.
fn hostile_server(flood: Flood) -> String {
    use std::net::TcpListener;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            // Ends with an error when the client hangs up.
            std::thread::spawn(move || hostile_session(stream, flood));
        }
    });
    format!("postgres://lease:{PASSWORD}@127.0.0.1:{port}/postgres?sslmode=disable")
}

/// A backend message: its type byte, its length (itself included), `body`.
fn backend(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&(u32::try_from(body.len()).unwrap() + 4).to_be_bytes());
    m.extend_from_slice(body);
    m
}

fn hostile_session(mut s: std::net::TcpStream, flood: Flood) -> std::io::Result<()> {
    use std::io::{Read, Write};
    /// The code of an SSLRequest, in place of a protocol version.
    const SSL_REQUEST: [u8; 4] = 80_877_103_u32.to_be_bytes();
    // The startup packet (an SSLRequest first is refused with `N`).
    loop {
        let mut len = [0; 4];
        s.read_exact(&mut len)?;
        let mut body = vec![0; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
        s.read_exact(&mut body)?;
        if body.get(..4) != Some(&SSL_REQUEST[..]) {
            break;
        }
        s.write_all(b"N")?;
    }
    let mut hello = backend(b'R', &0_u32.to_be_bytes());
    hello.extend(backend(b'K', &[0; 8]));
    hello.extend(backend(b'Z', b"I"));
    s.write_all(&hello)?;
    // The first statement (Parse, Bind, Describe, Execute, Sync, sent
    // together): whatever it is, the reply is the flood.
    let mut statement = [0; 4096];
    let _ = s.read(&mut statement)?;
    let mut reply = backend(b'1', b"");
    reply.extend(backend(b'2', b""));
    // One column, `n`, an int8 in binary.
    let mut description = 1_u16.to_be_bytes().to_vec();
    description.extend_from_slice(b"n\0");
    description.extend_from_slice(&0_u32.to_be_bytes());
    description.extend_from_slice(&0_u16.to_be_bytes());
    description.extend_from_slice(&20_u32.to_be_bytes());
    description.extend_from_slice(&8_u16.to_be_bytes());
    description.extend_from_slice(&(-1_i32).to_be_bytes());
    description.extend_from_slice(&1_u16.to_be_bytes());
    reply.extend(backend(b'T', &description));
    s.write_all(&reply)?;
    match flood {
        Flood::Rows => {
            let mut row = 1_u16.to_be_bytes().to_vec();
            row.extend_from_slice(&8_u32.to_be_bytes());
            row.extend_from_slice(&7_i64.to_be_bytes());
            let rows = backend(b'D', &row).repeat(4096);
            loop {
                s.write_all(&rows)?;
            }
        }
        Flood::BigRows => {
            const BIG: u32 = 512 << 10;
            let mut row = 1_u16.to_be_bytes().to_vec();
            row.extend_from_slice(&BIG.to_be_bytes());
            row.resize(row.len() + BIG as usize, 0);
            let row = backend(b'D', &row);
            loop {
                s.write_all(&row)?;
            }
        }
        Flood::HugeRow => {
            const GIB: u32 = 1 << 30;
            let mut header = vec![b'D'];
            header.extend_from_slice(&GIB.to_be_bytes());
            header.extend_from_slice(&1_u16.to_be_bytes());
            header.extend_from_slice(&(GIB - 10).to_be_bytes());
            s.write_all(&header)?;
            let zeros = vec![0; 1 << 16];
            for _ in 0..(GIB >> 16) {
                s.write_all(&zeros)?;
            }
            // The client has it all: wait for it to hang up.
            s.read(&mut statement).map(drop)
        }
    }
}

/// Waiting for a child with its resource usage, which `std` does not give.
mod sys {
    use std::process::Child;
    use std::time::{Duration, Instant};

    /// How long a command may take before the test fails instead of
    /// hanging (not a threshold: the commands here end within their
    /// request timeout).
    const PATIENCE: Duration = Duration::from_secs(60);

    /// Waits for `child` (killing it and failing after [`PATIENCE`]):
    /// its exit code, and its peak resident set in bytes.
    pub(super) fn wait_with_peak_rss(mut child: Child) -> (i32, u64) {
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        let started = Instant::now();
        loop {
            let mut status = 0;
            // SAFETY: a rusage is integers and timevals, for which all
            // zeros is a value.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: `status` and `usage` are valid for writes; the pid is
            // our own child, not yet waited for.
            let waited = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
            assert!(waited >= 0, "wait4: {}", std::io::Error::last_os_error());
            if waited == pid {
                assert!(libc::WIFEXITED(status), "the command died: {status:#x}");
                let peak = u64::try_from(usage.ru_maxrss).unwrap() * 1024;
                return (libc::WEXITSTATUS(status), peak);
            }
            if started.elapsed() > PATIENCE {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the command still ran after {PATIENCE:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The most memory `lockfile run` may take against a hostile server: a
/// few times what it takes against an honest one, far below what either
/// flood would cost if held.
const MEMORY_BOUND: u64 = 64 << 20;

/// `lockfile run NAME true` against a server flooding `flood`: its exit
/// code, its stderr and its peak resident set.
fn run_against(flood: Flood) -> (i32, String, u64) {
    let url = hostile_server(flood);
    against(flood, &["run", "--postgres", &url, "flooded", "true"])
}

/// `lockfile ARGS` against the hostile server: its exit code, its output
/// and its peak resident set.
fn against(flood: Flood, args: &[&str]) -> (i32, String, u64) {
    let stderr = tempfile::tempfile().unwrap();
    let child = lockfile()
        .args(args)
        .stdin(Stdio::null())
        // Together: `inspect` reports a failure per name on stdout.
        .stdout(stderr.try_clone().unwrap())
        .stderr(stderr.try_clone().unwrap())
        .spawn()
        .unwrap();
    let (code, peak) = sys::wait_with_peak_rss(child);
    let err = std::fs::read_to_string(format!("/proc/self/fd/{}", {
        use std::os::fd::AsRawFd as _;
        stderr.as_raw_fd()
    }))
    .unwrap();
    eprintln!("{flood:?}: peak RSS {} KiB; {err}", peak / 1024);
    (code, err, peak)
}

#[test]
fn a_row_flood_is_refused_after_the_rows_a_statement_can_return() {
    let (code, err, peak) = run_against(Flood::Rows);
    assert_eq!(code, 69, "{err}");
    assert!(
        err.contains("more than 1 row to one statement"),
        "the limit is named: {err}"
    );
    assert!(err.contains("lease:***@127.0.0.1"), "{err}");
    assert!(!err.contains(PASSWORD), "{err}");
    assert!(peak < MEMORY_BOUND, "peak RSS {peak} bytes: {err}");
}

#[test]
fn a_row_declaring_a_gibibyte_is_refused_at_its_header() {
    let (code, err, peak) = run_against(Flood::HugeRow);
    assert_eq!(code, 69, "{err}");
    assert!(
        err.contains("bytes, more than the limit of 1048576 bytes"),
        "the limit is named: {err}"
    );
    assert!(err.contains("lease:***@127.0.0.1"), "{err}");
    assert!(!err.contains(PASSWORD), "{err}");
    assert!(peak < MEMORY_BOUND, "peak RSS {peak} bytes: {err}");
}

#[test]
fn inspecting_every_name_reads_a_bounded_reply() {
    let url = hostile_server(Flood::BigRows);
    let (code, err, peak) = against(Flood::BigRows, &["inspect", "--postgres", &url]);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("more than 33554432 bytes of rows to one statement"),
        "the limit is named: {err}"
    );
    assert!(!err.contains(PASSWORD), "{err}");
    // The reply's bound, and the command itself.
    assert!(peak < 3 * (32 << 20), "peak RSS {peak} bytes: {err}");
}

#[test]
fn docs_json_lists_every_key_of_a_lease() {
    let pg = server();
    common::json_doc::assert_lease_keys(&["--postgres", &pg.url()]);
}

#[test]
fn slots_take_one_lease_each_and_a_waiter_takes_a_killed_holders_slot() {
    let pg = server();
    let lease = ["--postgres", &pg.url()];
    common::lease_slots::n_runs_hold_n_slot_leases(&lease);
}

#[test]
fn at_most_n_slot_holders_at_once_while_holders_are_killed() {
    let pg = server();
    let lease = ["--postgres", &pg.url()];
    common::lease_slots::the_bound_holds_under_chaos(&lease);
}
