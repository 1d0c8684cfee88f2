//! The `flock` personality's options as a clap `Command`, for its `--help`
//! and the man page: the personality itself is parsed by its getopt
//! parser (`flock/`), since flock(1)'s exact command line is its contract. A
//! test (`flock/tests.rs`) holds this description to what the parser takes.

use clap::{Arg, ArgAction, Command};

/// flock(1)'s command line, as the personality takes it.
pub fn command() -> Command {
    let flag = |id: &'static str, short: char, help: &'static str| {
        Arg::new(id)
            .short(short)
            .long(id)
            .action(ArgAction::SetTrue)
            .help(help)
    };
    Command::new("flock")
        .about("util-linux flock(1)'s command line (lockfile's flock personality)")
        .override_usage(
            "flock [OPTIONS] FILE|DIRECTORY COMMAND [ARGS...]\n       \
             flock [OPTIONS] FILE|DIRECTORY -c COMMAND\n       \
             flock [OPTIONS] NUMBER",
        )
        // -V prints it (clap insists on a version beside a Version action).
        .version(env!("CARGO_PKG_VERSION"))
        .disable_help_flag(true)
        .disable_version_flag(true)
        .arg(flag("shared", 's', "get a shared lock"))
        .arg(flag("exclusive", 'x', "get an exclusive lock (default)").short_alias('e'))
        .arg(flag("unlock", 'u', "remove a lock (of descriptor NUMBER)"))
        .arg(flag("nonblock", 'n', "fail rather than wait").aliases(["nb", "nonblocking"]))
        .arg(
            Arg::new("timeout")
                .short('w')
                .long("timeout")
                .alias("wait")
                .value_name("SECS")
                .help("wait for a limited amount of time"),
        )
        .arg(
            Arg::new("conflict-exit-code")
                .short('E')
                .long("conflict-exit-code")
                .value_name("NUMBER")
                .help("exit code after conflict or timeout (default 1)"),
        )
        .arg(flag(
            "close",
            'o',
            "close file descriptor before running command",
        ))
        .arg(
            Arg::new("command")
                .short('c')
                .long("command")
                .value_name("COMMAND")
                .help("run a single command string through the shell"),
        )
        .arg(flag("no-fork", 'F', "execute command without forking"))
        .arg(
            Arg::new("verbose")
                .long("verbose")
                .action(ArgAction::SetTrue)
                .help("increase verbosity"),
        )
        .arg(flag("help", 'h', "display this help").action(ArgAction::Help))
        .arg(flag("version", 'V', "display version").action(ArgAction::Version))
}
