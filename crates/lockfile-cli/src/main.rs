//! `lockfile`: run a job under a kernel-held lock, inspect, reap, and alarm on
//! silence. A thin face over the `lockfile` library; see `lockfile --help`.
// std's start-up is replaced by `start`'s: see there why.
#![cfg_attr(not(test), no_main)]

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
mod inspect;
#[cfg(feature = "etcd")]
mod lease;
mod limits;
mod lock_metrics;
mod metrics;
mod monitor;
mod ping;
mod prometheus;
mod reap;
mod run;
mod signals;
#[cfg(not(test))]
mod start;
mod supervise;
mod table;
#[cfg(feature = "ping")]
mod thread;

use clap::Parser;

use crate::args::{Cli, Command, LogFormat};

/// The process's entry point, called by the C runtime in place of std's.
#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    // SAFETY: the C runtime passes main its own argc and argv.
    unsafe { start::start(argc, argv, lockfile_main) }
}

/// Runs the command line `argv` and exits with its status.
// Test builds have the test harness's entry point instead.
#[cfg_attr(test, allow(dead_code))]
fn lockfile_main(argv: Vec<std::ffi::OsString>) {
    let mut rest = argv.iter().cloned();
    if rest
        .next()
        .is_some_and(|argv0| flock::invoked_as_flock(&argv0))
    {
        std::process::exit(flock::main(rest.collect()));
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
        Command::Run(args) => run::run(args),
        Command::Inspect(args) => inspect::inspect(args),
        Command::Reap(args) => reap::reap(args),
        Command::Check(args) => check::check(args),
        Command::Beat => beat::beat(),
        Command::Flock { args } => flock::main(args),
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
