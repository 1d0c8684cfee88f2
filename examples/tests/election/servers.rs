//! The three engines' servers, each a real one of the test's own, and how
//! each goes silent: etcd and Redis stopped (SIGSTOP); PostgreSQL behind a
//! proxy turned black hole, since stopping its postmaster leaves the
//! backends that serve the open connections running.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lockfile_examples::service::engine_for;
use lockfile_examples::{FencedStore, FencedWrite};
use lockfile_lease::Engine;
use lockfile_test_support::postgres::{PASSWORD, USER};
use lockfile_test_support::{Etcd, Postgres, Proxy, Redis};

pub(crate) enum Server {
    Etcd(Etcd),
    Redis(Redis),
    // The server, kept running behind its proxy.
    Postgres(#[allow(dead_code)] Postgres, Proxy),
}

impl Server {
    pub(crate) fn etcd() -> Server {
        Server::Etcd(Etcd::start_until(|endpoint| {
            let mut probe = lockfile_etcd::LeaseOptions::new();
            probe
                .endpoints([endpoint])
                .request_timeout(Duration::from_millis(500));
            probe.inspect("ready-probe").is_ok()
        }))
    }

    pub(crate) fn redis() -> Server {
        Server::Redis(Redis::start())
    }

    /// With the schema (and its fence) made by `init`, reached through a
    /// proxy.
    pub(crate) fn postgres() -> Server {
        let pg = Postgres::start();
        lockfile_postgres::LeaseOptions::new(pg.url())
            .init(None)
            .expect("lockfile postgres init");
        let proxy = Proxy::start(&format!("127.0.0.1:{}", pg.port));
        Server::Postgres(pg, proxy)
    }

    pub(crate) fn url(&self) -> String {
        match self {
            Server::Etcd(etcd) => etcd.endpoint(),
            Server::Redis(redis) => redis.url(),
            Server::Postgres(_, proxy) => format!(
                "postgres://{USER}:{PASSWORD}@{}/postgres",
                proxy.endpoint().trim_start_matches("http://")
            ),
        }
    }

    pub(crate) fn engine(&self, ttl: Duration) -> Arc<dyn Engine> {
        engine_for(&self.url(), ttl).unwrap()
    }

    /// The store the services write through: PostgreSQL's own fence for
    /// its engine, the examples' file-backed store for the others (so that
    /// their suites need no PostgreSQL).
    pub(crate) fn fenced_store(&self, dir: &Path) -> String {
        match self {
            Server::Postgres(..) => "postgres".to_owned(),
            _ => dir.join("store.json").to_str().unwrap().to_owned(),
        }
    }

    /// The writes a file-backed store accepted, in order.
    pub(crate) fn file_history(&self, store: &str) -> Option<Vec<FencedWrite>> {
        (store != "postgres").then(|| FencedStore::new(store).history().unwrap())
    }

    /// From now on the server answers nothing, and closes nothing.
    pub(crate) fn silence(&self) {
        match self {
            Server::Etcd(etcd) => etcd.pause(),
            Server::Redis(redis) => redis.pause(),
            Server::Postgres(_, proxy) => proxy.blackhole(),
        }
    }
}
