//! The coordinator: sets up a run, starts every process, runs the chaos loop,
//! and prints the summary.

mod chaos;
mod fleet;
mod pidfd;
mod summary;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::args::RunConfig;
use crate::board::{Board, Layout, Rng};
use crate::lease::Leases;
use chaos::{Chaos, strike};
use fleet::{Kind, Worker};
use summary::{LeaseRun, Summary};

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

fn run(cfg: RunConfig) -> Result<bool> {
    let me = std::env::current_exe()?;
    let lockfile_bin = locate_lockfile(&cfg, &me)?;
    let leases = Leases::from_args(&cfg.engine)?;
    if let Some(leases) = &leases {
        leases.prepare()?;
    }
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
    board
        .sabotage_fencing
        .store(u32::from(cfg.sabotage_fencing), SeqCst);
    if leases.is_none() {
        plant_litter(&layout)?;
    }

    let run_workers = cfg
        .run_workers
        .unwrap_or((cfg.workers / 3).max(1))
        .min(cfg.workers);
    let library_workers = cfg.workers - run_workers;
    let what = match &leases {
        None => "lock(s)".to_owned(),
        Some(l) => format!(
            "{} lease(s) with a {} s TTL",
            l.server_kind(),
            l.ttl.as_secs_f64()
        ),
    };
    println!(
        "lockfile-torture: {} workers ({library_workers} library, {run_workers} `lockfile run`) x {} rounds on {} {what}, SIGKILL every {} ms, sections up to {} us",
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
    // The probe, the inspector and the reaper work on lock files.
    let mut helpers = Vec::new();
    if leases.is_none() {
        helpers = vec![
            ("probe", spawn_role(&["probe"])?),
            (
                "inspector",
                spawn_role(&["inspector", "--lockfile-bin", bin])?,
            ),
            ("reaper", spawn_role(&["reaper", "--lockfile-bin", bin])?),
        ];
    }
    let lease_args: Vec<String> = leases.as_ref().map(Leases::args).unwrap_or_default();
    let spawn_worker = |slot: usize, kind: Kind| -> Result<Child> {
        let s = slot.to_string();
        let mut args = match (kind, leases.is_some()) {
            (Kind::Library, false) => vec!["worker", "--slot", &s],
            (Kind::Run, false) => vec!["driver", "--slot", &s, "--lockfile-bin", bin],
            (Kind::Library, true) => vec!["lease-worker", "--slot", &s],
            (Kind::Run, true) => vec!["lease-driver", "--slot", &s, "--lockfile-bin", bin],
        };
        args.extend(lease_args.iter().map(String::as_str));
        spawn_role(&args)
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
            strike(
                leases.is_some(),
                board,
                &mut workers,
                &mut rng,
                &mut chaos,
                &spawn_worker,
            )?;
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
            match &leases {
                None => eprintln!(
                    "  {}: {:?}",
                    layout.lock(k).display(),
                    lockfile::inspect(layout.lock(k))
                ),
                Some(l) => match l.engine() {
                    Ok(engine) => {
                        eprintln!("  {}", crate::lease::worker::inspected(engine.as_ref(), k))
                    }
                    Err(e) => eprintln!("  {e:#}"),
                },
            }
        }
    }

    let lease_run = match &leases {
        None => None,
        Some(l) => Some(LeaseRun {
            server: l.server_kind(),
            ttl: l.ttl,
            logs: (0..cfg.locks)
                .map(|k| crate::detector::logged_tokens(&layout.detector(k)))
                .collect::<Result<_>>()?,
        }),
    };
    let summary = Summary::gather(
        board,
        &chaos,
        elapsed,
        failed_exits + hung.len() as u64,
        lease_run,
    );
    summary.print();
    if cfg.dir.is_some() {
        println!("run directory kept: {}", dir.display());
    }
    Ok(summary.passed())
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
