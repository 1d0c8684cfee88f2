//! The command line of a plain `lockfile run`, parsed without clap, so that
//! the `lockfile` binary links no argument parser, HTTP client or log
//! subscriber (see the crate's docs why).
//!
//! A plain run is a lock file, COMMAND (or `-c STRING`) and options among
//! those below, each given at most once, none of which needs more than the
//! run itself: no `--ping`, `--log-format`, `--etcd`, `-u`, `--help`. The
//! parser answers only when it is sure to give what clap gives; for every
//! other command line it answers `None`, and the full command parses it,
//! errors and all. A property test holds every answer to clap's.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use crate::args::RunArgs;
use crate::duration;
use crate::monitor::MonitorArgs;

/// The options a plain run may have, by their canonical name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Opt {
    Nonblock,
    Wait,
    Shared,
    Exclusive,
    NoFork,
    Verbose,
    FlockCompat,
    Close,
    ConflictExitCode,
    Job,
    Heartbeat,
    Watchdog,
    MaxRuntime,
    KillAfter,
    EvictAfter,
    Command,
    MetricsDir,
    Quiet,
}

impl Opt {
    fn long(name: &[u8]) -> Option<Opt> {
        Some(match name {
            b"nonblock" | b"nb" | b"nonblocking" => Opt::Nonblock,
            b"wait" | b"timeout" => Opt::Wait,
            b"shared" => Opt::Shared,
            b"exclusive" => Opt::Exclusive,
            b"no-fork" => Opt::NoFork,
            b"verbose" => Opt::Verbose,
            b"flock-compat" => Opt::FlockCompat,
            b"close" => Opt::Close,
            b"conflict-exit-code" => Opt::ConflictExitCode,
            b"job" => Opt::Job,
            b"heartbeat" => Opt::Heartbeat,
            b"watchdog" => Opt::Watchdog,
            b"max-runtime" => Opt::MaxRuntime,
            b"kill-after" => Opt::KillAfter,
            b"evict-after" => Opt::EvictAfter,
            b"command" => Opt::Command,
            b"metrics-dir" => Opt::MetricsDir,
            b"quiet" => Opt::Quiet,
            _ => return None,
        })
    }

    fn short(letter: u8) -> Option<Opt> {
        Some(match letter {
            b'n' => Opt::Nonblock,
            b'w' => Opt::Wait,
            b's' => Opt::Shared,
            b'x' | b'e' => Opt::Exclusive,
            b'F' => Opt::NoFork,
            b'o' => Opt::Close,
            b'E' => Opt::ConflictExitCode,
            b'c' => Opt::Command,
            b'q' => Opt::Quiet,
            _ => return None,
        })
    }

    fn takes_value(self) -> bool {
        !matches!(
            self,
            Opt::Nonblock
                | Opt::Shared
                | Opt::Exclusive
                | Opt::NoFork
                | Opt::Verbose
                | Opt::FlockCompat
                | Opt::Close
                | Opt::Quiet
        )
    }

    /// Sets the option in `args`; `None` for a value clap would refuse.
    fn set(self, args: &mut RunArgs, value: Option<&OsStr>) -> Option<()> {
        let text = || value.and_then(|v| v.to_str());
        let positive = || duration::parse_positive(text()?).ok();
        match self {
            Opt::Nonblock => args.nonblock = true,
            Opt::Shared => args.shared = true,
            Opt::Exclusive => args.exclusive = true,
            Opt::NoFork => args.no_fork = true,
            Opt::Verbose => args.verbose = true,
            Opt::FlockCompat => args.flock_compat = true,
            Opt::Close => args.close = true,
            Opt::Quiet => args.monitoring.quiet = true,
            Opt::Wait => args.wait = Some(duration::parse(text()?).ok()?),
            Opt::KillAfter => args.kill_after = duration::parse(text()?).ok()?,
            Opt::Heartbeat => args.heartbeat = positive()?,
            Opt::Watchdog => args.watchdog = Some(positive()?),
            Opt::MaxRuntime => args.max_runtime = Some(positive()?),
            Opt::EvictAfter => args.evict_after = Some(positive()?),
            Opt::ConflictExitCode => {
                let digits = text()?;
                if !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                args.conflict_exit_code = digits.parse().ok()?;
            }
            Opt::Job => args.job = Some(text()?.to_owned()),
            Opt::Command => args.shell_command = Some(text()?.to_owned()),
            Opt::MetricsDir => args.monitoring.metrics_dir = Some(PathBuf::from(value?)),
        }
        Some(())
    }
}

/// What clap gives `lockfile run LOCKFILE` before any option: every default.
pub(crate) fn defaults() -> RunArgs {
    RunArgs {
        nonblock: false,
        wait: None,
        shared: false,
        exclusive: false,
        no_fork: false,
        verbose: false,
        flock_compat: false,
        unlock: false,
        close: false,
        conflict_exit_code: crate::exit::CONFLICT,
        job: None,
        heartbeat: Duration::from_secs(30),
        etcd: None,
        ttl: None,
        grace: None,
        watchdog: None,
        max_runtime: None,
        kill_after: Duration::from_secs(10),
        evict_after: None,
        shell_command: None,
        lockfile: PathBuf::new(),
        monitoring: MonitorArgs {
            metrics_dir: None,
            ping: None,
            ping_log_bytes: 0,
            quiet: false,
        },
        command: Vec::new(),
    }
}

/// A value in the argument after its option, unless it is empty or looks
/// like an option, which clap may take it for.
fn separate(value: &OsString) -> Option<&OsString> {
    Some(value).filter(|v| !v.is_empty() && !v.as_bytes().starts_with(b"-"))
}

/// `lockfile run ARGS` (ARGS after `run`) as clap would parse it, when ARGS
/// are a plain run's; `None` otherwise. `LOCKFILE_METRICS_DIR` is read as
/// clap reads it; `LOCKFILE_LOG_FORMAT` set, or `LOCKFILE_METRICS_DIR` set
/// but empty (which clap refuses), are `None` too.
pub(crate) fn parse_run(args: &[OsString]) -> Option<RunArgs> {
    if std::env::var_os("LOCKFILE_LOG_FORMAT").is_some() {
        return None;
    }
    let mut run = defaults();
    let mut given: Vec<Opt> = Vec::new();
    let mut give = |opt: Opt, run: &mut RunArgs, value: Option<&OsStr>| {
        if given.contains(&opt) {
            return None;
        }
        given.push(opt);
        opt.set(run, value)
    };
    let mut rest = args.iter();
    let mut options_ended = false;
    let lockfile = loop {
        let arg = rest.next()?;
        let bytes = arg.as_bytes();
        if options_ended || !bytes.starts_with(b"-") || bytes == b"-" {
            break arg;
        }
        if bytes == b"--" {
            options_ended = true;
        } else if let Some(long) = bytes.strip_prefix(b"--") {
            let (name, inline) = match long.iter().position(|&b| b == b'=') {
                Some(eq) => (&long[..eq], Some(OsStr::from_bytes(&long[eq + 1..]))),
                None => (long, None),
            };
            let opt = Opt::long(name)?;
            let value = match (opt.takes_value(), inline) {
                (false, None) => None,
                (true, Some(value)) if !value.is_empty() => Some(value),
                (true, None) => Some(separate(rest.next()?)?.as_os_str()),
                _ => return None,
            };
            give(opt, &mut run, value)?;
        } else {
            // Bundled short options; one that takes a value takes the rest
            // of the argument, or else the next one.
            let letters = &bytes[1..];
            for (i, &letter) in letters.iter().enumerate() {
                let opt = Opt::short(letter)?;
                if !opt.takes_value() {
                    give(opt, &mut run, None)?;
                    continue;
                }
                let attached = &letters[i + 1..];
                let value = match attached {
                    [] => separate(rest.next()?)?.as_os_str(),
                    [b'=', ..] => return None,
                    _ => OsStr::from_bytes(attached),
                };
                give(opt, &mut run, Some(value))?;
                break;
            }
        }
    };
    if lockfile.is_empty() || lockfile == "-" {
        return None;
    }
    run.lockfile = PathBuf::from(lockfile);
    let mut command = rest.as_slice();
    match command.first().map(|word| word.as_bytes()) {
        Some(b"--") if !options_ended => command = &command[1..],
        Some(b"--") => return None,
        // Before a `--`, clap may still take it for an option.
        Some(word) if word.starts_with(b"-") && !options_ended => return None,
        _ => {}
    }
    run.command = command.to_vec();
    if run.monitoring.metrics_dir.is_none()
        && let Some(dir) = std::env::var_os("LOCKFILE_METRICS_DIR")
    {
        if dir.is_empty() {
            return None;
        }
        run.monitoring.metrics_dir = Some(PathBuf::from(dir));
    }
    // What clap refuses as conflicting, or leaves to `run`'s descriptor form.
    let conflicting = (run.nonblock && run.wait.is_some())
        || (run.shared && (run.exclusive || run.watchdog.is_some() || run.evict_after.is_some()))
        || (run.no_fork
            && (run.close
                || run.watchdog.is_some()
                || run.max_runtime.is_some()
                || run.evict_after.is_some()))
        // COMMAND and -c, or neither.
        || (run.shell_command.is_some() != run.command.is_empty());
    (!conflicting).then_some(run)
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use proptest::prelude::*;

    use super::*;
    use crate::args::{Cli, Command};

    /// clap's answer for `lockfile run ARGS`, as the Debug text of its
    /// arguments, or `None` for an error.
    fn clap(args: &[&str]) -> Option<String> {
        let argv = ["lockfile", "run"].iter().chain(args);
        match Cli::try_parse_from(argv) {
            Ok(Cli {
                command: Command::Run(run),
                log_format: None,
            }) => Some(format!("{run:?}")),
            _ => None,
        }
    }

    fn plain(args: &[&str]) -> Option<String> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        parse_run(&args).map(|run| format!("{run:?}"))
    }

    /// Skips out loud where the environment changes what clap parses.
    fn environment_is_clean() -> bool {
        let set: Vec<&str> = ["LOCKFILE_LOG_FORMAT", "LOCKFILE_METRICS_DIR"]
            .into_iter()
            .filter(|var| std::env::var_os(var).is_some())
            .collect();
        if !set.is_empty() {
            eprintln!("skipped: {set:?} set in the environment; unset them to run this test");
        }
        set.is_empty()
    }

    #[test]
    fn plain_runs_are_parsed_as_clap_parses_them() {
        if !environment_is_clean() {
            return;
        }
        for args in [
            &["job.lock", "true"][..],
            &["-n", "job.lock", "backup", "--full", "-x"],
            &["-w", "5", "job.lock", "true"],
            &["-w5", "job.lock", "true"],
            &["--wait=1h30m", "--job", "nightly", "job.lock", "true"],
            &["--timeout", "0.5", "-E", "1", "job.lock", "true"],
            &["-nsq", "-E0", "job.lock", "--", "true"],
            &["-c", "echo hi; exit 3", "job.lock"],
            &["-cexit 3", "job.lock"],
            &["--command=echo", "--", "-odd.lock"],
            &["--", "-odd.lock", "-x", "true"],
            &[
                "-x",
                "--heartbeat",
                "1m",
                "--kill-after",
                "0",
                "job.lock",
                "true",
            ],
            &["--watchdog", "2", "--max-runtime", "1h", "job.lock", "true"],
            &[
                "--evict-after",
                "90s",
                "--metrics-dir",
                "/m",
                "job.lock",
                "true",
            ],
            &["-F", "--verbose", "job.lock", "true"],
            &[
                "--flock-compat",
                "-E",
                "1",
                "-n",
                "-o",
                "job.lock",
                "--",
                "a",
            ],
            &["--nb", "job.lock", "true"],
            &["--nonblocking", "--close", "job.lock", "true"],
            &["--job=-dash", "job.lock", "true"],
        ] {
            let ours = plain(args);
            assert!(ours.is_some(), "{args:?} is a plain run");
            assert_eq!(ours, clap(args), "{args:?}");
        }
    }

    #[test]
    fn anything_else_is_left_to_clap() {
        for args in [
            &[][..],
            &["job.lock"],
            &["--help"],
            &["-h", "job.lock", "true"],
            &["--ping", "http://h/p", "job.lock", "true"],
            &["--etcd", "http://h:2379", "job", "true"],
            &["--log-format", "json", "job.lock", "true"],
            &["-u", "3"],
            &["3"],
            &["-n", "-n", "job.lock", "true"],
            &["-n", "-w", "5", "job.lock", "true"],
            &["-s", "-x", "job.lock", "true"],
            &["-s", "--watchdog", "5", "job.lock", "true"],
            &["-F", "-o", "job.lock", "true"],
            &["-c", "true", "job.lock", "false"],
            &["-w", "soon", "job.lock", "true"],
            &["-w", "-5", "job.lock", "true"],
            &["-w=5", "job.lock", "true"],
            &["--heartbeat", "0", "job.lock", "true"],
            &["-E", "256", "job.lock", "true"],
            &["-E", "+1", "job.lock", "true"],
            &["--job=", "job.lock", "true"],
            &["--verbose=yes", "job.lock", "true"],
            &["job.lock", "-n", "true"],
            &["--", "job.lock", "--", "true"],
            &["-", "true"],
            &["", "true"],
        ] {
            assert_eq!(plain(args), None, "{args:?}");
        }
    }

    /// The words a command line is made of, for the property below: every
    /// option, good and bad values, and words that look like options.
    const WORDS: &[&str] = &[
        "-n",
        "-w",
        "-s",
        "-x",
        "-e",
        "-F",
        "-o",
        "-E",
        "-c",
        "-q",
        "-u",
        "-h",
        "-nq",
        "-sn",
        "-w5",
        "-E1",
        "-E=1",
        "-cx",
        "-nw",
        "--nonblock",
        "--nb",
        "--nonblocking",
        "--wait",
        "--timeout",
        "--wait=2",
        "--shared",
        "--exclusive",
        "--no-fork",
        "--verbose",
        "--flock-compat",
        "--close",
        "--conflict-exit-code",
        "--conflict-exit-code=9",
        "--job",
        "--job=j",
        "--job=-j",
        "--heartbeat",
        "--heartbeat=0",
        "--watchdog",
        "--max-runtime",
        "--kill-after",
        "--evict-after",
        "--command",
        "--command=",
        "--metrics-dir",
        "--quiet",
        "--ping",
        "--etcd",
        "--ttl",
        "--unlock",
        "--",
        "-",
        "",
        "5",
        "0",
        "1.5",
        "90s",
        "1h30m",
        "soon",
        "-5",
        "256",
        "007",
        "job.lock",
        "true",
        "echo",
        "3",
    ];

    /// Options with their values, good and bad, for the second property:
    /// command lines shaped like a run's, most of them plain.
    const OPTIONS: &[&[&str]] = &[
        &["-n"],
        &["-s"],
        &["-x"],
        &["-e"],
        &["-F"],
        &["-o"],
        &["-q"],
        &["--verbose"],
        &["--flock-compat"],
        &["--close"],
        &["--quiet"],
        &["-w", "5"],
        &["-w", "0"],
        &["-w0.25"],
        &["--wait=90s"],
        &["--timeout", "1h30m"],
        &["-w", "soon"],
        &["-E", "1"],
        &["-E007"],
        &["-E", "256"],
        &["--conflict-exit-code=0"],
        &["--job", "nightly"],
        &["--job=-j"],
        &["--job", "-j"],
        &["--heartbeat", "1m"],
        &["--heartbeat", "0"],
        &["--watchdog", "5"],
        &["--max-runtime=2h"],
        &["--kill-after", "0"],
        &["--evict-after", "90"],
        &["--metrics-dir", "/m"],
        &["--metrics-dir="],
        &["-c", "exit 3"],
        &["--command=true"],
        &["-nq"],
        &["-sw", "2"],
        &["-ow1"],
        &["-u"],
        &["--ping", "http://h/p"],
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// The same for command lines shaped like a run's.
        #[test]
        fn the_plain_parser_agrees_with_clap_on_runs(
            options in proptest::collection::vec(0..OPTIONS.len(), 0..5),
            dashes in any::<bool>(),
            lockfile in prop::sample::select(&["job.lock", "-odd", "3", "--"][..]),
            command in proptest::collection::vec(0..WORDS.len(), 0..3),
        ) {
            prop_assume!(environment_is_clean());
            let mut args: Vec<&str> = options.iter().flat_map(|&i| OPTIONS[i].iter().copied()).collect();
            if dashes {
                args.push("--");
            }
            args.push(lockfile);
            args.extend(command.iter().map(|&i| WORDS[i]));
            if let Some(ours) = plain(&args) {
                prop_assert_eq!(Some(ours), clap(&args), "{:?}", args);
            }
        }

        /// Whatever the command line, the plain parser either defers or
        /// agrees with clap, field for field.
        #[test]
        fn the_plain_parser_agrees_with_clap_or_defers(
            picks in proptest::collection::vec(0..WORDS.len(), 0..7)
        ) {
            prop_assume!(environment_is_clean());
            let args: Vec<&str> = picks.iter().map(|&i| WORDS[i]).collect();
            if let Some(ours) = plain(&args) {
                prop_assert_eq!(Some(ours), clap(&args), "{:?}", args);
            }
        }
    }
}
