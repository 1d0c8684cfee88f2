//! The owner record: who holds (or last held) a lock, for humans and health checks.
//!
//! The record is diagnostics, never enforcement. Exclusion comes from the kernel
//! lock; the record only answers "who, where, since when" and lets `inspect`
//! recognise the litter a dead owner left behind.

use std::fmt;
use std::fs::File;
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::history::LastRun;
use crate::{rfc3339, sys};

/// The format version as a literal, so that the record's fixed prefix can be
/// spelled from it at compile time (see [`RELEASED_PREFIX`]).
macro_rules! format_version {
    () => {
        1
    };
}

/// The on-disk format version written into every lock file.
pub const FORMAT_VERSION: u32 = format_version!();

/// Records are padded with spaces to a multiple of this many bytes, so that
/// rewriting a record in place almost never needs an `ftruncate`.
const RECORD_BLOCK: usize = 512;

/// A lock file larger than this is not one of ours; only this much is read.
pub(crate) const MAX_RECORD_BYTES: usize = 64 * 1024;

/// The first read of a lock file's content: our records are 512 bytes unless
/// a job name is very long.
pub(crate) const SMALL_READ: usize = 4096;

/// A lock file's content, at most `MAX_RECORD_BYTES + 1` bytes of it (more
/// means "too large to be a record"). A small buffer on the stack serves our
/// records, and only a larger file (a very long job name, or debris) costs a
/// second, larger read.
pub(crate) fn read_content<'a>(
    file: &File,
    small: &'a mut [u8; SMALL_READ],
) -> io::Result<std::borrow::Cow<'a, [u8]>> {
    let n = sys::read_prefix(file, small)?;
    if n < small.len() {
        return Ok(std::borrow::Cow::Borrowed(&small[..n]));
    }
    let mut large = vec![0; MAX_RECORD_BYTES + 1];
    let n = sys::read_prefix(file, &mut large)?;
    large.truncate(n);
    Ok(std::borrow::Cow::Owned(large))
}

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
    /// The holder's hostname (`uname -n`).
    pub hostname: String,
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`) when known.
    /// A different boot id means the holder's machine rebooted since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
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
        with = "seconds_from_millis",
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
        with = "seconds_from_millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub kill_after_ms: Option<u64>,
    /// The hung run this holder evicted to take the lock, when it did (see
    /// [`LockOptions::evict_after`](crate::LockOptions::evict_after)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Boxed: most records have none, and every guard carries its record.
    pub evicted: Option<Box<Evicted>>,
    /// Whether the release of this lock will be marked in the record.
    /// [`Release::Unrecorded`] for a record written on behalf of a process
    /// that holds the lock through a descriptor of its own (flock(1)'s
    /// descriptor form): it may let go by closing it, which marks nothing.
    /// Written only when unrecorded.
    #[serde(default, skip_serializing_if = "Release::is_recorded")]
    pub release: Release,
}

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
    #[serde(rename = "silent_seconds", with = "seconds_from_millis::required")]
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

    fn is_recorded(&self) -> bool {
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
    /// etcd), rather than a lock file's whole content ([`decode_record`]).
    ///
    /// # Errors
    ///
    /// [`DecodeError::Malformed`] when the bytes are not one.
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
        write!(f, "pid {} on host {:?}", self.pid, self.hostname)?;
        if let Some(job) = &self.job {
            write!(f, ", job {job:?}")?;
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

/// Milliseconds kept as an integer (so that records compare exactly),
/// written as fractional seconds.
mod seconds_from_millis {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(ms: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match ms {
            Some(ms) => s.serialize_f64(*ms as f64 / 1000.0),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Ok(Option::<f64>::deserialize(d)?
            .filter(|secs| secs.is_finite() && *secs >= 0.0)
            .map(|secs| (secs * 1000.0).round().min(u64::MAX as f64) as u64))
    }

    /// The same for a value that is always there. A value that is not a
    /// number of seconds reads as zero: a diagnostic number must not make a
    /// whole record unreadable.
    pub(super) mod required {
        use serde::{Deserializer, Serializer};

        pub(in crate::record) fn serialize<S: Serializer>(
            ms: &u64,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            super::serialize(&Some(*ms), s)
        }

        pub(in crate::record) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<u64, D::Error> {
            Ok(super::deserialize(d)?.unwrap_or(0))
        }
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A fresh random (version 4) token.
///
/// One `getrandom` per thread seeds a 128-bit key; each token then mixes the
/// key with a counter through the SplitMix64 finaliser. Tokens identify runs,
/// they guard no secret, and this keeps a syscall off the lock's hot path.
/// The seed is re-drawn in a forked child, which would otherwise repeat its
/// parent's tokens.
fn new_token(pid: u32) -> Uuid {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<Option<(u32, u128, u64)>> = const { Cell::new(None) };
    }
    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    STATE.with(|state| {
        let (key, counter) = match state.get() {
            Some((p, key, counter)) if p == pid => (key, counter.wrapping_add(1)),
            _ => (Uuid::new_v4().as_u128(), 0),
        };
        state.set(Some((pid, key, counter)));
        let step = counter.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let hi = mix((key >> 64) as u64 ^ step);
        let lo = mix((key as u64).wrapping_add(step));
        uuid::Builder::from_random_bytes((u128::from(hi) << 64 | u128::from(lo)).to_be_bytes())
            .into_uuid()
    })
}

/// The current time, truncated to the microseconds a record keeps, so that a
/// record read back equals the one written.
pub(crate) fn now() -> SystemTime {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    UNIX_EPOCH + Duration::from_micros(u64::try_from(since_epoch.as_micros()).unwrap_or(u64::MAX))
}

/// The whole content of a lock file: the record plus the file's own history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct LockDocument {
    /// [`FORMAT_VERSION`] when written.
    pub(crate) format: u32,
    /// Set when the owner released the lock cleanly; a record that was never
    /// released but whose kernel lock is free is a dead owner's litter.
    pub(crate) released: bool,
    /// The last time a holder reported a successful run (see
    /// `LockGuard::record_success`). Carried from one holder to the next, so
    /// it comes right after the flag, at a fixed offset: see [`peek`].
    #[serde(
        default,
        with = "rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) last_success: Option<SystemTime>,
    /// How the last finished run ended, carried like the last success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Boxed: most documents have none, and a guard carries its document.
    pub(crate) last_run: Option<Box<LastRun>>,
    pub(crate) owner: OwnerRecord,
}

/// What `acquire` needs to know of the previous document, read without
/// parsing it: whether it was released, and whether it carries a success.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Peek {
    pub(crate) released: bool,
    /// It carries a history (a last success, a last run) to hand on.
    pub(crate) has_history: bool,
}

/// Peeks at a document this crate wrote; `None` for anything else (empty,
/// debris, another format), which `acquire` simply overwrites. Only a peek
/// that finds something worth carrying (a success) or reporting (an owner
/// that never released) costs `acquire` a full parse, which also makes sure
/// the rest of the document is a record and not debris.
pub(crate) fn peek(bytes: &[u8]) -> Option<Peek> {
    let rest = bytes.strip_prefix(RELEASED_PREFIX.as_bytes())?;
    let (released, rest) = if let Some(rest) = rest.strip_prefix(b"false") {
        (false, rest)
    } else {
        (true, rest.strip_prefix(b"true")?)
    };
    Some(Peek {
        released,
        has_history: {
            let rest = rest.trim_ascii_start();
            rest.starts_with(b",\"last_success\":\"") || rest.starts_with(b",\"last_run\":{")
        },
    })
}

/// The byte offset of the `released` flag's value in every encoded document.
/// Release overwrites these five bytes with `true ` instead of rewriting the
/// whole record: one small `pwrite`, no serialisation, no allocation.
pub(crate) const RELEASED_FLAG_OFFSET: usize = RELEASED_PREFIX.len();
/// How every document this version writes begins; spelled from
/// [`FORMAT_VERSION`], so a version bump moves the flag with it.
const RELEASED_PREFIX: &str = concat!("{\"format\":", format_version!(), ",\"released\":");
pub(crate) const RELEASED_TRUE: &[u8; 5] = b"true ";

impl LockDocument {
    pub(crate) fn new(
        owner: OwnerRecord,
        last_success: Option<SystemTime>,
        last_run: Option<Box<LastRun>>,
    ) -> LockDocument {
        LockDocument {
            format: FORMAT_VERSION,
            released: false,
            owner,
            last_success,
            last_run,
        }
    }

    /// Encodes the document into `buf` (cleared first), padded with spaces and
    /// a final newline to a multiple of [`RECORD_BLOCK`] bytes. Padding is valid
    /// JSON whitespace, so `jq` and any JSON parser read the file as is.
    pub(crate) fn encode_into(&self, buf: &mut Vec<u8>) {
        buf.clear();
        serde_json::to_writer(&mut *buf, self).expect("a lock document always serialises");
        debug_assert!(buf.starts_with(RELEASED_PREFIX.as_bytes()));
        let padded = (buf.len() + 1).div_ceil(RECORD_BLOCK) * RECORD_BLOCK;
        buf.resize(padded - 1, b' ');
        buf.push(b'\n');
    }

    /// Decodes a lock file's content.
    ///
    /// # Errors
    ///
    /// Returns why the bytes are not a lock document: empty, too large, not
    /// UTF-8, not JSON, or JSON of another shape.
    pub(crate) fn decode(bytes: &[u8]) -> Result<LockDocument, DecodeError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(DecodeError::Empty);
        }
        if bytes.iter().all(|b| *b == 0 || b.is_ascii_whitespace()) {
            // What a record looks like after a crash lost its data blocks
            // (ext4 and others can leave them zero-filled): ours, torn.
            return Err(DecodeError::Malformed(
                "only zero bytes (a write lost in a crash?)".to_owned(),
            ));
        }
        let written_by_us = written_by_us(bytes);
        if !written_by_us && !starts_like_a_record(bytes) {
            return Err(DecodeError::Foreign);
        }
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(if written_by_us {
                DecodeError::TooLarge(bytes.len())
            } else {
                DecodeError::Foreign
            });
        }
        match serde_json::from_slice::<LockDocument>(bytes) {
            Ok(doc) if doc.format == 0 => {
                Err(DecodeError::Malformed("format version 0".to_owned()))
            }
            Ok(doc) => Ok(doc),
            Err(e) if written_by_us => Err(DecodeError::Malformed(e.to_string())),
            // JSON that starts with a "format" key but is not a record of
            // ours (a hand-edited record, or another tool's file) is not ours
            // to overwrite.
            Err(_) => Err(DecodeError::Foreign),
        }
    }
}

/// Whether `bytes` begin as this crate's encoder begins every document
/// (`{"format":N,"released":`), or are a beginning of that cut short.
/// Only such bytes can be a torn record of ours.
fn written_by_us(bytes: &[u8]) -> bool {
    const FORMAT_KEY: &[u8] = b"{\"format\":";
    const RELEASED_KEY: &[u8] = b",\"released\":";
    // What a cut-short write leaves after the bytes it got out: nothing, or
    // zeros and padding.
    let significant = |bytes: &[u8]| -> usize {
        bytes
            .iter()
            .rposition(|b| *b != 0 && !b.is_ascii_whitespace())
            .map_or(0, |i| i + 1)
    };
    match bytes.strip_prefix(FORMAT_KEY) {
        Some(rest) => {
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            let rest = &rest[digits..];
            digits > 0
                && (rest.starts_with(RELEASED_KEY)
                    || RELEASED_KEY.starts_with(&rest[..significant(rest)]))
        }
        None => {
            let end = significant(bytes);
            end > 0 && FORMAT_KEY.starts_with(&bytes[..end])
        }
    }
}

/// Why some bytes are not a lock document.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The file is empty or holds only whitespace.
    #[error("the file is empty")]
    Empty,
    /// The file is larger than any record this crate writes.
    #[error("the file holds {0} bytes or more, larger than any owner record (at most {max})", max = MAX_RECORD_BYTES)]
    TooLarge(usize),
    /// The content begins as this crate writes every record but is not a
    /// whole one: torn, truncated, or zero-filled by a crash. Ours to
    /// overwrite ([`Content::Torn`](crate::Content::Torn)).
    #[error("the content is not an owner record: {0}")]
    Malformed(String),
    /// The content is not ours: some other tool's file (a script, a
    /// `Cargo.lock`, a PID file, JSON of another shape). Acquire never
    /// writes into it and `reap` leaves it alone ([`Content::Foreign`](crate::Content::Foreign)).
    #[error("the content is not an owner record of ours (another tool's file?)")]
    Foreign,
}

/// Whether `bytes` start as every document of ours does, `{"format"`, give or
/// take whitespace (a record pretty-printed by hand still counts).
fn starts_like_a_record(bytes: &[u8]) -> bool {
    const START: &[u8] = b"{\"format\"";
    let mut significant = bytes
        .iter()
        .filter(|b| !b.is_ascii_whitespace())
        .take(START.len());
    START
        .iter()
        .all(|expected| significant.next() == Some(expected))
}

/// Decodes the owner record from a lock file's content (as written by this
/// crate), without touching any file. Useful for tools that copied a lock file
/// away for a post-mortem.
///
/// # Errors
///
/// Returns a [`DecodeError`] when the bytes are not a lock document.
///
/// # Examples
///
/// ```
/// let torn = lockfile::decode_record(b"{\"format\":1,\"released\":tr").unwrap_err();
/// assert!(torn.to_string().contains("not an owner record"));
/// let other = lockfile::decode_record(b"12345\n").unwrap_err();
/// assert_eq!(other, lockfile::DecodeError::Foreign);
/// ```
pub fn decode_record(bytes: &[u8]) -> Result<OwnerRecord, DecodeError> {
    LockDocument::decode(bytes).map(|doc| doc.owner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> OwnerRecord {
        OwnerRecord {
            pid: 4242,
            hostname: "build-01".to_owned(),
            boot_id: Some("6b1d53ba-1163-46c1-b3d2-e33dfce01e56".to_owned()),
            pid_namespace: Some(4026531836),
            start_time: Some(123456),
            token: Uuid::from_u128(0x1234),
            job: Some("nightly".to_owned()),
            acquired_at: UNIX_EPOCH + Duration::from_micros(1_764_511_652_123_456),
            heartbeat_interval_ms: Some(30_000),
            heartbeat_source: Some(HeartbeatSource::Wrapper),
            max_runtime_ms: Some(1_234),
            kill_after_ms: Some(10_000),
            evicted: Some(Box::new(Evicted {
                token: Uuid::from_u128(0x99),
                pid: 17,
                job: Some("nightly".to_owned()),
                silent_ms: 61_500,
            })),
            release: Release::Recorded,
        }
    }

    #[test]
    fn encoded_document_is_padded_json_with_the_flag_at_a_fixed_offset() {
        let doc = LockDocument::new(sample(), None, None);
        let mut buf = Vec::new();
        doc.encode_into(&mut buf);
        assert_eq!(buf.len() % RECORD_BLOCK, 0);
        assert_eq!(buf.last(), Some(&b'\n'));
        assert_eq!(&buf[RELEASED_FLAG_OFFSET..][..5], b"false");
        assert_eq!(LockDocument::decode(&buf).unwrap(), doc);
        assert_eq!(
            peek(&buf),
            Some(Peek {
                released: false,
                has_history: false
            })
        );

        buf[RELEASED_FLAG_OFFSET..][..5].copy_from_slice(RELEASED_TRUE);
        let released = LockDocument::decode(&buf).unwrap();
        assert!(released.released);
        assert_eq!(released.owner, doc.owner);
    }

    #[test]
    fn kill_after_and_evicted_are_written_in_seconds() {
        let doc = LockDocument::new(sample(), None, None);
        let mut buf = Vec::new();
        doc.encode_into(&mut buf);
        let json: serde_json::Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(json["owner"]["kill_after_seconds"], 10.0);
        assert_eq!(json["owner"]["evicted"]["silent_seconds"], 61.5);
        assert_eq!(json["owner"]["evicted"]["pid"], 17);
        assert_eq!(json["owner"]["evicted"]["job"], "nightly");
        assert_eq!(
            json["owner"]["evicted"]["token"],
            Uuid::from_u128(0x99).to_string()
        );
        let back = LockDocument::decode(&buf).unwrap();
        assert_eq!(back.owner.kill_after(), Some(Duration::from_secs(10)));
        assert_eq!(
            back.owner.evicted.unwrap().silent(),
            Duration::from_millis(61_500)
        );
    }

    #[test]
    fn a_long_record_grows_by_whole_blocks() {
        let mut owner = sample();
        owner.job = Some("j".repeat(400));
        let mut buf = Vec::new();
        LockDocument::new(owner, Some(SystemTime::now()), None).encode_into(&mut buf);
        assert_eq!(buf.len(), 2 * RECORD_BLOCK);
    }

    #[test]
    fn decode_names_why_bytes_are_not_a_record() {
        assert_eq!(LockDocument::decode(b""), Err(DecodeError::Empty));
        assert_eq!(LockDocument::decode(b" \n\t"), Err(DecodeError::Empty));
        assert!(matches!(
            LockDocument::decode(b"{\"format\":1"),
            Err(DecodeError::Malformed(_))
        ));
        assert_eq!(
            LockDocument::decode(&[0xff, 0xfe, b'{']),
            Err(DecodeError::Foreign)
        );
        assert!(matches!(
            LockDocument::decode(&[0; 512]),
            Err(DecodeError::Malformed(_))
        ));
        assert_eq!(
            LockDocument::decode(b"# This file is automatically @generated by Cargo."),
            Err(DecodeError::Foreign)
        );
        // Broken JSON that only looks like a record by hand is not ours to
        // overwrite; neither is another tool's JSON with a "format" key.
        assert_eq!(
            LockDocument::decode(b"{\n  \"format\": 1,\n  \"released\": tr"),
            Err(DecodeError::Foreign)
        );
        assert_eq!(
            LockDocument::decode(b"{\"format\": \"yaml\", \"indent\": 2}"),
            Err(DecodeError::Foreign)
        );
        // A cut short beginning of ours is torn, down to its first bytes.
        for torn in [
            &b"{\"form"[..],
            b"{\"format\":1",
            b"{\"format\":1,\"rel\0\0",
        ] {
            assert!(
                matches!(LockDocument::decode(torn), Err(DecodeError::Malformed(_))),
                "{torn:?}"
            );
        }
        let huge = vec![b' '; MAX_RECORD_BYTES + 1];
        assert_eq!(LockDocument::decode(&huge), Err(DecodeError::Empty));
        let mut huge = vec![b'x'; MAX_RECORD_BYTES + 1];
        huge[..RELEASED_PREFIX.len()].copy_from_slice(RELEASED_PREFIX.as_bytes());
        assert!(matches!(
            LockDocument::decode(&huge),
            Err(DecodeError::TooLarge(_))
        ));
        huge[..9].copy_from_slice(b"{\"format\"");
        huge[9] = b' ';
        assert_eq!(LockDocument::decode(&huge), Err(DecodeError::Foreign));
    }

    #[test]
    fn negative_absurd_and_future_values_decode_or_fail_cleanly() {
        let base = |owner: &str| format!(r#"{{"format":1,"released":false,"owner":{owner}}}"#);
        let bad_pid = base(
            r#"{"pid":-1,"hostname":"h","token":"00000000-0000-0000-0000-000000000001","acquired_at":"2026-01-01T00:00:00Z"}"#,
        );
        assert!(LockDocument::decode(bad_pid.as_bytes()).is_err());
        let absurd = base(
            r#"{"pid":1,"hostname":"h","token":"00000000-0000-0000-0000-000000000001","acquired_at":"2026-01-01T00:00:00Z","heartbeat_interval_ms":18446744073709551615,"start_time":18446744073709551615}"#,
        );
        let doc = LockDocument::decode(absurd.as_bytes()).unwrap();
        assert_eq!(
            doc.owner.heartbeat_interval(),
            Some(Duration::from_millis(u64::MAX))
        );
        let future = base(
            r#"{"pid":1,"hostname":"h","token":"00000000-0000-0000-0000-000000000001","acquired_at":"9999-12-31T23:59:59Z"}"#,
        );
        let doc = LockDocument::decode(future.as_bytes()).unwrap();
        assert_eq!(doc.owner.age(SystemTime::now()), Duration::ZERO);
        let before_epoch = base(
            r#"{"pid":1,"hostname":"h","token":"00000000-0000-0000-0000-000000000001","acquired_at":"1969-12-31T23:59:59Z"}"#,
        );
        assert!(LockDocument::decode(before_epoch.as_bytes()).is_err());
    }

    #[test]
    fn times_out_of_rfc3339_range_are_clamped_not_panicked_on() {
        let mut owner = sample();
        owner.acquired_at = UNIX_EPOCH - Duration::from_secs(5);
        let mut buf = Vec::new();
        LockDocument::new(owner.clone(), None, None).encode_into(&mut buf);
        assert_eq!(
            LockDocument::decode(&buf).unwrap().owner.acquired_at,
            UNIX_EPOCH
        );
        owner.acquired_at = UNIX_EPOCH + Duration::from_secs(u64::MAX / 4);
        LockDocument::new(owner, None, None).encode_into(&mut buf);
        assert!(LockDocument::decode(&buf).is_ok());
    }

    #[test]
    fn only_an_unrecorded_release_is_written() {
        let mut buf = Vec::new();
        LockDocument::new(sample(), None, None).encode_into(&mut buf);
        assert!(!String::from_utf8_lossy(&buf).contains("release\":"));
        let mut owner = sample();
        owner.release = Release::Unrecorded;
        let doc = LockDocument::new(owner, None, None);
        doc.encode_into(&mut buf);
        assert!(String::from_utf8_lossy(&buf).contains(r#""release":"unrecorded""#));
        assert_eq!(LockDocument::decode(&buf), Ok(doc));
    }

    #[test]
    fn current_describes_this_process() {
        let rec = OwnerRecord::current(Some("job"), Some(Duration::from_secs(2)));
        assert_eq!(rec.pid, std::process::id());
        assert!(rec.is_local());
        assert_eq!(rec.heartbeat_interval(), Some(Duration::from_secs(2)));
        assert_ne!(rec.token, OwnerRecord::current(None, None).token);
    }

    fn arb_time() -> impl Strategy<Value = SystemTime> {
        // Microsecond precision, within RFC 3339's four-digit years.
        (0u64..253_402_300_799_000_000).prop_map(|us| UNIX_EPOCH + Duration::from_micros(us))
    }

    prop_compose! {
        fn arb_record()(
            pid in any::<u32>(),
            hostname in ".{0,64}",
            boot_id in proptest::option::of("[0-9a-f-]{36}"),
            pid_namespace in proptest::option::of(any::<u64>()),
            start_time in proptest::option::of(any::<u64>()),
            token in any::<u128>(),
            job in proptest::option::of(".{0,200}"),
            acquired_at in arb_time(),
            heartbeat_interval_ms in proptest::option::of(any::<u64>()),
            command_beats in proptest::option::of(any::<bool>()),
            max_runtime_ms in proptest::option::of(0u64..1 << 40),
            kill_after_ms in proptest::option::of(0u64..1 << 40),
            evicted in proptest::option::of(
                (any::<u128>(), any::<u32>(), proptest::option::of(".{0,40}"), 0u64..1 << 40)
            ),
            unrecorded in any::<bool>(),
        ) -> OwnerRecord {
            OwnerRecord {
                pid, hostname, boot_id, pid_namespace, start_time,
                token: Uuid::from_u128(token), job, acquired_at, heartbeat_interval_ms,
                heartbeat_source: command_beats.map(|c| {
                    if c { HeartbeatSource::Command } else { HeartbeatSource::Wrapper }
                }),
                max_runtime_ms,
                kill_after_ms,
                evicted: evicted.map(|(token, pid, job, silent_ms)| Box::new(Evicted {
                    token: Uuid::from_u128(token), pid, job, silent_ms,
                })),
                release: if unrecorded { Release::Unrecorded } else { Release::Recorded },
            }
        }
    }

    proptest! {
        #[test]
        fn documents_round_trip(
            owner in arb_record(),
            released in any::<bool>(),
            last_success in proptest::option::of(arb_time()),
        ) {
            let mut doc = LockDocument::new(owner, last_success, None);
            doc.released = released;
            let mut buf = Vec::new();
            doc.encode_into(&mut buf);
            prop_assert_eq!(buf.len() % RECORD_BLOCK, 0);
            prop_assert_eq!(
                peek(&buf),
                Some(Peek { released: doc.released, has_history: doc.last_success.is_some() })
            );
            prop_assert_eq!(LockDocument::decode(&buf), Ok(doc));
        }

        #[test]
        fn decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = LockDocument::decode(&bytes);
            let _ = peek(&bytes);
        }

        #[test]
        fn decoding_mutated_records_never_panics(
            owner in arb_record(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        ) {
            let mut buf = Vec::new();
            LockDocument::new(owner, None, None).encode_into(&mut buf);
            for (at, byte) in flips {
                let i = at.index(buf.len());
                buf[i] = byte;
            }
            let _ = LockDocument::decode(&buf);
        }
    }
}
