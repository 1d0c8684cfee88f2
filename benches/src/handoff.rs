//! Handoff latency: how soon a waiting process holds the lock after its
//! holder lets go.
//!
//! This process (A) holds the lock with a raw flock(2). A child (B) is told
//! which way to wait, and blocks. A confirms in /proc/locks that B is queued
//! on the lock, lets B settle asleep, stamps CLOCK_MONOTONIC and unlocks. B
//! stamps CLOCK_MONOTONIC as soon as it holds the lock (for ours: when
//! `acquire` returns, record written) and sends its stamp back through a
//! pipe. The delay is B's stamp minus A's. Both clocks are the same kernel
//! clock, so the difference is meaningful across processes.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lockfile::{LockGuard, LockOptions};

use crate::sys::{self, Fd, cpath, mono_ns};

/// How B waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    /// open + flock(LOCK_EX), blocking in the kernel.
    Floor,
    /// `LockGuard::acquire`: blocks in flock(2) after a failed try.
    Acquire,
    /// `LockOptions::timeout(..).acquire`: blocks in flock(2), interrupted
    /// at the deadline by a per-thread timer signal.
    Bounded,
    /// The floor plus, after the wake-up, the syscalls `acquire` issues
    /// before it returns (fstat, pread, pwrite of the record), raw: how much
    /// of our delay is that work rather than the wake-up.
    Replica,
    /// The replica of the bounded wait: a raw per-thread POSIX timer armed
    /// before the blocking flock, as ours arms it, then after the wake-up
    /// the timer's deletion and the same syscalls as [`Variant::Replica`].
    BoundedReplica,
}

impl Variant {
    pub(crate) const ALL: [Variant; 5] = [
        Variant::Floor,
        Variant::Acquire,
        Variant::Bounded,
        Variant::Replica,
        Variant::BoundedReplica,
    ];

    /// The variants whose CPU use over a long wait is measured.
    pub(crate) const CPU: [Variant; 3] = [Variant::Floor, Variant::Acquire, Variant::Bounded];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Variant::Floor => "floor: open + flock(LOCK_EX), blocking",
            Variant::Acquire => "lockfile acquire (blocking)",
            Variant::Bounded => "lockfile acquire with timeout (bounded wait)",
            Variant::Replica => "floor + our post-lock syscalls, raw (fstat, pread, pwrite)",
            Variant::BoundedReplica => {
                "floor with a raw timer + the bounded wait's post-lock syscalls (timer_delete, fstat, pread, pwrite)"
            }
        }
    }

    fn word(self) -> &'static str {
        match self {
            Variant::Floor => "floor",
            Variant::Acquire => "acquire",
            Variant::Bounded => "bounded",
            Variant::Replica => "replica",
            Variant::BoundedReplica => "bounded-replica",
        }
    }

    fn from_word(word: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.word() == word)
    }
}

/// Where A and B run, on the first two CPUs this process may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Both pinned to one CPU: the release must get B scheduled on A's CPU.
    OneCpu,
    /// A and B pinned to two CPUs: the release must wake B's (idle) CPU.
    TwoCpus,
}

impl Placement {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Placement::OneCpu => "one CPU (both pinned to it)",
            Placement::TwoCpus => "two CPUs (A on one, B on the other)",
        }
    }

    /// The CPUs for A and for B, out of those allowed at the start (before
    /// any pinning).
    fn cpus(self, cpus: &[usize]) -> Result<(usize, usize)> {
        match (self, cpus) {
            (Placement::OneCpu, [a, ..]) => Ok((*a, *a)),
            (Placement::TwoCpus, [a, b, ..]) => Ok((*a, *b)),
            _ => bail!("not enough CPUs for {}: {cpus:?}", self.name()),
        }
    }
}

/// The key of a (placement, variant) series in the results.
pub(crate) fn key(placement: Placement, variant: Variant) -> String {
    format!("handoff|{}|{}", placement.name(), variant.name())
}

pub(crate) fn cpu_key(variant: Variant) -> String {
    format!("cpu|{}", variant.name())
}

/// How long B's bounded wait may last: far beyond any measurement, so the
/// deadline never fires and only the release wakes it.
const BOUND: Duration = Duration::from_secs(600);

/// After B shows up as a waiter in /proc/locks, A lets it go to sleep and
/// its CPU go idle, as for any job that has been waiting a while.
const SETTLE: Duration = Duration::from_millis(1);

/// A's side: the held lock and the waiting child.
#[derive(Debug)]
pub(crate) struct Handoff {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    holder: Fd,
    dev_ino: (u64, u64),
    /// The CPUs both processes may use, as found at the start.
    cpus: Vec<usize>,
}

impl Handoff {
    pub(crate) fn start(exe: &Path, dir: &Path) -> Result<Handoff> {
        let path = dir.join("handoff.lock");
        // Start from our released record, as a real job's lock file would.
        LockGuard::try_acquire(&path)?.release()?;
        let holder = Fd::open(&cpath(&path)?, libc::O_RDONLY | libc::O_CLOEXEC)?;
        holder.flock(libc::LOCK_EX)?;
        let meta = std::fs::metadata(&path)?;
        use std::os::unix::fs::MetadataExt;
        let mut child = Command::new(exe)
            .arg("--child")
            .arg("waiter")
            .arg(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start the waiting child")?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Handoff {
            child,
            stdin,
            stdout,
            holder,
            dev_ino: (meta.dev(), meta.ino()),
            cpus: sys::allowed_cpus(),
        })
    }

    pub(crate) fn place(&self, placement: Placement) -> Result<()> {
        let (a, b) = placement.cpus(&self.cpus)?;
        sys::pin(0, &[a])?;
        sys::pin(self.child.id() as libc::pid_t, &[b])
    }

    /// The CPUs both processes may use, as found at the start.
    pub(crate) fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// Lets both processes run on any CPU they were allowed at the start.
    pub(crate) fn unpin(&self) -> Result<()> {
        sys::pin(0, &self.cpus)?;
        sys::pin(self.child.id() as libc::pid_t, &self.cpus)
    }

    /// One handoff: B's wake-up delay in nanoseconds.
    pub(crate) fn once(&mut self, variant: Variant) -> Result<f64> {
        let answer = self.exchange(&format!("wait {}", variant.word()), SETTLE)?;
        Ok(answer[0] as f64)
    }

    /// One long wait: the CPU B used while waiting, as a share of one core.
    pub(crate) fn cpu_while_waiting(&mut self, variant: Variant, wait: Duration) -> Result<f64> {
        let answer = self.exchange(&format!("cpu {}", variant.word()), wait)?;
        let (cpu_ns, wall_ns) = (answer[1], answer[2]);
        Ok(cpu_ns as f64 / wall_ns as f64)
    }

    /// Sends B a command, waits until B is queued on the lock and `hold` has
    /// passed, releases, and reads B's answer: its stamp minus ours first.
    fn exchange(&mut self, command: &str, hold: Duration) -> Result<Vec<u64>> {
        writeln!(self.stdin, "{command}")?;
        self.stdin.flush()?;
        self.wait_for_waiter()?;
        std::thread::sleep(hold);
        let released_at = mono_ns();
        self.holder.flock(libc::LOCK_UN)?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        // Take the lock back (B releases right after answering) for the next
        // round.
        self.holder.flock(libc::LOCK_EX)?;
        let mut fields = line.split_whitespace().map(str::parse::<u64>);
        let Some(Ok(woke_at)) = fields.next() else {
            bail!("the waiting child answered {line:?}");
        };
        let mut answer = vec![woke_at.saturating_sub(released_at)];
        answer.extend(fields.filter_map(Result::ok));
        Ok(answer)
    }

    /// Polls /proc/locks until the child is listed as blocked on our file.
    fn wait_for_waiter(&self) -> Result<()> {
        let pid = self.child.id().to_string();
        let (dev, ino) = self.dev_ino;
        let want = format!(
            "{:02x}:{:02x}:{ino}",
            libc::major(dev as libc::dev_t),
            libc::minor(dev as libc::dev_t)
        );
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            let locks = std::fs::read_to_string("/proc/locks")?;
            let queued = locks.lines().any(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                f.len() >= 7 && f[1] == "->" && f[5] == pid && f[6] == want
            });
            if queued {
                return Ok(());
            }
            if Instant::now() > give_up {
                bail!("the waiting child never queued on the lock ({want})");
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

impl Drop for Handoff {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// B's side: runs in the child, answering A's commands on stdin.
pub(crate) fn waiter_main(path: PathBuf) -> Result<()> {
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let c = cpath(&path)?;
    let record = std::fs::read(&path)?;
    let mut buf = [0u8; 4096];
    for line in stdin.lines() {
        let line = line?;
        let (what, word) = line.split_once(' ').context("bad command")?;
        let variant = Variant::from_word(word).context("bad variant")?;
        let cpu_before = sys::cpu_time_ns();
        let wall_before = mono_ns();
        let held = match variant {
            Variant::Floor => {
                let fd = Fd::open(&c, libc::O_RDONLY | libc::O_CLOEXEC)?;
                fd.flock(libc::LOCK_EX)?;
                Held::Raw(fd)
            }
            Variant::Acquire => Held::Ours(LockGuard::acquire(&path)?),
            Variant::Bounded => Held::Ours(LockOptions::new().timeout(BOUND).acquire(&path)?),
            Variant::Replica => {
                let fd = Fd::open(&c, libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW)?;
                fd.flock(libc::LOCK_EX)?;
                post_lock_syscalls(&fd, &mut buf, &record)?;
                Held::Raw(fd)
            }
            Variant::BoundedReplica => {
                let fd = Fd::open(&c, libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW)?;
                let timer = RawTimer::arm(BOUND)?;
                fd.flock(libc::LOCK_EX)?;
                drop(timer);
                post_lock_syscalls(&fd, &mut buf, &record)?;
                Held::Raw(fd)
            }
        };
        let woke_at = mono_ns();
        let cpu = sys::cpu_time_ns() - cpu_before;
        match what {
            "wait" => writeln!(stdout, "{woke_at}")?,
            "cpu" => writeln!(stdout, "{woke_at} {cpu} {}", woke_at - wall_before)?,
            _ => bail!("bad command {line:?}"),
        }
        stdout.flush()?;
        match held {
            Held::Raw(fd) => drop(fd),
            Held::Ours(guard) => guard.release()?,
        }
    }
    Ok(())
}

/// The syscalls `acquire` makes between the wake-up and its return, raw.
fn post_lock_syscalls(fd: &Fd, buf: &mut [u8; 4096], record: &[u8]) -> Result<()> {
    // SAFETY: a live stat buffer, a descriptor we own and buffers of the
    // stated lengths.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        sys::check(libc::fstat(fd.0, &mut st) == 0, "fstat")?;
        sys::check(
            libc::pread(fd.0, buf.as_mut_ptr().cast(), buf.len(), 0) >= 0,
            "pread",
        )?;
        sys::check(
            libc::pwrite(fd.0, record.as_ptr().cast(), record.len(), 0) == record.len() as isize,
            "pwrite",
        )
    }
}

/// A per-thread POSIX timer as the bounded wait arms one, on a signal of
/// its own with a no-op handler, raw: what the bounded wait's replica does
/// around its flock.
struct RawTimer(libc::timer_t);

impl RawTimer {
    fn arm(after: Duration) -> Result<RawTimer> {
        extern "C" fn nothing(_: libc::c_int) {}
        let signal = libc::SIGRTMAX() - 4;
        // SAFETY: every pointer handed to libc points at a live local; the
        // sigaction and sigevent are zeroed, then filled in.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            sys::check(
                libc::sigaction(signal, &action, std::ptr::null_mut()) == 0,
                "sigaction",
            )?;
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            sys::check(
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) == 0,
                "pthread_sigmask",
            )?;
            let mut event: libc::sigevent = std::mem::zeroed();
            event.sigev_notify = libc::SIGEV_THREAD_ID;
            event.sigev_signo = signal;
            event.sigev_notify_thread_id = libc::gettid();
            let mut timer: libc::timer_t = std::ptr::null_mut();
            sys::check(
                libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) == 0,
                "timer_create",
            )?;
            let spec = libc::itimerspec {
                it_value: libc::timespec {
                    tv_sec: after.as_secs() as libc::time_t,
                    tv_nsec: 0,
                },
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 1_000_000,
                },
            };
            let timer = RawTimer(timer);
            sys::check(
                libc::timer_settime(timer.0, 0, &spec, std::ptr::null_mut()) == 0,
                "timer_settime",
            )?;
            Ok(timer)
        }
    }
}

impl Drop for RawTimer {
    fn drop(&mut self) {
        // SAFETY: a timer from timer_create, deleted once.
        unsafe {
            libc::timer_delete(self.0);
        }
    }
}

/// What B holds once it is through. Unboxed on purpose: boxing the guard
/// would put an allocation between the wake-up and the stamp.
#[allow(clippy::large_enum_variant)]
enum Held {
    Raw(Fd),
    Ours(LockGuard),
}
