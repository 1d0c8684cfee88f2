//! Figures 1 and 2: a lease's acquire + release, and its renewal, against
//! the raw round trips of the same statements (PostgreSQL), requests
//! (etcd) or scripts (Redis: `redis.rs`), sent by this program.
//!
//! Every variant is one operation, timed alone; a round runs every variant
//! `batch` times, in a freshly shuffled order.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp, WatchOptions};
use lockfile_bench::stats::{Results, Rng};
use lockfile_postgres::{Engine, LeaseRequest};
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls};

use crate::servers::redact;
// The engine's own statements, so that the floor sends exactly what it
// sends.
use lockfile_postgres::sql::Statements;

pub(crate) mod redis;

use crate::variant::{TTL, Variant, owner_json, runtime};

/// Where a PostgreSQL variant sends its statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    Direct,
    Bouncer,
}

impl Path {
    pub(crate) const ALL: [Path; 2] = [Path::Direct, Path::Bouncer];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Path::Direct => "PostgreSQL",
            Path::Bouncer => "PostgreSQL through PgBouncer (transaction pooling)",
        }
    }
}

/// The rows of the PostgreSQL tables, by path.
pub(crate) mod pg {
    use super::Path;

    pub(crate) const CONNECT: &str = "connect alone (TCP, SCRAM authentication, start-up)";
    pub(crate) const CONNECT_TRUST: &str =
        "connect alone over the Unix socket, trusted (no SCRAM exchange)";
    pub(crate) const FLOOR_SAME: &str =
        "floor: the acquire and release statements, raw, on one open connection";
    pub(crate) const FLOOR_CONNECT: &str =
        "floor: connect + the acquire and release statements, raw";
    pub(crate) const ENGINE: &str = "Engine::acquire + Lease::release";
    pub(crate) const SELECT1: &str = "floor: SELECT 1 on an open connection";
    pub(crate) const RENEW: &str = "the renewal statement on an open connection";
    pub(crate) const RENEW_ASYNC: &str =
        "the renewal statement with synchronous_commit off instead of on (not the engine's)";

    pub(crate) fn key(path: Path, row: &str) -> String {
        format!("{path:?}|{row}")
    }
}

/// The rows of the etcd tables.
pub(crate) mod etcd {
    pub(crate) const CONNECT: &str = "new client + one range read (its first request connects)";
    pub(crate) const FLOOR_SAME: &str =
        "floor: lease grant + txn (put) + txn (delete) + lease revoke, raw, on one client";
    pub(crate) const FLOOR_CONNECT: &str =
        "floor: new client + grant + txn (put); new client + txn (delete) + revoke, raw";
    pub(crate) const REPLICA: &str = "raw replica of the engine's requests: new client + grant + txn (put) + watch opened; new client + txn (delete) + revoke";
    pub(crate) const ENGINE: &str = "Engine::acquire + Lease::release";
    pub(crate) const RANGE: &str = "floor: range read of one key on an open client";
    pub(crate) const KEEPALIVE: &str = "keepalive round trip on an open stream (the renewal)";

    pub(crate) fn key(row: &str) -> String {
        format!("etcd|{row}")
    }
}

/// A raw connection, its socket driven by a task on the current runtime.
/// It names itself as the engine's do (`application_name=lockfile`):
/// PgBouncer sets a pooled server connection's `application_name` to its
/// client's before each transaction, so a floor named otherwise would pay
/// a `SET` the engine does not, and make the engine pay one.
pub(crate) async fn pg_connect(url: &str) -> Result<Client> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .with_context(|| format!("`{}` is not a PostgreSQL connection string", redact(url)))?;
    if config.get_application_name().is_none() {
        config.application_name("lockfile");
    }
    let (client, connection) = config
        .connect(NoTls)
        .await
        .with_context(|| format!("cannot connect to {}", redact(url)))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// The engine's acquire statement, raw: the token when acquired.
async fn pg_acquire(c: &Client, sql: &Statements, name: &str, ttl_ms: i64) -> Result<i64> {
    let (owner, attempt) = OWNER.with(Clone::clone);
    let rows = c
        .query_typed(
            &sql.acquire,
            &[
                (&name, Type::TEXT),
                (&attempt, Type::TEXT),
                (&owner, Type::TEXT),
                (&ttl_ms, Type::INT8),
            ],
        )
        .await?;
    let row = rows.first().context("the acquire returned no row")?;
    ensure!(row.try_get::<_, bool>(0)?, "{name} is held by someone else");
    Ok(row.try_get(1)?)
}

thread_local! {
    static OWNER: (String, String) = owner_json();
}

/// The engine's release statement, raw.
async fn pg_release(c: &Client, sql: &Statements, name: &str, token: i64) -> Result<()> {
    let rows = c
        .query_typed(&sql.release, &[(&name, Type::TEXT), (&token, Type::INT8)])
        .await?;
    ensure!(
        !rows.is_empty(),
        "the release of {name} found no lease of ours"
    );
    Ok(())
}

fn pg_variants(
    path: Path,
    url: &str,
    direct_url: &str,
    socket_url: Option<&str>,
    sql: &Rc<Statements>,
) -> Result<Vec<Variant>> {
    let rt = runtime()?;
    let ttl_ms = i64::try_from(TTL.as_millis())?;
    let tag = format!("{path:?}").to_lowercase();
    let mut out = Vec::new();
    if let (Path::Direct, Some(socket)) = (path, socket_url) {
        let (rt, socket) = (rt.clone(), socket.to_owned());
        out.push(Variant {
            name: pg::key(path, pg::CONNECT_TRUST),
            op: Box::new(move || {
                rt.block_on(pg_connect(&socket))?;
                Ok(())
            }),
        });
    }
    {
        let (rt, url) = (rt.clone(), url.to_owned());
        out.push(Variant {
            name: pg::key(path, pg::CONNECT),
            op: Box::new(move || {
                rt.block_on(pg_connect(&url))?;
                Ok(())
            }),
        });
    }
    {
        let (rt, sql) = (rt.clone(), sql.clone());
        let client = rt.block_on(pg_connect(url))?;
        let name = format!("bench-floor-{tag}");
        out.push(Variant {
            name: pg::key(path, pg::FLOOR_SAME),
            op: Box::new(move || {
                rt.block_on(async {
                    let token = pg_acquire(&client, &sql, &name, ttl_ms).await?;
                    pg_release(&client, &sql, &name, token).await
                })
            }),
        });
    }
    {
        let (rt, sql, url) = (rt.clone(), sql.clone(), url.to_owned());
        let name = format!("bench-floor-connect-{tag}");
        out.push(Variant {
            name: pg::key(path, pg::FLOOR_CONNECT),
            op: Box::new(move || {
                rt.block_on(async {
                    let client = pg_connect(&url).await?;
                    let token = pg_acquire(&client, &sql, &name, ttl_ms).await?;
                    pg_release(&client, &sql, &name, token).await
                })
            }),
        });
    }
    {
        let mut engine = lockfile_postgres::LeaseOptions::new(url);
        engine.ttl(TTL);
        let name = format!("bench-engine-{tag}");
        out.push(Variant {
            name: pg::key(path, pg::ENGINE),
            op: Box::new(move || {
                let lease = Engine::acquire(&engine, &name, &LeaseRequest::new())?;
                anyhow::ensure!(
                    !lease.release()?.was_lost(),
                    "the lease was lost before its release"
                );
                Ok(())
            }),
        });
    }
    {
        let rt2 = rt.clone();
        let client = rt.block_on(pg_connect(url))?;
        out.push(Variant {
            name: pg::key(path, pg::SELECT1),
            op: Box::new(move || {
                rt2.block_on(client.query_typed("SELECT 1", &[]))?;
                Ok(())
            }),
        });
    }
    {
        // A lease held for the whole run, renewed raw. Taken on the server
        // itself: through PgBouncer the row is the same.
        let name = format!("bench-renew-{tag}");
        let long = i64::try_from(Duration::from_secs(3600).as_millis())?;
        let token = rt.block_on(async {
            let c = pg_connect(direct_url).await?;
            pg_acquire(&c, sql, &name, long).await
        })?;
        let asynchronous = sql
            .renew
            .replace("'synchronous_commit', 'on'", "'synchronous_commit', 'off'");
        for (row, statement) in [
            (pg::RENEW, sql.renew.clone()),
            (pg::RENEW_ASYNC, asynchronous),
        ] {
            let client = rt.block_on(pg_connect(url))?;
            let (rt, name) = (rt.clone(), name.clone());
            out.push(Variant {
                name: pg::key(path, row),
                op: Box::new(move || {
                    let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 2] =
                        [(&name, Type::TEXT), (&token, Type::INT8)];
                    let rows = rt.block_on(client.query_typed(&statement, &params))?;
                    ensure!(
                        !rows.is_empty(),
                        "the renewal of {name} found no lease of ours"
                    );
                    Ok(())
                }),
            });
        }
    }
    Ok(out)
}

async fn etcd_connect(endpoint: &str) -> Result<etcd_client::Client> {
    etcd_client::Client::connect([endpoint], None)
        .await
        .with_context(|| format!("cannot connect to etcd at {endpoint}"))
}

/// The engine's acquire, raw: a lease, and the key put under it if absent.
async fn etcd_acquire(c: &mut etcd_client::Client, key: &str, value: &[u8]) -> Result<(i64, i64)> {
    let ttl = i64::try_from(TTL.as_secs())?;
    let id = c.lease_grant(ttl, None).await?.id();
    let txn = Txn::new()
        .when([Compare::create_revision(key, CompareOp::Equal, 0)])
        .and_then([TxnOp::put(
            key,
            value.to_vec(),
            Some(PutOptions::new().with_lease(id)),
        )])
        .or_else([TxnOp::get(key, None)]);
    let resp = c.txn(txn).await?;
    ensure!(resp.succeeded(), "{key} is held by someone else");
    Ok((id, resp.header().map_or(0, |h| h.revision())))
}

/// The engine's release, raw: the key deleted if still ours, the lease
/// revoked.
async fn etcd_release(c: &mut etcd_client::Client, key: &str, id: i64, token: i64) -> Result<()> {
    let txn = Txn::new()
        .when([
            Compare::create_revision(key, CompareOp::Equal, token),
            Compare::lease(key, CompareOp::Equal, id),
        ])
        .and_then([TxnOp::delete(key, None)]);
    ensure!(c.txn(txn).await?.succeeded(), "{key} was no longer ours");
    c.lease_revoke(id).await?;
    Ok(())
}

fn etcd_variants(endpoint: &str) -> Result<Vec<Variant>> {
    let rt = runtime()?;
    let value = owner_json().0.into_bytes();
    let client = rt.block_on(etcd_connect(endpoint))?;
    let mut out = Vec::new();
    {
        let (rt, endpoint) = (rt.clone(), endpoint.to_owned());
        out.push(Variant {
            name: etcd::key(etcd::CONNECT),
            op: Box::new(move || {
                rt.block_on(async {
                    let mut c = etcd_connect(&endpoint).await?;
                    c.get("bench/probe", None).await?;
                    Ok(())
                })
            }),
        });
    }
    {
        let (rt, mut c, value) = (rt.clone(), client.clone(), value.clone());
        out.push(Variant {
            name: etcd::key(etcd::FLOOR_SAME),
            op: Box::new(move || {
                rt.block_on(async {
                    let key = "bench/floor";
                    let (id, token) = etcd_acquire(&mut c, key, &value).await?;
                    etcd_release(&mut c, key, id, token).await
                })
            }),
        });
    }
    {
        let (rt, endpoint, value) = (rt.clone(), endpoint.to_owned(), value.clone());
        out.push(Variant {
            name: etcd::key(etcd::FLOOR_CONNECT),
            op: Box::new(move || {
                rt.block_on(async {
                    let key = "bench/floor-connect";
                    let mut c = etcd_connect(&endpoint).await?;
                    let (id, token) = etcd_acquire(&mut c, key, &value).await?;
                    let mut c = etcd_connect(&endpoint).await?;
                    etcd_release(&mut c, key, id, token).await
                })
            }),
        });
    }
    {
        let (rt, endpoint, value) = (rt.clone(), endpoint.to_owned(), value.clone());
        out.push(Variant {
            name: etcd::key(etcd::REPLICA),
            op: Box::new(move || {
                rt.block_on(async {
                    let key = "bench/replica";
                    let mut c = etcd_connect(&endpoint).await?;
                    let (id, token) = etcd_acquire(&mut c, key, &value).await?;
                    // The engine's key watch, from the revision after ours,
                    // until etcd confirms it (the engine opens it beside
                    // the acquire's return, on a task of its own).
                    let options = WatchOptions::new().with_start_revision(token + 1);
                    let mut events = c.watch(key, Some(options)).await?;
                    events.message().await?;
                    let mut c = etcd_connect(&endpoint).await?;
                    etcd_release(&mut c, key, id, token).await
                })
            }),
        });
    }
    {
        let mut engine = lockfile_etcd::LeaseOptions::new();
        engine.endpoints([endpoint]).ttl(TTL);
        out.push(Variant {
            name: etcd::key(etcd::ENGINE),
            op: Box::new(move || {
                let lease = lockfile_etcd::Engine::acquire(
                    &engine,
                    "bench-engine",
                    &lockfile_etcd::LeaseRequest::new(),
                )?;
                anyhow::ensure!(
                    !lease.release()?.was_lost(),
                    "the lease was lost before its release"
                );
                Ok(())
            }),
        });
    }
    {
        let (rt, mut c) = (rt.clone(), client.clone());
        out.push(Variant {
            name: etcd::key(etcd::RANGE),
            op: Box::new(move || {
                rt.block_on(c.get("bench/probe", None))?;
                Ok(())
            }),
        });
    }
    {
        let mut c = client;
        let stream = rt.block_on(async {
            let id = c.lease_grant(3600, None).await?.id();
            c.lease_keep_alive(id).await
        })?;
        let stream = RefCell::new(stream);
        out.push(Variant {
            name: etcd::key(etcd::KEEPALIVE),
            op: Box::new(move || {
                let (keeper, responses) = &mut *stream.borrow_mut();
                rt.block_on(async {
                    keeper.keep_alive().await?;
                    match responses.message().await? {
                        Some(r) if r.ttl() > 0 => Ok(()),
                        _ => bail!("etcd no longer has the renewed lease"),
                    }
                })
            }),
        });
    }
    Ok(out)
}

/// Runs both engines' variants: one warm-up round, then `rounds` rounds of
/// `batch` operations each, every round in a new order.
pub(crate) fn measure(
    servers: &crate::servers::Servers,
    rounds: usize,
    batch: usize,
    rng: &mut Rng,
) -> Result<Results> {
    let sql = Rc::new(Statements::for_schema("lockfile").map_err(anyhow::Error::msg)?);
    let mut variants = Vec::new();
    for path in Path::ALL {
        let url = match path {
            Path::Direct => &servers.postgres_url,
            Path::Bouncer => &servers.bouncer_url,
        };
        variants.extend(pg_variants(
            path,
            url,
            &servers.postgres_url,
            servers.socket_url.as_deref(),
            &sql,
        )?);
    }
    variants.extend(etcd_variants(&servers.etcd_endpoint)?);
    variants.extend(redis::variants(&servers.redis_url)?);
    let mut results = Results::default();
    for round in 0..=rounds {
        rng.shuffle(&mut variants);
        if round > 0 {
            results.start_round();
        }
        for v in &mut variants {
            let mut samples = Vec::with_capacity(batch);
            for _ in 0..batch {
                let started = Instant::now();
                (v.op)().with_context(|| v.name.clone())?;
                samples.push(started.elapsed().as_nanos() as f64);
            }
            if round > 0 {
                results.record_samples(&v.name, &samples);
            }
        }
    }
    Ok(results)
}
