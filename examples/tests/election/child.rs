//! A service process: this test binary run again as `child::service`,
//! with its role in the environment, printing each event as `@@EVENT`.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use lockfile_examples::FencedStore;
use lockfile_examples::service::{Service, Store, engine_for, serve};
use lockfile_lease::LeaseRequest;
use lockfile_lease::leader::Election;
use rustix::process::{Pid, Signal};
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
pub(crate) struct Running {
    child: Child,
    lines: Receiver<String>,
    pub(crate) seen: Vec<String>,
}

impl Running {
    pub(crate) fn spawn(role: &Role) -> Running {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([ENTRY, "--exact", "--nocapture", "--test-threads=1", "-q"])
            .env(ROLE_ENV, serde_json::to_string(role).unwrap())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a service process");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(line) = line.strip_prefix("@@")
                    && tx.send(line.to_owned()).is_err()
                {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    pub(crate) fn pid(&self) -> Pid {
        Pid::from_child(&self.child)
    }

    /// The next line, kept in `seen`.
    pub(crate) fn next(&mut self) -> String {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("no line from the service ({e}); seen: {:#?}", self.seen));
        self.seen.push(line.clone());
        assert!(
            !line.starts_with("fatal") && !line.starts_with("failed"),
            "{line}; seen: {:#?}",
            self.seen
        );
        line
    }

    /// The next line starting with `what`, keeping every line seen.
    pub(crate) fn expect(&mut self, what: &str) -> String {
        loop {
            let line = self.next();
            if line.starts_with(what) {
                return line;
            }
        }
    }

    /// The lines that came so far, without waiting.
    pub(crate) fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
    }

    pub(crate) fn signal(&self, signal: Signal) {
        rustix::process::kill_process(self.pid(), signal).unwrap();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The token in an event line such as `elected 7` or `wrote 7 1`.
pub(crate) fn token(line: &str) -> u64 {
    line.split(' ').nth(1).unwrap().parse().unwrap()
}
