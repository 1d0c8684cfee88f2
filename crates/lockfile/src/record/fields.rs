//! The parts of an owner record that are more than a number or a string.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::seconds;

/// The run that a holder evicted to take the lock: it had broken its
/// heartbeat promise, and was stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Evicted {
    /// The evicted run's token.
    pub token: Uuid,
    /// The evicted owner's process id, as its record gave it.
    pub pid: u32,
    /// The evicted run's job name, if it had one.
    #[serde(default)]
    pub job: Option<String>,
    /// How long its heartbeat had been silent when it was judged hung, in
    /// milliseconds (written as `silent_seconds`, fractional).
    #[serde(rename = "silent_seconds", with = "seconds::required")]
    pub silent_ms: u64,
}

impl Evicted {
    /// How long the evicted run's heartbeat had been silent.
    pub fn silent(&self) -> Duration {
        Duration::from_millis(self.silent_ms)
    }
}

/// Whether a record's release will be marked in the file (its `released`
/// flag), which is how `inspect` tells a lock released cleanly (`free`) from
/// one whose owner died holding it (`stale`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Release {
    /// The holder marks the record released when it lets go: an unreleased
    /// record on a lock nobody holds is a dead owner's litter (`stale`).
    #[default]
    Recorded,
    /// Nobody is there to mark it: the record was written for a process that
    /// holds the lock through its own descriptor (a shell's `exec 9>file`)
    /// and releases it by closing that, or by exiting. Once nobody holds the
    /// lock, `inspect` calls the file `free`, not `stale`.
    Unrecorded,
}

impl Release {
    /// `recorded` or `unrecorded`.
    pub fn as_str(self) -> &'static str {
        match self {
            Release::Recorded => "recorded",
            Release::Unrecorded => "unrecorded",
        }
    }

    pub(super) fn is_recorded(&self) -> bool {
        *self == Release::Recorded
    }
}

/// Who refreshes a lock's heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HeartbeatSource {
    /// A wrapper on the job's behalf (`lockfile run` without `--watchdog`): a
    /// beat proves that the wrapper lives, not that the job makes progress.
    Wrapper,
    /// The job itself, between units of work: a beat proves progress.
    Command,
}

impl HeartbeatSource {
    /// `wrapper` or `command`.
    pub fn as_str(self) -> &'static str {
        match self {
            HeartbeatSource::Wrapper => "wrapper",
            HeartbeatSource::Command => "command",
        }
    }
}
