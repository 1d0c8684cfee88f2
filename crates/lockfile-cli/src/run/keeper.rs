//! The keeper: under a lease, COMMAND runs as the child of a small process
//! of ours between it and the wrapper, so that a wrapper killed by SIGKILL
//! does not leave COMMAND's tree running unleased.
//!
//! A dying wrapper can do nothing, and the kernel's parent-death signal
//! reaches only the dead process's own children: the daemon COMMAND
//! started, a child in a session of its own, live on, while the lease
//! lapses and another host takes it. The wrapper itself cannot be their
//! subreaper for this, since it is what dies; a PID namespace, which would
//! take them all with it, needs privileges a cron job lacks. So the wrapper
//! re-executes its own binary (`/proc/self/exe`, which names it even once
//! it was replaced on disk) with [`ARG`] as its first argument, a word no
//! parser or help text knows; that keeper makes itself the subreaper of
//! COMMAND's tree and spawns COMMAND. Should the wrapper die, the kernel
//! sends the keeper SIGURG (its parent-death signal, harmless if it comes
//! early), and the keeper SIGKILLs every descendant, verified through
//! pidfds, reaps them and repeats until none is left; one that SIGKILL
//! cannot end (uninterruptible sleep) is named on stderr.
//!
//! While the wrapper lives the keeper is not seen: the wrapper signals
//! COMMAND and the tree itself, as without it (the tree's walk leaves the
//! keeper out), and learns COMMAND's status through a pipe, whose write end
//! only the keeper holds (close-on-exec, so COMMAND never inherits it). The
//! keeper exits once COMMAND and every process it left behind have exited,
//! so that the wrapper's wait for leftovers is its wait for the keeper. It
//! blocks every signal but SIGKILL and SIGSTOP: a terminal's SIGINT,
//! SIGQUIT or SIGTSTP reaches its process group, and COMMAND's, as before.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use lockfile::process::ProcessHandle;
use rustix::process::{Pid, Signal, WaitOptions};

use crate::exit;
use crate::run::command;
use crate::run::signals::{BlockedSignals, ToForward};
use crate::run::tree;

/// The first argument that makes the binary a keeper: not an option, and in
/// no help text, man page or completion.
pub(crate) const ARG: &str = "__lockfile-keeper";

/// The keeper's parent-death signal: one whose default action is to be
/// ignored, since it may arrive before the keeper has blocked it (the
/// keeper then finds its parent gone by asking).
const WRAPPER_DIED: Signal = Signal::URG;

/// How long the keeper waits for the tree to die of SIGKILL before naming
/// the survivors: a process in uninterruptible sleep can outlive it for
/// long. Well within the shortest TTL, so that the line comes while the
/// lease still holds.
const SURVIVOR_WAIT: Duration = Duration::from_secs(1);

/// How often SIGKILL is repeated while the tree is dying, for processes
/// forked between two rounds.
const KILL_AGAIN: Duration = Duration::from_millis(10);

/// What the keeper tells the wrapper, one record each, in this order.
const STARTED: u8 = b'S';
const FAILED: u8 = b'F';
const EXITED: u8 = b'X';

/// The wrapper's side: its keeper, and COMMAND below it.
pub(crate) struct Keeper {
    pid: Pid,
    /// COMMAND, verified as the keeper's child; `None` once it was found
    /// gone before it could be looked at.
    command: Option<ProcessHandle>,
    report: File,
    unread: Vec<u8>,
}

/// The variables that may carry a lease engine's password, kept from
/// COMMAND: Redis's (redis-cli's password, and the URL, which may hold
/// one).
const SECRETS: [&str; 2] = ["REDISCLI_AUTH", "LOCKFILE_REDIS_URL"];

/// Spawns the keeper, which spawns COMMAND with `env`; returns once
/// COMMAND runs, or with its spawn error as [`command::spawn`] does.
pub(crate) fn spawn(
    signals: &BlockedSignals,
    program: &OsString,
    args: &[OsString],
    env: &[(&str, OsString)],
) -> Result<Keeper, (i32, String)> {
    let os_error = |e: io::Error| {
        (
            exit::OS_ERROR,
            format!("cannot start the process that keeps the command's tree: {e}"),
        )
    };
    let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| os_error(e.into()))?;
    let pipe_ino = rustix::fs::fstat(&writer)
        .map_err(|e| os_error(e.into()))?
        .st_ino;
    let wrapper = rustix::process::getpid();
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0("lockfile")
        .arg(ARG)
        .arg(writer.as_raw_fd().to_string())
        .arg(pipe_ino.to_string())
        .arg(wrapper.as_raw_nonzero().to_string())
        .arg(program)
        .args(args);
    crate::run::command::set_env(&mut cmd, env);
    // The engine's secrets are ours, not COMMAND's (nor the keeper's).
    for secret in SECRETS {
        cmd.env_remove(secret);
    }
    signals.prepare_child(&mut cmd, Some(WRAPPER_DIED));
    let fd = writer.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and only
    // calls fcntl(2), which is async-signal-safe, on a descriptor that is
    // open in the child (it is ours, and close-on-exec only until now).
    unsafe {
        cmd.pre_exec(move || {
            rustix::io::fcntl_setfd(
                std::os::fd::BorrowedFd::borrow_raw(fd),
                rustix::io::FdFlags::empty(),
            )?;
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(os_error)?;
    drop(writer);
    let pid = i32::try_from(child.id()).ok().and_then(Pid::from_raw);
    let pid = pid.expect("a child has a positive pid");
    // The stop sequence and forwarded signals are for COMMAND's tree.
    tree::set_keeper(pid);
    let mut keeper = Keeper {
        pid,
        command: None,
        report: File::from(reader),
        unread: Vec::new(),
    };
    // Until the keeper says COMMAND runs (or could not be run), its pipe is
    // read blocking: it writes one or the other at once, or dies (EOF).
    let started = keeper.read_record(true);
    match started {
        Ok(Some(Record::Started(command))) => {
            keeper.command = ProcessHandle::open(command)
                .ok()
                .filter(|h| h.parent() == Some(keeper.pid.as_raw_nonzero().get().unsigned_abs()));
            rustix::fs::fcntl_setfl(&keeper.report, rustix::fs::OFlags::NONBLOCK)
                .map_err(|e| os_error(e.into()))?;
            Ok(keeper)
        }
        Ok(Some(Record::Failed(code, message))) => {
            let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
            Err((code, message))
        }
        other => {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
            let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
            let why = match other {
                Err(e) => e.to_string(),
                _ => "it ended without a word".to_owned(),
            };
            Err(os_error(io::Error::other(why)))
        }
    }
}

/// One record from the keeper.
enum Record {
    Started(u32),
    Failed(i32, String),
    /// COMMAND's raw wait status, and whether it left nothing behind (the
    /// keeper then exits at once).
    Exited(i32, bool),
}

impl Keeper {
    /// Forwards `sig` to COMMAND, as the wrapper does to a COMMAND of its
    /// own.
    pub(crate) fn forward(&self, sig: &ToForward) {
        if let (Some(command), Some(sig)) = (&self.command, sig.to_send()) {
            // COMMAND may have exited a moment ago; that is fine.
            let _ = command.signal(sig);
        }
    }

    /// COMMAND's status, once the keeper has reported it; called when a
    /// SIGCHLD arrived (the keeper sends one after each record, and the
    /// kernel one when the keeper exits).
    pub(crate) fn status(&mut self) -> io::Result<Option<ExitStatus>> {
        // The keeper's own exit, if it came: reaped first, so that every
        // record it wrote is in the pipe by the time it is read.
        let mut keeper_status = None;
        loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) if pid == self.pid => keeper_status = Some(status),
                // Orphans reparented to us if the keeper was killed.
                Ok(Some(_)) | Err(rustix::io::Errno::INTR) => {}
                Ok(None) | Err(rustix::io::Errno::CHILD) => break,
                Err(e) => return Err(e.into()),
            }
        }
        match self.read_record(false)? {
            Some(Record::Exited(raw, alone)) => {
                if alone && keeper_status.is_none() {
                    // It exits right after saying so: reap it, so that the
                    // wrapper sees no leftovers that are not there.
                    let _ = rustix::process::waitpid(Some(self.pid), WaitOptions::empty());
                }
                Ok(Some(ExitStatus::from_raw(raw)))
            }
            Some(_) => Err(io::Error::other(
                "the command's keeper said it started twice",
            )),
            // Killed before it could report (only SIGKILL can): COMMAND
            // died with it (its parent-death signal is SIGKILL), and its
            // status is the keeper's.
            None => Ok(keeper_status.map(|s| ExitStatus::from_raw(s.as_raw()))),
        }
    }

    /// The next whole record, or `None` when none is there yet (or the pipe
    /// is at its end).
    fn read_record(&mut self, blocking: bool) -> io::Result<Option<Record>> {
        loop {
            if let Some((record, used)) = parse(&self.unread) {
                self.unread.drain(..used);
                return Ok(Some(record));
            }
            let mut buf = [0u8; 512];
            match self.report.read(&mut buf) {
                Ok(0) => return Ok(None),
                Ok(n) => self.unread.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && !blocking => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }
}

/// A whole record at the start of `bytes`, and its length.
fn parse(bytes: &[u8]) -> Option<(Record, usize)> {
    let word = |at: usize| -> Option<i32> {
        Some(i32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    match *bytes.first()? {
        STARTED => Some((Record::Started(word(1)?.unsigned_abs()), 5)),
        EXITED => Some((Record::Exited(word(1)?, *bytes.get(5)? != 0), 6)),
        FAILED => {
            let len = usize::try_from(word(5)?).ok()?;
            let message = bytes.get(9..9 + len)?;
            let message = String::from_utf8_lossy(message).into_owned();
            Some((Record::Failed(word(1)?, message), 9 + len))
        }
        _ => Some((
            Record::Failed(exit::OS_ERROR, "garbled report".into()),
            bytes.len(),
        )),
    }
}

/// The keeper's side: `lockfile __lockfile-keeper FD INODE WRAPPER PROGRAM
/// ARGS...`, started by [`spawn`] and by nothing else. Returns its exit
/// status.
pub(crate) fn main(args: &[OsString]) -> i32 {
    let Some((report, wrapper, program, program_args)) = arguments(args) else {
        errln!("lockfile: {ARG} is the wrapper's own, and not to be run by hand");
        return exit::USAGE;
    };
    let mut report = File::from(report);
    // A handle on the wrapper, for the SIGCHLD that says a record waits;
    // opened while it is our parent, so that it names the wrapper.
    let wrapper_handle = ProcessHandle::open(wrapper.as_raw_nonzero().get().unsigned_abs()).ok();
    let wrapper_alive = || rustix::process::getppid() == Some(wrapper);
    let Some(wrapper_handle) = wrapper_handle.filter(|_| wrapper_alive()) else {
        return exit::OS_ERROR;
    };
    let signals = match BlockedSignals::block().and_then(|mut s| {
        s.block_everything()?;
        Ok(s)
    }) {
        Ok(signals) => signals,
        Err(e) => {
            let _ = send(
                &mut report,
                &failed(exit::OS_ERROR, &format!("cannot block signals: {e}")),
            );
            return exit::OS_ERROR;
        }
    };
    // Orphans of COMMAND's tree are reparented to us, and stay in reach.
    if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(io::Error::from)
    {
        let message = format!("cannot become a subreaper: {e}");
        let _ = send(&mut report, &failed(exit::OS_ERROR, &message));
        return exit::OS_ERROR;
    }
    // The wrapper may have died before its death signal was blocked.
    if !wrapper_alive() {
        return exit::OS_ERROR;
    }
    let command = match command::spawn(&signals, &program, &program_args, &[], true) {
        Ok(pid) => pid,
        Err((code, message)) => {
            let _ = send(&mut report, &failed(code, &message));
            return 0;
        }
    };
    let mut started = vec![STARTED];
    started.extend(command.as_raw_nonzero().get().to_le_bytes());
    let _ = send(&mut report, &started);
    let mut running = true;
    loop {
        if !wrapper_alive() {
            return stop_the_tree(&signals, &program);
        }
        let mut status = None;
        let alone = loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, st))) if pid == command => status = Some(st),
                Ok(Some(_)) | Err(rustix::io::Errno::INTR) => {}
                Ok(None) => break false,
                Err(_) => break true,
            }
        };
        if let Some(status) = status {
            running = false;
            let mut exited = vec![EXITED];
            exited.extend(status.as_raw().to_le_bytes());
            exited.push(u8::from(alone));
            let _ = send(&mut report, &exited);
            let _ = wrapper_handle.signal(libc::SIGCHLD);
        }
        if !running && alone {
            return 0;
        }
        // Any signal wakes us: a child's exit, the wrapper's death, or
        // whatever reached our process group, which changes nothing.
        let _ = signals.wait_until(Instant::now() + Duration::from_secs(3600));
    }
}

/// The keeper's arguments: the report pipe (checked to be the pipe the
/// wrapper made, by its inode), the wrapper, which must be our parent, and
/// COMMAND.
fn arguments(args: &[OsString]) -> Option<(OwnedFd, Pid, OsString, Vec<OsString>)> {
    let [fd, ino, wrapper, program, program_args @ ..] = args else {
        return None;
    };
    let number = |s: &OsStr| std::str::from_utf8(s.as_bytes()).ok()?.parse::<u64>().ok();
    let fd = RawFd::try_from(number(fd)?).ok().filter(|&fd| fd > 2)?;
    let wrapper = Pid::from_raw(i32::try_from(number(wrapper)?).ok()?)?;
    if rustix::process::getppid() != Some(wrapper) {
        return None;
    }
    // SAFETY: `fd` is only looked at (fstat), and only kept once it is the
    // pipe our parent, the wrapper, made for us and left open across the
    // exec: nothing else in this fresh process owns it.
    let report = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0
            || st.st_mode & libc::S_IFMT != libc::S_IFIFO
            || st.st_ino != number(ino)?
        {
            return None;
        }
        OwnedFd::from_raw_fd(fd)
    };
    // COMMAND must not inherit it.
    rustix::io::fcntl_setfd(report.as_fd(), rustix::io::FdFlags::CLOEXEC).ok()?;
    Some((report, wrapper, program.clone(), program_args.to_vec()))
}

/// A spawn error's record: the status and the line to print.
fn failed(code: i32, message: &str) -> Vec<u8> {
    // A line, not a document: a few KiB is plenty, and fits any pipe.
    let message = &message.as_bytes()[..message.len().min(4096)];
    let mut record = vec![FAILED];
    record.extend(code.to_le_bytes());
    record.extend(i32::try_from(message.len()).unwrap_or(0).to_le_bytes());
    record.extend(message);
    record
}

fn send(report: &mut File, record: &[u8]) -> io::Result<()> {
    report.write_all(record)
}

/// The wrapper is gone, and nobody renews its lease: SIGKILL to every
/// descendant, again and again until none is left, or until the survivors
/// of SIGKILL are named. Returns the keeper's exit status.
fn stop_the_tree(signals: &BlockedSignals, program: &OsStr) -> i32 {
    let since = Instant::now();
    let mut announced = false;
    while tree::has_children() {
        let targets = tree::verified_descendants();
        if !announced {
            announced = true;
            errln!(
                "lockfile: the wrapper of `{}` died, and nobody renews its lease: sending SIGKILL to the command and everything it started ({} process(es))",
                crate::term::path(std::path::Path::new(program)),
                targets.len()
            );
        }
        for target in &targets {
            // It may have exited a moment ago; that is fine.
            let _ = target.signal(libc::SIGKILL);
        }
        let names: Vec<String> = targets
            .iter()
            .filter(|t| !t.has_exited())
            .map(|t| format!("pid {}", t.pid()))
            .collect();
        if since.elapsed() >= SURVIVOR_WAIT && !names.is_empty() {
            // Their SIGKILL stays pending, and ends them as they wake.
            errln!(
                "lockfile: {} process(es) of `{}` survived SIGKILL for {}s (uninterruptible sleep?), and the lease that covered them is not renewed: {}",
                names.len(),
                crate::term::path(std::path::Path::new(program)),
                SURVIVOR_WAIT.as_secs(),
                names.join(", ")
            );
            return exit::OS_ERROR;
        }
        // A child's exit wakes us sooner.
        let _ = signals.wait_until(Instant::now() + KILL_AGAIN);
    }
    0
}
