//! `compare`: the lockfile crate against raw syscalls, std, fs2, fs4,
//! fd-lock, Python's filelock and util-linux flock(1), in one process run.
//!
//! Every figure is a ratio against a floor measured in the same round: the
//! machines this runs on are shared and noisy, and an absolute time means
//! little there. Variants run in a freshly shuffled order in every round,
//! after one warm-up round that is thrown away. See BENCHMARKS.md.

mod alloc;
mod args;
mod cycle;
mod handoff;
mod planted;
mod process;
mod python;
mod scan;
mod sys;
mod table;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Parser as _;

use crate::args::{Args, Section, Size};
use crate::handoff::{Handoff, Placement, Variant};
use crate::planted::{ONE_PROCESS_DESCRIPTORS, PLANTED_FILES};
use crate::table::CycleExtras;
use lockfile_bench::stats::{Results, Rng};

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--child") {
        return child_main(&argv[2..]);
    }
    let args = Args::parse();
    let size = Size::new(&args);
    let seed = args
        .seed
        .unwrap_or_else(|| sys::mono_ns() ^ u64::from(std::process::id()));
    let mut rng = Rng::new(seed);
    let exe = std::env::current_exe().context("cannot find this program")?;
    let want = |s: Section| args.only.is_empty() || args.only.contains(&s);
    let lockfile_bin = match &args.lockfile_bin {
        Some(p) => p.clone(),
        None => exe.with_file_name("lockfile"),
    };
    if want(Section::Process) && !lockfile_bin.is_file() {
        bail!(
            "the lockfile binary is missing at {}: build it with `cargo build --release -p lockfile-cli`, or pass --lockfile-bin PATH",
            lockfile_bin.display()
        );
    }

    // Started before this process grows: see `process::Launcher`.
    let launcher = if want(Section::Process) {
        Some(process::Launcher::start(&exe)?)
    } else {
        None
    };
    let tmp = tempfile::Builder::new()
        .prefix("lockfile-bench-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let started = Instant::now();
    let mut report = table::Report::new(&args, &size, seed, tmp.path())?;

    if want(Section::Cycle) {
        eprintln!("lock cycles...");
        let results = measure_cycles(&size, &mut rng, &tmp.path().join("cycle"))?;
        report.cycles(&results.0, &results.1);
    }
    if want(Section::Handoff) {
        eprintln!("handoffs...");
        let results = measure_handoffs(&size, &mut rng, &exe, &tmp.path().join("handoff"))?;
        report.handoffs(&results, size.cpu_wait);
    }
    if want(Section::Scan) {
        eprintln!("scans...");
        let unrelated = args
            .unrelated
            .unwrap_or(if args.quick { 1_000 } else { 10_000 });
        let results = measure_scans(&args, &size, &mut rng, &exe, tmp.path(), unrelated)?;
        report.scans(&results, args.files, args.held, unrelated);
    }
    if want(Section::Planted) {
        eprintln!("planted scans...");
        let results = measure_planted(&args, &size, &mut rng, &exe, tmp.path())?;
        report.planted(&results);
    }
    if let Some(mut launcher) = launcher {
        eprintln!("whole processes...");
        let (results, flock) = measure_processes(
            &size,
            &mut rng,
            &mut launcher,
            &lockfile_bin,
            &tmp.path().join("process"),
        )?;
        report.processes(&results, flock.err());
    }
    report.finish(started.elapsed());
    print!("{}", report.text);
    Ok(())
}

/// The hidden roles of the child processes this program starts.
fn child_main(args: &[String]) -> Result<()> {
    match args {
        [role] if role == "launcher" => process::launcher_main(),
        [role, path] if role == "waiter" => handoff::waiter_main(PathBuf::from(path)),
        [role, dir, count, step] if role == "holder" => {
            scan::holder_main(PathBuf::from(dir), count.parse()?, step.parse()?)
        }
        [role, dir, first, count, descriptors] if role == "planter" => planted::planter_main(
            PathBuf::from(dir),
            first.parse()?,
            count.parse()?,
            descriptors.parse()?,
        ),
        _ => bail!("unknown child role {args:?}"),
    }
}

fn measure_cycles(
    size: &Size,
    rng: &mut Rng,
    dir: &std::path::Path,
) -> Result<(Results, CycleExtras)> {
    std::fs::create_dir_all(dir)?;
    let python = python::PythonFileLock::start(&dir.join("python.lock"));
    let python_version = python
        .as_ref()
        .map(|p| p.version.clone())
        .map_err(Clone::clone);
    let (mut benches, holdings) = cycle::benches(dir, size.batch, python.ok())?;
    let mut results = Results::default();
    for round in 0..=size.cycle_rounds {
        let mut order: Vec<usize> = (0..benches.len()).collect();
        rng.shuffle(&mut order);
        // Round 0 warms caches, the allocator and the interpreter up, and is
        // thrown away.
        if round > 0 {
            results.start_round();
        }
        for i in order {
            let bench = &mut benches[i];
            let ns = (bench.run)(bench.batch)
                .with_context(|| format!("while measuring {}", bench.name))?;
            if round > 0 {
                results.record(bench.name, ns / bench.batch as f64);
            }
        }
    }
    let (allocs_per_heartbeat, allocs_per_cycle) =
        cycle::count_allocations(dir, &holdings.heartbeat)?;
    Ok((
        results,
        CycleExtras {
            python: python_version,
            allocs_per_heartbeat,
            allocs_per_cycle,
        },
    ))
}

fn measure_handoffs(
    size: &Size,
    rng: &mut Rng,
    exe: &std::path::Path,
    dir: &std::path::Path,
) -> Result<Results> {
    std::fs::create_dir_all(dir)?;
    let mut handoff = Handoff::start(exe, dir)?;
    let placements: Vec<Placement> = if handoff.cpus().len() >= 2 {
        vec![Placement::OneCpu, Placement::TwoCpus]
    } else {
        vec![Placement::OneCpu]
    };
    let mut results = Results::default();
    for round in 0..=size.rounds {
        let mut combos: Vec<(Placement, Variant)> = placements
            .iter()
            .flat_map(|&p| Variant::ALL.map(|v| (p, v)))
            .collect();
        rng.shuffle(&mut combos);
        if round > 0 {
            results.start_round();
        }
        for (placement, variant) in combos {
            handoff.place(placement)?;
            let n = if round == 0 { 3 } else { size.handoffs };
            let samples = (0..n)
                .map(|_| handoff.once(variant))
                .collect::<Result<Vec<f64>>>()?;
            if round > 0 {
                results.record_samples(&handoff::key(placement, variant), &samples);
            }
        }
    }
    // The CPU a long wait costs, unpinned, once per variant.
    handoff.unpin()?;
    let mut variants = Variant::CPU;
    rng.shuffle(&mut variants);
    for variant in variants {
        let share = handoff.cpu_while_waiting(variant, size.cpu_wait)?;
        results.record_extra(&handoff::cpu_key(variant), share);
    }
    Ok(results)
}

fn measure_scans(
    args: &Args,
    size: &Size,
    rng: &mut Rng,
    exe: &std::path::Path,
    tmp: &std::path::Path,
    unrelated: usize,
) -> Result<Results> {
    let scan_dir = scan::ScanDir::create(exe, tmp.join("scan"), args.files, args.held)?;
    let one = scan_dir.free_file();
    let mut results = Results::default();
    for round in 0..=size.rounds {
        let mut order = [
            scan::FLOOR,
            scan::OURS,
            scan::REPLICA,
            scan::ONE_FLOOR,
            scan::ONE_OURS,
            scan::PROBE_ALONE,
            scan::STATX_ALONE,
            scan::DECODE_ALONE,
        ];
        rng.shuffle(&mut order);
        if round > 0 {
            results.start_round();
        }
        for which in order {
            let per_op = match which {
                scan::ONE_FLOOR => scan::one_floor(&one, size.inspects)? / size.inspects as f64,
                scan::ONE_OURS => scan::one_ours(&one, size.inspects)? / size.inspects as f64,
                scan::PROBE_ALONE | scan::STATX_ALONE | scan::DECODE_ALONE => {
                    scan::alone(&one, which, args.files)? / args.files as f64
                }
                _ => scan::scan_per_file(&scan_dir, which)?,
            };
            if round > 0 {
                results.record(which, per_op);
            }
        }
    }
    // The same one-file rows again while a child holds `unrelated` locks
    // elsewhere: `inspect` reads the whole lock table, the floor does not.
    // Rounds of their own, after the others, so that only these see the
    // crowded table.
    let _busy = scan::ScanDir::create(exe, tmp.join("unrelated"), unrelated, unrelated)?;
    // Each call costs milliseconds here: fewer of them keep the run short.
    let inspects = size.inspects.min(50);
    for round in 0..=size.rounds {
        let mut order = [scan::BUSY_FLOOR, scan::BUSY_OURS];
        rng.shuffle(&mut order);
        if round > 0 {
            results.start_round();
        }
        for which in order {
            let per_op = match which {
                scan::BUSY_FLOOR => scan::one_floor(&one, inspects)?,
                _ => scan::one_ours(&one, inspects)?,
            } / inspects as f64;
            if round > 0 {
                results.record(which, per_op);
            }
        }
    }
    Ok(results)
}

/// What others can make a scan cost (see `planted`): the three directories
/// scanned in shuffled order every round, first with the kernel's lock
/// table read in one piece, then with a child holding enough unrelated
/// locks that it comes in pieces, where settling a file may take walking
/// its owner's descriptors.
fn measure_planted(
    args: &Args,
    size: &Size,
    rng: &mut Rng,
    exe: &std::path::Path,
    tmp: &std::path::Path,
) -> Result<Results> {
    let files = PLANTED_FILES;
    let limit = planted::descriptor_limit();
    let one_fds = ONE_PROCESS_DESCRIPTORS.min(limit);
    let planters = args
        .planters
        .unwrap_or(if args.quick { 100 } else { files })
        .clamp(1, files);
    let many_fds = args.planter_descriptors.min(limit);
    let ordinary = planted::PlantedDir::ordinary(tmp.join("ordinary"), files)?;
    let one = planted::PlantedDir::planted(exe, tmp.join("one"), files, 1, one_fds)?;
    let many = planted::PlantedDir::planted(exe, tmp.join("many"), files, planters, many_fds)?;
    let mut results = Results::default();
    results.record_extra(planted::ONE_FDS, one_fds as f64);
    results.record_extra(planted::PLANTERS, planters as f64);
    results.record_extra(planted::MANY_FDS, many_fds as f64);
    for crowded in [false, true] {
        // Enough locks held elsewhere that /proc/locks takes several reads.
        let _crowd = if crowded {
            Some(scan::ScanDir::create(exe, tmp.join("crowd"), 200, 200)?)
        } else {
            None
        };
        for round in 0..=size.rounds {
            let mut order = [
                (planted::ORDINARY, &ordinary),
                (planted::ONE_PROCESS, &one),
                (planted::MANY_PROCESSES, &many),
            ];
            rng.shuffle(&mut order);
            let mut took = std::collections::HashMap::new();
            for (which, dir) in order {
                let (seconds, undecided) = planted::scan_seconds(dir)?;
                took.insert(which, seconds);
                if round > 0 {
                    let key = planted::key(which, crowded);
                    results.record_extra(&format!("undecided|{key}"), undecided as f64);
                }
            }
            if round == 0 {
                continue;
            }
            results.start_round();
            let ordinary = took[planted::ORDINARY];
            for (which, seconds) in took {
                let key = planted::key(which, crowded);
                results.record(&key, seconds);
                // The share of its allowance, 3× the ordinary scan of the
                // same round plus a quarter of a second, that it used.
                let allowance = 3.0 * ordinary + planted::ALLOWANCE_SECONDS;
                results.record(&planted::allowance_key(&key), seconds / allowance);
            }
        }
    }
    Ok(results)
}

fn measure_processes(
    size: &Size,
    rng: &mut Rng,
    launcher: &mut process::Launcher,
    lockfile_bin: &std::path::Path,
    dir: &std::path::Path,
) -> Result<(Results, std::result::Result<(), String>)> {
    std::fs::create_dir_all(dir)?;
    let (truth, flock, ours) = process::programs(dir, lockfile_bin)?;
    let flock_missing = flock.as_ref().map(|_| ()).map_err(Clone::clone);
    let mut programs = vec![truth];
    programs.extend(ours);
    programs.extend(flock.ok());
    let mut results = Results::default();
    for _ in 0..10 {
        let (_, rss) = launcher.run(None)?;
        results.record_extra(process::LAUNCHER_RSS, rss);
    }
    for round in 0..=size.rounds {
        rng.shuffle(&mut programs);
        if round > 0 {
            results.start_round();
        }
        for p in &programs {
            let n = if round == 0 { 3 } else { size.processes };
            let mut walls = Vec::with_capacity(n);
            for _ in 0..n {
                let (wall, rss) = launcher.run(Some(p))?;
                walls.push(wall);
                if round > 0 {
                    results.record_extra(&format!("rss|{}", p.name), rss);
                }
            }
            if round > 0 {
                results.record_samples(p.name, &walls);
            }
        }
    }
    Ok((results, flock_missing))
}
