//! The async acquire (the `tokio` feature): it waits for real holders in
//! other processes on both kinds of runtime, times out as the blocking
//! acquire does, serves a thousand waiters on a handful of threads, and,
//! dropped at any point against a contender that comes and goes, leaves no
//! lock held and no record written.
//!
//! The tests of this module share the process's one waiter thread, and
//! some count its waiters: they run one at a time ([`serial`]). The
//! thousand waiters and their thread count are a child process's own.

use std::fs;
use std::future::Future;
use std::io::Write as _;
use std::path::Path;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration;

use lockfile::waiter::waiters;
use lockfile::{Error, LockGuard, LockOptions};
use lockfile_test_support::wait::PATIENCE;

use crate::support::{ChildHolder, FlockHolder, flock_try, require_flock, tempdir, wait_until};

/// One test of this module at a time: they count the waiters of the one
/// thread every test shares.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

/// Both kinds of runtime, named for the messages.
fn runtimes() -> [(&'static str, tokio::runtime::Runtime); 2] {
    [
        ("current-thread", current_thread()),
        ("multi-thread", multi_thread()),
    ]
}

/// Runs `fut` on a runtime of `flavor` of its own, in a thread of its own,
/// so that the test can watch it wait (a current-thread runtime runs its
/// tasks only while its thread drives it).
fn start<T: Send + 'static>(
    flavor: &'static str,
    fut: impl Future<Output = T> + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        let rt = match flavor {
            "current-thread" => current_thread(),
            _ => multi_thread(),
        };
        run(&rt, fut)
    })
}

/// The flavors of runtime every test runs on.
const FLAVORS: [&str; 2] = ["current-thread", "multi-thread"];

/// Runs `fut` to its end on `rt`, failing the test, rather than hanging
/// it, should it never end: a guard against a hang, never a measure.
fn run<T>(rt: &tokio::runtime::Runtime, fut: impl Future<Output = T>) -> T {
    rt.block_on(async {
        tokio::time::timeout(PATIENCE, fut)
            .await
            .expect("the future never ended")
    })
}

/// The threads of this process named `lockfile-waiter`.
fn waiter_threads() -> usize {
    fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "lockfile-waiter")
        .count()
}

/// Waits until the waiter thread holds no waiter: none is left behind.
fn no_waiters_left() {
    wait_until("the waiter thread to hold no waiter", || waiters() == 0);
    assert!(waiter_threads() <= 1, "one waiter thread per process");
}

#[test]
fn waits_for_a_holder_in_another_process_and_takes_the_lock_when_it_is_killed() {
    let _serial = serial();
    for flavor in FLAVORS {
        let dir = tempdir();
        let path = dir.path().join("job.lock");
        let (holder, token) = ChildHolder::hold(&path, "holder");
        let task = start(
            flavor,
            LockOptions::new().job("waiter").acquire_async(&path),
        );
        wait_until("the acquire to wait", || waiters() == 1);
        assert!(!task.is_finished(), "{flavor}: took a held lock");
        let holder_pid = holder.pid();
        holder.kill();
        let guard = task.join().unwrap().unwrap();
        // Its record, written by the future's poll, replaces the dead
        // holder's.
        let report = lockfile::inspect(&path).unwrap();
        let owner = report.owner.unwrap();
        assert_eq!(owner.pid, std::process::id(), "{flavor}");
        assert_eq!(owner.job.as_deref(), Some("waiter"), "{flavor}");
        assert_ne!(owner.token.to_string(), token, "{flavor}");
        assert_ne!(owner.pid, holder_pid);
        guard.release().unwrap();
        no_waiters_left();
    }
}

#[test]
fn waits_for_flock_1_holding_the_file_read_only_and_takes_it_on_a_sweep() {
    require_flock();
    let _serial = serial();
    for flavor in FLAVORS {
        let dir = tempdir();
        let path = dir.path().join("flocked.lock");
        // flock(1)'s descriptor is read-only: its end is no inotify event,
        // and the sweep finds it.
        let flock = FlockHolder::start(&["-x"], &path);
        let task = start(flavor, LockGuard::acquire_async(&path));
        wait_until("the acquire to wait", || waiters() == 1);
        assert!(!task.is_finished(), "{flavor}: took a held lock");
        drop(flock);
        let guard = task.join().unwrap().unwrap();
        assert_eq!(flock_try("-x", &path), 1, "{flavor}: the guard holds it");
        drop(guard);
        no_waiters_left();
    }
}

#[test]
fn a_bounded_wait_ends_with_the_blocking_acquires_timeout_naming_the_holder() {
    let _serial = serial();
    for (flavor, rt) in runtimes() {
        let dir = tempdir();
        let path = dir.path().join("t.lock");
        let (holder, token) = ChildHolder::hold(&path, "holder-job");
        let timeout = Duration::from_millis(200);
        let blocking = LockOptions::new()
            .timeout(timeout)
            .acquire(&path)
            .unwrap_err();
        let waited = run(
            &rt,
            LockOptions::new().timeout(timeout).acquire_async(&path),
        );
        let err = waited.unwrap_err();
        for e in [&blocking, &err] {
            let Error::Timeout {
                owner: Some(owner),
                waited,
                ..
            } = e
            else {
                panic!("{flavor}: {e:?}")
            };
            assert_eq!(owner.pid, holder.pid(), "{flavor}");
            assert_eq!(owner.token.to_string(), token, "{flavor}");
            assert_eq!(owner.job.as_deref(), Some("holder-job"), "{flavor}");
            assert!(!waited.is_zero(), "{flavor}");
            assert!(e.is_contended());
        }
        // The async wait ends at its deadline, counted from its first poll:
        // never before.
        let Error::Timeout { waited, .. } = &err else {
            unreachable!("matched above")
        };
        assert!(*waited >= timeout, "{flavor}: {waited:?}");
        let text = err.to_string();
        assert!(text.starts_with("gave up waiting for `"), "{text}");
        // A timeout of zero is the blocking acquire's too: one attempt.
        let zero = run(
            &rt,
            LockOptions::new()
                .timeout(Duration::ZERO)
                .acquire_async(&path),
        );
        assert!(matches!(zero, Err(Error::Timeout { .. })), "{zero:?}");
        no_waiters_left();
        drop(holder);
    }
}

#[test]
fn a_thousand_waiters_take_the_lock_in_turn_on_a_handful_of_threads() {
    let dir = tempdir();
    let mut crowd = ChildHolder::spawn(&format!("waiter-crowd\t{}\t1000", dir.path().display()));
    let line = crowd.expect_line("outcome ");
    eprintln!("{line}");
    let fields: std::collections::HashMap<&str, usize> = line
        .trim_start_matches("outcome ")
        .split(' ')
        .map(|f| {
            let (k, v) = f.split_once('=').unwrap();
            (k, v.parse().unwrap())
        })
        .collect();
    assert_eq!(fields["got"], 1000, "{line}");
    assert_eq!(fields["waited"], 1000, "every one waited: {line}");
    assert_eq!(fields["overlaps"], 0, "{line}");
    assert_eq!(fields["left"], 0, "{line}");
    assert!(fields["threads"] <= 16, "{line}");
    assert_eq!(fields["waiter_threads"], 1, "{line}");
    assert_eq!(crowd.wait(), 0);
}

/// The child of the test above: `n` tasks on a runtime of 4 workers wait
/// for 4 lock files in 2 directories, held by this process until every
/// task waits; then each takes its lock in turn, checks that nobody else
/// is inside, and releases it. Prints the peak of the process's threads
/// (counted in /proc/self/task while they wait and while they run) and
/// what happened.
pub(crate) fn crowd(dir: &Path, n: usize) -> i32 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    let files: Vec<_> = ["a", "b"]
        .iter()
        .flat_map(|d| ["x.lock", "y.lock"].map(|f| dir.join(d).join(f)))
        .collect();
    for file in &files {
        fs::create_dir_all(file.parent().unwrap()).unwrap();
    }
    let held: Vec<_> = files
        .iter()
        .map(|f| LockGuard::try_acquire(f).unwrap())
        .collect();
    let inside: Arc<Vec<AtomicBool>> =
        Arc::new(files.iter().map(|_| AtomicBool::new(false)).collect());
    let got = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let k = i % files.len();
            let path = files[k].clone();
            let (inside, got, overlaps) = (inside.clone(), got.clone(), overlaps.clone());
            rt.spawn(async move {
                let guard = LockGuard::acquire_async(&path).await.unwrap();
                if inside[k].swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::task::yield_now().await;
                inside[k].store(false, Ordering::SeqCst);
                got.fetch_add(1, Ordering::SeqCst);
                guard.release().unwrap();
            })
        })
        .collect();
    let threads = || fs::read_dir("/proc/self/task").unwrap().count();
    let mut peak = threads();
    wait_until("every task to wait", || {
        peak = peak.max(threads());
        waiters() == n
    });
    let waited = waiters();
    peak = peak.max(threads());
    drop(held);
    wait_until("every task to take its lock", || {
        peak = peak.max(threads());
        got.load(Ordering::SeqCst) == n
    });
    rt.block_on(async {
        for task in tasks {
            task.await.unwrap();
        }
    });
    wait_until("the waiter thread to hold no waiter", || waiters() == 0);
    println!(
        "outcome got={} waited={waited} overlaps={} left={} threads={peak} waiter_threads={}",
        got.load(Ordering::SeqCst),
        overlaps.load(Ordering::SeqCst),
        waiters(),
        waiter_threads(),
    );
    0
}

/// The contender of the cancel tests: takes the lock at `path` through a
/// descriptor opened for writing (its close is an inotify event) but writes
/// nothing, holds it up to 3 ms, lets go, and waits up to 3 ms; the
/// moments drawn from `seed`. Says "ready" once it held the lock once, and
/// goes on until killed.
pub(crate) fn come_and_go(path: &Path, seed: u64) -> i32 {
    let mut rng = Rng(seed.max(1));
    let mut said = false;
    loop {
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap();
        file.lock().unwrap();
        if !said {
            println!("ready");
            std::io::stdout().flush().unwrap();
            said = true;
        }
        std::thread::sleep(Duration::from_micros(rng.below(3000)));
        drop(file);
        std::thread::sleep(Duration::from_micros(rng.below(3000)));
    }
}

/// xorshift64*: the moments of the cancel tests, from a printed seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// How an iteration of the cancel test drops its future.
fn drop_at(rng: &mut Rng) -> u64 {
    rng.below(6)
}

/// Dropping the future at random points (a timeout, a `select!` against a
/// sleep or a yield, an aborted task, a drop before any poll) against a
/// contender process that takes and leaves the lock at random moments:
/// each dropped future left the file byte for byte as it was (no record
/// for a run that never started); afterwards the waiter thread holds no
/// waiter, and flock(1) takes the lock at once (none left held).
#[test]
fn futures_dropped_at_random_points_leave_no_lock_no_record_and_no_waiter() {
    require_flock();
    let _serial = serial();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("cancel test seed: {seed}");
    for (flavor, rt) in runtimes() {
        let dir = tempdir();
        let path = dir.path().join("c.lock");
        let mut contender = ChildHolder::spawn(&format!("come-and-go\t{}\t{seed}", path.display()));
        contender.expect_line("ready");
        let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
        let (mut taken, mut dropped) = (0, 0);
        for _ in 0..300 {
            let before = fs::read(&path).unwrap();
            let after_us = rng.below(4000);
            let how = drop_at(&mut rng);
            let got: Option<LockGuard> = run(&rt, async {
                let fut = LockOptions::new().job("cancel").acquire_async(&path);
                let after = Duration::from_micros(after_us);
                match how {
                    0 => tokio::time::timeout(after, fut)
                        .await
                        .ok()
                        .map(Result::unwrap),
                    1 => tokio::select! {
                        got = fut => Some(got.unwrap()),
                        () = tokio::time::sleep(after) => None,
                    },
                    2 => {
                        // Dropped after exactly one poll.
                        let mut fut = pin!(fut);
                        match std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await {
                            Poll::Ready(got) => Some(got.unwrap()),
                            Poll::Pending => None,
                        }
                    }
                    3 => {
                        let task = tokio::spawn(fut);
                        tokio::time::sleep(after).await;
                        task.abort();
                        match task.await {
                            Ok(got) => Some(got.unwrap()),
                            Err(e) if e.is_cancelled() => None,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    4 => {
                        // Polled once, then dropped on the next yield.
                        tokio::select! {
                            biased;
                            got = fut => Some(got.unwrap()),
                            () = tokio::task::yield_now() => None,
                        }
                    }
                    _ => {
                        drop(fut);
                        None
                    }
                }
            });
            match got {
                Some(guard) => {
                    assert_eq!(guard.record().job.as_deref(), Some("cancel"));
                    taken += 1;
                    guard.release().unwrap();
                }
                None => {
                    dropped += 1;
                    assert_eq!(
                        fs::read(&path).unwrap(),
                        before,
                        "{flavor}: a dropped future wrote into the file (seed {seed})"
                    );
                }
            }
        }
        eprintln!("{flavor}: {taken} taken, {dropped} dropped");
        drop(contender);
        no_waiters_left();
        assert_eq!(
            flock_try("-x", &path),
            0,
            "{flavor}: a lock was left held (seed {seed})"
        );
    }
}

/// A future dropped while the waiter thread is handing it the lock: many
/// waiters on one lock, all dropped the moment the lock comes free, over
/// and over. None of them leaves the lock held or writes a record.
#[test]
fn waiters_dropped_as_the_lock_comes_free_leave_it_free() {
    require_flock();
    let _serial = serial();
    let rt = multi_thread();
    let dir = tempdir();
    let path = dir.path().join("free.lock");
    for _ in 0..20 {
        let holder = LockGuard::try_acquire(&path).unwrap();
        let tasks: Vec<_> = (0..50)
            .map(|_| rt.spawn(LockGuard::acquire_async(&path)))
            .collect();
        wait_until("every acquire to wait", || waiters() == 50);
        holder.release().unwrap();
        let released = fs::read(&path).unwrap();
        for task in &tasks {
            task.abort();
        }
        let mut taken = 0;
        for task in tasks {
            match run(&rt, task) {
                Ok(guard) => {
                    taken += 1;
                    guard.unwrap().release().unwrap();
                }
                Err(e) => assert!(e.is_cancelled(), "{e}"),
            }
        }
        no_waiters_left();
        assert_eq!(flock_try("-x", &path), 0, "a lock was left held");
        if taken == 0 {
            assert_eq!(fs::read(&path).unwrap(), released, "a dropped future wrote");
        }
    }
}

#[test]
fn a_symlink_or_a_fifo_at_the_path_is_refused_at_once_and_so_is_eviction() {
    let _serial = serial();
    let rt = current_thread();
    let dir = tempdir();
    let target = dir.path().join("target");
    fs::write(&target, b"precious").unwrap();
    let link = dir.path().join("link.lock");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err = run(&rt, LockGuard::acquire_async(&link)).unwrap_err();
    assert!(matches!(err, Error::Symlink { .. }), "{err:?}");
    assert_eq!(fs::read(&target).unwrap(), b"precious");
    let fifo = dir.path().join("fifo.lock");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    let err = run(&rt, LockGuard::acquire_async(&fifo)).unwrap_err();
    crate::support::assert_not_regular(&err, "FIFO");
    // Eviction waits for a hung holder to die: refused, naming the path.
    let path = dir.path().join("evict.lock");
    let err = run(
        &rt,
        LockOptions::new()
            .evict_after(Duration::from_secs(1))
            .acquire_async(&path),
    )
    .unwrap_err();
    let Error::Io {
        source, path: p, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(source.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(p, &path);
    assert!(err.to_string().contains("does not evict"), "{err}");
    assert!(!path.exists(), "nothing opened");
    assert_eq!(waiters(), 0);
}

/// A FIFO renamed over the path while the future waits: the wait ends with
/// the refusal, not a hang on the FIFO, and the FIFO is never opened for a
/// lock.
#[test]
fn a_fifo_planted_during_the_wait_ends_it_with_the_refusal() {
    let _serial = serial();
    let rt = multi_thread();
    let dir = tempdir();
    let path = dir.path().join("job.lock");
    let (holder, _) = ChildHolder::hold(&path, "holder");
    let task = rt.spawn(LockGuard::acquire_async(&path));
    wait_until("the acquire to wait", || waiters() == 1);
    let fifo = dir.path().join("fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    fs::rename(&fifo, &path).unwrap();
    drop(holder);
    let err = run(&rt, task).unwrap().unwrap_err();
    crate::support::assert_not_regular(&err, "FIFO");
    no_waiters_left();
}

#[test]
fn a_guard_dropped_inside_a_runtime_releases_the_lock() {
    require_flock();
    let _serial = serial();
    for flavor in FLAVORS {
        let dir = tempdir();
        let path = dir.path().join("drop.lock");
        let held = LockGuard::try_acquire(&path).unwrap();
        let p = path.clone();
        let task = start(flavor, async move {
            let mut guard = LockGuard::acquire_async(&p).await.unwrap();
            guard.heartbeat().unwrap();
            guard.record_success().unwrap();
            assert_eq!(flock_try("-x", &p), 1, "held by the guard");
            drop(guard);
            // Right after the drop, still inside the task.
            flock_try("-x", &p)
        });
        wait_until("the acquire to wait", || waiters() == 1);
        held.release().unwrap();
        assert_eq!(task.join().unwrap(), 0, "{flavor}: the drop released it");
        let report = lockfile::inspect(&path).unwrap();
        assert!(report.last_success.is_some(), "{flavor}");
        no_waiters_left();
    }
}

/// Shared waiters behind an exclusive holder all get the lock together
/// when it goes; an exclusive waiter behind them waits for them all.
#[test]
fn shared_waiters_take_the_lock_together_and_an_exclusive_one_after_them() {
    let _serial = serial();
    let rt = multi_thread();
    let dir = tempdir();
    let path = dir.path().join("rw.lock");
    let writer = LockGuard::try_acquire(&path).unwrap();
    let readers: Vec<_> = (0..3)
        .map(|_| rt.spawn(LockOptions::new().shared(true).acquire_async(&path)))
        .collect();
    wait_until("the readers to wait", || waiters() == 3);
    writer.release().unwrap();
    let guards: Vec<_> = readers
        .into_iter()
        .map(|r| run(&rt, r).unwrap().unwrap())
        .collect();
    let next_writer = rt.spawn(LockGuard::acquire_async(&path));
    wait_until("the writer to wait", || waiters() == 1);
    assert!(!next_writer.is_finished());
    drop(guards);
    run(&rt, next_writer).unwrap().unwrap().release().unwrap();
    no_waiters_left();
}

/// The voluntary context switches of this process's waiter thread: one at
/// least per wake-up.
fn waiter_thread_wakeups() -> u64 {
    fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| {
            let task = task.ok()?.path();
            let comm = fs::read_to_string(task.join("comm")).ok()?;
            (comm.trim() == "lockfile-waiter").then_some(())?;
            let status = fs::read_to_string(task.join("status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
                .trim()
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Waiters do not wake one another, and a holder that writes does not
/// wake them: their looks are read-only, a failed attempt (whose close,
/// opened for writing, is an event) comes only after a look found the lock
/// free, and the thread listens to closes, not writes. While a holder keeps
/// the lock and writes into its file without pause, the thread wakes for
/// its sweeps (one a second) and little else: a handful of wake-ups over
/// two seconds, where waiters woken by each write, or by one another, would
/// make thousands.
#[test]
fn waiting_waiters_wake_neither_one_another_nor_for_the_holders_writes() {
    let _serial = serial();
    let rt = multi_thread();
    let dir = tempdir();
    let path = dir.path().join("quiet.lock");
    let mut holder = LockGuard::try_acquire(&path).unwrap();
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let path = path.clone();
            rt.spawn(async move { LockGuard::acquire_async(&path).await.unwrap().release() })
        })
        .collect();
    wait_until("the acquires to wait", || waiters() == 10);
    let before = waiter_thread_wakeups();
    let window = std::time::Instant::now() + Duration::from_secs(2);
    let mut writes = 0;
    while std::time::Instant::now() < window {
        holder.record_success().unwrap();
        writes += 1;
    }
    let woke = waiter_thread_wakeups() - before;
    eprintln!("the waiter thread woke {woke} times in 2 s, for {writes} writes");
    assert!(writes > 100, "{writes} writes");
    assert!(woke < 100, "the waiter thread woke {woke} times in 2 s");
    assert!(tasks.iter().all(|t| !t.is_finished()));
    holder.release().unwrap();
    for task in tasks {
        run(&rt, task).unwrap().unwrap();
    }
    no_waiters_left();
}
