//! Python's `filelock`, driven from here so that it takes its turn in the
//! same shuffled rounds as everything else.
//!
//! One interpreter runs for the whole program; each batch is a line on its
//! stdin, and it answers with the nanoseconds the batch took, timed inside
//! Python. Interpreter start-up and the pipe are not part of the figure.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{Context, Result, bail};

/// The lock object is made once and acquired and released in the loop, the
/// cheapest way to use it; `with FileLock(path):` would also construct one
/// per cycle.
const SCRIPT: &str = r#"
import sys, time
try:
    import filelock
except ImportError:
    print("missing", flush=True)
    sys.exit(0)
lock = filelock.FileLock(sys.argv[1])
print("ready " + getattr(filelock, "__version__", "?"), flush=True)
for line in sys.stdin:
    n = int(line)
    start = time.perf_counter_ns()
    for _ in range(n):
        lock.acquire()
        lock.release()
    print(time.perf_counter_ns() - start, flush=True)
"#;

#[derive(Debug)]
pub(crate) struct PythonFileLock {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub(crate) version: String,
}

/// Why Python's filelock is not measured, when it is not.
pub(crate) type Missing = String;

impl PythonFileLock {
    /// Starts the interpreter, or says why Python's filelock cannot be
    /// measured on this machine.
    pub(crate) fn start(lock_path: &Path) -> std::result::Result<PythonFileLock, Missing> {
        let spawned = Command::new("python3")
            .arg("-c")
            .arg(SCRIPT)
            .arg(lock_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => return Err(format!("skipped: python3 not found ({e})")),
        };
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        match line.trim().strip_prefix("ready ") {
            Some(version) => Ok(PythonFileLock {
                version: version.to_owned(),
                child,
                stdin,
                stdout,
            }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err("skipped: Python filelock not installed (pip install filelock)".to_owned())
            }
        }
    }

    /// Runs `n` acquire + release cycles; returns the nanoseconds they took.
    pub(crate) fn run(&mut self, n: usize) -> Result<f64> {
        writeln!(self.stdin, "{n}").context("python filelock: write")?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .context("python filelock: read")?;
        match line.trim().parse() {
            Ok(ns) => Ok(ns),
            Err(_) => bail!("python filelock: unexpected answer {line:?}"),
        }
    }
}

impl Drop for PythonFileLock {
    fn drop(&mut self) {
        // End of input ends the loop; the interpreter exits.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
