//! The `flock` personality: util-linux flock(1)'s command line, for a binary
//! invoked as `flock` (a symlink or a hard link) or as `lockfile flock ARGS`.
//! It is parsed as flock(1) parses it (getopt's `+sexnoFuw:E:hV`, long
//! options, `-c` after the file), then handed to `lockfile run` with the
//! `flock_compat` behaviour: flock(1)'s exit statuses and its silence.
//!
//! Also the descriptor form that both faces share: `lockfile run N` and
//! `flock N` lock (or with `-u` unlock) descriptor N of the calling shell.

pub(crate) mod descriptor;

#[cfg(test)]
mod tests;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use crate::exit;

pub(crate) use descriptor::Descriptor;

/// `flock ARGS` (ARGS without the program name). A run goes to `run`, as
/// the arguments of `lockfile run` that it translates into.
pub(crate) fn main(args: Vec<OsString>, run: impl FnOnce(Vec<OsString>) -> i32) -> i32 {
    match translate(&args) {
        Ok(Invocation::Run(run_args)) => run(run_args),
        Ok(Invocation::Descriptor(d)) => d.run("flock"),
        Ok(Invocation::Exit(code)) => code,
        Err(message) => usage(&message),
    }
}

/// Says flock(1)'s way that the command line is wrong; returns EX_USAGE.
pub(crate) fn usage(message: &str) -> i32 {
    let first = message.lines().next().unwrap_or(message);
    errln!("flock: {}", first.trim_start_matches("error: "));
    errln!("Try 'flock --help' for more information.");
    exit::USAGE
}

enum Invocation {
    /// `lockfile run` arguments.
    Run(Vec<OsString>),
    Descriptor(Descriptor),
    /// `--help` or `--version`, already printed.
    Exit(i32),
}

/// Parses flock(1)'s command line, as its getopt does: options up to the
/// first argument that is not one (`+`), bundled short options, an attached
/// or separate value for `-w` and `-E`, `--long=value`.
fn translate(args: &[OsString]) -> Result<Invocation, String> {
    if args.is_empty() {
        return Err("not enough arguments".to_owned());
    }
    let mut o = Options::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_bytes();
        if arg == b"--" {
            i += 1;
            break;
        }
        if let Some(long) = arg.strip_prefix(b"--") {
            let (name, inline) = match long.iter().position(|&b| b == b'=') {
                Some(eq) => (&long[..eq], Some(&long[eq + 1..])),
                None => (long, None),
            };
            let name = String::from_utf8_lossy(name).into_owned();
            let takes_value = matches!(name.as_str(), "timeout" | "wait" | "conflict-exit-code");
            let value = if takes_value {
                match inline {
                    Some(v) => Some(v.to_vec()),
                    None => {
                        i += 1;
                        Some(
                            args.get(i)
                                .ok_or(format!("option '--{name}' requires an argument"))?
                                .as_bytes()
                                .to_vec(),
                        )
                    }
                }
            } else {
                None
            };
            match name.as_str() {
                "shared" => o.shared = true,
                "exclusive" => o.shared = false,
                "unlock" => o.unlock = true,
                "nonblocking" | "nonblock" | "nb" => o.nonblock = true,
                "timeout" | "wait" => o.wait = Some(seconds(&value.unwrap_or_default())?),
                "conflict-exit-code" => o.conflict = exit_code(&value.unwrap_or_default())?,
                "close" => o.close = true,
                "no-fork" => o.no_fork = true,
                "verbose" => o.verbose = true,
                "help" => return Ok(Invocation::Exit(help())),
                "version" => {
                    outln!("flock from lockfile {}", env!("CARGO_PKG_VERSION"));
                    return Ok(Invocation::Exit(0));
                }
                _ => return Err(format!("unrecognized option '--{name}'")),
            }
            i += 1;
            continue;
        }
        let Some(shorts) = arg.strip_prefix(b"-").filter(|s| !s.is_empty()) else {
            break;
        };
        let mut j = 0;
        while j < shorts.len() {
            match shorts[j] {
                b's' => o.shared = true,
                b'x' | b'e' => o.shared = false,
                b'u' => o.unlock = true,
                b'n' => o.nonblock = true,
                b'o' => o.close = true,
                b'F' => o.no_fork = true,
                b'h' | b'?' => return Ok(Invocation::Exit(help())),
                b'V' => {
                    outln!("flock from lockfile {}", env!("CARGO_PKG_VERSION"));
                    return Ok(Invocation::Exit(0));
                }
                c @ (b'w' | b'E') => {
                    let value = if j + 1 < shorts.len() {
                        shorts[j + 1..].to_vec()
                    } else {
                        i += 1;
                        args.get(i)
                            .ok_or(format!("option requires an argument -- '{}'", c as char))?
                            .as_bytes()
                            .to_vec()
                    };
                    if c == b'w' {
                        o.wait = Some(seconds(&value)?);
                    } else {
                        o.conflict = exit_code(&value)?;
                    }
                    j = shorts.len();
                    continue;
                }
                c => return Err(format!("invalid option -- '{}'", c as char)),
            }
            j += 1;
        }
        i += 1;
    }
    if o.no_fork && o.close {
        return Err("the --no-fork and --close options are incompatible".to_owned());
    }
    let rest = &args[i..];
    if o.unlock && rest.len() > 1 {
        // flock(1) would unlock a descriptor it just opened (a no-op) and run
        // the command unlocked: surely not what was meant.
        return Err(
            "-u unlocks a descriptor (flock -u N); with a file and a command it would lock nothing"
                .to_owned(),
        );
    }
    match rest {
        [] => Err("requires file descriptor, file or directory".to_owned()),
        [fd] => {
            let fd = std::str::from_utf8(fd.as_bytes())
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
                .ok_or_else(|| format!("bad file descriptor: '{}'", fd.to_string_lossy()))?;
            Ok(Invocation::Descriptor(Descriptor {
                fd,
                shared: o.shared,
                unlock: o.unlock,
                wait: if o.nonblock {
                    Some(Duration::ZERO)
                } else {
                    o.wait
                },
                conflict: o.conflict,
                verbose: o.verbose,
            }))
        }
        [file, flag, rest @ ..] if flag == "-c" || flag == "--command" => {
            let [command] = rest else {
                return Err(format!(
                    "{} requires exactly one command argument",
                    flag.to_string_lossy()
                ));
            };
            let mut run = o.run_args();
            run.extend([file.clone(), "-c".into(), command.clone()]);
            Ok(Invocation::Run(reorder_c(run)))
        }
        [file, command @ ..] => {
            let mut run = o.run_args();
            run.push(file.clone());
            run.push("--".into());
            run.extend(command.iter().cloned());
            Ok(Invocation::Run(run))
        }
    }
}

/// `lockfile run` takes `-c STRING` as an option before the lock file.
fn reorder_c(mut run: Vec<OsString>) -> Vec<OsString> {
    let command = run.pop().expect("the command");
    run.pop(); // "-c"
    let file = run.pop().expect("the file");
    run.extend(["-c".into(), command, file]);
    run
}

#[derive(Default)]
struct Options {
    shared: bool,
    unlock: bool,
    nonblock: bool,
    wait: Option<Duration>,
    conflict: Option<u8>,
    close: bool,
    no_fork: bool,
    verbose: bool,
}

impl Options {
    fn run_args(&self) -> Vec<OsString> {
        let mut run: Vec<OsString> = vec!["--flock-compat".into()];
        run.extend(["-E".into(), self.conflict.unwrap_or(1).to_string().into()]);
        // flock(1) takes -n and -w together: -n wins.
        match (self.nonblock, self.wait) {
            (true, _) => run.push("-n".into()),
            (false, Some(w)) => run.extend(["-w".into(), format!("{}", w.as_secs_f64()).into()]),
            (false, None) => {}
        }
        for (set, flag) in [
            (self.shared, "-s"),
            (self.close, "-o"),
            (self.no_fork, "-F"),
            (self.verbose, "--verbose"),
        ] {
            if set {
                run.push(flag.into());
            }
        }
        run
    }
}

fn seconds(value: &[u8]) -> Result<Duration, String> {
    let text = String::from_utf8_lossy(value);
    crate::cli::duration::parse(&text).map_err(|_| format!("invalid timeout value: '{text}'"))
}

fn exit_code(value: &[u8]) -> Result<Option<u8>, String> {
    let text = String::from_utf8_lossy(value);
    match text.trim().parse::<i64>() {
        Ok(n) if (0..=255).contains(&n) => Ok(Some(n as u8)),
        Ok(_) => Err("exit code out of range (expected 0 to 255)".to_owned()),
        Err(_) => Err(format!("invalid exit code: '{text}'")),
    }
}

/// `--help`: printed from the personality's description, the one the man
/// page is made from.
fn help() -> i32 {
    outln!("{}", crate::cli::flock::command().render_help());
    0
}

/// Whether `lockfile` was invoked as `flock`.
pub(crate) fn invoked_as_flock(argv0: &OsStr) -> bool {
    std::path::Path::new(argv0).file_name() == Some(OsStr::new("flock"))
}
