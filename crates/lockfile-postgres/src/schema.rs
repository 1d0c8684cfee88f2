//! The schema: its name, its DDL (`lockfile postgres schema` prints it,
//! `lockfile postgres init` applies it), and the grants a run needs.
//!
//! The DDL also holds the fence that a job's own transaction calls first
//! (`SELECT lockfile.fence('backup', $1)`, see [`fence_sql`]), so that the
//! data in the same database refuses a stale holder's writes.
//!
//! A run never creates anything: when hosts race, creation fails, and an
//! application role should not need DDL rights.

use std::fmt::Write as _;

use crate::sqlstate::STALE_FENCING_TOKEN;

/// The schema that holds the tables unless told otherwise.
pub const DEFAULT_SCHEMA: &str = "lockfile";

/// How many days of run history `init` keeps unless told otherwise.
pub const DEFAULT_HISTORY_DAYS: u32 = 30;

/// The longest schema name PostgreSQL keeps (NAMEDATALEN - 1).
const MAX_SCHEMA_LEN: usize = 63;

/// PostgreSQL's reserved key words: a name spelled like one of them is a
/// syntax error unless quoted, so it is refused rather than pasted.
///
/// Source: PostgreSQL 15, `SELECT word FROM pg_get_keywords() WHERE
/// catcode = 'R' ORDER BY word`. A test compares this list with the live
/// server's, so that a newer server's additions are noticed.
pub const RESERVED_KEY_WORDS: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "column",
    "constraint",
    "create",
    "current_catalog",
    "current_date",
    "current_role",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "from",
    "grant",
    "group",
    "having",
    "in",
    "initially",
    "intersect",
    "into",
    "lateral",
    "leading",
    "limit",
    "localtime",
    "localtimestamp",
    "not",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "placing",
    "primary",
    "references",
    "returning",
    "select",
    "session_user",
    "some",
    "symmetric",
    "table",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "when",
    "where",
    "window",
    "with",
];

/// Checks that `name` can be pasted into SQL as an identifier without
/// quoting: 1 to 63 lowercase ASCII letters, digits and `_`, not starting
/// with a digit, and not a reserved key word. Names are refused rather
/// than quoted because the same name is typed by a DBA in `psql` and in
/// the URL's `options`, where a quoted and an unquoted spelling would
/// silently name two different objects (`JobsApp` is `jobsapp` unquoted).
fn check_identifier(name: &str, what: &str) -> Result<(), String> {
    let shape = !name.is_empty()
        && name.len() <= MAX_SCHEMA_LEN
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !shape {
        return Err(format!(
            "{name:?} cannot name the {what}: use 1 to {MAX_SCHEMA_LEN} lowercase ASCII letters, digits and `_`, not starting with a digit"
        ));
    }
    if RESERVED_KEY_WORDS.contains(&name) {
        return Err(format!(
            "{name:?} cannot name the {what}: it is a PostgreSQL reserved key word"
        ));
    }
    Ok(())
}

/// Checks that `schema` can name the schema without quoting (see
/// [`check_role`] for the same rule on the role).
///
/// # Errors
///
/// A sentence saying what is wrong with it.
pub fn check_schema(schema: &str) -> Result<(), String> {
    check_identifier(schema, "schema")
}

/// Checks that `role` can be pasted into [`grants`] without quoting: the
/// same rule as the schema's, so that what is printed grants to exactly
/// the role that was named, and nothing in it can be read as SQL.
///
/// # Errors
///
/// A sentence saying what is wrong with it.
pub fn check_role(role: &str) -> Result<(), String> {
    check_identifier(role, "role")
}

/// The DDL that creates the schema `schema`, idempotently, in one
/// transaction under an advisory lock (so that two `init`s racing do not
/// fail). With `history_days`, the run history's retention is set to it;
/// without, it is left as it is (30 days when new).
///
/// `schema` must pass [`check_schema`].
pub fn ddl(schema: &str, history_days: Option<u32>) -> String {
    let s = schema;
    let mut ddl = format!(
        r"-- lockfile's PostgreSQL lease engine: schema `{s}`. Idempotent. Every type,
-- function and operator is named in pg_catalog, whatever the search_path.
BEGIN;
-- Two inits racing would otherwise fail on each other's catalog rows.
SELECT pg_catalog.pg_advisory_xact_lock(7021126352043372389);
CREATE SCHEMA IF NOT EXISTS {s};

-- Fencing tokens. CACHE 1 (never more): a cached range would hand tokens
-- out of order between sessions. NO CYCLE: a token never goes back.
CREATE SEQUENCE IF NOT EXISTS {s}.fencing_tokens AS bigint MINVALUE 1 NO CYCLE CACHE 1;

-- One row per lease name. The row outlives its holders: a release or an
-- expiry only moves expires_at, so that every later holder takes the row
-- over under its lock and draws its token there.
CREATE TABLE IF NOT EXISTS {s}.leases (
    name          pg_catalog.text PRIMARY KEY,
    fencing_token bigint      NOT NULL,
    attempt       pg_catalog.text NOT NULL,  -- the holder's owner-record token
    owner         pg_catalog.jsonb NOT NULL,  -- the holder's owner record
    ttl_ms        bigint      NOT NULL CHECK (ttl_ms OPERATOR(pg_catalog.>) 0),
    acquired_at   pg_catalog.timestamptz NOT NULL,
    renewed_at    pg_catalog.timestamptz NOT NULL,
    expires_at    pg_catalog.timestamptz NOT NULL   -- on the server's clock
);

-- Per name: how the last run ended and the last success (a JSON document),
-- written with a compare-and-set on version.
CREATE TABLE IF NOT EXISTS {s}.history (
    name       pg_catalog.text PRIMARY KEY,
    version    bigint      NOT NULL CHECK (version OPERATOR(pg_catalog.>) 0),
    record     pg_catalog.jsonb NOT NULL,
    updated_at pg_catalog.timestamptz NOT NULL
);

-- Every run's end, kept for settings.history_days.
CREATE TABLE IF NOT EXISTS {s}.runs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             pg_catalog.text NOT NULL,
    started_at       pg_catalog.timestamptz NOT NULL,
    finished_at      pg_catalog.timestamptz NOT NULL,
    duration_seconds double precision NOT NULL,
    outcome          pg_catalog.text NOT NULL,
    exit_code        integer,
    signal           integer,
    consecutive_failures integer      NOT NULL,
    host             pg_catalog.text NOT NULL,
    pid              bigint           NOT NULL,
    owner_token      pg_catalog.text NOT NULL,
    fencing_token    bigint           NOT NULL,
    recorded_at      pg_catalog.timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_name_finished_at ON {s}.runs (name, finished_at);

-- One row: the run history's retention, enforced as runs are written.
CREATE TABLE IF NOT EXISTS {s}.settings (
    only_row     boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    history_days integer NOT NULL CHECK (history_days OPERATOR(pg_catalog.>) 0)
);

-- Fencing where the data lives: per name, the highest fencing token that a
-- job's own transaction has presented to {s}.fence(). Written only through
-- that function: the jobs' role has no privilege on the table.
CREATE TABLE IF NOT EXISTS {s}.fences (
    name       pg_catalog.text PRIMARY KEY,
    token      bigint          NOT NULL,
    updated_at pg_catalog.timestamptz NOT NULL
);

-- Called first in a job's transaction: remembers the highest token per name
-- and raises SQLSTATE LF001 for a lower one, so that a stale holder's whole
-- transaction rolls back; an equal token passes (one holder, several
-- transactions). The row lock that the upsert takes orders the callers: a
-- stale transaction that fences after a newer one waits for it, then fails.
-- SECURITY DEFINER, with a search_path of pg_catalog and pg_temp last, and
-- every name qualified besides: nothing the caller may create is used.
CREATE OR REPLACE FUNCTION {s}.fence(lease_name pg_catalog.text, fencing_token bigint)
    RETURNS bigint
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $fence$
DECLARE
    highest bigint;
BEGIN
    IF lease_name IS NULL OR fencing_token IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'null_value_not_allowed',
            MESSAGE = '{s}.fence: the lease name and the fencing token must not be NULL',
            HINT = 'pass the lease''s name and its token, e.g. {s}.fence(''backup'', LOCKFILE_FENCING_TOKEN)';
    END IF;
    INSERT INTO {s}.fences AS f (name, token, updated_at)
        VALUES (lease_name, fencing_token, pg_catalog.statement_timestamp())
        ON CONFLICT (name) DO UPDATE
            SET token = EXCLUDED.token, updated_at = EXCLUDED.updated_at
            WHERE f.token OPERATOR(pg_catalog.<=) EXCLUDED.token
        RETURNING f.token INTO highest;
    IF NOT FOUND THEN
        -- The upsert locked the row even though it did not update it.
        SELECT f.token INTO highest FROM {s}.fences AS f
            WHERE f.name OPERATOR(pg_catalog.=) lease_name;
        RAISE EXCEPTION USING
            ERRCODE = '{STALE_FENCING_TOKEN}',
            MESSAGE = pg_catalog.format(
                '{s}.fence: stale fencing token %s for %L: the highest seen is %s',
                fencing_token, lease_name, highest),
            DETAIL = 'A later holder of the lease has fenced: this transaction rolls back, and must not be retried with this token.',
            HINT = pg_catalog.format(
                'Only if the name moved to an engine with smaller tokens, and no holder under the old one is left, may the schema''s owner SELECT {s}.fence_reset(%L).',
                lease_name);
    END IF;
    RETURN highest;
END
$fence$;

-- Forgets a name's highest token: the way to move a name to an engine whose
-- tokens are smaller (etcd's revisions, PostgreSQL's sequence and Redis's
-- microsecond clock differ in scale). For the schema's owner only.
CREATE OR REPLACE FUNCTION {s}.fence_reset(lease_name pg_catalog.text)
    RETURNS void
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $fence_reset$
BEGIN
    IF lease_name IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'null_value_not_allowed',
            MESSAGE = '{s}.fence_reset: the lease name must not be NULL';
    END IF;
    DELETE FROM {s}.fences AS f WHERE f.name OPERATOR(pg_catalog.=) lease_name;
END
$fence_reset$;

-- A function's EXECUTE is PUBLIC's by default: a role that could fence with
-- a huge token would fence every holder out. grants() gives fence() to the
-- jobs' role; fence_reset() stays the owner's.
REVOKE ALL ON FUNCTION {s}.fence(pg_catalog.text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION {s}.fence_reset(pg_catalog.text) FROM PUBLIC;
"
    );
    match history_days {
        Some(days) => writeln!(
            ddl,
            "INSERT INTO {s}.settings (history_days) VALUES ({days})\n    ON CONFLICT (only_row) DO UPDATE SET history_days = EXCLUDED.history_days;"
        ),
        None => writeln!(
            ddl,
            "INSERT INTO {s}.settings (history_days) VALUES ({DEFAULT_HISTORY_DAYS}) ON CONFLICT (only_row) DO NOTHING;"
        ),
    }
    .expect("writing to a String");
    ddl.push_str("COMMIT;\n");
    ddl
}

/// The statement that a job's own transaction runs first, before its
/// writes, to fence them: `SELECT SCHEMA.fence($1, $2)`, with the lease's
/// name (`text`) as `$1` and its fencing token (`bigint`) as `$2`.
///
/// The function remembers the highest token it has seen per name (in
/// `SCHEMA.fences`) and returns the token; a lower token raises SQLSTATE
/// [`STALE_FENCING_TOKEN`] (`LF001`), so that the whole transaction of a
/// holder whose lease went to another rolls back. An equal token passes:
/// one holder may fence many transactions. A stale transaction that fences
/// after a newer holder's waits for that one to end, then fails. Tokens of
/// one name must come from one engine: `SCHEMA.fence_reset(name)`, for the
/// schema's owner, forgets a name before it moves to an engine with smaller
/// tokens.
///
/// `schema` must pass [`check_schema`].
///
/// ```
/// use lockfile_postgres::schema::fence_sql;
/// assert_eq!(fence_sql("lockfile"), "SELECT lockfile.fence($1, $2)");
/// ```
///
/// With tokio-postgres, in the transaction that writes:
///
/// ```no_run
/// # async fn job(client: &mut tokio_postgres::Client, token: i64) -> Result<(), tokio_postgres::Error> {
/// use lockfile_postgres::{schema::fence_sql, sqlstate::STALE_FENCING_TOKEN};
///
/// let tx = client.transaction().await?;
/// if let Err(e) = tx.query_one(&fence_sql("lockfile"), &[&"backup", &token]).await {
///     if e.code().map(|c| c.code()) == Some(STALE_FENCING_TOKEN) {
///         eprintln!("a later holder has fenced: not writing ({e})");
///     }
///     return Err(e); // dropping `tx` rolls it back
/// }
/// tx.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 7", &[]).await?;
/// tx.commit().await
/// # }
/// ```
pub fn fence_sql(schema: &str) -> String {
    format!("SELECT {schema}.fence($1, $2)")
}

/// The grants a role needs to run jobs (and inspect) with schema `schema`,
/// and nothing more: no DDL rights. With them, the role's own transactions
/// may call `SCHEMA.fence` ([`fence_sql`]), but not write `SCHEMA.fences`
/// nor call `SCHEMA.fence_reset`.
///
/// `role` must pass [`check_role`], and `schema` [`check_schema`].
pub fn grants(schema: &str, role: &str) -> String {
    let s = schema;
    format!(
        "GRANT USAGE ON SCHEMA {s} TO {role};
GRANT USAGE ON SEQUENCE {s}.fencing_tokens TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {s}.leases, {s}.history, {s}.runs, {s}.settings TO {role};
-- The job's own transactions fence through {s}.fence(), never on {s}.fences.
GRANT EXECUTE ON FUNCTION {s}.fence(pg_catalog.text, bigint) TO {role};
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_need_no_quoting() {
        for ok in ["lockfile", "jobs_2", "_x"] {
            assert!(check_schema(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Lockfile",
            "2x",
            "a-b",
            "a;drop",
            "a b",
            "user",
            "select",
            &"x".repeat(64),
        ] {
            assert!(check_schema(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn roles_follow_the_schemas_rule() {
        assert!(check_role("jobs_app").is_ok());
        for bad in ["JobsApp", "x; ALTER ROLE x SUPERUSER; --", "user", ""] {
            assert!(check_role(bad).is_err(), "{bad}");
        }
        assert!(
            check_role("user")
                .unwrap_err()
                .contains("reserved key word")
        );
    }

    #[test]
    fn the_ddl_names_the_schema_and_keeps_the_retention_unless_told() {
        let ddl = ddl("jobs", None);
        assert!(ddl.contains("CREATE TABLE IF NOT EXISTS jobs.leases"));
        assert!(ddl.contains("CACHE 1"));
        assert!(ddl.contains("VALUES (30) ON CONFLICT (only_row) DO NOTHING"));
        assert!(super::ddl("jobs", Some(7)).contains("DO UPDATE SET history_days"));
        assert!(grants("jobs", "app").contains("ON SEQUENCE jobs.fencing_tokens TO app"));
    }

    #[test]
    fn the_fence_is_created_revoked_from_public_and_granted_to_the_role_alone() {
        let ddl = ddl("jobs", None);
        assert!(ddl.contains("CREATE TABLE IF NOT EXISTS jobs.fences"));
        assert!(ddl.contains("CREATE OR REPLACE FUNCTION jobs.fence(lease_name pg_catalog.text"));
        assert!(ddl.contains("SET search_path = pg_catalog, pg_temp"));
        assert!(ddl.contains("ERRCODE = 'LF001'"));
        assert!(
            ddl.contains("REVOKE ALL ON FUNCTION jobs.fence(pg_catalog.text, bigint) FROM PUBLIC")
        );
        assert!(
            ddl.contains("REVOKE ALL ON FUNCTION jobs.fence_reset(pg_catalog.text) FROM PUBLIC")
        );
        let grants = grants("jobs", "app");
        assert!(
            grants
                .contains("GRANT EXECUTE ON FUNCTION jobs.fence(pg_catalog.text, bigint) TO app;")
        );
        assert!(!grants.contains("fence_reset"));
        assert!(!grants.contains("jobs.fences,") && !grants.contains("jobs.fences TO"));
        assert_eq!(fence_sql("jobs"), "SELECT jobs.fence($1, $2)");
    }
}
