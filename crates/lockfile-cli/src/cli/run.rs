//! `lockfile run`'s options: how to wait, what to hold, the limits on
//! COMMAND, and what to tell the monitoring system.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::duration::{self, DURATIONS};
use super::engine::EngineArgs;
use super::ticks::TickArgs;

#[derive(Debug, Args)]
#[command(after_help = DURATIONS)]
pub struct RunArgs {
    /// Fail at once if the lock is held (exit with the conflict status).
    #[arg(short = 'n', long = "nonblock", visible_aliases = ["nb", "nonblocking"], conflicts_with = "wait")]
    pub nonblock: bool,

    /// Wait at most DURATION for the lock: seconds (fractional allowed) or,
    /// for example, 90s or 1h30m; 0 is -n. Without -n or -w, wait as long as
    /// it takes.
    #[arg(short = 'w', long = "wait", visible_alias = "timeout", value_name = "DURATION", value_parser = duration::parse)]
    pub wait: Option<Duration>,

    /// Take a shared lock, held together with other shared holders (as
    /// flock(1) -s); no owner record is written.
    #[arg(short = 's', long, conflicts_with_all = ["watchdog", "engine", "evict_after", "once_per"])]
    pub shared: bool,

    /// Take one of N slots (1 to 1024) of the lock file or lease, so that at
    /// most N runs hold it at once: slot 0 is LOCKFILE itself, slot K is
    /// NAME@K.lock beside it (NAME@K for a lease). COMMAND gets
    /// LOCKFILE_SLOT (0-based). Every run takes only slots below its own N,
    /// so the count never exceeds the largest N in force; a plain run is
    /// slot 0 alone.
    #[arg(long, value_name = "N", value_parser = parse_slots, conflicts_with_all = ["shared", "no_fork", "unlock", "once_per", "evict_after"])]
    pub slots: Option<lockfile::slot::SlotCount>,

    /// Take an exclusive lock (the default; overrides -s, as in flock(1)).
    #[arg(short = 'x', short_alias = 'e', long, overrides_with = "shared")]
    pub exclusive: bool,

    /// Exec COMMAND in place, without forking (as flock(1) -F): COMMAND holds
    /// the lock itself. Nobody is left to beat or to record success, so the
    /// record promises no heartbeat and says that its release is not
    /// recorded.
    #[arg(short = 'F', long, conflicts_with_all = ["close", "engine", "watchdog", "max_runtime", "evict_after", "once_per", "output_on_failure"])]
    pub no_fork: bool,

    /// Print flock(1)'s lines: how long getting the lock took and what is
    /// executed (on stdout), and why it failed (on stderr).
    #[arg(long, conflicts_with = "quiet")]
    pub verbose: bool,

    /// Behave as util-linux flock(1) does where they differ (the `flock`
    /// personality sets it): no line on a conflict, `$SHELL -c`, its exit
    /// statuses.
    #[arg(long, hide = true)]
    pub flock_compat: bool,

    /// With a descriptor number alone: unlock it (as flock(1) -u N), marking
    /// our record in it released when there is one.
    #[arg(short = 'u', long, conflicts_with_all = ["command", "shell_command", "engine"])]
    pub unlock: bool,

    /// COMMAND does not inherit the lock's descriptor: the wrapper holds the
    /// lock until COMMAND exits (as flock(1) -o). If the wrapper is killed,
    /// the lock goes with it while COMMAND may still run.
    #[arg(short = 'o', long, conflicts_with = "engine")]
    pub close: bool,

    /// Exit status when the lock is held (default 75, EX_TEMPFAIL; flock(1)
    /// uses 1).
    #[arg(short = 'E', long = "conflict-exit-code", value_name = "N", default_value_t = crate::exit::CONFLICT)]
    pub conflict_exit_code: u8,

    /// Job name for the owner record (default: COMMAND's file name).
    #[arg(long, value_name = "NAME")]
    pub job: Option<String>,

    /// Refresh the lock's heartbeat every DURATION (seconds, or for example
    /// 5m) while COMMAND runs. `inspect` reports a heartbeat silent for three
    /// intervals.
    #[arg(long, value_name = "DURATION", default_value = "30", value_parser = duration::parse_positive)]
    pub heartbeat: Duration,

    #[command(flatten)]
    pub engine: EngineArgs,

    #[command(flatten)]
    pub ticks: TickArgs,

    /// Before taking the lock, wait a delay in [0, DURATION) that is the
    /// same on every run of this job on this host, and differs between
    /// hosts: it is drawn from /etc/machine-id (the hostname where there is
    /// none) and the job's name, never from the time or the pid, so that a
    /// fleet spreads out the same way every run (LOCKFILE_JITTER_SEED
    /// stands for the machine id, for tests). With --once-per, the run's
    /// tick is still the one nearest to its start, and DURATION must be
    /// less than half the period. A SIGTERM meanwhile ends the run before
    /// it takes anything.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse, conflicts_with = "unlock")]
    pub jitter: Option<Duration>,

    /// With a lease: its time to live, in seconds or for example 1m
    /// (default 10).
    #[arg(long, value_name = "DURATION", requires = "engine", value_parser = duration::parse_positive)]
    pub ttl: Option<Duration>,

    /// With a lease: when renewals fail, SIGTERM COMMAND this long before the
    /// lease's deadline, and SIGKILL it just before the deadline (default: a
    /// third of the TTL).
    #[arg(long, value_name = "DURATION", requires = "engine", value_parser = duration::parse_positive)]
    pub grace: Option<Duration>,

    /// With PostgreSQL, while waiting for the lease: listen on this URL for
    /// the holder's release (LISTEN/NOTIFY), and ask again as soon as it
    /// comes rather than at the next poll (every second, or a tenth of the
    /// TTL when shorter). It must reach the server directly, never through
    /// a pooler such as PgBouncer (--postgres may). Without it,
    /// LOCKFILE_POSTGRES_LISTEN_URL gives the URL. If it cannot be used,
    /// the wait polls, with a warning.
    #[arg(long, value_name = "URL", conflicts_with = "etcd")]
    pub postgres_listen: Option<String>,

    /// COMMAND proves its progress: it must beat (`lockfile beat`, or touch
    /// "$LOCKFILE_BEAT") within DURATION of starting and then at least every
    /// DURATION, or it is stopped with everything it started, and the run
    /// exits 124 (under a lease, which is then released at once). The
    /// wrapper then keeps no heartbeat of its own.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_positive)]
    pub watchdog: Option<Duration>,

    /// Stop COMMAND, with everything it started, once it has run for
    /// DURATION (for example 45m or 2h); the run exits 124. Also under a
    /// lease, whose record then states it.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_positive)]
    pub max_runtime: Option<Duration>,

    /// When stopping COMMAND (a limit, or a lease about to lapse), the time
    /// between SIGTERM and SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = "10", value_parser = duration::parse)]
    pub kill_after: Duration,

    /// Keep COMMAND's stdout and stderr while it runs, and print them only
    /// if the run fails (a non-zero exit, a signal, a limit, a lost lease),
    /// each to the stream it was written to, after one line of ours that
    /// says why; print nothing when it succeeds, so that cron sends no mail
    /// (as chronic does). COMMAND then writes to pipes, not a terminal, and
    /// the order between stdout and stderr is kept only when they are one
    /// file (as under cron). At most --output-limit bytes of each are kept:
    /// the head and the tail, with a line saying how much was cut.
    #[arg(long)]
    pub output_on_failure: bool,

    /// With --output-on-failure: the most kept of each stream, in bytes (or
    /// with a unit: 64KiB, 16MiB, 1GiB); half its head, half its tail.
    /// Past 1 MiB, it is kept in a temporary file in $TMPDIR that no name
    /// points to.
    #[arg(long, value_name = "BYTES", default_value = "16MiB", requires = "output_on_failure", value_parser = parse_output_limit)]
    pub output_limit: u64,

    /// When the lock is held by a holder whose heartbeat has been silent for
    /// longer than DURATION, and longer than it promised, stop it with
    /// everything it started and take the lock. This kills another process
    /// (Linux only); a holder that cannot be verified is never touched.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_positive, conflicts_with = "engine")]
    pub evict_after: Option<Duration>,

    /// Run COMMAND through `sh -c` (as flock(1) -c).
    #[arg(
        short = 'c',
        long = "command",
        value_name = "SHELL_COMMAND",
        conflicts_with = "command"
    )]
    pub shell_command: Option<String>,

    /// The lock file (created if missing; its directory must exist), or a
    /// directory; with a lease (--etcd), the lease name. A number without
    /// COMMAND is a descriptor the calling shell holds open, locked for it
    /// (as flock(1) FD).
    pub lockfile: PathBuf,

    #[command(flatten)]
    pub monitoring: MonitorArgs,

    /// The command to run, with its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

/// The options of `run` that tell the monitoring system.
#[derive(Debug, Args)]
pub struct MonitorArgs {
    /// Write the run's metrics for node_exporter's textfile collector to
    /// DIR/lockfile-JOB.prom (atomically, mode 0644). A skip counts there
    /// too.
    #[arg(long, value_name = "DIR", env = "LOCKFILE_METRICS_DIR")]
    pub metrics_dir: Option<PathBuf>,

    /// Ping a dead man's switch in the healthchecks.io protocol: URL/start
    /// when COMMAND starts, URL on success, URL/STATUS on failure, URL/fail
    /// when it was stopped, URL/log on a skip (URL/fail behind an unhealthy
    /// holder). Best effort: never changes the exit status.
    #[arg(long, value_name = "URL")]
    pub ping: Option<String>,

    /// With --ping: send the last N bytes of COMMAND's output with the final
    /// ping (default 0: none). COMMAND's stdout and stderr then pass through
    /// pipes, so COMMAND no longer sees a terminal.
    #[arg(long, value_name = "N", default_value_t = 0, requires = "ping", value_parser = parse_log_bytes)]
    pub ping_log_bytes: usize,

    /// Print nothing on a skip behind a healthy holder, as flock(1). A
    /// holder whose heartbeat is silent, that overran its own maximum
    /// runtime, or whose recorded owner is dead is still reported.
    #[arg(short = 'q', long)]
    pub quiet: bool,
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

/// `--output-limit BYTES`: a number of bytes, or one with a binary unit
/// (KiB, MiB, GiB; K, M, G mean the same).
fn parse_output_limit(value: &str) -> Result<u64, String> {
    let digits = value.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit: u64 = match &value[digits.len()..] {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "`{value}`: `{other}` is not a unit (bytes, or KiB, MiB, GiB)"
            ));
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|e| format!("`{value}` is not a number of bytes: {e}"))?;
    n.checked_mul(unit)
        .ok_or_else(|| format!("`{value}` is too large"))
}

impl RunArgs {
    /// The URL a waiting PostgreSQL lease listens on: `--postgres-listen`,
    /// or LOCKFILE_POSTGRES_LISTEN_URL when it is absent (as
    /// LOCKFILE_POSTGRES_URL stands for --postgres).
    pub fn postgres_listen_url(&self) -> Option<String> {
        self.postgres_listen.clone().or_else(|| {
            std::env::var("LOCKFILE_POSTGRES_LISTEN_URL")
                .ok()
                .filter(|url| !url.is_empty())
        })
    }
}

/// `--slots N`: 1 to 1024.
fn parse_slots(s: &str) -> Result<lockfile::slot::SlotCount, String> {
    s.parse()
        .ok()
        .and_then(lockfile::slot::SlotCount::new)
        .ok_or_else(|| {
            format!(
                "{s:?} is not a number of slots: give a whole number from 1 to {}",
                lockfile::slot::MAX_SLOTS
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_log_bytes_are_capped_at_what_the_server_framework_accepts() {
        assert_eq!(parse_log_bytes("2621440"), Ok(MAX_PING_LOG_BYTES));
        assert!(parse_log_bytes("2621441").unwrap_err().contains("2.5 MiB"));
        assert!(parse_log_bytes("-1").is_err());
    }

    #[test]
    fn an_output_limit_takes_bytes_or_a_binary_unit() {
        assert_eq!(parse_output_limit("0"), Ok(0));
        assert_eq!(parse_output_limit("1000"), Ok(1000));
        assert_eq!(parse_output_limit("64KiB"), Ok(65_536));
        assert_eq!(parse_output_limit("16MiB"), Ok(16 << 20));
        assert_eq!(parse_output_limit("16M"), Ok(16 << 20));
        assert_eq!(parse_output_limit("2GiB"), Ok(2 << 30));
        assert!(
            parse_output_limit("16MB")
                .unwrap_err()
                .contains("`MB` is not a unit")
        );
        assert!(
            parse_output_limit("-1")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(
            parse_output_limit("MiB")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(
            parse_output_limit("99999999999GiB")
                .unwrap_err()
                .contains("too large")
        );
    }
}
