//! `inspect`: who holds a lease, with its fencing token and remaining TTL
//! ([`LeaseOptions::inspect`] and [`LeaseOptions::inspect_all`] live here).

use std::fmt;
use std::time::Duration;

use etcd_client::{Client, GetOptions, KeyValue, LeaseTimeToLiveOptions};
use lockfile::{LastRun, OwnerRecord};
use serde::{Serialize, Serializer};

use crate::conn::{self, Conn};
use crate::error::Operation;
use crate::key::name_of;
use crate::{HISTORY_PREFIX, KEY_PREFIX, LeaseOptions, Result, history, history_key_for, key_for};

/// A lease's state: the lock file's states, of which a lease only ever is
/// `free` (no key: nobody holds it) or `held` (the key exists, attached to a
/// live lease). It is never stale or debris: the key goes with its lease.
pub type LeaseState = lockfile::LockState;

/// What [`LeaseOptions::inspect`] found about one lease.
///
/// Serialises to the JSON shape of `lockfile inspect --etcd --json`: the same
/// `owner` and `last_run` objects as a lock file's report, plus
/// `fencing_token` and `ttl_remaining_seconds`.
///
/// ```json
/// {"name":"nightly","key":"lockfile/locks/nightly","state":"held",
///  "owner":{"pid":4242,"hostname":"web-1","token":"…","job":"nightly",
///           "acquired_at":"2026-01-02T03:04:05.000000Z","heartbeat_interval_ms":3333},
///  "fencing_token":1187,"lease_id":7587869727512379142,
///  "ttl_seconds":10.0,"ttl_remaining_seconds":8.0,
///  "last_run":{"started_at":"2026-01-01T03:04:05.000000Z","finished_at":"2026-01-01T03:09:05.000000Z",
///              "duration_seconds":300.0,"exit_code":1,"signal":null,"outcome":"failed",
///              "consecutive_failures":1,"last_failure_at":"2026-01-01T03:09:05.000000Z"}}
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LeaseReport {
    /// The lease name.
    pub name: String,
    /// The etcd key.
    pub key: String,
    /// Whether the lease is held.
    pub state: LeaseState,
    /// The holder's owner record, when the key holds one.
    pub owner: Option<OwnerRecord>,
    /// The holder's fencing token (the key's create revision).
    pub fencing_token: Option<u64>,
    /// The etcd lease the key is attached to (`None` for a key written
    /// without a lease, which never expires: not one of ours).
    pub lease_id: Option<i64>,
    /// The TTL the lease was granted.
    pub ttl: Option<Duration>,
    /// What is left of the lease's TTL, as etcd counts it (whole seconds,
    /// rounded down; the lease lives for less than one second more).
    pub ttl_remaining: Option<Duration>,
    /// Why the key's value is not an owner record, when it is not.
    pub content_error: Option<String>,
    /// How the last finished run ended, from the lease's run history
    /// (`lockfile/history/NAME`), which outlives the lease: present for a
    /// free lease too.
    pub last_run: Option<LastRun>,
    /// Why the run history could not be read, when it could not (not ours,
    /// or not readable by this etcd user). The rest of the report stands.
    pub history_error: Option<String>,
}

// The one float in a report, the last run's `duration_seconds`, is never
// NaN: it is measured from two times, or read from JSON, which cannot spell
// NaN. So equality stays reflexive, as it was before the history came.
impl Eq for LeaseReport {}

impl Serialize for LeaseReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct ReportJson<'a> {
            name: &'a str,
            key: &'a str,
            state: LeaseState,
            owner: Option<&'a OwnerRecord>,
            fencing_token: Option<u64>,
            lease_id: Option<i64>,
            ttl_seconds: Option<f64>,
            ttl_remaining_seconds: Option<f64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            content_error: Option<&'a str>,
            last_run: Option<&'a LastRun>,
            #[serde(skip_serializing_if = "Option::is_none")]
            history_error: Option<&'a str>,
        }
        ReportJson {
            name: &self.name,
            key: &self.key,
            state: self.state,
            owner: self.owner.as_ref(),
            fencing_token: self.fencing_token,
            lease_id: self.lease_id,
            ttl_seconds: self.ttl.map(|d| d.as_secs_f64()),
            ttl_remaining_seconds: self.ttl_remaining.map(|d| d.as_secs_f64()),
            content_error: self.content_error.as_deref(),
            last_run: self.last_run.as_ref(),
            history_error: self.history_error.as_deref(),
        }
        .serialize(s)
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
        Ok(())
    }
}

impl LeaseOptions {
    /// Who holds the lease on `name`, with its fencing token and the lease's
    /// remaining time-to-live, and how its last run ended (its run
    /// history). Never takes or changes anything.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName), or an etcd error.
    pub fn inspect(&self, name: &str) -> Result<LeaseReport> {
        inspect(self, name)
    }

    /// Every lease under [`KEY_PREFIX`], held ones only (a free lease has no
    /// key), sorted by name, each with its run history.
    ///
    /// # Errors
    ///
    /// An etcd error.
    pub fn inspect_all(&self) -> Result<Vec<LeaseReport>> {
        inspect_all(self)
    }
}

fn inspect(opts: &LeaseOptions, name: &str) -> Result<LeaseReport> {
    let key = key_for(name)?;
    let conn = Conn::new(opts, &key)?;
    let history_conn = conn.for_key(&history_key_for(name)?);
    conn::block_on(&key, || async {
        let mut client = conn.connect().await?;
        let get = conn
            .call(Operation::Read, client.get(key.as_str(), None))
            .await?;
        // A read of its own: a user who may read the leases but not the
        // histories still gets the report.
        let history = history::read(&history_conn, &mut client).await;
        match get.kvs().first() {
            None => Ok(LeaseReport {
                name: name.to_owned(),
                key: key.clone(),
                state: LeaseState::Free,
                owner: None,
                fencing_token: None,
                lease_id: None,
                ttl: None,
                ttl_remaining: None,
                content_error: None,
                last_run: history.0,
                history_error: history.1,
            }),
            Some(kv) => report(&conn, &mut client, name, kv, history).await,
        }
    })
}

fn inspect_all(opts: &LeaseOptions) -> Result<Vec<LeaseReport>> {
    let conn = Conn::new(opts, KEY_PREFIX)?;
    let history_conn = conn.for_key(HISTORY_PREFIX);
    conn::block_on(KEY_PREFIX, || async {
        let mut client = conn.connect().await?;
        let get = conn
            .call(
                Operation::Read,
                client.get(KEY_PREFIX, Some(GetOptions::new().with_prefix())),
            )
            .await?;
        let histories = history_conn
            .call(
                Operation::Read,
                client.get(HISTORY_PREFIX, Some(GetOptions::new().with_prefix())),
            )
            .await;
        let mut reports = Vec::new();
        for kv in get.kvs() {
            // Keys under the prefix that no valid name maps to are not ours.
            if let Some(name) = name_of(kv.key()).filter(|n| key_for(n).is_ok()) {
                let history = match &histories {
                    Ok(all) => {
                        let key = history_key_for(name)?;
                        history::from_value(all.kvs().iter().find(|h| h.key() == key.as_bytes()))
                    }
                    Err(e) => (None, Some(e.to_string())),
                };
                reports.push(report(&conn, &mut client, name, kv, history).await?);
            }
        }
        reports.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(reports)
    })
}

async fn report(
    conn: &Conn,
    client: &mut Client,
    name: &str,
    kv: &KeyValue,
    (last_run, history_error): (Option<LastRun>, Option<String>),
) -> Result<LeaseReport> {
    let (owner, content_error) = match OwnerRecord::from_json(kv.value()) {
        Ok(owner) => (Some(owner), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let lease_id = (kv.lease() != 0).then_some(kv.lease());
    let (mut ttl, mut ttl_remaining) = (None, None);
    if let Some(id) = lease_id {
        let live = conn
            .call(
                Operation::TimeToLive,
                client.lease_time_to_live(id, Some(LeaseTimeToLiveOptions::new())),
            )
            .await?;
        // -1: the lease expired after the read; its key is being deleted.
        ttl_remaining = Some(Duration::from_secs(u64::try_from(live.ttl()).unwrap_or(0)));
        ttl = u64::try_from(live.granted_ttl())
            .ok()
            .map(Duration::from_secs);
    }
    Ok(LeaseReport {
        name: name.to_owned(),
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        state: LeaseState::Held,
        owner,
        fencing_token: u64::try_from(kv.create_revision()).ok(),
        lease_id,
        ttl,
        ttl_remaining,
        content_error,
        last_run,
        history_error,
    })
}
