//! How a run ended, whatever the hold: the outcome its history and metrics
//! record, and the exit status.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::SystemTime;

use lockfile::history::{Outcome, RunEnd};

use crate::exit;
use crate::run::hold::Hold;
use crate::run::limits::Limit;
use crate::run::supervise;

/// How COMMAND ran under the hold.
pub(crate) struct Ran {
    pub(crate) status: ExitStatus,
    /// The limit that began stopping it.
    pub(crate) stopped_for: Option<Limit>,
    /// Processes of its tree outlived SIGKILL (uninterruptible sleep).
    pub(crate) survivors: bool,
}

/// The run's end, and the status to exit with: COMMAND's, 124 for a limit,
/// 79 when the lease lapsed (or was about to) while it ran. `ran` is an
/// error when COMMAND could not be started or supervised: a failed run.
pub(crate) fn of(
    ran: Result<&Ran, &(i32, String)>,
    hold: &dyn Hold,
    started_at: SystemTime,
) -> (RunEnd, i32) {
    let ran = match ran {
        Ok(ran) => ran,
        Err((code, _)) => {
            let end = RunEnd {
                outcome: Outcome::Failed,
                exit_code: None,
                signal: None,
                started_at,
            };
            return (end, *code);
        }
    };
    let status = supervise::exit_code(ran.status);
    // When the lease lapsed (or was about to) while a limit was stopping
    // the run, the run is `lease_lost` and exits 79, not 124: that it ran
    // too long is the job's own business, but that it ran unprotected,
    // perhaps beside another holder, is what whoever reads the outcome
    // must learn.
    let (outcome, code) = match ran.stopped_for {
        _ if hold.lost() => (Outcome::LeaseLost, exit::LEASE_LOST),
        Some(Limit::Watchdog) => (Outcome::Hung, exit::LIMIT),
        Some(Limit::MaxRuntime) => (Outcome::TimedOut, exit::LIMIT),
        None => (crate::monitor::outcome_of(status), status),
    };
    let end = RunEnd {
        outcome,
        exit_code: ran.status.code(),
        signal: ran.status.signal(),
        started_at,
    };
    (end, code)
}

/// `--output-on-failure`'s line for a run of `job` that ended with
/// `outcome` (COMMAND killed by `signal`, if it was) and exits `code` (not
/// 0), before its output (`none` when it wrote nothing): "the run of job
/// `backup` failed (exit status 3); its output follows".
pub(crate) fn failure_line(
    job: &str,
    outcome: Outcome,
    code: i32,
    signal: Option<i32>,
    none: bool,
) -> String {
    let what = match (outcome, code) {
        // The lease lapsed before its release, once COMMAND had ended.
        (Outcome::Succeeded, exit::LEASE_LOST) => "lost its lease before it was released",
        _ => crate::monitor::outcome::what_happened(outcome),
    };
    let signal = signal.map_or_else(String::new, |sig| format!(", killed by signal {sig}"));
    let output = if none {
        "it wrote no output"
    } else {
        "its output follows"
    };
    format!(
        "the run of job {} {what} (exit status {code}{signal}); {output}",
        lockfile::text::quoted(job)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failure_line_says_how_the_run_ended() {
        assert_eq!(
            failure_line("backup", Outcome::Failed, 3, None, false),
            "the run of job \"backup\" failed (exit status 3); its output follows"
        );
        assert_eq!(
            failure_line("backup", Outcome::Failed, 137, Some(9), true),
            "the run of job \"backup\" failed (exit status 137, killed by signal 9); it wrote no output"
        );
        let stopped = failure_line("backup", Outcome::TimedOut, 124, Some(15), false);
        assert!(
            stopped.contains("ran past its maximum runtime and was stopped (exit status 124"),
            "{stopped}"
        );
        let lost = failure_line("backup", Outcome::Succeeded, exit::LEASE_LOST, None, false);
        assert!(
            lost.contains("lost its lease before it was released (exit status 79)"),
            "{lost}"
        );
    }
}
