//! Encoding a lock document with the owner's identity rendered once.
//!
//! The identity part of an owner record (pid, hostname, boot id, PID
//! namespace, start time) is the same in every record a process writes, so
//! its JSON is rendered once per thread, cut from serde's own output, and
//! copied in. The fields every record has (the flag, the token, the job, the
//! times) are written directly; serde encodes only what few records carry.
//! The bytes are exactly serde's encoding of the whole document: a property
//! test compares the two encoders on arbitrary documents, so that the
//! decoder never meets a second dialect.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;
use uuid::Uuid;

use super::fields::{Evicted, HeartbeatSource, Release};
use super::owner::OwnerRecord;
use super::seconds;
use crate::history::LastRun;
use crate::rfc3339;
use crate::tick::Claim;

/// Where the owner record's identity ends in serde's encoding of it: the
/// first field that is not part of the identity. A `"` inside a JSON string
/// is always escaped, so this cannot match inside the hostname.
const AFTER_IDENTITY: &[u8] = b",\"token\":\"";

/// A lock document's fields before the owner, after its format (always
/// [`FORMAT_VERSION`](super::FORMAT_VERSION), spelled by the prefix).
pub(super) struct Head<'a> {
    pub(super) released: bool,
    pub(super) last_success: Option<SystemTime>,
    pub(super) last_run: Option<&'a LastRun>,
    pub(super) last_claimed_tick: Option<&'a Claim>,
}

/// The owner record's fields after its acquisition time, as [`OwnerRecord`]
/// encodes them: all of them are absent from most records.
#[derive(Serialize)]
struct Promises<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    heartbeat_interval_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    heartbeat_source: Option<HeartbeatSource>,
    #[serde(
        rename = "max_runtime_seconds",
        with = "seconds",
        skip_serializing_if = "Option::is_none"
    )]
    max_runtime_ms: Option<u64>,
    #[serde(
        rename = "kill_after_seconds",
        with = "seconds",
        skip_serializing_if = "Option::is_none"
    )]
    kill_after_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    evicted: Option<&'a Evicted>,
    #[serde(skip_serializing_if = "Release::is_recorded")]
    release: Release,
}

/// An identity and its rendering, `"pid":…,"start_time":…` without braces.
struct Rendered {
    pid: u32,
    hostname: Arc<str>,
    boot_id: Option<Arc<str>>,
    pid_namespace: Option<u64>,
    start_time: Option<u64>,
    json: Box<[u8]>,
}

impl Rendered {
    fn of(owner: &OwnerRecord) -> Rendered {
        let whole = serde_json::to_vec(owner).expect("an owner record always serialises");
        let end = whole
            .windows(AFTER_IDENTITY.len())
            .position(|w| w == AFTER_IDENTITY)
            .expect("the token follows the identity");
        Rendered {
            pid: owner.pid,
            hostname: Arc::clone(&owner.hostname),
            boot_id: owner.boot_id.clone(),
            pid_namespace: owner.pid_namespace,
            start_time: owner.start_time,
            json: whole[1..end].into(),
        }
    }

    fn is_of(&self, owner: &OwnerRecord) -> bool {
        self.pid == owner.pid
            && self.start_time == owner.start_time
            && self.pid_namespace == owner.pid_namespace
            && (Arc::ptr_eq(&self.hostname, &owner.hostname) || self.hostname == owner.hostname)
            && self.boot_id == owner.boot_id
    }
}

thread_local! {
    /// The last identity this thread rendered: its own process's, but for a
    /// record written on behalf of a parent (a descriptor lock).
    static RENDERED: RefCell<Option<Rendered>> = const { RefCell::new(None) };
}

/// Appends serde's encoding of a lock document, `head` then `owner`, to
/// `buf`. The fields every record has (the flag, the token, the job, the
/// times) are written directly, the identity is copied in, and serde encodes
/// only what few records carry (a last run, promises, an eviction) and the
/// strings that may need escaping.
pub(super) fn encode(head: &Head<'_>, owner: &OwnerRecord, buf: &mut Vec<u8>) {
    buf.extend_from_slice(super::document::RELEASED_PREFIX.as_bytes());
    buf.extend_from_slice(if head.released { b"true" } else { b"false" });
    if let Some(t) = head.last_success {
        buf.extend_from_slice(b",\"last_success\":");
        time(t, buf);
    }
    if let Some(last_run) = head.last_run {
        buf.extend_from_slice(b",\"last_run\":");
        serde_json::to_writer(&mut *buf, last_run).expect("a last run always serialises");
    }
    if let Some(claim) = head.last_claimed_tick {
        buf.extend_from_slice(b",\"last_claimed_tick\":");
        serde_json::to_writer(&mut *buf, claim).expect("a claim always serialises");
    }
    buf.extend_from_slice(b",\"owner\":{");
    RENDERED.with(|cell| {
        let mut rendered = cell.borrow_mut();
        if !rendered.as_ref().is_some_and(|r| r.is_of(owner)) {
            *rendered = Some(Rendered::of(owner));
        }
        buf.extend_from_slice(&rendered.as_ref().expect("just rendered").json);
    });
    buf.extend_from_slice(AFTER_IDENTITY);
    buf.extend_from_slice(
        owner
            .token
            .hyphenated()
            .encode_lower(&mut Uuid::encode_buffer())
            .as_bytes(),
    );
    buf.extend_from_slice(b"\",\"job\":");
    match &owner.job {
        Some(job) => serde_json::to_writer(&mut *buf, job).expect("a string always serialises"),
        None => buf.extend_from_slice(b"null"),
    }
    buf.extend_from_slice(b",\"acquired_at\":");
    time(owner.acquired_at, buf);
    let promises = Promises {
        heartbeat_interval_ms: owner.heartbeat_interval_ms,
        heartbeat_source: owner.heartbeat_source,
        max_runtime_ms: owner.max_runtime_ms,
        kill_after_ms: owner.kill_after_ms,
        evicted: owner.evicted.as_deref(),
        release: owner.release,
    };
    if promises.is_empty() {
        buf.push(b'}');
    } else {
        let at = buf.len();
        serde_json::to_writer(&mut *buf, &promises).expect("promises always serialise");
        buf[at] = b','; // its `{`: the fields before it came first
    }
    buf.push(b'}');
}

impl Promises<'_> {
    fn is_empty(&self) -> bool {
        self.heartbeat_interval_ms.is_none()
            && self.heartbeat_source.is_none()
            && self.max_runtime_ms.is_none()
            && self.kill_after_ms.is_none()
            && self.evicted.is_none()
            && self.release.is_recorded()
    }
}

/// A time as a JSON string, as [`rfc3339::serialize`] writes it.
fn time(t: SystemTime, buf: &mut Vec<u8>) {
    buf.push(b'"');
    buf.extend_from_slice(rfc3339::micros(t, &mut [0; rfc3339::MICROS_LEN]).as_bytes());
    buf.push(b'"');
}
