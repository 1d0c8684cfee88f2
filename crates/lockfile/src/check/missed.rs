//! `missed_ticks`: a job run once per tick (`--once-per`) whose ticks pass
//! with no run finishing.

use std::time::SystemTime;

use super::{Verdict, VerdictKind};
use crate::inspect::Severity;
use crate::rfc3339;
use crate::tick::Schedule;

/// How many missed ticks a message lists before it only counts.
const LISTED_TICKS: u128 = 3;

/// `missed_ticks`, critical, when the last finished tick is older than the
/// current tick (the one nearest `now`) minus one period: every tick after
/// it, up to the one before the current (which may still be running), was
/// missed. Counted, not walked: a last tick decades old costs nothing.
///
/// A last tick later than the current one was claimed by a clock ahead of
/// this one by more than half a period (or forged): it is not believed, so
/// that a tick dated in 9999 never mutes the alarm; `future_time` says so.
pub(super) fn missed_ticks(
    schedule: &Schedule,
    last: Option<SystemTime>,
    now: SystemTime,
) -> Vec<Verdict> {
    let period = schedule.period();
    let current = schedule.tick_at(now);
    let show = rfc3339::seconds;
    let mut verdicts = Vec::new();
    let last = match last {
        Some(last) if last > current => {
            verdicts.push(Verdict::new(
                VerdictKind::FutureTime,
                Severity::Warning,
                format!(
                    "the last finished tick {} lies after the current tick {}: it is not believed",
                    show(last),
                    show(current)
                ),
            ));
            None
        }
        last => last,
    };
    // A valid schedule's current tick is well after the epoch.
    let Some(due) = current.checked_sub(period) else {
        return verdicts;
    };
    let message = match last {
        None => format!(
            "no tick has finished yet (once per {}; the last one due was {})",
            humantime::format_duration(period),
            show(due)
        ),
        Some(last) if last >= due => return verdicts,
        Some(last) => {
            let period_ms = period.as_millis().max(1);
            let behind = due.duration_since(last).unwrap_or_default().as_millis();
            // Ticks `last + period`, …, the last one at or before `due`.
            let count = behind / period_ms;
            let missed: Vec<String> = (1..=count.min(LISTED_TICKS))
                .filter_map(|n| {
                    let n = u32::try_from(n).ok()?;
                    last.checked_add(period.checked_mul(n)?)
                })
                .map(show)
                .collect();
            let more = count.saturating_sub(missed.len() as u128);
            let and_more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!(
                "{count} tick(s) missed since the last finished one ({}): {}{and_more}",
                show(last),
                missed.join(", ")
            )
        }
    };
    verdicts.push(Verdict::new(
        VerdictKind::MissedTicks,
        Severity::Critical,
        message,
    ));
    verdicts
}
