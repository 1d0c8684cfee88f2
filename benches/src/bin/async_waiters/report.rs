//! The printed report: one Markdown table per layout.

use std::time::Duration;

use lockfile_bench::format::{ratio, time, uname};
use lockfile_bench::markdown::Markdown;
use lockfile_bench::stats::Results;

use crate::chain::{Kind, Layout, WORKERS};

/// The targets for 1,000 async waiters in one process.
const THREADS_TARGET: f64 = 16.0;
const LAG_TARGET_NS: f64 = 50e6;

/// The keys of a variant's figures.
pub(crate) fn lag_key(kind: Kind, layout: Layout) -> String {
    format!("{kind:?}|{layout:?}|lag")
}

pub(crate) fn threads_key(kind: Kind, layout: Layout) -> String {
    format!("{kind:?}|{layout:?}|threads")
}

pub(crate) fn through_key(kind: Kind, layout: Layout) -> String {
    format!("{kind:?}|{layout:?}|through")
}

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
    pub(crate) waiters: usize,
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
            "# lockfile async waiters ({mode}): {} waiters per run; {} measured rounds after 1 warm-up round, one run of every variant in each, shuffled (seed {})\n",
            run.waiters, run.rounds, run.seed
        ));
        r.line(&format!(
            "Machine: {cpus} CPUs, {}; lock files in the temporary directory, on {}; no process pinned.\n",
            uname(),
            run.filesystem
        ));
        r.line(&format!(
            "A run: this process holds the lock files; the waiters start and wait (the async ones as tasks on a tokio runtime of {WORKERS} workers); once every one waits, it lets the files go. Each waiter, once its acquire returned (its record written), stamps CLOCK_MONOTONIC, stamps again and releases. Lag: from a release's stamp to the next holder's of the same file. Threads: the most entries /proc/self/task held at once (sampled every 2 ms, from before the waiters start to after the last one passed). Medians; \"× floor\" is the median over rounds of (the round's median lag / the floor's of the same round); p90 and max over every handoff.\n"
        ));
        r
    }

    pub(crate) fn layout(&mut self, r: &Results, layout: Layout, waiters: usize) {
        self.line(&format!("## {waiters} waiters, {}\n", layout.label()));
        self.line(
            "| waiters | threads (peak) | handoffs | median lag | p90 | max | × floor (median) | all through (median) | targets | verdict |",
        );
        self.line("|---|---:|---:|---:|---:|---:|---:|---:|---|---|");
        let floor = lag_key(Kind::Blocking, layout);
        for kind in [Kind::Blocking, Kind::Async] {
            let lag = lag_key(kind, layout);
            let median = r.median(&lag);
            let threads = r.extra_median(&threads_key(kind, layout));
            let (label, targets, v) = match kind {
                Kind::Blocking => (
                    format!(
                        "floor: {waiters} threads blocked in `LockOptions::acquire` (the kernel's flock wait)"
                    ),
                    "",
                    String::new(),
                ),
                Kind::Async => {
                    let t = self.judge(
                        format!("{}: at most 16 threads", layout.label()),
                        threads,
                        THREADS_TARGET,
                    );
                    let l = self.judge(
                        format!("{}: median lag ≤ 50 ms", layout.label()),
                        median,
                        LAG_TARGET_NS,
                    );
                    (
                        format!("{waiters} tasks in `LockOptions::acquire_async`"),
                        "≤ 16 threads; median ≤ 50 ms",
                        format!("{t}; {l}"),
                    )
                }
            };
            self.line(&format!(
                "| {label} | {threads:.0} | {} | {} | {} | {} | {} | {} | {targets} | {v} |",
                r.sample_count(&lag),
                time(median),
                time(r.sample_percentile(&lag, 90.0)),
                time(r.sample_percentile(&lag, 100.0)),
                ratio(r.ratio(&lag, &floor)),
                time(r.median(&through_key(kind, layout))),
            ));
        }
        self.line("");
    }

    pub(crate) fn finish(&mut self, took: Duration) {
        self.line("Threads (peak) is the median over rounds of each run's peak; \"all through\" runs from the first release to the last waiter's release.\n");
        self.targets(took);
    }
}
