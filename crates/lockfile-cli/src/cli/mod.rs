//! The command line, in flock(1)'s spelling where flock(1) has a spelling.
//!
//! The workspace's documentation generator (`crates/lockfile-docgen`)
//! compiles this module as it is, to make the man page and the shell
//! completions from the very definition that prints `--help`: it may use
//! nothing of the command but `crate::exit`, beside clap, humantime and the
//! library.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub(crate) mod duration;
pub(crate) mod format;

#[derive(Debug, Parser)]
#[command(
    name = "lockfile",
    version,
    about = "Run a job under a kernel-held lock; inspect and reap lock files; alarm on silence.",
    after_help = "Exit statuses are listed in docs/command.md (and the man page). Usage errors exit 64."
)]
pub(crate) struct Cli {
    /// Write the library's structured events (lock_acquired, lock_contended,
    /// lock_released, stale_lock_removed, heartbeat) to stderr. The level is
    /// taken from LOCKFILE_LOG (default: info).
    #[arg(long, value_enum, global = true, env = "LOCKFILE_LOG_FORMAT")]
    pub(crate) log_format: Option<LogFormat>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The help of every subcommand that takes a DURATION.
const DURATIONS: &str = "A DURATION is seconds (fractional allowed: 0.5) or a duration with units, such as 90s, 45m, 2h or 1h30m.";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
// Parsed once per process and matched once: its size costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Command {
    /// Take the lock, run COMMAND, release the lock when COMMAND ends.
    Run(RunArgs),
    /// Show who holds lock files, since when, and whether they still beat.
    Inspect(InspectArgs),
    /// Remove the litter of dead owners (stale and debris files); a dry run
    /// unless --fix.
    Reap(ReapArgs),
    /// Alarm on silence: exit 2 when the last recorded success is too old,
    /// when runs keep failing, or when the holder hangs; exit 1 when it
    /// overruns. For a lock file or a lease.
    Check(CheckArgs),
    /// From inside a `lockfile run --watchdog` COMMAND: prove progress. Finds
    /// the lock through LOCKFILE_PATH and LOCKFILE_TOKEN, and refuses (exit
    /// 1) when the lock's record is another run's.
    Beat,
    /// Leases on PostgreSQL: print the schema, or create it.
    #[command(subcommand)]
    Postgres(PostgresCommand),
    /// util-linux flock(1)'s command line, as `flock ARGS` takes it (also
    /// what runs when this binary is invoked as `flock`).
    #[command(disable_help_flag = true)]
    Flock {
        /// flock(1)'s options and arguments.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<OsString>,
    },
}

#[derive(Debug, Args)]
#[command(after_help = DURATIONS)]
pub(crate) struct RunArgs {
    /// Fail at once if the lock is held (exit with the conflict status).
    #[arg(short = 'n', long = "nonblock", visible_aliases = ["nb", "nonblocking"], conflicts_with = "wait")]
    pub(crate) nonblock: bool,

    /// Wait at most DURATION for the lock: seconds (fractional allowed) or,
    /// for example, 90s or 1h30m; 0 is -n. Without -n or -w, wait as long as
    /// it takes.
    #[arg(short = 'w', long = "wait", visible_alias = "timeout", value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) wait: Option<Duration>,

    /// Take a shared lock, held together with other shared holders (as
    /// flock(1) -s); no owner record is written.
    #[arg(short = 's', long, conflicts_with_all = ["watchdog", "engine", "evict_after", "once_per"])]
    pub(crate) shared: bool,

    /// Take an exclusive lock (the default; overrides -s, as in flock(1)).
    #[arg(short = 'x', short_alias = 'e', long, overrides_with = "shared")]
    pub(crate) exclusive: bool,

    /// Exec COMMAND in place, without forking (as flock(1) -F): COMMAND holds
    /// the lock itself. Nobody is left to beat or to record success, so the
    /// record promises no heartbeat and says that its release is not
    /// recorded.
    #[arg(short = 'F', long, conflicts_with_all = ["close", "engine", "watchdog", "max_runtime", "evict_after", "once_per"])]
    pub(crate) no_fork: bool,

    /// Print flock(1)'s lines: how long getting the lock took and what is
    /// executed (on stdout), and why it failed (on stderr).
    #[arg(long, conflicts_with = "quiet")]
    pub(crate) verbose: bool,

    /// Behave as util-linux flock(1) does where they differ (the `flock`
    /// personality sets it): no line on a conflict, `$SHELL -c`, its exit
    /// statuses.
    #[arg(long, hide = true)]
    pub(crate) flock_compat: bool,

    /// With a descriptor number alone: unlock it (as flock(1) -u N), marking
    /// our record in it released when there is one.
    #[arg(short = 'u', long, conflicts_with_all = ["command", "shell_command", "engine"])]
    pub(crate) unlock: bool,

    /// COMMAND does not inherit the lock's descriptor: the wrapper holds the
    /// lock until COMMAND exits (as flock(1) -o). If the wrapper is killed,
    /// the lock goes with it while COMMAND may still run.
    #[arg(short = 'o', long, conflicts_with = "engine")]
    pub(crate) close: bool,

    /// Exit status when the lock is held (default 75, EX_TEMPFAIL; flock(1)
    /// uses 1).
    #[arg(short = 'E', long = "conflict-exit-code", value_name = "N", default_value_t = crate::exit::CONFLICT)]
    pub(crate) conflict_exit_code: u8,

    /// Job name for the owner record (default: COMMAND's file name).
    #[arg(long, value_name = "NAME")]
    pub(crate) job: Option<String>,

    /// Refresh the lock's heartbeat every DURATION (seconds, or for example
    /// 5m) while COMMAND runs. `inspect` reports a heartbeat silent for three
    /// intervals.
    #[arg(long, value_name = "DURATION", default_value = "30", value_parser = duration::parse_positive)]
    pub(crate) heartbeat: Duration,

    #[command(flatten)]
    pub(crate) engine: EngineArgs,

    #[command(flatten)]
    pub(crate) ticks: TickArgs,

    /// With a lease: its time to live, in seconds or for example 1m
    /// (default 10).
    #[arg(long, value_name = "DURATION", requires = "engine", value_parser = duration::parse_positive)]
    pub(crate) ttl: Option<Duration>,

    /// With a lease: when renewals fail, SIGTERM COMMAND this long before the
    /// lease's deadline, and SIGKILL it just before the deadline (default: a
    /// third of the TTL).
    #[arg(long, value_name = "DURATION", requires = "engine", value_parser = duration::parse_positive)]
    pub(crate) grace: Option<Duration>,

    /// With PostgreSQL, while waiting for the lease: listen on this URL for
    /// the holder's release (LISTEN/NOTIFY), and ask again as soon as it
    /// comes rather than at the next poll (every second, or a tenth of the
    /// TTL when shorter). It must reach the server directly, never through
    /// a pooler such as PgBouncer (--postgres may). Without it,
    /// LOCKFILE_POSTGRES_LISTEN_URL gives the URL. If it cannot be used,
    /// the wait polls, with a warning.
    #[arg(long, value_name = "URL", conflicts_with = "etcd")]
    pub(crate) postgres_listen: Option<String>,

    /// COMMAND proves its progress: it must beat (`lockfile beat`, or touch
    /// "$LOCKFILE_BEAT") within DURATION of starting and then at least every
    /// DURATION, or it is stopped with everything it started, and the run
    /// exits 124 (under a lease, which is then released at once). The
    /// wrapper then keeps no heartbeat of its own.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_positive)]
    pub(crate) watchdog: Option<Duration>,

    /// Stop COMMAND, with everything it started, once it has run for
    /// DURATION (for example 45m or 2h); the run exits 124. Also under a
    /// lease, whose record then states it.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_positive)]
    pub(crate) max_runtime: Option<Duration>,

    /// When stopping COMMAND (a limit, or a lease about to lapse), the time
    /// between SIGTERM and SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = "10", value_parser = duration::parse)]
    pub(crate) kill_after: Duration,

    /// When the lock is held by a holder whose heartbeat has been silent for
    /// longer than DURATION, and longer than it promised, stop it with
    /// everything it started and take the lock. This kills another process
    /// (Linux only); a holder that cannot be verified is never touched.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_positive, conflicts_with = "engine")]
    pub(crate) evict_after: Option<Duration>,

    /// Run COMMAND through `sh -c` (as flock(1) -c).
    #[arg(
        short = 'c',
        long = "command",
        value_name = "SHELL_COMMAND",
        conflicts_with = "command"
    )]
    pub(crate) shell_command: Option<String>,

    /// The lock file (created if missing; its directory must exist), or a
    /// directory; with a lease (--etcd), the lease name. A number without
    /// COMMAND is a descriptor the calling shell holds open, locked for it
    /// (as flock(1) FD).
    pub(crate) lockfile: PathBuf,

    #[command(flatten)]
    pub(crate) monitoring: MonitorArgs,

    /// The command to run, with its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub(crate) command: Vec<OsString>,
}

/// The options of `run` that tell the monitoring system.
#[derive(Debug, Args)]
pub(crate) struct MonitorArgs {
    /// Write the run's metrics for node_exporter's textfile collector to
    /// DIR/lockfile-JOB.prom (atomically, mode 0644). A skip counts there
    /// too.
    #[arg(long, value_name = "DIR", env = "LOCKFILE_METRICS_DIR")]
    pub(crate) metrics_dir: Option<PathBuf>,

    /// Ping a dead man's switch in the healthchecks.io protocol: URL/start
    /// when COMMAND starts, URL on success, URL/STATUS on failure, URL/fail
    /// when it was stopped, URL/log on a skip (URL/fail behind an unhealthy
    /// holder). Best effort: never changes the exit status.
    #[arg(long, value_name = "URL")]
    pub(crate) ping: Option<String>,

    /// With --ping: send the last N bytes of COMMAND's output with the final
    /// ping (default 0: none). COMMAND's stdout and stderr then pass through
    /// pipes, so COMMAND no longer sees a terminal.
    #[arg(long, value_name = "N", default_value_t = 0, requires = "ping", value_parser = parse_log_bytes)]
    pub(crate) ping_log_bytes: usize,

    /// Print nothing on a skip behind a healthy holder, as flock(1). A
    /// holder whose heartbeat is silent, that overran its own maximum
    /// runtime, or whose recorded owner is dead is still reported.
    #[arg(short = 'q', long)]
    pub(crate) quiet: bool,
}

/// The largest `--ping-log-bytes`: the default upload limit of the
/// healthchecks server's framework (Django's `DATA_UPLOAD_MAX_MEMORY_SIZE`,
/// 2.5 MiB), over which it answers 400 whatever its own body limit.
const MAX_PING_LOG_BYTES: usize = 2_621_440;

/// `--ping-log-bytes N`: at most [`MAX_PING_LOG_BYTES`].
fn parse_log_bytes(value: &str) -> Result<usize, String> {
    let n: usize = value
        .parse()
        .map_err(|e| format!("`{value}` is not a number of bytes: {e}"))?;
    if n > MAX_PING_LOG_BYTES {
        return Err(format!(
            "`{value}` is over {MAX_PING_LOG_BYTES} bytes (2.5 MiB), the most a healthchecks server accepts in one ping"
        ));
    }
    Ok(n)
}

#[derive(Debug, Args)]
pub(crate) struct Thresholds {
    /// Report `aged` when a lock has been held longer than DURATION (seconds,
    /// or for example 6h; default: off).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) max_age: Option<Duration>,

    /// Report `heartbeat_silent` when a held lock's heartbeat is older than
    /// DURATION (seconds, or for example 2m; default: three times the
    /// interval its holder promised).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) stale_after: Option<Duration>,

    /// Expect a recorded success at least every DURATION (seconds, or for
    /// example 1h): report `never_succeeded` or `silent` otherwise (default:
    /// off).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_positive)]
    pub(crate) expect_every: Option<Duration>,
}

impl Thresholds {
    pub(crate) fn options(&self) -> lockfile::inspect::InspectOptions {
        let mut opts = lockfile::inspect::InspectOptions::new();
        if let Some(d) = self.max_age {
            opts.max_age(d);
        }
        if let Some(d) = self.stale_after {
            opts.stale_after(d);
        }
        if let Some(d) = self.expect_every {
            opts.expect_every(d);
        }
        opts
    }
}

#[derive(Debug, Args)]
#[command(after_help = DURATIONS)]
pub(crate) struct InspectArgs {
    /// Short for --format json: a JSON array, one object per lock file.
    #[arg(long)]
    pub(crate) json: bool,

    #[command(flatten)]
    pub(crate) print: crate::cli::format::FormatArgs,

    #[command(flatten)]
    pub(crate) thresholds: Thresholds,

    #[command(flatten)]
    pub(crate) engine: EngineArgs,

    /// Lock files, or directories of `*.lock` files. With a lease engine
    /// (--etcd), lease names; none means every lease the engine knows.
    #[arg(required_unless_present = "engine", value_name = "PATH")]
    pub(crate) paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
#[command(after_help = DURATIONS)]
pub(crate) struct ReapArgs {
    /// Remove the files (default: a dry run that reports what it would remove).
    #[arg(long)]
    pub(crate) fix: bool,

    /// Keep files changed more recently than DURATION ago (seconds, or for
    /// example 1h; default 0: the kernel lock already says whether anyone
    /// holds a file).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = duration::parse)]
    pub(crate) older_than: Duration,

    /// Also remove stale records written on other hosts.
    #[arg(long)]
    pub(crate) include_foreign: bool,

    /// Print a JSON array, one object per file.
    #[arg(long)]
    pub(crate) json: bool,

    /// Directories of `*.lock` files.
    #[arg(required = true, value_name = "DIR")]
    pub(crate) dirs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
#[command(after_help = DURATIONS)]
pub(crate) struct CheckArgs {
    /// The longest acceptable time since the last recorded success: seconds,
    /// or for example 90m or 1d. Not needed with --once-per.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_positive, required_unless_present = "once_per")]
    pub(crate) expect_every: Option<Duration>,

    /// CRITICAL `missed_ticks` when the last finished tick of a job run with
    /// `run --once-per` (and the same --tick-offset) is older than the
    /// current tick minus one period.
    #[command(flatten)]
    pub(crate) ticks: TickArgs,

    /// CRITICAL `failing` once this many runs in a row have failed (any
    /// outcome but success: a non-zero exit, a signal, a limit, an eviction,
    /// a lost lease).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_failures: u32,

    /// WARNING `overrunning` when the lock has been held longer than
    /// DURATION (the holder's own recorded maximum runtime counts too).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) max_age: Option<Duration>,

    /// CRITICAL `hung` when the holder's heartbeat is older than DURATION
    /// (default: three times the interval it promised). Lock files only:
    /// a lease's renewals prove that its wrapper lives, not that COMMAND
    /// makes progress, so `hung` never applies to a lease (use --max-age or
    /// `run --max-runtime` there).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse, conflicts_with = "engine")]
    pub(crate) stale_after: Option<Duration>,

    /// Print one JSON object: status, code, verdicts and the inspect report.
    #[arg(long)]
    pub(crate) json: bool,

    #[command(flatten)]
    pub(crate) engine: EngineArgs,

    /// The lock file (a missing file counts as "never succeeded"); with a
    /// lease engine (--etcd), the lease name.
    pub(crate) lockfile: PathBuf,
}

impl Command {
    /// A usage conflict that clap cannot see, because an environment
    /// variable takes part (LOCKFILE_POSTGRES_URL stands for --postgres only
    /// when no engine option is given). Every other conflict is declared to
    /// clap, with its arguments.
    pub(crate) fn conflict(&self) -> Option<&'static str> {
        let (engine, listen) = match self {
            Command::Run(args) => (&args.engine, args.postgres_listen.is_some()),
            Command::Inspect(args) => (&args.engine, false),
            Command::Check(args) => (&args.engine, false),
            _ => return None,
        };
        let postgres = engine.postgres_url().is_some();
        if engine.postgres_schema.is_some() && !postgres {
            return Some(
                "--postgres-schema needs PostgreSQL: --postgres URL, or LOCKFILE_POSTGRES_URL",
            );
        }
        if listen && !postgres {
            return Some(
                "--postgres-listen needs PostgreSQL: --postgres URL, or LOCKFILE_POSTGRES_URL",
            );
        }
        None
    }
}

impl RunArgs {
    /// The URL a waiting PostgreSQL lease listens on: `--postgres-listen`,
    /// or LOCKFILE_POSTGRES_LISTEN_URL when it is absent (as
    /// LOCKFILE_POSTGRES_URL stands for --postgres).
    pub(crate) fn postgres_listen_url(&self) -> Option<String> {
        self.postgres_listen.clone().or_else(|| {
            std::env::var("LOCKFILE_POSTGRES_LISTEN_URL")
                .ok()
                .filter(|url| !url.is_empty())
        })
    }
}

/// `--once-per`: at most one finished run per scheduled time, shared by
/// `run` and `check`.
#[derive(Debug, Default, Args)]
pub(crate) struct TickArgs {
    /// At most one finished run per tick of this period (1m, 15m, 1h, 1d…:
    /// it must divide a day or be whole days), across every host that runs
    /// the job: a run whose tick (the scheduled time nearest its start)
    /// already ran is skipped. Ticks are in UTC from the Unix epoch.
    #[arg(long, value_name = "PERIOD", value_parser = duration::parse_positive)]
    pub(crate) once_per: Option<Duration>,

    /// With --once-per: the ticks fall this long after each multiple of the
    /// period (for `5 * * * *`, --once-per 1h --tick-offset 5m).
    #[arg(long, value_name = "OFFSET", requires = "once_per", value_parser = duration::parse)]
    pub(crate) tick_offset: Option<Duration>,
}

/// Leases instead of lock files: the one option that picks a lease engine,
/// shared by `run`, `inspect` and `check`. Each engine is one option here.
#[derive(Debug, Default, Args)]
// `multiple`: --postgres-schema goes with --postgres; one engine at a time
// all the same (--etcd conflicts with --postgres).
#[group(id = "engine", multiple = true)]
pub(crate) struct EngineArgs {
    /// Leases on etcd instead of lock files: a comma-separated list of
    /// endpoint URLs (e.g. http://127.0.0.1:2379). The lock file argument is
    /// then a lease NAME (the key `lockfile/locks/NAME`). Needs a build with
    /// the `etcd` feature.
    #[arg(long, value_name = "ENDPOINTS", conflicts_with = "postgres")]
    pub(crate) etcd: Option<String>,

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
    #[arg(long, value_name = "URL")]
    pub(crate) postgres: Option<String>,

    /// With PostgreSQL: the schema that holds the tables (default lockfile).
    #[arg(long, value_name = "NAME")]
    pub(crate) postgres_schema: Option<String>,
}

impl EngineArgs {
    /// Whether a lease engine was asked for.
    pub(crate) fn chosen(&self) -> bool {
        self.etcd.is_some() || self.postgres_url().is_some()
    }

    /// The PostgreSQL URL: `--postgres`, or LOCKFILE_POSTGRES_URL when no
    /// engine option was given (as LOCKFILE_METRICS_DIR stands for
    /// --metrics-dir). An explicit --etcd wins over the variable, so that a
    /// crontab may set it for most jobs and give one job etcd.
    pub(crate) fn postgres_url(&self) -> Option<String> {
        self.postgres.clone().or_else(|| {
            self.etcd
                .is_none()
                .then(|| std::env::var("LOCKFILE_POSTGRES_URL").ok())
                .flatten()
                .filter(|url| !url.is_empty())
        })
    }
}

/// `lockfile postgres`: the PostgreSQL engine's schema.
#[derive(Debug, Subcommand)]
pub(crate) enum PostgresCommand {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every duration option takes both spellings (the parser's own cases are
    /// in `duration.rs`).
    #[test]
    fn every_duration_option_takes_seconds_or_units() {
        let parse = |args: &[&str]| Cli::try_parse_from(args).map(|cli| cli.command);
        let run = |extra: &[&str]| {
            let mut args = vec!["lockfile", "run"];
            args.extend_from_slice(extra);
            args.extend_from_slice(&["job.lock", "true"]);
            match parse(&args) {
                Ok(Command::Run(run)) => run,
                other => panic!("{extra:?}: {other:?}"),
            }
        };
        let r = run(&["-w", "1.5", "--heartbeat", "1m"]);
        assert_eq!(r.wait, Some(Duration::from_millis(1500)));
        assert_eq!(r.heartbeat, Duration::from_secs(60));
        let r = run(&["--wait", "1h30m", "--heartbeat", "45"]);
        assert_eq!(r.wait, Some(Duration::from_secs(5400)));
        assert_eq!(r.heartbeat, Duration::from_secs(45));
        assert_eq!(run(&[]).heartbeat, Duration::from_secs(30));
        let r = run(&["--etcd", "http://e:2379", "--ttl", "1m", "--grace", "2.5"]);
        assert_eq!(r.ttl, Some(Duration::from_secs(60)));
        assert_eq!(r.grace, Some(Duration::from_millis(2500)));

        match parse(&[
            "lockfile",
            "inspect",
            "--max-age",
            "6h",
            "--stale-after",
            "90",
            "--expect-every",
            "1d",
            "x.lock",
        ]) {
            Ok(Command::Inspect(i)) => {
                assert_eq!(i.thresholds.max_age, Some(Duration::from_secs(6 * 3600)));
                assert_eq!(i.thresholds.stale_after, Some(Duration::from_secs(90)));
                assert_eq!(i.thresholds.expect_every, Some(Duration::from_secs(86400)));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["lockfile", "reap", "--older-than", "2h", "dir"]) {
            Ok(Command::Reap(r)) => assert_eq!(r.older_than, Duration::from_secs(7200)),
            other => panic!("{other:?}"),
        }
        match parse(&["lockfile", "check", "--expect-every", "1h", "x.lock"]) {
            Ok(Command::Check(c)) => assert_eq!(c.expect_every, Some(Duration::from_secs(3600))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_bad_duration_is_a_usage_error_naming_the_option_and_the_input() {
        for (args, option) in [
            (
                &["lockfile", "run", "-w", "soon", "x", "true"][..],
                "--wait",
            ),
            (
                &["lockfile", "run", "--heartbeat", "0s", "x", "true"],
                "--heartbeat",
            ),
            (
                &["lockfile", "check", "--expect-every", "1x", "x"],
                "--expect-every",
            ),
            (
                &["lockfile", "reap", "--older-than", "2 parsecs", "d"],
                "--older-than",
            ),
        ] {
            let err = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
            let text = err.to_string();
            let input = args[3];
            assert!(text.contains(option), "{text}");
            assert!(text.contains(&format!("`{input}`")), "{text}");
        }
    }

    #[test]
    fn ping_log_bytes_are_capped_at_what_the_server_framework_accepts() {
        assert_eq!(parse_log_bytes("2621440"), Ok(MAX_PING_LOG_BYTES));
        assert!(parse_log_bytes("2621441").unwrap_err().contains("2.5 MiB"));
        assert!(parse_log_bytes("-1").is_err());
    }

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
