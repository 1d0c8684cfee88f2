//! A service process: this test binary run again as `child::service`,
//! with its role in the environment, printing each event as `@@EVENT`.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lockfile_examples::FencedStore;
use lockfile_examples::service::{Service, Store, engine_for, serve};
use lockfile_lease::LeaseRequest;
use lockfile_lease::leader::Election;
use lockfile_test_support::marked::Marked;
use serde::{Deserialize, Serialize};

const ROLE_ENV: &str = "LOCKFILE_TEST_SERVICE";
const ENTRY: &str = "child::service";

/// What a service process is to do.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Role {
    pub(crate) url: String,
    pub(crate) name: String,
    /// A file for the file-backed store, or `postgres`.
    pub(crate) store: String,
    pub(crate) ttl_ms: u64,
    pub(crate) every_ms: u64,
    pub(crate) obey: bool,
    /// Just before the first term's write number N (after its term was
    /// checked, before the store sees it), say `pausing` and wait for the
    /// file `go` beside the store, for the test to stop the process there.
    pub(crate) pause_at: Option<u64>,
    pub(crate) go: String,
}

/// The service process's body; a no-op when run as a test.
#[test]
fn service() {
    let Ok(role) = std::env::var(ROLE_ENV) else {
        return;
    };
    let role: Role = serde_json::from_str(&role).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let result = runtime.block_on(async {
        let engine = engine_for(&role.url, Duration::from_millis(role.ttl_ms)).unwrap();
        let mut election = Election::new(engine, role.name.as_str());
        election
            .request(LeaseRequest::new().job("service").clone())
            .backoff(Duration::from_millis(50), Duration::from_millis(500));
        let store = match role.store.as_str() {
            "postgres" => Store::Postgres {
                url: role.url.clone(),
                fence: role.name.clone(),
            },
            path => Store::File(FencedStore::new(path)),
        };
        let service = Service {
            id: format!("pid-{}", std::process::id()),
            every: Duration::from_millis(role.every_ms),
            obey: role.obey,
        };
        let paused = Arc::new(AtomicBool::new(false));
        let pause_at = role.pause_at;
        let go = role.go.clone();
        serve(
            &election,
            Arc::new(store),
            &service,
            Arc::new(|event| println!("@@{event}")),
            Arc::new(move |token, n| {
                if Some(n) == pause_at && !paused.swap(true, Ordering::SeqCst) {
                    println!("@@pausing {token} {n}");
                    // The test stops this process (SIGSTOP) while it waits
                    // here, and lets it go once the next leader has written.
                    while !std::path::Path::new(&go).exists() {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    println!("@@resumed {token} {n}");
                }
            }),
        )
        .await
    });
    println!("@@fatal {result:?}");
    std::process::exit(1);
}

/// A service process, killed when dropped.
pub(crate) fn spawn(role: &Role) -> Marked {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([ENTRY, "--exact", "--nocapture", "--test-threads=1", "-q"])
        .env(ROLE_ENV, serde_json::to_string(role).unwrap());
    Marked::spawn(command, &["fatal", "failed"])
}

/// The token in an event line such as `elected 7` or `wrote 7 1`.
pub(crate) fn token(line: &str) -> u64 {
    line.split(' ').nth(1).unwrap().parse().unwrap()
}
