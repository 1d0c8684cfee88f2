//! `--once-per PERIOD`: at most one finished run per scheduled time, for a
//! lock file and a lease alike. The claim itself is the library's (the lock
//! file's record) or the engine's (the lease's history); what is said about
//! it is here.

use std::time::{Duration, SystemTime};

use lockfile::history::{LastRun, Outcome};
use lockfile::tick::{Claim, TickClaim};

use crate::monitor::Monitor;

/// Why a run did not get its tick.
pub(crate) struct Refusal<'a> {
    pub(crate) tick: SystemTime,
    /// The run that used it up, with its claim when kept; `None` when the
    /// lock came too late for the tick.
    pub(crate) ran: Option<(&'a LastRun, Option<&'a Claim>)>,
}

impl Refusal<'_> {
    /// Says so, as a skip; returns the skip's exit status.
    pub(crate) fn skip(&self, monitor: &mut Monitor, job: &str, conflict: u8) -> i32 {
        let (line, quiet_ok) = self.line(job);
        monitor.tick_skipped(&line, quiet_ok);
        i32::from(conflict)
    }

    /// The skip's line, and whether `-q` keeps it quiet (the tick's run
    /// succeeded).
    fn line(&self, job: &str) -> (String, bool) {
        let tick = humantime::format_rfc3339_seconds(self.tick);
        let job = lockfile::text::quoted(job);
        match self.ran {
            Some((run, claim)) => {
                let host = claim
                    .map(|c| format!(" on host {}", lockfile::text::quoted(&c.host)))
                    .unwrap_or_default();
                (
                    format!(
                        "skipped: tick {tick} of job {job} already ran{host} ({})",
                        run.outcome
                    ),
                    run.outcome == Outcome::Succeeded,
                )
            }
            None => (
                format!(
                    "skipped: the lock came too late for tick {tick} of job {job}: more than half a period after it"
                ),
                false,
            ),
        }
    }
}

/// Warns once when the run started more than a quarter period from the
/// tick it claimed (`ours`): a cron firing that far off is on another
/// schedule than the one given (an offset, a time zone), and will
/// eventually round to the wrong tick. The start is dated on the clock that
/// decided the claim (the database's, under PostgreSQL), a moment ago.
pub(crate) fn warn_on_drift(claim: &TickClaim, ours: &Claim) {
    let (start, tick) = (claim.start_on(ours.claimed_at), ours.tick);
    let drift = start
        .duration_since(tick)
        .or_else(|_| tick.duration_since(start))
        .unwrap_or_default();
    let period = claim.schedule.period();
    if drift > period / 4 {
        errln!(
            "lockfile: this run started {} from its tick {}: more than a quarter of the period ({}). Give the cron's offset with --tick-offset, and run cron in UTC (CRON_TZ=UTC), or runs will round to the wrong tick",
            humantime::format_duration(Duration::from_millis(
                u64::try_from(drift.as_millis()).unwrap_or(u64::MAX)
            )),
            humantime::format_rfc3339_seconds(tick),
            humantime::format_duration(period)
        );
    }
}

/// The environment COMMAND gets for its claim: `LOCKFILE_TICK`.
pub(crate) fn env(claim: Option<&Claim>) -> Option<(&'static str, std::ffi::OsString)> {
    claim.map(|c| {
        (
            "LOCKFILE_TICK",
            humantime::format_rfc3339_seconds(c.tick).to_string().into(),
        )
    })
}
