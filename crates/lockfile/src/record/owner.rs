//! Who holds, or last held, a lock.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::DecodeError;
use super::fields::{Evicted, HeartbeatSource, Release};
use super::seconds;
use super::token::new_token;
use crate::clock::{millis, now};
use crate::tick::Claim;
use crate::{rfc3339, sys, text};

/// Who holds, or last held, a lock.
///
/// Written into the lock file right after the kernel lock is taken (and into
/// the key of an etcd lease by `lockfile-etcd`). A PID alone identifies nothing:
/// PIDs are reused, restart at 1 in every container and mean nothing on
/// another host. Together with the hostname, the boot id, the PID namespace and
/// the process start time, they identify one process instance; the random
/// `token` identifies one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct OwnerRecord {
    /// The holder's process id, as seen in its own PID namespace.
    pub pid: u32,
    /// The holder's hostname (`uname -n`). Shared (an `Arc`), so that the
    /// records of one process cost no allocation for it.
    pub hostname: Arc<str>,
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`) when known.
    /// A different boot id means the holder's machine rebooted since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<Arc<str>>,
    /// The inode of the holder's PID namespace (`/proc/self/ns/pid`) when known.
    /// A PID recorded in another namespace cannot be checked from this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_namespace: Option<u64>,
    /// The holder's start time in clock ticks since boot (field 22 of
    /// `/proc/PID/stat`) when known. A live PID with another start time is a
    /// different process that reused the number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<u64>,
    /// A random token for this one acquisition.
    pub token: Uuid,
    /// The job name given by the holder, if any.
    #[serde(default)]
    pub job: Option<String>,
    /// When the lock was taken (wall clock).
    #[serde(with = "rfc3339")]
    pub acquired_at: SystemTime,
    /// How often the holder promised to call `heartbeat()`, in milliseconds.
    /// `inspect` judges a silent heartbeat against this promise by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_interval_ms: Option<u64>,
    /// Who keeps the heartbeat: a wrapper on the job's behalf, which proves
    /// only that the wrapper lives, or the job itself, which proves progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_source: Option<HeartbeatSource>,
    /// The longest the holder promised to hold the lock, in milliseconds
    /// (written as `max_runtime_seconds`, fractional).
    #[serde(
        default,
        rename = "max_runtime_seconds",
        with = "seconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_runtime_ms: Option<u64>,
    /// How long the holder gives its job between SIGTERM and SIGKILL when it
    /// stops the job itself, in milliseconds (written as
    /// `kill_after_seconds`, fractional). An evictor waits this much past a
    /// `--watchdog` holder's promise, so that its own watchdog acts first.
    #[serde(
        default,
        rename = "kill_after_seconds",
        with = "seconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub kill_after_ms: Option<u64>,
    /// The hung run this holder evicted to take the lock, when it did (see
    /// [`LockOptions::evict_after`](crate::LockOptions::evict_after)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Boxed: most records have none, and every guard carries its record.
    pub evicted: Option<Box<Evicted>>,
    /// Whether the release of this lock will be marked in the record.
    /// [`Release::Unrecorded`](crate::record::Release::Unrecorded) for a record written on behalf of a process
    /// that holds the lock through a descriptor of its own (flock(1)'s
    /// descriptor form): it may let go by closing it, which marks nothing.
    /// Written only when unrecorded.
    #[serde(default, skip_serializing_if = "Release::is_recorded")]
    pub release: Release,
    /// Which slot of how many the holder took, when it asked for one of N
    /// ([`LockOptions::acquire_slot`](crate::LockOptions::acquire_slot),
    /// `lockfile run --slots`). Written only then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<super::Slot>,
}

impl OwnerRecord {
    /// A fresh record for the calling process: its identity, a new random
    /// token, `acquired_at` set to now.
    ///
    /// The identity (hostname, boot id, start time, PID namespace) is read once
    /// per process and cached, so this is cheap enough for a lock's hot path.
    pub fn current(job: Option<&str>, heartbeat_interval: Option<Duration>) -> OwnerRecord {
        let me = sys::process_identity();
        OwnerRecord {
            pid: me.pid,
            hostname: me.hostname.clone(),
            boot_id: me.boot_id.clone(),
            pid_namespace: me.pid_namespace,
            start_time: me.start_time,
            token: new_token(me.pid),
            job: job.map(str::to_owned),
            acquired_at: now(),
            heartbeat_interval_ms: heartbeat_interval.map(millis),
            heartbeat_source: None,
            max_runtime_ms: None,
            kill_after_ms: None,
            evicted: None,
            release: Release::Recorded,
            slot: None,
        }
    }

    /// The longest the holder promised to hold the lock, if it promised.
    pub fn max_runtime(&self) -> Option<Duration> {
        self.max_runtime_ms.map(Duration::from_millis)
    }

    /// How long the holder gives its job between SIGTERM and SIGKILL, if it
    /// said.
    pub fn kill_after(&self) -> Option<Duration> {
        self.kill_after_ms.map(Duration::from_millis)
    }

    /// The heartbeat interval the holder promised, if any.
    pub fn heartbeat_interval(&self) -> Option<Duration> {
        self.heartbeat_interval_ms.map(Duration::from_millis)
    }

    /// How long ago the lock was taken, or zero when `acquired_at` lies in the
    /// future (clock skew between hosts, or a clock that stepped back).
    pub fn age(&self, now: SystemTime) -> Duration {
        now.duration_since(self.acquired_at).unwrap_or_default()
    }

    /// Names a lock's holder for a message: its record, or, when it wrote
    /// none (or none could be read), says so.
    ///
    /// # Examples
    ///
    /// ```
    /// let none = lockfile::OwnerRecord::describe(None).to_string();
    /// assert_eq!(none, "a holder that wrote no owner record");
    /// ```
    pub fn describe(owner: Option<&OwnerRecord>) -> impl fmt::Display + '_ {
        struct Describe<'a>(Option<&'a OwnerRecord>);
        impl fmt::Display for Describe<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.0 {
                    Some(owner) => owner.fmt(f),
                    None => f.write_str("a holder that wrote no owner record"),
                }
            }
        }
        Describe(owner)
    }

    /// Decodes a bare owner record, as JSON (the value of a lease's key in
    /// etcd), rather than a lock file's whole content ([`decode_record`](crate::record::decode_record)).
    ///
    /// # Errors
    ///
    /// [`DecodeError::Malformed`](crate::record::DecodeError::Malformed) when the bytes are not one.
    pub fn from_json(bytes: &[u8]) -> Result<OwnerRecord, DecodeError> {
        serde_json::from_slice(bytes).map_err(|e| DecodeError::Malformed(e.to_string()))
    }

    /// Whether this record was written on this host.
    pub fn is_local(&self) -> bool {
        self.hostname == sys::process_identity().hostname
    }
}

impl fmt::Display for OwnerRecord {
    /// One line for humans:
    /// `pid 123 on host "web-1", job "backup", for 3m 12s (since 2026-…Z)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid {} on host {}",
            self.pid,
            text::quoted(&self.hostname)
        )?;
        if let Some(job) = &self.job {
            write!(f, ", job {}", text::quoted(job))?;
        }
        let held = Duration::from_secs(self.age(SystemTime::now()).as_secs());
        write!(
            f,
            ", for {} (since {})",
            humantime::format_duration(held),
            rfc3339::display(self.acquired_at)
        )
    }
}

// Here rather than beside the claim: a claim names its claimant by what its
// record says, and the record, which carries claims, is the one that knows
// both.
impl Claim {
    /// `owner`'s claim on `tick`, made at `now`.
    pub fn by(owner: &OwnerRecord, tick: SystemTime, now: SystemTime) -> Claim {
        Claim {
            tick,
            host: owner.hostname.to_string(),
            pid: owner.pid,
            token: owner.token.to_string(),
            claimed_at: now,
        }
    }
}
