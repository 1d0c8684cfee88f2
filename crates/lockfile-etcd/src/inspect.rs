//! `inspect`: who holds a lease, with its fencing token and remaining TTL
//! ([`LeaseOptions::inspect`] and [`LeaseOptions::inspect_all`] live here).
//! The report is the lease layer's [`LeaseReport`].

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use etcd_client::{Client, GetOptions, KeyValue, LeaseTimeToLiveOptions};
use lockfile::inspect::InspectOptions;
use lockfile_lease::LeaseReport;
use lockfile_lease::history::History;
use lockfile_lease::report::Holding;

use crate::conn::{self, Conn};
use crate::key::{history_name_of, name_of};
use crate::{
    ENGINE, HISTORY_PREFIX, KEY_PREFIX, LeaseOptions, Operation, Result, history, history_key_for,
    key_for,
};

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

    /// Every lease under [`KEY_PREFIX`], and every free lease with a run
    /// history under [`HISTORY_PREFIX`], sorted by name, each with its run
    /// history.
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
        report(&conn, &mut client, name, &key, get.kvs().first(), history).await
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
        // Every name, held or with a history. Keys under the prefixes that
        // no valid name maps to are not ours.
        let mut names: BTreeMap<&str, (Option<&KeyValue>, Option<&KeyValue>)> = BTreeMap::new();
        for kv in get.kvs() {
            if let Some(name) = name_of(kv.key()).filter(|n| key_for(n).is_ok()) {
                names.entry(name).or_default().0 = Some(kv);
            }
        }
        if let Ok(all) = &histories {
            for kv in all.kvs() {
                if let Some(name) = history_name_of(kv.key()).filter(|n| key_for(n).is_ok()) {
                    names.entry(name).or_default().1 = Some(kv);
                }
            }
        }
        let mut reports = Vec::with_capacity(names.len());
        for (name, (held, kept)) in names {
            let history = match &histories {
                Ok(_) => history::from_value(kept),
                Err(e) => Err(e.to_string()),
            };
            let key = key_for(name)?;
            reports.push(report(&conn, &mut client, name, &key, held, history).await?);
        }
        Ok(reports)
    })
}

/// The report on `name`, held as `kv` says (free without one).
async fn report(
    conn: &Conn,
    client: &mut Client,
    name: &str,
    key: &str,
    kv: Option<&KeyValue>,
    history: std::result::Result<Option<History>, String>,
) -> Result<LeaseReport> {
    let mut report = LeaseReport::free(ENGINE, name, key).with_history(history);
    if let Some(kv) = kv {
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
        report = report.held(Holding {
            value: kv.value(),
            fencing_token: u64::try_from(kv.create_revision()).unwrap_or(0),
            lease_id,
            ttl,
            ttl_remaining,
        });
    }
    Ok(report.judged(&InspectOptions::new(), SystemTime::now()))
}
