//! One run of a variant: this process holds the lock files, N waiters
//! (tasks in `acquire_async`, or threads in `acquire`) start and wait, and
//! once every one waits this process lets the files go. Each waiter, once
//! it holds its file, stamps CLOCK_MONOTONIC, then stamps again and
//! releases: the next waiter's lag runs from that stamp to its own. The
//! process's threads are counted throughout.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use lockfile::{LockGuard, LockOptions};
use lockfile_bench::clock::mono_ns;

use crate::procfs;

/// The async waiters' runtime: a fixed number of workers, so that the
/// thread count does not follow the machine's CPUs.
pub(crate) const WORKERS: usize = 4;
/// How long a run may take: far beyond any run measured here.
const RUN_WITHIN: Duration = Duration::from_secs(120);

/// How the waiters wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Each a thread of its own, blocked in `LockOptions::acquire`: the
    /// kernel's flock wait, woken by the unlock itself. The floor.
    Blocking,
    /// Each a task in `LockOptions::acquire_async`, on one runtime.
    Async,
}

/// Where the waiters wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Every waiter on one lock file.
    One,
    /// Spread evenly over 10 lock files in 5 directories.
    Spread,
}

impl Layout {
    pub(crate) const ALL: [Layout; 2] = [Layout::One, Layout::Spread];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Layout::One => "one lock file",
            Layout::Spread => "10 lock files in 5 directories",
        }
    }

    /// The lock files of a run in `dir`, their directories made.
    fn files(self, dir: &Path) -> Result<Vec<PathBuf>> {
        let files = match self {
            Layout::One => vec![dir.join("d0").join("job.lock")],
            Layout::Spread => (0..10)
                .map(|i| dir.join(format!("d{}", i / 2)).join(format!("job{i}.lock")))
                .collect(),
        };
        for file in &files {
            std::fs::create_dir_all(file.parent().expect("a file in a directory"))?;
        }
        Ok(files)
    }
}

/// What a run measured.
#[derive(Debug)]
pub(crate) struct Measured {
    /// Each handoff's lag, in nanoseconds.
    pub(crate) lags: Vec<f64>,
    /// The most threads the process ran at once.
    pub(crate) peak_threads: usize,
    /// From the first release to the last waiter's.
    pub(crate) all_through_ns: f64,
}

/// What the waiters share.
#[derive(Debug)]
struct Chain {
    /// Each file's last release stamp.
    released_at: Vec<AtomicU64>,
    lags: Mutex<Vec<f64>>,
    done: AtomicUsize,
    last_done_at: AtomicU64,
    failed: Mutex<Option<String>>,
}

impl Chain {
    /// A waiter holds file `k`: its lag, then its release.
    fn held(&self, k: usize, guard: LockGuard) {
        let got = mono_ns();
        let lag = got.saturating_sub(self.released_at[k].load(Ordering::SeqCst));
        self.lags.lock().expect("not poisoned").push(lag as f64);
        self.released_at[k].store(mono_ns(), Ordering::SeqCst);
        if let Err(e) = guard.release() {
            self.fail(&e);
        }
        self.last_done_at.store(mono_ns(), Ordering::SeqCst);
        self.done.fetch_add(1, Ordering::SeqCst);
    }

    fn fail(&self, e: &dyn std::fmt::Display) {
        let mut failed = self.failed.lock().expect("not poisoned");
        failed.get_or_insert_with(|| e.to_string());
        self.done.fetch_add(1, Ordering::SeqCst);
    }
}

/// One run: `n` waiters of `kind` on the files of `layout`, in `dir`.
pub(crate) fn run(dir: &Path, kind: Kind, layout: Layout, n: usize) -> Result<Measured> {
    let files = layout.files(dir)?;
    let held = files
        .iter()
        .map(|f| LockGuard::try_acquire(f).with_context(|| format!("hold {}", f.display())))
        .collect::<Result<Vec<_>>>()?;
    let chain = Arc::new(Chain {
        released_at: files.iter().map(|_| AtomicU64::new(0)).collect(),
        lags: Mutex::new(Vec::with_capacity(n)),
        done: AtomicUsize::new(0),
        last_done_at: AtomicU64::new(0),
        failed: Mutex::new(None),
    });
    let mut peak = procfs::threads()?;
    let mut runtime = None;
    let mut threads = Vec::new();
    match kind {
        Kind::Async => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .build()?;
            for i in 0..n {
                let k = i % files.len();
                let (path, chain) = (files[k].clone(), Arc::clone(&chain));
                rt.spawn(async move {
                    match LockGuard::acquire_async(&path).await {
                        Ok(guard) => chain.held(k, guard),
                        Err(e) => chain.fail(&e),
                    }
                });
            }
            runtime = Some(rt);
            wait(&chain, &mut peak, "every task to wait", || {
                Ok(lockfile::waiter::waiters() == n)
            })?;
        }
        Kind::Blocking => {
            for i in 0..n {
                let k = i % files.len();
                let (path, chain) = (files[k].clone(), Arc::clone(&chain));
                let thread = std::thread::Builder::new()
                    .stack_size(256 * 1024)
                    .spawn(move || match LockOptions::new().acquire(&path) {
                        Ok(guard) => chain.held(k, guard),
                        Err(e) => chain.fail(&e),
                    })
                    .context("cannot start a waiting thread")?;
                threads.push(thread);
            }
            wait(&chain, &mut peak, "every thread to block", || {
                Ok(procfs::blocked_flocks()? == n)
            })?;
        }
    }
    let first_release = mono_ns();
    for (k, guard) in held.into_iter().enumerate() {
        chain.released_at[k].store(mono_ns(), Ordering::SeqCst);
        guard.release()?;
    }
    wait(&chain, &mut peak, "every waiter to pass", || {
        Ok(chain.done.load(Ordering::SeqCst) == n)
    })?;
    for thread in threads {
        thread
            .join()
            .map_err(|_| anyhow::anyhow!("a waiting thread panicked"))?;
    }
    drop(runtime);
    let lags = std::mem::take(&mut *chain.lags.lock().expect("not poisoned"));
    let all_through_ns = chain
        .last_done_at
        .load(Ordering::SeqCst)
        .saturating_sub(first_release) as f64;
    Ok(Measured {
        lags,
        peak_threads: peak,
        all_through_ns,
    })
}

/// Waits until `done`, counting the threads meanwhile; fails when a waiter
/// failed, or after [`RUN_WITHIN`].
fn wait(
    chain: &Chain,
    peak: &mut usize,
    what: &str,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let give_up = Instant::now() + RUN_WITHIN;
    loop {
        *peak = (*peak).max(procfs::threads()?);
        if let Some(e) = &*chain.failed.lock().expect("not poisoned") {
            bail!("a waiter failed: {e}");
        }
        if done()? {
            return Ok(());
        }
        if Instant::now() > give_up {
            bail!("gave up waiting for {what} after {RUN_WITHIN:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
