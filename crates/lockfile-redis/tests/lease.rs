//! The engine against a real Redis: contention naming the holder, a waiter
//! woken by the release, fencing tokens that rise over handovers and across
//! restarts (with and without the data), the run history, and the claim on
//! a tick by the server's clock.

mod common;

use std::time::{Duration, Instant};

use common::{Redis, end, options, reply, request, server_time};
use lockfile::history::Outcome;
use lockfile::tick::{Schedule, TickClaim};
use lockfile_redis::{Engine, LeaseState};
use lockfile_test_support::wait_until;

#[test]
fn contention_names_the_holder_and_the_lease_is_free_again_after_release() {
    let redis = Redis::start();
    let opts = options(&redis.url(), Duration::from_secs(3));
    let first = opts.try_acquire("nightly").unwrap();
    assert_eq!(first.key(), "lockfile:{nightly}:lease");
    assert_eq!(first.ttl(), Duration::from_secs(3));
    assert_eq!(
        reply(&redis, &["HGET", "lockfile:{nightly}:lease", "token"]),
        first.fencing_token().to_string()
    );

    let err = opts.try_acquire("nightly").unwrap_err();
    assert!(err.is_contended(), "{err}");
    let owner = err.owner().expect("the holder's record");
    assert_eq!(owner.token, first.record().token);
    assert_eq!(owner.pid, std::process::id());
    assert_eq!(owner.job.as_deref(), Some("test"));
    let text = err.to_string();
    for part in [
        format!("pid {}", std::process::id()),
        format!("host \"{}\"", first.record().hostname),
        "job \"test\"".to_owned(),
        format!("fencing token {}", first.fencing_token()),
        "lockfile:{nightly}:lease".to_owned(),
    ] {
        assert!(text.contains(&part), "{part} not in: {text}");
    }

    let report = opts.inspect("nightly").unwrap();
    assert_eq!(report.state, LeaseState::Held);
    assert_eq!(report.fencing_token, Some(first.fencing_token()));
    assert_eq!(report.owner.as_ref().unwrap().token, first.record().token);
    assert_eq!(report.ttl, Some(Duration::from_secs(3)));
    assert!(
        report
            .ttl_remaining
            .is_some_and(|t| t <= Duration::from_secs(3))
    );
    assert!(report.content_error.is_none(), "{report:?}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["engine"], "redis");
    assert_eq!(json["key"], "lockfile:{nightly}:lease");

    first.record_outcome(end(Outcome::Failed)).unwrap();
    let token = first.fencing_token();
    assert!(!first.release().unwrap().was_lost());
    assert_eq!(reply(&redis, &["EXISTS", "lockfile:{nightly}:lease"]), "0");
    let report = opts.inspect("nightly").unwrap();
    assert_eq!(report.state, LeaseState::Free);
    assert_eq!(report.last_run.as_ref().unwrap().consecutive_failures, 1);

    let second = opts.try_acquire("nightly").unwrap();
    assert!(second.fencing_token() > token);
    let run = second.record_outcome(end(Outcome::Failed)).unwrap();
    assert_eq!(run.consecutive_failures, 2, "counted on from the first run");
    assert!(!second.release().unwrap().was_lost());

    let other = opts.try_acquire("other").unwrap();
    let all = opts.inspect_all().unwrap();
    let names: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["nightly", "other"]);
    assert_eq!(all[0].state, LeaseState::Free);
    assert_eq!(all[0].last_run.as_ref().unwrap().consecutive_failures, 2);
    assert_eq!(all[1].state, LeaseState::Held);
    assert_eq!(all[1].fencing_token, Some(other.fencing_token()));
    assert!(!other.release().unwrap().was_lost());
}

#[test]
fn a_waiting_acquire_is_woken_by_the_release() {
    let redis = Redis::start();
    // Long enough that only the release can hand the lease over.
    let opts = options(&redis.url(), Duration::from_secs(3));
    let holder = opts.try_acquire("wait").unwrap();
    let waiter = {
        let mut opts = opts.clone();
        opts.timeout(Duration::from_secs(60));
        std::thread::spawn(move || opts.acquire("wait"))
    };
    // The waiter listens for the release before it is made.
    wait_until("the waiter's subscription", || {
        reply(&redis, &["PUBSUB", "NUMSUB", "lockfile:{wait}:released"]).ends_with('1')
    });
    let token = holder.fencing_token();
    assert!(!holder.release().unwrap().was_lost());
    let next = waiter.join().unwrap().expect("the waiter takes the lease");
    assert!(next.fencing_token() > token);
    assert_eq!(
        reply(&redis, &["HGET", "lockfile:{wait}:lease", "token"]),
        next.fencing_token().to_string()
    );

    // A bounded wait by itself ends in a timeout naming the holder.
    let mut short = opts.clone();
    short.timeout(Duration::from_millis(500));
    let started = Instant::now();
    let err = short.acquire("wait").unwrap_err();
    assert!(err.is_contended(), "{err}");
    assert!(
        matches!(err, lockfile_redis::Error::Timeout { .. }),
        "{err}"
    );
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(err.owner().unwrap().token, next.record().token);
    assert!(!next.release().unwrap().was_lost());
}

#[test]
fn tokens_strictly_rise_over_a_thousand_handovers() {
    let redis = Redis::start();
    let opts = options(&redis.url(), Duration::from_secs(3));
    let mut last = 0;
    for round in 0..1000 {
        let lease = opts.try_acquire("handover").unwrap();
        assert!(
            lease.fencing_token() > last,
            "round {round}: {} after {last}",
            lease.fencing_token()
        );
        last = lease.fencing_token();
        assert!(!lease.release().unwrap().was_lost());
    }
    assert_eq!(
        reply(&redis, &["GET", "lockfile:{handover}:token"]),
        last.to_string()
    );
}

fn handovers(opts: &lockfile_redis::LeaseOptions, name: &str, rounds: u32) -> u64 {
    let mut last = 0;
    for _ in 0..rounds {
        let lease = opts.try_acquire(name).unwrap();
        assert!(lease.fencing_token() > last);
        last = lease.fencing_token();
        assert!(!lease.release().unwrap().was_lost());
    }
    last
}

#[test]
fn tokens_rise_across_a_restart_that_loses_the_data_and_one_that_keeps_it() {
    let mut redis = Redis::start();
    let opts = options(&redis.url(), Duration::from_secs(3));
    let before = handovers(&opts, "restart", 20);
    // Held when the server dies: the lease dies with the data.
    let held = opts.try_acquire("restart").unwrap();
    let before = before.max(held.fencing_token());
    redis.kill();
    redis.restart_with(&[]);
    assert_eq!(reply(&redis, &["DBSIZE"]), "0", "nothing persisted");
    let after = opts.try_acquire("restart").unwrap();
    assert!(
        after.fencing_token() > before,
        "{} after a restart without the data, {before} before",
        after.fencing_token()
    );
    // The old holder's renewals find a key that is not theirs.
    assert!(
        held.wait_lost(Duration::from_secs(30)).is_some(),
        "the old holder never learnt it lost the lease"
    );
    assert!(held.release().unwrap().was_lost());
    let before = after.fencing_token();
    assert!(!after.release().unwrap().was_lost());

    // With an append-only file, the counter survives the restart.
    redis.restart_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let before = before.max(handovers(&opts, "restart", 20));
    redis.kill();
    redis.restart_with(&[]);
    assert_eq!(
        reply(&redis, &["GET", "lockfile:{restart}:token"]),
        before.to_string(),
        "the counter came back from the append-only file"
    );
    let after = opts.try_acquire("restart").unwrap();
    assert!(after.fencing_token() > before);
    assert!(!after.release().unwrap().was_lost());
}

#[test]
fn tokens_rise_across_a_restart_from_a_snapshot() {
    let mut redis = Redis::start();
    let opts = options(&redis.url(), Duration::from_secs(3));
    let before = handovers(&opts, "snap", 20);
    let held = opts.try_acquire("snap").unwrap();
    let before = before.max(held.fencing_token());
    assert_eq!(reply(&redis, &["SAVE"]), "OK");
    redis.kill();
    redis.restart_with(&[]);
    assert_eq!(
        reply(&redis, &["GET", "lockfile:{snap}:token"]),
        before.to_string()
    );
    // The holder's key came back with it: the holder renews it on a new
    // connection, and it is still held.
    let signal = held.signal();
    let restarted_at = Instant::now();
    wait_until("a renewal after the restart", || {
        signal.last_renewal() > restarted_at
    });
    assert!(signal.check().is_ok(), "{signal:?}");
    assert!(opts.try_acquire("snap").unwrap_err().is_contended());
    assert!(!held.release().unwrap().was_lost());
    let after = opts.try_acquire("snap").unwrap();
    assert!(after.fencing_token() > before);
    assert!(!after.release().unwrap().was_lost());
}

#[test]
fn a_tick_is_claimed_once_by_the_servers_clock() {
    let redis = Redis::start();
    let opts = options(&redis.url(), Duration::from_secs(3));
    let schedule = Schedule::new(Duration::from_secs(3600), Duration::ZERO).unwrap();
    let claim = |name: &str| {
        let mut once = request();
        once.claim_tick(TickClaim::new(schedule, Instant::now()));
        Engine::acquire(&opts, name, &once)
    };
    // Two runs a moment apart can straddle the boundary between ticks, and
    // rightly both run: then try again on a name of its own.
    for attempt in 0.. {
        assert!(attempt < 3, "the tick boundary kept moving");
        let name = format!("hourly-{attempt}");
        let server_before = server_time(&redis);
        let first = claim(&name).unwrap();
        let server_after = server_time(&redis);
        let ours = first.claim().expect("the run claimed its tick").clone();
        assert!(
            ours.claimed_at >= server_before && ours.claimed_at <= server_after,
            "claimed at {:?}, the server's TIME was {server_before:?} then {server_after:?}",
            ours.claimed_at
        );
        assert_eq!(ours.pid, std::process::id());
        // The claim is in the run history before the run ends.
        let report = opts.inspect(&name).unwrap();
        assert_eq!(report.last_claimed_tick.as_ref(), Some(&ours));
        first.record_outcome(end(Outcome::Succeeded)).unwrap();
        assert!(!first.release().unwrap().was_lost());

        match claim(&name) {
            Err(e) => {
                assert!(e.is_tick_refused(), "{e}");
                assert!(!e.is_contended(), "{e}");
                let text = e.to_string();
                assert!(text.contains("already ran"), "{text}");
                return;
            }
            Ok(second) => {
                let next = second.claim().expect("a claim").tick;
                assert_ne!(next, ours.tick, "the same tick ran twice");
                assert!(!second.release().unwrap().was_lost());
            }
        }
    }
}
