//! `CheckOptions`: what a check expects of a job.

use std::time::{Duration, SystemTime};

use super::missed::missed_ticks;
use super::{Health, Subject, Verdict, VerdictKind};
use crate::inspect::{InspectOptions, Severity};
use crate::tick::Schedule;

/// What a check expects of a job: how often it succeeds, how long a run
/// may hold the lock, how many failures in a row are allowed, and its
/// schedule. The defaults expect nothing of the schedule and allow no
/// failed last run.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    inspect: InspectOptions,
    max_failures: u32,
    schedule: Option<Schedule>,
    pub(super) saturated_after: Option<Duration>,
}

impl Default for CheckOptions {
    fn default() -> CheckOptions {
        CheckOptions::new()
    }
}

impl CheckOptions {
    /// Every default: a hung or overrunning holder and a failed last run
    /// are reported, a job that stopped running is not.
    pub fn new() -> CheckOptions {
        CheckOptions {
            inspect: InspectOptions::new(),
            max_failures: 1,
            schedule: None,
            saturated_after: None,
        }
    }

    /// `silent` (critical) when the last success is older than `period`,
    /// `never_succeeded` when there was none:
    /// [`InspectOptions::expect_every`].
    pub fn expect_every(&mut self, period: Duration) -> &mut Self {
        self.inspect.expect_every(period);
        self
    }

    /// `overrunning` (warning) when the lock has been held longer than
    /// `max_age`; the holder's own recorded maximum runtime counts too:
    /// [`InspectOptions::max_age`].
    pub fn max_age(&mut self, max_age: Duration) -> &mut Self {
        self.inspect.max_age(max_age);
        self
    }

    /// `hung` (critical) when the holder's heartbeat has been silent this
    /// long: [`InspectOptions::stale_after`]. By default three times the
    /// interval the holder promised.
    pub fn stale_after(&mut self, threshold: Duration) -> &mut Self {
        self.inspect.stale_after(threshold);
        self
    }

    /// `failing` (critical) once this many runs in a row have failed (any
    /// outcome but success). Default 1; 0 counts as 1.
    pub fn max_failures(&mut self, n: u32) -> &mut Self {
        self.max_failures = n.max(1);
        self
    }

    /// `missed_ticks` (critical) when ticks of `schedule` (`--once-per`)
    /// passed with no run finishing: the last finished tick is older than
    /// the current tick minus one period.
    pub fn once_per(&mut self, schedule: Schedule) -> &mut Self {
        self.schedule = Some(schedule);
        self
    }

    /// `saturated` (warning) when every slot of a set (see
    /// [`crate::slot`]) has been held for longer than `after`: a job that
    /// needs more slots, or whose runs hang.
    pub fn saturated_after(&mut self, after: Duration) -> &mut Self {
        self.saturated_after = Some(after);
        self
    }

    /// The inspection these options ask for, for a report to be judged
    /// with [`judge`](Self::judge) (a lease's report is judged with them).
    pub fn inspect_options(&self) -> &InspectOptions {
        &self.inspect
    }

    /// Judges a report made with [`inspect_options`](Self::inspect_options)
    /// as of `now`: its verdicts, the worst first, and the status of the
    /// worst (`OK` with none).
    pub fn judge<R: Subject>(&self, report: R, now: SystemTime) -> Health<R> {
        let mut verdicts: Vec<Verdict> = report.findings().iter().filter_map(Verdict::on).collect();
        if let Some(run) = report.last_run()
            && run.consecutive_failures >= self.max_failures
        {
            let how = match (run.exit_code, run.signal) {
                (Some(code), _) => format!(", exit status {code}"),
                (None, Some(sig)) => format!(", signal {sig}"),
                (None, None) => String::new(),
            };
            let ago = now.duration_since(run.finished_at).unwrap_or_default();
            verdicts.push(Verdict::new(
                VerdictKind::Failing,
                Severity::Critical,
                format!(
                    "{} run(s) in a row failed (at most {} allowed); the last one {}{how}, {} ago",
                    run.consecutive_failures,
                    self.max_failures,
                    run.outcome,
                    humantime::format_duration(Duration::from_secs(ago.as_secs()))
                ),
            ));
        }
        if let Some(schedule) = &self.schedule {
            let last_tick = report.last_run().and_then(|run| run.tick);
            verdicts.extend(missed_ticks(schedule, last_tick, now));
        }
        // Stable: among equals, the findings' order (most severe first) stays.
        verdicts.sort_by_key(|v| std::cmp::Reverse(v.severity));
        Health::new(verdicts, report, now)
    }
}
