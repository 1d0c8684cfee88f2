//! `LockReport` and `LockState`: what `inspect` says about one lock file,
//! and the JSON shape `lockfile inspect --json` prints.

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize, Serializer};

use super::finding::{Described, Finding, Severity};
use crate::content::{Content, NoRecord};
use crate::{DecodeError, Holder, LastRun, OwnerRecord};

/// The state of one lock file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LockState {
    /// There is no file at the path.
    Absent,
    /// Nobody holds the kernel lock, and the file is empty, or its record says
    /// the lock was released cleanly, or says its release is not recorded
    /// ([`Release::Unrecorded`](crate::record::Release::Unrecorded): a lock held
    /// through a shell's descriptor, let go by a close). The normal resting
    /// state of a lock; also a directory nobody holds locked.
    Free,
    /// Someone holds the kernel lock.
    Held,
    /// Nobody holds the kernel lock, but the record names an owner that never
    /// released it: the litter of a dead owner, harmless to the next acquire.
    Stale,
    /// Nobody holds the kernel lock, and the content is not an owner record
    /// (malformed, truncated, binary, oversized). Harmless to the next acquire.
    Debris,
    /// Inspect could not tell whether the lock is held, and says so rather
    /// than guess: a [`Finding::Undecided`](crate::inspect::Finding::Undecided) says why. Never removed by
    /// [`reap()`](crate::reap()).
    Undecided,
}

impl LockState {
    /// The lowercase name used in JSON and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            LockState::Absent => "absent",
            LockState::Free => "free",
            LockState::Held => "held",
            LockState::Stale => "stale",
            LockState::Debris => "debris",
            LockState::Undecided => "undecided",
        }
    }
}

impl fmt::Display for LockState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `inspect` found about one lock file.
///
/// Its JSON is `lockfile inspect --json`'s, and reads back
/// (`Deserialize`), ignoring keys a later minor version adds: see
/// [`lockfile::json`](crate::json).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LockReport {
    /// The lock file.
    pub path: PathBuf,
    /// Its state.
    pub state: LockState,
    /// The owner record in the file, released or not, when there is one.
    pub owner: Option<OwnerRecord>,
    /// Whether the record says its owner released the lock cleanly.
    pub released: bool,
    /// The processes holding the kernel lock (empty unless `Held`; empty too
    /// when the holder is not visible from this PID namespace). Every holder
    /// of a shared lock is listed.
    pub holders: Vec<Holder>,
    /// Whether the holders hold the lock shared (`LOCK_SH`, flock(1)'s `-s`):
    /// any number of them at once, none with a record. False unless `Held`,
    /// and on platforms that cannot tell.
    pub shared: bool,
    /// How long the recorded owner has held (or, when stale, had held) the
    /// lock; `None` when the record is released or missing, when nobody
    /// holds a lock whose release is unrecorded, and when the holders keep
    /// no record ([`no_record`](Self::no_record)).
    pub age: Option<Duration>,
    /// Time since the last heartbeat (the file's modification time), for
    /// held and stale files.
    pub heartbeat_age: Option<Duration>,
    /// The last success recorded in the file.
    pub last_success: Option<SystemTime>,
    /// How the last finished run ended, when one was recorded.
    pub last_run: Option<LastRun>,
    /// The last claim on a tick (`--once-per`), when one was made.
    pub last_claimed_tick: Option<crate::Claim>,
    /// The file's size in bytes.
    pub size: u64,
    /// The file's modification time: the last heartbeat, record write or release.
    pub modified: Option<SystemTime>,
    /// Why the content is not a record, for `Debris` (and for a held file
    /// whose holder wrote none).
    pub content_error: Option<DecodeError>,
    /// What the file holds: a record of ours, nothing, a torn record, or
    /// someone else's content. `None` when there is no file, and for a
    /// directory, whose [`no_record`](Self::no_record) says
    /// [`NoRecord::Directory`](crate::inspect::NoRecord::Directory).
    pub content: Option<Content>,
    /// Why the file carries no record of its holders, when that is by
    /// design: it is a directory, they hold it shared, its content is not
    /// ours, or they hold it read-only. Such holders raise no
    /// `holder_mismatch` or `owner_dead` finding, and an older record left in
    /// the file is no evidence against them.
    pub no_record: Option<NoRecord>,
    /// Everything worth telling, most severe first.
    pub findings: Vec<Finding>,
    /// The lock file's other slots (1 and up), when it is slot 0 of a set
    /// (see [`crate::slot`]): each slot's file's report, in slot order.
    /// Filled by [`inspect_dir`](crate::inspect_dir) and
    /// [`InspectOptions::inspect_slots`](crate::inspect::InspectOptions::inspect_slots);
    /// empty for a plain lock file.
    pub slots: Vec<LockReport>,
}

impl LockReport {
    /// Names who holds the lock, for a contention message: the recorded
    /// owner (`recorded`, as a contention error read it, unless the record
    /// has been released since), or why there is no record, then every other
    /// process that holds the kernel lock.
    ///
    /// `pid 4242 on host "db-1", job "backup", for 3m (since …) (the kernel
    /// lock is held by pid 4250 (sleep))`.
    pub fn describe_holder(&self, recorded: Option<&OwnerRecord>) -> String {
        let owner = recorded.filter(|_| !self.released);
        let mut text = match (owner, self.no_record) {
            (Some(o), _) => o.to_string(),
            (None, Some(why)) => format!("a process that keeps no owner record there ({why})"),
            (None, None) => OwnerRecord::describe(None).to_string(),
        };
        let kernel: Vec<String> = self
            .holders
            .iter()
            .filter(|h| owner.is_none_or(|o| o.pid != h.pid))
            .map(ToString::to_string)
            .collect();
        if !kernel.is_empty() {
            text.push_str(&format!(
                " (the kernel lock is held by {})",
                kernel.join(", ")
            ));
        }
        text
    }

    /// The most severe finding's severity, its slots' included, or `None`
    /// when all is well.
    pub fn severity(&self) -> Option<Severity> {
        let own = self.findings.iter().map(Finding::severity).max();
        self.slots
            .iter()
            .map(LockReport::severity)
            .fold(own, Ord::max)
    }

    /// This report and its slots' (slot 0 first), or itself alone for a
    /// plain lock file.
    pub fn with_slots(&self) -> impl Iterator<Item = &LockReport> {
        std::iter::once(self).chain(&self.slots)
    }
}

impl Serialize for LockReport {
    /// The JSON shape of `lockfile inspect --json`.
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct ReportJson<'a> {
            version: u32,
            #[serde(flatten)]
            path: super::JsonPath<'a>,
            state: LockState,
            owner: Option<crate::json::OwnerJson<'a>>,
            released: bool,
            holder_pid: Option<u32>,
            holders: &'a [Holder],
            shared: bool,
            age_seconds: Option<f64>,
            heartbeat_age_seconds: Option<f64>,
            #[serde(serialize_with = "crate::rfc3339::option::serialize")]
            last_success: Option<SystemTime>,
            last_run: Option<&'a LastRun>,
            #[serde(skip_serializing_if = "Option::is_none")]
            last_claimed_tick: Option<&'a crate::Claim>,
            size: u64,
            #[serde(serialize_with = "crate::rfc3339::option::serialize")]
            modified: Option<SystemTime>,
            content_error: Option<String>,
            content: Option<Content>,
            no_record: Option<NoRecord>,
            findings: Vec<Described<'a>>,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            slots: &'a [LockReport],
        }
        ReportJson {
            version: crate::json::VERSION,
            path: super::JsonPath(&self.path),
            state: self.state,
            owner: self.owner.as_ref().map(crate::json::OwnerJson),
            released: self.released,
            holder_pid: self.holders.first().map(|h| h.pid),
            holders: &self.holders,
            shared: self.shared,
            age_seconds: self.age.map(|d| d.as_secs_f64()),
            heartbeat_age_seconds: self.heartbeat_age.map(|d| d.as_secs_f64()),
            last_success: self.last_success,
            last_run: self.last_run.as_ref(),
            last_claimed_tick: self.last_claimed_tick.as_ref(),
            size: self.size,
            modified: self.modified,
            content_error: self.content_error.as_ref().map(ToString::to_string),
            content: self.content,
            no_record: self.no_record,
            findings: self.findings.iter().map(Finding::described).collect(),
            slots: &self.slots,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for LockReport {
    /// Reads what [`Serialize`] wrote, of this version or a later minor one:
    /// unknown keys are ignored, and so is a finding of a kind this version
    /// does not know.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct ReadJson {
            path: String,
            #[serde(default)]
            path_escaped: bool,
            state: LockState,
            owner: Option<OwnerRecord>,
            released: bool,
            #[serde(default)]
            holders: Vec<Holder>,
            #[serde(default)]
            shared: bool,
            age_seconds: Option<f64>,
            heartbeat_age_seconds: Option<f64>,
            #[serde(default, deserialize_with = "crate::rfc3339::option::deserialize")]
            last_success: Option<SystemTime>,
            last_run: Option<LastRun>,
            #[serde(default)]
            last_claimed_tick: Option<crate::Claim>,
            size: u64,
            #[serde(default, deserialize_with = "crate::rfc3339::option::deserialize")]
            modified: Option<SystemTime>,
            content_error: Option<String>,
            content: Option<Content>,
            no_record: Option<NoRecord>,
            #[serde(deserialize_with = "crate::inspect::known_findings")]
            findings: Vec<Finding>,
            #[serde(default)]
            slots: Vec<LockReport>,
        }
        let secs = |s: Option<f64>| s.and_then(|s| Duration::try_from_secs_f64(s).ok());
        let r = ReadJson::deserialize(d)?;
        Ok(LockReport {
            path: super::JsonPath::read(&r.path, r.path_escaped),
            state: r.state,
            owner: r.owner,
            released: r.released,
            holders: r.holders,
            shared: r.shared,
            age: secs(r.age_seconds),
            heartbeat_age: secs(r.heartbeat_age_seconds),
            last_success: r.last_success,
            last_run: r.last_run,
            last_claimed_tick: r.last_claimed_tick,
            size: r.size,
            modified: r.modified,
            content_error: r.content_error.as_deref().map(DecodeError::from_sentence),
            content: r.content,
            no_record: r.no_record,
            findings: r.findings,
            slots: r.slots,
        })
    }
}

/// A report on `path` before anything is known of it.
pub(super) fn empty_report(path: PathBuf) -> LockReport {
    LockReport {
        path,
        state: LockState::Absent,
        owner: None,
        released: false,
        holders: Vec::new(),
        shared: false,
        age: None,
        heartbeat_age: None,
        last_success: None,
        last_run: None,
        last_claimed_tick: None,
        size: 0,
        modified: None,
        content_error: None,
        content: None,
        no_record: None,
        findings: Vec::new(),
        slots: Vec::new(),
    }
}
