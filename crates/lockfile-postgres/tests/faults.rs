//! Real faults against a real PostgreSQL: a terminated backend, a server
//! restart short and long, a black-holed network, a server clock that
//! steps. Assertions are about
//! order (the holder's belief ends before anyone else's begins) and bounds
//! with generous margins, never exact timings.

mod common;

use std::time::{Duration, Instant};

use common::engine;
use lockfile::wait::Wait;
use lockfile_examples::{FencedStore, StoreError};
use lockfile_postgres::{Engine, LeaseRequest, LostReason};
use lockfile_test_support::Proxy;
use lockfile_test_support::postgres::Postgres;
use lockfile_test_support::within;

fn request() -> LeaseRequest {
    let mut request = LeaseRequest::new();
    request.job("fault");
    request
}

#[test]
fn a_terminated_backend_is_replaced_and_the_lease_kept() {
    let pg = Postgres::start();
    let ttl = Duration::from_secs(3);
    let engine = engine(&pg.url(), ttl);
    let lease = Engine::acquire(&engine, "terminated", &request()).unwrap();
    let signal = lease.signal();
    let killed = pg.psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = 'lockfile' AND pid <> pg_backend_pid()",
    );
    assert_eq!(killed, "1", "the holder's one connection");
    let terminated_at = Instant::now();
    // Two renewals later, on a new connection.
    assert!(
        within(ttl * 3, || signal.last_renewal() > terminated_at
            && signal.failed_renewals() == 0),
        "no renewal after the backend was terminated: {signal:?}"
    );
    std::thread::sleep(ttl / 2);
    assert!(signal.check().is_ok(), "{signal:?}");
    let report = engine.inspect("terminated").unwrap();
    assert_eq!(report.fencing_token, Some(lease.fencing_token()));
    assert!(!lease.release().unwrap().was_lost());
}

#[test]
fn a_short_server_restart_keeps_the_lease() {
    let mut pg = Postgres::start();
    let ttl = Duration::from_secs(9);
    for url in [pg.url(), pg.bouncer_url()] {
        let engine = engine(&url, ttl);
        let lease = Engine::acquire(&engine, "restarted", &request()).unwrap();
        let signal = lease.signal();
        // Down for less than a third of the TTL.
        let stopped_at = Instant::now();
        pg.stop();
        pg.start_again();
        let down = stopped_at.elapsed();
        eprintln!("the server was down for {down:?} (TTL {ttl:?})");
        assert!(
            within(ttl, || signal.last_renewal() > stopped_at + down),
            "no renewal after the restart: {signal:?}"
        );
        assert!(signal.check().is_ok(), "{signal:?}");
        let token = lease.fencing_token();
        assert_eq!(
            engine.inspect("restarted").unwrap().fencing_token,
            Some(token)
        );
        assert!(!lease.release().unwrap().was_lost());
    }
}

#[test]
fn a_long_server_restart_loses_the_lease_by_its_deadline() {
    let pg = Postgres::start();
    let ttl = Duration::from_secs(2);
    let engine = engine(&pg.url(), ttl);
    let lease = Engine::acquire(&engine, "down", &request()).unwrap();
    let signal = lease.signal();
    pg.stop();
    let reason = signal
        .wait_lost(ttl * 3)
        .expect("lost while the server is down");
    assert!(
        matches!(reason, LostReason::DeadlinePassed { .. }),
        "{reason}"
    );
    assert!(signal.lost_at().unwrap() >= signal.deadline());
    pg.start_again();
    let released = lease.release().unwrap();
    assert!(released.was_lost(), "{released:?}");
    // The row expires on the server's clock: the next holder gets it.
    let next =
        Engine::acquire(&engine, "down", request().wait(Wait::up_to(Some(ttl * 3)))).unwrap();
    assert!(next.fencing_token() > 0);
}

#[test]
fn behind_a_black_hole_the_holder_declares_the_loss_by_its_deadline_and_before_the_next_holder() {
    let pg = Postgres::start();
    let ttl = Duration::from_secs(2);
    let proxy = Proxy::start(&format!("127.0.0.1:{}", pg.port));
    let through = pg.url().replace(
        &format!("127.0.0.1:{}", pg.port),
        proxy.endpoint().trim_start_matches("http://"),
    );
    let holder = engine(&through, ttl);
    let direct = engine(&pg.url(), ttl);
    let lease = Engine::acquire(&holder, "holed", &request()).unwrap();
    let signal = lease.signal();
    std::thread::sleep(ttl / 2);
    let cut_at = Instant::now();
    proxy.blackhole();
    let contender = std::thread::spawn(move || {
        let lease = Engine::acquire(
            &direct,
            "holed",
            request().wait(Wait::up_to(Some(Duration::from_secs(20)))),
        )
        .unwrap();
        (Instant::now(), lease.fencing_token())
    });
    let reason = signal
        .wait_lost(ttl * 3)
        .expect("lost behind the black hole");
    let lost_at = signal.lost_at().unwrap();
    assert!(
        matches!(reason, LostReason::DeadlinePassed { .. }),
        "{reason}"
    );
    assert!(lost_at >= signal.deadline());
    assert!(
        lost_at - cut_at <= ttl + Duration::from_secs(1),
        "{:?}",
        lost_at - cut_at
    );
    let (acquired_at, token) = contender.join().unwrap();
    assert!(
        acquired_at > signal.deadline(),
        "the next holder began before our deadline"
    );
    assert!(token > lease.fencing_token());
    eprintln!(
        "black hole: loss declared {:?} after the cut, the next holder {:?} after it",
        lost_at - cut_at,
        acquired_at - cut_at
    );
    // The release asks nothing of a server past the deadline: it returns.
    let released = Instant::now();
    assert!(lease.release().unwrap().was_lost());
    assert!(released.elapsed() < Duration::from_secs(3));
}

/// The server's wall clock steps forward past the TTL while A holds (an NTP
/// step, `date -s`): by the database's clock, which decides, A's lease has
/// expired, and B takes it at once with a larger token. A cannot know: its
/// deadline is on its own monotonic clock, still ahead, and `check()`
/// passes. Only the store stops A's late write. At its next renewal, which
/// asks for A's token on a lease not yet expired, A learns the lease is
/// gone, long before its own deadline.
#[test]
fn a_server_clock_stepped_past_the_ttl_hands_over_the_lease_and_the_store_refuses_the_old_holder() {
    let mut pg = Postgres::start_with_steppable_clock(&[]);
    let ttl = Duration::from_secs(9);
    let engine = engine(&pg.bouncer_url(), ttl);
    let dir = tempfile::tempdir().unwrap();
    let store = FencedStore::new(dir.path().join("store.json"));
    let a = Engine::acquire(&engine, "stepped", &request()).unwrap();
    let signal = a.signal();
    store.write(a.fencing_token(), "A's first batch").unwrap();
    // Step just after a renewal: the next one is a third of the TTL away.
    let before = signal.last_renewal();
    assert!(
        within(ttl, || signal.last_renewal() > before),
        "no renewal: {signal:?}"
    );
    let renewed_at = signal.last_renewal();
    pg.step_clock(ttl * 10);

    let b = Engine::acquire(&engine, "stepped", &request()).unwrap();
    assert!(
        b.fencing_token() > a.fencing_token(),
        "tokens rise: {} then {}",
        a.fencing_token(),
        b.fencing_token()
    );
    let handed_over = Instant::now();
    assert!(
        signal.check().is_ok() && handed_over < signal.deadline(),
        "A cannot tell yet: {signal:?}"
    );
    store.write(b.fencing_token(), "B's batch").unwrap();
    let late = store
        .write(a.fencing_token(), "A's late batch")
        .unwrap_err();
    assert!(
        matches!(late, StoreError::Fenced { token, highest, .. }
            if token == a.fencing_token() && highest == b.fencing_token()),
        "{late:?}"
    );

    let reason = signal.wait_lost(ttl).expect("lost at the next renewal");
    let lost_at = signal.lost_at().unwrap();
    eprintln!(
        "server clock stepped {:?} (TTL {ttl:?}): B took over {:?} after A's last renewal, A learnt it {:?} after that renewal: {reason}",
        ttl * 10,
        handed_over - renewed_at,
        lost_at - renewed_at
    );
    assert!(matches!(reason, LostReason::Expired), "{reason}");
    assert!(lost_at < signal.deadline(), "{signal:?}");
    assert!(
        lost_at - renewed_at <= ttl / 3 + Duration::from_secs(1),
        "{:?} after the last renewal",
        lost_at - renewed_at
    );
    let expected = [a.fencing_token(), b.fencing_token()];
    assert!(a.release().unwrap().was_lost());
    assert!(!b.release().unwrap().was_lost());
    let tokens: Vec<u64> = store.history().unwrap().iter().map(|w| w.token).collect();
    assert_eq!(tokens, expected);
}
