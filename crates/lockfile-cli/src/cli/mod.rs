//! The command line, in flock(1)'s spelling where flock(1) has a spelling:
//! `run`'s options (`run.rs`), the engine options (`engine.rs`), the ticks
//! (`ticks.rs`), durations and output formats, and the `flock`
//! personality's options (`flock.rs`).
//!
//! Part of the crate's library (`lib.rs`), which the documentation generator
//! (`crates/lockfile-docgen`) builds on to make the man page and the shell
//! completions from the very definition that prints `--help`: it may use
//! nothing of the command but `crate::exit`, beside clap, humantime and the
//! library.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub mod duration;
mod engine;
pub mod flock;
pub mod format;
mod run;
mod ticks;

pub use engine::{EngineArgs, PostgresCommand};
pub use run::{MonitorArgs, RunArgs};
pub use ticks::TickArgs;

use duration::DURATIONS;
use format::Format;

#[derive(Debug, Parser)]
#[command(
    name = "lockfile",
    version,
    about = "Run a job under a kernel-held lock; inspect and reap lock files; alarm on silence.",
    after_help = "Exit statuses are listed in docs/command.md (and the man page). Usage errors exit 64."
)]
pub struct Cli {
    /// Write the library's structured events (lock_acquired, lock_contended,
    /// lock_released, stale_lock_removed, heartbeat) to stderr. The level is
    /// taken from LOCKFILE_LOG (default: info).
    #[arg(long, value_enum, global = true, env = "LOCKFILE_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
// Parsed once per process and matched once: its size costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
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
pub struct Thresholds {
    /// Report `aged` when a lock has been held longer than DURATION (seconds,
    /// or for example 6h; default: off).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub max_age: Option<Duration>,

    /// Report `heartbeat_silent` when a held lock's heartbeat is older than
    /// DURATION (seconds, or for example 2m; default: three times the
    /// interval its holder promised).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub stale_after: Option<Duration>,

    /// Expect a recorded success at least every DURATION (seconds, or for
    /// example 1h): report `never_succeeded` or `silent` otherwise (default:
    /// off).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_positive)]
    pub expect_every: Option<Duration>,
}

impl Thresholds {
    pub fn options(&self) -> lockfile::inspect::InspectOptions {
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
pub struct InspectArgs {
    /// Short for --format json: a JSON array, one object per lock file.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub print: format::FormatArgs,

    #[command(flatten)]
    pub thresholds: Thresholds,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// Lock files, or directories of `*.lock` files. With a lease engine
    /// (--etcd), lease names; none means every lease the engine knows.
    #[arg(required_unless_present = "engine", value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
#[command(after_help = DURATIONS)]
pub struct ReapArgs {
    /// Remove the files (default: a dry run that reports what it would remove).
    #[arg(long)]
    pub fix: bool,

    /// Keep files changed more recently than DURATION ago (seconds, or for
    /// example 1h; default 0: the kernel lock already says whether anyone
    /// holds a file).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = duration::parse)]
    pub older_than: Duration,

    /// Also remove stale records written on other hosts.
    #[arg(long)]
    pub include_foreign: bool,

    /// Print a JSON array, one object per file.
    #[arg(long)]
    pub json: bool,

    /// Directories of `*.lock` files.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
#[command(after_help = DURATIONS)]
pub struct CheckArgs {
    /// The longest acceptable time since the last recorded success: seconds,
    /// or for example 90m or 1d. Not needed with --once-per.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_positive, required_unless_present = "once_per")]
    pub expect_every: Option<Duration>,

    /// CRITICAL `missed_ticks` when the last finished tick of a job run with
    /// `run --once-per` (and the same --tick-offset) is older than the
    /// current tick minus one period.
    #[command(flatten)]
    pub ticks: TickArgs,

    /// CRITICAL `failing` once this many runs in a row have failed (any
    /// outcome but success: a non-zero exit, a signal, a limit, an eviction,
    /// a lost lease).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_failures: u32,

    /// WARNING `overrunning` when the lock has been held longer than
    /// DURATION (the holder's own recorded maximum runtime counts too).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub max_age: Option<Duration>,

    /// CRITICAL `hung` when the holder's heartbeat is older than DURATION
    /// (default: three times the interval it promised). Lock files only:
    /// a lease's renewals prove that its wrapper lives, not that COMMAND
    /// makes progress, so `hung` never applies to a lease (use --max-age or
    /// `run --max-runtime` there).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse, conflicts_with = "engine")]
    pub stale_after: Option<Duration>,

    /// WARNING `saturated` when LOCKFILE (or the lease NAME) is slot 0 of
    /// a set (`run --slots`) and every slot has been held for longer than
    /// DURATION. A set is found without being told N, and judged as one
    /// job: each slot's verdicts, silence on the set's latest success,
    /// failure on its latest run.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub saturated_after: Option<Duration>,

    /// Print one JSON object: status, code, verdicts and the inspect report.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// The lock file (a missing file counts as "never succeeded"); with a
    /// lease engine (--etcd), the lease name.
    pub lockfile: PathBuf,
}

impl InspectArgs {
    /// `--format`, where `--json` is short for `--format json`.
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else {
            self.print.format.unwrap_or(Format::Table)
        }
    }
}

impl Command {
    /// A usage conflict that clap cannot see, because an environment
    /// variable takes part (LOCKFILE_POSTGRES_URL and LOCKFILE_REDIS_URL
    /// stand for --postgres and --redis only when no engine option is
    /// given). Every other conflict is declared to
    /// clap, with its arguments.
    pub fn conflict(&self) -> Option<&'static str> {
        let (engine, listen) = match self {
            Command::Run(args) => (&args.engine, args.postgres_listen.is_some()),
            Command::Inspect(args) => (&args.engine, false),
            Command::Check(args) => (&args.engine, false),
            _ => return None,
        };
        let postgres = engine.postgres_url().is_some();
        let redis = engine.redis_url().is_some();
        if postgres && redis {
            // Only the variables can get here: clap refuses both options.
            return Some(
                "both LOCKFILE_POSTGRES_URL and LOCKFILE_REDIS_URL are set, and no engine \
                 option says which to use: give --postgres URL or --redis URL, or unset one",
            );
        }
        if (engine.redis_prefix.is_some() || engine.redis_ca.is_some()) && !redis {
            return Some(
                "--redis-prefix and --redis-ca need Redis: --redis URL, or LOCKFILE_REDIS_URL",
            );
        }
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
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
