//! Every statement a lease sends, for one schema. Each is one statement in
//! its own implicit transaction, sent unnamed (Parse, Bind, Execute and Sync
//! in one batch), so that it works through PgBouncer's transaction pooling;
//! none sets anything for the session.
//!
//! Every decision about time is the server's (`statement_timestamp()`,
//! one value per statement); no client clock takes part. Every write sets
//! `synchronous_commit` on for its own transaction (`set_config(…, true)` in
//! the `cfg` CTE), whatever the role's or the database's default: a token
//! handed out must survive a crash and a switch to a synchronous standby.
//!
//! A release also notifies the schema's [`channel`] with the lease's name,
//! from inside its own transaction: PostgreSQL delivers it at commit, and
//! only then, so that a waiter woken by it finds the row expired. A
//! notification is transaction-scoped, so the releasing side may go through
//! PgBouncer; only the listening side needs a session of its own.
//!
//! # Every name is schema-qualified
//!
//! A name that is not qualified (a function, an operator, a type) is
//! looked up through the role's `search_path`, and a role that may CREATE
//! in a schema searched before `pg_catalog` could plant a
//! `public.nextval(regclass)` that returns 1, or a `public."<="` that says
//! every lease has expired, and its code would run as the job's role
//! (CVE-2018-1058). So every function here is `pg_catalog.…`, every
//! operator `OPERATOR(pg_catalog.…)`, every type `pg_catalog.…`, and every
//! table `SCHEMA.…`: no `search_path` can redirect any of them. Constructs
//! of the grammar (`CASE`, `COALESCE`, `GREATEST`, `ORDER BY`, the primary
//! keys' `ON CONFLICT`) name no function and look nothing up by name.
//!
//! Pinning the `search_path` instead would not do: a
//! `set_config('search_path', …, true)` in the statement itself comes too
//! late, since names are resolved when the statement is parsed, before it
//! runs; and a session-level `SET` does not survive PgBouncer's transaction
//! pooling, which hands the next transaction to another server session.

/// The statements for one schema: the text the engine sends, one string
/// per server operation, for a DBA to review (`EXPLAIN`,
/// `pg_stat_statements`) and for measurements that send them raw. Each
/// field says its parameters and its rows. The text is the engine's and may
/// change in any release; only what it does is the contract.
#[derive(Debug)]
#[non_exhaustive]
pub struct Statements {
    /// $1 name, $2 attempt, $3 owner JSON, $4 TTL ms. One row: acquired,
    /// token, owner JSON, TTL ms, remaining ms.
    pub acquire: String,
    /// $1 name, $2 token. A row (TTL ms) when renewed.
    pub renew: String,
    /// $1 name, $2 token. A row when released, and then a notification of
    /// `channel` with the name, at commit.
    pub release: String,
    /// Subscribes the session to `channel`.
    pub listen: String,
    /// The channel that releases notify: see [`channel`].
    pub channel: String,
    /// $1 name. A row when the name has one: live, token, owner JSON, TTL
    /// ms, remaining ms, and whether the expiry is past the longest TTL.
    pub inspect: String,
    /// Every row: name, then as `inspect`.
    pub inspect_all: String,
    /// $1 name. A row (version, history JSON) once a run was recorded.
    pub history: String,
    /// Every row: name, history JSON.
    pub history_all: String,
    /// $1 name, $2 history JSON, $3 last run JSON, $4 host, $5 pid, $6
    /// owner token, $7 fencing token. A row (the last run as stored, dated
    /// by the server) when the name had no history.
    pub history_create: String,
    /// As `history_create`, and $8 the version read. A row when the
    /// version was still that one.
    pub history_update: String,
    /// $1 name. One row: the history's version and document (both null
    /// without one), and the server's time, in seconds since the epoch.
    pub history_now: String,
    /// $1 name, $2 history JSON. A row when the name had no history.
    pub claim_create: String,
    /// $1 name, $2 history JSON, $3 the version read. A row when the
    /// version was still the one read.
    pub claim_update: String,
}

/// Sets `synchronous_commit` on for the statement's own transaction.
const CFG: &str =
    "WITH cfg AS (SELECT pg_catalog.set_config('synchronous_commit', 'on', true) AS sc)";

/// The server's time, one value for the whole statement.
const NOW: &str = "pg_catalog.statement_timestamp()";
// The operators, each named in `pg_catalog`. Written `OPERATOR(…)`, an
// operator takes the precedence of any other operator, not its own: every
// expression that holds one is parenthesised.
const EQ: &str = "OPERATOR(pg_catalog.=)";
const LE: &str = "OPERATOR(pg_catalog.<=)";
const LT: &str = "OPERATOR(pg_catalog.<)";
const GT: &str = "OPERATOR(pg_catalog.>)";
const GE: &str = "OPERATOR(pg_catalog.>=)";
const PLUS: &str = "OPERATOR(pg_catalog.+)";
const MINUS: &str = "OPERATOR(pg_catalog.-)";
const TIMES: &str = "OPERATOR(pg_catalog.*)";
/// A field of a JSON object, as text.
const FIELD: &str = "OPERATOR(pg_catalog.->>)";
/// A field of a JSON object, as JSON.
const GET: &str = "OPERATOR(pg_catalog.->)";
/// Two JSON objects merged, the right one's fields winning.
const CONCAT: &str = "OPERATOR(pg_catalog.||)";
const SECOND: &str = "'1 second'::pg_catalog.interval";
const MILLISECOND: &str = "'1 millisecond'::pg_catalog.interval";
const DAY: &str = "'1 day'::pg_catalog.interval";

/// The longest TTL the engine accepts, in milliseconds: 365 days.
///
/// Any role that may write the tables can write any `expires_at` (even
/// `'infinity'`) or any `ttl_ms`. An expiry later than the statement's time
/// plus this can only be such a write, never a holder's: it is treated as
/// expired (the next acquire takes the row over), rather than keeping the
/// name held for ever, or making the arithmetic on it fail every statement
/// that reads the row.
pub(crate) const MAX_TTL_MS: i64 = 365 * 24 * 60 * 60 * 1000;
/// [`MAX_TTL_MS`] as an interval, in hours: a day's length depends on the
/// session's time zone, an hour's does not.
const MAX_TTL: &str = "'8760 hours'::pg_catalog.interval";

/// Whether the lease in row `l` is live by the server's clock: its expiry
/// has not come, and is no later than the longest TTL allows
/// ([`MAX_TTL_MS`]).
fn live() -> String {
    format!("((l.expires_at {GT} {NOW}) AND (l.expires_at {LE} ({NOW} {PLUS} {MAX_TTL})))")
}

/// The opposite of [`live`], written out (a `NOT` of it would do as well;
/// this reads as what it decides).
fn expired() -> String {
    format!("((l.expires_at {LE} {NOW}) OR (l.expires_at {GT} ({NOW} {PLUS} {MAX_TTL})))")
}

/// What is left of a lease's TTL, in milliseconds, as the server counts it
/// now. The expiry is first held between now and now plus the longest TTL,
/// so that no value a role may write (`'infinity'`, `'-infinity'`, a year
/// far away) makes the subtraction fail.
fn remaining() -> String {
    format!(
        "GREATEST(0, (pg_catalog.date_part('epoch', (LEAST(GREATEST(l.expires_at, {NOW}), ({NOW} {PLUS} {MAX_TTL})) {MINUS} pg_catalog.clock_timestamp())) {TIMES} 1000::pg_catalog.float8))::pg_catalog.int8"
    )
}

impl Statements {
    /// The statements for the tables in `schema`.
    ///
    /// # Errors
    ///
    /// When `schema` is not a name that needs no quoting (see
    /// [`check_schema`](crate::schema::check_schema)): the sentence saying
    /// why.
    pub fn for_schema(schema: &str) -> Result<Statements, String> {
        crate::schema::check_schema(schema)?;
        Ok(Statements::new(schema))
    }

    /// The statements for a checked schema.
    pub(crate) fn new(s: &str) -> Statements {
        let live = live();
        let expired = expired();
        let remaining = remaining();
        let next_token = format!("pg_catalog.nextval('{s}.fencing_tokens'::pg_catalog.regclass)");
        // Takes a row over only when its lease has expired, by the server's
        // clock; otherwise writes it back unchanged and returns the holder.
        // The token is drawn under the row's lock, so that a stalled
        // contender cannot take over with an older one.
        let take =
            |col: &str| format!("{col} = CASE WHEN {expired} THEN EXCLUDED.{col} ELSE l.{col} END");
        let acquire = format!(
            "{CFG}
INSERT INTO {s}.leases AS l (name, fencing_token, attempt, owner, ttl_ms, acquired_at, renewed_at, expires_at)
SELECT $1, {next_token}, $2, $3::pg_catalog.jsonb, $4,
       {NOW}, {NOW}, ({NOW} {PLUS} ($4 {TIMES} {MILLISECOND}))
  FROM cfg
ON CONFLICT (name) DO UPDATE SET
  fencing_token = CASE WHEN {expired} THEN {next_token} ELSE l.fencing_token END,
  {}, {}, {}, {}, {}, {}
RETURNING (l.attempt {EQ} $2), l.fencing_token, l.owner::pg_catalog.text, l.ttl_ms, {remaining}",
            take("attempt"),
            take("owner"),
            take("ttl_ms"),
            take("acquired_at"),
            take("renewed_at"),
            take("expires_at"),
        );
        // A `ttl_ms` over the longest TTL was written by another role: it
        // is held to the longest, so that the interval cannot overflow.
        let renew = format!(
            "{CFG}
UPDATE {s}.leases l SET renewed_at = {NOW},
       expires_at = ({NOW} {PLUS} (LEAST(l.ttl_ms, {MAX_TTL_MS}::pg_catalog.int8) {TIMES} {MILLISECOND}))
  FROM cfg
 WHERE (l.name {EQ} $1) AND (l.fencing_token {EQ} $2) AND {live}
RETURNING l.ttl_ms"
        );
        // The row stays, expired: the next holder takes it over and draws
        // its token under the row's lock. The notification is queued only
        // when the row was ours to expire, and sent only if this commits.
        let channel = channel(s);
        let release = format!(
            "{CFG},
released AS (
  UPDATE {s}.leases l SET expires_at = {NOW}
    FROM cfg
   WHERE (l.name {EQ} $1) AND (l.fencing_token {EQ} $2) AND (l.expires_at {GT} {NOW})
  RETURNING l.name, l.fencing_token
)
SELECT r.fencing_token, pg_catalog.pg_notify({}, r.name)::pg_catalog.text FROM released r",
            literal(&channel)
        );
        let listen = format!("LISTEN {}", identifier(&channel));
        // Whether the row's expiry is past the longest TTL: another role's
        // write, which `inspect` says beside the (free) lease.
        let beyond = format!("(l.expires_at {GT} ({NOW} {PLUS} {MAX_TTL}))");
        let inspect = format!(
            "SELECT {live}, l.fencing_token, l.owner::pg_catalog.text, l.ttl_ms, {remaining}, {beyond}
  FROM {s}.leases l WHERE (l.name {EQ} $1)"
        );
        let inspect_all = format!(
            "SELECT l.name, {live}, l.fencing_token, l.owner::pg_catalog.text, l.ttl_ms, {remaining}, {beyond}
  FROM {s}.leases l ORDER BY l.name"
        );
        let history = format!(
            "SELECT version, record::pg_catalog.text FROM {s}.history WHERE (name {EQ} $1)"
        );
        let history_all =
            format!("SELECT name, record::pg_catalog.text FROM {s}.history ORDER BY name");
        // The run goes into `runs` only if the head moved; old runs of the
        // name go at the same time. The times that later decisions read are
        // the server's, never the host's (whose clock may be off by any
        // amount): the run finished at this statement's time, and started
        // its measured duration before that; the failure time and the last
        // success are rewritten when this run set them (they are then the
        // host's finish, and the host's run, exactly).
        let runs = |head: &str| {
            let finished = stamp("g.at");
            let started = stamp(&format!(
                "(g.at {MINUS} ((g.r {FIELD} 'duration_seconds')::pg_catalog.float8 {TIMES} {SECOND}))"
            ));
            format!(
                "{CFG},
given AS (SELECT $3::pg_catalog.jsonb AS r, {NOW} AS at),
run AS (
  SELECT (g.r {CONCAT} pg_catalog.jsonb_build_object(
           'finished_at', {finished},
           'started_at', {started},
           'last_failure_at', CASE WHEN ((g.r {FIELD} 'last_failure_at') {EQ} (g.r {FIELD} 'finished_at'))
                                   THEN pg_catalog.to_jsonb({finished}) ELSE (g.r {GET} 'last_failure_at') END)) AS r
    FROM given g
),
doc AS (
  SELECT ((d.d {CONCAT} pg_catalog.jsonb_build_object('last_run', run.r))
          {CONCAT} CASE WHEN ((d.d {GET} 'last_success') {EQ} g.r)
                        THEN pg_catalog.jsonb_build_object('last_success', run.r)
                        ELSE pg_catalog.jsonb_build_object() END) AS d
    FROM (SELECT $2::pg_catalog.jsonb AS d) AS d, given g, run
),
head AS ({head}),
pruned AS (
  DELETE FROM {s}.runs WHERE (name {EQ} $1) AND (finished_at {LT} ({NOW}
     {MINUS} (COALESCE((SELECT history_days FROM {s}.settings), 30) {TIMES} {DAY})))
),
inserted AS (
  INSERT INTO {s}.runs (name, started_at, finished_at, duration_seconds, outcome, exit_code, signal,
                        consecutive_failures, host, pid, owner_token, fencing_token, recorded_at)
  SELECT $1, (r {FIELD} 'started_at')::pg_catalog.timestamptz, (r {FIELD} 'finished_at')::pg_catalog.timestamptz,
         (r {FIELD} 'duration_seconds')::pg_catalog.float8, (r {FIELD} 'outcome'),
         (r {FIELD} 'exit_code')::pg_catalog.int4, (r {FIELD} 'signal')::pg_catalog.int4,
         LEAST((r {FIELD} 'consecutive_failures')::pg_catalog.int8, 2147483647)::pg_catalog.int4,
         $4, $5, $6, $7, {NOW}
    FROM head, run
  RETURNING id
)
SELECT run.r::pg_catalog.text FROM inserted, run"
            )
        };
        // A version at the largest bigint (which only another role's write
        // can have put there: a run adds one) starts again at 1 rather than
        // failing every write of the name with "bigint out of range". The
        // compare-and-set still holds: a writer that read the old version
        // finds it changed.
        let next_version = format!(
            "CASE WHEN (version {GE} {}::pg_catalog.int8) THEN 1::pg_catalog.int8 ELSE (version {PLUS} 1) END",
            i64::MAX
        );
        let history_create = runs(&format!(
            "INSERT INTO {s}.history (name, version, record, updated_at)
         SELECT $1, 1, doc.d, {NOW} FROM cfg, doc
         ON CONFLICT (name) DO NOTHING RETURNING version"
        ));
        let history_update = runs(&format!(
            "UPDATE {s}.history SET version = {next_version}, record = doc.d, updated_at = {NOW}
         FROM cfg, doc WHERE (name {EQ} $1) AND (version {EQ} $8) RETURNING version"
        ));
        let history_now = format!(
            "SELECT h.version, h.record::pg_catalog.text, pg_catalog.date_part('epoch', {NOW})
  FROM (SELECT 1) AS one LEFT JOIN {s}.history h ON (h.name {EQ} $1)"
        );
        let claim_create = format!(
            "INSERT INTO {s}.history (name, version, record, updated_at)
SELECT $1, 1, $2::pg_catalog.jsonb, {NOW}
ON CONFLICT (name) DO NOTHING RETURNING version"
        );
        let claim_update = format!(
            "UPDATE {s}.history SET version = {next_version}, record = $2::pg_catalog.jsonb, updated_at = {NOW}
 WHERE (name {EQ} $1) AND (version {EQ} $3) RETURNING version"
        );
        Statements {
            acquire,
            history_now,
            claim_create,
            claim_update,
            renew,
            release,
            listen,
            channel,
            inspect,
            inspect_all,
            history,
            history_all,
            history_create,
            history_update,
        }
    }
}

/// The longest channel name PostgreSQL keeps (NAMEDATALEN - 1): a longer
/// one is refused by `pg_notify` and cut short by `LISTEN`.
const MAX_CHANNEL_LEN: usize = 63;

/// The channel that the releases of schema `schema` notify, with the
/// lease's name as the payload: `SCHEMA.leases`, the table's own name, so
/// that two schemas in one database never wake each other's waiters. A
/// schema too long for that (over 56 bytes) gives its first 46 bytes, a
/// `.`, and 16 hex digits of a hash of the whole name (FNV-1a, the same on
/// every host and every version).
pub fn channel(schema: &str) -> String {
    let plain = format!("{schema}.leases");
    if plain.len() <= MAX_CHANNEL_LEN {
        return plain;
    }
    // FNV-1a, 64 bits: written out, so that it never changes under us.
    let hash = schema.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    // A checked schema is ASCII, so any byte offset is a char boundary.
    let head = &schema[..MAX_CHANNEL_LEN - 17];
    format!("{head}.{hash:016x}")
}

/// The time `at` (a `timestamptz` expression) as the run history spells
/// it: RFC 3339 in UTC, to the microsecond.
fn stamp(at: &str) -> String {
    format!(
        "pg_catalog.to_char(pg_catalog.timezone('UTC', {at}), 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
    )
}

/// `text` as an SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `text` as a quoted SQL identifier: kept exactly, case and all, as
/// `pg_notify` takes its channel.
fn identifier(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_schema_has_its_own_channel_within_63_bytes() {
        assert_eq!(channel("lockfile"), "lockfile.leases");
        let longest_plain = "s".repeat(MAX_CHANNEL_LEN - ".leases".len());
        assert_eq!(channel(&longest_plain), format!("{longest_plain}.leases"));
        let a = format!("{longest_plain}a");
        let b = format!("{longest_plain}b");
        for schema in [&a, &b, &"x".repeat(63)] {
            assert_eq!(channel(schema).len(), MAX_CHANNEL_LEN, "{schema}");
            assert_eq!(channel(schema), channel(schema));
        }
        assert_ne!(channel(&a), channel(&b));
        // Pinned: hosts of different versions must agree on it.
        assert_eq!(
            channel(&"x".repeat(63)),
            format!("{}.1b3bad5c467302bf", "x".repeat(46))
        );
    }

    #[test]
    fn the_channel_is_quoted_for_each_use() {
        let sql = Statements::new("lockfile");
        assert_eq!(sql.listen, "LISTEN \"lockfile.leases\"");
        assert!(
            sql.release
                .contains("pg_catalog.pg_notify('lockfile.leases', r.name)")
        );
        assert_eq!(identifier("a\"b"), "\"a\"\"b\"");
        assert_eq!(literal("it's"), "'it''s'");
    }
}
