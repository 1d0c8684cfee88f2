//! The server must be able to keep a lease: a primary (a replica refuses
//! writes, and one promoted after a failover may not have the lease at
//! all), with no eviction policy that may drop a lease's key (eviction
//! silently hands the lock to the next contender).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// The servers whose eviction policy could not be read, and were warned
/// about: once each in a process.
static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Why a server whose `ROLE` answered `role` cannot keep a lease, or
/// `None` for a primary.
pub(crate) fn not_primary(role: &[redis::Value]) -> Option<String> {
    let said = match role.first() {
        Some(redis::Value::BulkString(r)) if r == b"master" => return None,
        Some(redis::Value::BulkString(r)) => String::from_utf8_lossy(r).into_owned(),
        _ => "no role".to_owned(),
    };
    Some(format!(
        "the server is not a primary (ROLE says {said}): a replica refuses the lease's \
         writes, and after a failover it may grant a lease twice; connect to the primary"
    ))
}

/// Says once a process for each server that its eviction policy cannot be
/// read (`why`): managed Redis often renames or forbids `CONFIG`, and an
/// ACL user may not have it.
pub(crate) fn policy_unknown(server: &str, why: &dyn std::fmt::Display) {
    let first = WARNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(server.to_owned());
    if first {
        tracing::warn!(
            event = "eviction_policy_unknown",
            server,
            error = %why,
            "cannot read the server's maxmemory-policy: make sure it is noeviction, or \
             another holder may be handed a lease whose key was evicted"
        );
    }
}

/// Why `settings` (maxmemory and maxmemory-policy) may evict a lease's
/// key, or `None`.
pub(crate) fn evicts(settings: &HashMap<String, String>) -> Option<String> {
    let limited = settings.get("maxmemory").is_some_and(|m| m.trim() != "0");
    let policy = settings.get("maxmemory-policy")?;
    // Every allkeys-* policy evicts any key; every volatile-* one evicts
    // keys with an expiry, which every lease key has.
    (limited && (policy.starts_with("allkeys-") || policy.starts_with("volatile-"))).then(|| {
        format!(
            "the server may evict a lease's key (maxmemory-policy {policy} with maxmemory {}): \
             an evicted key hands the lease to the next contender while its holder runs; \
             set maxmemory-policy noeviction, or give the leases a server of their own",
            settings.get("maxmemory").map_or("", String::as_str)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(maxmemory: &str, policy: &str) -> HashMap<String, String> {
        HashMap::from([
            ("maxmemory".to_owned(), maxmemory.to_owned()),
            ("maxmemory-policy".to_owned(), policy.to_owned()),
        ])
    }

    #[test]
    fn only_a_policy_that_may_evict_a_key_with_an_expiry_under_a_limit_is_refused() {
        for policy in [
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "volatile-lru",
            "volatile-ttl",
            "volatile-random",
            "volatile-lfu",
        ] {
            assert!(evicts(&settings("104857600", policy)).is_some(), "{policy}");
            assert!(
                evicts(&settings("0", policy)).is_none(),
                "{policy} without maxmemory"
            );
        }
        assert!(evicts(&settings("104857600", "noeviction")).is_none());
    }
}
