//! Figure 3: how long after its holder is SIGKILLed a waiting contender
//! gets the lease. A holder that dies cannot release: the lease goes only
//! when it expires, a TTL after the last renewal the server received, so
//! the takeover is expected between TTL − the renewal interval and TTL,
//! plus how long the contender takes to notice (PostgreSQL and Redis: their
//! poll interval, or sooner at the expiry the holder's row or key
//! announced; etcd: the server's expiry sweep and the watch event).

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lockfile::wait::Wait;
use lockfile_bench::stats::Rng;
use lockfile_postgres::{Engine, LeaseRequest};

use crate::servers::Servers;

/// The environment variable that carries the server's URL to a holder (not
/// its command line, which every local user can read).
const SERVER_ENV: &str = "LOCKFILE_BENCH_SERVER";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Postgres,
    Etcd,
    Redis,
}

impl Kind {
    pub(crate) const ALL: [Kind; 3] = [Kind::Postgres, Kind::Etcd, Kind::Redis];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Postgres => "postgres",
            Kind::Etcd => "etcd",
            Kind::Redis => "redis",
        }
    }

    fn parse(s: &str) -> Result<Kind> {
        match s {
            "postgres" => Ok(Kind::Postgres),
            "etcd" => Ok(Kind::Etcd),
            "redis" => Ok(Kind::Redis),
            _ => bail!("unknown engine {s:?}"),
        }
    }

    /// The TTL the engine grants for `asked` (etcd: whole seconds, at
    /// least its minimum of 2 s with the default election timeout).
    pub(crate) fn granted(self, asked: Duration) -> Duration {
        match self {
            Kind::Postgres | Kind::Redis => asked,
            Kind::Etcd => Duration::from_secs(asked.as_secs_f64().ceil().max(2.0) as u64),
        }
    }

    /// How long after the lease's expiry a waiting contender may take to
    /// notice it: PostgreSQL's and Redis's poll interval; etcd's expiry
    /// sweep (every 500 ms in the server).
    pub(crate) fn notice_within(self, ttl: Duration) -> Duration {
        match self {
            Kind::Postgres | Kind::Redis => lockfile_lease::engine::poll_interval(ttl),
            Kind::Etcd => Duration::from_millis(500),
        }
    }
}

pub(crate) fn engine(kind: Kind, server: &str, ttl: Duration) -> Box<dyn Engine> {
    match kind {
        Kind::Postgres => {
            let mut e = lockfile_postgres::LeaseOptions::new(server);
            e.ttl(ttl);
            Box::new(e)
        }
        Kind::Etcd => {
            let mut e = lockfile_etcd::LeaseOptions::new();
            e.endpoints([server]).ttl(ttl);
            Box::new(e)
        }
        Kind::Redis => {
            let mut e = lockfile_redis::LeaseOptions::new(server);
            e.ttl(ttl);
            Box::new(e)
        }
    }
}

impl Servers {
    /// The server a lease of `kind` is taken on, as its engine names it
    /// (PostgreSQL: `pooled`, through PgBouncer, or directly).
    pub(crate) fn of(&self, kind: Kind, pooled: bool) -> &str {
        match kind {
            Kind::Postgres if pooled => &self.bouncer_url,
            Kind::Postgres => &self.postgres_url,
            Kind::Etcd => &self.etcd_endpoint,
            Kind::Redis => &self.redis_url,
        }
    }
}

/// The holder's role: take the lease, say so on stdout, and hold it
/// (renewing) until killed.
pub(crate) fn holder_main(kind: &str, name: &str, ttl_ms: &str) -> Result<()> {
    // A holder whose parent died (interrupted) must not hold on forever.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .context("cannot ask for SIGKILL at the parent's death")?;
    let kind = Kind::parse(kind)?;
    let ttl = Duration::from_millis(ttl_ms.parse().context("the TTL in ms")?);
    let server = std::env::var(SERVER_ENV).with_context(|| format!("{SERVER_ENV} is not set"))?;
    let lease = engine(kind, &server, ttl).acquire(
        name,
        LeaseRequest::new()
            .ttl(ttl)
            .wait(Wait::Until(Instant::now() + 10 * ttl)),
    )?;
    println!("held {}", lease.fencing_token());
    loop {
        std::thread::park();
    }
}

/// One engine's takeover times, in nanoseconds from the SIGKILL.
#[derive(Debug, Default)]
pub(crate) struct Takeovers {
    pub(crate) postgres: Vec<f64>,
    pub(crate) etcd: Vec<f64>,
    pub(crate) redis: Vec<f64>,
}

impl Takeovers {
    pub(crate) fn of(&self, kind: Kind) -> &Vec<f64> {
        match kind {
            Kind::Postgres => &self.postgres,
            Kind::Etcd => &self.etcd,
            Kind::Redis => &self.redis,
        }
    }
}

/// `runs` takeovers per engine, the engines alternating in a shuffled order.
pub(crate) fn measure(
    servers: &Servers,
    exe: &std::path::Path,
    ttl: Duration,
    runs: usize,
    rng: &mut Rng,
) -> Result<Takeovers> {
    let mut out = Takeovers::default();
    for run in 0..runs {
        let mut kinds = Kind::ALL;
        rng.shuffle(&mut kinds);
        for kind in kinds {
            let server = servers.of(kind, false);
            eprintln!("  takeover {} {}/{runs}", kind.name(), run + 1);
            let took = once(kind, server, exe, ttl, rng)?;
            match kind {
                Kind::Postgres => out.postgres.push(took),
                Kind::Etcd => out.etcd.push(took),
                Kind::Redis => out.redis.push(took),
            }
        }
    }
    Ok(out)
}

/// Kills the holder child when dropped (on an error path).
struct Holder(Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn once(
    kind: Kind,
    server: &str,
    exe: &std::path::Path,
    ttl: Duration,
    rng: &mut Rng,
) -> Result<f64> {
    let name = format!("bench-takeover-{}", kind.name());
    let granted = kind.granted(ttl);
    let mut holder = Holder(
        Command::new(exe)
            .args(["--child", "holder", kind.name(), &name])
            .arg(ttl.as_millis().to_string())
            .env(SERVER_ENV, server)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start a holder ({})", exe.display()))?,
    );
    let stdout = holder.0.stdout.take().context("the holder's stdout")?;
    let (line_tx, line_rx) = channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = line_tx.send(line);
    });
    // The previous run's contender released: the holder gets it at once.
    match line_rx.recv_timeout(granted * 3 + Duration::from_secs(10)) {
        Ok(line) if line.starts_with("held ") => {}
        Ok(_) => bail!("the {} holder exited without the lease", kind.name()),
        Err(_) => bail!("the {} holder did not get the lease", kind.name()),
    }
    let contender = engine(kind, server, ttl);
    let (done_tx, done_rx) = channel();
    let waiter = std::thread::spawn(move || {
        let mut request = LeaseRequest::new();
        request.ttl(ttl).wait(Wait::Until(
            Instant::now() + 3 * granted + Duration::from_secs(10),
        ));
        let lease = contender.acquire(&name, &request);
        let at = Instant::now();
        let _ = done_tx.send(at);
        lease.and_then(|l| l.release())
    });
    // Kill at a random moment of the holder's renewal cycle, once the
    // contender is waiting.
    let third = u64::try_from((granted / 3).as_micros()).unwrap_or(u64::MAX);
    let pause = Duration::from_millis(200) + Duration::from_micros(rng.below(third));
    match done_rx.recv_timeout(pause) {
        Err(RecvTimeoutError::Timeout) => {}
        _ => {
            let outcome = waiter.join();
            bail!("the contender did not wait for the live holder: {outcome:?}");
        }
    }
    let killed_at = Instant::now();
    holder.0.kill().context("cannot SIGKILL the holder")?;
    let _ = holder.0.wait();
    let acquired_at = done_rx
        .recv()
        .context("the contender ended without an answer")?;
    match waiter.join() {
        Ok(Ok(released)) if !released.was_lost() => {}
        Ok(Ok(released)) => bail!("the {} contender lost its lease: {released:?}", kind.name()),
        Ok(Err(e)) => bail!("the {} contender failed: {e}", kind.name()),
        Err(_) => bail!("the {} contender panicked", kind.name()),
    }
    Ok(acquired_at.saturating_duration_since(killed_at).as_nanos() as f64)
}
