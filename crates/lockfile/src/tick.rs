//! Ticks: the scheduled times of a job that runs once per PERIOD, wherever
//! it runs. A lock stops two runs from overlapping; a tick stops two runs of
//! the same scheduled time, however short the job and however the hosts'
//! crons drift.
//!
//! The tick of a run is the scheduled time nearest to its start, so a run
//! that fires up to half a period early or late belongs to the same tick.
//! Whoever holds the lock (or lease) decides, from what the name already
//! keeps (the last claim, the last run), whether the tick is still free, and
//! claims it in the same write that records the new holder.

use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::history::{LastRun, Outcome};
use crate::rfc3339;

/// The seconds in a day: a period must divide it, or be whole days.
const DAY: u64 = 86_400;

/// The longest period, 366 days. Ticks count from the Unix epoch, so a
/// period of more than twice the time since then has its nearest tick in
/// 1970 for ever, and any period of decades puts ticks where no clock of a
/// running host is; a year is the longest any schedule asks for.
const MAX_PERIOD_DAYS: u64 = 366;

/// A job's schedule: a tick every `period` from the Unix epoch (UTC),
/// shifted by `offset`.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// let every_15m = lockfile::tick::Schedule::new(Duration::from_secs(900), Duration::ZERO)?;
/// // 03:07:29 belongs to the 03:00 tick; 03:07:31 to the 03:15 one.
/// let at = |s| UNIX_EPOCH + Duration::from_secs(s);
/// assert_eq!(every_15m.tick_at(at(3 * 3600 + 449)), at(3 * 3600));
/// assert_eq!(every_15m.tick_at(at(3 * 3600 + 451)), at(3 * 3600 + 900));
/// // Cron's `*/7` restarts every hour: no schedule can follow it.
/// assert!(lockfile::tick::Schedule::new(Duration::from_secs(420), Duration::ZERO).is_err());
/// # Ok::<(), lockfile::tick::InvalidSchedule>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    period_ms: u64,
    offset_ms: u64,
}

impl Schedule {
    /// A tick every `period`, `offset` after each multiple of it.
    ///
    /// # Errors
    ///
    /// [`InvalidSchedule`] when `period` is not a whole number of
    /// seconds that divides a day or a whole number of days (cron's `*/7`
    /// restarts every hour, so multiples of 7 minutes from the epoch would
    /// not follow it), or when `offset` is not below `period`.
    pub fn new(period: Duration, offset: Duration) -> Result<Schedule, InvalidSchedule> {
        let invalid = |reason: String| InvalidSchedule {
            period,
            offset,
            reason,
        };
        let secs = period.as_secs();
        if period.subsec_nanos() != 0 || secs == 0 {
            return Err(invalid(
                "the period must be a whole number of seconds".to_owned(),
            ));
        }
        if !DAY.is_multiple_of(secs) && !secs.is_multiple_of(DAY) {
            return Err(invalid(format!(
                "a period of {} neither divides a day nor is a whole number of days (1m, 5m, 15m, 1h, 6h, 1d… do)",
                humantime::format_duration(period)
            )));
        }
        if secs > MAX_PERIOD_DAYS * DAY {
            return Err(invalid(format!(
                "the period must be at most {MAX_PERIOD_DAYS}d: ticks count from 1970, so a longer one has ticks no host's clock reaches"
            )));
        }
        if offset >= period {
            return Err(invalid("the offset must be below the period".to_owned()));
        }
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Ok(Schedule {
            period_ms: ms(period),
            offset_ms: ms(offset),
        })
    }

    /// The period between two ticks.
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.period_ms)
    }

    /// How far after each multiple of the period a tick falls.
    pub fn offset(&self) -> Duration {
        Duration::from_millis(self.offset_ms)
    }

    /// The tick nearest to `t`: `offset + period · floor((t − offset) /
    /// period + ½)`. A time exactly half-way belongs to the later tick.
    pub fn tick_at(&self, t: SystemTime) -> SystemTime {
        let t = millis_since_epoch(t);
        let (p, o) = (i128::from(self.period_ms), i128::from(self.offset_ms));
        let n = (2 * (t - o) + p).div_euclid(2 * p);
        at_millis(o + p * n)
    }

    /// How far `t` is from its tick (early or late).
    pub fn drift(&self, t: SystemTime) -> Duration {
        let tick = self.tick_at(t);
        t.duration_since(tick)
            .or_else(|_| tick.duration_since(t))
            .unwrap_or_default()
    }
}

/// A period and offset that make no schedule, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot run once per {} (offset {}): {reason}",
    humantime::format_duration(*period),
    humantime::format_duration(*offset)
)]
#[non_exhaustive]
pub struct InvalidSchedule {
    /// The period asked for.
    pub period: Duration,
    /// The offset asked for.
    pub offset: Duration,
    /// What is wrong.
    pub reason: String,
}

fn millis_since_epoch(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i128::try_from(d.as_millis()).unwrap_or(i128::MAX / 4),
        Err(e) => -i128::try_from(e.duration().as_millis()).unwrap_or(i128::MAX / 4),
    }
}

fn at_millis(ms: i128) -> SystemTime {
    let d = Duration::from_millis(u64::try_from(ms.unsigned_abs()).unwrap_or(u64::MAX));
    if ms >= 0 {
        UNIX_EPOCH.checked_add(d).unwrap_or(UNIX_EPOCH)
    } else {
        UNIX_EPOCH.checked_sub(d).unwrap_or(UNIX_EPOCH)
    }
}

/// A run's claim on its tick, kept with the name's state (the lock file's
/// record, a lease's history) until the next claim replaces it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Claim {
    /// The tick claimed.
    #[serde(with = "rfc3339")]
    pub tick: SystemTime,
    /// The claimant's host.
    pub host: String,
    /// The claimant's pid.
    pub pid: u32,
    /// The claimant's run token (its owner record's `token`).
    pub token: String,
    /// When it claimed, on the clock that decided.
    #[serde(with = "rfc3339")]
    pub claimed_at: SystemTime,
}

impl fmt::Display for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tick {} claimed by pid {} on host {}",
            rfc3339::display(self.tick),
            self.pid,
            crate::text::quoted(&self.host)
        )
    }
}

/// What a run asks of its acquisition: claim the tick its start belongs to.
/// `started` is the run's start on the monotonic clock, before any wait for
/// the lock, so that whichever clock decides can date the start: its time
/// now, less the time that has passed since.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct TickClaim {
    /// The job's schedule.
    pub schedule: Schedule,
    /// When the run started (monotonic clock).
    pub started: Instant,
}

/// What the holder of a name decides about a run's tick, at the moment it
/// holds the lock.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum TickDecision {
    /// Claim `tick` and run. `unfinished` is an earlier claim that never
    /// finished (its wrapper died): record `owner_dead` for it first.
    Run {
        /// The tick to claim.
        tick: SystemTime,
        /// The claim that never finished, if any.
        unfinished: Option<Claim>,
    },
    /// The lock came later than half a period after the tick: the run
    /// belongs to no tick any more, and must not start.
    TooLate {
        /// The tick it was too late for.
        tick: SystemTime,
    },
    /// The tick was used up by a finished run (`succeeded`, `failed`,
    /// `timed_out` or `hung`).
    AlreadyRan {
        /// The tick.
        tick: SystemTime,
        /// That run.
        run: Box<LastRun>,
    },
}

impl TickClaim {
    /// A claim on the tick of a run that started at `started`.
    pub fn new(schedule: Schedule, started: Instant) -> TickClaim {
        TickClaim { schedule, started }
    }

    /// The run's start on a clock that reads `now` at this moment.
    pub fn start_on(&self, now: SystemTime) -> SystemTime {
        now.checked_sub(self.started.elapsed()).unwrap_or(now)
    }

    /// Decides the run's tick at `now` (the deciding clock's time, read
    /// while the lock is held), given the name's last claim and last run.
    ///
    /// A claim made, or a run finished, more than a minute ahead of `now` is
    /// not believed (a clock can be wrong): it never blocks a run, and is
    /// replaced. (A tick itself may lie up to half a period ahead: a run
    /// that fires early belongs to the coming tick.)
    pub fn decide(
        &self,
        now: SystemTime,
        last_claim: Option<&Claim>,
        last_run: Option<&LastRun>,
    ) -> TickDecision {
        let tick = self.schedule.tick_at(self.start_on(now));
        let half = self.schedule.period() / 2;
        if now > tick + half {
            return TickDecision::TooLate { tick };
        }
        let believable = |t: SystemTime| crate::trust::possible(t, now);
        let last_run = last_run.filter(|r| believable(r.finished_at));
        if let Some(run) = last_run
            && run.tick == Some(tick)
            && run.outcome.uses_up_tick()
        {
            return TickDecision::AlreadyRan {
                tick,
                run: Box::new(run.clone()),
            };
        }
        let unfinished = last_claim
            .filter(|c| believable(c.claimed_at))
            .filter(|c| !last_run.is_some_and(|r| r.finishes(c)))
            .cloned();
        TickDecision::Run { tick, unfinished }
    }
}

impl LastRun {
    /// Whether this run finished `claim`: it is the claimant's own run, or a
    /// later one (a run that took the lock after the claim was made).
    fn finishes(&self, claim: &Claim) -> bool {
        self.token.as_deref() == Some(claim.token.as_str()) || self.finished_at >= claim.claimed_at
    }
}

impl Claim {
    /// The run recorded for this claim when it never finished: `owner_dead`,
    /// from the claim to `now`, counting on from `previous`.
    pub fn owner_dead(&self, previous: Option<&LastRun>, now: SystemTime) -> LastRun {
        let mut run = LastRun::after(
            previous,
            crate::RunEnd {
                outcome: Outcome::OwnerDead,
                exit_code: None,
                signal: None,
                started_at: self.claimed_at,
            },
            now,
        );
        run.tick = Some(self.tick);
        run.token = Some(self.token.clone());
        run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: f64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs_f64(secs)
    }

    #[test]
    fn a_run_belongs_to_the_nearest_tick() {
        let ten = Schedule::new(Duration::from_secs(10), Duration::ZERO).unwrap();
        let tick = 1_000_000.0;
        for (t, expected) in [
            (-4.0, tick),
            (4.0, tick),
            (-6.0, tick - 10.0),
            (6.0, tick + 10.0),
            (0.0, tick),
            (5.0, tick + 10.0),
        ] {
            assert_eq!(ten.tick_at(at(tick + t)), at(expected), "{t}");
        }
        // Offsets shift every tick.
        let offset = Schedule::new(Duration::from_secs(3600), Duration::from_secs(300)).unwrap();
        assert_eq!(
            offset.tick_at(at(3600.0 * 5.0 + 200.0)),
            at(3600.0 * 5.0 + 300.0)
        );
        assert_eq!(
            offset.tick_at(at(3600.0 * 5.0 - 1600.0)),
            at(3600.0 * 4.0 + 300.0)
        );
        // Before the epoch too.
        assert_eq!(ten.tick_at(UNIX_EPOCH - Duration::from_secs(4)), UNIX_EPOCH);
        assert_eq!(ten.drift(at(tick + 3.0)), Duration::from_secs(3));
        assert_eq!(ten.drift(at(tick - 3.0)), Duration::from_secs(3));
    }

    #[test]
    fn a_period_divides_a_day_or_is_whole_days() {
        let ok = |s| Schedule::new(Duration::from_secs(s), Duration::ZERO).is_ok();
        for s in [1, 60, 300, 900, 3600, 6 * 3600, 86_400, 7 * 86_400] {
            assert!(ok(s), "{s}");
        }
        for s in [0, 7, 420, 7 * 3600, 86_400 + 3600] {
            assert!(!ok(s), "{s}");
        }
        assert!(Schedule::new(Duration::from_millis(1500), Duration::ZERO).is_err());
        let p = Duration::from_secs(60);
        assert!(Schedule::new(p, p).is_err());
        assert!(Schedule::new(p, Duration::from_secs(59)).is_ok());
        let e = Schedule::new(Duration::from_secs(420), Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("7m"), "{e}");
        // Up to a year; `100000d` once claimed the 1970 tick for ever.
        assert!(ok(366 * 86_400));
        for days in [367, 40_000, 100_000, u64::MAX / 86_400] {
            let e = Schedule::new(Duration::from_secs(days * 86_400), Duration::ZERO).unwrap_err();
            assert!(e.to_string().contains("at most 366d"), "{e}");
        }
    }

    fn run(outcome: Outcome, tick: SystemTime, token: &str) -> LastRun {
        let mut run = LastRun::after(
            None,
            crate::RunEnd {
                outcome,
                exit_code: Some(0),
                signal: None,
                started_at: tick,
            },
            tick,
        );
        run.tick = Some(tick);
        run.token = Some(token.to_owned());
        run
    }

    fn claim(tick: SystemTime, token: &str) -> Claim {
        Claim {
            tick,
            host: "h".to_owned(),
            pid: 1,
            token: token.to_owned(),
            claimed_at: tick,
        }
    }

    #[test]
    fn a_tick_is_used_up_by_a_finished_run_and_freed_by_a_lost_one() {
        let ten = Schedule::new(Duration::from_secs(10), Duration::ZERO).unwrap();
        let now = SystemTime::now();
        let tick = ten.tick_at(now);
        let c = TickClaim::new(ten, Instant::now());
        let decide = |claim: Option<&Claim>, run: Option<&LastRun>| {
            // Decided at the tick itself, as if the run started on time.
            c.decide(tick, claim, run)
        };
        let t = ten.tick_at(c.start_on(tick));
        assert_eq!(
            decide(None, None),
            TickDecision::Run {
                tick: t,
                unfinished: None
            }
        );
        for outcome in [
            Outcome::Succeeded,
            Outcome::Failed,
            Outcome::TimedOut,
            Outcome::Hung,
        ] {
            let r = run(outcome, t, "a");
            assert!(
                matches!(
                    decide(Some(&claim(t, "a")), Some(&r)),
                    TickDecision::AlreadyRan { .. }
                ),
                "{outcome}"
            );
        }
        for outcome in [Outcome::LeaseLost, Outcome::Evicted, Outcome::OwnerDead] {
            let r = run(outcome, t, "a");
            assert_eq!(
                decide(Some(&claim(t, "a")), Some(&r)),
                TickDecision::Run {
                    tick: t,
                    unfinished: None
                },
                "{outcome}"
            );
        }
        // A claim whose run never finished: owner_dead for it, then run.
        let earlier = run(Outcome::Succeeded, t - Duration::from_secs(10), "z");
        assert_eq!(
            decide(Some(&claim(t, "b")), Some(&earlier)),
            TickDecision::Run {
                tick: t,
                unfinished: Some(claim(t, "b"))
            }
        );
        // A run finished in the future is not believed.
        let mut future = run(Outcome::Succeeded, t, "f");
        future.finished_at = t + Duration::from_secs(3600);
        assert!(matches!(
            decide(None, Some(&future)),
            TickDecision::Run { .. }
        ));
        // Too late: the lock came 7 s after a start on the tick.
        let waited = TickClaim::new(ten, Instant::now() - Duration::from_secs(7));
        let late = waited.decide(t + Duration::from_secs(7), None, None);
        assert_eq!(late, TickDecision::TooLate { tick: t });
    }
}
