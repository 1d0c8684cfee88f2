//! A waiting acquire woken by the notification of a release (LISTEN on a
//! direct connection), and falling back to its poll when the listener
//! cannot start or dies, against a real PostgreSQL and PgBouncer.
//!
//! What woke the waiter is asserted from its `lock_acquired` event
//! (`woken_by`), never from times. The waiter's TTL is 30 s, so its poll is
//! a second apart: the release is sent right after the waiter's first
//! attempt since it subscribed, so a poll could only beat the notification
//! by a second's margin.

mod common;

use std::thread::JoinHandle;
use std::time::Duration;

use common::engine;
use common::events::{self, Captured};
use lockfile::wait::Wait;
use lockfile_postgres::{Engine, LeaseOptions, LeaseRequest};
use lockfile_test_support::Proxy;
use lockfile_test_support::postgres::{PASSWORD, Postgres};

const TTL: Duration = Duration::from_secs(30);

/// The waiter's events come within this, with a wide margin.
const SOON: Duration = Duration::from_secs(20);

fn request() -> LeaseRequest {
    let mut request = LeaseRequest::new();
    request.job("listen");
    request
}

/// Acquires `name` waiting up to a minute; returns the token once held
/// (and releases it).
fn waiter(engine: &LeaseOptions, name: &str) -> JoinHandle<u64> {
    let engine = engine.clone();
    let name = name.to_owned();
    std::thread::spawn(move || {
        let mut request = request();
        request.wait(Wait::up_to(Some(Duration::from_secs(60))));
        let lease = Engine::acquire(&engine, &name, &request).expect("the waiter's lease");
        let token = lease.fencing_token();
        assert!(!lease.release().unwrap().was_lost());
        token
    })
}

fn key(name: &str) -> String {
    format!("lockfile.leases/{name}")
}

/// The last `lock_acquired` event of `name`: the waiter's, which acquired
/// last.
fn acquired(name: &str) -> Captured {
    let mut all = events::of(&key(name), "lock_acquired");
    all.pop().expect("an acquire")
}

/// Sessions subscribed to the default schema's channel.
fn listeners(pg: &Postgres) -> String {
    pg.psql(
        "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN \"lockfile.leases\"' \
         AND pid <> pg_backend_pid()",
    )
}

/// Waits until the waiter of `name` is subscribed and has asked again
/// since: the attempt it made once subscribed, or a poll after it.
fn subscribed_and_asked_again(pg: &Postgres, name: &str) {
    assert!(listeners_become(pg, "1"), "{name}: no listening session");
    let seen = events::of(&key(name), "lock_contended").len();
    assert!(events::wait_for(
        &key(name),
        "lock_contended",
        seen + 1,
        SOON
    ));
}

/// Waits up to `SOON` until `listeners(pg)` says `count`.
fn listeners_become(pg: &Postgres, count: &str) -> bool {
    let until = std::time::Instant::now() + SOON;
    while std::time::Instant::now() < until {
        if listeners(pg) == count {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A holder of `name` through `url` releases while a waiter listening on
/// `listen` waits: the waiter takes the lease with a larger token, woken by
/// the notification, and its listener never failed.
fn woken_by_the_release(pg: &Postgres, url: &str, listen: &str, name: &str) {
    let holder_engine = engine(url, TTL);
    let holder = Engine::acquire(&holder_engine, name, &request()).unwrap();
    let mut listening = holder_engine.clone();
    listening.listen(listen.to_owned());
    let waiting = waiter(&listening, name);
    subscribed_and_asked_again(pg, name);
    let token = holder.fencing_token();
    assert!(!holder.release().unwrap().was_lost());
    assert!(waiting.join().unwrap() > token);
    let event = acquired(name);
    assert_eq!(event.field("woken_by"), "notification", "{name}: {event:?}");
    assert!(events::of(&key(name), "listen_failed").is_empty());
}

#[test]
fn a_listening_waiter_wakes_on_the_release_directly_and_through_pgbouncer() {
    events::capture();
    let mut pg = Postgres::start();
    // The holder and the waiter's attempts go through the URL; the waiter
    // listens on the server itself.
    for (url, name) in [(pg.url(), "direct"), (pg.bouncer_url(), "pooled")] {
        woken_by_the_release(&pg, &url, &pg.url(), name);
        // Closed once the lease is held.
        assert!(listeners_become(&pg, "0"), "{name}: the listener stays");
    }
}

/// The listener connects as every connection does: over TLS when the URL
/// says so (here `verify-full` against a server that takes TLS only).
#[test]
fn a_listener_over_tls_wakes_on_the_release() {
    events::capture();
    let pg = Postgres::start_with_tls("DNS:localhost");
    let url = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        pg.url_at("localhost"),
        pg.root_cert().display()
    );
    woken_by_the_release(&pg, &url, &url, "over-tls");
}

#[test]
fn a_killed_listener_falls_back_to_polling_and_still_gets_the_lease() {
    events::capture();
    let pg = Postgres::start();
    let name = "killed";
    let holder_engine = engine(&pg.url(), TTL);
    let holder = Engine::acquire(&holder_engine, name, &request()).unwrap();
    let mut listening = holder_engine.clone();
    listening.listen(pg.url());
    let waiting = waiter(&listening, name);
    assert!(listeners_become(&pg, "1"), "no listening session");
    let killed = pg.psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE query = 'LISTEN \"lockfile.leases\"' AND pid <> pg_backend_pid()",
    );
    assert_eq!(killed, "1");
    assert!(events::wait_for(&key(name), "listen_failed", 1, SOON));
    assert!(!holder.release().unwrap().was_lost());
    waiting.join().unwrap();
    assert_eq!(acquired(name).field("woken_by"), "poll");
    let warnings = events::of(&key(name), "listen_failed");
    assert_eq!(warnings.len(), 1, "one warning: {warnings:?}");
    assert!(
        warnings[0].field("error").contains("57P01"),
        "the server's reason: {warnings:?}"
    );
}

#[test]
fn a_wrong_listen_url_still_acquires_by_polling_with_a_warning() {
    events::capture();
    let pg = Postgres::start();
    let admin = engine(&pg.url(), TTL);
    let wrong_password = pg.url().replace(PASSWORD, "wrong-pw");
    let refused = format!("postgres://lease:{PASSWORD}@127.0.0.1:1/postgres");
    let unparsable = format!("postgres://lease:{PASSWORD}@127.0.0.1:notaport/postgres");
    for (listen, name, cause) in [
        (&wrong_password, "wrong-password", "28P01"),
        (
            &refused,
            "refused",
            "connecting to `postgres://lease:***@127.0.0.1:1/postgres`",
        ),
        (
            &unparsable,
            "unparsable",
            "a postgres:// URL) cannot be read at byte 37",
        ),
    ] {
        let holder = Engine::acquire(&admin, name, &request()).unwrap();
        let mut listening = admin.clone();
        listening.listen(listen.clone());
        let waiting = waiter(&listening, name);
        assert!(events::wait_for(&key(name), "listen_failed", 1, SOON));
        assert!(!holder.release().unwrap().was_lost());
        waiting.join().unwrap();
        assert_eq!(acquired(name).field("woken_by"), "poll", "{name}");
        let warnings = events::of(&key(name), "listen_failed");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let warning = &warnings[0];
        assert!(
            warning.field("error").contains(cause),
            "{name}: {warning:?}"
        );
        for text in [warning.field("error"), warning.field("server")] {
            assert!(!text.contains(PASSWORD), "{name}: {warning:?}");
            assert!(!text.contains("wrong-pw"), "{name}: {warning:?}");
        }
    }
}

#[test]
fn a_role_with_only_the_documented_grants_notifies_and_listens() {
    events::capture();
    let pg = Postgres::start();
    let _admin = engine(&pg.url(), TTL);
    pg.psql(&format!("CREATE ROLE listener LOGIN PASSWORD '{PASSWORD}'"));
    pg.psql(&lockfile_postgres::schema::grants("lockfile", "listener"));
    let url = format!(
        "postgres://listener:{PASSWORD}@127.0.0.1:{}/postgres",
        pg.port
    );
    let mut app = LeaseOptions::new(&url);
    app.ttl(TTL);
    let name = "granted-listen";
    let holder = Engine::acquire(&app, name, &request()).unwrap();
    let mut listening = app.clone();
    listening.listen(url.clone());
    let waiting = waiter(&listening, name);
    subscribed_and_asked_again(&pg, name);
    assert!(!holder.release().unwrap().was_lost());
    waiting.join().unwrap();
    assert_eq!(acquired(name).field("woken_by"), "notification");
    assert!(events::of(&key(name), "listen_failed").is_empty());
}

#[test]
fn a_holder_that_never_releases_is_taken_over_when_its_row_expires() {
    events::capture();
    let pg = Postgres::start();
    let name = "expiring";
    let engine = engine(&pg.url(), TTL);
    // A holder that died: its row expires by the server's clock, and no one
    // notifies. 900 ms: the waiter's first attempt comes well before, and
    // its poll (a second) would come after.
    pg.psql(&format!(
        "INSERT INTO lockfile.leases (name, fencing_token, attempt, owner, ttl_ms, \
         acquired_at, renewed_at, expires_at) \
         SELECT '{name}', nextval('lockfile.fencing_tokens'), 'dead', '{{}}', 900, \
         now(), now(), clock_timestamp() + interval '900 milliseconds'"
    ));
    let mut listening = engine.clone();
    listening.listen(pg.url());
    waiter(&listening, name).join().unwrap();
    // Woken by the time the row said, before the next poll (a second).
    assert_eq!(acquired(name).field("woken_by"), "expiry");
}

#[test]
fn a_listen_host_that_drops_packets_never_holds_up_the_wait() {
    events::capture();
    let pg = Postgres::start();
    let name = "black-holed";
    let proxy = Proxy::start(&format!("127.0.0.1:{}", pg.port));
    proxy.blackhole();
    let through = pg.url().replace(
        &format!("127.0.0.1:{}", pg.port),
        proxy.endpoint().trim_start_matches("http://"),
    );
    let engine = engine(&pg.url(), TTL);
    let holder = Engine::acquire(&engine, name, &request()).unwrap();
    let mut listening = engine.clone();
    // The listener gives up 10 s after it started, well after the poll.
    listening
        .listen(through)
        .request_timeout(Duration::from_secs(10));
    let waiting = waiter(&listening, name);
    // Its first attempt: the listener starts then.
    assert!(events::wait_for(&key(name), "lock_contended", 1, SOON));
    assert!(!holder.release().unwrap().was_lost());
    waiting.join().unwrap();
    assert_eq!(acquired(name).field("woken_by"), "poll");
    // Taken by the poll a second after the release while the listener was
    // still connecting; it was stopped with the acquire, before its
    // warning was due.
    let warnings = events::of(&key(name), "listen_failed");
    assert!(warnings.is_empty(), "{warnings:?}");
}

/// Tokens drawn so far from the default schema's sequence.
fn tokens_drawn(pg: &Postgres) -> u64 {
    pg.psql("SELECT last_value FROM lockfile.fencing_tokens")
        .parse()
        .unwrap()
}

/// A role with no grants at all sends thousands of notifications naming a
/// lease on its channel, each in a transaction of its own (PostgreSQL folds
/// equal ones within one), while a waiter listens. Every acquire attempt
/// draws a token, so the tokens drawn count the waiter's attempts: at most
/// one timed attempt per poll interval, and at most one more woken by a
/// notification after each, however many come.
#[test]
fn a_flood_of_notifications_from_any_role_costs_one_attempt_per_poll_at_most() {
    events::capture();
    let pg = Postgres::start();
    let name = "flooded";
    let engine = engine(&pg.url(), TTL);
    pg.psql(&format!("CREATE ROLE noisy LOGIN PASSWORD '{PASSWORD}'"));
    let noisy = format!("postgres://noisy:{PASSWORD}@127.0.0.1:{}/postgres", pg.port);
    let holder = Engine::acquire(&engine, name, &request()).unwrap();
    let mut listening = engine.clone();
    listening.listen(pg.url());
    let waiting = waiter(&listening, name);
    subscribed_and_asked_again(&pg, name);

    let before = tokens_drawn(&pg);
    let from = std::time::Instant::now();
    let out = std::process::Command::new(pg.psql_program())
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &noisy, "-c"])
        .arg(format!(
            "DO $$ BEGIN FOR i IN 1..5000 LOOP \
               PERFORM pg_catalog.pg_notify('lockfile.leases', '{name}'); COMMIT; \
             END LOOP; END $$"
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!holder.release().unwrap().was_lost());
    let token = waiting.join().unwrap();
    let elapsed = from.elapsed();
    // The waiter's winning attempt drew the last token.
    assert_eq!(token, tokens_drawn(&pg));
    let attempts = token - before;
    let poll = lockfile_lease::engine::poll_interval(TTL);
    // Timed attempts: one per poll interval begun; as many woken by a
    // notification, one more; and the attempt after subscribing, if it
    // came late.
    let intervals = (elapsed.as_secs_f64() / poll.as_secs_f64()).ceil() as u64;
    let bound = 2 * (intervals + 1) + 1;
    assert!(
        attempts <= bound,
        "{attempts} attempts in {elapsed:?} (poll {poll:?}): at most {bound}"
    );
    assert!(events::of(&key(name), "listen_failed").is_empty());
}
