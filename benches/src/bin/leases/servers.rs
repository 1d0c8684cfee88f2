//! The servers measured: a PostgreSQL with a PgBouncer in transaction
//! pooling mode in front of it (the engine's own test servers), a
//! single-member etcd, and a Redis without persistence (the Redis engine's
//! test server); and the CPU time their processes use, read from /proc.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use lockfile_test_support::postgres::{self, Postgres};
use lockfile_test_support::{Etcd, Redis};

/// Where the servers are: started here, or given.
#[derive(Debug)]
pub(crate) struct Servers {
    /// The PostgreSQL server itself.
    pub(crate) postgres_url: String,
    /// The same database through PgBouncer (transaction pooling).
    pub(crate) bouncer_url: String,
    pub(crate) etcd_endpoint: String,
    /// The Redis server (`redis://127.0.0.1:PORT`).
    pub(crate) redis_url: String,
    /// The same Redis as a user refused `SUBSCRIBE`, whose waits poll:
    /// started here only.
    pub(crate) redis_polling_url: Option<String>,
    /// The PostgreSQL server over its Unix socket, where it trusts the
    /// local user (no SCRAM exchange): started here only.
    pub(crate) socket_url: Option<String>,
    /// Started here: the processes whose CPU time is read.
    pub(crate) started: Option<Started>,
}

/// Servers this program started, stopped when dropped.
pub(crate) struct Started {
    postgres: Postgres,
    etcd: Etcd,
    redis: Redis,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("postgres_port", &self.postgres.port)
            .field("etcd", &self.etcd.endpoint())
            .field("redis_port", &self.redis.port())
            .finish()
    }
}

impl Servers {
    /// Starts PostgreSQL, PgBouncer, etcd and Redis of this run's own (as
    /// the engines' tests do).
    pub(crate) fn start() -> Result<Servers> {
        // The tests' own servers: they panic, with the server's log, when
        // one does not start.
        let mut postgres = std::panic::catch_unwind(|| {
            let mut pg = Postgres::start();
            let _ = pg.bouncer_url();
            pg
        })
        .map_err(|_| anyhow::anyhow!("PostgreSQL or PgBouncer did not start (see above)"))?;
        let postgres_url = postgres.url();
        let bouncer_url = postgres.bouncer_url();
        let etcd = std::panic::catch_unwind(|| Etcd::start_until(etcd_answers))
            .map_err(|_| anyhow::anyhow!("etcd did not start (see above)"))?;
        let redis = std::panic::catch_unwind(Redis::start)
            .map_err(|_| anyhow::anyhow!("redis-server did not start (see above)"))?;
        let redis_polling_url = Some(polling_user(&redis.url())?);
        let socket_url = data_dir(postgres.port)
            .and_then(|d| Some(d.parent()?.to_str()?.to_owned()))
            .map(|dir| {
                format!(
                    "host={dir} port={} user={} dbname=postgres",
                    postgres.port,
                    postgres::USER
                )
            });
        Ok(Servers {
            postgres_url,
            bouncer_url,
            etcd_endpoint: etcd.endpoint(),
            redis_url: redis.url(),
            redis_polling_url,
            socket_url,
            started: Some(Started {
                postgres,
                etcd,
                redis,
            }),
        })
    }

    /// Creates the lease schema on the PostgreSQL server (safe to repeat).
    pub(crate) fn init_schema(&self) -> Result<()> {
        lockfile_postgres::LeaseOptions::new(&self.postgres_url)
            .init(None)
            .with_context(|| {
                format!(
                    "cannot create the lease schema on {}",
                    redact(&self.postgres_url)
                )
            })
    }

    /// The processes of PostgreSQL (the postmaster and its children), of
    /// PgBouncer, of etcd and of Redis; none when the servers were given.
    pub(crate) fn processes(&self) -> Option<ServerProcesses> {
        let started = self.started.as_ref()?;
        let postmaster = find_postmaster(started.postgres.port)?;
        let data = data_dir(started.postgres.port)?;
        let ini = data.parent()?.join("pgbouncer.ini");
        let bouncer = find_process("pgbouncer", |args| args.iter().any(|a| Path::new(a) == ini));
        Some(ServerProcesses {
            postmaster,
            bouncer,
            etcd: started.etcd.pid().as_raw_nonzero().get() as u32,
            redis: started.redis.pid().as_raw_nonzero().get() as u32,
        })
    }
}

/// `url` without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!("{}{}", &url[..scheme + 3 + colon], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// The pids whose CPU time the load figures read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerProcesses {
    postmaster: u32,
    bouncer: Option<u32>,
    etcd: u32,
    redis: u32,
}

/// CPU time used so far, in clock ticks.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuTicks {
    pub(crate) postgres: u64,
    pub(crate) bouncer: u64,
    pub(crate) etcd: u64,
    /// redis-server (its I/O threads are threads of the same process).
    pub(crate) redis: u64,
    /// This program: the engines' lease threads.
    pub(crate) ours: u64,
}

impl ServerProcesses {
    /// The CPU time (user + system) of each server so far. PostgreSQL's is
    /// the postmaster's, its reaped children's, and every live child's
    /// (the backends, PgBouncer's pooled connections among them).
    pub(crate) fn ticks(&self) -> CpuTicks {
        let mut postgres = stat(self.postmaster).map_or(0, |s| s.own + s.children);
        for pid in pids() {
            if let Some(s) = stat(pid)
                && s.ppid == self.postmaster
            {
                postgres += s.own;
            }
        }
        CpuTicks {
            postgres,
            bouncer: self.bouncer.and_then(stat).map_or(0, |s| s.own),
            etcd: stat(self.etcd).map_or(0, |s| s.own),
            redis: stat(self.redis).map_or(0, |s| s.own),
            ours: stat(std::process::id()).map_or(0, |s| s.own),
        }
    }
}

/// CPU used between two readings over `window`, as a percentage of one core.
pub(crate) fn percent_of_core(before: u64, after: u64, window: Duration) -> f64 {
    let hz = rustix::param::clock_ticks_per_second() as f64;
    after.saturating_sub(before) as f64 / hz / window.as_secs_f64() * 100.0
}

struct Stat {
    ppid: u32,
    /// utime + stime.
    own: u64,
    /// cutime + cstime: children reaped.
    children: u64,
}

fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after
    // the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // proc(5): state is field 3, ppid 4, utime 14, stime 15, cutime 16,
    // cstime 17; `f` starts at field 3.
    let n = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok());
    Some(Stat {
        ppid: u32::try_from(n(4)?).ok()?,
        own: n(14)? + n(15)?,
        children: n(16)? + n(17)?,
    })
}

fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn find_process(comm: &str, matches: impl Fn(&[String]) -> bool) -> Option<u32> {
    pids().into_iter().find(|&pid| {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
            && matches(&cmdline(pid))
    })
}

/// The postmaster listening on `port`: pg_ctl starts it as `postgres -D
/// DIR -p PORT`.
fn find_postmaster(port: u16) -> Option<u32> {
    let port = port.to_string();
    find_process("postgres", |args| {
        args.windows(2).any(|w| w[0] == "-p" && w[1] == port) && args.iter().any(|a| a == "-D")
    })
}

/// The data directory of the postmaster listening on `port`.
fn data_dir(port: u16) -> Option<PathBuf> {
    cmdline(find_postmaster(port)?)
        .windows(2)
        .find(|w| w[0] == "-D")
        .map(|w| PathBuf::from(&w[1]))
}

/// Whether the etcd at `endpoint` serves requests yet: one read through
/// etcd's own client.
fn etcd_answers(endpoint: &str) -> bool {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return false;
    };
    runtime
        .block_on(async {
            let mut client = etcd_client::Client::connect([endpoint], None).await?;
            client.get("ready-probe", None).await
        })
        .is_ok()
}

/// The user that [`Servers::redis_polling_url`] names, and its password.
const POLLING_USER: (&str, &str) = ("bench-polling", "bench-polling");

/// Creates, on the Redis at `url`, a user allowed everything but
/// `SUBSCRIBE`, and returns the URL that names it: a waiter that cannot
/// subscribe polls (docs/across-hosts.md, the Redis ACL).
fn polling_user(url: &str) -> Result<String> {
    let (user, password) = POLLING_USER;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime
        .block_on(async {
            let client = redis::Client::open(url)?;
            let mut c = client.get_multiplexed_async_connection().await?;
            redis::cmd("ACL")
                .arg("SETUSER")
                .arg(user)
                .arg("on")
                .arg(format!(">{password}"))
                .arg("~*")
                .arg("&*")
                .arg("+@all")
                .arg("-subscribe")
                .query_async::<()>(&mut c)
                .await
        })
        .context("cannot create the Redis user that polls")?;
    let rest = url
        .strip_prefix("redis://")
        .context("the Redis URL is not redis://")?;
    Ok(format!("redis://{user}:{password}@{rest}"))
}
