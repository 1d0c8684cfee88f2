//! The judgement whether a holder may be evicted: steps 1 to 4 of the
//! procedure. Nothing here sends a signal, so every refusal leaves the
//! holder untouched; the stop is `stop`'s, given a [`Plan`] only when the
//! judgement found every process to stop verified.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use super::stop::Plan;
use super::targets::find_targets;
use crate::error::EvictionRefused;
use crate::record::Evicted;
use crate::sys::{self, ProcessIdentity};
use crate::{Finding, HeartbeatSource, InspectOptions, LockState, OwnerRecord};

/// The grace between SIGTERM and SIGKILL when nobody said: the command's
/// `--kill-after` default, both for a `--watchdog` holder that recorded none
/// and for this evictor.
pub(super) const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(10);

/// A promise is broken once the silence is longer than it: judge again this
/// much after the moment it would be.
const PAST_THE_PROMISE: Duration = Duration::from_millis(10);

/// What the judgement of a holder decided.
pub(super) enum Judgement {
    /// Stop it: everyone to stop is verified.
    Evict(Plan),
    /// Not this holder, or not yet; when it may change (its promise breaks),
    /// if the clock alone can change it.
    Refused(EvictionRefused, Option<Instant>),
    /// The lock came free, or the heartbeat moved, while it was judged:
    /// look again at once.
    Moving(EvictionRefused),
}

/// How long the holder's heartbeat must have been silent before it may be
/// evicted: longer than `evict_after`, and longer than what it promised.
fn threshold(owner: &OwnerRecord, evict_after: Duration) -> Result<Duration, EvictionRefused> {
    let promise = match owner.heartbeat_source {
        Some(HeartbeatSource::Wrapper) => return Err(EvictionRefused::WrapperHeartbeat),
        // Its own watchdog gets the first chance: its promise, then the
        // grace it gives its job between SIGTERM and SIGKILL.
        Some(HeartbeatSource::Command) => owner
            .heartbeat_interval()
            .map(|i| i.saturating_add(owner.kill_after().unwrap_or(DEFAULT_KILL_AFTER))),
        None => owner.heartbeat_interval(),
    };
    let promise = promise.ok_or(EvictionRefused::NoPromise)?;
    Ok(promise.max(evict_after))
}

/// Whether the record names a process we can identify on this host, in this
/// boot: its start time and PID namespace.
fn identifiable(owner: &OwnerRecord, me: &ProcessIdentity) -> Result<(u64, u64), EvictionRefused> {
    if owner.hostname != me.hostname {
        return Err(EvictionRefused::OtherHost {
            host: owner.hostname.to_string(),
        });
    }
    let missing = |missing| EvictionRefused::Unidentifiable { missing };
    let theirs = owner.boot_id.as_ref().ok_or(missing("boot id"))?;
    let ours = me.boot_id.as_ref().ok_or(missing("boot id"))?;
    if theirs != ours {
        return Err(EvictionRefused::OtherBoot {
            recorded: theirs.to_string(),
            current: ours.to_string(),
        });
    }
    let start_time = owner.start_time.ok_or(missing("start time"))?;
    let pid_namespace = owner.pid_namespace.ok_or(missing("PID namespace"))?;
    Ok((start_time, pid_namespace))
}

/// Judges the holder of the lock on `file` (at `path`).
pub(super) fn judge(evict_after: Duration, path: &Path, file: &File) -> Judgement {
    use EvictionRefused as Why;
    let refused = |why| Judgement::Refused(why, None);
    if let Some(why) = sys::EVICTION_UNSUPPORTED {
        return refused(Why::Unsupported { why });
    }
    let Ok(ours) = sys::identity_of(file) else {
        return refused(Why::Replaced);
    };
    let names_ours = || sys::identity_at(path).is_ok_and(|at| at.same_file(&ours));
    if !names_ours() {
        return refused(Why::Replaced);
    }
    let report = match InspectOptions::new().inspect(path) {
        Ok(report) => report,
        Err(e) => return refused(Why::Inspect(Box::new(e))),
    };
    // Inspect opened the path again: make sure it looked at our file.
    if !names_ours() {
        return refused(Why::Replaced);
    }
    let planted = report.findings.iter().find_map(|f| match f {
        Finding::PlantedFile { owner_uid, .. } => Some(*owner_uid),
        _ => None,
    });
    if let Some(owner_uid) = planted {
        return refused(Why::PlantedFile { owner_uid });
    }
    if report.state != LockState::Held {
        return Judgement::Moving(Why::UnidentifiedHolder { pid: None });
    }
    let owner = match (&report.owner, report.no_record) {
        (Some(owner), None) => owner,
        _ => return refused(Why::NoRecord),
    };
    if report.released {
        return refused(Why::Released);
    }
    let me = sys::process_identity();
    let (threshold, (start_time, pid_namespace)) =
        match threshold(owner, evict_after).and_then(|t| Ok((t, identifiable(owner, &me)?))) {
            Ok(judged) => judged,
            Err(why) => return refused(why),
        };
    let silent = report.heartbeat_age.unwrap_or_default();
    if silent <= threshold {
        let broken_at = Instant::now()
            .checked_add(threshold - silent)
            .and_then(|t| t.checked_add(PAST_THE_PROMISE));
        return Judgement::Refused(Why::NotSilentLongEnough { silent, threshold }, broken_at);
    }
    let targets = match find_targets(owner, start_time, pid_namespace, file, &ours, &me) {
        Ok(targets) => targets,
        Err(why) => return refused(why),
    };
    // The last look, with every pidfd open: a beat since the judgement means
    // it is alive after all.
    let modified = file.metadata().and_then(|m| m.modified()).ok();
    if modified != report.modified {
        return Judgement::Moving(Why::Resumed);
    }
    let plan = Plan {
        targets: targets.list,
        uid: targets.uid,
        evicted: Evicted {
            token: owner.token,
            pid: owner.pid,
            job: owner.job.clone(),
            silent_ms: crate::clock::millis(silent),
        },
        started_at: owner.acquired_at,
        previous_run: report.last_run,
    };
    Judgement::Evict(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(interval: Option<u64>, source: Option<HeartbeatSource>) -> OwnerRecord {
        let mut owner = OwnerRecord::current(Some("job"), interval.map(Duration::from_secs));
        owner.heartbeat_source = source;
        owner
    }

    #[test]
    fn a_holder_is_hung_only_once_it_broke_its_own_promise() {
        let secs = Duration::from_secs;
        let lib = record(Some(30), None);
        assert_eq!(threshold(&lib, secs(1)).unwrap(), secs(30));
        assert_eq!(threshold(&lib, secs(60)).unwrap(), secs(60));

        // A watchdog holder: its promise plus its kill-after, 10 s unsaid.
        let mut watchdog = record(Some(2), Some(HeartbeatSource::Command));
        assert_eq!(threshold(&watchdog, secs(1)).unwrap(), secs(12));
        watchdog.kill_after_ms = Some(500);
        assert_eq!(
            threshold(&watchdog, secs(1)).unwrap(),
            Duration::from_millis(2_500)
        );

        assert!(matches!(
            threshold(&record(Some(2), Some(HeartbeatSource::Wrapper)), secs(1)),
            Err(EvictionRefused::WrapperHeartbeat)
        ));
        assert!(matches!(
            threshold(&record(None, None), secs(1)),
            Err(EvictionRefused::NoPromise)
        ));
        assert!(matches!(
            threshold(&record(None, Some(HeartbeatSource::Command)), secs(1)),
            Err(EvictionRefused::NoPromise)
        ));
    }

    #[test]
    fn only_a_record_of_this_host_and_boot_with_a_full_identity_is_identifiable() {
        let me = sys::process_identity();
        let ours = record(Some(1), None);
        assert!(identifiable(&ours, &me).is_ok());

        let mut other_host = ours.clone();
        other_host.hostname = "elsewhere".into();
        assert!(matches!(
            identifiable(&other_host, &me),
            Err(EvictionRefused::OtherHost { host }) if host == "elsewhere"
        ));
        let mut other_boot = ours.clone();
        other_boot.boot_id = Some("00000000-0000-0000-0000-000000000000".into());
        assert!(matches!(
            identifiable(&other_boot, &me),
            Err(EvictionRefused::OtherBoot { .. })
        ));
        let mut no_start = ours.clone();
        no_start.start_time = None;
        assert!(matches!(
            identifiable(&no_start, &me),
            Err(EvictionRefused::Unidentifiable {
                missing: "start time"
            })
        ));
    }
}
