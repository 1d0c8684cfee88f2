//! Real faults against a real Redis: the holder's connection killed, the
//! server asleep (`DEBUG SLEEP`) and stopped (SIGSTOP) past the TTL, and a
//! holder process stopped past its TTL whose late write the fenced store
//! refuses. Assertions are about states and order, with bounds far above
//! what any of it takes.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Redis, options, reply};
use lockfile_examples::{FencedStore, StoreError};
use lockfile_redis::LostReason;
use lockfile_test_support::marked::Marked;
use lockfile_test_support::stopped::stop_outside_a_write;
use lockfile_test_support::wait_until;
use rustix::process::{Signal, kill_process};

/// The test that child processes run, and the variable that gives them
/// their role: `URL NAME TTL_MS STORE`.
const ENTRY: &str = "child_process_entry";
const ROLE_ENV: &str = "LOCKFILE_REDIS_TEST_ROLE";

#[test]
fn child_process_entry() {
    let Ok(role) = std::env::var(ROLE_ENV) else {
        return;
    };
    let role: serde_json::Value = serde_json::from_str(&role).unwrap();
    let mut opts = options(
        role["url"].as_str().unwrap(),
        Duration::from_millis(role["ttl_ms"].as_u64().unwrap()),
    );
    opts.timeout(Duration::from_secs(30)).job("stopped-holder");
    let store = FencedStore::new(role["store"].as_str().unwrap());
    let guard = match opts.acquire(role["name"].as_str().unwrap()) {
        Ok(guard) => guard,
        Err(e) => {
            println!("@@failed {e}");
            std::process::exit(0);
        }
    };
    let token = guard.fencing_token();
    println!("@@acquired {token}");
    loop {
        if let Err(e) = guard.check() {
            println!("@@lost {}", e.is_lost());
            // Deliberately write anyway: the store must refuse.
            match store.write(token, "late") {
                Ok(()) => println!("@@late accepted"),
                Err(e) => println!("@@late refused {e}"),
            }
            break;
        }
        match store.write(token, "batch") {
            Ok(()) => println!("@@write accepted"),
            Err(StoreError::Fenced { .. }) => println!("@@write refused"),
            Err(e) => println!("@@failed {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(guard);
    std::process::exit(0);
}

/// A holder process, continued, killed and reaped when dropped.
fn spawn_holder(url: &str, name: &str, ttl: Duration, store: &std::path::Path) -> Marked {
    let role = serde_json::json!({
        "url": url, "name": name, "ttl_ms": ttl.as_millis() as u64,
        "store": store.to_str().unwrap(),
    });
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([ENTRY, "--exact", "--nocapture", "--test-threads=1", "-q"])
        .env(ROLE_ENV, role.to_string());
    Marked::spawn(command, &["failed"])
}

#[test]
fn a_killed_connection_is_replaced_and_the_lease_kept() {
    let redis = Redis::start();
    let ttl = Duration::from_secs(3);
    let opts = options(&redis.url(), ttl);
    let lease = opts.try_acquire("killed").unwrap();
    let token = lease.fencing_token().to_string();
    let signal = lease.signal();
    let killed: u32 = reply(&redis, &["CLIENT", "KILL", "TYPE", "normal"])
        .parse()
        .unwrap();
    assert!(killed >= 1, "the holder's connection");
    let killed_at = Instant::now();
    // Renewed since on a new connection, and still ours.
    wait_until("a renewal after the kill", || {
        signal.last_renewal() > killed_at && signal.failed_renewals() == 0
    });
    // Several renewal periods later, still held.
    let since = signal.last_renewal();
    for _ in 0..3 {
        let before = signal.last_renewal();
        wait_until("the next renewal", || signal.last_renewal() > before);
        assert!(signal.check().is_ok(), "{signal:?}");
    }
    assert!(signal.last_renewal() > since);
    assert!(signal.check().is_ok(), "{signal:?}");
    assert_eq!(
        reply(&redis, &["HGET", "lockfile:{killed}:lease", "token"]),
        token
    );
    assert!(opts.try_acquire("killed").unwrap_err().is_contended());
    assert!(!lease.release().unwrap().was_lost());
}

#[test]
fn a_server_asleep_past_the_ttl_loses_the_lease_to_a_rival_with_a_larger_token() {
    let redis = Redis::start();
    let ttl = Duration::from_secs(1);
    let opts = options(&redis.url(), ttl);
    let lease = opts.try_acquire("asleep").unwrap();
    let signal = lease.signal();
    let sleeper = {
        let port = redis.port().to_string();
        std::thread::spawn(move || {
            let out = Command::new("redis-cli")
                .args(["-h", "127.0.0.1", "-p", &port, "DEBUG", "SLEEP", "3"])
                .output()
                .unwrap();
            assert!(out.status.success());
        })
    };
    let reason = signal
        .wait_lost(Duration::from_secs(60))
        .expect("lost while the server sleeps");
    assert!(
        matches!(reason, LostReason::DeadlinePassed { .. }),
        "{reason}"
    );
    sleeper.join().unwrap();
    let err = lease.check().unwrap_err();
    assert!(err.is_lost(), "{err}");
    // The key expired on the server's clock while it slept.
    let mut rival = opts.clone();
    rival.timeout(Duration::from_secs(30));
    let next = rival.acquire("asleep").unwrap();
    assert!(next.fencing_token() > lease.fencing_token());
    assert!(lease.release().unwrap().was_lost());
    assert_eq!(
        reply(&redis, &["HGET", "lockfile:{asleep}:lease", "token"]),
        next.fencing_token().to_string(),
        "the old holder's release left the rival's lease alone"
    );
    assert!(!next.release().unwrap().was_lost());
}

#[test]
fn a_stopped_server_loses_the_lease_by_its_deadline_and_release_does_not_hang() {
    let redis = Redis::start();
    let ttl = Duration::from_secs(1);
    let mut opts = options(&redis.url(), ttl);
    opts.request_timeout(Duration::from_secs(20));
    let lease = opts.try_acquire("stopped").unwrap();
    let signal = lease.signal();
    redis.pause();
    let reason = signal
        .wait_lost(Duration::from_secs(60))
        .expect("lost while the server is stopped");
    assert!(
        matches!(reason, LostReason::DeadlinePassed { .. }),
        "{reason}"
    );
    assert!(signal.lost_at().unwrap() >= signal.deadline());
    assert!(lease.check().unwrap_err().is_lost());
    // Past the deadline the release asks nothing of the server: it does not
    // wait a request timeout (20 s) on it.
    let started = Instant::now();
    let released = lease.release();
    let took = started.elapsed();
    redis.resume();
    assert!(released.unwrap().was_lost());
    assert!(took < Duration::from_secs(10), "the release took {took:?}");
    let mut rival = opts.clone();
    rival.timeout(Duration::from_secs(30));
    let next = rival.acquire("stopped").unwrap();
    assert!(!next.release().unwrap().was_lost());
}

#[test]
fn a_holder_stopped_past_its_ttl_is_fenced_off_by_the_store() {
    let redis = Redis::start();
    let ttl = Duration::from_secs(1);
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store.json");
    let mut holder = spawn_holder(&redis.url(), "fenced", ttl, &store_path);
    let old: u64 = holder.expect("acquired")["acquired ".len()..]
        .parse()
        .unwrap();
    holder.expect("write accepted");

    let store = FencedStore::new(&store_path);
    let pid = holder.pid().as_raw_nonzero().get().unsigned_abs();
    stop_outside_a_write(
        pid,
        || store.busy().expect("try the store's lock"),
        || kill_process(holder.pid(), Signal::STOP).unwrap(),
        || kill_process(holder.pid(), Signal::CONT).unwrap(),
    );
    let mut rival = options(&redis.url(), ttl);
    rival.timeout(Duration::from_secs(60));
    let next = rival
        .acquire("fenced")
        .expect("the stopped holder's lease expires");
    assert!(
        next.fencing_token() > old,
        "{} after {old}",
        next.fencing_token()
    );
    store.write(next.fencing_token(), "rival").unwrap();

    kill_process(holder.pid(), Signal::CONT).unwrap();
    let lost = holder.expect("lost");
    assert_eq!(lost, "lost true");
    let late = holder.expect("late");
    assert!(late.starts_with("late refused"), "{late}");
    assert!(
        late.contains(&format!(
            "it already accepted token {}",
            next.fencing_token()
        )),
        "{late}"
    );
    // Every write after the stop was refused or never made.
    let tokens: Vec<u64> = store.history().unwrap().iter().map(|w| w.token).collect();
    assert!(tokens.is_sorted(), "{tokens:?}");
    assert_eq!(tokens.last(), Some(&next.fencing_token()));
    assert!(!next.release().unwrap().was_lost());
}
