//! The `lockfile` command: run a job under a kernel-held lock, inspect, reap,
//! and alarm on silence. A thin face over the `lockfile` library; see
//! `lockfile --help`.
//!
//! Where a command line goes, by folder:
//!
//! - `cli/`: the command line (one clap definition), durations, output
//!   formats;
//! - `run/`: `lockfile run`, one pipeline over what it holds (`run/hold/`:
//!   a lock file or a lease): COMMAND, its supervision and signals, the
//!   limits;
//! - `lease/`: the lease engines, and `inspect` of leases;
//! - `monitor/`: what a run tells the monitoring system: metrics files,
//!   pings, and the exposition format they share with `inspect`;
//! - `flock/`: the `flock` personality, util-linux flock(1)'s command line;
//! - `inspect/`, `check.rs`, `reap.rs`, `beat.rs`: the other subcommands;
//! - `term.rs`, `log.rs`: what we print for a person, and the structured
//!   events, escaped so that no one else's string reaches a terminal raw;
//! - `files.rs`, `atomic.rs`: the files kept beside the lock, opened and
//!   replaced so that nothing planted in a shared directory can hang or
//!   fool the command.

/// `eprintln!` of one line for a person, its control characters escaped
/// (`term::line`; a string from others goes in escaped already, a path as
/// `term::path`); a closed stderr is no reason to panic: a panic would
/// unwind through a held lock's guard.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = format!($($arg)*);
        let _ = writeln!(std::io::stderr(), "{}", crate::term::line(&line));
    }};
}

/// [`outln!`] of one line for a person, escaped as [`errln!`] says.
macro_rules! textln {
    ($($arg:tt)*) => {{
        let line = format!($($arg)*);
        outln!("{}", crate::term::line(&line));
    }};
}

/// `println!`, except that a closed stdout (`lockfile inspect | head -1`) is
/// no reason to panic: the exit status still tells the result. For machine
/// output (JSON, samples) and our own text; a person's line from others'
/// data goes through [`textln!`].
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

// The command line and the exit statuses: the crate's library (`lib.rs`),
// so that the documentation generator builds on the same definition.
use lockfile_cli::{cli, exit};

mod atomic;
mod beat;
mod check;
mod files;
mod flock;
mod inspect;
mod lease;
mod log;
mod monitor;
mod reap;
mod run;
mod term;
mod thread;

use std::ffi::OsString;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() {
    let argv: Vec<OsString> = std::env::args_os().collect();
    // The keeper between a lease's wrapper and COMMAND: our own re-exec,
    // before any parser, so that no help text knows it.
    if argv.get(1).is_some_and(|arg| arg == run::keeper::ARG) {
        std::process::exit(run::keeper::main(&argv[2..]));
    }
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
        log::init(format);
    }
    if let Some(conflict) = cli.command.conflict() {
        errln!("lockfile: {conflict}");
        std::process::exit(exit::USAGE);
    }
    let code = match cli.command {
        Command::Inspect(args) if args.engine.chosen() => lease::inspect::inspect(&args),
        Command::Run(args) => run::run(args),
        Command::Inspect(args) => inspect::inspect(args),
        Command::Reap(args) => reap::reap(args),
        Command::Check(args) => check::check(args),
        Command::Beat => beat::beat(),
        Command::Postgres(command) => lease::postgres::postgres(command),
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
        }) => run::run(run),
        Ok(_) => unreachable!("the translation always names `run`"),
        Err(e) => flock::usage(&e.to_string()),
    }
}
