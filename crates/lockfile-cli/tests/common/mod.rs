//! Helpers shared by the command's test binaries.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

pub(crate) fn lockfile() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockfile"))
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
        let mut child = lockfile()
            .arg("run")
            .args(args)
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
        self.child.wait().unwrap().code().unwrap_or(-1)
    }

    /// Waits for the wrapper, and returns its status and its stderr.
    pub(crate) fn wait(mut self) -> (i32, String) {
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut err).unwrap();
        (status.code().unwrap_or(-1), err)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
