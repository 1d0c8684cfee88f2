//! Encoding a lock document with the owner's identity rendered once.
//!
//! The identity part of an owner record (pid, hostname, boot id, PID
//! namespace, start time) is the same in every record a process writes, so
//! its JSON is rendered once per thread and copied in; serde encodes only
//! what changes per acquire. The bytes are exactly serde's encoding of the
//! whole document: the parts are cut from serde's own output, and a test
//! compares the two encoders on arbitrary documents, so that the decoder
//! never meets a second dialect.

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

/// Where the owner record's identity ends in serde's encoding of it: the
/// first field that is not part of the identity. A `"` inside a JSON string
/// is always escaped, so this cannot match inside the hostname.
const AFTER_IDENTITY: &[u8] = b",\"token\":\"";

/// A lock document's fields before the owner, as the document encodes them.
#[derive(Serialize)]
pub(super) struct Head<'a> {
    pub(super) format: u32,
    pub(super) released: bool,
    #[serde(with = "rfc3339::option", skip_serializing_if = "Option::is_none")]
    pub(super) last_success: Option<SystemTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) last_run: Option<&'a LastRun>,
}

/// The owner record's fields after its identity, as [`OwnerRecord`] encodes
/// them.
#[derive(Serialize)]
struct Tail<'a> {
    token: &'a Uuid,
    job: &'a Option<String>,
    #[serde(with = "rfc3339")]
    acquired_at: SystemTime,
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
/// `buf`.
pub(super) fn encode(head: &Head<'_>, owner: &OwnerRecord, buf: &mut Vec<u8>) {
    serde_json::to_writer(&mut *buf, head).expect("a document head always serialises");
    buf.pop(); // its `}`: the owner follows
    buf.extend_from_slice(b",\"owner\":{");
    RENDERED.with(|cell| {
        let mut rendered = cell.borrow_mut();
        if !rendered.as_ref().is_some_and(|r| r.is_of(owner)) {
            *rendered = Some(Rendered::of(owner));
        }
        buf.extend_from_slice(&rendered.as_ref().expect("just rendered").json);
    });
    buf.push(b',');
    let tail = Tail {
        token: &owner.token,
        job: &owner.job,
        acquired_at: owner.acquired_at,
        heartbeat_interval_ms: owner.heartbeat_interval_ms,
        heartbeat_source: owner.heartbeat_source,
        max_runtime_ms: owner.max_runtime_ms,
        kill_after_ms: owner.kill_after_ms,
        evicted: owner.evicted.as_deref(),
        release: owner.release,
    };
    let tail_start = buf.len();
    serde_json::to_writer(&mut *buf, &tail).expect("an owner record always serialises");
    buf.remove(tail_start); // its `{`: the identity came first
    buf.push(b'}');
}
