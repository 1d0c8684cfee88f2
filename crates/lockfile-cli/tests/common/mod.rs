//! Helpers shared by the command's test binaries.

#![allow(dead_code)]

pub(crate) mod cron_daemon;
pub(crate) mod dead_wrapper;
pub(crate) mod fenced;
pub(crate) mod hung_lease;
pub(crate) mod json_doc;
pub(crate) mod lease_faults;
pub(crate) mod lease_run;
pub(crate) mod lease_slots;
pub(crate) mod ping;
pub(crate) mod prometheus;
pub(crate) mod ticks;

pub(crate) use lockfile_test_support::wait::{PATIENCE, wait_until};

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The signals `lockfile run` forwards to COMMAND.
pub(crate) const FORWARDED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// A shell loop for COMMAND that runs a minute at most, sleeping in short
/// steps so that the shell runs its traps promptly: a test that fails never
/// leaves a process behind for long.
pub(crate) const LOOP: &str = "for i in $(seq 1200); do sleep 0.05; done";

/// The command under test, started with SIGINT, SIGTERM, SIGHUP and SIGCHLD
/// at their default disposition and nothing blocked, whatever the test
/// runner inherited: a runner started in the background of a script
/// ignores SIGINT, and the wrapper (rightly) passes an ignored signal on to
/// COMMAND as ignored.
pub(crate) fn lockfile() -> Command {
    in_a_standard_state(Command::new(env!("CARGO_BIN_EXE_lockfile")))
}

/// `cmd`, started as [`lockfile`] starts the command under test.
pub(crate) fn in_a_standard_state(mut cmd: Command) -> Command {
    // SAFETY: the closure runs in the forked child before exec and only
    // calls sigemptyset and pthread_sigmask, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            match libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) {
                0 => Ok(()),
                rc => Err(std::io::Error::from_raw_os_error(rc)),
            }
        });
    }
    let mut signals = FORWARDED.to_vec();
    signals.push(libc::SIGCHLD);
    with_signals(cmd, &signals, libc::SIG_DFL)
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

/// Fails the test, saying why, unless it runs as root. Tests that need root
/// are also ignored (`needs root: ...`), so this fails only a test run on
/// purpose, with `--ignored` or `--include-ignored`, without root.
pub(crate) fn require_root(what: &str) {
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "this test needs root ({what}): run it as root");
}

pub(crate) fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Sends SIG`name` (`"TERM"`, `"KILL"`, ...) to `pid`.
pub(crate) fn signal(pid: u32, name: &str) {
    let pid = libc::pid_t::try_from(pid).unwrap();
    kill(pid, name);
}

/// Sends SIG`name` to every process of the process group `pgid`.
pub(crate) fn signal_group(pgid: u32, name: &str) {
    let pgid = libc::pid_t::try_from(pgid).unwrap();
    kill(-pgid, name);
}

fn kill(pid: libc::pid_t, name: &str) {
    let sig = match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "TERM" => libc::SIGTERM,
        "KILL" => libc::SIGKILL,
        "STOP" => libc::SIGSTOP,
        "CONT" => libc::SIGCONT,
        _ => panic!("no signal named {name} here"),
    };
    // SAFETY: kill(2) takes plain integers.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(
        rc,
        0,
        "kill -{name} {pid}: {}",
        std::io::Error::last_os_error()
    );
}

/// A `lockfile run` in the background, in a process group of its own, which
/// dropping it SIGKILLs whole. Its output goes to files rather than pipes:
/// a process that COMMAND left behind can never make reading it block.
pub(crate) struct Background {
    child: Child,
    stdout: File,
    stderr: File,
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
        let (child, stdout, stderr) = spawn_writing_to_files(cmd.process_group(0));
        let mut run = Background {
            child,
            stdout,
            stderr,
        };
        let line = run.first_line();
        (run, line)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn signal(&self, sig: &str) {
        signal(self.pid(), sig);
    }

    /// Waits for the wrapper only, not for what COMMAND left behind, which
    /// lives on until this is dropped.
    pub(crate) fn reap(&mut self) -> i32 {
        self.exit_status().code().unwrap_or(-1)
    }

    /// Waits for the wrapper, and returns its status and its stderr; what
    /// COMMAND left behind lives on until this is dropped.
    pub(crate) fn wait(&mut self) -> (i32, String) {
        let status = self.exit_status();
        (status.code().unwrap_or(-1), contents(&self.stderr))
    }

    /// Everything the wrapper has written to stderr so far.
    pub(crate) fn stderr_so_far(&self) -> String {
        contents(&self.stderr)
    }

    /// The wrapper's exit status once it has exited, without waiting.
    pub(crate) fn try_code(&mut self) -> Option<i32> {
        let status = self.child.try_wait().unwrap()?;
        Some(status.code().unwrap_or(-1))
    }

    /// COMMAND's first line of output; a COMMAND that never prints one fails
    /// the test, saying what the wrapper and its processes were doing.
    fn first_line(&mut self) -> String {
        let start = Instant::now();
        loop {
            if let Some((line, _)) = contents(&self.stdout).split_once('\n') {
                return line.trim().to_owned();
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "the command did not start: `lockfile run` ended ({status}): {}",
                    contents(&self.stderr)
                );
            }
            assert!(
                start.elapsed() < PATIENCE,
                "the command printed nothing in {PATIENCE:?}; {}",
                self.diagnosis()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The wrapper's status; a wrapper that is still running after
    /// [`PATIENCE`] fails the test instead of hanging it.
    fn exit_status(&mut self) -> ExitStatus {
        match wait_within_patience(&mut self.child) {
            Some(status) => status,
            None => panic!(
                "`lockfile run` still runs after {PATIENCE:?}; {}",
                self.diagnosis()
            ),
        }
    }

    /// What a failure message needs: the wrapper's stderr, and the state and
    /// signal masks of every process in its group.
    fn diagnosis(&self) -> String {
        let mut text = format!("its stderr: {:?}", contents(&self.stderr));
        for pid in group_members(self.pid()) {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let fields: Vec<&str> = status
                .lines()
                .filter(|l| {
                    [
                        "Name:", "State:", "PPid:", "SigPnd:", "ShdPnd:", "SigBlk:", "SigIgn:",
                    ]
                    .iter()
                    .any(|f| l.starts_with(f))
                })
                .collect();
            text.push_str(&format!("\n  pid {pid}: {}", fields.join(" ")));
        }
        text
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // The whole group: COMMAND and anything it started, not only the
        // wrapper. The group outlives the wrapper while any of them lives,
        // so its id cannot have been reused meanwhile.
        let group = libc::pid_t::try_from(self.pid()).unwrap();
        // SAFETY: kill(2) takes plain integers.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = wait_within_patience(&mut self.child);
    }
}

/// `Command::output`, bounded.
pub(crate) trait BoundedOutput {
    /// Runs the command to its end, as `output()` does, except that one
    /// still running after [`PATIENCE`] fails the test (and is killed)
    /// instead of hanging it, and that its output goes to files: a process
    /// it left behind cannot keep the read waiting.
    fn bounded_output(&mut self) -> Output;
}

impl BoundedOutput for Command {
    fn bounded_output(&mut self) -> Output {
        let (mut child, stdout, stderr) = spawn_writing_to_files(self);
        let Some(status) = wait_within_patience(&mut child) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{self:?} still ran after {PATIENCE:?}; its stderr: {}",
                contents(&stderr)
            );
        };
        Output {
            status,
            stdout: bytes(&stdout),
            stderr: bytes(&stderr),
        }
    }
}

/// Spawns `cmd` with no stdin, its stdout and stderr going to anonymous
/// files, which are returned for reading.
fn spawn_writing_to_files(cmd: &mut Command) -> (Child, File, File) {
    let stdout = tempfile::tempfile().unwrap();
    let stderr = tempfile::tempfile().unwrap();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(stdout.try_clone().unwrap())
        .stderr(stderr.try_clone().unwrap())
        .spawn()
        .unwrap();
    (child, stdout, stderr)
}

/// `child`'s status, or `None` if it still runs after [`PATIENCE`].
pub(crate) fn wait_within_patience(child: &mut Child) -> Option<ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < PATIENCE {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// Everything written to `file` so far, read without moving its offset.
fn bytes(file: &File) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match file.read_at(&mut chunk, bytes.len() as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
        }
    }
    bytes
}

/// [`bytes`], as text.
fn contents(file: &File) -> String {
    String::from_utf8_lossy(&bytes(file)).into_owned()
}

/// The processes whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // The fifth field of /proc/PID/stat, after the parenthesised name.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let after_name = &stat[stat.rfind(')')? + 1..];
                    after_name.split_whitespace().nth(2)?.parse::<u32>().ok()
                })
                == Some(pgid)
        })
        .collect()
}

/// Runs the command to its end, bounded, output in files.
pub(crate) fn run_output(args: &[&str]) -> Output {
    lockfile().args(args).bounded_output()
}

/// A path as the `&str` an argument list takes.
pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A temporary directory for one test's files.
pub(crate) struct Dir {
    pub(crate) tmp: tempfile::TempDir,
}

impl Dir {
    pub(crate) fn new() -> Dir {
        Dir {
            tmp: tempfile::tempdir().unwrap(),
        }
    }
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }
}

/// `lockfile inspect --json EXTRA PATH`: its exit status and its JSON.
pub(crate) fn inspect_json(path: &Path, extra: &[&str]) -> (i32, serde_json::Value) {
    let out = lockfile()
        .args(["inspect", "--json"])
        .args(extra)
        .arg(path)
        .bounded_output();
    let value: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("inspect --json printed no JSON ({e}): {}", stderr(&out)));
    (code(&out), value)
}

/// Fails the test, saying what to install, unless util-linux flock(1) is
/// on the PATH.
pub(crate) fn require_flock() {
    let found = Command::new("flock").arg("--version").output().is_ok();
    assert!(
        found,
        "this test runs util-linux flock(1): install it (Debian: util-linux)"
    );
}

/// Starts `lockfile run EXTRA LOCK sh -c SCRIPT`, whose SCRIPT prints `ready`
/// first.
pub(crate) fn start(extra: &[&str], lock: &Path, script: &str) -> Background {
    let mut args = extra.to_vec();
    args.extend([s(lock), "sh", "-c", script]);
    let (run, line) = Background::spawn(&args);
    assert_eq!(line, "ready", "the command did not start");
    run
}

/// Copies the executable `from` to `to` through cp(1). A file that this
/// test process writes itself would be open for writing in every child
/// that another test's thread forks meanwhile, until that child execs: to
/// exec it then fails with ETXTBSY. cp's descriptor lives in cp alone.
pub(crate) fn copy_executable(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("--")
        .args([from, to])
        .status()
        .expect("run cp");
    assert!(status.success(), "cp {} {}", from.display(), to.display());
}

/// Writes `text` to a new executable file at `path`, through sh(1), for
/// the same reason as [`copy_executable`].
pub(crate) fn write_executable(path: &Path, text: &str) {
    use std::io::Write as _;
    let mut child = Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .expect("run sh");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "write {}", path.display());
}
