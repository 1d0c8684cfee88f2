//! Helpers shared by the integration tests: real child processes that hold,
//! contend for and release locks, re-running this very test binary.

#![allow(dead_code)]

pub(crate) use lockfile_test_support::foreign::{fingerprint, write_aged};
pub(crate) use lockfile_test_support::wait_until;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use lockfile::record::HeartbeatSource;
use lockfile::{LockGuard, LockOptions};

/// The environment variable that turns this test binary into a child holder.
const CHILD_ENV: &str = "LOCKFILE_TEST_CHILD";

/// Called by the `child_process_entry` test: when the variable is set, act as
/// a child and exit; otherwise return at once (a normal test run).
pub(crate) fn child_entry() {
    let Ok(action) = std::env::var(CHILD_ENV) else {
        return;
    };
    let code = run_child(&action);
    std::process::exit(code);
}

/// A child process running one of the actions below.
pub(crate) struct ChildHolder {
    pub(crate) child: Child,
    stdout: BufReader<ChildStdout>,
    /// The child leads a process group of its own, killed with it.
    group: bool,
}

impl ChildHolder {
    /// Spawns `action` (e.g. `hold <path> <job>`) in a child process.
    pub(crate) fn spawn(action: &str) -> ChildHolder {
        ChildHolder::spawn_under(&[], action)
    }

    /// Spawns `action` under a wrapper command such as `unshare --pid --fork`
    /// or `setpriv --reuid=...`, which execs this test binary.
    pub(crate) fn spawn_under(wrapper: &[&str], action: &str) -> ChildHolder {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args.iter()).arg(&exe);
                cmd
            }
            None => Command::new(&exe),
        };
        let mut child = cmd
            .args([
                "--exact",
                "child_process_entry",
                "--nocapture",
                "--test-threads=1",
                "-q",
            ])
            .env(CHILD_ENV, action)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn child test process");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        ChildHolder {
            child,
            stdout,
            group: false,
        }
    }

    /// Runs `sh -c script` in a process group of its own, with `envs`. In the
    /// script, `"$@"` runs this test binary as a child, whose action is the
    /// `LOCKFILE_TEST_CHILD` it is given, for example
    /// `LOCKFILE_TEST_CHILD="$ACTION" "$@"`: so the shell is the parent of
    /// the child, as a shell is of `flock 9`.
    pub(crate) fn spawn_shell(script: &str, envs: &[(&str, &str)]) -> ChildHolder {
        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .arg(&exe)
            .args([
                "--exact",
                "child_process_entry",
                "--nocapture",
                "--test-threads=1",
                "-q",
            ])
            .envs(envs.iter().copied())
            .env_remove(CHILD_ENV)
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn sh");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        ChildHolder {
            child,
            stdout,
            group: true,
        }
    }

    /// Spawns a child holding the lock at `path` and waits until it holds it.
    /// Returns the child and the token it wrote.
    pub(crate) fn hold(path: &Path, job: &str) -> (ChildHolder, String) {
        let mut holder = ChildHolder::spawn(&format!("hold\t{}\t{job}", path.display()));
        let line = holder.expect_line("ready ");
        (holder, line.trim_start_matches("ready ").to_owned())
    }

    /// Spawns a child holding the lock at `path` that promised a heartbeat
    /// every `interval_ms` kept by `source` (`none`, `wrapper` or
    /// `command`) and never beats; with `tree`, a setsid'ed process that
    /// ignores SIGTERM also holds it. Returns the child, the token it wrote
    /// and the tree process's PID (0 without one).
    pub(crate) fn hold_silent(
        path: &Path,
        interval_ms: u64,
        source: &str,
        kill_after_ms: Option<u64>,
        tree: bool,
    ) -> (ChildHolder, String, u32) {
        ChildHolder::hold_silent_under(&[], path, interval_ms, source, kill_after_ms, tree)
    }

    /// [`ChildHolder::hold_silent`] under a wrapper command.
    pub(crate) fn hold_silent_under(
        wrapper: &[&str],
        path: &Path,
        interval_ms: u64,
        source: &str,
        kill_after_ms: Option<u64>,
        tree: bool,
    ) -> (ChildHolder, String, u32) {
        let tree = if tree { "tree" } else { "alone" };
        ChildHolder::hold_silent_sharing(wrapper, path, interval_ms, source, kill_after_ms, tree)
    }

    /// [`ChildHolder::hold_silent`] with the lock shared as `how` says:
    /// `tree` (a setsid'ed child), `alone` (no one), `daemon` (a process
    /// that double-forks away from the holder's tree and keeps the
    /// descriptor) or `other-uid` (a child that runs as uid 65534).
    pub(crate) fn hold_silent_sharing(
        wrapper: &[&str],
        path: &Path,
        interval_ms: u64,
        source: &str,
        kill_after_ms: Option<u64>,
        how: &str,
    ) -> (ChildHolder, String, u32) {
        let kill_after = kill_after_ms.map_or("-".to_owned(), |ms| ms.to_string());
        let tree = how;
        let mut holder = ChildHolder::spawn_under(
            wrapper,
            &format!(
                "hold-silent\t{}\tsilent\t{interval_ms}\t{source}\t{kill_after}\t{tree}",
                path.display()
            ),
        );
        let line = holder.expect_line("ready ");
        let mut words = line.split(' ').skip(1);
        let token = words.next().unwrap().to_owned();
        let tree_pid = words.next().unwrap().parse().unwrap();
        (holder, token, tree_pid)
    }

    /// Whether the child is still running (not exited, not yet reaped).
    pub(crate) fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Reads stdout until a line starting with `prefix`.
    pub(crate) fn expect_line(&mut self, prefix: &str) -> String {
        self.expect_one_of(&[prefix])
    }

    /// Reads stdout until a line starting with one of `prefixes`.
    pub(crate) fn expect_one_of(&mut self, prefixes: &[&str]) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "child exited before printing one of {prefixes:?}");
            if prefixes.iter().any(|p| line.starts_with(p)) {
                return line.trim_end().to_owned();
            }
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILLs the child (and its process group, if it leads one) and
    /// reaps it.
    pub(crate) fn kill(mut self) {
        self.kill_group();
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn kill_group(&self) {
        if self.group {
            let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }

    /// Waits for the child to exit and returns its exit code.
    pub(crate) fn wait(mut self) -> i32 {
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

impl Drop for ChildHolder {
    fn drop(&mut self) {
        self.kill_group();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_child(action: &str) -> i32 {
    let parts: Vec<&str> = action.split('\t').collect();
    match parts.as_slice() {
        // The attacker of a reap by path: keeps a stale record `NAME` in a
        // directory `DIR/lockfile` of its own, and swaps that directory with
        // a symlink to `VICTIM` (renameat2 RENAME_EXCHANGE) over and over,
        // until killed.
        ["swap-loop", dir, victim, name, record] => swap_loop(
            Path::new(dir),
            Path::new(victim),
            Path::new(name),
            &std::fs::read(record).expect("read the record to plant"),
        ),
        // Wait for any of N slots, say which, and hold it until killed.
        ["hold-slot", path, n] => {
            let slots = lockfile::slot::SlotCount::new(n.parse().unwrap()).unwrap();
            let guard = LockOptions::new()
                .acquire_slot(path, slots)
                .expect("child acquire");
            println!("ready {}", guard.slot().unwrap().index);
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        // Take any of N slots over and over until killed; in each critical
        // section, count the sections the independent detector (markers in
        // `detect`, see `tests/slots.rs`) shows, twice.
        ["slot-sections", path, n, detect, counts] => crate::slots::sections(
            Path::new(path),
            n.parse().unwrap(),
            Path::new(detect),
            Path::new(counts),
        ),
        // Take the lock, say so, and hold it until killed.
        ["hold", path, job] => {
            let guard = LockOptions::new()
                .job(*job)
                .heartbeat_interval(Duration::from_secs(60))
                .acquire(path)
                .expect("child acquire");
            println!("ready {}", guard.record().token);
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        // Take the lock even without a record, say why there is none, and
        // hold it until killed.
        ["hold-record-optional", path] => {
            let guard = LockOptions::new()
                .record_optional(true)
                .acquire(path)
                .expect("child acquire");
            let why = guard.no_record().map_or("recorded", |w| w.as_str());
            println!("ready {why}");
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        // Take the lock promising a heartbeat every `interval_ms` (kept by
        // `source`: `none` for the library holder itself, `wrapper` or
        // `command`), and never beat. With `tree`, also start a process
        // that calls setsid, ignores SIGTERM and inherits the lock. Say
        // "ready TOKEN TREE_PID" (0 without a tree) and hang until stopped.
        [
            "hold-silent",
            path,
            job,
            interval_ms,
            source,
            kill_after_ms,
            tree,
        ] => {
            let mut opts = LockOptions::new();
            opts.job(*job)
                .heartbeat_interval(Duration::from_millis(interval_ms.parse().unwrap()));
            match *source {
                "wrapper" => {
                    opts.heartbeat_source(HeartbeatSource::Wrapper);
                }
                "command" => {
                    opts.heartbeat_source(HeartbeatSource::Command);
                }
                _ => {}
            }
            if let Ok(ms) = kill_after_ms.parse() {
                opts.kill_after(Duration::from_millis(ms));
            }
            let mut guard = opts.acquire(path).expect("child acquire");
            let tree_pid = match *tree {
                "tree" => {
                    // The descriptor without close-on-exec: the sleep inherits
                    // the lock. `trap ""` leaves SIGTERM ignored across exec.
                    let shared = guard.share_with_children().unwrap();
                    // Never waited for: it is to outlive this process, as a
                    // leftover of a hung run does, until the eviction stops it.
                    #[allow(clippy::zombie_processes)]
                    let sleep = Command::new("sh")
                        .args(["-c", "trap '' TERM; exec setsid sleep 60"])
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("spawn setsid sleep");
                    drop(shared);
                    sleep.id()
                }
                "other-uid" => {
                    let shared = guard.share_with_children().unwrap();
                    #[allow(clippy::zombie_processes)]
                    let mut sleep = Command::new("setpriv")
                        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                        .args(["sh", "-c", "echo switched; exec sleep 60"])
                        .stdout(Stdio::piped())
                        .spawn()
                        .expect("spawn setpriv sleep");
                    drop(shared);
                    // Its line comes after setpriv changed its uids: from
                    // then on it is another user's process.
                    let mut line = String::new();
                    BufReader::new(sleep.stdout.take().unwrap())
                        .read_line(&mut line)
                        .unwrap();
                    assert_eq!(line.trim(), "switched");
                    sleep.id()
                }
                "daemon" => {
                    // The shell forks the daemon and exits at once, so the
                    // daemon is reparented out of this tree (to init or a
                    // subreaper) before `output` returns: a double fork.
                    let shared = guard.share_with_children().unwrap();
                    let out = Command::new("sh")
                        .args(["-c", "setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $!"])
                        .stderr(Stdio::inherit())
                        .output()
                        .expect("spawn the daemon");
                    drop(shared);
                    String::from_utf8(out.stdout)
                        .unwrap()
                        .trim()
                        .parse()
                        .unwrap()
                }
                _ => 0,
            };
            println!("ready {} {tree_pid}", guard.record().token);
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        // The attacker: take the lock promising a heartbeat every 100 ms,
        // make it look silent for an hour, pass the locked descriptor to
        // whoever listens at `socket` (SCM_RIGHTS), say "ready" and hang on
        // to the lock.
        ["attack-pass", path, socket] => {
            let guard = LockOptions::new()
                .job("attack")
                .heartbeat_interval(Duration::from_millis(100))
                .acquire(path)
                .expect("attacker acquire");
            std::fs::File::open(path)
                .unwrap()
                .set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
                .unwrap();
            let stream = std::os::unix::net::UnixStream::connect(socket).expect("connect");
            send_descriptor(&stream, guard.as_fd());
            println!("ready {}", guard.record().token);
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        // The victim: a daemon that listens at `socket` (open to all), keeps
        // the one descriptor it is sent, starts a worker and says
        // "ready WORKER_PID"; it says "listening" first.
        ["victim-daemon", socket] => {
            use std::os::unix::fs::PermissionsExt;
            let listener = std::os::unix::net::UnixListener::bind(socket).expect("bind");
            std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o777)).unwrap();
            println!("listening");
            let (stream, _) = listener.accept().expect("accept");
            let _kept = receive_descriptor(&stream);
            #[allow(clippy::zombie_processes)]
            let worker = Command::new("sleep")
                .arg("60")
                .stdout(Stdio::null())
                .spawn()
                .expect("spawn the worker");
            println!("ready {}", worker.id());
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        // Try once with eviction after `evict_after_ms` and describe the
        // outcome on stdout.
        ["try-evict", path, evict_after_ms] => {
            match LockOptions::new()
                .evict_after(Duration::from_millis(evict_after_ms.parse().unwrap()))
                .kill_after(Duration::from_millis(200))
                .try_acquire(path)
            {
                Ok(guard) => println!("outcome acquired evicted={}", guard.evicted().is_some()),
                Err(e) => println!("outcome error {:?} | {e}", e.not_evicted()),
            }
            0
        }
        // Lock descriptor N, which the parent shell opened and keeps: say
        // what was written, and exit (the shell keeps the lock). `how` holds
        // `shared` for a shared lock, `wait` for a bounded wait.
        ["lock-fd", fd, how] => {
            // SAFETY: the shell that started this process opened the
            // descriptor for it, and nothing here closes it.
            let fd = unsafe { BorrowedFd::borrow_raw(fd.parse().unwrap()) };
            let mut opts = LockOptions::new();
            opts.job("descriptor-job").shared(how.contains("shared"));
            let got = if how.contains("wait") {
                opts.timeout(Duration::from_millis(300))
                    .acquire_descriptor(fd)
            } else {
                opts.try_acquire_descriptor(fd)
            };
            match got {
                Ok(lock) => {
                    match (lock.record(), lock.no_record()) {
                        (Some(record), _) => println!("outcome recorded {}", record.pid),
                        (None, Some(why)) => println!("outcome no_record {}", why.as_str()),
                        (None, None) => println!("outcome neither"),
                    }
                    0
                }
                Err(e) if e.is_contended() => {
                    let owner = e.owner().map_or("none".to_owned(), |o| o.pid.to_string());
                    println!("outcome contended {owner}");
                    1
                }
                Err(e) => {
                    println!("outcome error {e}");
                    2
                }
            }
        }
        // Unlock descriptor N, which the parent shell opened, and say whether
        // a record was marked released.
        ["unlock-fd", fd] => {
            // SAFETY: as for "lock-fd".
            let fd = unsafe { BorrowedFd::borrow_raw(fd.parse().unwrap()) };
            match lockfile::descriptor::unlock_descriptor(fd) {
                Ok(Some(owner)) => println!("outcome marked {}", owner.pid),
                Ok(None) => println!("outcome unmarked"),
                Err(e) => println!("outcome error {e}"),
            }
            0
        }
        // Try once and describe the outcome on stdout.
        ["try-acquire", path] => {
            match LockGuard::try_acquire(path) {
                Ok(guard) => println!("outcome acquired {}", guard.record().pid),
                Err(e) => println!("outcome error {e:?} | {e}"),
            }
            0
        }
        // Take the lock, beat once, and describe the outcome on stdout.
        ["heartbeat", path] => {
            match LockGuard::try_acquire(path).and_then(|guard| guard.heartbeat()) {
                Ok(()) => println!("outcome beat"),
                Err(e) => println!("outcome error {e:?} | {e}"),
            }
            0
        }
        // Inspect once, then report the state and the peak memory used.
        ["inspect-peak-memory", path] => {
            let state = match lockfile::inspect(path) {
                Ok(report) => report.state.to_string(),
                Err(e) => format!("error {e}"),
            };
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let peak_kib = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap();
            println!("outcome {state} {peak_kib}");
            0
        }
        // Try once: say "contended", or take the lock, say so, and hold it
        // until killed.
        ["try-hold", path, job] => match LockOptions::new().job(*job).try_acquire(path) {
            Ok(guard) => {
                println!("ready {}", guard.record().token);
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            Err(e) if e.is_contended() => {
                println!("contended");
                0
            }
            Err(e) => {
                eprintln!("child try_acquire failed: {e}");
                3
            }
        },
        // Hold the lock for a while, then release it (optionally unlinking).
        ["hold-for", path, millis, remove] => {
            let guard = LockOptions::new()
                .remove_on_release(*remove == "remove")
                .acquire(path)
                .expect("child acquire");
            println!("ready {}", guard.record().token);
            std::thread::sleep(Duration::from_millis(millis.parse().unwrap()));
            guard.release().expect("child release");
            0
        }
        // Contend: take the lock `rounds` times (mixing try, bounded and
        // blocking waits, some releases unlinking the file), and check with an
        // O_EXCL marker that nobody else is inside at the same time.
        // Write this process's record into `count` files of `dir`
        // (`PREFIX-00000.lock`, ...) and let their locks go without marking
        // the records released, as a forger would; keep `descriptors` more
        // descriptors open and hold `crowd` locks on other files of `dir`
        // (so that the kernel's lock table takes several reads); then say
        // "ready" and wait to be killed.
        ["plant", dir, prefix, count, descriptors, crowd] => {
            let dir = Path::new(dir);
            let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile);
            rustix::process::setrlimit(
                rustix::process::Resource::Nofile,
                rustix::process::Rlimit {
                    current: nofile.maximum,
                    maximum: nofile.maximum,
                },
            )
            .unwrap();
            let null = std::fs::File::open("/dev/null").unwrap();
            // Kept open until the process is killed.
            let _copies: Vec<_> = (0..descriptors.parse::<usize>().unwrap())
                .map(|_| null.try_clone().unwrap())
                .collect();
            for i in 0..count.parse::<usize>().unwrap() {
                LockGuard::try_acquire(dir.join(format!("{prefix}-{i:05}.lock")))
                    .unwrap()
                    .disown();
            }
            let _held: Vec<_> = (0..crowd.parse::<usize>().unwrap())
                .map(|i| {
                    let name = format!("{prefix}-crowd-{i:05}");
                    let file = std::fs::File::create(dir.join(name)).unwrap();
                    file.lock().unwrap();
                    file
                })
                .collect();
            println!("ready");
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        ["contend", path, marker, rounds] => {
            contend(Path::new(path), Path::new(marker), rounds.parse().unwrap())
        }
        // A thousand async waiters on a handful of threads (see
        // `tests/waiter.rs`): print what happened, exit.
        #[cfg(feature = "tokio")]
        ["waiter-crowd", dir, n] => crate::waiter::crowd(Path::new(dir), n.parse().unwrap()),
        // Take and leave the lock at random moments until killed, writing
        // nothing (see `tests/waiter.rs`).
        #[cfg(feature = "tokio")]
        ["come-and-go", path, seed] => {
            crate::waiter::come_and_go(Path::new(path), seed.parse().unwrap())
        }
        _ => {
            eprintln!("unknown child action {action:?}");
            2
        }
    }
}

fn contend(path: &Path, marker: &Path, rounds: u32) -> i32 {
    let mut done = 0;
    let mut attempt = 0u32;
    while done < rounds {
        attempt += 1;
        let mut opts = LockOptions::new();
        opts.remove_on_release(attempt.is_multiple_of(5));
        let got = match attempt % 3 {
            0 => opts.try_acquire(path),
            1 => opts.timeout(Duration::from_millis(200)).acquire(path),
            _ => opts.acquire(path),
        };
        let guard = match got {
            Ok(g) => g,
            Err(e) if e.is_contended() => continue,
            Err(e) => {
                eprintln!("acquire failed: {e}");
                return 3;
            }
        };
        if let Err(e) = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(marker)
        {
            eprintln!("OVERLAP: marker {} already exists: {e}", marker.display());
            return 1;
        }
        std::thread::yield_now();
        std::fs::remove_file(marker).unwrap();
        guard.release().unwrap();
        done += 1;
    }
    0
}

/// Sends `fd` over `stream` with one byte, as SCM_RIGHTS.
fn send_descriptor(stream: &std::os::unix::net::UnixStream, fd: BorrowedFd<'_>) {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [fd];
    assert!(control.push(SendAncillaryMessage::ScmRights(&fds)));
    sendmsg(
        stream,
        &[std::io::IoSlice::new(b"x")],
        &mut control,
        SendFlags::empty(),
    )
    .expect("sendmsg");
}

/// Receives the descriptor that [`send_descriptor`] sent.
fn receive_descriptor(stream: &std::os::unix::net::UnixStream) -> std::os::fd::OwnedFd {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    recvmsg(
        stream,
        &mut [std::io::IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .expect("recvmsg");
    control
        .drain()
        .find_map(|message| match message {
            RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
            _ => None,
        })
        .expect("a descriptor")
}

/// See the `swap-loop` action.
fn swap_loop(dir: &Path, victim: &Path, name: &Path, record: &[u8]) -> ! {
    use rustix::fs::{CWD, Mode, OFlags, RenameFlags};
    let real = dir.join("lockfile");
    let link = dir.join("link");
    std::fs::create_dir(&real).expect("create the swapped directory");
    std::os::unix::fs::symlink(victim, &link).expect("create the symlink");
    // Kept through every swap: wherever its name points, the record is
    // planted in the attacker's own directory.
    let own = rustix::fs::open(&real, OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .expect("open the swapped directory");
    let mut announced = false;
    loop {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
        if let Ok(file) = rustix::fs::openat(&own, name, flags, Mode::from_raw_mode(0o644)) {
            rustix::io::write(&file, record).expect("plant the record");
        }
        rustix::fs::renameat_with(CWD, &real, CWD, &link, RenameFlags::EXCHANGE)
            .expect("renameat2(RENAME_EXCHANGE)");
        if !announced {
            println!("ready");
            announced = true;
        }
    }
}

/// Has flock(1) take the lock at `path` and start a background `sleep` that
/// inherits the descriptor, then exit: only the sleep holds the lock after.
/// Returns the sleep's PID.
pub(crate) fn leave_background_holder(path: &Path) -> u32 {
    let pid_file = path.with_extension("bg-pid");
    let status = Command::new("flock")
        .arg(path)
        .args(["-c", "sleep 60 >/dev/null 2>&1 & echo $! > \"$PID_FILE\""])
        .env("PID_FILE", &pid_file)
        .status()
        .expect("run flock(1)");
    assert!(status.success());
    std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The uids an attacker and a victim run as, in the tests that play them:
/// unprivileged, and no one else's.
pub(crate) const ATTACKER: u32 = 64_001;
pub(crate) const VICTIM: u32 = 64_002;

/// A `setpriv` prefix that runs a command as `uid` (and the group of that
/// number), without supplementary groups. Only uids the tests name.
pub(crate) fn as_user(uid: u32) -> &'static [&'static str] {
    match uid {
        ATTACKER => &[
            "setpriv",
            "--reuid=64001",
            "--regid=64001",
            "--clear-groups",
        ],
        VICTIM => &[
            "setpriv",
            "--reuid=64002",
            "--regid=64002",
            "--clear-groups",
        ],
        _ => panic!("no setpriv prefix for uid {uid}"),
    }
}

/// Runs `program` with `args` as the attacker; panics unless it succeeds.
pub(crate) fn as_attacker(program: &str, args: &[&std::ffi::OsStr], envs: &[(&str, &str)]) {
    let (setpriv, options) = as_user(ATTACKER).split_first().unwrap();
    let status = Command::new(setpriv)
        .args(options)
        .arg(program)
        .args(args)
        .envs(envs.iter().copied())
        .status()
        .expect("run setpriv");
    assert!(status.success(), "{program} as the attacker: {status}");
}

/// `fs.protected_regular` set to 0 while it lives, then put back: the
/// kernel would otherwise refuse root's own writes into another user's
/// file in a sticky directory, and a test of our rule must meet the file,
/// not the kernel's refusal. Tests that hold one are serialised through a
/// lock file, so that none restores the value under another.
pub(crate) struct ProtectedRegularOff {
    previous: String,
    _serial: std::fs::File,
}

const PROTECTED_REGULAR: &str = "/proc/sys/fs/protected_regular";

impl ProtectedRegularOff {
    pub(crate) fn new() -> ProtectedRegularOff {
        require_root("sets fs.protected_regular");
        let serial = std::fs::File::create(
            std::env::temp_dir().join("lockfile-tests-protected-regular.lock"),
        )
        .unwrap();
        serial.lock().unwrap();
        let previous = std::fs::read_to_string(PROTECTED_REGULAR).unwrap();
        std::fs::write(PROTECTED_REGULAR, "0").unwrap();
        ProtectedRegularOff {
            previous,
            _serial: serial,
        }
    }
}

impl Drop for ProtectedRegularOff {
    fn drop(&mut self) {
        let _ = std::fs::write(PROTECTED_REGULAR, self.previous.trim());
    }
}

/// A directory shared the way `/tmp` is (root's, sticky, everyone may
/// write), inside a fresh temporary directory that everyone may enter.
pub(crate) fn shared_sticky_dir() -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    (dir, shared)
}

/// A fresh temporary directory for one test.
/// Fails the test, saying why, unless it runs as root. Tests that need root
/// are also marked `#[ignore = "needs root: ..."]`, so that a run without
/// root lists them as skipped rather than failing here.
pub(crate) fn require_root(what: &str) {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test needs root ({what}): run it as root"
    );
}

pub(crate) fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

pub(crate) fn lock_path(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

/// Whether util-linux flock(1) is available; tests that need it fail loudly
/// without it rather than passing by doing nothing.
pub(crate) fn require_flock() {
    let ok = Command::new("flock")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "these tests need util-linux flock(1) on PATH");
}

/// Asserts the lock at `path` is free right now by taking and releasing it.
pub(crate) fn assert_acquirable(path: &Path) {
    let guard = LockGuard::try_acquire(path).expect("lock should be free");
    guard.release().unwrap();
}

/// Runs util-linux flock(1) with `args` and returns its exit code.
/// flock(1) `-n OPTION PATH true`: 0 when it got the lock, 1 on a conflict.
pub(crate) fn flock_try(option: &str, path: &Path) -> i32 {
    use std::ffi::OsStr;
    flock_status(&[
        OsStr::new("-n"),
        OsStr::new(option),
        path.as_os_str(),
        OsStr::new("true"),
    ])
}

pub(crate) fn flock_status(args: &[&std::ffi::OsStr]) -> i32 {
    Command::new("flock")
        .args(args)
        .status()
        .expect("run flock(1)")
        .code()
        .unwrap_or(-1)
}

/// util-linux flock(1) holding a lock (`flock OPTIONS PATH sleep 60`) in a
/// process group of its own, killed with everything in it when dropped.
pub(crate) struct FlockHolder {
    child: Child,
}

impl FlockHolder {
    /// Starts `flock OPTIONS PATH sleep 60` and waits until `inspect` names
    /// it among the holders of `path`.
    pub(crate) fn start(options: &[&str], path: &Path) -> FlockHolder {
        require_flock();
        let mut child = Command::new("flock")
            .args(options)
            .arg(path)
            .args(["sleep", "60"])
            .process_group(0)
            .spawn()
            .expect("run flock(1)");
        let pid = child.id();
        wait_until("flock(1) to take the lock", || {
            assert!(child.try_wait().unwrap().is_none(), "flock(1) exited early");
            lockfile::inspect(path).is_ok_and(|r| r.holders.iter().any(|h| h.pid == pid))
        });
        FlockHolder { child }
    }

    /// The PID of flock(1) itself (its `sleep` is another process).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for FlockHolder {
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let _ = self.child.wait();
    }
}

/// Asserts that `err` refuses a lock path for holding a `kind` ("FIFO",
/// "directory", …), not a regular file.
#[track_caller]
pub(crate) fn assert_not_regular(err: &lockfile::Error, kind: &str) {
    assert!(
        matches!(err, lockfile::Error::NotRegularFile { kind: k, .. } if *k == kind),
        "{err:?}"
    );
}
