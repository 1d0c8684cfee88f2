//! `LeaseReport`: what an engine found about one lease, in the one shape
//! every engine shares (and `lockfile inspect --json` prints).

use std::fmt;
use std::time::{Duration, SystemTime};

use lockfile::OwnerRecord;
use lockfile::history::LastRun;
use lockfile::inspect::{BelievedHistory, Described, Finding, InspectOptions, Severity, TimeField};
use lockfile::json::OwnerJson;
use lockfile::tick::Claim;
use serde::{Deserialize, Serialize, Serializer};

use crate::History;

/// A lease's state: the lock file's states, of which a lease only ever is
/// `free` (nobody holds it) or `held`. It is never stale or debris: the
/// holder's record goes with its lease.
pub type LeaseState = lockfile::LockState;

/// What an engine found about one lease ([`Engine::inspect`](crate::Engine::inspect)).
///
/// Serialises to the JSON shape of `lockfile inspect --json` for leases,
/// the same for every engine: the `owner`, `last_run` and `findings` of a
/// lock file's report, plus the lease's own keys.
///
/// ```json
/// {"version":1,"engine":"etcd","name":"nightly","key":"lockfile/locks/nightly","state":"held",
///  "owner":{"pid":4242,"hostname":"web-1","token":"…","job":"nightly",
///           "acquired_at":"2026-01-02T03:04:05.000000Z","heartbeat_interval_ms":3333,
///           "heartbeat_interval_seconds":3.333},
///  "fencing_token":1187,"lease_id":7587869727512379142,
///  "ttl_seconds":10.0,"ttl_remaining_seconds":8.0,
///  "last_run":{"started_at":"2026-01-01T03:04:05.000000Z","finished_at":"2026-01-01T03:09:05.000000Z",
///              "duration_seconds":300.0,"exit_code":1,"signal":null,"outcome":"failed",
///              "consecutive_failures":1,"last_failure_at":"2026-01-01T03:09:05.000000Z"},
///  "last_success":"2025-12-31T03:08:55.000000Z",
///  "findings":[]}
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LeaseReport {
    /// The engine that keeps the lease: `etcd`, `postgres`.
    pub engine: String,
    /// The lease name.
    pub name: String,
    /// Where the engine keeps it (an etcd key, a table row's name).
    pub key: String,
    /// Whether the lease is held.
    pub state: LeaseState,
    /// The holder's owner record, when the lease holds a readable one.
    pub owner: Option<OwnerRecord>,
    /// The holder's fencing token.
    pub fencing_token: Option<u64>,
    /// The engine's own id of the lease, when it has one (etcd's lease id).
    pub lease_id: Option<i64>,
    /// The TTL the lease was granted.
    pub ttl: Option<Duration>,
    /// What is left of the lease's TTL, as the server counts it.
    pub ttl_remaining: Option<Duration>,
    /// Why the lease's value is not an owner record, when it is not.
    pub content_error: Option<String>,
    /// How the last finished run ended, from the run history, which
    /// outlives the lease: present for a free lease too.
    pub last_run: Option<LastRun>,
    /// When the job last succeeded, from the run history.
    pub last_success: Option<SystemTime>,
    /// The last claim on a tick (`--once-per`), from the run history.
    pub last_claimed_tick: Option<Claim>,
    /// Why the run history could not be read, when it could not (not ours,
    /// or not readable by this user). The rest of the report stands.
    pub history_error: Option<String>,
    /// What is wrong, or worth a look, as judged by
    /// [`judged`](LeaseReport::judged): `aged`, `overrunning` (past the
    /// maximum runtime the holder recorded), `never_succeeded`, `silent`,
    /// `future_time` (a time in the history or the owner record that no run
    /// can have written yet: it is not believed).
    pub findings: Vec<Finding>,
    /// The lease's other slots (`NAME@1` and up), when it is slot 0 of a
    /// set (see [`crate::slots`]), in slot order: filled by
    /// [`slots::inspect_slots`](crate::slots::inspect_slots) and
    /// [`slots::gather`](crate::slots::gather); empty otherwise.
    pub slots: Vec<LeaseReport>,
    /// The history's times as read, before [`judged`](LeaseReport::judged)
    /// left out those it may not believe: each judgement starts from them.
    read: Box<BelievedHistory>,
}

/// What an engine read about a held lease, for [`LeaseReport::held`].
#[derive(Clone, Debug)]
pub struct Holding<'a> {
    /// The stored owner record, as bytes (JSON when it is one of ours).
    pub value: &'a [u8],
    /// The holder's fencing token.
    pub fencing_token: u64,
    /// The engine's own id of the lease, if it has one.
    pub lease_id: Option<i64>,
    /// The TTL the lease was granted.
    pub ttl: Option<Duration>,
    /// What is left of it, as the server counts it.
    pub ttl_remaining: Option<Duration>,
}

impl LeaseReport {
    /// A lease nobody holds, with no history yet.
    pub fn free(engine: &str, name: &str, key: &str) -> LeaseReport {
        LeaseReport {
            engine: engine.to_owned(),
            name: name.to_owned(),
            key: key.to_owned(),
            state: LeaseState::Free,
            owner: None,
            fencing_token: None,
            lease_id: None,
            ttl: None,
            ttl_remaining: None,
            content_error: None,
            last_run: None,
            last_success: None,
            last_claimed_tick: None,
            history_error: None,
            findings: Vec::new(),
            slots: Vec::new(),
            read: Box::default(),
        }
    }

    /// The same lease, held as `holding` says. A value that is not an owner
    /// record leaves `owner` empty and says why in `content_error`.
    #[must_use]
    pub fn held(mut self, holding: Holding<'_>) -> LeaseReport {
        match OwnerRecord::from_json(holding.value) {
            Ok(owner) => self.owner = Some(owner),
            Err(e) => self.content_error = Some(e.to_string()),
        }
        self.state = LeaseState::Held;
        self.fencing_token = Some(holding.fencing_token);
        self.lease_id = holding.lease_id;
        self.ttl = holding.ttl;
        self.ttl_remaining = holding.ttl_remaining;
        self
    }

    /// The same lease with its run history as read: the history, none yet,
    /// or why it could not be read.
    #[must_use]
    pub fn with_history(mut self, history: Result<Option<History>, String>) -> LeaseReport {
        match history {
            Ok(history) => {
                let history = history.unwrap_or_default();
                self.last_success = history.last_success_at();
                self.last_run = history.last_run;
                self.last_claimed_tick = history.last_claimed_tick;
                self.read = Box::new(BelievedHistory::new(
                    self.last_run.clone(),
                    self.last_success,
                    self.last_claimed_tick.clone(),
                ));
            }
            Err(e) => self.history_error = Some(e),
        }
        self
    }

    /// The same report with its findings judged by `opts` at `now`, as
    /// lock files are: [`InspectOptions::judge_run`] on the holder's age and
    /// the last success. Replaces any earlier findings.
    ///
    /// The history's times, and the holder's acquisition, were dated by
    /// whichever clock wrote them (a host's, or the server's): one more than
    /// a minute ahead of `now` is a `future_time` finding and is not
    /// believed, as in a lock file, so that a run dated years ahead never
    /// mutes the silence alarm.
    #[must_use]
    pub fn judged(mut self, opts: &InspectOptions, now: SystemTime) -> LeaseReport {
        self.findings.clear();
        let history =
            InspectOptions::believed_history((*self.read).clone(), now, &mut self.findings);
        self.last_run = history.last_run;
        self.last_success = history.last_success;
        self.last_claimed_tick = history.last_claimed_tick;
        let findings = &mut self.findings;
        let held = self
            .owner
            .as_ref()
            .filter(|_| self.state == LeaseState::Held)
            .filter(|o| InspectOptions::believed(TimeField::Acquired, o.acquired_at, now, findings))
            .map(|o| (o, now.duration_since(o.acquired_at).unwrap_or_default()));
        opts.judge_run(held, self.last_success, now, findings);
        self.slots = std::mem::take(&mut self.slots)
            .into_iter()
            .map(|slot| slot.judged(opts, now))
            .collect();
        self
    }
}

impl lockfile::check::Subject for LeaseReport {
    fn describe(&self) -> String {
        format!(
            "{} lease `{}`",
            self.engine,
            lockfile::text::escape(&self.name)
        )
    }

    fn findings(&self) -> &[Finding] {
        &self.findings
    }

    fn last_run(&self) -> Option<&LastRun> {
        self.last_run.as_ref()
    }

    fn last_success(&self) -> Option<SystemTime> {
        self.last_success
    }

    fn slots(&self) -> &[LeaseReport] {
        &self.slots
    }

    fn slot(&self) -> Option<lockfile::record::Slot> {
        self.owner.as_ref()?.slot
    }

    fn held(&self) -> Option<(Duration, Option<&OwnerRecord>)> {
        let owner = self.owner.as_ref();
        let age = owner.map(|o| {
            SystemTime::now()
                .duration_since(o.acquired_at)
                .unwrap_or_default()
        });
        (self.state == LeaseState::Held).then(|| (age.unwrap_or_default(), owner))
    }

    fn alone(&self) -> LeaseReport {
        let mut one = self.clone();
        one.slots = Vec::new();
        one
    }
}

impl LeaseReport {
    /// The most severe finding's severity, its slots' included, if any.
    pub fn severity(&self) -> Option<Severity> {
        let own = self.findings.iter().map(Finding::severity).max();
        self.slots
            .iter()
            .map(LeaseReport::severity)
            .fold(own, Ord::max)
    }

    /// This report and its slots' (slot 0 first), or itself alone.
    pub fn with_slots(&self) -> impl Iterator<Item = &LeaseReport> {
        std::iter::once(self).chain(&self.slots)
    }
}

impl Serialize for LeaseReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct ReportJson<'a> {
            version: u32,
            engine: &'a str,
            name: &'a str,
            key: &'a str,
            state: LeaseState,
            owner: Option<OwnerJson<'a>>,
            fencing_token: Option<u64>,
            lease_id: Option<i64>,
            ttl_seconds: Option<f64>,
            ttl_remaining_seconds: Option<f64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            content_error: Option<&'a str>,
            last_run: Option<&'a LastRun>,
            last_success: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            last_claimed_tick: Option<&'a Claim>,
            #[serde(skip_serializing_if = "Option::is_none")]
            history_error: Option<&'a str>,
            findings: Vec<Described<'a>>,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            slots: &'a [LeaseReport],
        }
        ReportJson {
            version: lockfile::json::VERSION,
            engine: &self.engine,
            name: &self.name,
            key: &self.key,
            state: self.state,
            owner: self.owner.as_ref().map(OwnerJson),
            fencing_token: self.fencing_token,
            lease_id: self.lease_id,
            ttl_seconds: self.ttl.map(|d| d.as_secs_f64()),
            ttl_remaining_seconds: self.ttl_remaining.map(|d| d.as_secs_f64()),
            content_error: self.content_error.as_deref(),
            last_run: self.last_run.as_ref(),
            last_success: self
                .last_success
                .map(|t| humantime::format_rfc3339_micros(t).to_string()),
            last_claimed_tick: self.last_claimed_tick.as_ref(),
            history_error: self.history_error.as_deref(),
            findings: self.findings.iter().map(Finding::described).collect(),
            slots: &self.slots,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for LeaseReport {
    /// Reads what [`Serialize`] wrote, of this version or a later minor one:
    /// unknown keys are ignored, and so is a finding of a kind this version
    /// does not know. The history it is judged from is the one written,
    /// which holds only the times that were believed: judged again, a report
    /// read back has no `future_time` finding for a time already left out.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct ReadJson {
            engine: String,
            name: String,
            key: String,
            state: LeaseState,
            owner: Option<OwnerRecord>,
            fencing_token: Option<u64>,
            lease_id: Option<i64>,
            ttl_seconds: Option<f64>,
            ttl_remaining_seconds: Option<f64>,
            #[serde(default)]
            content_error: Option<String>,
            last_run: Option<LastRun>,
            last_success: Option<String>,
            #[serde(default)]
            last_claimed_tick: Option<Claim>,
            #[serde(default)]
            history_error: Option<String>,
            #[serde(deserialize_with = "lockfile::inspect::known_findings")]
            findings: Vec<Finding>,
            #[serde(default)]
            slots: Vec<LeaseReport>,
        }
        let secs = |s: Option<f64>| s.and_then(|s| Duration::try_from_secs_f64(s).ok());
        let r = ReadJson::deserialize(d)?;
        let last_success = r
            .last_success
            .map(|t| humantime::parse_rfc3339(&t))
            .transpose()
            .map_err(serde::de::Error::custom)?;
        let read = BelievedHistory::new(
            r.last_run.clone(),
            last_success,
            r.last_claimed_tick.clone(),
        );
        Ok(LeaseReport {
            engine: r.engine,
            name: r.name,
            key: r.key,
            state: r.state,
            owner: r.owner,
            fencing_token: r.fencing_token,
            lease_id: r.lease_id,
            ttl: secs(r.ttl_seconds),
            ttl_remaining: secs(r.ttl_remaining_seconds),
            content_error: r.content_error,
            last_run: r.last_run,
            last_success,
            last_claimed_tick: r.last_claimed_tick,
            history_error: r.history_error,
            findings: r.findings,
            slots: r.slots,
            read: Box::new(read),
        })
    }
}

impl fmt::Display for LeaseReport {
    /// One line for humans.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.state)?;
        if let Some(owner) = &self.owner {
            write!(f, " by {owner}")?;
        }
        if let Some(token) = self.fencing_token {
            write!(f, ", fencing token {token}")?;
        }
        if let Some(left) = self.ttl_remaining {
            write!(f, ", lease expires in {}s unless renewed", left.as_secs())?;
        }
        if let Some(e) = &self.content_error {
            write!(f, " ({e})")?;
        }
        if let Some(run) = &self.last_run {
            write!(f, "; last run {}", run.outcome)?;
        }
        for finding in &self.findings {
            write!(f, "; {finding}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lease_past_its_recorded_runtime_is_overrunning() {
        let mut owner = OwnerRecord::current(Some("nightly"), None);
        owner.max_runtime_ms = Some(1_000);
        let value = serde_json::to_vec(&owner).unwrap();
        let later = owner.acquired_at + Duration::from_secs(5);
        let report = LeaseReport::free("etcd", "nightly", "lockfile/locks/nightly")
            .held(Holding {
                value: &value,
                fencing_token: 7,
                lease_id: None,
                ttl: Some(Duration::from_secs(10)),
                ttl_remaining: Some(Duration::from_secs(9)),
            })
            .judged(
                InspectOptions::new().expect_every(Duration::from_secs(3600)),
                later,
            );
        let kinds: Vec<&str> = report.findings.iter().map(Finding::kind).collect();
        assert_eq!(kinds, ["overrunning", "never_succeeded"]);
        let json = serde_json::to_value(&report).unwrap();
        for key in [
            "engine",
            "name",
            "key",
            "owner",
            "fencing_token",
            "lease_id",
            "ttl_seconds",
            "ttl_remaining_seconds",
            "last_run",
            "findings",
        ] {
            assert!(json.get(key).is_some(), "{key} in {json}");
        }
        assert_eq!(json["findings"][0]["kind"], "overrunning");
        assert_eq!(json["version"], 1);
        // It reads back as it was written, and is judged again the same;
        // what a later minor version adds is read past.
        let back: LeaseReport = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
        assert_eq!(back.owner, report.owner);
        let opts = InspectOptions::new();
        let judged = |r: LeaseReport| r.judged(&opts, later).findings;
        assert_eq!(judged(back), judged(report.clone()));
        let mut newer = json.clone();
        newer["added_later"] = serde_json::json!([1]);
        newer["findings"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"kind": "a_later_kind", "severity": "critical"}));
        let back: LeaseReport = serde_json::from_value(newer).unwrap();
        assert_eq!(back.findings.len(), report.findings.len());
        // Free again: nothing is overrunning.
        let free = LeaseReport::free("etcd", "nightly", "k").judged(&InspectOptions::new(), later);
        assert!(free.findings.is_empty());
    }

    #[test]
    fn a_value_that_is_no_record_is_said_so() {
        let report = LeaseReport::free("etcd", "x", "k").held(Holding {
            value: b"hello",
            fencing_token: 1,
            lease_id: Some(3),
            ttl: None,
            ttl_remaining: None,
        });
        assert_eq!(report.state, LeaseState::Held);
        assert!(report.owner.is_none());
        assert!(report.content_error.is_some());
        let history = report.with_history(Err("denied".to_owned()));
        assert_eq!(history.history_error.as_deref(), Some("denied"));
    }

    #[test]
    fn a_history_dated_years_ahead_is_not_believed_and_never_mutes_the_alarm() {
        use lockfile::history::{Outcome, RunEnd};
        let now = SystemTime::now();
        let years = Duration::from_secs(10 * 365 * 86_400);
        let ahead = History::default().after(
            RunEnd {
                outcome: Outcome::Succeeded,
                exit_code: Some(0),
                signal: None,
                started_at: now + years,
            },
            None,
        );
        // `after` dates the end by this host's clock: a host 10 years ahead.
        let mut forged = ahead.clone();
        let mut run = forged.last_run.clone().unwrap();
        run.finished_at = now + years;
        forged.last_run = Some(run.clone());
        forged.last_success = Some(run);
        let mut opts = InspectOptions::new();
        opts.expect_every(Duration::from_secs(1));
        let report = LeaseReport::free("postgres", "nightly", "nightly")
            .with_history(Ok(Some(forged)))
            .judged(&opts, now);
        let kinds: Vec<&str> = report.findings.iter().map(Finding::kind).collect();
        assert!(kinds.contains(&"future_time"), "{kinds:?}");
        assert!(kinds.contains(&"never_succeeded"), "{kinds:?}");
        assert_eq!(report.last_success, None);
        assert_eq!(report.last_run, None);
        // Judged again (the engine judges, then the command): the same.
        let again = report.clone().judged(&opts, now);
        assert_eq!(again.findings, report.findings);
        // Once that time has come, it is believed.
        let later = report.judged(&opts, now + years + Duration::from_secs(1));
        assert!(later.last_success.is_some());
        assert!(later.findings.is_empty(), "{:?}", later.findings);
    }
}
