//! Keys under the prefix that another client wrote: of another type, a
//! value far too large to be ours, no expiry, a history that is not one.
//! Each is refused or reported for its name, naming the key; none panics,
//! none is taken for a free lease, and a listing goes on past it.

mod common;

use std::time::Duration;

use common::{Redis, end, options, reply, request};
use lockfile::history::Outcome;
use lockfile_redis::{Engine, LeaseState};

/// The bytes the server has sent to its clients so far.
fn sent(redis: &Redis) -> u64 {
    let info = redis.cli(&["INFO", "stats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("total_net_output_bytes:"))
        .expect("total_net_output_bytes")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_lease_key_of_another_type_is_refused_naming_it_and_reported() {
    let redis = Redis::start();
    let opts = options(&redis.url(), Duration::from_secs(3));
    let fine = opts.try_acquire("fine").unwrap();
    assert_eq!(reply(&redis, &["SET", "lockfile:{x}:lease", "junk"]), "OK");

    let err = opts.try_acquire("x").unwrap_err();
    assert!(!err.is_contended(), "{err}");
    let text = err.to_string();
    assert!(text.contains("lockfile:{x}:lease"), "{text}");
    // Not taken, not changed.
    assert_eq!(reply(&redis, &["GET", "lockfile:{x}:lease"]), "junk");
    let mut waiting = opts.clone();
    waiting.timeout(Duration::from_secs(60));
    assert!(!waiting.acquire("x").unwrap_err().is_contended());

    let report = opts.inspect("x").unwrap();
    assert_eq!(report.state, LeaseState::Held, "{report:?}");
    let note = report.content_error.as_deref().unwrap_or("");
    assert!(note.contains("string"), "{report:?}");

    let all = opts.inspect_all().unwrap();
    let names: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["fine", "x"]);
    assert_eq!(all[0].state, LeaseState::Held);
    assert_eq!(all[0].fencing_token, Some(fine.fencing_token()));
    assert!(all[0].content_error.is_none(), "{:?}", all[0]);
    assert!(all[1].content_error.is_some(), "{:?}", all[1]);
    assert!(!fine.release().unwrap().was_lost());
}

#[test]
fn a_huge_owner_record_is_reported_by_its_size_and_never_read() {
    let redis = Redis::start();
    let opts = options(&redis.url(), Duration::from_secs(3));
    let big = vec![b'x'; 1 << 20];
    reply(&redis, &["HSET", "lockfile:{big}:lease", "token", "5"]);
    redis.cli_with_last_arg(&["HSET", "lockfile:{big}:lease", "owner"], &big);
    assert_eq!(
        reply(&redis, &["PEXPIRE", "lockfile:{big}:lease", "600000"]),
        "1"
    );
    assert_eq!(
        reply(&redis, &["HSTRLEN", "lockfile:{big}:lease", "owner"]),
        (1 << 20).to_string()
    );

    let before = sent(&redis);
    // Held by someone who wrote no record of ours: contended, never free.
    let err = opts.try_acquire("big").unwrap_err();
    assert!(err.is_contended(), "{err}");
    assert!(err.owner().is_none());
    assert!(err.to_string().contains("fencing token 5"), "{err}");
    let report = opts.inspect("big").unwrap();
    assert_eq!(report.state, LeaseState::Held);
    assert_eq!(report.fencing_token, Some(5));
    let note = report.content_error.as_deref().unwrap_or("");
    assert!(note.contains("1048576 bytes"), "{report:?}");
    let all = opts.inspect_all().unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].content_error, report.content_error);
    let read = sent(&redis) - before;
    assert!(read < 256 << 10, "{read} bytes sent: the record was read");
}

#[test]
fn a_lease_key_without_expiry_is_reported_as_such() {
    let redis = Redis::start();
    let opts = options(&redis.url(), Duration::from_secs(3));
    reply(
        &redis,
        &["HSET", "lockfile:{y}:lease", "token", "5", "owner", "{}"],
    );
    assert_eq!(reply(&redis, &["PTTL", "lockfile:{y}:lease"]), "-1");
    let err = opts.try_acquire("y").unwrap_err();
    assert!(err.is_contended(), "{err}");
    let report = opts.inspect("y").unwrap();
    assert_eq!(report.state, LeaseState::Held);
    assert_eq!(report.ttl_remaining, None);
    let note = report.content_error.as_deref().unwrap_or("");
    assert!(note.contains("no expiry"), "{report:?}");
    // A hash without a token is no lease of ours either.
    reply(&redis, &["HSET", "lockfile:{z}:lease", "owner", "{}"]);
    reply(&redis, &["PEXPIRE", "lockfile:{z}:lease", "600000"]);
    let report = opts.inspect("z").unwrap();
    assert!(report.content_error.is_some(), "{report:?}");
    assert!(opts.try_acquire("z").unwrap_err().is_contended());
}

#[test]
fn a_history_of_another_type_fails_the_record_clearly_and_is_reported() {
    let redis = Redis::start();
    let opts = options(&redis.url(), Duration::from_secs(3));
    reply(&redis, &["RPUSH", "lockfile:{h}:history", "junk"]);
    let lease = opts.try_acquire("h").unwrap();
    let err = lease.record_outcome(end(Outcome::Succeeded)).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("lockfile:{h}:history"), "{text}");
    assert!(text.contains("not one of ours"), "{text}");
    // Left as it was.
    assert_eq!(reply(&redis, &["TYPE", "lockfile:{h}:history"]), "list");
    let report = opts.inspect("h").unwrap();
    assert_eq!(report.state, LeaseState::Held);
    assert!(report.content_error.is_none(), "{report:?}");
    let note = report.history_error.as_deref().unwrap_or("");
    assert!(note.contains("list"), "{report:?}");
    assert!(!lease.release().unwrap().was_lost());
    // A claim on a tick must read the history: it stops, naming it.
    let mut once = request();
    once.claim_tick(lockfile::tick::TickClaim::new(
        lockfile::tick::Schedule::new(Duration::from_secs(3600), Duration::ZERO).unwrap(),
        std::time::Instant::now(),
    ));
    let err = Engine::acquire(&opts, "h", &once).unwrap_err();
    assert!(!err.is_contended() && !err.is_tick_refused(), "{err}");
    assert!(err.to_string().contains("lockfile:{h}:history"), "{err}");

    // A history hash with a document that is not ours.
    reply(
        &redis,
        &[
            "HSET",
            "lockfile:{g}:history",
            "version",
            "1",
            "doc",
            "junk",
        ],
    );
    let report = opts.inspect("g").unwrap();
    assert!(report.history_error.is_some(), "{report:?}");
    let lease = opts.try_acquire("g").unwrap();
    assert!(lease.record_outcome(end(Outcome::Succeeded)).is_err());
    assert!(!lease.release().unwrap().was_lost());
    let all = opts.inspect_all().unwrap();
    let names: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["g", "h"]);
}

#[test]
fn a_token_counter_past_exact_doubles_is_refused_and_never_repeats_a_token() {
    let redis = Redis::start();
    let opts = options(&redis.url(), Duration::from_secs(3));
    let first = opts.try_acquire("counter").unwrap();
    let first_token = first.fencing_token();
    assert!(!first.release().unwrap().was_lost());
    // Lua's numbers are doubles: from 2^53 on, `+ 1` no longer rises.
    for counter in [
        "9007199254740992",
        "9007199254740993",
        "18446744073709551615",
        "1e300",
        "inf",
        "nan",
        "-nan",
    ] {
        assert_eq!(
            reply(&redis, &["SET", "lockfile:{counter}:token", counter]),
            "OK"
        );
        let err = opts.try_acquire("counter").unwrap_err();
        assert!(!err.is_contended(), "{err}");
        let text = err.to_string();
        assert!(text.contains("lockfile:{counter}:token"), "{text}");
        assert!(text.contains(counter), "{text}");
        // Nothing taken, nothing changed.
        assert_eq!(reply(&redis, &["EXISTS", "lockfile:{counter}:lease"]), "0");
        assert_eq!(reply(&redis, &["GET", "lockfile:{counter}:token"]), counter);
    }
    // A counter longer than any number of ours is not even read back.
    let long = "7".repeat(4096);
    reply(&redis, &["SET", "lockfile:{counter}:token", &long]);
    let err = opts.try_acquire("counter").unwrap_err();
    assert!(
        err.to_string().contains("lockfile:{counter}:token"),
        "{err}"
    );
    assert!(!err.to_string().contains(&long[..64]), "{err}");
    assert_eq!(reply(&redis, &["EXISTS", "lockfile:{counter}:lease"]), "0");
    // The largest counter that still rises exactly.
    reply(
        &redis,
        &["SET", "lockfile:{counter}:token", "9007199254740990"],
    );
    let lease = opts.try_acquire("counter").unwrap();
    assert_eq!(lease.fencing_token(), 9_007_199_254_740_991);
    assert!(!lease.release().unwrap().was_lost());
    // A counter that is not a number counts as lost: the clock carries on.
    reply(&redis, &["SET", "lockfile:{counter}:token", "junk"]);
    let lease = opts.try_acquire("counter").unwrap();
    assert!(lease.fencing_token() > first_token);
    assert!(!lease.release().unwrap().was_lost());
}

/// A run history whose version is not one of ours (empty, not a number, a
/// number a double cannot count on, or too long to read back) stops a
/// claim on a tick and a record, naming the key, before anything is
/// written: no lease is left behind and no tick is claimed without being
/// recorded.
#[test]
fn a_history_version_that_is_not_ours_stops_a_claim_before_anything_is_written() {
    let redis = Redis::start();
    let opts = options(&redis.url(), Duration::from_secs(3));
    let long = "1".repeat(64);
    for version in ["", "abc", "1e+15", "123456789012345678", long.as_str()] {
        reply(&redis, &["DEL", "lockfile:{v}:history"]);
        reply(
            &redis,
            &[
                "HSET",
                "lockfile:{v}:history",
                "version",
                version,
                "doc",
                "{}",
            ],
        );
        let mut once = request();
        once.claim_tick(lockfile::tick::TickClaim::new(
            lockfile::tick::Schedule::new(Duration::from_secs(3600), Duration::ZERO).unwrap(),
            std::time::Instant::now(),
        ));
        let err = Engine::acquire(&opts, "v", &once).unwrap_err();
        assert!(
            !err.is_contended() && !err.is_tick_refused(),
            "{version:?}: {err}"
        );
        let text = err.to_string();
        assert!(text.contains("lockfile:{v}:history"), "{version:?}: {text}");
        assert!(text.contains("version"), "{version:?}: {text}");
        assert_eq!(
            reply(&redis, &["EXISTS", "lockfile:{v}:lease"]),
            "0",
            "{version:?}: no lease left behind"
        );
        assert_eq!(
            reply(&redis, &["HGET", "lockfile:{v}:history", "version"]),
            version,
            "left as it was"
        );
        let lease = opts.try_acquire("v").unwrap();
        assert!(
            lease.record_outcome(end(Outcome::Succeeded)).is_err(),
            "{version:?}"
        );
        assert!(!lease.release().unwrap().was_lost());
        assert!(
            opts.inspect("v").unwrap().history_error.is_some(),
            "{version:?}"
        );
    }
    // Our own versions count on as integers, never in a double's exponent.
    reply(&redis, &["DEL", "lockfile:{v}:history"]);
    reply(
        &redis,
        &[
            "HSET",
            "lockfile:{v}:history",
            "version",
            "99999999999999",
            "doc",
            "{}",
        ],
    );
    let lease = opts.try_acquire("v").unwrap();
    lease.record_outcome(end(Outcome::Succeeded)).unwrap();
    assert!(!lease.release().unwrap().was_lost());
    assert_eq!(
        reply(&redis, &["HGET", "lockfile:{v}:history", "version"]),
        "100000000000000"
    );
}
