//! `SCHEMA.fence(name, token)`, the fence a job's own transaction calls
//! first, against a real PostgreSQL: tokens that rise pass and are kept,
//! an equal one passes, a lower one raises SQLSTATE LF001 and its whole
//! transaction rolls back (also when it waited behind the newer holder's),
//! a holder paused inside its fenced transaction, tokens of every engine's
//! scale, `fence_reset`, the grants, the DDL applied by a database's
//! owner, a hostile `search_path`, and the documented `psql` line.

mod common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use lockfile_postgres::LeaseOptions;
use lockfile_postgres::schema::{ddl, fence_sql, grants};
use lockfile_postgres::sqlstate::{INSUFFICIENT_PRIVILEGE, STALE_FENCING_TOKEN};
use lockfile_test_support::postgres::{PASSWORD, Postgres};
use lockfile_test_support::wait_until;
use tokio_postgres::NoTls;

const SCHEMA: &str = "lockfile";
/// A Redis token: the server's clock in microseconds (2027).
const REDIS_SCALE: i64 = 1_800_000_000_000_000;
/// SQLSTATE 22004, `null_value_not_allowed`.
const NULL_VALUE_NOT_ALLOWED: &str = "22004";
/// SQLSTATE 25P02, `in_failed_sql_transaction`.
const IN_FAILED_TRANSACTION: &str = "25P02";

/// A server whose schema `init` created, as the superuser.
fn server() -> Postgres {
    let pg = Postgres::start();
    drop(common::engine(&pg.url(), Duration::from_secs(3)));
    pg
}

fn url_of(pg: &Postgres, role: &str, database: &str) -> String {
    format!(
        "postgres://{role}:{PASSWORD}@127.0.0.1:{}/{database}",
        pg.port
    )
}

/// The role `role` with the documented grants and nothing more, as the
/// other tests make it; its URL.
fn job_role(pg: &Postgres, role: &str) -> String {
    pg.psql(&format!("CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'"));
    pg.psql(&grants(SCHEMA, role));
    url_of(pg, role, "postgres")
}

/// A table for the jobs' writes, which the role `role` may write.
fn ledger(pg: &Postgres, role: &str) {
    pg.psql(&format!(
        "CREATE TABLE public.ledger (note pg_catalog.text NOT NULL); \
         GRANT SELECT, INSERT ON public.ledger TO {role}"
    ));
}

/// The ledger's notes, in order, as the superuser sees them.
fn notes(pg: &Postgres) -> String {
    pg.psql(
        "SET search_path = pg_catalog; \
         SELECT coalesce(string_agg(note, ',' ORDER BY note), '') FROM public.ledger",
    )
}

/// What `SCHEMA.fences` holds, `name=token` in order of name.
fn fences(pg: &Postgres) -> String {
    pg.psql(
        "SET search_path = pg_catalog; \
         SELECT coalesce(string_agg(name || '=' || token, ',' ORDER BY name), '') \
         FROM lockfile.fences",
    )
}

/// A session of the test's own, through tokio-postgres (the client the
/// engine uses), driven statement by statement: a transaction is what its
/// `BEGIN` and `COMMIT` say, as in a job's own code.
struct Session {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Session {
    fn connect(url: &str) -> Session {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = rt.block_on(async {
            let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
            tokio::spawn(async move {
                let _ = connection.await;
            });
            client
        });
        Session { rt, client }
    }

    fn execute(&self, sql: &str) -> Result<(), tokio_postgres::Error> {
        self.rt.block_on(self.client.batch_execute(sql))
    }

    fn text(&self, sql: &str) -> String {
        self.rt
            .block_on(self.client.query_one(sql, &[]))
            .unwrap()
            .get(0)
    }

    fn pid(&self) -> i32 {
        self.rt
            .block_on(
                self.client
                    .query_one("SELECT pg_catalog.pg_backend_pid()", &[]),
            )
            .unwrap()
            .get(0)
    }

    /// `SELECT lockfile.fence($1, $2)`, as a job sends it.
    fn fence(&self, name: &str, token: i64) -> Result<i64, tokio_postgres::Error> {
        self.fence_nullable(Some(name), Some(token))
    }

    fn fence_nullable(
        &self,
        name: Option<&str>,
        token: Option<i64>,
    ) -> Result<i64, tokio_postgres::Error> {
        self.rt
            .block_on(self.client.query_one(&fence_sql(SCHEMA), &[&name, &token]))
            .map(|row| row.get(0))
    }
}

fn code(e: &tokio_postgres::Error) -> &str {
    e.code().map_or("(none)", |c| c.code())
}

fn message(e: &tokio_postgres::Error) -> &str {
    e.as_db_error().map_or("(no message)", |db| db.message())
}

/// The message of a fence refused for `token`, `highest` having been seen.
fn stale_message(name: &str, token: i64, highest: i64) -> String {
    format!(
        "lockfile.fence: stale fencing token {token} for '{name}': the highest seen is {highest}"
    )
}

#[test]
fn rising_and_equal_tokens_pass_and_a_lower_one_rolls_its_whole_transaction_back() {
    let pg = server();
    let url = job_role(&pg, "app");
    ledger(&pg, "app");
    let app = Session::connect(&url);

    // Rising tokens pass and are kept; each name has its own.
    for token in [3, 4, 10] {
        assert_eq!(app.fence("backup", token).unwrap(), token);
    }
    assert_eq!(app.fence("report", 1).unwrap(), 1);
    assert_eq!(fences(&pg), "backup=10,report=1");
    // The same holder, another transaction: an equal token passes.
    app.execute("BEGIN").unwrap();
    assert_eq!(app.fence("backup", 10).unwrap(), 10);
    app.execute("INSERT INTO public.ledger VALUES ('holder'); COMMIT")
        .unwrap();
    assert_eq!(notes(&pg), "holder");

    // A stale holder: its write before the fence, the fence, a write after
    // it. The fence raises LF001 with the name and both tokens; the write
    // after is refused; the COMMIT is a rollback; nothing of it is kept.
    app.execute("BEGIN; INSERT INTO public.ledger VALUES ('stale before')")
        .unwrap();
    let err = app.fence("backup", 9).unwrap_err();
    assert_eq!(code(&err), STALE_FENCING_TOKEN, "{err:?}");
    assert_eq!(message(&err), stale_message("backup", 9, 10));
    let after = app
        .execute("INSERT INTO public.ledger VALUES ('stale after')")
        .unwrap_err();
    assert_eq!(code(&after), IN_FAILED_TRANSACTION, "{after:?}");
    app.execute("COMMIT").unwrap();
    assert_eq!(notes(&pg), "holder");
    assert_eq!(fences(&pg), "backup=10,report=1");

    // Remembered across sessions, and per name.
    let again = Session::connect(&url);
    let err = again.fence("backup", 4).unwrap_err();
    assert_eq!(code(&err), STALE_FENCING_TOKEN, "{err:?}");
    assert_eq!(again.fence("report", 2).unwrap(), 2);

    // NULL is refused, never taken for "no fence": a NULL result would let
    // the transaction go on.
    for (name, token) in [(None, Some(5)), (Some("backup"), None), (None, None)] {
        let err = again.fence_nullable(name, token).unwrap_err();
        assert_eq!(code(&err), NULL_VALUE_NOT_ALLOWED, "{err:?}");
        assert_eq!(
            message(&err),
            "lockfile.fence: the lease name and the fencing token must not be NULL"
        );
    }
    assert_eq!(fences(&pg), "backup=10,report=2");
}

/// The newer holder has fenced in a transaction still open; the stale
/// holder's transaction writes, then fences: it waits on the row's lock,
/// and fails with LF001 once the newer one commits, whether the name had a
/// row before or the newer holder's insert made it. Under REPEATABLE READ
/// it fails with 40001 instead, and its retry with LF001.
#[test]
fn a_stale_transaction_that_fences_behind_the_newer_holder_fails_once_that_one_commits() {
    let pg = server();
    let url = job_role(&pg, "app");
    ledger(&pg, "app");
    for (name, before, isolation) in [
        ("first", None, "READ COMMITTED"),
        ("again", Some(5), "READ COMMITTED"),
        ("isolated", Some(5), "REPEATABLE READ"),
    ] {
        let newer = Session::connect(&url);
        if let Some(token) = before {
            newer.fence(name, token).unwrap();
        }
        let stale = Session::connect(&url);
        let stale_pid = stale.pid();
        newer
            .execute(&format!(
                "BEGIN; INSERT INTO public.ledger VALUES ('{name} newer')"
            ))
            .unwrap();
        assert_eq!(newer.fence(name, 10).unwrap(), 10);

        let waiting = std::thread::spawn(move || {
            stale
                .execute(&format!(
                    "BEGIN ISOLATION LEVEL {isolation}; \
                     INSERT INTO public.ledger VALUES ('{name} stale')"
                ))
                .unwrap();
            let fenced = stale.fence(name, 5);
            let after = stale.execute(&format!(
                "INSERT INTO public.ledger VALUES ('{name} stale after')"
            ));
            stale.execute("COMMIT").unwrap();
            let fenced = fenced.map_err(|e| (code(&e).to_owned(), message(&e).to_owned()));
            let retried = stale
                .fence(name, 5)
                .map_err(|e| (code(&e).to_owned(), message(&e).to_owned()));
            (fenced, after.map_err(|e| code(&e).to_owned()), retried)
        });
        wait_until("the stale fence to wait on the newer holder's lock", || {
            pg.psql(&format!(
                "SELECT coalesce(wait_event_type, '') FROM pg_catalog.pg_stat_activity \
                 WHERE pid = {stale_pid}"
            )) == "Lock"
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            !waiting.is_finished(),
            "{name}: the stale fence did not wait"
        );
        newer.execute("COMMIT").unwrap();

        let (fenced, after, retried) = waiting.join().unwrap();
        let (code, message) = fenced.unwrap_err();
        if isolation == "READ COMMITTED" {
            assert_eq!(code, STALE_FENCING_TOKEN, "{name}: {message}");
            assert_eq!(message, stale_message(name, 5, 10), "{name}");
        } else {
            assert_eq!(code, "40001", "{name}: {message}");
        }
        assert_eq!(after.unwrap_err(), IN_FAILED_TRANSACTION, "{name}");
        let (code, message) = retried.unwrap_err();
        assert_eq!(code, STALE_FENCING_TOKEN, "{name}: {message}");
        assert_eq!(message, stale_message(name, 5, 10), "{name}");
    }
    assert_eq!(notes(&pg), "again newer,first newer,isolated newer");
    assert_eq!(fences(&pg), "again=10,first=10,isolated=10");
}

/// The other way round: a holder that fenced and then stopped inside its
/// transaction (a pause, a hung job) holds the row's lock, so the next
/// holder's fence waits, until the server ends the idle transaction
/// (`idle_in_transaction_session_timeout`, as the docs advise): its writes
/// roll back and the next holder's fence passes.
#[test]
fn a_holder_paused_in_its_fenced_transaction_holds_the_next_up_until_the_server_ends_it() {
    let pg = server();
    let url = job_role(&pg, "app");
    ledger(&pg, "app");
    let paused = Session::connect(&url);
    paused
        .execute(
            "SET idle_in_transaction_session_timeout = '3s'; \
             BEGIN; INSERT INTO public.ledger VALUES ('paused')",
        )
        .unwrap();
    assert_eq!(paused.fence("nightly", 5).unwrap(), 5);

    let next = Session::connect(&url);
    let next_pid = next.pid();
    let waiting = std::thread::spawn(move || {
        let fenced = next.fence("nightly", 10).map_err(|e| e.to_string());
        next.execute("INSERT INTO public.ledger VALUES ('next')")
            .unwrap();
        fenced
    });
    wait_until("the next holder's fence to wait on the paused one", || {
        pg.psql(&format!(
            "SELECT coalesce(wait_event_type, '') FROM pg_catalog.pg_stat_activity \
             WHERE pid = {next_pid}"
        )) == "Lock"
    });
    assert_eq!(waiting.join().unwrap(), Ok(10));
    assert!(paused.execute("COMMIT").is_err(), "the session was ended");
    assert_eq!(notes(&pg), "next");
    assert_eq!(fences(&pg), "nightly=10");
}

/// Small tokens (etcd's revisions, PostgreSQL's sequence), Redis's
/// microsecond tokens and the largest bigint all pass; a name fenced at
/// Redis's scale refuses small tokens until the schema's owner resets it
/// with `fence_reset`, which the jobs' role may not call.
#[test]
fn tokens_of_every_engines_scale_pass_and_fence_reset_moves_a_name_back_down() {
    let pg = server();
    let url = job_role(&pg, "app");
    let app = Session::connect(&url);
    let owner = Session::connect(&pg.url());

    for token in [1, 2, 76, 80, REDIS_SCALE, REDIS_SCALE + 1] {
        assert_eq!(app.fence("moving", token).unwrap(), token);
    }
    assert_eq!(app.fence("kept", REDIS_SCALE).unwrap(), REDIS_SCALE);
    assert_eq!(app.fence("largest", i64::MAX).unwrap(), i64::MAX);
    assert_eq!(app.fence("largest", i64::MAX).unwrap(), i64::MAX);
    // Back to PostgreSQL's sequence: refused, naming both tokens.
    let err = app.fence("moving", 81).unwrap_err();
    assert_eq!(code(&err), STALE_FENCING_TOKEN, "{err:?}");
    assert_eq!(message(&err), stale_message("moving", 81, REDIS_SCALE + 1));
    let hint = err.as_db_error().and_then(|db| db.hint()).unwrap_or("");
    assert!(
        hint.contains("SELECT lockfile.fence_reset('moving')"),
        "{hint}"
    );

    // The jobs' role may not reset a name.
    let err = app
        .execute("SELECT lockfile.fence_reset('moving')")
        .unwrap_err();
    assert_eq!(code(&err), INSUFFICIENT_PRIVILEGE, "{err:?}");
    let err = owner
        .execute("SELECT lockfile.fence_reset(NULL)")
        .unwrap_err();
    assert_eq!(code(&err), NULL_VALUE_NOT_ALLOWED, "{err:?}");
    owner
        .execute("SELECT lockfile.fence_reset('moving')")
        .unwrap();
    // Reset, the name takes small tokens again; the others are untouched.
    assert_eq!(app.fence("moving", 81).unwrap(), 81);
    assert_eq!(
        code(&app.fence("kept", 81).unwrap_err()),
        STALE_FENCING_TOKEN
    );
    assert_eq!(
        fences(&pg),
        format!("kept={REDIS_SCALE},largest={},moving=81", i64::MAX)
    );
    // Resetting a name with no row is no error.
    owner
        .execute("SELECT lockfile.fence_reset('never-fenced')")
        .unwrap();
}

/// The role that `grants()` describes fences, but may not write, read or
/// empty `lockfile.fences` itself, nor call `fence_reset`; a role with
/// USAGE on the schema and no EXECUTE may not fence (a function's EXECUTE
/// is PUBLIC's by default). Still so after `init` runs again; each time,
/// four `init`s race, on a fresh server and on the made schema.
#[test]
fn the_jobs_role_fences_through_the_function_alone() {
    let pg = Postgres::start();
    let racing_inits = || {
        let inits: Vec<_> = (0..4)
            .map(|_| {
                let url = pg.url();
                std::thread::spawn(move || LeaseOptions::new(url).init(None))
            })
            .collect();
        for init in inits {
            init.join().unwrap().expect("init");
        }
    };
    racing_inits();
    let url = job_role(&pg, "app");
    pg.psql(&format!(
        "CREATE ROLE outsider LOGIN PASSWORD '{PASSWORD}'; \
         GRANT USAGE ON SCHEMA lockfile TO outsider"
    ));
    let outsider = url_of(&pg, "outsider", "postgres");
    for round in ["init once", "init again"] {
        if round == "init again" {
            racing_inits();
        }
        let app = Session::connect(&url);
        assert_eq!(app.fence("backup", 7).unwrap(), 7, "{round}");
        for sql in [
            "INSERT INTO lockfile.fences VALUES ('backup', 9223372036854775807, now())",
            "UPDATE lockfile.fences SET token = 9223372036854775807",
            "DELETE FROM lockfile.fences",
            "TRUNCATE lockfile.fences",
            "SELECT count(*) FROM lockfile.fences",
            "SELECT lockfile.fence_reset('backup')",
        ] {
            let err = app.execute(sql).unwrap_err();
            assert_eq!(
                code(&err),
                INSUFFICIENT_PRIVILEGE,
                "{round}: {sql}: {err:?}"
            );
        }
        let err = Session::connect(&outsider)
            .fence("backup", i64::MAX)
            .unwrap_err();
        assert_eq!(code(&err), INSUFFICIENT_PRIVILEGE, "{round}: {err:?}");
        assert_eq!(fences(&pg), "backup=7", "{round}");
    }
}

/// What the role `attacker`, which may CREATE in `public`, plants there for
/// a caller whose `search_path` puts `public` first: a `fences` table open
/// to all, and functions and operators that shadow those the fence uses
/// (a `<=` that says every token is new enough, a `format` that
/// matches its arguments more exactly than `pg_catalog`'s). Each planted
/// function first writes its name into `public.planted_calls`.
const PLANTED: &str = r"
SET ROLE attacker;
CREATE TABLE public.planted_calls (what pg_catalog.text);
GRANT SELECT, INSERT ON public.planted_calls TO PUBLIC;
CREATE FUNCTION public.planted(what pg_catalog.text) RETURNS pg_catalog.bool
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ INSERT INTO public.planted_calls (what) VALUES (what); SELECT true $$;

CREATE TABLE public.fences (
  name pg_catalog.text PRIMARY KEY,
  token pg_catalog.int8 NOT NULL,
  updated_at pg_catalog.timestamptz NOT NULL);
GRANT ALL ON public.fences TO PUBLIC;

CREATE FUNCTION public.now() RETURNS pg_catalog.timestamptz
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('now'); SELECT pg_catalog.now() $$;
CREATE FUNCTION public.statement_timestamp() RETURNS pg_catalog.timestamptz
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('statement_timestamp'); SELECT pg_catalog.statement_timestamp() $$;
CREATE FUNCTION public.format(pg_catalog.text, pg_catalog.int8, pg_catalog.text, pg_catalog.int8)
  RETURNS pg_catalog.text LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('format(text, int8, text, int8)'); SELECT 'planted' $$;
CREATE FUNCTION public.format(pg_catalog.text, pg_catalog.text) RETURNS pg_catalog.text
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('format(text, text)'); SELECT 'planted' $$;

CREATE FUNCTION public.int8_le(pg_catalog.int8, pg_catalog.int8) RETURNS pg_catalog.bool
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('<=(bigint, bigint)') $$;
CREATE OPERATOR public.<= (LEFTARG = pg_catalog.int8, RIGHTARG = pg_catalog.int8, FUNCTION = public.int8_le);
CREATE FUNCTION public.text_eq(pg_catalog.text, pg_catalog.text) RETURNS pg_catalog.bool
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT public.planted('=(text, text)') $$;
CREATE OPERATOR public.= (LEFTARG = pg_catalog.text, RIGHTARG = pg_catalog.text, FUNCTION = public.text_eq);
RESET ROLE;
";

/// A hostile role plants objects in `public` (CVE-2018-1058), and the
/// caller, whose `search_path` is `public, pg_catalog`, has a temporary
/// `fences` table of its own (CVE-2007-2138): the fence still writes the
/// real `lockfile.fences`, still refuses a stale token with its own
/// message, and nothing planted is ever called or written.
#[test]
fn names_planted_in_public_or_pg_temp_are_never_used_by_the_fence() {
    let pg = server();
    pg.psql("CREATE ROLE attacker NOLOGIN; GRANT CREATE ON SCHEMA public TO attacker");
    let url = job_role(&pg, "app");
    pg.psql("ALTER ROLE app SET search_path = public, pg_catalog");
    pg.psql(PLANTED);
    let app = Session::connect(&url);
    app.execute("SET search_path = public, pg_catalog").unwrap();
    // The plant works: the caller's own statements resolve to it.
    assert_eq!(
        app.text("SELECT (2::pg_catalog.int8 <= 1::pg_catalog.int8)::pg_catalog.text"),
        "true"
    );
    assert_eq!(
        app.text("SELECT format('%s', 1::pg_catalog.int8, 'x', 2::pg_catalog.int8)"),
        "planted"
    );
    assert_eq!(
        app.text("SELECT string_agg(what, ', ' ORDER BY what) FROM public.planted_calls"),
        "<=(bigint, bigint), format(text, int8, text, int8)"
    );
    pg.psql("TRUNCATE public.planted_calls");
    app.execute(
        "CREATE TEMPORARY TABLE fences (name pg_catalog.text PRIMARY KEY, \
         token pg_catalog.int8 NOT NULL, updated_at pg_catalog.timestamptz NOT NULL)",
    )
    .unwrap();

    assert_eq!(app.fence("backup", 10).unwrap(), 10);
    assert_eq!(app.fence("backup", 10).unwrap(), 10);
    let err = app.fence("backup", 5).unwrap_err();
    assert_eq!(code(&err), STALE_FENCING_TOKEN, "{err:?}");
    assert_eq!(message(&err), stale_message("backup", 5, 10));
    let hint = err.as_db_error().and_then(|db| db.hint()).unwrap_or("");
    assert!(hint.contains("fence_reset('backup')"), "{hint}");
    assert_eq!(app.fence("other", 0).unwrap(), 0);

    assert_eq!(fences(&pg), "backup=10,other=0");
    assert_eq!(
        pg.psql("SELECT count(*) FROM public.fences"),
        "0",
        "the planted table was written"
    );
    assert_eq!(
        app.text("SELECT count(*)::pg_catalog.text FROM pg_temp.fences"),
        "0",
        "the caller's temporary table was written"
    );
    assert_eq!(
        pg.psql(
            "SET search_path = pg_catalog; \
             SELECT coalesce(string_agg(DISTINCT what, ', '), '') FROM public.planted_calls"
        ),
        "",
        "planted code ran in the fence"
    );
}

/// Runs `psql` reading `sql` on stdin, as `lockfile postgres schema | psql`.
fn psql_stdin(pg: &Postgres, url: &str, sql: &str) -> Output {
    let mut psql = Command::new(pg.psql_program())
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    psql.stdin
        .take()
        .unwrap()
        .write_all(sql.as_bytes())
        .unwrap();
    psql.wait_with_output().unwrap()
}

/// The DDL and the grants applied with psql by the owner of a database, no
/// superuser: the script runs without a word on stderr, and again; the
/// functions belong to that owner, who may reset a name, and the jobs' role
/// fences with what `grants()` gave it.
#[test]
fn the_ddl_applied_by_a_databases_owner_gives_that_owner_the_fence() {
    let pg = Postgres::start();
    pg.psql(&format!(
        "CREATE ROLE owner_only LOGIN PASSWORD '{PASSWORD}'; \
         CREATE ROLE app LOGIN PASSWORD '{PASSWORD}'"
    ));
    pg.psql("CREATE DATABASE fresh OWNER owner_only");
    let owner = url_of(&pg, "owner_only", "fresh");
    let applied = psql_stdin(&pg, &owner, &(ddl(SCHEMA, None) + &grants(SCHEMA, "app")));
    assert_eq!(applied.status.code(), Some(0), "{applied:?}");
    assert!(applied.stderr.is_empty(), "{applied:?}");
    let again = psql_stdin(&pg, &owner, &ddl(SCHEMA, None));
    assert_eq!(again.status.code(), Some(0), "{again:?}");

    let owner = Session::connect(&owner);
    assert_eq!(
        owner.text(
            "SELECT string_agg(p.proname || ' ' || pg_catalog.pg_get_userbyid(p.proowner) \
             || ' ' || p.prosecdef::pg_catalog.text, ', ' ORDER BY p.proname) \
             FROM pg_catalog.pg_proc AS p WHERE p.pronamespace = 'lockfile'::pg_catalog.regnamespace"
        ),
        "fence owner_only true, fence_reset owner_only true"
    );
    let app = Session::connect(&url_of(&pg, "app", "fresh"));
    assert_eq!(app.fence("backup", REDIS_SCALE).unwrap(), REDIS_SCALE);
    let err = app.fence("backup", 3).unwrap_err();
    assert_eq!(code(&err), STALE_FENCING_TOKEN, "{err:?}");
    owner
        .execute("SELECT lockfile.fence_reset('backup')")
        .unwrap();
    assert_eq!(app.fence("backup", 3).unwrap(), 3);
}

/// The line docs/across-hosts.md gives a shell job: the fence and the
/// job's file in one transaction.
const DOCUMENTED_LINE: &str = r#"psql -X -v ON_ERROR_STOP=1 --single-transaction -c "SELECT lockfile.fence('backup', ${LOCKFILE_FENCING_TOKEN})" -f job.sql"#;

/// Runs the documented line with `sh`, in `dir` (where job.sql is), with
/// the connection in libpq's variables and the token, if any, in
/// `LOCKFILE_FENCING_TOKEN`.
fn documented_line(pg: &Postgres, dir: &Path, token: Option<u64>) -> Output {
    let bin = pg.psql_program().parent().unwrap().to_owned();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(DOCUMENTED_LINE)
        .current_dir(dir)
        .env("PATH", path)
        .env("PGHOST", "127.0.0.1")
        .env("PGPORT", pg.port.to_string())
        .env("PGUSER", "app")
        .env("PGPASSWORD", PASSWORD)
        .env("PGDATABASE", "postgres")
        .env_remove("LOCKFILE_FENCING_TOKEN")
        .stdin(Stdio::null());
    if let Some(token) = token {
        sh.env("LOCKFILE_FENCING_TOKEN", token.to_string());
    }
    sh.output().unwrap()
}

/// The documented `psql` line, with tokens from real leases: the newer
/// holder's file runs and commits with its fence; the older holder's token
/// aborts its whole file; a file that fails half-way keeps neither its
/// first writes nor the fence's; an unset token runs nothing.
#[test]
fn the_documented_psql_line_runs_the_whole_file_in_the_fences_transaction_or_nothing() {
    let docs = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/across-hosts.md"),
    )
    .unwrap();
    assert!(docs.contains(DOCUMENTED_LINE), "the docs' line changed");

    let pg = Postgres::start();
    let engine = common::engine(&pg.url(), Duration::from_secs(3));
    job_role(&pg, "app");
    ledger(&pg, "app");
    let older = engine.try_acquire("backup").unwrap();
    let old_token = older.fencing_token();
    assert!(!older.release().unwrap().was_lost());
    let newer = engine.try_acquire("backup").unwrap();
    let new_token = newer.fencing_token();
    assert!(new_token > old_token, "{new_token} after {old_token}");

    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.sql");
    let write_job = |sql: &str| std::fs::write(&job, sql).unwrap();

    // The holder's job: fenced, run and committed whole.
    write_job(
        "INSERT INTO public.ledger VALUES ('newer 1');\n\
         INSERT INTO public.ledger VALUES ('newer 2');\n",
    );
    let out = documented_line(&pg, dir.path(), Some(new_token));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(notes(&pg), "newer 1,newer 2");
    assert_eq!(fences(&pg), format!("backup={new_token}"));
    let fenced_at = pg.psql("SELECT updated_at FROM lockfile.fences");

    // The older holder, late: refused, and nothing of its file is run.
    write_job(
        "INSERT INTO public.ledger VALUES ('older 1');\n\
         INSERT INTO public.ledger VALUES ('older 2');\n",
    );
    let out = documented_line(&pg, dir.path(), Some(old_token));
    // psql's status for a failed -c (3 is for a failed file).
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&stale_message("backup", old_token as i64, new_token as i64)),
        "{stderr}"
    );
    assert_eq!(notes(&pg), "newer 1,newer 2");

    // The holder again (an equal token passes), its file failing half-way:
    // its first write and the fence's own are rolled back with it.
    write_job(
        "INSERT INTO public.ledger VALUES ('half 1');\n\
         SELECT 1 / 0;\n\
         INSERT INTO public.ledger VALUES ('half 2');\n",
    );
    let out = documented_line(&pg, dir.path(), Some(new_token));
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("division by zero"),
        "{out:?}"
    );
    assert_eq!(notes(&pg), "newer 1,newer 2");
    assert_eq!(pg.psql("SELECT updated_at FROM lockfile.fences"), fenced_at);

    // No token in the environment: a syntax error, nothing runs.
    let out = documented_line(&pg, dir.path(), None);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("syntax error"),
        "{out:?}"
    );
    assert_eq!(notes(&pg), "newer 1,newer 2");
    assert!(!newer.release().unwrap().was_lost());
}
