//! Helpers shared by the command's test binaries.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The longest a test waits for a wrapper that should end by itself.
const PATIENCE: Duration = Duration::from_secs(60);

/// The signals `lockfile run` forwards to COMMAND.
pub(crate) const FORWARDED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The command under test, started with SIGINT, SIGTERM and SIGHUP at their
/// default disposition whatever the test runner inherited: a runner started
/// in the background of a script ignores SIGINT, and the wrapper (rightly)
/// passes an ignored signal on to COMMAND as ignored.
pub(crate) fn lockfile() -> Command {
    with_signals(
        Command::new(env!("CARGO_BIN_EXE_lockfile")),
        &FORWARDED,
        libc::SIG_DFL,
    )
}

/// Makes `cmd` start with `signals` set to `disposition` (SIG_DFL or SIG_IGN).
pub(crate) fn with_signals(
    mut cmd: Command,
    signals: &[i32],
    disposition: libc::sighandler_t,
) -> Command {
    let signals = signals.to_vec();
    // SAFETY: the closure runs in the forked child before exec and only
    // calls signal(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            for &sig in &signals {
                if libc::signal(sig, disposition) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd
}

pub(crate) fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Sends `kill -SIG` to `pid`.
pub(crate) fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

/// A `lockfile run` in the background, killed when dropped.
pub(crate) struct Background {
    pub(crate) child: Child,
}

impl Background {
    /// Starts `lockfile run ARGS`; its COMMAND prints a line first, once it
    /// runs, which is returned.
    pub(crate) fn spawn(args: &[&str]) -> (Background, String) {
        let mut cmd = lockfile();
        cmd.arg("run").args(args);
        Background::start(cmd)
    }

    /// Starts `cmd`, a `lockfile run`, as [`Background::spawn`] does.
    pub(crate) fn start(mut cmd: Command) -> (Background, String) {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(!line.is_empty(), "the command did not start");
        (Background { child }, line.trim().to_owned())
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn signal(&self, sig: &str) {
        signal(self.pid(), sig);
    }

    /// Waits for the wrapper only, not for the pipes it shares with COMMAND.
    pub(crate) fn reap(mut self) -> i32 {
        self.exit_status().code().unwrap_or(-1)
    }

    /// Waits for the wrapper, and returns its status and its stderr.
    pub(crate) fn wait(mut self) -> (i32, String) {
        let status = self.exit_status();
        let mut err = String::new();
        std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut err).unwrap();
        (status.code().unwrap_or(-1), err)
    }
}

impl Background {
    /// The wrapper's status; a wrapper that is still running after
    /// [`PATIENCE`] fails the test (and is killed by `drop`) instead of
    /// hanging it.
    fn exit_status(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "`lockfile run` (pid {}) still runs after {PATIENCE:?}",
                self.pid()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
