//! Holder processes: the test binary runs itself again as a lease holder, so
//! that tests can kill, stop and continue a real process.
//!
//! The child reports what it does as JSON lines on stdout, prefixed `@@`,
//! with times on the system-wide monotonic clock so that the parent can
//! order them against its own actions.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use lockfile_etcd::{LeaseOptions, LostReason, Step};
use lockfile_examples::{FencedStore, StoreError};
use rustix::process::{Pid, Signal, kill_process};
use serde::{Deserialize, Serialize};

use super::{mono_ns, to_mono};

const ROLE_ENV: &str = "LOCKFILE_ETCD_TEST_ROLE";
const PREFIX: &str = "@@";

/// What a holder process does.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Role {
    pub endpoint: String,
    pub name: String,
    pub ttl_ms: u64,
    pub request_timeout_ms: Option<u64>,
    /// Bound on each blocking acquire; none: wait as long as it takes.
    pub acquire_timeout_ms: Option<u64>,
    /// A fenced store to write to while holding.
    pub store: Option<PathBuf>,
    pub write_every_ms: u64,
    /// Release after holding this long; none: hold until lost or killed.
    pub hold_ms: Option<u64>,
    /// How many times to acquire, hold and release.
    pub rounds: u32,
    /// How long to keep the lost guard (and so its cleanup) before exiting.
    pub linger_after_lost_ms: u64,
    /// Run a supervisor thread with the default stop policy, reporting steps.
    pub supervise: bool,
}

impl Role {
    pub fn new(endpoint: &str, name: &str, ttl: Duration) -> Role {
        Role {
            endpoint: endpoint.to_owned(),
            name: name.to_owned(),
            ttl_ms: ttl.as_millis() as u64,
            request_timeout_ms: None,
            acquire_timeout_ms: Some(30_000),
            store: None,
            write_every_ms: 50,
            hold_ms: None,
            rounds: 1,
            linger_after_lost_ms: 0,
            supervise: false,
        }
    }
}

/// What a holder process reports. Times are monotonic nanoseconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Ev {
    Acquired {
        pid: u32,
        token: u64,
        acquired_at: i64,
        deadline: i64,
    },
    Write {
        token: u64,
        checked_at: i64,
        done_at: i64,
        accepted: bool,
    },
    Lost {
        token: u64,
        reason: String,
        deadline_passed: bool,
        lost_at: i64,
        deadline: i64,
        last_renewal: i64,
    },
    /// A tick while holding without a store.
    Held {
        at: i64,
        deadline: i64,
        last_renewal: i64,
        failed_renewals: u32,
    },
    /// The stop policy's step changed.
    Step {
        kind: String,
        at: i64,
        deadline: i64,
    },
    LateWrite {
        token: u64,
        accepted: bool,
        error: String,
    },
    Released {
        token: u64,
        error: Option<String>,
    },
    Failed {
        error: String,
    },
}

fn emit(ev: &Ev) {
    println!("{PREFIX}{}", serde_json::to_string(ev).unwrap());
}

fn ns(at: Instant) -> i64 {
    to_mono(at) as i64
}

/// In a child process started by [`Holder::spawn`], plays the role and exits.
/// Elsewhere, does nothing.
pub fn run_role_if_requested() {
    let Ok(config) = std::env::var(ROLE_ENV) else {
        return;
    };
    let role: Role = serde_json::from_str(&config).expect("a role");
    play(&role);
    std::process::exit(0);
}

fn play(role: &Role) {
    let mut opts = LeaseOptions::new();
    opts.endpoints([role.endpoint.clone()])
        .ttl(Duration::from_millis(role.ttl_ms))
        .job("fault-test-holder");
    if let Some(ms) = role.request_timeout_ms {
        opts.request_timeout(Duration::from_millis(ms));
    }
    if let Some(ms) = role.acquire_timeout_ms {
        opts.timeout(Duration::from_millis(ms));
    }
    let store = role.store.clone().map(FencedStore::new);
    let pid = std::process::id();
    for round in 0..role.rounds {
        let guard = match opts.acquire(&role.name) {
            Ok(guard) => guard,
            Err(e) => {
                emit(&Ev::Failed {
                    error: e.to_string(),
                });
                return;
            }
        };
        let token = guard.fencing_token();
        emit(&Ev::Acquired {
            pid,
            token,
            acquired_at: ns(guard.acquired_at()),
            deadline: ns(guard.deadline()),
        });
        if role.supervise {
            let signal = guard.signal();
            std::thread::spawn(move || {
                let policy = signal.default_policy();
                let mut last = String::new();
                loop {
                    let step = signal.wait_step(policy, Instant::now() + Duration::from_secs(1));
                    let kind = match step {
                        Step::Continue { .. } => "continue",
                        Step::Terminate { .. } => "terminate",
                        _ => "kill",
                    };
                    if kind != last {
                        emit(&Ev::Step {
                            kind: kind.to_owned(),
                            at: mono_ns() as i64,
                            deadline: ns(signal.deadline()),
                        });
                        last = kind.to_owned();
                    }
                    if kind == "kill" {
                        return;
                    }
                }
            });
        }
        let held_since = Instant::now();
        let mut i = 0;
        loop {
            let checked_at = mono_ns() as i64;
            if let Err(e) = guard.check() {
                let signal = guard.signal();
                emit(&Ev::Lost {
                    token,
                    reason: e.to_string(),
                    deadline_passed: matches!(
                        e.lost_reason(),
                        Some(LostReason::DeadlinePassed { .. })
                    ),
                    lost_at: ns(signal.lost_at().expect("lost")),
                    deadline: ns(signal.deadline()),
                    last_renewal: ns(signal.last_renewal()),
                });
                if let Some(store) = &store {
                    // Deliberately write anyway: the resource must refuse.
                    let late = store.write(token, &format!("{pid}:{round}:late"));
                    emit(&Ev::LateWrite {
                        token,
                        accepted: late.is_ok(),
                        error: late.err().map(|e| e.to_string()).unwrap_or_default(),
                    });
                }
                std::thread::sleep(Duration::from_millis(role.linger_after_lost_ms));
                drop(guard);
                return;
            }
            if store.is_none() {
                let signal = guard.signal();
                emit(&Ev::Held {
                    at: checked_at,
                    deadline: ns(signal.deadline()),
                    last_renewal: ns(signal.last_renewal()),
                    failed_renewals: signal.failed_renewals(),
                });
            }
            if let Some(store) = &store {
                let written = store.write(token, &format!("{pid}:{round}:{i}"));
                emit(&Ev::Write {
                    token,
                    checked_at,
                    done_at: mono_ns() as i64,
                    accepted: written.is_ok(),
                });
                if let Err(e @ StoreError::Io { .. }) = written {
                    emit(&Ev::Failed {
                        error: e.to_string(),
                    });
                }
            }
            if role
                .hold_ms
                .is_some_and(|ms| held_since.elapsed() >= Duration::from_millis(ms))
            {
                let released = guard.release();
                emit(&Ev::Released {
                    token,
                    // A release after a loss is no error, but this role's
                    // section may have overlapped another holder's.
                    error: match released {
                        Ok(released) => released.loss().map(ToString::to_string),
                        Err(e) => Some(e.to_string()),
                    },
                });
                break;
            }
            std::thread::sleep(Duration::from_millis(role.write_every_ms));
            i += 1;
        }
    }
}

/// A holder process, killed when dropped.
pub struct Holder {
    child: Child,
    events: Receiver<Ev>,
    /// Every event received so far, for assertions and failure messages.
    pub seen: Vec<Ev>,
}

impl Holder {
    /// Runs `entry` (the name of the test that calls
    /// [`run_role_if_requested`]) of this test binary as a holder playing `role`.
    pub fn spawn(entry: &str, role: &Role) -> Holder {
        let mut child = Command::new(std::env::current_exe().expect("the test binary"))
            .args([entry, "--exact", "--nocapture", "--test-threads=1", "-q"])
            .env(ROLE_ENV, serde_json::to_string(role).unwrap())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a holder process");
        let stdout = child.stdout.take().expect("the holder's stdout");
        let (tx, events) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(json) = line.strip_prefix(PREFIX) {
                    let ev: Ev = serde_json::from_str(json).expect("a holder event");
                    if tx.send(ev).is_err() {
                        break;
                    }
                }
            }
        });
        Holder {
            child,
            events,
            seen: Vec::new(),
        }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_child(&self.child)
    }

    pub fn signal(&self, signal: Signal) {
        kill_process(self.pid(), signal).expect("signal the holder");
    }

    /// Waits up to `limit` for an event matching `want`, keeping every event
    /// in `seen`; panics with what was seen if none comes.
    pub fn expect(&mut self, limit: Duration, what: &str, want: impl Fn(&Ev) -> bool) -> Ev {
        let until = Instant::now() + limit;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(ev) => {
                    self.seen.push(ev.clone());
                    if let Ev::Failed { error } = &ev {
                        panic!("the holder failed: {error}; events: {:#?}", self.seen);
                    }
                    if want(&ev) {
                        return ev;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no {what} within {limit:?}; events: {:#?}", self.seen)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the holder exited before {what}; events: {:#?}", self.seen)
                }
            }
        }
    }

    pub fn acquired(&mut self, limit: Duration) -> (u64, i64) {
        match self.expect(limit, "acquisition", |e| matches!(e, Ev::Acquired { .. })) {
            Ev::Acquired {
                token, acquired_at, ..
            } => (token, acquired_at),
            _ => unreachable!(),
        }
    }

    /// Collects events until the process exits (or `limit` passes).
    pub fn drain(&mut self, limit: Duration) {
        let until = Instant::now() + limit;
        while let Ok(ev) = self
            .events
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            self.seen.push(ev);
        }
    }

    pub fn kill(&mut self) {
        let _ = kill_process(self.pid(), Signal::CONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn wait(&mut self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.kill();
    }
}
