//! The lease layer's guard against an engine made of nothing but its server
//! operations, kept in memory: what the layer decides (when to renew, when
//! the lease is lost, the clean-up, the release, the history) whatever the
//! server.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use lockfile::history::{LastRun, Outcome, RunEnd};
use lockfile::wait::Wait;
use lockfile_lease::acquiring::Attempt;
use lockfile_lease::error::LostReason;
use lockfile_lease::ops::{Granted, LeaseOps, Released, Run, Vocabulary, stored_record};
use lockfile_lease::{Error, LeaseGuard, LeaseRequest, Result};

const TTL: Duration = Duration::from_millis(600);

/// What the fake server answers, and what it was asked.
#[derive(Default)]
struct Server {
    /// The holder's token while someone else holds the lease.
    held_by: Option<u64>,
    /// Whether renewals are answered that the lease is gone.
    expired: bool,
    next_token: u64,
    attempts: u32,
    renewals: u32,
    releases: Vec<u64>,
    runs: Vec<(u64, Outcome)>,
}

struct Fake(Arc<Mutex<Server>>);

impl LeaseOps for Fake {
    type Held = u64;
    type Seen = ();
    const KIND: &'static str = "fake";
    const VOCABULARY: Vocabulary = Vocabulary::new(false, false);

    fn key(&self) -> &str {
        "fake/locks/job"
    }

    fn history_key(&self) -> &str {
        "fake/history/job"
    }

    fn request_timeout(&self) -> Duration {
        Duration::from_secs(1)
    }

    async fn attempt(
        &mut self,
        request: &LeaseRequest,
        _until: Option<Instant>,
    ) -> Result<Attempt<Granted<u64>, ()>> {
        let granted_at = Instant::now();
        let mut server = self.0.lock().unwrap();
        server.attempts += 1;
        if let Some(holder) = server.held_by {
            return Ok(Attempt::Contended {
                owner: None,
                fencing_token: holder,
                seen: (),
            });
        }
        server.next_token += 1;
        let token = server.next_token;
        let (_, record) = stored_record(request, TTL);
        Ok(Attempt::Acquired(Box::new(Granted::new(
            token, TTL, record, granted_at, token,
        ))))
    }

    async fn wait(&mut self, _seen: Option<()>, until: Option<Instant>) -> Result<bool> {
        tokio::time::sleep(Duration::from_millis(20)).await;
        // The holder lets go while we wait.
        self.0.lock().unwrap().held_by = None;
        Ok(until.is_none_or(|u| Instant::now() < u))
    }

    async fn renew(&mut self, _held: &mut u64, _within: Duration) -> Result<Option<Duration>> {
        let mut server = self.0.lock().unwrap();
        server.renewals += 1;
        Ok((!server.expired).then_some(TTL))
    }

    async fn release(&mut self, held: &mut u64, _until: Instant) -> Result<Released> {
        self.0.lock().unwrap().releases.push(*held);
        Ok(Released::new(true, Ok(())))
    }

    fn record(
        &self,
        run: Run,
        _until: Instant,
    ) -> impl Future<Output = Result<LastRun>> + Send + 'static {
        let server = Arc::clone(&self.0);
        async move {
            server
                .lock()
                .unwrap()
                .runs
                .push((run.fencing_token, run.end.outcome));
            Ok(LastRun::finished(None, run.end))
        }
    }
}

fn server() -> Arc<Mutex<Server>> {
    Arc::new(Mutex::new(Server::default()))
}

fn end(outcome: Outcome) -> RunEnd {
    RunEnd {
        outcome,
        exit_code: Some(0),
        signal: None,
        started_at: SystemTime::now(),
    }
}

#[test]
fn a_held_lease_is_renewed_its_run_recorded_and_released_through_the_engine() {
    let server = server();
    let guard = LeaseGuard::acquire(
        "job",
        Fake(Arc::clone(&server)),
        LeaseRequest::new().job("nightly"),
    )
    .unwrap();
    assert_eq!(guard.fencing_token(), 1);
    assert_eq!(guard.ttl(), TTL);
    assert_eq!(guard.record().job.as_deref(), Some("nightly"));
    let first = guard.deadline();
    // Three TTLs: held all along, by renewals every third of it.
    std::thread::sleep(TTL * 3);
    guard.check().unwrap();
    assert!(guard.deadline() > first + TTL);
    assert!(server.lock().unwrap().renewals >= 3);
    let run = guard.record_outcome(end(Outcome::Succeeded)).unwrap();
    assert_eq!(run.outcome, Outcome::Succeeded);
    let signal = guard.signal();
    assert!(!guard.release().unwrap().was_lost());
    let server = server.lock().unwrap();
    assert_eq!(server.runs, [(1, Outcome::Succeeded)]);
    assert_eq!(server.releases, [1]);
    assert_eq!(signal.lost_reason(), Some(LostReason::Released));
}

#[test]
fn a_held_lease_is_refused_without_a_wait_and_taken_after_one() {
    let server = server();
    server.lock().unwrap().held_by = Some(7);
    let err =
        LeaseGuard::acquire("job", Fake(Arc::clone(&server)), &LeaseRequest::new()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Contended {
                fencing_token: 7,
                ..
            }
        ),
        "{err}"
    );
    let mut waiting = LeaseRequest::new();
    waiting.wait(Wait::up_to(Some(Duration::from_secs(5))));
    let guard = LeaseGuard::acquire("job", Fake(Arc::clone(&server)), &waiting).unwrap();
    assert_eq!(server.lock().unwrap().attempts, 3);
    drop(guard);
    // Dropping releases too.
    assert_eq!(server.lock().unwrap().releases.len(), 1);
}

#[test]
fn a_lease_the_server_no_longer_has_is_lost_let_go_and_its_release_says_so() {
    let server = server();
    let guard =
        LeaseGuard::acquire("job", Fake(Arc::clone(&server)), &LeaseRequest::new()).unwrap();
    server.lock().unwrap().expired = true;
    let reason = guard.wait_lost(TTL * 3).expect("lost");
    assert_eq!(reason, LostReason::Expired);
    // Renewals stopped, and the clean-up let the lease go at once.
    let renewals = server.lock().unwrap().renewals;
    std::thread::sleep(TTL);
    let after = server.lock().unwrap();
    assert_eq!(after.renewals, renewals);
    assert_eq!(after.releases, [1]);
    drop(after);
    // A run under a lost lease is still recorded.
    guard.record_outcome(end(Outcome::LeaseLost)).unwrap();
    let released = guard.release().unwrap();
    assert!(released.was_lost(), "{released:?}");
    // Cleaned up already: the release asked nothing more.
    assert_eq!(server.lock().unwrap().releases, [1]);
}

#[test]
fn a_lease_whose_renewals_go_unanswered_is_lost_at_its_deadline() {
    struct Silent(Fake);
    impl LeaseOps for Silent {
        type Held = u64;
        type Seen = ();
        const KIND: &'static str = "silent";
        const VOCABULARY: Vocabulary = Vocabulary::new(true, true);
        fn key(&self) -> &str {
            self.0.key()
        }
        fn history_key(&self) -> &str {
            self.0.history_key()
        }
        fn request_timeout(&self) -> Duration {
            self.0.request_timeout()
        }
        async fn attempt(
            &mut self,
            request: &LeaseRequest,
            until: Option<Instant>,
        ) -> Result<Attempt<Granted<u64>, ()>> {
            self.0.attempt(request, until).await
        }
        async fn wait(&mut self, seen: Option<()>, until: Option<Instant>) -> Result<bool> {
            self.0.wait(seen, until).await
        }
        async fn renew(&mut self, _: &mut u64, within: Duration) -> Result<Option<Duration>> {
            // Never answered in time.
            tokio::time::sleep(within).await;
            Err(Error::Unanswered {
                engine: "silent",
                op: lockfile_lease::error::Operation::Renew,
                key: self.key().to_owned(),
                server: "nowhere".to_owned(),
                after: within,
            })
        }
        async fn release(&mut self, held: &mut u64, until: Instant) -> Result<Released> {
            self.0.release(held, until).await
        }
        fn record(
            &self,
            run: Run,
            until: Instant,
        ) -> impl Future<Output = Result<LastRun>> + Send + 'static {
            self.0.record(run, until)
        }
    }
    let granted_before = Instant::now();
    let guard = LeaseGuard::acquire("job", Silent(Fake(server())), &LeaseRequest::new()).unwrap();
    // Never later than the grant's send time plus the TTL.
    assert!(guard.deadline() <= Instant::now() + TTL);
    assert!(guard.deadline() >= granted_before + TTL);
    let reason = guard.wait_lost(TTL * 3).expect("lost");
    assert!(
        matches!(reason, LostReason::DeadlinePassed { .. }),
        "{reason}"
    );
    assert!(guard.signal().failed_renewals() >= 1);
    assert!(guard.release().unwrap().was_lost());
}

#[test]
fn an_engine_kind_names_its_lease_thread() {
    let server = server();
    let seen = Arc::new(Mutex::new(None::<String>));
    struct Named(Fake, Arc<Mutex<Option<String>>>);
    impl LeaseOps for Named {
        type Held = u64;
        type Seen = ();
        const KIND: &'static str = "fake";
        const VOCABULARY: Vocabulary = Vocabulary::new(false, false);
        fn key(&self) -> &str {
            self.0.key()
        }
        fn history_key(&self) -> &str {
            self.0.history_key()
        }
        fn request_timeout(&self) -> Duration {
            self.0.request_timeout()
        }
        async fn attempt(
            &mut self,
            request: &LeaseRequest,
            until: Option<Instant>,
        ) -> Result<Attempt<Granted<u64>, ()>> {
            *self.1.lock().unwrap() = std::thread::current().name().map(str::to_owned);
            self.0.attempt(request, until).await
        }
        async fn wait(&mut self, seen: Option<()>, until: Option<Instant>) -> Result<bool> {
            self.0.wait(seen, until).await
        }
        async fn renew(&mut self, held: &mut u64, within: Duration) -> Result<Option<Duration>> {
            self.0.renew(held, within).await
        }
        async fn release(&mut self, held: &mut u64, until: Instant) -> Result<Released> {
            self.0.release(held, until).await
        }
        fn record(
            &self,
            run: Run,
            until: Instant,
        ) -> impl Future<Output = Result<LastRun>> + Send + 'static {
            self.0.record(run, until)
        }
    }
    let guard = LeaseGuard::acquire(
        "job",
        Named(Fake(server), Arc::clone(&seen)),
        &LeaseRequest::new(),
    )
    .unwrap();
    assert!(!guard.release().unwrap().was_lost());
    assert_eq!(seen.lock().unwrap().as_deref(), Some("lockfile-fake"));
}
