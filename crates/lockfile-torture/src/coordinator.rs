//! The coordinator: sets up a run, starts every process, runs the chaos loop,
//! and prints the summary.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rustix::process::{Pid, PidfdFlags, Signal};

use crate::RunConfig;
use crate::board::{Board, Layout, Rng, now_ns, state};
use crate::worker::holding;

/// How long the coordinator waits for its processes to finish once the run
/// stopped before it calls them hung: a liveness net for a deadlock, far
/// above anything a healthy run needs.
const HANG_AFTER: Duration = Duration::from_secs(120);

pub(crate) fn main(cfg: RunConfig) -> i32 {
    match run(cfg) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("lockfile-torture: cannot run: {e:#}");
            2
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Library,
    Run,
}

#[derive(Debug)]
struct Worker {
    slot: usize,
    kind: Kind,
    child: Option<Child>,
    finished: bool,
}

/// What the chaos loop did.
#[derive(Debug, Default)]
struct Chaos {
    /// Kill time and lock of every library holder that died holding.
    library_deaths: Vec<(u32, u64)>,
    /// The same for sections under `lockfile run`.
    section_deaths: Vec<(u32, u64)>,
    /// Wrappers killed while their command ran (and kept the lock).
    wrappers_killed: u64,
    /// Library workers killed while waiting for a lock.
    waiters_killed: u64,
    /// Kills that landed just after the victim left its section.
    missed: u64,
}

impl Chaos {
    fn holders_killed(&self) -> u64 {
        (self.library_deaths.len() + self.section_deaths.len()) as u64 + self.wrappers_killed
    }
}

fn run(cfg: RunConfig) -> Result<bool> {
    let me = std::env::current_exe()?;
    let lockfile_bin = locate_lockfile(&cfg, &me)?;
    let temp;
    let dir: PathBuf = match &cfg.dir {
        Some(d) => d.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("lockfile-torture.")
                .tempdir()?;
            temp.path().to_path_buf()
        }
    };
    let layout = Layout { dir: dir.clone() };
    for d in [
        layout.locks_dir(),
        layout.dir.join("detectors"),
        layout.probe_dir(),
        layout.logs_dir(),
    ] {
        std::fs::create_dir_all(&d).with_context(|| format!("create {}", d.display()))?;
    }
    let board = Board::create(&dir, cfg.locks, cfg.rounds, cfg.hold_us)?;
    board.sabotage.store(u32::from(cfg.sabotage), SeqCst);
    plant_litter(&layout)?;

    let run_workers = cfg
        .run_workers
        .unwrap_or((cfg.workers / 3).max(1))
        .min(cfg.workers);
    let library_workers = cfg.workers - run_workers;
    println!(
        "lockfile-torture: {} workers ({library_workers} library, {run_workers} `lockfile run`) x {} rounds on {} lock(s), SIGKILL every {} ms, sections up to {} us",
        cfg.workers, cfg.rounds, cfg.locks, cfg.kill_every, cfg.hold_us
    );

    let spawn_role = |args: &[&str]| -> Result<Child> {
        Command::new(&me)
            .args(args)
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("spawn {}", me.display()))
    };
    let bin = lockfile_bin
        .to_str()
        .context("the lockfile path is not UTF-8")?;
    let mut helpers = [
        ("probe", spawn_role(&["probe"])?),
        (
            "inspector",
            spawn_role(&["inspector", "--lockfile-bin", bin])?,
        ),
        ("reaper", spawn_role(&["reaper", "--lockfile-bin", bin])?),
    ];
    let spawn_worker = |slot: usize, kind: Kind| -> Result<Child> {
        let s = slot.to_string();
        match kind {
            Kind::Library => spawn_role(&["worker", "--slot", &s]),
            Kind::Run => spawn_role(&["driver", "--slot", &s, "--lockfile-bin", bin]),
        }
    };
    let mut workers = Vec::new();
    for slot in 0..cfg.workers as usize {
        let kind = if slot < library_workers as usize {
            Kind::Library
        } else {
            Kind::Run
        };
        workers.push(Worker {
            slot,
            kind,
            child: Some(spawn_worker(slot, kind)?),
            finished: false,
        });
    }

    let started = Instant::now();
    let deadline = cfg.seconds.map(|s| started + Duration::from_secs_f64(s));
    let kill_every = Duration::from_millis(cfg.kill_every);
    let mut next_kill = started + kill_every;
    let mut chaos = Chaos::default();
    let mut rng = Rng::new(42);
    let mut failed_exits = 0u64;
    loop {
        for w in &mut workers {
            if let Some(child) = &mut w.child
                && let Some(status) = child.try_wait()?
            {
                w.child = None;
                w.finished = true;
                if !status.success() {
                    failed_exits += 1;
                    eprintln!(
                        "lockfile-torture: ERROR: worker {} ({:?}) exited with {status}",
                        w.slot, w.kind
                    );
                }
            }
        }
        if workers.iter().all(|w| w.finished) {
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if cfg.kill_every > 0 && Instant::now() >= next_kill {
            strike(board, &mut workers, &mut rng, &mut chaos, &spawn_worker)?;
            next_kill = Instant::now() + kill_every;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    board.stop.store(1, SeqCst);
    let elapsed = started.elapsed();

    // Wind down: workers finish their section and exit, drivers wait for
    // their orphans, helpers see the stop flag.
    let wind_down = Instant::now();
    let mut hung = Vec::new();
    let all = workers
        .iter_mut()
        .filter_map(|w| w.child.as_mut().map(|c| (format!("worker {}", w.slot), c)))
        .chain(helpers.iter_mut().map(|(n, c)| (n.to_string(), c)));
    for (name, child) in all {
        loop {
            match child.try_wait()? {
                Some(status) => {
                    if !status.success() {
                        failed_exits += 1;
                        eprintln!("lockfile-torture: ERROR: {name} exited with {status}");
                    }
                    break;
                }
                None if wind_down.elapsed() > HANG_AFTER => {
                    hung.push(format!("{name} (pid {})", child.id()));
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                None => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }
    if !hung.is_empty() {
        eprintln!(
            "lockfile-torture: ERROR: hung after the run stopped: {}",
            hung.join(", ")
        );
        for k in 0..cfg.locks {
            eprintln!(
                "  {}: {:?}",
                layout.lock(k).display(),
                lockfile::inspect(layout.lock(k))
            );
        }
    }

    let mut summary = Summary::gather(board, &chaos, elapsed, failed_exits + hung.len() as u64);
    summary.strict_inspect = cfg.strict_inspect;
    summary.print();
    if cfg.dir.is_some() {
        println!("run directory kept: {}", dir.display());
    }
    Ok(summary.passed())
}

/// One SIGKILL: mostly a holder (a library worker in its section, a section
/// under `lockfile run`, or the `lockfile run` wrapper while its command
/// runs), sometimes a library worker that is waiting for a lock.
fn strike(
    board: &Board,
    workers: &mut [Worker],
    rng: &mut Rng,
    chaos: &mut Chaos,
    spawn_worker: &dyn Fn(usize, Kind) -> Result<Child>,
) -> Result<()> {
    let live = |w: &&mut Worker| w.child.is_some();
    let waiters: Vec<usize> = workers
        .iter_mut()
        .filter(live)
        .filter(|w| {
            w.kind == Kind::Library && board.slot(w.slot).state.load(SeqCst) == state::WAITING
        })
        .map(|w| w.slot)
        .collect();
    let holders: Vec<usize> = workers
        .iter_mut()
        .filter(live)
        .filter(|w| holding(board.slot(w.slot)))
        .map(|w| w.slot)
        .collect();
    let pick = |v: &[usize], rng: &mut Rng| v[rng.below(v.len() as u64) as usize];
    let (index, holder) = if !waiters.is_empty() && (holders.is_empty() || rng.below(8) == 0) {
        (pick(&waiters, rng), false)
    } else if !holders.is_empty() {
        (pick(&holders, rng), true)
    } else {
        return Ok(());
    };
    let slot = board.slot(index);
    let lock = slot.lock.load(SeqCst);
    let w = workers
        .iter_mut()
        .find(|w| w.slot == index)
        .expect("a worker per slot");
    match w.kind {
        Kind::Library => {
            let child = w.child.as_mut().expect("live");
            let victim = child.id();
            let at = now_ns();
            child.kill()?;
            child.wait()?;
            let died_holding =
                slot.state.load(SeqCst) == state::HOLDING && slot.pid.load(SeqCst) == victim;
            match (holder, died_holding) {
                (_, true) => chaos.library_deaths.push((lock, at)),
                (false, false) => chaos.waiters_killed += 1,
                (true, false) => chaos.missed += 1,
            }
            // Carry on from the slot's count in a fresh process.
            if slot.done.load(SeqCst) < board.rounds.load(SeqCst) {
                w.child = Some(spawn_worker(index, Kind::Library)?);
            } else {
                w.child = None;
                w.finished = true;
            }
        }
        Kind::Run => {
            let section = slot.pid.load(SeqCst);
            let round = slot.section_round.load(SeqCst);
            let wrapper = slot.wrapper_pid.load(SeqCst);
            let wrapper_runs_it = wrapper != 0 && slot.wrapper_round.load(SeqCst) == round;
            if wrapper_runs_it && rng.below(2) == 0 {
                // The wrapper: its command keeps the lock, and must keep
                // excluding everyone until it exits.
                let Some(pidfd) = open_pidfd(wrapper) else {
                    return Ok(());
                };
                if !(holding(slot) && slot.section_round.load(SeqCst) == round) {
                    return Ok(());
                }
                kill_and_wait(&pidfd)?;
                if holding(slot) && slot.section_round.load(SeqCst) == round {
                    chaos.wrappers_killed += 1;
                } else {
                    chaos.missed += 1;
                }
            } else {
                // The section, the process that holds the lock (and the
                // detector) under `lockfile run`.
                let Some(pidfd) = open_pidfd(section) else {
                    return Ok(());
                };
                if !(holding(slot) && slot.pid.load(SeqCst) == section) {
                    return Ok(());
                }
                let at = now_ns();
                kill_and_wait(&pidfd)?;
                if holding(slot) && slot.pid.load(SeqCst) == section {
                    chaos.section_deaths.push((lock, at));
                } else {
                    chaos.missed += 1;
                }
            }
        }
    }
    Ok(())
}

/// A handle on a process that stays valid when the PID is reused.
fn open_pidfd(pid: u32) -> Option<OwnedFd> {
    let pid = Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::pidfd_open(pid, PidfdFlags::empty()).ok()
}

/// SIGKILLs the process and waits until it has exited (its descriptors are
/// closed by then).
fn kill_and_wait(pidfd: &OwnedFd) -> Result<()> {
    match rustix::process::pidfd_send_signal(pidfd.as_fd(), Signal::KILL) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => return Err(e).context("pidfd_send_signal"),
    }
    let mut fds = [libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    loop {
        // SAFETY: `fds` is a live array of one initialised pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, -1) };
        if n >= 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).context("poll a pidfd");
        }
    }
}

/// Leaves litter in the probe's directory, so that inspecting it has every
/// kind of file to read: debris, an empty file, a stale record.
fn plant_litter(layout: &Layout) -> Result<()> {
    let dir = layout.probe_dir();
    std::fs::write(dir.join("debris.lock"), b"\x00\xffnot a record")?;
    std::fs::write(dir.join("empty.lock"), b"")?;
    lockfile::LockGuard::acquire(dir.join("stale.lock"))?.disown();
    Ok(())
}

fn locate_lockfile(cfg: &RunConfig, me: &Path) -> Result<PathBuf> {
    let path = match &cfg.lockfile_bin {
        Some(p) => p.clone(),
        None => me
            .parent()
            .context("this executable has no directory")?
            .join("lockfile"),
    };
    if !path.is_file() {
        bail!(
            "no `lockfile` command at {}: build it (cargo build -p lockfile-cli) or pass --lockfile-bin",
            path.display()
        );
    }
    Ok(path)
}

/// The figures of a run.
#[derive(Debug)]
struct Summary {
    elapsed: Duration,
    sections: u64,
    acquisitions: u64,
    holders_killed: u64,
    library_killed: usize,
    sections_killed: usize,
    wrappers_killed: u64,
    waiters_killed: u64,
    missed: u64,
    reaped: u64,
    reap_passes: u64,
    overlaps: u64,
    detector_waits: u64,
    record_mismatches: u64,
    unlinked_while_held: u64,
    probe_attempts: u64,
    probe_failures: u64,
    inspections: u64,
    probe_contradictions: u64,
    stale_reports: u64,
    stale_while_owner_alive: u64,
    recovery_all: Vec<u64>,
    recovery_library: Vec<u64>,
    recovery_section: Vec<u64>,
    errors: u64,
    strict_inspect: bool,
}

impl Summary {
    fn gather(board: &Board, chaos: &Chaos, elapsed: Duration, failed_exits: u64) -> Summary {
        let log = board.acquisitions();
        let recovery = |deaths: &[(u32, u64)]| -> Vec<u64> {
            let mut v: Vec<u64> = deaths
                .iter()
                .filter_map(|&(lock, at)| {
                    // The victim held the lock when it was killed, so the
                    // first acquisition of that lock logged after the kill
                    // is the next one after its death.
                    let from = log.partition_point(|&(_, t)| t <= at);
                    log[from..]
                        .iter()
                        .find(|&&(l, _)| l == lock)
                        .map(|&(_, t)| t - at)
                })
                .collect();
            v.sort_unstable();
            v
        };
        let recovery_library = recovery(&chaos.library_deaths);
        let recovery_section = recovery(&chaos.section_deaths);
        let mut recovery_all = [recovery_library.clone(), recovery_section.clone()].concat();
        recovery_all.sort_unstable();
        Summary {
            elapsed,
            sections: board.sections(),
            acquisitions: board.acquisitions.load(SeqCst),
            holders_killed: chaos.holders_killed(),
            library_killed: chaos.library_deaths.len(),
            sections_killed: chaos.section_deaths.len(),
            wrappers_killed: chaos.wrappers_killed,
            waiters_killed: chaos.waiters_killed,
            missed: chaos.missed,
            reaped: board.reaped.load(SeqCst),
            reap_passes: board.reap_passes.load(SeqCst),
            overlaps: board.overlaps.load(SeqCst),
            detector_waits: board.detector_waits.load(SeqCst),
            record_mismatches: board.record_mismatches.load(SeqCst),
            unlinked_while_held: board.unlinked_while_held.load(SeqCst),
            probe_attempts: board.probe_attempts.load(SeqCst),
            probe_failures: board.probe_failures.load(SeqCst),
            inspections: board.inspections.load(SeqCst),
            probe_contradictions: board.probe_contradictions.load(SeqCst),
            stale_reports: board.stale_reports.load(SeqCst),
            stale_while_owner_alive: board.stale_while_owner_alive.load(SeqCst),
            recovery_all,
            recovery_library,
            recovery_section,
            errors: board.errors.load(SeqCst) + failed_exits,
            strict_inspect: false,
        }
    }

    fn passed(&self) -> bool {
        self.overlaps == 0
            && self.probe_failures == 0
            && self.errors == 0
            && self.record_mismatches == 0
            && self.unlinked_while_held == 0
            && (self.probe_contradictions == 0 || !self.strict_inspect)
    }

    fn print(&self) {
        let ms = |ns: u64| format!("{:.2} ms", ns as f64 / 1e6);
        let stats = |v: &[u64]| match v {
            [] => "n/a".to_owned(),
            _ => format!(
                "median {}, max {} (n={})",
                ms(v[(v.len() - 1) / 2]),
                ms(*v.last().unwrap()),
                v.len()
            ),
        };
        println!(
            "elapsed                                    {:.1} s",
            self.elapsed.as_secs_f64()
        );
        println!(
            "critical sections completed                {}",
            self.sections
        );
        println!(
            "acquisitions                               {}",
            self.acquisitions
        );
        println!(
            "holders killed (SIGKILL)                   {}  (library holders {}, `lockfile run` commands {}, `lockfile run` wrappers while their command ran {})",
            self.holders_killed, self.library_killed, self.sections_killed, self.wrappers_killed
        );
        println!(
            "other kills                                {} waiting workers, {} just after leaving their section",
            self.waiters_killed, self.missed
        );
        println!(
            "files reaped                               {}  ({} reap passes)",
            self.reaped, self.reap_passes
        );
        println!(
            "overlaps                                   {}  ({} detector checks waited for an exiting holder)",
            self.overlaps, self.detector_waits
        );
        println!(
            "held lock unlinked or its record overwritten {}",
            self.unlinked_while_held + self.record_mismatches
        );
        println!(
            "acquisitions failed because of inspect     {}  (probe: {} try_acquire, inspector: {} inspections)",
            self.probe_failures, self.probe_attempts, self.inspections
        );
        println!(
            "inspect contradicting the probe            {}{}",
            self.probe_contradictions,
            if self.strict_inspect {
                ""
            } else {
                "  (reported, not fatal without --strict-inspect)"
            }
        );
        println!(
            "`stale` verdicts on a live owner's lock    {}  (of {} `stale` verdicts)",
            self.stale_while_owner_alive, self.stale_reports
        );
        println!(
            "holder death -> next acquisition           {}",
            stats(&self.recovery_all)
        );
        println!(
            "  after a library holder's death           {}",
            stats(&self.recovery_library)
        );
        println!(
            "  after a `lockfile run` command's death   {}",
            stats(&self.recovery_section)
        );
        println!("unexpected errors                          {}", self.errors);
        println!(
            "result                                     {}",
            if self.passed() { "PASS" } else { "FAIL" }
        );
    }
}
