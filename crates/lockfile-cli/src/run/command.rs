//! COMMAND: what `run` starts, under a file lock or a lease alike. Its
//! program and arguments, the job name it gives the owner record, and
//! starting it.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::Command;

use rustix::process::Pid;

use crate::cli::RunArgs;
use crate::exit;
use crate::run::signals::BlockedSignals;

/// COMMAND, or `sh -c SHELL_COMMAND` (`$SHELL -c`, falling back to
/// `/bin/sh`, in the flock(1) personality, as flock(1) does). The caller
/// has made sure that there is one.
pub(crate) fn command_line(args: &RunArgs) -> (OsString, Vec<OsString>) {
    match &args.shell_command {
        Some(script) if args.flock_compat => {
            let shell = std::env::var_os("SHELL")
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "/bin/sh".into());
            (shell, vec!["-c".into(), script.into()])
        }
        Some(script) => ("sh".into(), vec!["-c".into(), script.into()]),
        None => (args.command[0].clone(), args.command[1..].to_vec()),
    }
}

pub(crate) fn job_name(program: &OsString) -> String {
    Path::new(program)
        .file_name()
        .unwrap_or(program)
        .to_string_lossy()
        .into_owned()
}

/// Gives `cmd` the hold's environment `env`. A slot's number comes only
/// from this run's own hold: one inherited from an outer `--slots` run
/// would name a slot this run does not hold.
pub(crate) fn set_env(cmd: &mut Command, env: &[(&str, OsString)]) {
    for (key, value) in env {
        cmd.env(key, value);
    }
    if !env.iter().any(|(key, _)| *key == "LOCKFILE_SLOT") {
        cmd.env_remove("LOCKFILE_SLOT");
    }
}

/// Spawns COMMAND with the signal mask we had before blocking, and with
/// `die_with_parent`, SIGKILLed by the kernel should this process die.
/// Errors map to the shell's statuses: 127 not found, 126 not executable.
///
/// Through std's `Command`, which resets SIGPIPE to its default in the
/// child; [`BlockedSignals::prepare_child`] adds what has no other home.
pub(crate) fn spawn(
    signals: &BlockedSignals,
    program: &OsString,
    args: &[OsString],
    env: &[(&str, OsString)],
    die_with_parent: bool,
) -> Result<Pid, (i32, String)> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    // Empty: the environment is the one inherited (the keeper's COMMAND,
    // whose environment the wrapper set when it spawned the keeper).
    if !env.is_empty() {
        set_env(&mut cmd, env);
    }
    signals.prepare_child(
        &mut cmd,
        die_with_parent.then_some(rustix::process::Signal::KILL),
    );
    let child = cmd.spawn().map_err(|e| {
        let code = match e.kind() {
            io::ErrorKind::NotFound => exit::NOT_FOUND,
            _ => exit::NOT_EXECUTABLE,
        };
        (
            code,
            format!(
                "cannot run `{}`: {e}",
                crate::term::path(Path::new(program))
            ),
        )
    })?;
    // std's Child is not waited on: `supervise` reaps it with waitpid.
    let pid = i32::try_from(child.id()).ok().and_then(Pid::from_raw);
    Ok(pid.expect("a child has a positive pid"))
}
