//! The engine against hostile roles of a real PostgreSQL: a role that may
//! CREATE in `public` and plants functions, operators and types there for a
//! job role whose `search_path` puts `public` first.

mod common;

use std::time::{Duration, Instant, SystemTime};

use common::engine;
use lockfile::history::{Outcome, RunEnd};
use lockfile::tick::{Schedule, TickClaim};
use lockfile::wait::Wait;
use lockfile_postgres::{Engine, LeaseOptions, LeaseRequest, LeaseState};
use lockfile_test_support::postgres::{PASSWORD, Postgres};
use lockfile_test_support::within;

fn request() -> LeaseRequest {
    let mut request = LeaseRequest::new();
    request.job("hostile");
    request
}

fn succeeded() -> RunEnd {
    RunEnd {
        outcome: Outcome::Succeeded,
        exit_code: Some(0),
        signal: None,
        started_at: SystemTime::now(),
    }
}

/// A role `app` with the documented grants, whose `search_path` is
/// `public, pg_catalog`: public first, the strongest case.
fn job_role(pg: &Postgres) -> String {
    pg.psql(&format!("CREATE ROLE app LOGIN PASSWORD '{PASSWORD}'"));
    pg.psql(&lockfile_postgres::schema::grants("lockfile", "app"));
    pg.psql("ALTER ROLE app SET search_path = public, pg_catalog");
    format!("postgres://app:{PASSWORD}@127.0.0.1:{}/postgres", pg.port)
}

/// What the role `attacker`, which may CREATE in `public` (as every role
/// could before PostgreSQL 15), plants there: functions, operators and
/// types that shadow `pg_catalog`'s for a `search_path` that puts `public`
/// first. Each one, when called, first writes its name into
/// `public.planted_calls`; then it either lies where a lie would give two
/// holders (every token 1, every lease expired as it is taken, every
/// attempt "ours") or does what the original does.
const PLANTED: &str = r"
SET ROLE attacker;
CREATE TABLE public.planted_calls (what pg_catalog.text);
GRANT INSERT ON public.planted_calls TO PUBLIC;
CREATE FUNCTION public.planted(what pg_catalog.text) RETURNS pg_catalog.bool
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ INSERT INTO public.planted_calls (what) VALUES (what); SELECT true $$;

CREATE FUNCTION public.nextval(pg_catalog.regclass) RETURNS pg_catalog.int8
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('nextval(regclass)'); SELECT 1::pg_catalog.int8 $$;
CREATE FUNCTION public.nextval(pg_catalog.text) RETURNS pg_catalog.int8
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('nextval(text)'); SELECT 1::pg_catalog.int8 $$;
CREATE FUNCTION public.statement_timestamp() RETURNS pg_catalog.timestamptz
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('statement_timestamp'); SELECT '2000-01-01 00:00:00+00'::pg_catalog.timestamptz $$;
CREATE FUNCTION public.clock_timestamp() RETURNS pg_catalog.timestamptz
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('clock_timestamp'); SELECT pg_catalog.clock_timestamp() $$;
CREATE FUNCTION public.set_config(pg_catalog.text, pg_catalog.text, pg_catalog.bool) RETURNS pg_catalog.text
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('set_config'); SELECT pg_catalog.set_config($1, $2, $3) $$;
CREATE FUNCTION public.pg_notify(pg_catalog.text, pg_catalog.text) RETURNS void
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('pg_notify'); SELECT pg_catalog.pg_notify($1, $2) $$;
CREATE FUNCTION public.date_part(pg_catalog.text, pg_catalog.timestamptz) RETURNS pg_catalog.float8
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('date_part(timestamptz)'); SELECT pg_catalog.date_part($1, $2) $$;
CREATE FUNCTION public.date_part(pg_catalog.text, pg_catalog.interval) RETURNS pg_catalog.float8
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('date_part(interval)'); SELECT pg_catalog.date_part($1, $2) $$;
CREATE FUNCTION public.pg_advisory_xact_lock(pg_catalog.int8) RETURNS void
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('pg_advisory_xact_lock'); SELECT pg_catalog.pg_advisory_xact_lock($1) $$;

-- Operators, each over a function of its own.
CREATE FUNCTION public.ts_plus(pg_catalog.timestamptz, pg_catalog.interval) RETURNS pg_catalog.timestamptz
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('+(timestamptz, interval)'); SELECT $1 $$;
CREATE OPERATOR public.+ (LEFTARG = pg_catalog.timestamptz, RIGHTARG = pg_catalog.interval, FUNCTION = public.ts_plus);
CREATE FUNCTION public.ts_minus(pg_catalog.timestamptz, pg_catalog.interval) RETURNS pg_catalog.timestamptz
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('-(timestamptz, interval)'); SELECT $1 OPERATOR(pg_catalog.-) $2 $$;
CREATE OPERATOR public.- (LEFTARG = pg_catalog.timestamptz, RIGHTARG = pg_catalog.interval, FUNCTION = public.ts_minus);
CREATE FUNCTION public.ts_diff(pg_catalog.timestamptz, pg_catalog.timestamptz) RETURNS pg_catalog.interval
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('-(timestamptz, timestamptz)'); SELECT $1 OPERATOR(pg_catalog.-) $2 $$;
CREATE OPERATOR public.- (LEFTARG = pg_catalog.timestamptz, RIGHTARG = pg_catalog.timestamptz, FUNCTION = public.ts_diff);
CREATE FUNCTION public.ms_times(pg_catalog.int8, pg_catalog.interval) RETURNS pg_catalog.interval
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('*(bigint, interval)'); SELECT '0 seconds'::pg_catalog.interval $$;
CREATE OPERATOR public.* (LEFTARG = pg_catalog.int8, RIGHTARG = pg_catalog.interval, FUNCTION = public.ms_times);
CREATE FUNCTION public.days_times(pg_catalog.int4, pg_catalog.interval) RETURNS pg_catalog.interval
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('*(integer, interval)'); SELECT $1 OPERATOR(pg_catalog.*) $2 $$;
CREATE OPERATOR public.* (LEFTARG = pg_catalog.int4, RIGHTARG = pg_catalog.interval, FUNCTION = public.days_times);
CREATE FUNCTION public.ts_le(pg_catalog.timestamptz, pg_catalog.timestamptz) RETURNS pg_catalog.bool
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('<=(timestamptz, timestamptz)') $$;
CREATE OPERATOR public.<= (LEFTARG = pg_catalog.timestamptz, RIGHTARG = pg_catalog.timestamptz, FUNCTION = public.ts_le);
CREATE FUNCTION public.ts_lt(pg_catalog.timestamptz, pg_catalog.timestamptz) RETURNS pg_catalog.bool
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('<(timestamptz, timestamptz)'); SELECT $1 OPERATOR(pg_catalog.<) $2 $$;
CREATE OPERATOR public.< (LEFTARG = pg_catalog.timestamptz, RIGHTARG = pg_catalog.timestamptz, FUNCTION = public.ts_lt);
CREATE FUNCTION public.ts_gt(pg_catalog.timestamptz, pg_catalog.timestamptz) RETURNS pg_catalog.bool
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('>(timestamptz, timestamptz)'); SELECT $1 OPERATOR(pg_catalog.>) $2 $$;
CREATE OPERATOR public.> (LEFTARG = pg_catalog.timestamptz, RIGHTARG = pg_catalog.timestamptz, FUNCTION = public.ts_gt);
CREATE FUNCTION public.text_eq(pg_catalog.text, pg_catalog.text) RETURNS pg_catalog.bool
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('=(text, text)') $$;
CREATE OPERATOR public.= (LEFTARG = pg_catalog.text, RIGHTARG = pg_catalog.text, FUNCTION = public.text_eq);
CREATE FUNCTION public.int8_eq(pg_catalog.int8, pg_catalog.int8) RETURNS pg_catalog.bool
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('=(bigint, bigint)'); SELECT $1 OPERATOR(pg_catalog.=) $2 $$;
CREATE OPERATOR public.= (LEFTARG = pg_catalog.int8, RIGHTARG = pg_catalog.int8, FUNCTION = public.int8_eq);
CREATE FUNCTION public.int8_plus(pg_catalog.int8, pg_catalog.int4) RETURNS pg_catalog.int8
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('+(bigint, integer)'); SELECT $1 OPERATOR(pg_catalog.+) $2 $$;
CREATE OPERATOR public.+ (LEFTARG = pg_catalog.int8, RIGHTARG = pg_catalog.int4, FUNCTION = public.int8_plus);
CREATE FUNCTION public.field(pg_catalog.jsonb, pg_catalog.text) RETURNS pg_catalog.text
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('->>(jsonb, text)'); SELECT pg_catalog.jsonb_object_field_text($1, $2) $$;
CREATE OPERATOR public.->> (LEFTARG = pg_catalog.jsonb, RIGHTARG = pg_catalog.text, FUNCTION = public.field);

-- Types: a cast to an unqualified name would reach these domains, whose
-- checks run the attacker's code.
CREATE DOMAIN public.jsonb AS pg_catalog.jsonb CHECK (public.planted('jsonb'));
CREATE DOMAIN public.text AS pg_catalog.text CHECK (public.planted('text'));
CREATE DOMAIN public.timestamptz AS pg_catalog.timestamptz CHECK (public.planted('timestamptz'));
CREATE DOMAIN public.int4 AS pg_catalog.int4 CHECK (public.planted('int4'));
CREATE DOMAIN public.int8 AS pg_catalog.int8 CHECK (public.planted('int8'));
CREATE DOMAIN public.float8 AS pg_catalog.float8 CHECK (public.planted('float8'));
CREATE DOMAIN public.regclass AS pg_catalog.regclass CHECK (public.planted('regclass'));
RESET ROLE;
";

/// Every function, operator and type the engine names is pg_catalog's: a
/// role that may CREATE in `public`, with the job role's `search_path`
/// putting `public` first, plants lying ones there, and still tokens rise,
/// two holders never overlap, and nothing planted ever runs.
#[test]
fn names_planted_in_public_never_redirect_a_statement() {
    let pg = Postgres::start();
    drop(engine(&pg.url(), Duration::from_secs(3)));
    pg.psql("CREATE ROLE attacker NOLOGIN");
    pg.psql("GRANT CREATE ON SCHEMA public TO attacker");
    let url = job_role(&pg);
    pg.psql(PLANTED);
    // The plant works: the job role's own session resolves to it.
    assert_eq!(
        pg.psql(
            "SET ROLE app; SET search_path = public, pg_catalog; \
             SELECT nextval('lockfile.fencing_tokens'); RESET ROLE"
        ),
        "1"
    );
    pg.psql("TRUNCATE public.planted_calls");

    let ttl = Duration::from_secs(3);
    let mut app = LeaseOptions::new(&url);
    app.ttl(ttl).request_timeout(Duration::from_secs(2));

    // Tokens rise across holders, and the runs are written.
    let mut last = 0;
    for _ in 0..5 {
        let lease = Engine::acquire(&app, "planted", &request()).unwrap();
        assert!(
            lease.fencing_token() > last,
            "{} after {last}",
            lease.fencing_token()
        );
        last = lease.fencing_token();
        lease.record_outcome(succeeded()).unwrap();
        assert!(!lease.release().unwrap().was_lost());
    }

    // A holder is renewed, and a contender is refused meanwhile.
    let held = Engine::acquire(&app, "planted", &request()).unwrap();
    let signal = held.signal();
    let since = signal.last_renewal();
    assert!(
        within(ttl, || signal.last_renewal() > since),
        "no renewal: {signal:?}"
    );
    assert!(signal.check().is_ok(), "{signal:?}");
    let err = Engine::acquire(&app, "planted", &request()).unwrap_err();
    assert!(err.is_contended(), "{err}");
    assert_eq!(err.owner().unwrap().token, held.record().token);
    let report = app.inspect("planted").unwrap();
    assert_eq!(report.state, LeaseState::Held);
    assert_eq!(report.fencing_token, Some(held.fencing_token()));
    let all = app.inspect_all().unwrap();
    let listed = all.iter().find(|r| r.name == "planted").unwrap();
    assert_eq!(listed.state, LeaseState::Held);
    assert!(listed.last_run.is_some(), "{listed:?}");
    assert!(!held.release().unwrap().was_lost());

    // Waiting contenders: each section ends before the next begins, by the
    // monotonic clock alone (not by the tokens, which are under test).
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let app = app.clone();
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for _ in 0..8 {
                    let mut wait = request();
                    wait.wait(Wait::up_to(Some(Duration::from_secs(60))));
                    let lease = Engine::acquire(&app, "planted", &wait).unwrap();
                    let from = Instant::now();
                    std::thread::sleep(Duration::from_millis(5));
                    let to = Instant::now();
                    held.push((from, to, lease.fencing_token()));
                    assert!(!lease.release().unwrap().was_lost());
                }
                held
            })
        })
        .collect();
    let mut sections: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    sections.sort_by_key(|&(from, ..)| from);
    for pair in sections.windows(2) {
        assert!(pair[0].1 < pair[1].0, "holders overlapped: {pair:?}");
        assert!(pair[0].2 < pair[1].2, "tokens out of order: {pair:?}");
    }
    assert_eq!(
        pg.psql("SELECT count(*) FROM lockfile.runs WHERE name = 'planted'"),
        "5"
    );
    assert_eq!(
        pg.psql("SELECT string_agg(DISTINCT what, ', ') FROM public.planted_calls"),
        "",
        "planted code ran as the job's role"
    );
}

fn failed() -> RunEnd {
    RunEnd {
        outcome: Outcome::Failed,
        exit_code: Some(1),
        signal: None,
        started_at: SystemTime::now(),
    }
}

/// A role with the documented grants (DML on every table, no more) writes
/// values no run writes, each into one name's rows: an expiry of
/// `'infinity'` and a history version at the largest bigint (`victim`), an
/// expiry of `'-infinity'` and the largest `ttl_ms` (`clock`), a count of
/// failures past any `int4` (`counted`). `inspect` of all names still lists
/// every name; each poisoned name is taken, its tick claimed, its run
/// recorded; and a holder whose TTL is poisoned keeps renewing.
#[test]
fn rows_poisoned_by_a_dml_role_cost_no_name_its_runs_or_the_others_their_report() {
    let pg = Postgres::start();
    drop(engine(&pg.url(), Duration::from_secs(3)));
    let url = job_role(&pg);
    pg.psql("CREATE ROLE vandal NOLOGIN");
    pg.psql(&lockfile_postgres::schema::grants("lockfile", "vandal"));
    let mut app = LeaseOptions::new(&url);
    app.ttl(Duration::from_secs(3))
        .request_timeout(Duration::from_secs(2));
    let names = ["victim", "clock", "counted", "other"];
    let mut tokens = Vec::new();
    for name in names {
        let lease = Engine::acquire(&app, name, &request()).unwrap();
        lease.record_outcome(succeeded()).unwrap();
        tokens.push(lease.fencing_token());
        assert!(!lease.release().unwrap().was_lost());
    }
    // `victim` and `clock` are left held for ever, by their rows.
    pg.psql(
        "SET ROLE vandal; \
         UPDATE lockfile.leases SET expires_at = 'infinity' WHERE name = 'victim'; \
         UPDATE lockfile.history SET version = 9223372036854775807 WHERE name = 'victim'; \
         UPDATE lockfile.leases SET expires_at = '-infinity', ttl_ms = 9223372036854775807 \
           WHERE name = 'clock'; \
         UPDATE lockfile.history SET record = jsonb_set(record, '{last_run,consecutive_failures}', \
           '4294967295') WHERE name = 'counted'; \
         RESET ROLE",
    );

    let all = app.inspect_all().unwrap();
    let listed: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(listed, ["clock", "counted", "other", "victim"], "{all:?}");
    for report in &all {
        assert_eq!(report.state, LeaseState::Free, "{report:?}");
        assert!(report.last_run.is_some(), "{report:?}");
        // The one impossible expiry is said beside its name.
        let noted = report
            .content_error
            .as_deref()
            .is_some_and(|e| e.contains("later than the longest TTL (365 days)"));
        assert_eq!(noted, report.name == "victim", "{report:?}");
    }
    let victim = app.inspect("victim").unwrap();
    assert_eq!(victim.state, LeaseState::Free);
    assert!(victim.content_error.is_some(), "{victim:?}");
    assert!(app.inspect("clock").unwrap().content_error.is_none());
    // No holder may ask for an expiry that is taken for a poisoned one.
    let err = Engine::acquire(
        &app,
        "other",
        request().ttl(Duration::from_secs(366 * 86_400)),
    )
    .unwrap_err();
    assert!(err.to_string().contains("the longest is 365 days"), "{err}");

    // The tick claim (`--once-per`) and the run's record both move the
    // version on, from the largest bigint back to 1 and then 2.
    let schedule = Schedule::new(Duration::from_secs(3600), Duration::ZERO).unwrap();
    let mut once = request();
    once.claim_tick(TickClaim::new(schedule, Instant::now()));
    let lease = Engine::acquire(&app, "victim", &once).unwrap();
    assert!(
        lease.fencing_token() > tokens[3],
        "{}",
        lease.fencing_token()
    );
    lease.record_outcome(succeeded()).unwrap();
    assert!(!lease.release().unwrap().was_lost());
    assert_eq!(
        pg.psql("SELECT version FROM lockfile.history WHERE name = 'victim'"),
        "2"
    );

    let lease = Engine::acquire(&app, "counted", &request()).unwrap();
    let run = lease.record_outcome(failed()).unwrap();
    assert_eq!(run.consecutive_failures, u32::MAX);
    assert!(!lease.release().unwrap().was_lost());
    assert_eq!(
        pg.psql(
            "SELECT consecutive_failures FROM lockfile.runs WHERE name = 'counted' \
             ORDER BY id DESC LIMIT 1"
        ),
        "2147483647"
    );

    // Held, its TTL poisoned: renewals go on, within the longest TTL.
    let held = Engine::acquire(&app, "clock", &request()).unwrap();
    pg.psql(
        "SET ROLE vandal; \
         UPDATE lockfile.leases SET ttl_ms = 9223372036854775807 WHERE name = 'clock'; \
         RESET ROLE",
    );
    let signal = held.signal();
    let since = signal.last_renewal();
    assert!(
        within(Duration::from_secs(3), || signal.last_renewal() > since),
        "no renewal: {signal:?}"
    );
    assert!(signal.check().is_ok(), "{signal:?}");
    let report = app.inspect("clock").unwrap();
    assert_eq!(report.state, LeaseState::Held, "{report:?}");
    held.record_outcome(succeeded()).unwrap();
    assert!(!held.release().unwrap().was_lost());
    assert!(
        app.inspect_all()
            .unwrap()
            .iter()
            .all(|r| r.state == LeaseState::Free)
    );
}
