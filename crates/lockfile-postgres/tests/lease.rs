//! The engine against a real PostgreSQL, directly and through PgBouncer in
//! transaction pooling mode: acquisition, contention, tokens, history,
//! inspection, grants, and the errors a run exits 69 on.

mod common;

use std::time::{Duration, Instant, SystemTime};

use common::engine;
use lockfile::history::{Outcome, RunEnd};
use lockfile::wait::Wait;
use lockfile_postgres::{Engine, Error, LeaseOptions, LeaseRequest, LeaseState, sqlstate};
use lockfile_test_support::postgres::{PASSWORD, Postgres};

fn end(outcome: Outcome) -> RunEnd {
    RunEnd {
        outcome,
        exit_code: Some(i32::from(outcome != Outcome::Succeeded)),
        signal: None,
        started_at: SystemTime::now(),
    }
}

fn try_now() -> LeaseRequest {
    let mut request = LeaseRequest::new();
    request.job("test");
    request
}

#[test]
fn a_lease_is_held_contended_released_and_taken_again_with_a_larger_token() {
    let mut pg = Postgres::start();
    for (url, name) in [(pg.url(), "nightly"), (pg.bouncer_url(), "pooled")] {
        let engine = engine(&url, Duration::from_secs(3));
        let first = Engine::acquire(&engine, name, &try_now()).unwrap();
        assert_eq!(first.key(), format!("lockfile.leases/{name}"));
        assert_eq!(first.ttl(), Duration::from_secs(3));
        let err = Engine::acquire(&engine, name, &try_now()).unwrap_err();
        assert!(err.is_contended(), "{err}");
        assert_eq!(err.owner().unwrap().token, first.record().token);
        assert!(
            err.to_string()
                .contains(&format!("fencing token {}", first.fencing_token()))
        );

        let report = engine.inspect(name).unwrap();
        assert_eq!(report.state, LeaseState::Held);
        assert_eq!(report.fencing_token, Some(first.fencing_token()));
        assert_eq!(report.owner.as_ref().unwrap().token, first.record().token);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["engine"], "postgres");
        assert_eq!(json["key"], format!("lockfile.leases/{name}"));
        assert_eq!(json["ttl_seconds"], 3.0);

        first.record_outcome(end(Outcome::Failed)).unwrap();
        let token = first.fencing_token();
        assert!(!first.release().unwrap().was_lost());
        assert_eq!(engine.inspect(name).unwrap().state, LeaseState::Free);

        let second = Engine::acquire(&engine, name, &try_now()).unwrap();
        assert!(second.fencing_token() > token);
        let run = second.record_outcome(end(Outcome::Failed)).unwrap();
        assert_eq!(run.consecutive_failures, 2, "counted on from the first run");
        assert!(!second.release().unwrap().was_lost());

        let all = engine.inspect_all().unwrap();
        let report = all.iter().find(|r| r.name == name).unwrap();
        assert_eq!(report.state, LeaseState::Free);
        assert_eq!(report.last_run.as_ref().unwrap().consecutive_failures, 2);
        // Every run's end is kept, not only the last.
        let runs = pg.psql(&format!(
            "SELECT count(*) FROM lockfile.runs WHERE name = '{name}'"
        ));
        assert_eq!(runs, "2");
    }
}

#[test]
fn a_waiting_acquire_gets_the_lease_when_it_is_released() {
    let mut pg = Postgres::start();
    let engine = engine(&pg.bouncer_url(), Duration::from_secs(2));
    let holder = Engine::acquire(&engine, "wait", &try_now()).unwrap();
    let waiter = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            let mut request = try_now();
            request.wait(Wait::up_to(Some(Duration::from_secs(30))));
            let lease = Engine::acquire(&engine, "wait", &request).unwrap();
            (lease.fencing_token(), Instant::now())
        })
    };
    std::thread::sleep(Duration::from_millis(700));
    let released_at = Instant::now();
    let token = holder.fencing_token();
    assert!(!holder.release().unwrap().was_lost());
    let (next, acquired_at) = waiter.join().unwrap();
    assert!(next > token);
    let lag = acquired_at - released_at;
    eprintln!("polling wake-up lag after a release: {lag:?} (poll every 200ms)");
    // A bounded wait by itself ends in a timeout naming the holder.
    let holder = Engine::acquire(&engine, "wait", &try_now()).unwrap();
    let started = Instant::now();
    let mut request = try_now();
    request.wait(Wait::up_to(Some(Duration::from_millis(500))));
    let err = Engine::acquire(&engine, "wait", &request).unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(err.owner().unwrap().token, holder.record().token);
}

#[test]
fn tokens_rise_across_a_thousand_handovers_and_a_server_restart() {
    let mut pg = Postgres::start();
    let engine = engine(&pg.bouncer_url(), Duration::from_secs(5));
    let mut last = 0;
    for round in 0..1000 {
        let name = if round % 2 == 0 { "even" } else { "odd" };
        let lease = Engine::acquire(&engine, name, &try_now()).unwrap();
        assert!(
            lease.fencing_token() > last,
            "round {round}: {} after {last}",
            lease.fencing_token()
        );
        last = lease.fencing_token();
        assert!(!lease.release().unwrap().was_lost());
    }
    pg.stop();
    pg.start_again();
    // PgBouncer's pooled connections died with the server: it makes new ones.
    let lease = Engine::acquire(&engine, "even", &try_now()).unwrap();
    assert!(
        lease.fencing_token() > last,
        "{} after a restart, {last} before",
        lease.fencing_token()
    );
}

#[test]
fn contenders_never_overlap_and_tokens_follow_the_order_of_holding() {
    let mut pg = Postgres::start();
    let url = pg.bouncer_url();
    let engine = engine(&url, Duration::from_secs(5));
    // Each holder records (token, acquired, released) on the monotonic clock.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for _ in 0..40 {
                    let mut request = try_now();
                    request.wait(Wait::up_to(Some(Duration::from_secs(60))));
                    let lease = Engine::acquire(&engine, "shared", &request).unwrap();
                    let from = Instant::now();
                    std::thread::sleep(Duration::from_millis(2));
                    let to = Instant::now();
                    held.push((lease.fencing_token(), from, to));
                    assert!(!lease.release().unwrap().was_lost());
                }
                held
            })
        })
        .collect();
    let mut all: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    all.sort_by_key(|&(token, ..)| token);
    for pair in all.windows(2) {
        assert!(pair[0].2 < pair[1].1, "holders overlapped: {pair:?}");
    }
}

#[test]
fn a_serializable_server_default_is_still_correct() {
    let mut pg = Postgres::start_with(&["default_transaction_isolation=serializable"]);
    assert_eq!(
        pg.psql("SHOW default_transaction_isolation"),
        "serializable"
    );
    let engine = engine(&pg.bouncer_url(), Duration::from_secs(5));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for _ in 0..25 {
                    let mut request = try_now();
                    request.wait(Wait::up_to(Some(Duration::from_secs(60))));
                    let lease = Engine::acquire(&engine, "serial", &request).unwrap();
                    let from = Instant::now();
                    lease.record_outcome(end(Outcome::Succeeded)).unwrap();
                    let to = Instant::now();
                    held.push((lease.fencing_token(), from, to));
                    assert!(!lease.release().unwrap().was_lost());
                }
                held
            })
        })
        .collect();
    let mut all: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    all.sort_by_key(|&(token, ..)| token);
    for pair in all.windows(2) {
        assert!(pair[0].2 < pair[1].1, "holders overlapped: {pair:?}");
    }
    assert_eq!(pg.psql("SELECT count(*) FROM lockfile.runs"), "100");
}

#[test]
fn a_role_with_only_the_documented_grants_runs_and_a_missing_table_names_init() {
    let pg = Postgres::start();
    let admin = engine(&pg.url(), Duration::from_secs(3));
    pg.psql(&format!("CREATE ROLE app LOGIN PASSWORD '{PASSWORD}'"));
    pg.psql(&lockfile_postgres::schema::grants("lockfile", "app"));
    let url = format!("postgres://app:{PASSWORD}@127.0.0.1:{}/postgres", pg.port);
    let mut app = LeaseOptions::new(&url);
    app.ttl(Duration::from_secs(3));
    let lease = Engine::acquire(&app, "granted", &try_now()).unwrap();
    lease.record_outcome(end(Outcome::Succeeded)).unwrap();
    assert!(!lease.release().unwrap().was_lost());
    assert_eq!(app.inspect("granted").unwrap().state, LeaseState::Free);
    assert!(
        app.inspect_all()
            .unwrap()
            .iter()
            .any(|r| r.name == "granted")
    );
    // No DDL rights: init fails, and a run never tries.
    let err = app.init(None).unwrap_err();
    assert_eq!(
        sqlstate::of(&err),
        Some(sqlstate::INSUFFICIENT_PRIVILEGE),
        "{err}"
    );
    drop(admin);

    pg.psql("DROP TABLE lockfile.leases");
    let err = Engine::acquire(&app, "granted", &try_now()).unwrap_err();
    assert_eq!(sqlstate::of(&err), Some(sqlstate::UNDEFINED_TABLE), "{err}");
    let message = err.to_string();
    assert!(message.contains("SQLSTATE 42P01"), "{message}");
    assert!(message.contains("lockfile postgres init"), "{message}");
    assert!(message.contains("LeaseOptions::init"), "{message}");
    assert!(!message.contains(PASSWORD), "{message}");
    assert!(
        message.contains(&format!(
            "postgres://app:***@127.0.0.1:{}/postgres",
            pg.port
        )),
        "{message}"
    );
}

#[test]
fn a_bad_password_a_refused_port_and_a_read_only_server_are_clear_errors() {
    let pg = Postgres::start();
    let ok = engine(&pg.url(), Duration::from_secs(3));
    let wrong = pg.url().replace(PASSWORD, "wrong-pw");
    let err = Engine::acquire(&LeaseOptions::new(&wrong), "x", &try_now()).unwrap_err();
    assert_eq!(
        sqlstate::of(&err),
        Some(sqlstate::INVALID_PASSWORD),
        "{err}"
    );
    assert!(!err.to_string().contains("wrong-pw"), "{err}");

    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = format!("postgres://lease:{PASSWORD}@127.0.0.1:{closed}/postgres");
    let err = Engine::acquire(&LeaseOptions::new(&refused), "x", &try_now()).unwrap_err();
    assert!(matches!(err, Error::Server { .. }), "{err}");
    assert_eq!(sqlstate::of(&err), None, "{err}");
    assert!(!err.to_string().contains(PASSWORD), "{err}");

    pg.psql("ALTER DATABASE postgres SET default_transaction_read_only = on");
    let err = Engine::acquire(&ok, "x", &try_now()).unwrap_err();
    assert_eq!(sqlstate::of(&err), Some(sqlstate::READ_ONLY), "{err}");
    assert!(err.to_string().contains("SQLSTATE 25006"), "{err}");
}

/// The options' own calls, as etcd's: a concrete guard, the job and the
/// runtime from the options, a bounded wait, and a release that says how
/// it went.
#[test]
fn the_options_take_a_lease_themselves_with_their_job_runtime_and_timeout() {
    let pg = Postgres::start();
    let mut opts = engine(&pg.url(), Duration::from_secs(3));
    opts.job("nightly").max_runtime(Duration::from_secs(60));
    let guard: lockfile_postgres::LeaseGuard = opts.try_acquire("own").unwrap();
    assert_eq!(guard.record().job.as_deref(), Some("nightly"));
    assert_eq!(guard.record().max_runtime_ms, Some(60_000));
    let err = opts.try_acquire("own").unwrap_err();
    assert!(err.is_contended(), "{err}");
    let started = Instant::now();
    let err = opts
        .clone()
        .timeout(Duration::from_millis(300))
        .acquire("own")
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    let released = guard.release().unwrap();
    assert!(!released.was_lost(), "{released:?}");
    let again = opts.acquire("own").unwrap();
    assert!(!again.release().unwrap().was_lost());
}
