//! A child process as this program drives it: commands on its stdin, one
//! answer line each on its stdout, read by a thread of its own so that an
//! answer that never comes fails the run instead of hanging it.

use std::ffi::OsStr;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child as Process, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use crate::sys::mono_ns;

/// How long any answer may take: far beyond any wait measured here.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub(crate) struct Child {
    process: Process,
    stdin: ChildStdin,
    lines: Receiver<String>,
    role: String,
}

impl Child {
    /// Starts `exe --child ROLE ARGS...`.
    pub(crate) fn start(exe: &Path, role: &str, args: &[&OsStr]) -> Result<Child> {
        let mut process = Command::new(exe)
            .arg("--child")
            .arg(role)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start the {role}"))?;
        let stdin = process.stdin.take().expect("piped");
        let stdout = BufReader::new(process.stdout.take().expect("piped"));
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Child {
            process,
            stdin,
            lines,
            role: role.to_owned(),
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.process.id()
    }

    /// Sends one command (its fields joined by tabs).
    pub(crate) fn send(&mut self, fields: &[&str]) -> Result<()> {
        writeln!(self.stdin, "{}", fields.join("\t"))?;
        Ok(self.stdin.flush()?)
    }

    /// The next answer.
    pub(crate) fn answer(&self) -> Result<String> {
        match self.lines.recv_timeout(ANSWER_WITHIN) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => {
                bail!("the {} did not answer within {ANSWER_WITHIN:?}", self.role)
            }
            Err(RecvTimeoutError::Disconnected) => {
                bail!("the {} ended (its error is above)", self.role)
            }
        }
    }

    /// Sends one command and reads its answer.
    pub(crate) fn ask(&mut self, fields: &[&str]) -> Result<String> {
        self.send(fields)?;
        self.answer()
    }

    /// Sends one command and expects `want` back.
    pub(crate) fn expect(&mut self, fields: &[&str], want: &str) -> Result<()> {
        let answer = self.ask(fields)?;
        if answer != want {
            bail!("the {} answered {answer:?} to {fields:?}", self.role);
        }
        Ok(())
    }

    /// Stamps CLOCK_MONOTONIC, SIGKILLs the child and reaps it; returns the
    /// stamp.
    pub(crate) fn kill(mut self) -> Result<u64> {
        let at = mono_ns();
        self.process.kill()?;
        self.process.wait()?;
        Ok(at)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
