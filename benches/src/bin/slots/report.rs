//! The printed report: one Markdown table per figure.

use std::time::Duration;

use lockfile_bench::format::{ratio, time, uname};
use lockfile_bench::markdown::Markdown;
use lockfile_bench::stats::Results;

use crate::cost::{Op, PROC_LOCKS, PROC_LOCKS_LINES, Waiting, cost_key};
use crate::lag::{Ending, Waiter, key};

/// The targets: a freed slot taken within 50 ms (median) of its
/// release, and under 1% of a core while waiting.
const LAG_TARGET_NS: f64 = 50e6;
const CPU_TARGET_PERCENT: f64 = 1.0;

#[derive(Debug)]
pub(crate) struct Report {
    out: Markdown,
}

/// The text and its verdicts are the shared report's.
impl std::ops::Deref for Report {
    type Target = Markdown;

    fn deref(&self) -> &Markdown {
        &self.out
    }
}

impl std::ops::DerefMut for Report {
    fn deref_mut(&mut self) -> &mut Markdown {
        &mut self.out
    }
}

/// What the header says about the run.
#[derive(Debug)]
pub(crate) struct Run<'a> {
    pub(crate) quick: bool,
    pub(crate) rounds: usize,
    pub(crate) cost_rounds: usize,
    pub(crate) seed: u64,
    pub(crate) filesystem: &'a str,
}

impl Report {
    pub(crate) fn new(run: &Run<'_>) -> Report {
        let mode = if run.quick { "--quick" } else { "full" };
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let mut r = Report {
            out: Markdown::default(),
        };
        r.line(&format!(
            "# lockfile slots ({mode}): {} measured rounds after 1 warm-up round, one handoff of every variant in each; {} rounds of the costs; variants shuffled in every round (seed {})\n",
            run.rounds, run.cost_rounds, run.seed
        ));
        r.line(&format!(
            "Machine: {cpus} CPUs, {}; lock files in the temporary directory, on {}; no process pinned.\n",
            uname(),
            run.filesystem
        ));
        r.line("Lag: from the freeing process's CLOCK_MONOTONIC stamp (the holder's, just before `release()`; this program's, just before the SIGKILL) to the waiter's (just after `acquire` or `acquire_slot` returned, its record written). Medians; \"× floor\" is the median over rounds of (variant / floor of the same round); p90 and max over every sample.\n");
        r
    }

    pub(crate) fn lags(&mut self, r: &Results, ending: Ending, waiters: &[Waiter]) {
        self.line(match ending {
            Ending::Release => {
                "## Wake-up lag after the holder's `release()` (holder, waiter and this program: three processes)\n"
            }
            Ending::Kill => {
                "## Wake-up lag after the holder's SIGKILL (the kernel closes its descriptors)\n"
            }
        });
        self.line(
            "| waiter | samples | median | p90 | max | × floor (median) | target | verdict |",
        );
        self.line("|---|---:|---:|---:|---:|---:|---|---|");
        let floor = key(ending, Waiter::Plain);
        for &waiter in waiters {
            let k = key(ending, waiter);
            let median = r.median(&k);
            let (target, v) = match waiter {
                Waiter::Plain => ("", ""),
                Waiter::Slots(n) => {
                    let what = format!("{ending:?}, N = {n}: lag ≤ 50 ms (median)");
                    ("median ≤ 50 ms", self.judge(what, median, LAG_TARGET_NS))
                }
                Waiter::Replica(_) | Waiter::ReplicaLate(_) => ("the close's cost", ""),
            };
            self.line(&format!(
                "| {} | {} | {} | {} | {} | {} | {target} | {v} |",
                waiter.label(),
                r.sample_count(&k),
                time(median),
                time(r.sample_percentile(&k, 90.0)),
                time(r.sample_percentile(&k, 100.0)),
                ratio(r.ratio(&k, &floor)),
            ));
        }
        self.line("");
    }

    pub(crate) fn cpu(&mut self, waits: &[Waiting], window: Duration) {
        self.line(&format!(
            "## CPU used while waiting {:.0} s: every slot held, nothing released (one waiter of each kind, each a process of its own, all at once)\n",
            window.as_secs_f64()
        ));
        self.line(
            "| waiter | CPU, % of one core | CPU per second (one sweep) | voluntary context switches | target | verdict |",
        );
        self.line("|---|---:|---:|---:|---|---|");
        for w in waits {
            let percent = w.cpu_ns / w.wall_ns * 100.0;
            let (target, v) = match w.waiter {
                Waiter::Slots(n) => {
                    let what = format!("N = {n}: CPU while waiting < 1% of a core");
                    (
                        "< 1% of a core",
                        self.judge(what, percent, CPU_TARGET_PERCENT),
                    )
                }
                _ => ("", ""),
            };
            self.line(&format!(
                "| {} | {percent:.3}% | {} | {} | {target} | {v} |",
                w.waiter.label(),
                time(w.per_second()),
                w.wakeups,
            ));
        }
        self.line("\nCPU: the waiter's run time (/proc/PID/schedstat) over the window, from once it sleeps in its wait; a slot waiter sweeps every slot once a second, and sleeps in poll(2) in between (its voluntary context switches: at least one per sweep); the plain waiter sleeps in flock(2) throughout.\n");
    }

    pub(crate) fn costs(&mut self, r: &Results, waits: &[Waiting]) {
        self.line("## What a sweep and a try cost at N (every slot held by the holder)\n");
        self.line("| N | operation | median | × floor |");
        self.line("|---:|---|---:|---:|");
        let mut largest = None;
        for w in waits {
            let Waiter::Slots(n) = w.waiter else { continue };
            let floor = cost_key(Op::Probe, n);
            let sweep = w.per_second();
            for op in Op::ALL {
                let k = cost_key(op, n);
                self.line(&format!(
                    "| {n} | {} | {} | {} |",
                    op.label(),
                    time(r.median(&k)),
                    ratio(r.ratio(&k, &floor)),
                ));
                if op == Op::Probe {
                    self.line(&format!(
                        "| {n} | the waiter's sweep: its CPU per second of waiting in the window above (one sweep a second) | {} | {} |",
                        time(sweep),
                        ratio(sweep / r.median(&floor)),
                    ));
                }
            }
            largest = Some(n);
        }
        self.line("\nThe sweep's ratio is of medians: its CPU from the window above, the floor from these rounds.\n");
        if let Some(n) = largest {
            let read = r.median(PROC_LOCKS);
            self.line(&format!(
                "One read of /proc/locks ({:.0} lines: every lock on the host, the holder's included): {}, {} the raw probe of N = {n} held files.\n",
                r.extra_median(PROC_LOCKS_LINES),
                time(read),
                ratio(r.ratio(PROC_LOCKS, &cost_key(Op::Probe, n))),
            ));
        }
    }

    pub(crate) fn finish(&mut self, took: Duration) {
        self.targets(took);
    }
}
