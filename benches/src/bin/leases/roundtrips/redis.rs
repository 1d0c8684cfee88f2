//! The Redis variants of figures 1 and 2: the engine's acquire + release
//! against the raw round trips of its own scripts (`EVALSHA` of the same
//! Lua sources, [`lockfile_redis::scripts`]) on one connection and with a
//! connect each time, and its renewal script against a `PING`.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use redis::Value;
use redis::aio::MultiplexedConnection;
use tokio::runtime::Runtime;

use crate::variant::{TTL, Variant, owner_json, runtime};

pub(crate) const CONNECT: &str = "connect alone (TCP, and the client's set-up commands)";
pub(crate) const CHECK: &str =
    "connect + ROLE and CONFIG GET, sent together (the engine's check of a new connection)";
pub(crate) const FLOOR_SAME: &str =
    "floor: the acquire and release scripts (EVALSHA), raw, on one open connection";
pub(crate) const FLOOR_CONNECT: &str = "floor: connect + the acquire and release scripts, raw";
pub(crate) const REPLICA: &str = "raw replica of the engine's requests: connect + ROLE and CONFIG GET + the acquire and release scripts";
pub(crate) const ENGINE: &str = "Engine::acquire + Lease::release";
pub(crate) const PING: &str = "floor: PING on an open connection";
pub(crate) const RENEW: &str = "the renewal script (EVALSHA) on an open connection";

pub(crate) fn key(row: &str) -> String {
    format!("redis|{row}")
}

/// The keys and the channel of lease `name` under the engine's default
/// prefix, as the engine names them (its `key` module).
struct Keys {
    lease: String,
    token: String,
    history: String,
    channel: String,
}

impl Keys {
    fn of(name: &str) -> Keys {
        let key = |suffix: &str| format!("{}{{{name}}}:{suffix}", lockfile_redis::DEFAULT_PREFIX);
        Keys {
            lease: key("lease"),
            token: key("token"),
            history: key("history"),
            channel: key("released"),
        }
    }
}

/// The scripts' SHA-1s, as the server names them (loaded once, untimed).
struct Shas {
    acquire: String,
    release: String,
    renew: String,
}

async fn connect(url: &str) -> Result<MultiplexedConnection> {
    let client = redis::Client::open(url).context("not a Redis URL")?;
    client
        .get_multiplexed_async_connection()
        .await
        .context("cannot connect to Redis")
}

/// The engine's check of a new connection: `ROLE` and `CONFIG GET`, sent
/// together on the multiplexed connection (one round trip).
async fn check(c: &mut MultiplexedConnection) -> Result<()> {
    let mut role_c = c.clone();
    let role = redis::cmd("ROLE");
    let mut config = redis::cmd("CONFIG");
    config.arg("GET").arg("maxmemory").arg("maxmemory-policy");
    let (role, config) = tokio::join!(
        role.query_async::<Vec<Value>>(&mut role_c),
        config.query_async::<HashMap<String, String>>(c),
    );
    ensure!(
        matches!(role?.first(), Some(Value::BulkString(r)) if r == b"master"),
        "the server is not a primary"
    );
    config?;
    Ok(())
}

/// The acquire script, raw: the token when taken.
async fn acquire(
    c: &mut MultiplexedConnection,
    sha: &Shas,
    name: &str,
    ttl_ms: u64,
) -> Result<String> {
    let keys = Keys::of(name);
    let owner = OWNER.with(Clone::clone);
    let reply: Vec<Value> = redis::cmd("EVALSHA")
        .arg(&sha.acquire)
        .arg(3)
        .arg(&keys.lease)
        .arg(&keys.token)
        .arg(&keys.history)
        .arg(owner)
        .arg(ttl_ms)
        .arg("")
        .arg("")
        .arg(64 << 10)
        .query_async(c)
        .await?;
    match (reply.first(), reply.get(1)) {
        (Some(Value::Int(1)), Some(Value::BulkString(token))) => {
            Ok(String::from_utf8(token.clone())?)
        }
        _ => bail!("{name} is held by someone else: {reply:?}"),
    }
}

thread_local! {
    static OWNER: String = owner_json().0;
}

/// The release script, raw (it publishes the release, as the engine's).
async fn release(c: &mut MultiplexedConnection, sha: &Shas, name: &str, token: &str) -> Result<()> {
    let keys = Keys::of(name);
    let freed: i64 = redis::cmd("EVALSHA")
        .arg(&sha.release)
        .arg(1)
        .arg(&keys.lease)
        .arg(token)
        .arg(&keys.channel)
        .query_async(c)
        .await?;
    ensure!(freed == 1, "the release of {name} found no lease of ours");
    Ok(())
}

/// Loads the engine's scripts on the server (the engine sends `EVAL` once
/// after `NOSCRIPT`; loaded beforehand, the floors' `EVALSHA` never meets
/// it).
fn load(rt: &Runtime, c: &mut MultiplexedConnection) -> Result<Shas> {
    async fn one(c: &mut MultiplexedConnection, source: &str) -> Result<String> {
        Ok(redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .query_async(c)
            .await?)
    }
    rt.block_on(async {
        Ok(Shas {
            acquire: one(c, lockfile_redis::scripts::acquire()).await?,
            release: one(c, lockfile_redis::scripts::release()).await?,
            renew: one(c, lockfile_redis::scripts::renew()).await?,
        })
    })
}

/// A variant that runs `op` (an async block over an open connection or
/// the URL) on `rt`.
macro_rules! variant {
    ($out:ident, $row:expr, $rt:ident, $body:expr) => {{
        let $rt = $rt.clone();
        $out.push(Variant {
            name: key($row),
            op: Box::new($body),
        });
    }};
}

pub(super) fn variants(url: &str) -> Result<Vec<Variant>> {
    let rt: Rc<Runtime> = runtime()?;
    let ttl_ms = u64::try_from(TTL.as_millis())?;
    let mut c = rt.block_on(connect(url))?;
    let sha = Rc::new(load(&rt, &mut c)?);
    let url: Rc<str> = url.into();
    let mut out = Vec::new();
    {
        let url = url.clone();
        variant!(out, CONNECT, rt, move || {
            rt.block_on(connect(&url))?;
            Ok(())
        });
    }
    {
        let url = url.clone();
        variant!(out, CHECK, rt, move || {
            rt.block_on(async { check(&mut connect(&url).await?).await })
        });
    }
    {
        let (mut c, sha) = (c.clone(), sha.clone());
        variant!(out, FLOOR_SAME, rt, move || {
            rt.block_on(async {
                let token = acquire(&mut c, &sha, "bench-floor", ttl_ms).await?;
                release(&mut c, &sha, "bench-floor", &token).await
            })
        });
    }
    for (row, checked) in [(FLOOR_CONNECT, false), (REPLICA, true)] {
        let (url, sha) = (url.clone(), sha.clone());
        let name = format!(
            "bench-{}",
            if checked { "replica" } else { "floor-connect" }
        );
        variant!(out, row, rt, move || {
            rt.block_on(async {
                let mut c = connect(&url).await?;
                if checked {
                    check(&mut c).await?;
                }
                let token = acquire(&mut c, &sha, &name, ttl_ms).await?;
                release(&mut c, &sha, &name, &token).await
            })
        });
    }
    {
        let mut engine = lockfile_redis::LeaseOptions::new(&*url);
        engine.ttl(TTL);
        out.push(Variant {
            name: key(ENGINE),
            op: Box::new(move || {
                let lease = lockfile_redis::Engine::acquire(
                    &engine,
                    "bench-engine",
                    &lockfile_redis::LeaseRequest::new(),
                )?;
                ensure!(
                    !lease.release()?.was_lost(),
                    "the lease was lost before its release"
                );
                Ok(())
            }),
        });
    }
    {
        let mut c = c.clone();
        variant!(out, PING, rt, move || {
            rt.block_on(redis::cmd("PING").query_async::<()>(&mut c))?;
            Ok(())
        });
    }
    {
        // A lease held for the whole run, renewed raw with the same TTL
        // (the PEXPIRE costs the same whatever it sets).
        let long = u64::try_from(Duration::from_secs(3600).as_millis())?;
        let token = rt.block_on(acquire(&mut c, &sha, "bench-renew", long))?;
        let lease = Keys::of("bench-renew").lease;
        variant!(out, RENEW, rt, move || {
            let renewed: i64 = rt.block_on(
                redis::cmd("EVALSHA")
                    .arg(&sha.renew)
                    .arg(1)
                    .arg(&lease)
                    .arg(&token)
                    .arg(long)
                    .query_async(&mut c),
            )?;
            ensure!(renewed == 1, "the renewal found no lease of ours");
            Ok(())
        });
    }
    Ok(out)
}
