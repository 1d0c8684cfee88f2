//! `lockfile run --redis`, `inspect --redis` and `check --redis` against a
//! real Redis that each test starts on a loopback port (Debian:
//! `redis-server`), with the same JSON keys, exit statuses and once-per-tick
//! promise as under etcd and PostgreSQL.

mod common;

use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use common::{Background, BoundedOutput, code, lockfile, stderr};
use lockfile_test_support::{Proxy, Redis};

fn inspect(url: &str, args: &[&str]) -> Output {
    common::lease_run::inspect(&["--redis", url], args)
}

fn run(url: &str, extra: &[&str], name: &str, script: &str) -> Output {
    common::lease_run::run(&["--redis", url], extra, name, script)
}

fn start(url: &str, extra: &[&str], name: &str, script: &str) -> (Background, String) {
    common::lease_run::start(&["--redis", url], extra, name, script)
}

#[test]
fn runs_skips_tokens_history_and_the_json_shape_as_under_etcd() {
    let redis = Redis::start();
    let url = redis.url();
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

    let (mut holder, token) = start(
        &url,
        &["--job", "report", "--max-runtime", "1h"],
        "held",
        "echo \"$LOCKFILE_TOKEN\"; sleep 30",
    );
    let out = lockfile()
        .args(["run", "-n", "--redis", &url, "held", "true"])
        .bounded_output();
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("report"), "{}", stderr(&out));

    let out = inspect(&url, &["held", "tokens", "no/such"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let reports: Value = serde_json::from_slice(&out.stdout).unwrap();
    let held = &reports[0];
    assert_eq!(held["owner"]["token"], token, "{held}");
    assert_eq!(held["engine"], "redis");
    assert_eq!(held["state"], "held");
    assert_eq!(held["key"], "lockfile:{held}:lease");
    assert!(held["lease_id"].is_null());
    assert_eq!(held["ttl_seconds"], 10.0, "{held}");
    assert!(
        held["ttl_remaining_seconds"].as_f64().unwrap() > 0.0,
        "{held}"
    );
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
    assert_eq!(names, ["held", "tokens"], "{all}");
    holder.signal("TERM");
    holder.reap();
}

#[test]
fn check_gives_a_lease_its_verdicts() {
    let redis = Redis::start();
    let url = redis.url();
    let check = |name: &str| {
        lockfile()
            .args(["check", "--expect-every", "1h", "--redis", &url, name])
            .bounded_output()
    };
    let out = check("never");
    assert_eq!(code(&out), 2, "never succeeded: {}", stderr(&out));
    assert_eq!(code(&run(&url, &[], "checked", "true")), 0);
    let out = check("checked");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn sigkill_of_the_wrapper_lets_a_waiting_contender_in_within_the_ttl_and_one_renewal() {
    let redis = Redis::start();
    common::lease_faults::a_killed_wrapper_lets_a_waiting_contender_in_within_the_ttl(&[
        "--redis",
        &redis.url(),
    ]);
}

#[test]
fn a_command_that_never_beats_is_stopped_with_its_tree_and_the_lease_freed_at_once() {
    let redis = Redis::start();
    common::hung_lease::a_command_that_never_beats_is_stopped_and_its_lease_freed_at_once(&[
        "--redis",
        &redis.url(),
    ]);
}

#[test]
fn a_command_that_beats_under_a_lease_runs_to_its_end() {
    let redis = Redis::start();
    common::hung_lease::a_command_that_beats_runs_to_its_end(&["--redis", &redis.url()]);
}

#[test]
fn sigkill_of_the_wrapper_kills_the_whole_tree_before_a_second_holder_runs() {
    let redis = Redis::start();
    common::dead_wrapper::a_killed_wrappers_tree_dies_before_its_lease_lapses(&[
        "--redis",
        &redis.url(),
    ]);
}

/// Every failure to reach a server that can keep the lease exits 69 in one
/// line, naming `user@host:port` and never the password: a wrong password,
/// a refused port, a replica, an eviction policy.
#[test]
fn a_bad_password_a_refused_port_a_replica_and_an_eviction_policy_exit_69_in_one_line() {
    let redis = Redis::start();
    redis.cli(&[
        "ACL",
        "SETUSER",
        "jobs",
        "on",
        ">right-pw",
        "~*",
        "&*",
        "+@all",
    ]);
    let expect_69 = |url: &str, says: &[&str]| {
        let out = run(url, &[], "x", "true");
        let err = stderr(&out);
        assert_eq!(code(&out), 69, "{url}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            !err.contains("wrong-pw") && !err.contains("right-pw"),
            "{err}"
        );
        for s in says {
            assert!(err.contains(s), "{s:?} in {err}");
        }
    };
    let port = redis.port();
    expect_69(
        &format!("redis://jobs:wrong-pw@127.0.0.1:{port}"),
        &[
            &format!("redis://jobs:***@127.0.0.1:{port}"),
            "authentication failed",
        ],
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    expect_69(
        &format!("redis://jobs:wrong-pw@127.0.0.1:{closed_port}"),
        &[&format!("jobs:***@127.0.0.1:{closed_port}")],
    );
    let replica = Redis::start_with(&["--replicaof", "127.0.0.1", &port.to_string()]);
    expect_69(&replica.url(), &["not a primary", "ROLE says slave"]);
    let evicting =
        Redis::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"]);
    expect_69(&evicting.url(), &["maxmemory-policy volatile-lru"]);
    // The right password, from REDISCLI_AUTH, as redis-cli takes it; and
    // COMMAND sees neither it nor the URL.
    let out = lockfile()
        .args(["run", "--redis", &format!("redis://jobs@127.0.0.1:{port}")])
        .args(["authed", "sh", "-c", "env"])
        .env("REDISCLI_AUTH", "right-pw")
        .env("LOCKFILE_REDIS_URL", "redis://:other@127.0.0.1:1")
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let env = String::from_utf8_lossy(&out.stdout);
    assert!(!env.contains("right-pw") && !env.contains("REDIS"), "{env}");
    assert!(env.contains("LOCKFILE_FENCING_TOKEN="), "{env}");
}

#[test]
fn the_url_comes_from_the_environment_and_two_engines_in_it_are_a_usage_error() {
    let redis = Redis::start();
    let out = lockfile()
        .args(["run", "--redis-prefix", "jobs:", "envjob", "true"])
        .env("LOCKFILE_REDIS_URL", redis.url())
        .env_remove("LOCKFILE_POSTGRES_URL")
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        redis
            .cli(&["EXISTS", "jobs:{envjob}:history"])
            .starts_with('1')
    );
    let out = lockfile()
        .args(["run", "envjob", "true"])
        .env("LOCKFILE_REDIS_URL", redis.url())
        .env("LOCKFILE_POSTGRES_URL", "postgres://u@127.0.0.1:1/db")
        .bounded_output();
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("LOCKFILE_POSTGRES_URL") && err.contains("LOCKFILE_REDIS_URL"),
        "{err}"
    );
    // An option picks the engine over both variables.
    let out = lockfile()
        .args(["run", "--redis", &redis.url(), "optjob", "true"])
        .env("LOCKFILE_POSTGRES_URL", "postgres://u@127.0.0.1:1/db")
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for bad in [
        vec!["--redis-prefix", "a{b"],
        vec!["--redis-ca", "/nonexistent/ca.pem"],
    ] {
        let out = lockfile()
            .args(["run", "--redis", &redis.url().replace("redis:", "rediss:")])
            .args(&bad)
            .args(["badjob", "true"])
            .bounded_output();
        assert_eq!(code(&out), 64, "{bad:?}: {}", stderr(&out));
    }
    let out = lockfile()
        .args(["run", "--redis-prefix", "x:", "f.lock", "true"])
        .env_remove("LOCKFILE_REDIS_URL")
        .bounded_output();
    assert_eq!(code(&out), 64, "{}", stderr(&out));
}

#[test]
fn run_over_tls_verifies_the_servers_name_with_the_ca_given() {
    let redis = Redis::start_with_tls("DNS:localhost,IP:127.0.0.1");
    let ca = redis.root_cert();
    let out = lockfile()
        .args(["run", "--redis", &redis.url(), "--redis-ca"])
        .arg(&ca)
        .args(["tls", "true"])
        .bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let other = redis.other_root_cert();
    let out = lockfile()
        .args(["run", "--redis", &redis.url(), "--redis-ca"])
        .arg(&other)
        .args(["tls", "true"])
        .bounded_output();
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    let elsewhere = Redis::start_with_tls("DNS:elsewhere.invalid");
    let out = lockfile()
        .args(["run", "--redis", &elsewhere.url(), "--redis-ca"])
        .arg(elsewhere.root_cert())
        .args(["tls", "true"])
        .bounded_output();
    assert_eq!(
        code(&out),
        69,
        "a name that is not the server's: {}",
        stderr(&out)
    );
    let out = lockfile()
        .args([
            "run",
            "--redis",
            &format!("{}/#insecure", redis.url()),
            "tls",
            "true",
        ])
        .bounded_output();
    assert_eq!(code(&out), 64, "{}", stderr(&out));
}

#[test]
fn a_server_stopped_for_longer_than_the_ttl_stops_the_command_and_the_run_exits_79() {
    let redis = Redis::start();
    common::lease_faults::a_stopped_server_stops_the_command_and_the_run_exits_79(
        &["--redis", &redis.url()],
        || redis.pause(),
        || redis.resume(),
    );
}

#[test]
fn behind_a_black_hole_the_wrapper_exits_within_the_ttl_and_a_second_of_the_cut() {
    let redis = Redis::start();
    let proxy = Proxy::start(&redis.addr());
    let url = format!("redis://{}", proxy.endpoint().trim_start_matches("http://"));
    common::lease_faults::behind_a_black_hole_the_wrapper_exits_within_the_ttl_and_a_second(
        &["--redis", &url],
        &proxy,
    );
}

/// `CLIENT KILL` of every client: the holder reconnects and renews its
/// lease; the run ends as it would have.
#[test]
fn a_killed_connection_is_made_again_and_the_lease_kept() {
    let redis = Redis::start();
    let (mut wrapper, ready) = start(&redis.url(), &["--ttl", "1"], "kept", "echo ready; sleep 3");
    assert_eq!(ready, "ready");
    let token = redis.cli(&["HGET", "lockfile:{kept}:lease", "token"]);
    for _ in 0..4 {
        redis.cli(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
        std::thread::sleep(Duration::from_millis(400));
    }
    assert_eq!(
        redis.cli(&["HGET", "lockfile:{kept}:lease", "token"]),
        token
    );
    let (status, err) = wrapper.wait();
    assert_eq!(status, 0, "{err}");
}

// ---------------------------------------------------------------------------
// `--once-per` on Redis: the server's clock decides

#[test]
fn four_contenders_run_each_tick_once() {
    let redis = Redis::start();
    let url = redis.url();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let first = common::ticks::next_tick();
    let args = ["--redis", &url, "--ttl", "2", "fleet"];
    let (_, by_claimed) = common::ticks::fire(5, &args, |_| Vec::new(), &log);
    common::ticks::assert_once_per_tick(&by_claimed, first, 5);
    let report: Value = serde_json::from_slice(&inspect(&url, &["fleet"]).stdout).unwrap();
    assert_eq!(
        report[0]["last_run"]["tick"], report[0]["last_claimed_tick"]["tick"],
        "{report}"
    );
}

/// Contenders whose clocks are 20 s off, twice half a 10 s period: the
/// server's clock dates every claim, so each tick still runs once.
#[test]
fn clocks_skewed_past_half_a_period_still_run_each_tick_once() {
    common::ticks::require_faketime();
    let redis = Redis::start();
    let url = redis.url();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let first = common::ticks::next_tick();
    let args = ["--redis", &url, "--ttl", "2", "skewed"];
    let (_, by_claimed) = common::ticks::fire(3, &args, common::ticks::skewed, &log);
    common::ticks::assert_once_per_tick(&by_claimed, first, 3);
}

/// Contenders whose clocks are 90 s and 300 s ahead: the server's `TIME`
/// dates every claim and run, so each tick still runs once.
#[test]
fn clocks_minutes_ahead_still_run_each_tick_once() {
    let redis = Redis::start();
    common::ticks::clocks_minutes_ahead_still_run_each_tick_once(&[
        "--redis",
        &redis.url(),
        "--ttl",
        "2",
        "ahead",
    ]);
}

#[test]
fn a_dead_claim_on_redis_is_run_again_in_its_tick() {
    let redis = Redis::start();
    let url = redis.url();
    common::ticks::a_dead_claim_is_run_again(
        &["--redis", &url, "--ttl", "2", "dead"],
        &["--redis", &url, "dead"],
    );
}

#[test]
fn a_failed_run_uses_up_its_tick_on_redis() {
    let redis = Redis::start();
    common::ticks::a_failed_run_uses_up_its_tick(&["--redis", &redis.url(), "failing"]);
}

// ---------------------------------------------------------------------------
// A stopped holder, fenced off

/// The test that runs as COMMAND in the fault test below: a writer to a
/// fenced store (see `common::fenced`).
const WRITER: &str = "fenced_writer_entry";

#[test]
fn fenced_writer_entry() {
    common::fenced::write_if_requested();
}

#[test]
fn a_run_stopped_past_its_ttl_is_fenced_off_and_exits_79_once_continued() {
    let redis = Redis::start();
    common::lease_faults::a_run_stopped_past_its_ttl_is_fenced_off_and_exits_79(
        &["--redis", &redis.url()],
        WRITER,
    );
}

#[test]
fn docs_json_lists_every_key_of_a_lease() {
    let redis = Redis::start();
    common::json_doc::assert_lease_keys(&["--redis", &redis.url()]);
}

/// Every lease metric the package's alert rules name is one that inspect
/// writes for a held Redis lease too.
#[test]
fn the_alert_rules_name_only_lease_metrics_that_are_written() {
    let redis = Redis::start();
    common::lease_faults::the_alert_rules_name_only_lease_metrics_that_are_written(&[
        "--redis",
        &redis.url(),
    ]);
}

/// The server's `TIME`, in seconds.
fn server_time(redis: &Redis) -> f64 {
    let time = redis.cli(&["TIME"]);
    let mut parts = time.split_whitespace().map(|p| p.parse::<f64>().unwrap());
    parts.next().unwrap() + parts.next().unwrap() / 1e6
}

/// A host whose clock is ten years ahead writes no time of its own into the
/// run history: the run's start and finish, its last success and its claim
/// lie between the server's times before and after the run.
#[test]
fn a_host_ten_years_ahead_writes_the_servers_times() {
    common::ticks::require_faketime();
    let redis = Redis::start();
    let before = server_time(&redis);
    let faked = common::ticks::faked("+3650d");
    let mut cmd = common::in_a_standard_state(std::process::Command::new(&faked[0]));
    cmd.args(&faked[1..])
        .arg(env!("CARGO_BIN_EXE_lockfile"))
        .args(["run", "--redis", &redis.url(), "--once-per", "1h", "decade"])
        .args(["sh", "-c", "sleep 0.2"]);
    let out = cmd.bounded_output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let after = server_time(&redis);
    let doc: Value =
        serde_json::from_str(&redis.cli(&["HGET", "lockfile:{decade}:history", "doc"])).unwrap();
    let times = [
        &doc["last_run"]["started_at"],
        &doc["last_run"]["finished_at"],
        &doc["last_success"]["finished_at"],
        &doc["last_claimed_tick"]["claimed_at"],
    ];
    for t in times {
        let t = humantime::parse_rfc3339(t.as_str().unwrap()).unwrap();
        let t = t
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            before - 0.001 <= t && t <= after + 0.001,
            "{t} not within the server's {before}..{after}: {doc}"
        );
    }
}

/// The password shows nowhere: in neither a succeeding nor a failing run's
/// output, events (text and JSON), metrics or pings, nor in inspect's and
/// check's JSON; COMMAND's environment is checked above.
#[test]
fn a_password_shows_in_no_output_event_metric_or_ping() {
    use common::ping::{Answer, Server};
    const SECRET: &str = "Zq-s3cr3t-Zq";
    let redis = Redis::start();
    redis.cli(&[
        "ACL",
        "SETUSER",
        "jobs",
        "on",
        &format!(">{SECRET}"),
        "~*",
        "&*",
        "+@all",
    ]);
    let url = format!("redis://jobs:{SECRET}@127.0.0.1:{}", redis.port());
    let shown = format!("redis://jobs:***@127.0.0.1:{}", redis.port());
    let no_secret = |what: &str, text: &str| {
        assert!(
            !text.contains("Zq"),
            "a piece of the password in {what}: {text}"
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let pings = Server::start(Answer::Ok);
    for (format, script, status) in [("text", "echo ran", 0), ("json", "echo ran; exit 3", 3)] {
        let out = lockfile()
            .args(["--log-format", format, "run", "--redis", &url])
            .arg("--metrics-dir")
            .arg(dir.path())
            .args(["--ping", &pings.url(), "--ping-log-bytes", "100000"])
            .args(["scanned", "sh", "-c", script])
            .bounded_output();
        assert_eq!(code(&out), status, "{}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("lock_acquired"), "{err}");
        no_secret("stderr", &err);
        no_secret("stdout", &String::from_utf8_lossy(&out.stdout));
    }
    // A failure that names the server: a lease held elsewhere on a name
    // whose key another client broke.
    redis.cli(&["SET", "lockfile:{broken}:lease", "junk"]);
    let out = lockfile()
        .args(["--log-format", "json", "run", "--redis", &url])
        .args(["--ping", &pings.url(), "broken", "true"])
        .bounded_output();
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    assert!(stderr(&out).contains(&shown), "{}", stderr(&out));
    no_secret("stderr", &stderr(&out));
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        no_secret(
            &path.display().to_string(),
            &String::from_utf8_lossy(&std::fs::read(&path).unwrap()),
        );
    }
    for r in pings.wait_for(4) {
        no_secret("a ping", &format!("{} {}", r.target, r.body));
    }
    for args in [
        vec!["inspect", "--json", "--redis", &url],
        vec!["inspect", "--format", "prometheus", "--redis", &url],
        vec![
            "check",
            "--json",
            "--expect-every",
            "1h",
            "--redis",
            &url,
            "scanned",
        ],
        vec![
            "check",
            "--json",
            "--expect-every",
            "1h",
            "--redis",
            &url,
            "broken",
        ],
    ] {
        let out = lockfile().args(&args).bounded_output();
        no_secret(&format!("{args:?}"), &String::from_utf8_lossy(&out.stdout));
        no_secret(&format!("{args:?}'s stderr"), &stderr(&out));
    }
}

/// A Redis lease's `--once-per` run writes the tick it claimed, dated by
/// the server, and its period; a skip leaves them.
#[test]
fn the_tick_metrics_are_the_claims_on_redis() {
    let redis = Redis::start();
    common::ticks::the_tick_metrics_are_the_claims(&["--redis", &redis.url(), "metered"]);
}

#[test]
fn slots_take_one_lease_each_and_a_waiter_takes_a_killed_holders_slot() {
    let redis = Redis::start();
    let lease = ["--redis", &redis.url()];
    common::lease_slots::n_runs_hold_n_slot_leases(&lease);
}

#[test]
fn at_most_n_slot_holders_at_once_while_holders_are_killed() {
    let redis = Redis::start();
    let lease = ["--redis", &redis.url()];
    common::lease_slots::the_bound_holds_under_chaos(&lease);
}
