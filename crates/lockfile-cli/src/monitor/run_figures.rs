//! One lock's figures in a run-metrics file (see [`super::metrics`]): the
//! families the file holds, the figures read back from it and the rules
//! that decide whether a file's figures are believed, and the file's text.

use lockfile::history::Outcome;

use crate::monitor::exposition::{Exposition, Family, Sample};

/// Every outcome, in the order the file lists them. Each is exported from
/// the first write on, at 0 until it happens, so that `rate()` and
/// `increase()` see it start.
pub(crate) const OUTCOMES: [Outcome; 6] = [
    Outcome::Succeeded,
    Outcome::Failed,
    Outcome::TimedOut,
    Outcome::Hung,
    Outcome::Evicted,
    Outcome::LeaseLost,
];

pub(super) const RUNNING: Family = Family::gauge(
    "lockfile_run_running",
    "1 while COMMAND runs under the lock, 0 after it ended.",
);
pub(super) const LAST_START: Family = Family::gauge(
    "lockfile_run_last_start_timestamp_seconds",
    "When the last run started (0: never).",
);
pub(super) const LAST_SUCCESS: Family = Family::gauge(
    "lockfile_run_last_success_timestamp_seconds",
    "When the last successful run ended (0: never).",
);
pub(super) const LAST_EXIT_CODE: Family = Family::gauge(
    "lockfile_run_last_exit_code",
    "The exit status of the last finished run: 128+N for signal N, 124 for a run stopped by a limit.",
);
pub(super) const LAST_DURATION: Family = Family::gauge(
    "lockfile_run_last_duration_seconds",
    "How long the last finished run took.",
);
pub(super) const CONSECUTIVE_FAILURES: Family = Family::gauge(
    "lockfile_run_consecutive_failures",
    "How many finished runs in a row have failed (0 after a success).",
);
pub(super) const SKIPS: Family = Family::counter(
    "lockfile_run_skips_total",
    "Runs that did not start, by why: the lock was held, or their tick already ran (--once-per).",
);
pub(super) const LAST_SKIP: Family = Family::gauge(
    "lockfile_run_last_skip_timestamp_seconds",
    "When a run was last skipped, for any reason (0: never).",
);

/// Why a run did not start, as the skip counter's `reason` label says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SkipReason {
    /// The lock (or lease) was held.
    Held,
    /// The run's tick was used up, or its lock came too late for it
    /// (`--once-per`).
    AlreadyRan,
}

impl SkipReason {
    const ALL: [SkipReason; 2] = [SkipReason::Held, SkipReason::AlreadyRan];

    fn as_str(self) -> &'static str {
        match self {
            SkipReason::Held => "held",
            SkipReason::AlreadyRan => "already_ran",
        }
    }
}
pub(super) const LAST_TICK: Family = Family::gauge(
    "lockfile_run_last_tick_timestamp_seconds",
    "The tick the last run claimed (--once-per), as a time.",
);
pub(super) const TICK_PERIOD: Family = Family::gauge(
    "lockfile_run_tick_period_seconds",
    "The period of the ticks the last run claimed (--once-per).",
);
pub(super) const OUTCOMES_TOTAL: Family = Family::counter(
    "lockfile_run_outcomes_total",
    "Finished runs, by how they ended.",
);

/// One lock's figures, as the file keeps them.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Figures {
    pub(super) running: bool,
    pub(super) last_start: f64,
    pub(super) last_success: f64,
    /// `None` until a run of this lock finished.
    pub(super) last_exit_code: Option<f64>,
    pub(super) last_duration: Option<f64>,
    pub(super) consecutive_failures: f64,
    /// By [`SkipReason::ALL`].
    pub(super) skips: [f64; 2],
    pub(super) last_skip: f64,
    pub(super) outcomes: [f64; OUTCOMES.len()],
    /// The tick the last `--once-per` run claimed, and its period; `None`
    /// until one did.
    pub(super) last_tick: Option<f64>,
    pub(super) tick_period: Option<f64>,
}

/// Who the figures belong to: the job name and the lock.
pub(super) type Key = (String, String);

/// Why the figures of a metrics file are not carried forward.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Distrust {
    /// Another user owns the file, and could have written anything in it.
    Owner { owner: u32, euid: u32 },
    /// Not UTF-8, which is all we write.
    NotText,
    /// A figure that no run of ours writes.
    Impossible {
        family: &'static str,
        value: f64,
        broken: Rule,
    },
}

impl std::fmt::Display for Distrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distrust::Owner { owner, euid } => {
                write!(f, "it is owned by uid {owner}, not by us (uid {euid})")
            }
            Distrust::NotText => f.write_str("it is not UTF-8 text"),
            Distrust::Impossible {
                family,
                value,
                broken,
            } => write!(f, "{family} is {value}, {broken}"),
        }
    }
}

/// What a figure we write always is. A file that breaks one was written by
/// someone else, or by hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rule {
    Finite,
    NotNegative,
    /// Counts and exit codes.
    Whole,
    /// Timestamps: written at the moment they name, so one later than now
    /// (beyond a clock's step) would hold an alert on them off until then.
    NotInTheFuture,
    /// A claimed tick: the one nearest the run's start, so at most half a
    /// period ahead (and a clock's step).
    NotPastTheNearestTick,
}

/// How far ahead of our clock a timestamp may be, for a clock stepped back
/// a little between two runs.
const FUTURE_SLACK: f64 = 60.0;

impl Rule {
    /// Whether `value` keeps the rule; `latest` is the latest time it may
    /// name, for the rules on times.
    fn holds(self, value: f64, latest: f64) -> bool {
        match self {
            Rule::Finite => value.is_finite(),
            Rule::NotNegative => value >= 0.0,
            Rule::Whole => value.fract() == 0.0,
            Rule::NotInTheFuture | Rule::NotPastTheNearestTick => value <= latest,
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Rule::Finite => "not a finite number",
            Rule::NotNegative => "below zero",
            Rule::Whole => "not a whole number",
            Rule::NotInTheFuture => "more than 60 s in the future",
            Rule::NotPastTheNearestTick => "more than half its period (and 60 s) in the future",
        })
    }
}

impl Figures {
    /// The first figure that breaks a [`Rule`], if any; `now` is the time
    /// as [`exposition::timestamp`] gives it.
    pub(super) fn impossible(&self, now: f64) -> Option<Distrust> {
        use Rule::{Finite, NotInTheFuture, NotNegative, NotPastTheNearestTick, Whole};
        const COUNT: &[Rule] = &[Finite, NotNegative, Whole];
        const TIME: &[Rule] = &[Finite, NotNegative, NotInTheFuture];
        const TICK: &[Rule] = &[Finite, NotNegative, NotPastTheNearestTick];
        let mut figures = vec![
            (LAST_START.name, self.last_start, TIME),
            (LAST_SUCCESS.name, self.last_success, TIME),
            (LAST_SKIP.name, self.last_skip, TIME),
            (CONSECUTIVE_FAILURES.name, self.consecutive_failures, COUNT),
        ];
        // The period before the tick, whose rule reads it: a broken period
        // is named as such.
        let period = self.tick_period.unwrap_or(0.0);
        figures.extend(
            self.tick_period
                .map(|v| (TICK_PERIOD.name, v, &[Finite, NotNegative][..])),
        );
        figures.extend(self.last_tick.map(|v| (LAST_TICK.name, v, TICK)));
        figures.extend(self.skips.iter().map(|&v| (SKIPS.name, v, COUNT)));
        figures.extend(self.last_exit_code.map(|v| (LAST_EXIT_CODE.name, v, COUNT)));
        figures.extend(
            self.last_duration
                .map(|v| (LAST_DURATION.name, v, &[Finite, NotNegative][..])),
        );
        figures.extend(
            self.outcomes
                .iter()
                .map(|&v| (OUTCOMES_TOTAL.name, v, COUNT)),
        );
        figures.into_iter().find_map(|(family, value, rules)| {
            let latest = if family == LAST_TICK.name {
                now + period / 2.0 + FUTURE_SLACK
            } else {
                now + FUTURE_SLACK
            };
            let broken = *rules.iter().find(|r| !r.holds(value, latest))?;
            Some(Distrust::Impossible {
                family,
                value,
                broken,
            })
        })
    }
}

/// The figures of every (job, lock) in `samples`, in the order they first
/// appear. Samples of other families, or without both labels, are left out.
pub(super) fn read_figures(samples: &[Sample]) -> Vec<(Key, Figures)> {
    let mut all: Vec<(Key, Figures)> = Vec::new();
    for sample in samples {
        let (Some(job), Some(lock)) = (sample.label("lockfile_job"), sample.label("lock")) else {
            continue;
        };
        let i = match all.iter().position(|((j, l), _)| j == job && l == lock) {
            Some(i) => i,
            None => {
                all.push(((job.to_owned(), lock.to_owned()), Figures::default()));
                all.len() - 1
            }
        };
        let f = &mut all[i].1;
        let v = sample.value;
        match sample.name.as_str() {
            n if n == RUNNING.name => f.running = v != 0.0,
            n if n == LAST_START.name => f.last_start = v,
            n if n == LAST_SUCCESS.name => f.last_success = v,
            n if n == LAST_EXIT_CODE.name => f.last_exit_code = Some(v),
            n if n == LAST_DURATION.name => f.last_duration = Some(v),
            n if n == CONSECUTIVE_FAILURES.name => f.consecutive_failures = v,
            // Files written before the reason existed counted only a
            // held lock.
            n if n == SKIPS.name => {
                let reason = SkipReason::ALL
                    .into_iter()
                    .find(|r| sample.label("reason") == Some(r.as_str()))
                    .unwrap_or(SkipReason::Held);
                f.skips[reason as usize] = v;
            }
            n if n == LAST_SKIP.name => f.last_skip = v,
            n if n == LAST_TICK.name => f.last_tick = Some(v),
            n if n == TICK_PERIOD.name => f.tick_period = Some(v),
            n if n == OUTCOMES_TOTAL.name => {
                if let Some(o) = OUTCOMES
                    .iter()
                    .position(|o| Some(o.as_str()) == sample.label("outcome"))
                {
                    f.outcomes[o] = v;
                }
            }
            _ => {}
        }
    }
    all
}

/// The whole file: each family once, with one sample per (job, lock).
pub(super) fn render(all: &[(Key, Figures)]) -> String {
    let mut e = Exposition::default();
    let mut family = |family: &Family, value: &dyn Fn(&Figures) -> Option<f64>| {
        let values: Vec<(&Key, f64)> = all
            .iter()
            .filter_map(|(k, f)| value(f).map(|v| (k, v)))
            .collect();
        if values.is_empty() {
            return;
        }
        e.family(family);
        for ((job, lock), v) in values {
            e.sample(family.name, &[("lockfile_job", job), ("lock", lock)], v);
        }
    };
    family(&RUNNING, &|f| Some(if f.running { 1.0 } else { 0.0 }));
    family(&LAST_START, &|f| Some(f.last_start));
    family(&LAST_SUCCESS, &|f| Some(f.last_success));
    family(&LAST_EXIT_CODE, &|f| f.last_exit_code);
    family(&LAST_DURATION, &|f| f.last_duration);
    family(&CONSECUTIVE_FAILURES, &|f| Some(f.consecutive_failures));
    family(&LAST_SKIP, &|f| Some(f.last_skip));
    family(&LAST_TICK, &|f| f.last_tick);
    family(&TICK_PERIOD, &|f| f.tick_period);
    e.family(&SKIPS);
    for ((job, lock), f) in all {
        for (reason, count) in SkipReason::ALL.iter().zip(f.skips) {
            e.sample(
                SKIPS.name,
                &[
                    ("lockfile_job", job),
                    ("lock", lock),
                    ("reason", reason.as_str()),
                ],
                count,
            );
        }
    }
    e.family(&OUTCOMES_TOTAL);
    for ((job, lock), f) in all {
        for (outcome, count) in OUTCOMES.iter().zip(f.outcomes) {
            e.sample(
                OUTCOMES_TOTAL.name,
                &[
                    ("lockfile_job", job),
                    ("lock", lock),
                    ("outcome", outcome.as_str()),
                ],
                count,
            );
        }
    }
    e.into_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::exposition;

    #[test]
    fn impossible_figures_name_the_family_and_the_broken_rule() {
        let now = 1_700_000_000.0;
        let fine = Figures {
            last_success: now + FUTURE_SLACK,
            last_exit_code: Some(143.0),
            last_duration: Some(0.5),
            consecutive_failures: 3.0,
            ..Figures::default()
        };
        assert_eq!(fine.impossible(now), None);
        let broken = |f: Figures| match f.impossible(now) {
            Some(Distrust::Impossible { family, broken, .. }) => (family, broken),
            other => panic!("{f:?}: {other:?}"),
        };
        let failures = CONSECUTIVE_FAILURES.name;
        let with = |change: &dyn Fn(&mut Figures)| {
            let mut f = fine.clone();
            change(&mut f);
            f
        };
        assert_eq!(
            broken(with(&|f| f.consecutive_failures = -1e6)),
            (failures, Rule::NotNegative)
        );
        assert_eq!(
            broken(with(&|f| f.consecutive_failures = 0.5)),
            (failures, Rule::Whole)
        );
        assert_eq!(
            broken(with(&|f| f.skips[1] = f64::INFINITY)),
            (SKIPS.name, Rule::Finite)
        );
        assert_eq!(
            broken(with(&|f| f.outcomes[2] = f64::NAN)),
            (OUTCOMES_TOTAL.name, Rule::Finite)
        );
        assert_eq!(
            broken(with(&|f| f.last_success = now + FUTURE_SLACK + 1.0)),
            (LAST_SUCCESS.name, Rule::NotInTheFuture)
        );
        assert_eq!(
            broken(with(&|f| f.last_duration = Some(-1.0))),
            (LAST_DURATION.name, Rule::NotNegative)
        );
        // A tick may be up to half its period ahead (the nearest one to a
        // run that started early), not more.
        let ticked = with(&|f| {
            f.tick_period = Some(3600.0);
            f.last_tick = Some(now + 1800.0 + FUTURE_SLACK);
        });
        assert_eq!(ticked.impossible(now), None);
        let ahead = Figures {
            last_tick: Some(now + 1800.0 + FUTURE_SLACK + 1.0),
            ..ticked.clone()
        };
        assert_eq!(
            broken(ahead.clone()),
            (LAST_TICK.name, Rule::NotPastTheNearestTick)
        );
        assert_eq!(
            broken(Figures {
                tick_period: Some(-1.0),
                ..ahead
            }),
            (TICK_PERIOD.name, Rule::NotNegative)
        );
        assert_eq!(
            broken(with(&|f| f.last_tick = Some(now + FUTURE_SLACK + 1.0))),
            (LAST_TICK.name, Rule::NotPastTheNearestTick)
        );
        let why = with(&|f| f.consecutive_failures = -1e6)
            .impossible(now)
            .unwrap();
        assert_eq!(
            why.to_string(),
            "lockfile_run_consecutive_failures is -1000000, below zero"
        );
    }

    #[test]
    fn figures_survive_a_render_and_a_read() {
        let mut f = Figures {
            running: true,
            last_start: 1_700_000_000.5,
            last_success: 1_699_999_000.0,
            last_exit_code: Some(3.0),
            last_duration: Some(0.125),
            consecutive_failures: 2.0,
            skips: [7.0, 2.0],
            last_skip: 1_700_000_001.0,
            last_tick: Some(1_699_999_200.0),
            tick_period: Some(600.0),
            ..Figures::default()
        };
        f.outcomes[1] = 2.0;
        f.outcomes[5] = 1.0;
        let all = vec![
            (("sh".to_owned(), "/a \"b\"\n.lock".to_owned()), f),
            (("sh".to_owned(), "/c.lock".to_owned()), Figures::default()),
        ];
        let text = render(&all);
        assert_eq!(read_figures(&exposition::parse(&text)), all);
        // Each family once, even with two locks in the file.
        assert_eq!(text.matches("# TYPE lockfile_run_running ").count(), 1);
        // A lock that never finished a run has no exit code yet.
        assert_eq!(text.matches("lockfile_run_last_exit_code{").count(), 1);
        // Nor a tick, without --once-per.
        assert_eq!(
            text.matches("lockfile_run_last_tick_timestamp_seconds{")
                .count(),
            1
        );
        assert_eq!(text.matches("lockfile_run_tick_period_seconds{").count(), 1);
    }
}
