//! `Finding` and `Severity`: what is worth telling about a lock file, with
//! the numbers that prove it.

use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::Holder;

/// How serious a finding is, in monitoring-plugin terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Severity {
    /// Worth a look; nothing is blocked yet.
    Warning,
    /// A job is blocked, hung, or not running.
    Critical,
}

impl Severity {
    /// `warning` or `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

impl Severity {
    /// The monitoring-plugin status a finding of this severity gives.
    pub fn status(self) -> Status {
        match self {
            Severity::Warning => Status::Warning,
            Severity::Critical => Status::Critical,
        }
    }
}

/// A monitoring-plugin status (Nagios, Icinga, Sensu and their kin): the
/// word a check prints first, and its exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
// Exhaustive on purpose: the monitoring-plugin convention has these four
// and no more, and checks map each to an exit code.
#[allow(clippy::exhaustive_enums)]
pub enum Status {
    /// All is well: exit 0.
    Ok,
    /// Worth a look: exit 1.
    Warning,
    /// Something could not be judged (a file that cannot be read): exit 3.
    Unknown,
    /// A job is blocked, hung, failing or not running: exit 2.
    Critical,
}

impl Status {
    /// `OK`, `WARNING`, `UNKNOWN` or `CRITICAL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Warning => "WARNING",
            Status::Unknown => "UNKNOWN",
            Status::Critical => "CRITICAL",
        }
    }

    /// The plugin's exit code: 0, 1, 3 or 2, as `std::process::exit` and
    /// `ExitCode` take it (`ExitCode::from(status)` does it in one step).
    pub fn code(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::Warning => 1,
            Status::Critical => 2,
            Status::Unknown => 3,
        }
    }
}

impl From<Status> for std::process::ExitCode {
    /// Exits with the plugin's status: `fn main() -> ExitCode { status.into() }`.
    fn from(status: Status) -> std::process::ExitCode {
        std::process::ExitCode::from(status.code())
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A finding as a report shows it: its kind and fields, its severity, and
/// its sentence. The one JSON shape of a finding, for lock files and leases.
#[derive(Debug, Serialize)]
#[non_exhaustive]
pub struct Described<'a> {
    /// How serious it is.
    pub severity: Severity,
    /// The finding in a sentence.
    pub message: String,
    /// The finding itself (its `kind` and fields).
    #[serde(flatten)]
    pub finding: &'a Finding,
}

impl Finding {
    /// This finding as a report shows it.
    pub fn described(&self) -> Described<'_> {
        Described {
            severity: self.severity(),
            message: self.to_string(),
            finding: self,
        }
    }
}

/// Something worth telling about a lock file, with the numbers that prove it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Finding {
    /// Held for longer than [`InspectOptions::max_age`](crate::inspect::InspectOptions::max_age).
    Aged {
        /// How long the lock has been held.
        #[serde(rename = "age_seconds", with = "secs")]
        age: Duration,
        /// The threshold it crossed.
        #[serde(rename = "threshold_seconds", with = "secs")]
        threshold: Duration,
    },
    /// Held for longer than the maximum runtime its holder recorded
    /// (`lockfile run --max-runtime`, [`LockOptions::max_runtime`](crate::LockOptions::max_runtime)):
    /// past its own limit.
    Overrunning {
        /// How long the lock has been held.
        #[serde(rename = "age_seconds", with = "secs")]
        age: Duration,
        /// The limit the holder recorded.
        #[serde(rename = "max_runtime_seconds", with = "secs")]
        max_runtime: Duration,
    },
    /// Held, but the heartbeat has been silent for longer than the threshold:
    /// a hung owner blocks every later run.
    HeartbeatSilent {
        /// Time since the last heartbeat.
        #[serde(rename = "silent_seconds", with = "secs")]
        silent: Duration,
        /// The threshold it crossed.
        #[serde(rename = "threshold_seconds", with = "secs")]
        threshold: Duration,
    },
    /// The record was written on another host; its PID means nothing here.
    ForeignHost {
        /// The host named in the record.
        recorded_host: String,
        /// This host.
        local_host: String,
    },
    /// The recorded process is gone, or its PID now belongs to another process.
    OwnerDead {
        /// The recorded PID.
        pid: u32,
        /// How we know: no such process, another start time, another boot.
        reason: String,
    },
    /// The processes holding the kernel lock are not the one the record names.
    HolderMismatch {
        /// The PID in the record, if the file holds a record.
        recorded_pid: Option<u32>,
        /// The processes that hold the kernel lock.
        holders: Vec<Holder>,
    },
    /// The lock lives on a network or FUSE filesystem, where kernel locks may
    /// not cross hosts (or may not work at all).
    NetworkFilesystem {
        /// The filesystem type (`nfs`, `cifs`, `fuse`, ...).
        filesystem: String,
    },
    /// [`InspectOptions::expect_every`](crate::inspect::InspectOptions::expect_every) is set but no success was ever
    /// recorded in this lock file (or there is no lock file).
    NeverSucceeded {
        /// The expected period.
        #[serde(rename = "expect_every_seconds", with = "secs")]
        expect_every: Duration,
    },
    /// The last recorded success is older than [`InspectOptions::expect_every`](crate::inspect::InspectOptions::expect_every).
    Silent {
        /// Time since the last success.
        #[serde(rename = "since_success_seconds", with = "secs")]
        since_success: Duration,
        /// The expected period.
        #[serde(rename = "expect_every_seconds", with = "secs")]
        expect_every: Duration,
    },
    /// The file is planted: it sits in a sticky directory that its group or
    /// everyone may write, and neither the inspecting user nor the
    /// directory's owner owns it (the kernel's `fs.protected_regular`
    /// rule). Its owner can rewrite it, set its times and unlink it at will,
    /// so nothing in it that acts is trusted: no heartbeat, no success, no
    /// run history, and no eviction.
    PlantedFile {
        /// The file's owner.
        owner_uid: u32,
        /// The owner of its directory.
        directory_owner_uid: u32,
    },
    /// A time in the file lies more than a minute in the future: no run can
    /// have recorded it yet. It is not believed (a success "0 s ago", a
    /// heartbeat that never ages), and no later run carries it forward.
    FutureTime {
        /// Which time.
        field: TimeField,
        /// The time, as the file has it.
        #[serde(with = "crate::rfc3339")]
        time: SystemTime,
        /// How far it lies ahead of the clock.
        #[serde(rename = "ahead_seconds", with = "secs")]
        ahead: Duration,
    },
    /// Inspect could not tell whether the lock is held: the table did not
    /// list it, the record names a live owner, and what would settle it
    /// could not be had (see [`Undecided`](crate::inspect::Undecided)). The state is
    /// [`LockState::Undecided`](crate::LockState::Undecided), never `stale`
    /// or `free`.
    Undecided {
        /// Why.
        #[serde(rename = "why")]
        reason: Undecided,
    },
}

/// Which time of a lock file a [`Finding::FutureTime`](crate::inspect::Finding::FutureTime) is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TimeField {
    /// When the recorded owner took the lock.
    Acquired,
    /// The file's modification time: the last heartbeat.
    Heartbeat,
    /// The last recorded success.
    LastSuccess,
    /// A time of the last run: its start, end or last failure.
    LastRun,
    /// When the last claim on a tick (`--once-per`) was made. A claim from
    /// the future never blocks a run.
    LastClaimedTick,
}

impl TimeField {
    /// `acquired`, `heartbeat`, `last_success`, `last_run` or
    /// `last_claimed_tick`.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeField::Acquired => "acquired",
            TimeField::Heartbeat => "heartbeat",
            TimeField::LastSuccess => "last_success",
            TimeField::LastRun => "last_run",
            TimeField::LastClaimedTick => "last_claimed_tick",
        }
    }
}

impl fmt::Display for TimeField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeField::Acquired => "acquisition",
            TimeField::Heartbeat => "heartbeat",
            TimeField::LastSuccess => "last success",
            TimeField::LastRun => "last run",
            TimeField::LastClaimedTick => "last claimed tick",
        })
    }
}

impl Finding {
    /// Every kind this version writes: what [`kind`](Self::kind) returns.
    pub const KINDS: [&'static str; 12] = [
        "aged",
        "heartbeat_silent",
        "foreign_host",
        "owner_dead",
        "holder_mismatch",
        "network_filesystem",
        "never_succeeded",
        "silent",
        "overrunning",
        "planted_file",
        "future_time",
        "undecided",
    ];

    /// The finding's stable name: `aged`, `heartbeat_silent`, `foreign_host`,
    /// `owner_dead`, `holder_mismatch`, `network_filesystem`,
    /// `never_succeeded`, `silent`, `overrunning`, `planted_file`,
    /// `future_time` or `undecided`.
    pub fn kind(&self) -> &'static str {
        match self {
            Finding::Aged { .. } => "aged",
            Finding::HeartbeatSilent { .. } => "heartbeat_silent",
            Finding::ForeignHost { .. } => "foreign_host",
            Finding::OwnerDead { .. } => "owner_dead",
            Finding::HolderMismatch { .. } => "holder_mismatch",
            Finding::NetworkFilesystem { .. } => "network_filesystem",
            Finding::NeverSucceeded { .. } => "never_succeeded",
            Finding::Silent { .. } => "silent",
            Finding::Overrunning { .. } => "overrunning",
            Finding::PlantedFile { .. } => "planted_file",
            Finding::FutureTime { .. } => "future_time",
            Finding::Undecided { .. } => "undecided",
        }
    }

    /// Critical: `heartbeat_silent` (a hung owner blocks every later run),
    /// `never_succeeded` and `silent` (the job is not getting done). Every
    /// other finding is a warning.
    pub fn severity(&self) -> Severity {
        match self {
            Finding::HeartbeatSilent { .. }
            | Finding::NeverSucceeded { .. }
            | Finding::Silent { .. } => Severity::Critical,
            _ => Severity::Warning,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |d: &Duration| humantime::format_duration(Duration::from_secs(d.as_secs()));
        match self {
            Finding::Aged { age, threshold } => {
                write!(f, "held for {}, longer than {}", d(age), d(threshold))
            }
            Finding::Overrunning { age, max_runtime } => write!(
                f,
                "held for {}, past the maximum runtime of {} its holder recorded",
                d(age),
                d(max_runtime)
            ),
            Finding::HeartbeatSilent { silent, threshold } => write!(
                f,
                "no heartbeat for {}, longer than {}: the holder may be hung",
                d(silent),
                d(threshold)
            ),
            Finding::ForeignHost {
                recorded_host,
                local_host,
            } => write!(
                f,
                "the record names host {}, not this host {}: its PID cannot be checked from here",
                crate::text::quoted(recorded_host),
                crate::text::quoted(local_host)
            ),
            Finding::OwnerDead { pid, reason } => {
                write!(f, "the recorded owner pid {pid} is dead: {reason}")
            }
            Finding::HolderMismatch {
                recorded_pid,
                holders,
            } => {
                f.write_str("the kernel lock is held by ")?;
                if holders.is_empty() {
                    f.write_str("a process not visible from here")?;
                }
                for (i, h) in holders.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{h}")?;
                }
                match recorded_pid {
                    Some(pid) => write!(f, ", not by the recorded owner pid {pid}"),
                    None => f.write_str(", which wrote no record"),
                }
            }
            Finding::NetworkFilesystem { filesystem } => write!(
                f,
                "the lock lives on a {filesystem} filesystem, where kernel locks may not exclude other hosts; use a lease across hosts"
            ),
            Finding::Undecided { reason } => {
                write!(f, "could not tell whether it is held: {reason}")
            }
            Finding::NeverSucceeded { expect_every } => write!(
                f,
                "no successful run was ever recorded (one is expected every {})",
                d(expect_every)
            ),
            Finding::Silent {
                since_success,
                expect_every,
            } => write!(
                f,
                "the last successful run was {} ago; one is expected every {}",
                d(since_success),
                d(expect_every)
            ),
            Finding::PlantedFile {
                owner_uid,
                directory_owner_uid,
            } => write!(
                f,
                "the file is owned by uid {owner_uid}, in a sticky directory that others may write and that uid {directory_owner_uid} owns: its owner can rewrite, backdate or unlink it at will, so nothing in it is trusted (the fs.protected_regular rule)"
            ),
            Finding::FutureTime { field, time, ahead } => write!(
                f,
                "the {field} time {} lies {} in the future: it is not believed",
                crate::rfc3339::display(*time),
                d(ahead)
            ),
        }
    }
}

/// Why inspect left a file [`Undecided`](Finding::Undecided).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Undecided {
    /// The kernel's table was read in pieces (a host with many locks), and
    /// settling it took walking the owner's descriptors, but the scan had
    /// already walked as many descriptors as it may: a scan's cost must not
    /// grow with what others put in the directory.
    WalkBudget {
        /// The descriptors a scan may walk in all.
        budget: usize,
    },
    /// Its record changed every time it was looked at: its owner takes and
    /// releases it faster than inspect can look.
    KeptChanging {
        /// How many times it was looked at.
        looks: usize,
    },
}

impl fmt::Display for Undecided {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Undecided::WalkBudget { budget } => write!(
                f,
                "the lock table was read in pieces and this scan already walked its budget of {budget} process descriptors, so the recorded owner's were not looked at"
            ),
            Undecided::KeptChanging { looks } => write!(
                f,
                "its record changed each of the {looks} times it was read: its owner is taking and releasing it"
            ),
        }
    }
}

/// A duration as a report writes it: seconds, a float.
mod secs {
    use std::time::Duration;

    use serde::{Deserialize as _, Deserializer, Serializer, de::Error as _};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Duration::try_from_secs_f64(f64::deserialize(d)?).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `KINDS` names the variants, every one of them: each reads as a
    /// finding of that kind (or fails for its missing fields, never as an
    /// unknown variant).
    #[test]
    fn the_kinds_are_the_variants() {
        for kind in Finding::KINDS {
            let read = serde_json::from_value::<Finding>(serde_json::json!({ "kind": kind }));
            if let Err(e) = read {
                assert!(!e.to_string().contains("unknown variant"), "{kind}: {e}");
            }
        }
        let e =
            serde_json::from_value::<Finding>(serde_json::json!({ "kind": "nope" })).unwrap_err();
        assert!(e.to_string().contains("unknown variant"), "{e}");
        let every = Finding::KINDS.len();
        let e = e.to_string();
        let listed = e.matches('`').count() / 2 - 1;
        assert_eq!(listed, every, "{e}");
    }
}
