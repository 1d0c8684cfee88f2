//! Connecting, and the servers that are refused: a replica, an eviction
//! policy, a user short of a command or a key, a wrong password, a server
//! that is not there, and TLS (the CA, the name check, `#insecure`).

mod common;

use std::time::{Duration, Instant};

use common::{Redis, end, options, reply};
use lockfile::history::Outcome;
use lockfile_redis::{Error, LeaseOptions, LeaseState};
use lockfile_test_support::wait_until;

/// Every operation of a job's run: acquire (free, then contended), a
/// renewal, a waiter woken by the release, the run's record, inspect and
/// inspect_all. The first failure, as text.
fn every_operation(
    redis: &Redis,
    opts: &LeaseOptions,
    name: &str,
    subscribed: bool,
) -> Result<(), String> {
    let e = |e: Error| e.to_string();
    let lease = opts.try_acquire(name).map_err(e)?;
    match opts.try_acquire(name) {
        Err(err) if err.is_contended() => {
            if err.owner().map(|o| o.token) != Some(lease.record().token) {
                return Err(format!("contended without the holder's record: {err}"));
            }
        }
        Err(err) => return Err(err.to_string()),
        Ok(_) => return Err("taken twice".to_owned()),
    }
    let signal = lease.signal();
    let since = signal.last_renewal();
    if signal.wait_lost(lease.ttl()).is_some() || signal.last_renewal() <= since {
        return Err(format!("no renewal: {signal:?}"));
    }
    let waiter = {
        let mut opts = opts.clone();
        opts.timeout(Duration::from_secs(30));
        let name = name.to_owned();
        std::thread::spawn(move || opts.acquire(&name))
    };
    if subscribed {
        let channel = format!("lockfile:{{{name}}}:released");
        wait_until("the waiter's subscription", || {
            reply(redis, &["PUBSUB", "NUMSUB", &channel]).ends_with('1')
        });
    }
    lease.record_outcome(end(Outcome::Succeeded)).map_err(e)?;
    let released = lease.release().map_err(e)?;
    if released.was_lost() {
        return Err(format!("{released:?}"));
    }
    let next = waiter.join().unwrap().map_err(e)?;
    let report = opts.inspect(name).map_err(e)?;
    if report.state != LeaseState::Held
        || report.fencing_token != Some(next.fencing_token())
        || report.last_run.is_none()
        || report.history_error.is_some()
        || report.content_error.is_some()
    {
        return Err(format!("inspect: {report:?}"));
    }
    let all = opts.inspect_all().map_err(e)?;
    if all.len() != 1
        || all[0].state != report.state
        || all[0].fencing_token != report.fencing_token
        || all[0].owner != report.owner
        || all[0].last_run != report.last_run
    {
        return Err(format!("inspect_all: {all:?}"));
    }
    let released = next.release().map_err(e)?;
    if released.was_lost() {
        return Err(format!("{released:?}"));
    }
    Ok(())
}

/// The commands a job's user needs, as the docs give them.
const JOB_COMMANDS: [&str; 19] = [
    "+evalsha",
    "+eval",
    "+role",
    "+subscribe",
    "+scan",
    "+exists",
    "+hget",
    "+hexists",
    "+hset",
    "+hstrlen",
    "+pttl",
    "+pexpire",
    "+type",
    "+time",
    "+get",
    "+strlen",
    "+set",
    "+del",
    "+publish",
];

/// Makes `jobs` (password `pw`) a user of the lockfile keys and channels
/// with only `commands`, on a server without scripts or keys.
fn job_user(redis: &Redis, keys: &str, commands: &[&str]) {
    let mut args = vec![
        "ACL",
        "SETUSER",
        "jobs",
        "reset",
        "on",
        ">pw",
        keys,
        "resetchannels",
        "&lockfile:*",
        "-@all",
    ];
    args.extend_from_slice(commands);
    assert_eq!(reply(redis, &args), "OK");
    for cleanup in [
        &["FLUSHALL"][..],
        &["SCRIPT", "FLUSH"],
        &["ACL", "LOG", "RESET"],
    ] {
        assert_eq!(reply(redis, cleanup), "OK");
    }
}

fn job_url(redis: &Redis, password: &str) -> String {
    format!("redis://jobs:{password}@127.0.0.1:{}", redis.port())
}

/// The commands the ACL log says were refused to `jobs`.
fn refused(redis: &Redis) -> Vec<String> {
    let log = redis.cli(&["ACL", "LOG"]);
    let lines: Vec<&str> = log.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "object")
        .map(|w| w[1].to_owned())
        .collect()
}

#[test]
fn the_documented_acl_is_enough_without_config() {
    let redis = Redis::start();
    job_user(&redis, "~lockfile:*", &JOB_COMMANDS);
    let opts = options(&job_url(&redis, "pw"), Duration::from_secs(1));
    every_operation(&redis, &opts, "acl", true).unwrap();
    // CONFIG was asked for and refused: the engine went on (it warns once).
    assert_eq!(refused(&redis), ["config|get"]);
}

#[test]
fn every_command_of_the_documented_acl_is_needed() {
    let redis = Redis::start();
    for missing in JOB_COMMANDS {
        let commands: Vec<&str> = JOB_COMMANDS.into_iter().filter(|c| *c != missing).collect();
        job_user(&redis, "~lockfile:*", &commands);
        let opts = options(&job_url(&redis, "pw"), Duration::from_secs(1));
        let name = missing.trim_start_matches('+');
        let result = every_operation(&redis, &opts, name, missing != "+subscribe");
        if missing == "+subscribe" {
            // Without it a waiter polls, and is woken later.
            result.unwrap();
        } else {
            let err = result.expect_err(missing);
            assert!(
                !err.contains("taken twice") && !err.contains("held by"),
                "without {missing}: {err}"
            );
        }
        let refused = refused(&redis);
        assert!(
            refused.iter().any(|c| c == name),
            "without {missing}, the log says {refused:?}"
        );
    }
}

#[test]
fn a_user_denied_the_key_gets_a_clear_error_at_once() {
    let redis = Redis::start();
    job_user(&redis, "~other:*", &JOB_COMMANDS);
    let opts = options(&job_url(&redis, "pw"), Duration::from_secs(1));
    let started = Instant::now();
    let err = opts.try_acquire("denied").unwrap_err();
    assert!(!err.is_contended(), "{err}");
    assert!(matches!(err, Error::Server { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("lockfile:{denied}:lease"), "{text}");
    assert!(text.contains("permission"), "{text}");
    // A waiting acquire stops too: a refusal is not contention.
    let mut waiting = opts.clone();
    waiting.timeout(Duration::from_secs(60));
    let err = waiting.acquire("denied").unwrap_err();
    assert!(text.contains("permission"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let err = opts.inspect("denied").unwrap_err();
    assert!(err.to_string().contains("permission"), "{err}");
}

#[test]
fn a_replica_is_refused_as_not_a_primary() {
    let primary = Redis::start();
    let port = primary.port().to_string();
    let replica = Redis::start_with(&["--replicaof", "127.0.0.1", &port]);
    let opts = options(&replica.url(), Duration::from_secs(1));
    let err = opts.try_acquire("replicated").unwrap_err();
    assert!(!err.is_contended(), "{err}");
    let text = err.to_string();
    assert!(text.contains("not a primary"), "{text}");
    assert!(text.contains(&replica.url()), "{text}");
    // A held lease on the primary is not "free" on the replica either way.
    let held = options(&primary.url(), Duration::from_secs(3))
        .try_acquire("replicated")
        .unwrap();
    let err = opts.try_acquire("replicated").unwrap_err();
    assert!(
        !err.is_contended() && err.to_string().contains("not a primary"),
        "{err}"
    );
    // Inspect only reads: it works on a replica, once the lease got there.
    wait_until("the lease on the replica", || {
        opts.inspect("replicated")
            .is_ok_and(|r| r.fencing_token == Some(held.fencing_token()))
    });
    assert!(!held.release().unwrap().was_lost());
}

#[test]
fn an_eviction_policy_is_refused_and_noeviction_is_fine() {
    for policy in ["allkeys-lru", "volatile-lru"] {
        let redis = Redis::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", policy]);
        let opts = options(&redis.url(), Duration::from_secs(1));
        let err = opts.try_acquire("evicted").unwrap_err();
        assert!(!err.is_contended(), "{err}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("maxmemory-policy {policy}")),
            "{text}"
        );
        assert_eq!(reply(&redis, &["DBSIZE"]), "0", "nothing was written");
    }
    let redis = Redis::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", "noeviction"]);
    let opts = options(&redis.url(), Duration::from_secs(1));
    let lease = opts.try_acquire("kept").unwrap();
    assert!(!lease.release().unwrap().was_lost());
}

#[test]
fn a_password_is_never_shown() {
    let redis = Redis::start();
    job_user(&redis, "~lockfile:*", &JOB_COMMANDS);
    let shown = format!("jobs:***@127.0.0.1:{}", redis.port());
    let opts = options(&job_url(&redis, "wrongpass"), Duration::from_secs(1));
    let err = opts.try_acquire("secret").unwrap_err();
    assert!(!err.is_contended(), "{err}");
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(text.contains(&shown), "{text}");
        assert!(!text.contains("wrongpass"), "{text}");
    }
    let err = opts.inspect("secret").unwrap_err();
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(text.contains(&shown), "{text}");
        assert!(!text.contains("wrongpass"), "{text}");
    }
    let debug = format!("{opts:?}");
    assert!(debug.contains(&shown), "{debug}");
    assert!(!debug.contains("wrongpass"), "{debug}");

    // The password given apart from a URL without one.
    let mut opts = options(
        &format!("redis://jobs@127.0.0.1:{}", redis.port()),
        Duration::from_secs(1),
    );
    opts.password("pw");
    let debug = format!("{opts:?}");
    assert!(!debug.contains("\"pw\""), "{debug}");
    let lease = opts.try_acquire("secret").unwrap();
    assert!(!lease.release().unwrap().was_lost());
    // ... and a wrong one, never shown either.
    opts.password("wrongpass");
    let err = opts.try_acquire("secret").unwrap_err();
    assert!(
        !format!("{err} {err:?} {opts:?}").contains("wrongpass"),
        "{err:?}"
    );
}

#[test]
fn a_server_that_is_not_there_fails_at_once_naming_it() {
    let port = lockfile_test_support::port::free_port();
    let opts = options(&format!("redis://127.0.0.1:{port}"), Duration::from_secs(1));
    let started = Instant::now();
    let err = opts.try_acquire("nowhere").unwrap_err();
    assert!(!err.is_contended(), "{err}");
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "a refused connection took {:?}",
        started.elapsed()
    );
    let err = opts.inspect("nowhere").unwrap_err();
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
}

#[test]
fn tls_with_the_servers_ca_works_and_anything_else_is_refused() {
    let redis = Redis::start_with_tls("DNS:localhost,IP:127.0.0.1");
    let url = redis.url();
    assert!(url.starts_with("rediss://127.0.0.1:"), "{url}");
    let mut opts = options(&url, Duration::from_secs(1));
    opts.ca(redis.root_cert());
    opts.check().unwrap();
    let lease = opts.try_acquire("tls").unwrap();
    assert!(opts.try_acquire("tls").unwrap_err().is_contended());
    assert_eq!(opts.inspect("tls").unwrap().state, LeaseState::Held);
    assert!(!lease.release().unwrap().was_lost());
    let localhost = url.replace("127.0.0.1", "localhost");
    let mut by_name = options(&localhost, Duration::from_secs(1));
    by_name.ca(redis.root_cert());
    assert!(
        !by_name
            .try_acquire("tls")
            .unwrap()
            .release()
            .unwrap()
            .was_lost()
    );

    // Another CA.
    let mut other = options(&url, Duration::from_secs(1));
    other.ca(redis.other_root_cert());
    let err = other.try_acquire("tls").unwrap_err();
    assert!(!err.is_contended(), "{err}");
    assert!(err.to_string().contains(&url), "{err}");
    // The system's roots.
    let err = options(&url, Duration::from_secs(1))
        .try_acquire("tls")
        .unwrap_err();
    assert!(!err.is_contended(), "{err}");
    // Without TLS to a TLS port.
    let mut plain = options(
        &url.replace("rediss://", "redis://"),
        Duration::from_secs(1),
    );
    plain.request_timeout(Duration::from_secs(2));
    let err = plain.try_acquire("tls").unwrap_err();
    assert!(!err.is_contended(), "{err}");
    // A CA for a server without TLS is a mistake.
    let mut mistaken = options(
        &url.replace("rediss://", "redis://"),
        Duration::from_secs(1),
    );
    mistaken.ca(redis.root_cert());
    assert!(mistaken.check().is_err());
    // No certificate check at all is refused before connecting.
    let mut insecure = options(&format!("{url}/#insecure"), Duration::from_secs(1));
    insecure.ca(redis.root_cert());
    let err = insecure.check().unwrap_err();
    assert!(err.to_string().contains("#insecure"), "{err}");
    assert!(insecure.try_acquire("tls").is_err());
}

#[test]
fn a_certificate_for_another_name_fails_the_name_check() {
    let redis = Redis::start_with_tls("DNS:elsewhere.invalid");
    let mut opts = options(&redis.url(), Duration::from_secs(1));
    opts.ca(redis.root_cert());
    let err = opts.try_acquire("named").unwrap_err();
    assert!(!err.is_contended(), "{err}");
    let text = err.to_string();
    assert!(text.contains(&redis.url()), "{text}");
    assert!(text.to_lowercase().contains("name"), "{text}");
}
