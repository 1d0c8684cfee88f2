//! The printed report: one Markdown table per figure.

use std::time::Duration;

use anyhow::{Context, Result};
use lockfile_bench::format::{ratio, time, uname};
use lockfile_bench::markdown::Markdown;
use lockfile_bench::stats::{Results, median, percentile};

use crate::args::Size;
use crate::load::Load;
use crate::roundtrips::redis as rd;
use crate::roundtrips::{Path, etcd, pg};
use crate::servers::{Servers, redact};
use crate::takeover::{Kind, Takeovers};
use crate::wakeup::Wakeups;

/// The servers' versions, for the machine line.
#[derive(Debug)]
pub(crate) struct Versions {
    postgres: String,
    etcd: String,
    redis: String,
}

impl Versions {
    pub(crate) fn read(servers: &Servers) -> Result<Versions> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            let (client, connection) =
                tokio_postgres::connect(&servers.postgres_url, tokio_postgres::NoTls)
                    .await
                    .with_context(|| {
                        format!("cannot connect to {}", redact(&servers.postgres_url))
                    })?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            let postgres: String = client.query_one("SHOW server_version", &[]).await?.get(0);
            let mut etcd = etcd_client::Client::connect([&servers.etcd_endpoint], None)
                .await
                .with_context(|| format!("cannot connect to etcd at {}", servers.etcd_endpoint))?;
            let etcd = etcd.status().await?.version().to_owned();
            let mut c = redis::Client::open(servers.redis_url.as_str())?
                .get_multiplexed_async_connection()
                .await
                .with_context(|| format!("cannot connect to {}", redact(&servers.redis_url)))?;
            let info: String = redis::cmd("INFO").arg("server").query_async(&mut c).await?;
            let redis = info
                .lines()
                .find_map(|l| l.strip_prefix("redis_version:"))
                .unwrap_or("(unknown version)")
                .trim()
                .to_owned();
            Ok(Versions {
                postgres,
                etcd,
                redis,
            })
        })
    }
}

#[derive(Debug)]
pub(crate) struct Report {
    out: Markdown,
}

/// The text and its verdicts are the shared report's.
impl std::ops::Deref for Report {
    type Target = Markdown;

    fn deref(&self) -> &Markdown {
        &self.out
    }
}

impl std::ops::DerefMut for Report {
    fn deref_mut(&mut self) -> &mut Markdown {
        &mut self.out
    }
}

impl Report {
    pub(crate) fn new(quick: bool, size: &Size, seed: u64, v: &Versions) -> Report {
        let mode = if quick { "--quick" } else { "full" };
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let mut r = Report {
            out: Markdown::default(),
        };
        r.line(&format!(
            "# lockfile leases ({mode}): {} measured rounds after 1 warm-up round, {} operations per variant per round, variants shuffled in every round (seed {seed})\n",
            size.rounds, size.batch
        ));
        r.line(&format!(
            "Machine: {cpus} CPUs, {}; PostgreSQL {} (fsync off) and PgBouncer on loopback, etcd {} (one member) on loopback, Redis {} (no persistence) on loopback, all on this machine.\n",
            uname(),
            v.postgres,
            v.etcd,
            v.redis
        ));
        r.line("Medians over rounds; \"× floor\" is the median over rounds of (variant / floor of the same round); p99 over every sample of every round.\n");
        r
    }

    pub(crate) fn roundtrips(&mut self, r: &Results) {
        self.line("## Acquire + release against the raw round trips of the same statements\n");
        self.line("| server | variant | median | p99 | × floor, one connection | × floor, connect + statements | target | verdict |");
        self.line("|---|---|---:|---:|---:|---:|---|---|");
        for path in Path::ALL {
            let same = pg::key(path, pg::FLOOR_SAME);
            let fresh = pg::key(path, pg::FLOOR_CONNECT);
            for row in [
                pg::FLOOR_SAME,
                pg::CONNECT,
                pg::CONNECT_TRUST,
                pg::FLOOR_CONNECT,
                pg::ENGINE,
            ] {
                let key = pg::key(path, row);
                if !r.has(&key) {
                    continue;
                }
                let (target, v) = if row == pg::ENGINE {
                    let x = r.ratio(&key, &same);
                    let v = self.judge(
                        format!(
                            "{}: acquire + release ≤ 1.2× the raw statements",
                            path.label()
                        ),
                        x,
                        1.2,
                    );
                    ("≤ 1.2× one connection", v)
                } else {
                    ("", "")
                };
                self.line(&format!(
                    "| {} | {row} | {} | {} | {} | {} | {target} | {v} |",
                    path.label(),
                    time(r.median(&key)),
                    time(r.sample_percentile(&key, 99.0)),
                    ratio(r.ratio(&key, &same)),
                    ratio(r.ratio(&key, &fresh)),
                ));
            }
        }
        let same = etcd::key(etcd::FLOOR_SAME);
        let fresh = etcd::key(etcd::FLOOR_CONNECT);
        for row in [
            etcd::FLOOR_SAME,
            etcd::CONNECT,
            etcd::FLOOR_CONNECT,
            etcd::REPLICA,
            etcd::ENGINE,
        ] {
            let key = etcd::key(row);
            let (target, v) = if row == etcd::ENGINE {
                let x = r.ratio(&key, &same);
                let v = self.judge("etcd: acquire + release ≤ 1.2× the raw requests", x, 1.2);
                ("≤ 1.2× one connection", v)
            } else {
                ("", "")
            };
            self.line(&format!(
                "| etcd | {row} | {} | {} | {} | {} | {target} | {v} |",
                time(r.median(&key)),
                time(r.sample_percentile(&key, 99.0)),
                ratio(r.ratio(&key, &same)),
                ratio(r.ratio(&key, &fresh)),
            ));
        }
        let same = rd::key(rd::FLOOR_SAME);
        let fresh = rd::key(rd::FLOOR_CONNECT);
        for row in [
            rd::FLOOR_SAME,
            rd::CONNECT,
            rd::CHECK,
            rd::FLOOR_CONNECT,
            rd::REPLICA,
            rd::ENGINE,
        ] {
            let key = rd::key(row);
            self.line(&format!(
                "| Redis | {row} | {} | {} | {} | {} |  |  |",
                time(r.median(&key)),
                time(r.sample_percentile(&key, 99.0)),
                ratio(r.ratio(&key, &same)),
                ratio(r.ratio(&key, &fresh)),
            ));
        }

        self.line("\n## The renewal against a trivial round trip\n");
        self.line("| server | variant | median | p99 | × floor |");
        self.line("|---|---|---:|---:|---:|");
        for path in Path::ALL {
            let floor = pg::key(path, pg::SELECT1);
            for row in [pg::SELECT1, pg::RENEW, pg::RENEW_ASYNC] {
                let key = pg::key(path, row);
                self.line(&format!(
                    "| {} | {row} | {} | {} | {} |",
                    path.label(),
                    time(r.median(&key)),
                    time(r.sample_percentile(&key, 99.0)),
                    ratio(r.ratio(&key, &floor)),
                ));
            }
        }
        let floor = etcd::key(etcd::RANGE);
        for row in [etcd::RANGE, etcd::KEEPALIVE] {
            let key = etcd::key(row);
            self.line(&format!(
                "| etcd | {row} | {} | {} | {} |",
                time(r.median(&key)),
                time(r.sample_percentile(&key, 99.0)),
                ratio(r.ratio(&key, &floor)),
            ));
        }
        let floor = rd::key(rd::PING);
        for row in [rd::PING, rd::RENEW] {
            let key = rd::key(row);
            self.line(&format!(
                "| Redis | {row} | {} | {} | {} |",
                time(r.median(&key)),
                time(r.sample_percentile(&key, 99.0)),
                ratio(r.ratio(&key, &floor)),
            ));
        }
        self.line("");
    }

    pub(crate) fn takeovers(&mut self, t: &Takeovers, asked: Duration) {
        self.line("## Takeover after the holder's SIGKILL: a waiting contender's acquire, timed from the kill\n");
        self.line("| engine | TTL | renewal interval | contender notices within | runs | median | max | median × TTL | max × TTL | max × (TTL + notice) |");
        self.line("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for kind in Kind::ALL {
            let samples = t.of(kind);
            let ttl = kind.granted(asked);
            let notice = kind.notice_within(ttl);
            let ttl_ns = ttl.as_nanos() as f64;
            let bound = (ttl + notice).as_nanos() as f64;
            let max = samples.iter().copied().fold(f64::NAN, f64::max);
            self.line(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                kind.name(),
                time(ttl_ns),
                time((ttl / 3).as_nanos() as f64),
                time(notice.as_nanos() as f64),
                samples.len(),
                time(median(samples)),
                time(max),
                ratio(median(samples) / ttl_ns),
                ratio(max / ttl_ns),
                ratio(max / bound),
            ));
        }
        self.line("\nThe holder renews every third of the TTL and is killed at a random moment of that cycle, so its lease expires between TTL − interval and TTL after the kill; the contender then notices within its notice time (PostgreSQL and Redis wake sooner, at the expiry the holder's row or key announced) and takes it with the acquire's own round trips (etcd's expiry also goes through its log before the watch tells the contender).\n");
    }

    pub(crate) fn loads(&mut self, loads: &[Load], cpu: bool) {
        let Some(first) = loads.first() else { return };
        self.line(&format!(
            "## {} held leases renewing against one server (PostgreSQL through PgBouncer, transaction pooling; etcd; Redis)\n",
            first.leases
        ));
        self.line("| engine | leases | TTL | renewals seen | renewal median | renewal p99 | renewal max | probe median | probe p99 | renewal p99 × probe p99 | poller lateness p99 | failing / lost at the end | took to acquire all |");
        self.line("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|");
        for l in loads {
            let p99 = percentile(&l.renewals, 99.0);
            let probe99 = percentile(&l.probe, 99.0);
            self.line(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} |",
                l.kind.name(),
                l.leases,
                time(l.ttl.as_nanos() as f64),
                l.renewals.len(),
                time(median(&l.renewals)),
                time(p99),
                time(l.renewals.iter().copied().fold(f64::NAN, f64::max)),
                time(median(&l.probe)),
                time(probe99),
                ratio(p99 / probe99),
                time(percentile(&l.poll_late, 99.0)),
                l.failing,
                l.lost,
                time(l.acquire_took.as_nanos() as f64),
            ));
        }
        self.line(&format!(
            "\nProbe: `SELECT 1` through PgBouncer, a range read of one etcd key, or a Redis `PING`, every 10 ms on a connection of its own over the same {} window.\n",
            time(first.window.as_nanos() as f64)
        ));
        if !cpu {
            self.line("CPU: not measured (the servers were given, not started here).\n");
            return;
        }
        self.line("| engine | PostgreSQL CPU, idle | PostgreSQL CPU, loaded | PgBouncer CPU, loaded | etcd CPU, idle | etcd CPU, loaded | Redis CPU, idle | Redis CPU, loaded | this program's CPU (lease threads, poller, probe) |");
        self.line("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for l in loads {
            let pct = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.1}%"));
            self.line(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                l.kind.name(),
                pct(l.idle.map(|c| c.postgres)),
                pct(l.loaded.map(|c| c.postgres)),
                pct(l.loaded.map(|c| c.bouncer)),
                pct(l.idle.map(|c| c.etcd)),
                pct(l.loaded.map(|c| c.etcd)),
                pct(l.idle.map(|c| c.redis)),
                pct(l.loaded.map(|c| c.redis)),
                pct(l.loaded.map(|c| c.ours)),
            ));
        }
        self.line("\nCPU as % of one core over the window (user + system from /proc/PID/stat; PostgreSQL: the postmaster, its children and its reaped children). Idle: the same servers, no lease held, up to 5 s before the leases are taken.\n");
    }

    pub(crate) fn wakeups(&mut self, w: &Wakeups) {
        self.line(&format!(
            "## Redis: a waiting acquire's wake-up after the holder's release ({} measured rounds, one sample of every variant each)\n",
            w.rounds
        ));
        self.line(&format!(
            "Lag: from the holder calling `release()` to the waiter's `acquire()` returning (the release script's PUBLISH falls in between). Floor: the median round trip of `PING`, in the same round: median {}.\n",
            time(median(&w.floors) * 1e9)
        ));
        self.line(
            "| variant | median | p90 | p95 | max | median × floor | `release()` itself, median |",
        );
        self.line("|---|---:|---:|---:|---:|---:|---:|");
        for s in &w.samples {
            let ns = |v: f64| time(v * 1e9);
            self.line(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                s.variant.label(),
                ns(median(&s.lags)),
                ns(percentile(&s.lags, 90.0)),
                ns(percentile(&s.lags, 95.0)),
                ns(s.lags.iter().copied().fold(0.0, f64::max)),
                ratio(median(&s.ratios)),
                ns(median(&s.releases)),
            ));
        }
        self.line("");
    }

    pub(crate) fn slot_wakeups(&mut self, lags: &[crate::slot_wakeup::SlotLags]) {
        self.line(&format!(
            "## `--slots` under a lease: a waiter for any of 3 slots, after one holder's release ({} samples per engine)\n",
            lags.first().map_or(0, |l| l.slots.len())
        ));
        self.line(
            "Lag: from the holder calling `release()` to the waiter's acquire returning. Floor: a waiter on one plain lease of the same engine, woken its own way, in the same run. The slot waiter waits on one slot at a time (in turn) for at most the poll interval (1 s here), so a release of another slot waits for the next round.\n",
        );
        self.line("| engine | plain lease, median | slots, median | slots, p90 | slots, max | median × floor |");
        self.line("|---|---:|---:|---:|---:|---:|");
        for l in lags {
            let ns = |v: f64| time(v * 1e9);
            let (plain, slots) = (median(&l.plain), median(&l.slots));
            self.line(&format!(
                "| {} | {} | {} | {} | {} | {} |",
                l.kind.name(),
                ns(plain),
                ns(slots),
                ns(percentile(&l.slots, 90.0)),
                ns(l.slots.iter().copied().fold(0.0, f64::max)),
                ratio(slots / plain),
            ));
        }
        self.line("");
    }

    pub(crate) fn finish(&mut self, took: Duration) {
        self.targets(took);
    }
}
