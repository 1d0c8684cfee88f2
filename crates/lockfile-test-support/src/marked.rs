//! A child process that says what it does on stdout, one line each,
//! marked `@@` (so that libtest's own lines, in a test binary run again as
//! the child, are told apart): its lines read as they come, and waited for.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};

/// How long a line may take: far above what any of them takes.
const PATIENCE: Duration = Duration::from_secs(60);

/// A child process whose `@@` lines are read; continued (if stopped),
/// killed and reaped when dropped.
pub struct Marked {
    child: Child,
    lines: Receiver<String>,
    /// A line starting with one of these fails the test that reads it.
    fatal: &'static [&'static str],
    /// Every line read so far, without its mark.
    pub seen: Vec<String>,
}

impl Marked {
    /// Starts `command` with its stdout read here (stdin null, stderr
    /// inherited). A line that starts with one of `fatal` fails the test
    /// when it is read.
    pub fn spawn(mut command: Command, fatal: &'static [&'static str]) -> Marked {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a child process");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(line) = line.strip_prefix("@@")
                    && tx.send(line.to_owned()).is_err()
                {
                    break;
                }
            }
        });
        Marked {
            child,
            lines,
            fatal,
            seen: Vec::new(),
        }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_child(&self.child)
    }

    /// Sends `signal` to the child.
    pub fn signal(&self, signal: Signal) {
        kill_process(self.pid(), signal).expect("signal the child");
    }

    /// The next line, kept in `seen`.
    pub fn next_line(&mut self) -> String {
        let line = self
            .lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("no line from the child ({e}); seen: {:#?}", self.seen));
        self.seen.push(line.clone());
        assert!(
            !self.fatal.iter().any(|fatal| line.starts_with(fatal)),
            "{line}; seen: {:#?}",
            self.seen
        );
        line
    }

    /// The next line starting with `what`, keeping every line seen.
    pub fn expect(&mut self, what: &str) -> String {
        loop {
            let line = self.next_line();
            if line.starts_with(what) {
                return line;
            }
        }
    }

    /// The lines that came so far, without waiting.
    pub fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
    }
}

impl Drop for Marked {
    fn drop(&mut self) {
        let _ = kill_process(self.pid(), Signal::CONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
