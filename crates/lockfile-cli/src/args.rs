//! The command line, in flock(1)'s spelling where flock(1) has a spelling.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "lockfile",
    version,
    about = "Run a job under a kernel-held lock; inspect and reap lock files; alarm on silence.",
    after_help = "Exit statuses are listed in the README. Usage errors exit 64."
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

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Take the lock, run COMMAND, release the lock when COMMAND ends.
    Run(RunArgs),
    /// Show who holds lock files, since when, and whether they still beat.
    Inspect(InspectArgs),
    /// Remove the litter of dead owners (stale and debris files); a dry run
    /// unless --fix.
    Reap(ReapArgs),
    /// Alarm on silence: exit 2 when the last recorded success is too old.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Fail at once if the lock is held (exit with the conflict status).
    #[arg(short = 'n', long = "nonblock", conflicts_with = "wait")]
    pub(crate) nonblock: bool,

    /// Wait at most SECONDS (fractional allowed) for the lock. Without -n or
    /// -w, wait as long as it takes.
    #[arg(short = 'w', long = "wait", value_name = "SECONDS", value_parser = parse_seconds)]
    pub(crate) wait: Option<Duration>,

    /// Exit status when the lock is held (default 75, EX_TEMPFAIL; flock(1)
    /// uses 1).
    #[arg(short = 'E', long = "conflict-exit-code", value_name = "N", default_value_t = crate::exit::CONFLICT)]
    pub(crate) conflict_exit_code: u8,

    /// Job name for the owner record (default: COMMAND's file name).
    #[arg(long, value_name = "NAME")]
    pub(crate) job: Option<String>,

    /// Refresh the lock's heartbeat every SECONDS while COMMAND runs.
    /// `inspect` reports a heartbeat silent for three intervals.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_positive_seconds)]
    pub(crate) heartbeat: Duration,

    /// Take a lease on etcd instead of a file lock: a comma-separated list of
    /// endpoint URLs (e.g. http://127.0.0.1:2379). LOCKFILE is then the lease
    /// NAME, the key `lockfile/locks/NAME`. Needs a build with the `etcd`
    /// feature.
    #[arg(long, value_name = "ENDPOINTS")]
    pub(crate) etcd: Option<String>,

    /// With --etcd: the lease's time to live (default 10).
    #[arg(long, value_name = "SECONDS", requires = "etcd", value_parser = parse_positive_seconds)]
    pub(crate) ttl: Option<Duration>,

    /// With --etcd: when renewals fail, SIGTERM COMMAND this long before the
    /// lease's deadline, and SIGKILL it just before the deadline (default: a
    /// third of the TTL).
    #[arg(long, value_name = "SECONDS", requires = "etcd", value_parser = parse_positive_seconds)]
    pub(crate) grace: Option<Duration>,

    /// Run COMMAND through `sh -c` (as flock(1) -c).
    #[arg(
        short = 'c',
        long = "command",
        value_name = "SHELL_COMMAND",
        conflicts_with = "command"
    )]
    pub(crate) shell_command: Option<String>,

    /// The lock file, created if missing (its directory must exist); with
    /// --etcd, the lease name.
    pub(crate) lockfile: PathBuf,

    /// The command to run, with its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND",
        required_unless_present = "shell_command"
    )]
    pub(crate) command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct Thresholds {
    /// Report `aged` when a lock has been held longer than SECONDS (default: off).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub(crate) max_age: Option<Duration>,

    /// Report `heartbeat_silent` when a held lock's heartbeat is older than
    /// SECONDS (default: three times the interval its holder promised).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub(crate) stale_after: Option<Duration>,

    /// Expect a recorded success at least every SECONDS: report
    /// `never_succeeded` or `silent` otherwise (default: off).
    #[arg(long, value_name = "SECONDS", value_parser = parse_positive_seconds)]
    pub(crate) expect_every: Option<Duration>,
}

impl Thresholds {
    pub(crate) fn options(&self) -> lockfile::InspectOptions {
        let mut opts = lockfile::InspectOptions::new();
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
pub(crate) struct InspectArgs {
    /// Print a JSON array, one object per lock file.
    #[arg(long)]
    pub(crate) json: bool,

    #[command(flatten)]
    pub(crate) thresholds: Thresholds,

    /// Inspect leases on etcd instead of files: a comma-separated list of
    /// endpoint URLs; PATH is then a lease NAME.
    #[arg(long, value_name = "ENDPOINTS")]
    pub(crate) etcd: Option<String>,

    /// Lock files, or directories of `*.lock` files (with --etcd, lease names).
    #[arg(required = true, value_name = "PATH")]
    pub(crate) paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ReapArgs {
    /// Remove the files (default: a dry run that reports what it would remove).
    #[arg(long)]
    pub(crate) fix: bool,

    /// Keep files changed more recently than SECONDS ago (default 0: the
    /// kernel lock already says whether anyone holds a file).
    #[arg(long, value_name = "SECONDS", default_value = "0", value_parser = parse_seconds)]
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
pub(crate) struct CheckArgs {
    /// The longest acceptable time since the last recorded success.
    #[arg(long, value_name = "SECONDS", value_parser = parse_positive_seconds)]
    pub(crate) expect_every: Duration,

    /// The lock file (a missing file counts as "never succeeded").
    pub(crate) lockfile: PathBuf,
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| {
        format!("`{s}` is not a duration in seconds (it must be finite and not negative)")
    })
}

fn parse_positive_seconds(s: &str) -> Result<Duration, String> {
    match parse_seconds(s)? {
        Duration::ZERO => Err("the duration must be greater than zero".to_owned()),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_parse_fractions_and_refuse_nonsense() {
        assert_eq!(parse_seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("NaN").is_err());
        assert!(parse_seconds("inf").is_err());
        assert!(parse_seconds("1e400").is_err());
        assert!(parse_seconds("soon").is_err());
        assert!(parse_positive_seconds("0").is_err());
    }

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
