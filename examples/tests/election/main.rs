//! Leader election on every engine, with real servers and real faults:
//! two services in two processes, a leader stopped past its TTL (its late
//! write refused by the fence on resume, and no second one), a leader whose
//! work ignores its term (stopped by the fence alone), a server gone silent
//! (the leader stops before its deadline); and, in this process, cancelled
//! acquisitions and a lease dropped inside a runtime.

mod child;
mod servers;

use std::path::Path;
use std::time::Duration;

use lockfile_examples::FencedStore;
use lockfile_lease::{LeaseRequest, Wait};
use lockfile_test_support::stopped::stopped;
use lockfile_test_support::wait_until;
use rustix::process::Signal;

use child::{Role, token};
use servers::Server;

const NAME: &str = "leader";
const TTL: Duration = Duration::from_secs(2);

fn role(server: &Server, dir: &Path, store: &str, obey: bool, pause_at: Option<u64>) -> Role {
    Role {
        go: dir.join("go").to_str().unwrap().to_owned(),
        url: server.url(),
        name: NAME.to_owned(),
        store: store.to_owned(),
        ttl_ms: TTL.as_millis() as u64,
        every_ms: 100,
        obey,
        pause_at,
    }
}

/// A leader stopped past its TTL just before a write: the other service is
/// elected with a larger token and writes; on resume, the old leader's
/// write is refused by the fence (the engine's own store: PostgreSQL's
/// `lockfile.fence`, else the file-backed one), and then: an obedient
/// leader steps down without a second write; a disobedient one (its writes
/// on a task that nothing stops) has every later write refused.
fn paused_leader(server: &Server, obey: bool) {
    let dir = tempfile::tempdir().unwrap();
    let store = server.fenced_store(dir.path());
    let mut old = child::spawn(&role(server, dir.path(), &store, obey, Some(3)));
    let old_token = token(&old.expect("elected"));
    let mut new = child::spawn(&role(server, dir.path(), &store, true, None));
    old.expect(&format!("pausing {old_token} 3"));
    // Stopped between its check of the term and its write: its renewals
    // stop too, and its lease runs out.
    old.signal(Signal::STOP);
    wait_until("the old leader stopped", || {
        stopped(old.pid().as_raw_nonzero().get() as u32)
    });
    let new_token = token(&new.expect("elected"));
    assert!(new_token > old_token, "{new_token} after {old_token}");
    new.expect(&format!("wrote {new_token} 1"));

    std::fs::write(dir.path().join("go"), "").unwrap();
    old.signal(Signal::CONT);
    old.expect(&format!("resumed {old_token} 3"));
    if obey {
        // The write on its way is refused; the term's work, dropped by the
        // election or ended by the refusal, says so: in either order.
        let mut next_two = [old.next_line(), old.next_line()];
        next_two.sort();
        assert_eq!(
            next_two,
            [
                format!("refused {old_token} 3"),
                format!("stepped-down {old_token}")
            ],
            "{:#?}",
            old.seen
        );
        // The new leader writes on; the old one says nothing more of its
        // term (it campaigns again, and waits).
        new.expect(&format!("wrote {new_token} 5"));
        old.drain();
        let mut after = old
            .seen
            .iter()
            .skip_while(|l| !l.starts_with("resumed"))
            .skip(3);
        assert!(
            after.all(|l| !l.contains(&format!(" {old_token} "))),
            "{:#?}",
            old.seen
        );
    } else {
        assert_eq!(old.expect("refused"), format!("refused {old_token} 3"));
        for n in 4..=5 {
            assert_eq!(
                old.expect(&format!("refused {old_token} {n}")),
                format!("refused {old_token} {n}")
            );
        }
        new.expect(&format!("wrote {new_token} 5"));
    }
    assert!(
        !old.seen
            .iter()
            .any(|l| l.starts_with(&format!("wrote {old_token} "))
                && !l.ends_with(" 1")
                && !l.ends_with(" 2")),
        "only writes 1 and 2 of the old term may have been accepted: {:#?}",
        old.seen
    );
    if let Some(history) = server.file_history(&store) {
        let tokens: Vec<u64> = history.iter().map(|w| w.token).collect();
        assert!(tokens.is_sorted(), "{tokens:?}");
        assert_eq!(
            tokens.iter().filter(|&&t| t == old_token).count(),
            2,
            "{tokens:?}"
        );
    }
}

/// The server goes silent under a leader: its work is told to stop while
/// time remains before the deadline, writes nothing after, and it steps
/// down.
fn silent_server(server: &Server) {
    let dir = tempfile::tempdir().unwrap();
    // The file store: the fault is the engine's server, not the store.
    let store = dir.path().join("store.json");
    let mut leader = child::spawn(&role(
        server,
        dir.path(),
        store.to_str().unwrap(),
        true,
        None,
    ));
    let leading = token(&leader.expect("elected"));
    leader.expect(&format!("wrote {leading} 2"));
    server.silence();
    let ending = leader.expect(&format!("ending {leading} "));
    let fields: Vec<&str> = ending.split(' ').collect();
    assert_eq!(fields[2], "near", "{ending}");
    let margin: u64 = fields[3].parse().unwrap();
    assert!(margin > 0, "told to stop after the deadline: {ending}");
    assert_eq!(leader.next_line(), format!("stepped-down {leading}"));
    let writes_after = leader
        .seen
        .iter()
        .skip_while(|l| !l.starts_with("ending"))
        .filter(|l| l.starts_with("wrote"))
        .count();
    assert_eq!(writes_after, 0, "{:#?}", leader.seen);
    let written = FencedStore::new(&store).history().unwrap();
    assert!(written.iter().all(|w| w.token == leading));
}

/// Acquisitions dropped at random points (by `timeout` and by `select!`)
/// while a holder comes and goes: afterwards the lease is free (one taken
/// meanwhile was released at once), no run was recorded, and no lease
/// thread is left.
fn cancelled_acquisitions(server: &Server) {
    let engine = server.engine(TTL);
    let kind = engine.kind();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut random = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    let mut wait = LeaseRequest::new();
    wait.wait(Wait::Forever);
    for round in 0..6 {
        let holder = engine
            .acquire(NAME, LeaseRequest::new().wait(Wait::Forever))
            .unwrap();
        let delays: Vec<(u64, u64)> = (0..8).map(|_| (random(400), random(2))).collect();
        let release_after = random(300);
        runtime.block_on(async {
            let mut tasks = Vec::new();
            for (i, &(after, how)) in delays.iter().enumerate() {
                let engine = engine.clone();
                let wait = wait.clone();
                tasks.push(tokio::spawn(async move {
                    let name = if i % 4 == 3 { "other" } else { NAME };
                    let acquisition = engine.start(name, &wait).unwrap();
                    let after = Duration::from_millis(after);
                    if how == 0 {
                        let _ = tokio::time::timeout(after, acquisition).await;
                    } else {
                        tokio::select! {
                            taken = acquisition => drop(taken),
                            () = tokio::time::sleep(after) => {}
                        }
                    }
                }));
            }
            tokio::time::sleep(Duration::from_millis(release_after)).await;
            let _ = holder.release().unwrap();
            for task in tasks {
                task.await.unwrap();
            }
        });
        for name in [NAME, "other"] {
            wait_until(&format!("round {round}: `{name}` free"), || {
                engine
                    .acquire(name, &LeaseRequest::new())
                    .is_ok_and(|lease| lease.release().is_ok())
            });
            assert!(
                engine.inspect(name).unwrap().last_run.is_none(),
                "a run was recorded"
            );
        }
        wait_until(
            &format!("round {round}: no {kind} lease thread left"),
            || lease_threads(kind) == 0,
        );
    }
}

/// A guard dropped inside a single-threaded runtime while the server is
/// silent: the drop returns without waiting for the server (the lease is
/// still believed held when it has returned: a blocking release would have
/// waited until the server answered or the deadline passed), and the lease's
/// `lost()` future completes.
fn dropped_in_a_runtime(server: &Server) {
    let engine = server.engine(Duration::from_secs(10));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let lease = engine
            .start("dropped", &LeaseRequest::new())
            .unwrap()
            .await
            .unwrap();
        let signal = lease.signal();
        server.silence();
        drop(lease);
        assert_eq!(
            signal.lost_reason(),
            None,
            "the drop waited for the release"
        );
        let reason = tokio::time::timeout(Duration::from_secs(60), signal.lost())
            .await
            .expect("lost() completes");
        assert!(
            matches!(
                reason,
                lockfile_lease::error::LostReason::Released
                    | lockfile_lease::error::LostReason::DeadlinePassed { .. }
            ),
            "{reason:?}"
        );
    });
}

/// An acquisition is lazy, as a future is: nothing is asked of the server
/// before it is first polled. One that claims a tick is refused when
/// awaited, before anything is asked. A lease dropped inside a runtime is
/// free on the server once `shutdown::releases` has returned. A history
/// write cancelled half-way is written all the same.
fn lazy_refused_and_released(server: &Server) {
    let engine = server.engine(TTL);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let unpolled = engine.start(NAME, &LeaseRequest::new()).unwrap();
    let taken = engine.acquire(NAME, &LeaseRequest::new()).unwrap();
    drop(unpolled);
    let _ = taken.release().unwrap();

    let mut claim = LeaseRequest::new();
    let hourly = lockfile::tick::Schedule::new(Duration::from_secs(3600), Duration::ZERO).unwrap();
    claim.claim_tick(lockfile::tick::TickClaim::new(
        hourly,
        std::time::Instant::now(),
    ));
    let refused = runtime.block_on(engine.start(NAME, &claim).unwrap());
    assert!(
        matches!(refused, Err(lockfile_lease::Error::InvalidOptions { .. })),
        "{refused:?}"
    );
    let report = engine.inspect(NAME).unwrap();
    assert!(report.last_claimed_tick.is_none(), "{report:?}");

    runtime.block_on(async {
        let lease = engine
            .start(NAME, &LeaseRequest::new())
            .unwrap()
            .await
            .unwrap();
        drop(lease);
        lockfile_lease::shutdown::releases().await;
    });
    let again = engine
        .acquire(NAME, &LeaseRequest::new())
        .expect("free once released");
    let _ = again.release().unwrap();

    // A history write cancelled after it was sent is still written before
    // the release that follows it.
    runtime.block_on(async {
        let lease = engine
            .start(NAME, &LeaseRequest::new())
            .unwrap()
            .await
            .unwrap();
        let end = lockfile::history::RunEnd {
            outcome: lockfile::history::Outcome::Succeeded,
            exit_code: Some(0),
            signal: None,
            started_at: std::time::SystemTime::now(),
        };
        // Polled once (which sends it: the server's answer cannot be back
        // within that poll), then dropped.
        let mut write = Box::pin(lease.record_outcome_async(end));
        let first =
            std::future::poll_fn(|cx| std::task::Poll::Ready(write.as_mut().poll(cx))).await;
        assert!(first.is_pending(), "{first:?}");
        drop(write);
        assert!(matches!(
            lease.release_async().await,
            Ok(lockfile_lease::Released::WhileHeld)
        ));
    });
    let last = engine.inspect(NAME).unwrap().last_run;
    assert!(
        last.as_ref()
            .is_some_and(|run| run.outcome == lockfile::history::Outcome::Succeeded),
        "{last:?}"
    );
}

/// Threads of this process named for the engine's lease threads.
fn lease_threads(kind: &str) -> usize {
    // A thread's name is cut to 15 bytes.
    let name = format!("lockfile-{kind}");
    let name = &name[..name.len().min(15)];
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

macro_rules! engine_tests {
    ($engine:ident, $start:expr) => {
        mod $engine {
            use super::*;

            #[test]
            fn a_paused_leaders_late_write_is_refused_and_it_steps_down() {
                paused_leader(&$start, true);
            }

            #[test]
            fn a_leader_that_ignores_its_term_is_stopped_by_the_fence() {
                paused_leader(&$start, false);
            }

            #[test]
            fn a_silent_server_stops_the_leader_before_its_deadline() {
                silent_server(&$start);
            }

            #[test]
            fn cancelled_acquisitions_leave_nothing_held() {
                cancelled_acquisitions(&$start);
            }

            #[test]
            fn an_acquisition_is_lazy_a_tick_is_not_awaited_and_releases_settle() {
                lazy_refused_and_released(&$start);
            }

            #[test]
            fn a_lease_dropped_in_a_runtime_does_not_block_it() {
                dropped_in_a_runtime(&$start);
            }
        }
    };
}

engine_tests!(etcd, Server::etcd());
engine_tests!(postgres, Server::postgres());
engine_tests!(redis, Server::redis());
