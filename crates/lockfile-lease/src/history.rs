//! A lease's run history, as every engine keeps it: one JSON document per
//! name, outside the lease, so that it outlives the lease and later holders.
//! How a run is counted is the core crate's ([`LastRun`]); an engine only
//! stores the bytes, and writes them with its own compare-and-set.

use std::time::{Duration, Instant, SystemTime};

use lockfile::OwnerRecord;
use lockfile::history::{LastRun, Outcome, RunEnd};
use lockfile::tick::{Claim, TickClaim, TickDecision};
use serde::{Deserialize, Serialize};

/// How long past the lease's deadline a history write may still wait on the
/// server. Past the deadline nobody holds the lease any more, and a command
/// wrapper should be gone: the write gets a moment to land, not a request
/// timeout.
pub const WRITE_AFTER_DEADLINE: Duration = Duration::from_millis(200);

/// The least time a history write is given, however late it starts: a run
/// that ends well after its deadline (its holder was paused, or kept a lost
/// lease) still gets one short attempt.
pub const WRITE_AT_LEAST: Duration = Duration::from_millis(100);

/// The run history of one lease name: how its last run ended, and its last
/// successful run. Serialised as a JSON object, so that more can be kept
/// beside these later without breaking older readers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct History {
    /// The last finished run, whatever its outcome.
    pub last_run: Option<LastRun>,
    /// The last run that succeeded (the same as `last_run` after a
    /// success). Absent from histories written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success: Option<LastRun>,
    /// The last claim on a tick (`--once-per`), until the next claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_claimed_tick: Option<Claim>,
}

// The floats in a history, `duration_seconds`, are never NaN: they are
// measured from two times, or read from JSON, which cannot spell NaN.
impl Eq for History {}

impl History {
    /// The history in a stored value.
    ///
    /// # Errors
    ///
    /// A sentence saying the value is not a history of ours (it is shown
    /// beside a report, never fatal).
    pub fn decode(value: &[u8]) -> Result<History, String> {
        serde_json::from_slice(value)
            .map_err(|e| format!("the run history is not one of ours: {e}"))
    }

    /// The value to store.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a run history serialises")
    }

    /// The history after `end`, which finished just now: the failures in a
    /// row count on from this history's ([`LastRun::finished`]), and a
    /// success becomes the last success. `claim` is the run's own claim on
    /// its tick, when it made one: the run is marked with it.
    #[must_use]
    pub fn after(&self, end: RunEnd, claim: Option<&Claim>) -> History {
        self.with_claim(LastRun::finished(self.last_run.as_ref(), end), claim)
    }

    /// As [`after`](History::after), dated by the server's clock, which
    /// reads `now` at this moment ([`LastRun::finished_on`]): for an engine
    /// that can read its server's clock before it writes.
    #[must_use]
    pub fn after_on(&self, end: RunEnd, claim: Option<&Claim>, now: SystemTime) -> History {
        self.with_claim(
            LastRun::finished_on(self.last_run.as_ref(), end, now),
            claim,
        )
    }

    fn with_claim(&self, mut run: LastRun, claim: Option<&Claim>) -> History {
        if let Some(claim) = claim {
            run.tick = Some(claim.tick);
            run.token = Some(claim.token.clone());
        }
        self.with_run(run)
    }

    fn with_run(&self, run: LastRun) -> History {
        let last_success = if run.outcome == Outcome::Succeeded {
            Some(run.clone())
        } else {
            self.last_success().cloned()
        };
        History {
            last_run: Some(run),
            last_success,
            last_claimed_tick: self.last_claimed_tick.clone(),
        }
    }

    /// The history once `owner` claims its run's tick at `now` (the
    /// deciding clock's time, while the lease is being taken): with the
    /// claim, after an `owner_dead` run for a claim that never finished.
    ///
    /// # Errors
    ///
    /// The decision that refuses the run: [`TickDecision::TooLate`] or
    /// [`TickDecision::AlreadyRan`].
    pub fn claimed(
        &self,
        claim: &TickClaim,
        owner: &OwnerRecord,
        now: SystemTime,
    ) -> Result<(History, Claim), TickDecision> {
        match claim.decide(now, self.last_claimed_tick.as_ref(), self.last_run.as_ref()) {
            TickDecision::Run { tick, unfinished } => {
                let mut next = match unfinished {
                    Some(dead) => self.with_run(dead.owner_dead(self.last_run.as_ref(), now)),
                    None => self.clone(),
                };
                let ours = Claim::by(owner, tick, now);
                next.last_claimed_tick = Some(ours.clone());
                Ok((next, ours))
            }
            refused => Err(refused),
        }
    }

    /// The last successful run: the one kept, or the last run when it
    /// succeeded (a history written before the last success was kept).
    pub fn last_success(&self) -> Option<&LastRun> {
        self.last_success.as_ref().or(self
            .last_run
            .as_ref()
            .filter(|r| r.outcome == Outcome::Succeeded))
    }

    /// When the job last succeeded.
    pub fn last_success_at(&self) -> Option<SystemTime> {
        self.last_success().map(|r| r.finished_at)
    }
}

/// When a history write that starts at `now` must be over, for a lease whose
/// deadline is `deadline`: within the request timeout, and within
/// [`WRITE_AFTER_DEADLINE`] of the deadline, but never in less than
/// [`WRITE_AT_LEAST`].
pub fn write_until(deadline: Instant, now: Instant, request_timeout: Duration) -> Instant {
    let budget = (deadline + WRITE_AFTER_DEADLINE)
        .saturating_duration_since(now)
        .max(WRITE_AT_LEAST)
        .min(request_timeout);
    now + budget
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_is_bounded_by_the_deadline_but_gets_a_short_attempt_however_late() {
        let now = Instant::now();
        let timeout = Duration::from_secs(5);
        let ms = Duration::from_millis;
        // Far from the deadline: the request timeout.
        assert_eq!(write_until(now + ms(60_000), now, timeout), now + timeout);
        // Near it: a moment past it.
        assert_eq!(write_until(now + ms(100), now, timeout), now + ms(300));
        // Past it: the least attempt, never less.
        assert_eq!(write_until(now, now + ms(150), timeout), now + ms(250));
        assert_eq!(write_until(now, now + ms(9_000), timeout), now + ms(9_100));
        // And never more than the request timeout.
        assert_eq!(write_until(now, now, ms(50)), now + ms(50));
    }

    #[test]
    fn the_value_is_an_object_around_the_core_crates_last_run() {
        assert_eq!(
            History::decode(br#"{"last_run":null}"#),
            Ok(History::default())
        );
        // Written before the last success was kept, with a key from a later
        // version: read all the same.
        let value = br#"{"last_run":{"started_at":"2026-01-02T03:04:05.000000Z","finished_at":"2026-01-02T03:04:07.500000Z","duration_seconds":2.5,"exit_code":null,"signal":9,"outcome":"lease_lost","consecutive_failures":3,"last_failure_at":"2026-01-02T03:04:07.500000Z"},"later":1}"#;
        let history = History::decode(value).unwrap();
        let run = history.last_run.clone().unwrap();
        assert_eq!(run.outcome, Outcome::LeaseLost);
        assert_eq!(run.consecutive_failures, 3);
        assert_eq!(run.signal, Some(9));
        assert_eq!(history.last_success_at(), None);
        assert_eq!(History::decode(&history.encode()).unwrap(), history);
        let err = History::decode(b"not json").unwrap_err();
        assert!(err.contains("not one of ours"), "{err}");
    }

    #[test]
    fn a_success_is_kept_across_later_failures() {
        let end = |outcome| RunEnd {
            outcome,
            exit_code: Some(i32::from(outcome != Outcome::Succeeded)),
            signal: None,
            started_at: SystemTime::now(),
        };
        let ok = History::default().after(end(Outcome::Succeeded), None);
        let succeeded_at = ok.last_success_at().expect("a success");
        assert_eq!(ok.last_run, ok.last_success);
        let failed = ok
            .after(end(Outcome::Failed), None)
            .after(end(Outcome::TimedOut), None);
        assert_eq!(failed.last_run.as_ref().unwrap().consecutive_failures, 2);
        assert_eq!(failed.last_success_at(), Some(succeeded_at));
        // A history written before `last_success` existed: its last run.
        let old = History {
            last_success: None,
            ..ok.clone()
        };
        assert_eq!(old.last_success_at(), Some(succeeded_at));
        assert_eq!(
            old.after(end(Outcome::Failed), None).last_success_at(),
            Some(succeeded_at)
        );
    }
}
