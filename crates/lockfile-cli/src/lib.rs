//! The `lockfile` command: run a job under a kernel-held lock, inspect, reap,
//! and alarm on silence. A thin face over the `lockfile` library; see
//! `lockfile --help`. This library is the code of its two binaries, not an
//! API: nothing here is stable.
//!
//! - `lockfile-full` is the whole command: every subcommand and option,
//!   parsed by clap ([`full`]).
//! - `lockfile` is what users call. A plain `run` (a lock file, COMMAND, and
//!   options that need neither an HTTP client nor a log subscriber) and the
//!   `flock` personality's runs are parsed and run in this binary, which
//!   links nothing else; every other command line is handed, by exec and
//!   unchanged, to `lockfile-full` ([`front`]).
//!
//! Why two: a plain run is what every cron job pays on every start, and a
//! process's start-up grows with the size of its binary, whatever code then
//! runs. The loader relocates all of its data, and each first touch of code
//! maps the pages around it. The HTTPS stack of `--ping`, the regex engine
//! of `--log-format`'s filter and clap's model of the whole command line
//! made a plain run cost 1.3–1.6× flock(1)'s time (see BENCHMARKS.md). Both
//! binaries run the same code for a run: the plain parser's results are held
//! to clap's by a property test.

/// `eprintln!`, except that a closed stderr is no reason to panic: a panic
/// would unwind through a held lock's guard.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `println!`, except that a closed stdout (`lockfile inspect | head -1`) is
/// no reason to panic: the exit status still tells the result.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod args;
mod atomic;
mod beat;
#[cfg(feature = "ping")]
mod capture;
mod check;
mod command;
mod duration;
mod exit;
mod flock;
mod format;
mod handover;
mod inspect;
#[cfg(feature = "etcd")]
mod lease;
mod limits;
mod lock_metrics;
mod metrics;
mod monitor;
mod ping;
mod plain;
mod prometheus;
mod reap;
mod run;
mod signals;
mod spawn;
mod start;
mod supervise;
mod table;
#[cfg(feature = "ping")]
mod thread;

use std::ffi::OsString;

use clap::Parser;

use crate::args::{Cli, Command, LogFormat};
use crate::ping::{NoPing, Pinger};

pub use crate::start::start;

/// The whole command (`lockfile-full`): runs the command line `argv` and
/// exits with its status.
pub fn full(argv: Vec<OsString>) {
    handover::forget_handover();
    let mut rest = argv.iter().cloned();
    if rest
        .next()
        .is_some_and(|argv0| flock::invoked_as_flock(&argv0))
    {
        std::process::exit(flock::main(rest.collect(), run_translated));
    }
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are not errors; everything else is a usage
            // error, which exits 64 (EX_USAGE) rather than clap's 2.
            let code = if e.use_stderr() { exit::USAGE } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    if let Some(format) = cli.log_format {
        init_logging(format);
    }
    // `--etcd` hands the whole subcommand to the lease module: a lease and a
    // file lock share COMMAND and the table layout, nothing else.
    let code = match cli.command {
        #[cfg(feature = "etcd")]
        Command::Run(args) if args.etcd.is_some() => lease::run(args),
        #[cfg(feature = "etcd")]
        Command::Inspect(args) if args.etcd.is_some() => lease::inspect(&args),
        #[cfg(not(feature = "etcd"))]
        Command::Run(args::RunArgs { etcd: Some(_), .. })
        | Command::Inspect(args::InspectArgs { etcd: Some(_), .. }) => {
            errln!(
                "lockfile: --etcd needs a build with the `etcd` feature (cargo install --features etcd)"
            );
            exit::USAGE
        }
        Command::Run(args) => run::run::<Pinger>(args),
        Command::Inspect(args) => inspect::inspect(args),
        Command::Reap(args) => reap::reap(args),
        Command::Check(args) => check::check(args),
        Command::Beat => beat::beat(),
        Command::Flock { args } => flock::main(args, run_translated),
    };
    std::process::exit(code);
}

/// The `lockfile run` arguments that the `flock` personality translated its
/// command line into, parsed by clap and run.
fn run_translated(run_args: Vec<OsString>) -> i32 {
    let mut argv: Vec<OsString> = vec!["lockfile".into(), "run".into()];
    argv.extend(run_args);
    match Cli::try_parse_from(argv) {
        Ok(Cli {
            command: Command::Run(run),
            ..
        }) => run::run::<Pinger>(run),
        Ok(_) => unreachable!("the translation always names `run`"),
        Err(e) => flock::usage(&e.to_string()),
    }
}

/// What users call (`lockfile`): runs a plain run itself and hands every
/// other command line to `lockfile-full`; exits with the status.
pub fn front(argv: Vec<OsString>) {
    let plain = |run_args: &[OsString]| match plain::parse_run(run_args) {
        Some(args) => run::run::<NoPing>(args),
        None => handover::hand_over(&argv),
    };
    let code = match argv.first() {
        Some(argv0) if flock::invoked_as_flock(argv0) => {
            flock::main(argv[1..].to_vec(), |run_args| plain(&run_args))
        }
        _ => match argv.get(1) {
            Some(subcommand) if subcommand == "run" => plain(&argv[2..]),
            _ => handover::hand_over(&argv),
        },
    };
    std::process::exit(code);
}

/// Sends the library's `tracing` events to stderr. The level comes from
/// `LOCKFILE_LOG` (an `EnvFilter` directive), `info` by default.
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LOCKFILE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}
