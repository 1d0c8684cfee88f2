//! The key watch of a held lease: reports the key's deletion, or its
//! replacement by another holder or another lease.
//!
//! Expiry is covered by the deadline whether or not this watch works (etcd
//! deletes the key only after the lease expired, which is after the
//! deadline). The watch catches what the deadline cannot: an operator's
//! `etcdctl del`, or a `put` over the key. It reconnects after failures
//! and resumes from the last revision it saw, so nothing is missed.

use std::time::Duration;

use etcd_client::{Client, EventType, GetOptions, KeyValue, WatchOptions};

use crate::LostReason;
use crate::Operation;
use crate::conn::Conn;

/// Follows the key of the lease `lease_id`, created at revision `token`,
/// until it is deleted or replaced, on `client` (or a new connection), and
/// says how. A watch silent for `liveness` is asked for progress; one that
/// does not answer that is opened anew.
pub(crate) async fn watch_key(
    conn: Conn,
    client: Option<Client>,
    token: u64,
    lease_id: i64,
    liveness: Duration,
) -> LostReason {
    let token = i64::try_from(token).unwrap_or(i64::MAX);
    let retry_after = (liveness / 4).max(Duration::from_millis(100));
    let mut from = token + 1;
    let mut client = match client {
        Some(client) => client,
        None => loop {
            match conn.connect().await {
                Ok(client) => break client,
                Err(_) => tokio::time::sleep(retry_after).await,
            }
        },
    };
    loop {
        match follow(&conn, &mut client, token, lease_id, &mut from, liveness).await {
            Ok(reason) => return reason,
            Err(e) => {
                tracing::debug!(error = %e, "the key watch failed; reconnecting");
                tokio::time::sleep(retry_after).await;
                if let Ok(fresh) = conn.connect().await {
                    client = fresh;
                }
            }
        }
    }
}

/// Follows the key from revision `from` until it is lost; an error means the
/// watch broke and should be resumed.
async fn follow(
    conn: &Conn,
    client: &mut Client,
    token: i64,
    lease_id: i64,
    from: &mut i64,
    liveness: Duration,
) -> crate::Result<LostReason> {
    let key = conn.key();
    let options = WatchOptions::new().with_start_revision(*from);
    let mut stream = conn
        .call(Operation::Watch, client.watch(key, Some(options)))
        .await?;
    let mut asked_progress = false;
    loop {
        let message = tokio::select! {
            m = stream.message() => m,
            () = tokio::time::sleep(liveness) => {
                if asked_progress {
                    return Err(conn.unanswered(Operation::Watch, liveness * 2));
                }
                asked_progress = true;
                let _ = stream.request_progress().await;
                continue;
            }
        };
        asked_progress = false;
        let resp = match message {
            Ok(Some(resp)) => resp,
            Ok(None) => {
                return Err(conn.error(
                    Operation::Watch,
                    etcd_client::Error::WatchError("etcd closed the watch".to_owned()),
                ));
            }
            Err(e) => return Err(conn.error(Operation::Watch, e)),
        };
        if resp.canceled() {
            // Compacted past `from` (or no leader): read the key instead.
            let get = conn
                .call(Operation::Read, client.get(key, Some(GetOptions::new())))
                .await?;
            let revision = get.header().map_or(0, |h| h.revision());
            return match judge(get.kvs().first(), token, lease_id, revision) {
                Some(reason) => Ok(reason),
                None => {
                    *from = revision + 1;
                    Err(conn.error(
                        Operation::Watch,
                        etcd_client::Error::WatchError(format!(
                            "etcd cancelled the watch: {}",
                            resp.cancel_reason()
                        )),
                    ))
                }
            };
        }
        for event in resp.events() {
            let Some(kv) = event.kv() else { continue };
            *from = (*from).max(kv.mod_revision() + 1);
            let reason = match event.event_type() {
                EventType::Delete => Some(LostReason::KeyDeleted {
                    revision: kv.mod_revision(),
                }),
                EventType::Put => judge(Some(kv), token, lease_id, kv.mod_revision()),
            };
            if let Some(reason) = reason {
                return Ok(reason);
            }
        }
    }
}

/// Whether the key as read still belongs to this holder and lease.
fn judge(kv: Option<&KeyValue>, token: i64, lease_id: i64, revision: i64) -> Option<LostReason> {
    match kv {
        None => Some(LostReason::KeyDeleted { revision }),
        Some(kv) if kv.create_revision() != token || kv.lease() != lease_id => {
            Some(LostReason::KeyReplaced {
                revision: kv.mod_revision(),
            })
        }
        Some(_) => None,
    }
}
