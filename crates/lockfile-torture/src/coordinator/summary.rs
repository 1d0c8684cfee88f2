//! The summary of a run: the figures gathered from the board and the chaos
//! tally, and the verdict the exit status reports.

use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use super::chaos::Chaos;
use crate::board::Board;

/// What a lease run measures beyond a lock-file run.
#[derive(Debug)]
pub(super) struct LeaseRun {
    /// The server's kind, for the summary.
    pub(super) server: &'static str,
    pub(super) ttl: Duration,
    /// Every detector's fencing log, read after the run.
    pub(super) logs: Vec<Vec<u64>>,
}

/// The figures only a lease run has.
#[derive(Debug)]
struct LeaseFigures {
    server: &'static str,
    ttl: Duration,
    groups_killed: u64,
    tokens_logged: u64,
    /// Tokens not larger than the one before them in a detector's log, read
    /// after the run.
    log_inversions: u64,
    /// The same, as the sections saw them when they wrote the log.
    inversions_seen: u64,
    leases_lost: u64,
    /// A killed wrapper's lease stands until its TTL runs out.
    takeover_wrapper: Vec<u64>,
}

/// The figures of a run.
#[derive(Debug)]
pub(super) struct Summary {
    elapsed: Duration,
    sections: u64,
    acquisitions: u64,
    holders_killed: u64,
    library_killed: usize,
    sections_killed: usize,
    wrappers_killed: usize,
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
    lease: Option<LeaseFigures>,
}

impl Summary {
    pub(super) fn gather(
        board: &Board,
        chaos: &Chaos,
        elapsed: Duration,
        failed_exits: u64,
        lease: Option<LeaseRun>,
    ) -> Summary {
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
        let lease = lease.map(|run| LeaseFigures {
            server: run.server,
            ttl: run.ttl,
            groups_killed: chaos.groups_killed,
            tokens_logged: run.logs.iter().map(|l| l.len() as u64).sum(),
            log_inversions: run
                .logs
                .iter()
                .map(|l| crate::detector::inversions(l))
                .sum(),
            inversions_seen: board.fencing_inversions.load(SeqCst),
            leases_lost: board.leases_lost.load(SeqCst),
            takeover_wrapper: recovery(&chaos.wrapper_deaths),
        });
        Summary {
            elapsed,
            sections: board.sections(),
            acquisitions: board.acquisitions.load(SeqCst),
            holders_killed: chaos.holders_killed(),
            library_killed: chaos.library_deaths.len(),
            sections_killed: chaos.section_deaths.len(),
            wrappers_killed: chaos.wrapper_deaths.len(),
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
            lease,
        }
    }

    pub(super) fn passed(&self) -> bool {
        self.overlaps == 0
            && self.probe_failures == 0
            && self.errors == 0
            && self.record_mismatches == 0
            && self.unlinked_while_held == 0
            && self.probe_contradictions == 0
            && self.stale_while_owner_alive == 0
            && self
                .lease
                .as_ref()
                .is_none_or(|l| l.log_inversions == 0 && l.inversions_seen == 0)
    }

    pub(super) fn print(&self) {
        match &self.lease {
            None => self.print_locks(),
            Some(lease) => self.print_leases(lease),
        }
    }

    fn print_leases(&self, lease: &LeaseFigures) {
        let ttl = lease.ttl.as_secs_f64();
        let stats = |v: &[u64]| match v {
            [] => "n/a".to_owned(),
            _ => {
                let (median, max) = (v[(v.len() - 1) / 2], *v.last().unwrap());
                let s = |ns: u64| ns as f64 / 1e9;
                format!(
                    "median {:.3} s, max {:.3} s (n={}; TTL {ttl} s: median {:.2} TTL, max {:.2} TTL)",
                    s(median),
                    s(max),
                    v.len(),
                    s(median) / ttl,
                    s(max) / ttl
                )
            }
        };
        println!(
            "server                                     {} (lease TTL {ttl} s)",
            lease.server
        );
        self.print_runs(Some(lease.groups_killed));
        println!(
            "overlaps                                   {}  ({} detector checks waited for an exiting holder)",
            self.overlaps, self.detector_waits
        );
        println!(
            "fencing tokens out of order                {}  (of {} tokens in the detectors' logs; {} seen by the sections)",
            lease.log_inversions, lease.tokens_logged, lease.inversions_seen
        );
        println!(
            "sections that outlived their lease         {}",
            lease.leases_lost
        );
        println!("holder death -> next holder of its lease");
        println!(
            "  after a library holder's death (expiry)  {}",
            stats(&self.recovery_library)
        );
        println!(
            "  after a `lockfile run` wrapper's death   {}",
            stats(&lease.takeover_wrapper)
        );
        println!(
            "  after a `lockfile run` command's death   {}",
            stats(&self.recovery_section)
        );
        self.print_verdict();
    }

    fn print_locks(&self) {
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
        self.print_runs(None);
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
            "inspect contradicting the probe            {}",
            self.probe_contradictions
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
        self.print_verdict();
    }

    /// The lines every run's summary begins with: what ran, and what the
    /// chaos loop killed (`groups_killed`: of a lease run's wrappers, those
    /// killed with their process group).
    fn print_runs(&self, groups_killed: Option<u64>) {
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
        let groups = groups_killed
            .map(|n| format!(", {n} of them with their process group"))
            .unwrap_or_default();
        println!(
            "holders killed (SIGKILL)                   {}  (library holders {}, `lockfile run` commands {}, `lockfile run` wrappers while their command ran {}{groups})",
            self.holders_killed, self.library_killed, self.sections_killed, self.wrappers_killed
        );
        println!(
            "other kills                                {} waiting workers, {} just after leaving their section",
            self.waiters_killed, self.missed
        );
    }

    /// The lines every run's summary ends with.
    fn print_verdict(&self) {
        println!("unexpected errors                          {}", self.errors);
        println!(
            "result                                     {}",
            if self.passed() { "PASS" } else { "FAIL" }
        );
    }
}
