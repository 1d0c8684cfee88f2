//! The printed report: Markdown tables, one per comparison, each row with its
//! median, its ratio to the floor of the same rounds, and its target.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::args::{Args, Size};
use crate::handoff::{self, Placement, Variant};
use crate::{cycle, planted, process, scan, sys};
use lockfile_bench::format::{ratio, time, uname, verdict};
use lockfile_bench::stats::Results;

/// Extra figures of the lock-cycle section that are not per-round timings.
#[derive(Debug)]
pub(crate) struct CycleExtras {
    pub(crate) python: std::result::Result<String, String>,
    pub(crate) allocs_per_heartbeat: f64,
    pub(crate) allocs_per_cycle: f64,
}

#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) text: String,
    missed: Vec<String>,
}

impl Report {
    pub(crate) fn new(args: &Args, size: &Size, seed: u64, tmp: &Path) -> Result<Report> {
        let rounds = size.rounds;
        let mut text = String::new();
        let mode = if args.quick { "--quick" } else { "full" };
        let uname = uname();
        writeln!(
            text,
            "# lockfile compare ({mode}): {rounds} measured rounds after 1 warm-up round ({} for lock cycles, of {} cycles per variant), variants shuffled in every round (seed {seed})\n",
            size.cycle_rounds, size.batch
        )?;
        writeln!(
            text,
            "Machine: {} CPUs, {uname}; lock files in the temporary directory, on {}.\n",
            sys::allowed_cpus().len(),
            lockfile_bench::fs::filesystem_of(tmp)?
        )?;
        writeln!(
            text,
            "Medians over rounds; \"× floor\" is the median over rounds of (variant / floor of the same round).\n"
        )?;
        Ok(Report {
            text,
            missed: Vec::new(),
        })
    }

    fn line(&mut self, s: &str) {
        self.text.push_str(s);
        self.text.push('\n');
    }

    fn judge(&mut self, what: &str, value: f64, limit: f64) -> &'static str {
        let v = verdict(value, limit);
        if v == "MISSED" {
            self.missed.push(what.to_owned());
        }
        v
    }

    pub(crate) fn cycles(&mut self, r: &Results, extras: &CycleExtras) {
        self.line("## Lock cycle: open, lock, unlock, close (uncontended, one file per variant)\n");
        self.line("| variant | median per cycle | × floor | target | verdict |");
        self.line("|---|---:|---:|---|---|");
        let rows = [
            (cycle::FLOOR, ""),
            (cycle::STD, ""),
            (cycle::FS2, ""),
            (cycle::FS4, ""),
            (cycle::FD_LOCK, ""),
            (cycle::PYTHON, "for scale"),
            (cycle::OURS, "≤ 2.0×"),
            (cycle::REPLICA, "explains ours"),
            (cycle::REPLICA_PATH_STAT, "the syscall saved"),
        ];
        for (name, target) in rows {
            if name == cycle::PYTHON && !r.has(name) {
                let why = extras.python.as_ref().err().cloned().unwrap_or_default();
                self.line(&format!("| {name} | {why} | | {target} | |"));
                continue;
            }
            let label = match (&extras.python, name) {
                (Ok(version), cycle::PYTHON) => {
                    format!("Python filelock {version} acquire + release")
                }
                _ => name.to_owned(),
            };
            let x = r.ratio(name, cycle::FLOOR);
            let v = match name {
                cycle::OURS => self.judge("try_acquire + release ≤ 2.0× floor", x, 2.0),
                _ => "",
            };
            self.line(&format!(
                "| {label} | {} | {} | {target} | {v} |",
                time(r.median(name)),
                ratio(x)
            ));
        }
        let over_replica = r.ratio(cycle::OURS, cycle::REPLICA);
        let replica_verdict = self.judge(
            "try_acquire + release ≤ 1.10× its raw replica",
            over_replica,
            1.10,
        );
        self.line(&format!(
            "\nOurs against the raw replica of its own syscalls: {} (target ≤ 1.10×: {replica_verdict}).",
            ratio(over_replica)
        ));
        let alloc_verdict = self.judge(
            "at most 1 allocation per cycle",
            extras.allocs_per_cycle,
            1.0,
        );
        self.line(&format!(
            "Ours allocates {:.1} times per cycle (counted by this program's global allocator; target ≤ 1: {alloc_verdict}).\n",
            extras.allocs_per_cycle
        ));

        self.line("### Contended: try_acquire against a held lock\n");
        self.line("| variant | median per call | × floor |");
        self.line("|---|---:|---:|");
        for name in [cycle::FLOOR_HELD, cycle::OURS_HELD] {
            self.line(&format!(
                "| {name} | {} | {} |",
                time(r.median(name)),
                ratio(r.ratio(name, cycle::FLOOR_HELD))
            ));
        }

        self.line(
            "\n### Where our cycle's time goes: each syscall timed alone, in the same rounds\n",
        );
        self.line("| syscall | median | × floor cycle |");
        self.line("|---|---:|---:|");
        let singles = [
            cycle::SYS_OPEN_CLOSE,
            cycle::SYS_FLOCK_PAIR,
            cycle::SYS_FSTAT,
            cycle::SYS_PREAD,
            cycle::SYS_PWRITE_RECORD,
            cycle::SYS_PWRITE_FLAG,
        ];
        for name in singles.iter().chain(&[cycle::SYS_LSTAT]) {
            self.line(&format!(
                "| {name} | {} | {} |",
                time(r.median(name)),
                ratio(r.ratio(name, cycle::FLOOR))
            ));
        }
        let floor_syscalls = r.median(cycle::SYS_OPEN_CLOSE) + r.median(cycle::SYS_FLOCK_PAIR);
        let ours_syscalls: f64 = singles.iter().map(|n| r.median(n)).sum();
        let floor = r.median(cycle::FLOOR);
        let user = r.median(cycle::OURS) - r.median(cycle::REPLICA);
        self.line(&format!(
            "| sum of the floor's 4 syscalls | {} | {} |",
            time(floor_syscalls),
            ratio(floor_syscalls / floor)
        ));
        self.line(&format!(
            "| sum of our 8 syscalls | {} | {} |",
            time(ours_syscalls),
            ratio(ours_syscalls / floor)
        ));
        self.line(&format!(
            "| ours − raw replica: user-space work (record encode, peek, token, checks) | {} | {} |",
            time(user),
            ratio(user / floor)
        ));
        self.line(&format!(
            "| {} (cycle) | {} | {} |",
            cycle::REPLICA_PLAIN,
            time(r.median(cycle::REPLICA_PLAIN)),
            ratio(r.ratio(cycle::REPLICA_PLAIN, cycle::FLOOR))
        ));

        self.line("\n## Heartbeat\n");
        self.line(
            "| variant | median per call | × floor | allocations per call | target | verdict |",
        );
        self.line("|---|---:|---:|---:|---|---|");
        self.line(&format!(
            "| {} | {} | | | | |",
            cycle::HB_FLOOR,
            time(r.median(cycle::HB_FLOOR))
        ));
        let hb = r.median(cycle::HB_OURS);
        let allocs = extras.allocs_per_heartbeat;
        let ok_time = verdict(hb, 2_000.0);
        let ok_alloc = verdict(allocs, 0.0);
        let v = if ok_time == "met" && ok_alloc == "met" {
            "met"
        } else {
            self.missed
                .push("heartbeat < 2 µs, no allocation".to_owned());
            "MISSED"
        };
        self.line(&format!(
            "| {} | {} | {} | {allocs} | < 2 µs, 0 allocations | {v} |",
            cycle::HB_OURS,
            time(hb),
            ratio(r.ratio(cycle::HB_OURS, cycle::HB_FLOOR))
        ));
        self.line("");
    }

    pub(crate) fn handoffs(&mut self, r: &Results, cpu_wait: Duration) {
        self.line("## Handoff: B's wake-up delay after A releases (CLOCK_MONOTONIC stamps in both processes)\n");
        self.line("| placement | variant | samples | median | p99 | × floor (median) | × replica (median) | target | verdict |");
        self.line("|---|---|---:|---:|---:|---:|---:|---|---|");
        for placement in [Placement::OneCpu, Placement::TwoCpus] {
            let floor = handoff::key(placement, Variant::Floor);
            if !r.has(&floor) {
                self.line(&format!(
                    "| {} | not measured: fewer than 2 CPUs | | | | | | | |",
                    placement.name()
                ));
                continue;
            }
            for variant in Variant::ALL {
                let key = handoff::key(placement, variant);
                let x = r.ratio(&key, &floor);
                // Each wait is judged against the replica of the syscalls it
                // makes after the wake-up: the wake-up itself is the floor's,
                // and what follows it is the record's (and, for the bounded
                // wait, its timer's).
                let replica = match variant {
                    Variant::Bounded => Variant::BoundedReplica,
                    _ => Variant::Replica,
                };
                let over_replica = r.ratio(&key, &handoff::key(placement, replica));
                let (target, v) = match variant {
                    Variant::Floor => ("", ""),
                    Variant::Replica | Variant::BoundedReplica => ("explains ours", ""),
                    Variant::Acquire | Variant::Bounded => (
                        "≤ 1.1× replica",
                        self.judge(
                            &format!(
                                "{} ≤ 1.1× the replica, {}",
                                variant.name(),
                                placement.name()
                            ),
                            over_replica,
                            1.1,
                        ),
                    ),
                };
                let shown_over_replica = match variant {
                    Variant::Acquire | Variant::Bounded => ratio(over_replica),
                    _ => String::new(),
                };
                self.line(&format!(
                    "| {} | {} | {} | {} | {} | {} | {shown_over_replica} | {target} | {v} |",
                    placement.name(),
                    variant.name(),
                    r.sample_count(&key),
                    time(r.median(&key)),
                    time(r.sample_percentile(&key, 99.0)),
                    ratio(x)
                ));
            }
        }
        self.line(&format!(
            "\n### CPU used by B while it waits {:.1} s (getrusage, user + system, unpinned)\n",
            cpu_wait.as_secs_f64()
        ));
        self.line("| variant | CPU, % of one core | target | verdict |");
        self.line("|---|---:|---|---|");
        for variant in Variant::CPU {
            let share = r.extra_median(&handoff::cpu_key(variant));
            let (target, v) = match variant {
                Variant::Bounded => ("< 1%", self.judge("bounded wait CPU < 1%", share, 0.01)),
                _ => ("", ""),
            };
            self.line(&format!(
                "| {} | {:.3}% | {target} | {v} |",
                variant.name(),
                share * 100.0
            ));
        }
        self.line("");
    }

    pub(crate) fn scans(&mut self, r: &Results, files: usize, held: usize, unrelated: usize) {
        self.line(&format!(
            "## Scan: a directory of {files} lock files, {held} held by another process\n"
        ));
        self.line("| variant | median per file | × floor | target | verdict |");
        self.line("|---|---:|---:|---|---|");
        let x = r.ratio(scan::OURS, scan::FLOOR);
        let v = self.judge("inspect_dir ≤ 1.0× the probe loop", x, 1.0);
        self.line(&format!(
            "| {} | {} | | | |",
            scan::FLOOR,
            time(r.median(scan::FLOOR))
        ));
        self.line(&format!(
            "| {} | {} | {} | ≤ 1.0× | {v} |",
            scan::OURS,
            time(r.median(scan::OURS)),
            ratio(x)
        ));
        self.line(&format!(
            "| {} | {} | {} | explains ours | |",
            scan::REPLICA,
            time(r.median(scan::REPLICA)),
            ratio(r.ratio(scan::REPLICA, scan::FLOOR))
        ));
        self.line(&format!(
            "| {} | {} | | | |",
            scan::ONE_FLOOR,
            time(r.median(scan::ONE_FLOOR))
        ));
        self.line(&format!(
            "| {} | {} | {} | | |",
            scan::ONE_OURS,
            time(r.median(scan::ONE_OURS)),
            ratio(r.ratio(scan::ONE_OURS, scan::ONE_FLOOR))
        ));
        self.line(&format!(
            "\nOurs against the raw replica of its own syscalls: {} (the rest is the report).\n",
            ratio(r.ratio(scan::OURS, scan::REPLICA))
        ));
        // Both as shares of the floor of the same rounds: a difference of two
        // medians taken over different rounds would mean little here.
        let report_share = r.ratio(scan::OURS, scan::FLOOR) - r.ratio(scan::REPLICA, scan::FLOOR);
        self.line("### Where a file's time differs: timed alone, in the same rounds\n");
        self.line("| per file | median | × floor per file |");
        self.line("|---|---:|---:|");
        for name in [scan::PROBE_ALONE, scan::STATX_ALONE, scan::DECODE_ALONE] {
            self.line(&format!(
                "| {name} | {} | {} |",
                time(r.median(name)),
                ratio(r.ratio(name, scan::FLOOR))
            ));
        }
        self.line(&format!(
            "| ours − raw replica: the report (paths, state, holders, findings) | {} | {} |",
            time(report_share * r.median(scan::FLOOR)),
            ratio(report_share)
        ));
        self.line(&format!(
            "\n### One file on a busy host: {unrelated} unrelated locks held elsewhere\n"
        ));
        self.line("| variant | median per call | × floor | × the same call on a quiet host |");
        self.line("|---|---:|---:|---:|");
        for (name, quiet) in [
            (scan::BUSY_FLOOR, scan::ONE_FLOOR),
            (scan::BUSY_OURS, scan::ONE_OURS),
        ] {
            self.line(&format!(
                "| {name} | {} | {} | {} |",
                time(r.median(name)),
                ratio(r.ratio(name, scan::BUSY_FLOOR)),
                ratio(r.median(name) / r.median(quiet))
            ));
        }
        self.line("");
    }

    pub(crate) fn planted(&mut self, r: &Results) {
        let files = planted::PLANTED_FILES;
        self.line(&format!(
            "## What others can make a scan cost: {files} records naming live processes that do not hold the locks\n"
        ));
        self.line(&format!(
            "The one process has {:.0} open descriptors; the many are {:.0} processes with {:.0} each. \"Crowded\": a child holds 200 unrelated locks, so that the kernel's lock table comes in several reads and settling a file may take walking its owner's descriptors.\n",
            r.extra_median(planted::ONE_FDS),
            r.extra_median(planted::PLANTERS),
            r.extra_median(planted::MANY_FDS),
        ));
        self.line("| table | variant | median scan | × ordinary | undecided files | share of 3× ordinary + 0.25 s | verdict |");
        self.line("|---|---|---:|---:|---:|---:|---|");
        for crowded in [false, true] {
            let table = if crowded { "crowded" } else { "quiet" };
            let ordinary = planted::key(planted::ORDINARY, crowded);
            for which in [
                planted::ORDINARY,
                planted::ONE_PROCESS,
                planted::MANY_PROCESSES,
            ] {
                let key = planted::key(which, crowded);
                let (share, v) = if which == planted::ORDINARY {
                    (String::new(), "")
                } else {
                    let x = r.median(&planted::allowance_key(&key));
                    let v = self.judge(
                        &format!("{which}, {table} table ≤ 3× ordinary + 0.25 s"),
                        x,
                        1.0,
                    );
                    (ratio(x), v)
                };
                self.line(&format!(
                    "| {table} | {which} | {} | {} | {:.0} | {share} | {v} |",
                    time(r.median(&key) * 1e9),
                    ratio(r.ratio(&key, &ordinary)),
                    r.extra_median(&format!("undecided|{key}")),
                ));
            }
        }
        self.line("");
    }

    pub(crate) fn processes(&mut self, r: &Results, flock_missing: Option<String>) {
        self.line("## Whole process: spawn, run, reap (peak RSS from wait4)\n");
        self.line("| command | runs | median wall | × true | × flock(1) | median peak RSS | RSS × flock(1) | target | verdict |");
        self.line("|---|---:|---:|---:|---:|---:|---:|---|---|");
        let rss = |name: &str| r.extra_median(&format!("rss|{name}"));
        for name in [
            process::TRUE,
            process::FLOCK,
            process::OURS,
            process::OURS_AS_LINKED,
            process::OURS_AS_FLOCK,
            process::OURS_START,
        ] {
            if !r.has(name) {
                let why = flock_missing.clone().unwrap_or_default();
                self.line(&format!("| {name} | {why} | | | | | | | |"));
                continue;
            }
            let x_flock = r.ratio(name, process::FLOCK);
            let rss_x = rss(name) / rss(process::FLOCK);
            let (target, v) = if name == process::OURS {
                let wall = self.judge("lockfile run wall ≤ 1.25× flock(1)", x_flock, 1.25);
                let mem = self.judge("lockfile run peak RSS ≤ 2.0× flock(1)", rss_x, 2.0);
                (
                    "wall ≤ 1.25×, RSS ≤ 2.0×",
                    format!("wall {wall}, RSS {mem}"),
                )
            } else {
                ("", String::new())
            };
            self.line(&format!(
                "| {name} | {} | {} | {} | {} | {:.0} KiB | {} | {target} | {v} |",
                r.sample_count(name),
                time(r.median(name)),
                ratio(r.ratio(name, process::TRUE)),
                ratio(x_flock),
                rss(name),
                ratio(rss_x)
            ));
        }
        self.line(
            "\nThe `lockfile` measured is a copy of `--lockfile-bin`, written as an install writes it; \"the linker's own file\" runs `--lockfile-bin` itself, whose page cache is built in smaller pieces (see BENCHMARKS.md); \"lockfile as flock\" runs the copy through a symlink named `flock`, as the drop-in is installed.",
        );
        self.line(&format!(
            "\nThe launcher that forks and execs each command has a floor of {:.0} KiB (fork + _exit): no RSS figure can be lower.\n",
            r.extra_median(process::LAUNCHER_RSS)
        ));
    }

    pub(crate) fn finish(&mut self, took: Duration) {
        if self.missed.is_empty() {
            self.line("Every target in this run: met.");
        } else {
            self.line(&format!(
                "Targets missed in this run: {}.",
                self.missed.join("; ")
            ));
        }
        self.line(&format!("\nThe run took {:.0} s.", took.as_secs_f64()));
    }
}
