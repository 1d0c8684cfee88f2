//! The lease layer's one error type, shared by every engine. Every message
//! names the operation and the key (and the engine and its server when the
//! server was involved).

use std::fmt;
use std::io;
use std::time::Duration;

use lockfile::OwnerRecord;

pub use crate::lost::LostReason;
use crate::lost::millis;

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boxed error from the layer below an engine (its client library). Boxed
/// so that the client's version is not part of any crate's API.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the crate was doing when an error happened. Shown in messages as
/// "cannot OPERATION `KEY`".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
    /// Connecting to the engine's server.
    Connect,
    /// Granting the lease that the key will be attached to.
    Grant,
    /// The transaction that writes the key if it does not exist.
    Acquire,
    /// Watching the key.
    Watch,
    /// Renewing the lease.
    Renew,
    /// Reading the key.
    Read,
    /// Deleting the key on release.
    Release,
    /// Revoking the lease on release.
    Revoke,
    /// Reading the lease's remaining time-to-live.
    TimeToLive,
    /// Starting the thread that renews the lease.
    Spawn,
    /// Writing how a run ended into the lease's run history key.
    RecordRun,
    /// Creating or checking the engine's schema (tables, sequence).
    Schema,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Connect => "connect to the server for",
            Operation::Grant => "grant a lease for",
            // Named for the step, not its effect: the acquire can fail
            // before any owner record is written (a missing grant, a
            // serialisation failure), and "the owner record" then sent
            // readers to the wrong place.
            Operation::Acquire => "run the acquire transaction on",
            Operation::Watch => "watch",
            Operation::Renew => "renew the lease on",
            Operation::Read => "read",
            Operation::Release => "delete",
            Operation::Revoke => "revoke the lease on",
            Operation::TimeToLive => "read the lease time-to-live of",
            Operation::Spawn => "start the renewal thread for",
            Operation::RecordRun => "record the run history in",
            Operation::Schema => "create the schema",
        })
    }
}

/// Everything that can go wrong while acquiring, holding, inspecting or
/// releasing a lease.
///
/// Contention is its own variant, [`Error::Contended`], and a lost lease is
/// [`Error::LeaseLost`]: test for them with [`Error::is_contended`] and
/// [`Error::is_lost`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Someone else holds the lease. `owner` is their record when the key's
    /// value is one.
    #[error("`{key}` is held by {} (fencing token {fencing_token})", OwnerRecord::describe(owner.as_deref()))]
    Contended {
        /// The key (the engine's name for the lease's place).
        key: String,
        /// The holder's owner record, when the key holds a readable one.
        owner: Option<Box<OwnerRecord>>,
        /// The holder's fencing token (the key's create revision).
        fencing_token: u64,
    },
    /// A bounded wait ended before the lease came free.
    #[error(
        "gave up waiting for `{key}` after {}: it is held by {}",
        humantime::format_duration(millis(*waited)),
        OwnerRecord::describe(owner.as_deref())
    )]
    Timeout {
        /// The key (the engine's name for the lease's place).
        key: String,
        /// How long the call waited.
        waited: Duration,
        /// The holder's owner record as last seen, when readable.
        owner: Option<Box<OwnerRecord>>,
    },
    /// Every one of N slot leases is held ([`crate::slots::acquire_slot`]),
    /// or a bounded wait for any of them ended. `holders` are the slots'
    /// [`Error::Contended`], in slot order.
    #[error("{}", slots_held(name, *count, holders, *waited))]
    SlotsHeld {
        /// The name the slots are of.
        name: String,
        /// How many slots were asked for.
        count: u16,
        /// How long the call waited, when it waited.
        waited: Option<Duration>,
        /// Each slot's contention.
        holders: Vec<Error>,
    },
    /// The lease may have lapsed: stop acting on it.
    #[error("the lease on `{key}` is lost: {reason}")]
    LeaseLost {
        /// The key (the engine's name for the lease's place).
        key: String,
        /// What happened.
        reason: LostReason,
    },
    /// The lock name cannot be used as a key.
    #[error(
        "cannot use {} as a lease name: {reason}",
        lockfile::text::quoted(name)
    )]
    InvalidName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The options cannot work.
    #[error("cannot {op} `{key}`: {reason}")]
    InvalidOptions {
        /// The operation that was refused.
        op: Operation,
        /// The key (the engine's name for the lease's place).
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The engine's server (or the connection to it) returned an error.
    #[error("cannot {op} `{key}` on {engine} at {server}: {source}")]
    Server {
        /// The engine: `etcd`, `postgres`.
        engine: &'static str,
        /// The failed operation.
        op: Operation,
        /// The key (the engine's name for the lease's place).
        key: String,
        /// Where the server is, as the user gave it (endpoints, comma
        /// separated; a URL without its password).
        server: String,
        /// The client's error.
        source: BoxError,
    },
    /// The engine's server did not answer in time.
    #[error(
        "cannot {op} `{key}` on {engine} at {server}: no answer within {}",
        humantime::format_duration(millis(*after))
    )]
    Unanswered {
        /// The engine: `etcd`, `postgres`.
        engine: &'static str,
        /// The failed operation.
        op: Operation,
        /// The key (the engine's name for the lease's place).
        key: String,
        /// Where the server is, as the user gave it.
        server: String,
        /// How long the call waited.
        after: Duration,
    },
    /// The key changed between each read and write of a read-modify-write
    /// (the run history): another writer kept getting there first.
    #[error("cannot {op} `{key}`: another writer changed it under each of {attempts} attempts")]
    Conflict {
        /// The failed operation.
        op: Operation,
        /// The key (the engine's name for the lease's place).
        key: String,
        /// How many times the write was tried.
        attempts: u32,
    },
    /// The run's tick (`--once-per`) was used up by a run that finished:
    /// this run must not start. A skip, not a failure.
    #[error(
        "tick {} of `{key}` already ran{} ({})",
        humantime::format_rfc3339_seconds(*tick),
        claim.as_ref().map(|c| format!(" on host {}", lockfile::text::quoted(&c.host))).unwrap_or_default(),
        run.outcome
    )]
    TickUsed {
        /// The key.
        key: String,
        /// The tick.
        tick: std::time::SystemTime,
        /// The run that used it up.
        run: Box<lockfile::history::LastRun>,
        /// Its claim, naming the host and pid that ran it, when kept.
        claim: Option<Box<lockfile::tick::Claim>>,
    },
    /// The lease came later than half a period after the run's tick: the
    /// run belongs to no tick any more. A skip, not a failure.
    #[error(
        "the lease on `{key}` came too late for tick {}: more than half a period after it",
        humantime::format_rfc3339_seconds(*tick)
    )]
    TooLate {
        /// The key.
        key: String,
        /// The tick it was too late for.
        tick: std::time::SystemTime,
    },
    /// An error of the local lock (`lockfile::Error`), so that code that
    /// holds a lock file and a lease can use `?` on both and return one
    /// error type. It names its operation and path itself.
    #[error(transparent)]
    Lock(#[from] lockfile::Error),
    /// Any other local failure (starting a thread or a runtime).
    #[error("cannot {op} `{key}`: {source}")]
    Io {
        /// The failed operation.
        op: Operation,
        /// The key (the engine's name for the lease's place).
        key: String,
        /// The underlying error.
        source: io::Error,
    },
}

impl Error {
    /// Whether the lease is held by someone else ([`Error::Contended`] or
    /// [`Error::Timeout`]), as opposed to a failure to try at all; or, for
    /// [`Error::Lock`], the lock file is.
    pub fn is_contended(&self) -> bool {
        match self {
            Error::Contended { .. } | Error::Timeout { .. } | Error::SlotsHeld { .. } => true,
            Error::Lock(e) => e.is_contended(),
            _ => false,
        }
    }

    /// Whether this is [`Error::LeaseLost`]: a lease that was held may have
    /// lapsed.
    pub fn is_lost(&self) -> bool {
        matches!(self, Error::LeaseLost { .. })
    }

    /// The error for a decision that refuses a run its tick
    /// ([`History::claimed`](crate::history::History::claimed)) on `key`, given the
    /// claim the name keeps; `None` for a decision to run.
    pub fn refused_tick(
        key: &str,
        decision: lockfile::tick::TickDecision,
        claim: Option<&lockfile::tick::Claim>,
    ) -> Option<Error> {
        match decision {
            lockfile::tick::TickDecision::TooLate { tick } => Some(Error::TooLate {
                key: key.to_owned(),
                tick,
            }),
            lockfile::tick::TickDecision::AlreadyRan { tick, run } => Some(Error::TickUsed {
                key: key.to_owned(),
                tick,
                run,
                claim: claim.cloned().map(Box::new),
            }),
            _ => None,
        }
    }

    /// Whether the run's tick is not to be run ([`Error::TickUsed`] or
    /// [`Error::TooLate`]): a skip, like contention.
    pub fn is_tick_refused(&self) -> bool {
        matches!(self, Error::TickUsed { .. } | Error::TooLate { .. })
    }

    /// The holder's owner record, for [`Error::Contended`] and [`Error::Timeout`].
    pub fn owner(&self) -> Option<&OwnerRecord> {
        match self {
            Error::Contended { owner, .. } | Error::Timeout { owner, .. } => owner.as_deref(),
            _ => None,
        }
    }

    /// Why the lease was lost, for [`Error::LeaseLost`].
    pub fn lost_reason(&self) -> Option<&LostReason> {
        match self {
            Error::LeaseLost { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// The key the error is about, when it is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Error::Contended { key, .. }
            | Error::Timeout { key, .. }
            | Error::LeaseLost { key, .. }
            | Error::InvalidOptions { key, .. }
            | Error::Server { key, .. }
            | Error::Unanswered { key, .. }
            | Error::Conflict { key, .. }
            | Error::TickUsed { key, .. }
            | Error::TooLate { key, .. }
            | Error::Io { key, .. } => Some(key),
            Error::InvalidName { .. } | Error::SlotsHeld { .. } | Error::Lock(_) => None,
        }
    }
}

/// [`Error::SlotsHeld`]'s message: the first few holders, and how many more.
fn slots_held(name: &str, count: u16, holders: &[Error], waited: Option<Duration>) -> String {
    const NAMED: usize = 3;
    let mut said = match waited {
        Some(waited) if count == 1 => format!(
            "gave up waiting for the one slot of `{name}` after {}: ",
            humantime::format_duration(Duration::from_secs(waited.as_secs()))
        ),
        Some(waited) => format!(
            "gave up waiting for any of the {count} slots of `{name}` after {}: ",
            humantime::format_duration(Duration::from_secs(waited.as_secs()))
        ),
        None if count == 1 => format!("the one slot of `{name}` is held: "),
        None => format!("all {count} slots of `{name}` are held: "),
    };
    let named: Vec<String> = holders
        .iter()
        .take(NAMED)
        .map(ToString::to_string)
        .collect();
    said.push_str(&named.join("; "));
    if holders.len() > NAMED {
        said.push_str(&format!("; and {} more", holders.len() - NAMED));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_operation_and_the_key() {
        let e = Error::Unanswered {
            engine: "etcd",
            op: Operation::Grant,
            key: "lockfile/locks/nightly".to_owned(),
            server: "http://10.0.0.1:2379".to_owned(),
            after: Duration::from_millis(5000),
        };
        assert_eq!(
            e.to_string(),
            "cannot grant a lease for `lockfile/locks/nightly` on etcd at http://10.0.0.1:2379: no answer within 5s"
        );
        assert_eq!(e.key(), Some("lockfile/locks/nightly"));
        assert!(!e.is_contended() && !e.is_lost());

        let e = Error::LeaseLost {
            key: "lockfile/locks/nightly".to_owned(),
            reason: LostReason::DeadlinePassed {
                ttl: Duration::from_secs(10),
                since_renewal: Duration::from_micros(10_250_123),
            },
        };
        assert!(e.is_lost());
        assert_eq!(
            e.to_string(),
            "the lease on `lockfile/locks/nightly` is lost: no renewal succeeded within the lease's TTL of 10s (the last successful one was sent 10s 250ms ago); the server may have expired it"
        );

        let e = Error::Contended {
            key: "lockfile/locks/nightly".to_owned(),
            owner: None,
            fencing_token: 42,
        };
        assert!(e.is_contended());
        assert_eq!(
            e.to_string(),
            "`lockfile/locks/nightly` is held by a holder that wrote no owner record (fencing token 42)"
        );
    }

    /// One error type for a lock file and a lease: `?` works on both.
    #[test]
    fn a_lock_files_error_passes_through_with_its_words() {
        fn take(path: &std::path::Path) -> Result<lockfile::LockGuard> {
            Ok(lockfile::LockGuard::try_acquire(path)?)
        }
        let dir = std::env::temp_dir().join(format!("lockfile-lease-error-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("job.lock");
        let held = take(&path).unwrap();
        let e = take(&path).unwrap_err();
        assert!(matches!(e, Error::Lock(_)), "{e:?}");
        assert!(e.is_contended(), "{e}");
        assert_eq!(e.key(), None);
        let missing = take(&dir.join("no/such/dir/job.lock")).unwrap_err();
        assert!(!missing.is_contended());
        assert!(missing.to_string().contains("no/such/dir"), "{missing}");
        drop(held);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
