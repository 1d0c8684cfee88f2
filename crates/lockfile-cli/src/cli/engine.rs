//! The lease engines on the command line: the one option that picks an
//! engine, and `lockfile postgres`.

use clap::{Args, Subcommand};

/// Leases instead of lock files: the one option that picks a lease engine,
/// shared by `run`, `inspect` and `check`. Each engine is one option here.
#[derive(Debug, Default, Args)]
// `multiple`: --postgres-schema goes with --postgres; one engine at a time
// all the same (--etcd conflicts with --postgres).
#[group(id = "engine", multiple = true)]
pub struct EngineArgs {
    /// Leases on etcd instead of lock files: a comma-separated list of
    /// endpoint URLs (e.g. http://127.0.0.1:2379). The lock file argument is
    /// then a lease NAME (the key `lockfile/locks/NAME`). Needs a build with
    /// the `etcd` feature.
    #[arg(long, value_name = "ENDPOINTS", conflicts_with_all = ["postgres", "redis"])]
    pub etcd: Option<String>,

    /// Leases on PostgreSQL instead of lock files: a connection URL
    /// (postgres://USER@HOST:PORT/DB, with libpq's parameters such as
    /// sslmode or target_session_attrs=read-write; across a network that is
    /// not yours, sslmode=verify-full with channel_binding=require: the
    /// weaker modes do not stop a man in the middle). The lock file argument
    /// is then a lease NAME. Give the password through PGPASSWORD or
    /// ~/.pgpass, not here: a command line is readable by every local user.
    /// The tables come from `lockfile postgres init`. Without --postgres
    /// (and without --etcd), LOCKFILE_POSTGRES_URL gives the URL. Needs a
    /// build with the `postgres` feature.
    #[arg(long, value_name = "URL", conflicts_with = "redis")]
    pub postgres: Option<String>,

    /// With PostgreSQL: the schema that holds the tables (default lockfile).
    #[arg(long, value_name = "NAME")]
    pub postgres_schema: Option<String>,

    /// Leases on Redis instead of lock files: a URL
    /// (redis://USER@HOST:PORT/DB, or rediss:// for TLS, the server's name
    /// verified). The lock file argument is then a lease NAME (the keys
    /// `lockfile:{NAME}:...`). Give the password through REDISCLI_AUTH,
    /// not here: a command line is readable by every local user; COMMAND
    /// gets neither REDISCLI_AUTH nor LOCKFILE_REDIS_URL. One primary: a
    /// replica, or an eviction policy that may drop a lease's key, is
    /// refused (exit 69). Without --redis (and without another engine
    /// option), LOCKFILE_REDIS_URL gives the URL. Needs a build with the
    /// `redis` feature.
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,

    /// With Redis: the prefix of every key and channel (default
    /// `lockfile:`); printable ASCII without braces.
    #[arg(long, value_name = "PREFIX")]
    pub redis_prefix: Option<String>,

    /// With Redis over TLS: the PEM file of the CA that signs the server's
    /// certificate, instead of the system's roots.
    #[arg(long, value_name = "FILE")]
    pub redis_ca: Option<std::path::PathBuf>,
}

impl EngineArgs {
    /// Whether a lease engine was asked for.
    pub fn chosen(&self) -> bool {
        self.etcd.is_some() || self.postgres_url().is_some() || self.redis_url().is_some()
    }

    /// Whether an engine was named by an option (the variables stand for
    /// one only when none is).
    fn named(&self) -> bool {
        self.etcd.is_some() || self.postgres.is_some() || self.redis.is_some()
    }

    /// The PostgreSQL URL: `--postgres`, or LOCKFILE_POSTGRES_URL when no
    /// engine option was given (as LOCKFILE_METRICS_DIR stands for
    /// --metrics-dir). An explicit --etcd or --redis wins over the
    /// variable, so that a crontab may set it for most jobs and give one
    /// job another engine.
    pub fn postgres_url(&self) -> Option<String> {
        self.postgres
            .clone()
            .or_else(|| self.variable("LOCKFILE_POSTGRES_URL"))
    }

    /// The Redis URL: `--redis`, or LOCKFILE_REDIS_URL, as
    /// [`postgres_url`](Self::postgres_url).
    pub fn redis_url(&self) -> Option<String> {
        self.redis
            .clone()
            .or_else(|| self.variable("LOCKFILE_REDIS_URL"))
    }

    /// The variable `name`, when no engine option was given and it is set.
    fn variable(&self, name: &str) -> Option<String> {
        (!self.named())
            .then(|| std::env::var(name).ok())
            .flatten()
            .filter(|url| !url.is_empty())
    }
}

/// `lockfile postgres`: the PostgreSQL engine's schema.
#[derive(Debug, Subcommand)]
pub enum PostgresCommand {
    /// Print the DDL that `init` applies (tables, sequence), and when a role
    /// is named the grants it needs to run jobs, for a DBA to review or
    /// apply by hand: `lockfile postgres schema | psql -v ON_ERROR_STOP=1`
    /// as the database's owner.
    Schema {
        /// The schema that holds the tables.
        #[arg(long, value_name = "NAME", default_value = "lockfile")]
        postgres_schema: String,

        /// Also print the GRANT statements that give ROLE what it needs to
        /// run jobs (and nothing more); ROLE must exist when they are
        /// applied. Without it, no GRANT is printed, only a comment saying
        /// how to get them. Lowercase ASCII letters, digits and `_`, not a
        /// reserved key word (a name that would need quoting is refused,
        /// exit 64).
        #[arg(long, value_name = "ROLE")]
        role: Option<String>,
    },
    /// Create the schema, its sequence and its tables if missing
    /// (idempotent, safe from several hosts at once). Needs a role that may
    /// create them; runs never do.
    Init {
        /// The server (default: LOCKFILE_POSTGRES_URL).
        #[arg(
            value_name = "URL",
            env = "LOCKFILE_POSTGRES_URL",
            hide_env_values = true
        )]
        url: String,

        /// The schema that holds the tables.
        #[arg(long, value_name = "NAME", default_value = "lockfile")]
        postgres_schema: String,

        /// Keep every run's end this many days (default: 30 for a new
        /// schema; unchanged for an existing one).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        history_days: Option<u32>,
    },
}
