//! A service that leads through an election and writes where the fence
//! is: the leader of [`lockfile_lease::leader`], on any engine built in.
//!
//! While it leads, it writes `ID N` every interval, each write carrying
//! its term's fencing token to a store that refuses older tokens. It stops
//! writing as soon as its term says so (the lease lost, or its deadline
//! within the grace), steps down, and campaigns again. A write the store
//! refuses means that a newer leader exists: it steps down at once.
//!
//! The example `leader_service` runs it; the election tests run two of
//! them in two processes and break things.

use std::fmt;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockfile_lease::leader::{Election, Term};
use lockfile_lease::{Ending, Engine};

use crate::{FencedStore, StoreError};

/// Where the leader writes: a store that checks fencing tokens.
pub enum Store {
    /// The examples' file-backed [`FencedStore`] (processes on one host).
    File(FencedStore),
    /// A PostgreSQL table `service_writes`, each write in a transaction
    /// whose first statement is `SELECT lockfile.fence(fence, token)`: a
    /// stale token rolls the whole transaction back (SQLSTATE `LF001`).
    #[cfg(feature = "postgres")]
    Postgres {
        /// The database, as a role that may execute `lockfile.fence`.
        url: String,
        /// The name the fence keeps the highest token of.
        fence: String,
    },
}

/// Never the PostgreSQL URL: it may hold a password.
impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Store::File(store) => f.debug_tuple("File").field(store).finish(),
            #[cfg(feature = "postgres")]
            Store::Postgres { fence, .. } => f
                .debug_struct("Postgres")
                .field("fence", fence)
                .finish_non_exhaustive(),
        }
    }
}

/// What became of one write.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Written {
    /// The store took it.
    Accepted,
    /// The store refused its token: a newer leader wrote already.
    Refused(String),
}

impl Store {
    /// Writes `value` with `token`.
    ///
    /// # Errors
    ///
    /// When the store cannot be reached or written (not a refusal).
    pub async fn write(&self, token: u64, value: String) -> Result<Written, String> {
        match self {
            Store::File(store) => {
                // A short blocking write (a lock file and a rename): off the
                // runtime's workers.
                let store = store.clone();
                let written = tokio::task::spawn_blocking(move || store.write(token, &value))
                    .await
                    .map_err(|e| e.to_string())?;
                match written {
                    Ok(()) => Ok(Written::Accepted),
                    Err(e @ StoreError::Fenced { .. }) => Ok(Written::Refused(e.to_string())),
                    Err(e) => Err(e.to_string()),
                }
            }
            #[cfg(feature = "postgres")]
            Store::Postgres { url, fence } => pg_write(url, fence, token, &value).await,
        }
    }
}

#[cfg(feature = "postgres")]
async fn pg_write(url: &str, fence: &str, token: u64, value: &str) -> Result<Written, String> {
    let (mut client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| e.to_string())?;
    let connection = tokio::spawn(connection);
    let token = i64::try_from(token).map_err(|e| e.to_string())?;
    let written = async {
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS service_writes (token bigint NOT NULL, value text NOT NULL)",
            )
            .await?;
        let tx = client.transaction().await?;
        // First, so that a stale holder's whole transaction rolls back.
        tx.execute("SELECT lockfile.fence($1, $2)", &[&fence, &token])
            .await?;
        tx.execute(
            "INSERT INTO service_writes (token, value) VALUES ($1, $2)",
            &[&token, &value],
        )
        .await?;
        tx.commit().await
    }
    .await;
    connection.abort();
    match written {
        Ok(()) => Ok(Written::Accepted),
        Err(e)
            if e.code().map(tokio_postgres::error::SqlState::code)
                == Some(lockfile_postgres::sqlstate::STALE_FENCING_TOKEN) =>
        {
            Ok(Written::Refused(e.as_db_error().map_or_else(
                || e.to_string(),
                |db| db.message().to_owned(),
            )))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// What the service does, as it does it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Elected, with this fencing token.
    Elected(u64),
    /// The `n`th write of the term with `token` was accepted.
    Wrote(u64, u64),
    /// The `n`th write of the term with `token` was refused by the store.
    Refused(u64, u64),
    /// A write failed (the store unreachable): the term goes on.
    Failed(u64, String),
    /// Told to stop (`near`: the deadline within the grace; else the lease
    /// is lost) while `margin_ms` remained before the deadline (0 when past).
    Ending {
        /// The term's token.
        token: u64,
        /// Whether the lease was still held (the deadline near).
        near: bool,
        /// How long remained before the deadline.
        margin_ms: u64,
    },
    /// Stepped down from the term with this token.
    SteppedDown(u64),
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Elected(token) => write!(f, "elected {token}"),
            Event::Wrote(token, n) => write!(f, "wrote {token} {n}"),
            Event::Refused(token, n) => write!(f, "refused {token} {n}"),
            Event::Failed(token, why) => write!(f, "failed {token} {why}"),
            Event::Ending {
                token,
                near,
                margin_ms,
            } => write!(
                f,
                "ending {token} {} {margin_ms}",
                if *near { "near" } else { "lost" }
            ),
            Event::SteppedDown(token) => write!(f, "stepped-down {token}"),
        }
    }
}

/// How the service behaves.
#[derive(Clone, Debug)]
pub struct Service {
    /// Written in every value, to tell the services apart.
    pub id: String,
    /// How often the leader writes.
    pub every: Duration,
    /// Whether the leader's work heeds its term. A disobedient one (for the
    /// tests) writes from a task of its own that nothing stops: only the
    /// fence can.
    pub obey: bool,
}

/// Leads through `election` for ever, writing to `store`, telling `say`
/// what happens; `before_write(token, n)` runs just before each write (the
/// tests stop the process there).
///
/// # Errors
///
/// What the election cannot retry (an invalid name).
pub async fn serve(
    election: &Election,
    store: Arc<Store>,
    service: &Service,
    say: Say,
    before_write: Arc<dyn Fn(u64, u64) + Send + Sync>,
) -> lockfile_lease::Result<()> {
    election
        .lead(|term| {
            let (store, say, before_write) = (store.clone(), say.clone(), before_write.clone());
            let service = service.clone();
            async move {
                let token = term.fencing_token();
                say(Event::Elected(token));
                // Said when the term's work ends: returned, or dropped by
                // the election at the deadline.
                let _stepped_down = SayOnDrop(say.clone(), Event::SteppedDown(token));
                if service.obey {
                    lead_term(&term, &store, &service, &say, &*before_write).await;
                } else {
                    // Nothing stops this task but the process's end.
                    tokio::spawn(async move {
                        for n in 1.. {
                            before_write(token, n);
                            let value = format!("{} {n}", service.id);
                            let _ = write(&store, token, n, value, &say).await;
                            tokio::time::sleep(service.every).await;
                        }
                    });
                    std::future::pending::<()>().await;
                }
                ControlFlow::<()>::Continue(())
            }
        })
        .await
}

/// Where the service says what it does.
pub type Say = Arc<dyn Fn(Event) + Send + Sync>;

struct SayOnDrop(Say, Event);

impl Drop for SayOnDrop {
    fn drop(&mut self) {
        (self.0)(self.1.clone());
    }
}

/// One term of an obedient leader.
async fn lead_term(
    term: &Term,
    store: &Arc<Store>,
    service: &Service,
    say: &Say,
    before_write: &(dyn Fn(u64, u64) + Send + Sync),
) {
    let token = term.fencing_token();
    for n in 1.. {
        if !term.is_leading() {
            say(ending(term, token, None));
            return;
        }
        before_write(token, n);
        // A write on its way cannot be called back: it runs on a task of
        // its own, and says how it ended even if this term's work is
        // dropped meanwhile. That is what the fence is for.
        let write = tokio::spawn(write(store, token, n, format!("{} {n}", service.id), say));
        // A newer leader wrote: this term is over, whatever the lease says.
        if let Ok(Some(Written::Refused(_))) = write.await {
            return;
        }
        tokio::select! {
            ended = term.ending() => {
                say(ending(term, token, Some(ended)));
                return;
            }
            () = tokio::time::sleep(service.every) => {}
        }
    }
}

/// The `n`th write of the term with `token`, said when it ends.
fn write(
    store: &Arc<Store>,
    token: u64,
    n: u64,
    value: String,
    say: &Say,
) -> impl std::future::Future<Output = Option<Written>> + Send + 'static {
    let (store, say) = (store.clone(), say.clone());
    async move {
        match store.write(token, value).await {
            Ok(written) => {
                say(match written {
                    Written::Accepted => Event::Wrote(token, n),
                    Written::Refused(_) => Event::Refused(token, n),
                });
                Some(written)
            }
            Err(e) => {
                say(Event::Failed(token, e));
                None
            }
        }
    }
}

fn ending(term: &Term, token: u64, ended: Option<Ending>) -> Event {
    let near = match ended {
        Some(Ending::Near { .. }) => true,
        Some(_) => false,
        None => !term.signal().is_lost(),
    };
    Event::Ending {
        token,
        near,
        margin_ms: term
            .deadline()
            .saturating_duration_since(Instant::now())
            .as_millis() as u64,
    }
}

/// The engine a URL names: `http://` or `https://` for etcd, `redis://` or
/// `rediss://` for Redis, `postgres://` or `postgresql://` for PostgreSQL,
/// with this TTL; or why not (an engine this build left out).
///
/// # Errors
///
/// An unknown scheme, or an engine not built in (its feature off).
// (Without an engine built in, nothing needs the TTL.)
#[cfg_attr(
    not(any(feature = "etcd", feature = "postgres", feature = "redis")),
    allow(unused_variables)
)]
pub fn engine_for(url: &str, ttl: Duration) -> Result<Arc<dyn Engine>, String> {
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    match scheme {
        #[cfg(feature = "etcd")]
        "http" | "https" => {
            let mut options = lockfile_etcd::LeaseOptions::new();
            options.endpoints([url]).ttl(ttl);
            Ok(Arc::new(options))
        }
        #[cfg(feature = "redis")]
        "redis" | "rediss" => {
            let mut options = lockfile_redis::LeaseOptions::new(url);
            options.ttl(ttl);
            Ok(Arc::new(options))
        }
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => {
            let mut options = lockfile_postgres::LeaseOptions::new(url);
            options.ttl(ttl);
            Ok(Arc::new(options))
        }
        _ => Err(format!(
            "no engine for a URL starting `{scheme}://` in this build (the examples' features `etcd`, `postgres` and `redis` add them)"
        )),
    }
}
