//! The schema: its name, its DDL (`lockfile postgres schema` prints it,
//! `lockfile postgres init` applies it), and the grants a run needs.
//!
//! A run never creates anything: when hosts race, creation fails, and an
//! application role should not need DDL rights.

use std::fmt::Write as _;

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

/// The grants a role needs to run jobs (and inspect) with schema `schema`,
/// and nothing more: no DDL rights.
///
/// `role` must pass [`check_role`], and `schema` [`check_schema`].
pub fn grants(schema: &str, role: &str) -> String {
    let s = schema;
    format!(
        "GRANT USAGE ON SCHEMA {s} TO {role};
GRANT USAGE ON SEQUENCE {s}.fencing_tokens TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {s}.leases, {s}.history, {s}.runs, {s}.settings TO {role};
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
}
