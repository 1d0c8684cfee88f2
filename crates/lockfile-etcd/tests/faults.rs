//! Real processes, a real etcd, real faults: killed and stopped holders, a
//! black-holed network, a paused and a restarted etcd, and contention.
//!
//! Holders are this test binary run again (see `common::child`); times
//! cross process boundaries on the system-wide monotonic clock. Assertions
//! are about order (the holder's belief ends before anyone else's begins)
//! and about bounds with generous margins, never about exact timings.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::child::{Ev, Holder, Role, run_role_if_requested};
use common::{Etcd, EtcdExt, mono_ns, secs, to_mono};
use lockfile::history::{Outcome, RunEnd};
use lockfile_etcd::{Error, LeaseOptions, Released, Step};
use lockfile_examples::FencedStore;
use lockfile_test_support::Proxy;
use lockfile_test_support::stopped::stop_outside_a_write;
use rustix::process::Signal;

/// The test that child processes run (see `common::child`).
const ENTRY: &str = "child_process_entry";

/// Slack for a thread to be scheduled and a clock to be read, on a loaded
/// two-core machine. Loss is declared on a timer at the deadline; this is how
/// late that timer may fire.
const SCHEDULING: i64 = 300_000_000;

const SECOND: i64 = 1_000_000_000;

#[test]
fn child_process_entry() {
    run_role_if_requested();
}

fn ns(d: Duration) -> i64 {
    d.as_nanos() as i64
}

struct Lost {
    deadline_passed: bool,
    lost_at: i64,
    deadline: i64,
    last_renewal: i64,
}

fn expect_lost(holder: &mut Holder, limit: Duration) -> Lost {
    match holder.expect(limit, "a lost lease", |e| matches!(e, Ev::Lost { .. })) {
        Ev::Lost {
            deadline_passed,
            lost_at,
            deadline,
            last_renewal,
            ..
        } => Lost {
            deadline_passed,
            lost_at,
            deadline,
            last_renewal,
        },
        _ => unreachable!(),
    }
}

/// SIGKILL the holder: another process, already waiting, acquires within
/// TTL + 1 s of the kill, with a larger token.
#[test]
fn a_killed_holder_is_replaced_within_its_ttl() {
    let etcd = Etcd::start();
    let ttl = Duration::from_secs(2);
    let mut first = Holder::spawn(ENTRY, &Role::new(&etcd.endpoint(), "killed", ttl));
    let (first_token, _) = first.acquired(Duration::from_secs(10));
    // The second holder starts waiting on a watch while the first holds.
    let mut second = Holder::spawn(ENTRY, &Role::new(&etcd.endpoint(), "killed", ttl));
    std::thread::sleep(Duration::from_millis(1200));
    let killed_at = mono_ns() as i64;
    first.kill();
    let (second_token, acquired_at) = second.acquired(ttl * 4);
    let after = acquired_at - killed_at;
    eprintln!(
        "SIGKILL: the next holder acquired {:.3}s after the kill (TTL {ttl:?}), token {first_token} -> {second_token}",
        secs(after.into())
    );
    assert!(second_token > first_token);
    assert!(after > 0);
    assert!(
        after <= ns(ttl) + SECOND,
        "acquired {:.3}s after the kill",
        secs(after.into())
    );
}

/// SIGSTOP the holder past its TTL, let another take over and write, then
/// SIGCONT: the first reports the loss before making another fenced write,
/// and the store refuses its token.
#[test]
fn a_holder_stopped_past_its_ttl_is_fenced_off() {
    let etcd = Etcd::start();
    let ttl = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store.json");
    let mut role = Role::new(&etcd.endpoint(), "stopped", ttl);
    role.store = Some(store_path.clone());
    role.write_every_ms = 20;
    let mut holder = Holder::spawn(ENTRY, &role);
    let (old_token, _) = holder.acquired(Duration::from_secs(10));
    holder.expect(Duration::from_secs(5), "an accepted write", |e| {
        matches!(e, Ev::Write { accepted: true, .. })
    });

    let store = FencedStore::new(&store_path);
    let stopped_at = stop_outside_a_write(
        holder.pid().as_raw_nonzero().get() as u32,
        || store.busy().expect("try the store's lock"),
        || {
            let at = mono_ns() as i64;
            holder.signal(Signal::STOP);
            at
        },
        || holder.signal(Signal::CONT),
    );
    let contender = etcd
        .options(ttl)
        .timeout(ttl * 4)
        .acquire("stopped")
        .expect("the stopped holder's lease expires");
    let new_token = contender.fencing_token();
    assert!(new_token > old_token);
    store.write(new_token, "contender").unwrap();

    let resumed_at = mono_ns() as i64;
    holder.signal(Signal::CONT);
    let lost = expect_lost(&mut holder, Duration::from_secs(5));
    let late = holder.expect(Duration::from_secs(5), "the late write", |e| {
        matches!(e, Ev::LateWrite { .. })
    });
    let Ev::LateWrite {
        accepted, error, ..
    } = late
    else {
        unreachable!()
    };
    assert!(!accepted, "the store accepted a write from the old holder");
    assert!(
        error.contains(&format!("it already accepted token {new_token}")),
        "{error}"
    );

    // Nothing runs in a stopped process: the loss is noticed after SIGCONT,
    // promptly.
    assert!(lost.lost_at >= resumed_at);
    assert!(
        lost.lost_at - resumed_at < SECOND,
        "noticed {:.3}s after SIGCONT",
        secs((lost.lost_at - resumed_at).into())
    );
    // After the stop, at most the one write already past its check() when the
    // signal landed was attempted before the loss was reported, and the store
    // refused it.
    let late_writes: Vec<&Ev> = holder
        .seen
        .iter()
        .filter(|e| matches!(e, Ev::Write { done_at, .. } if *done_at > stopped_at))
        .collect();
    assert!(late_writes.len() <= 1, "{late_writes:#?}");
    assert!(
        late_writes.iter().all(|e| matches!(e, Ev::Write { accepted: false, checked_at, .. } if *checked_at < stopped_at)),
        "{late_writes:#?}"
    );
    let tokens: Vec<u64> = store.history().unwrap().iter().map(|w| w.token).collect();
    assert!(tokens.is_sorted(), "{tokens:?}");
    assert_eq!(tokens.last(), Some(&new_token));
    eprintln!(
        "SIGSTOP: stopped {:.3}s; the holder reported the loss {:.3}s after SIGCONT ({}); {} write(s) in flight were refused",
        secs((resumed_at - stopped_at).into()),
        secs((lost.lost_at - resumed_at).into()),
        if lost.deadline_passed {
            "deadline passed"
        } else {
            "key gone"
        },
        late_writes.len(),
    );
    assert!(!contender.release().unwrap().was_lost());
}

/// Cut the holder's connection with a black hole (nothing forwarded, nothing
/// closed): the holder declares the loss by its deadline, never before it,
/// and the next holder acquires only after that deadline.
#[test]
fn a_holder_behind_a_black_hole_declares_loss_by_its_deadline() {
    let etcd = Etcd::start();
    let ttl = Duration::from_secs(2);
    let proxy = Proxy::start(&etcd.client_addr());
    let mut role = Role::new(&proxy.endpoint(), "partitioned", ttl);
    role.supervise = true;
    let mut holder = Holder::spawn(ENTRY, &role);
    let (old_token, _) = holder.acquired(Duration::from_secs(10));
    // A few renewals go through the proxy first.
    std::thread::sleep(ttl + ttl / 2);
    let holed_at = mono_ns() as i64;
    proxy.blackhole();
    let opts = etcd.options(ttl);
    let contender = std::thread::spawn(move || {
        let mut opts = opts;
        opts.timeout(Duration::from_secs(20)).acquire("partitioned")
    });

    let lost = expect_lost(&mut holder, ttl * 3);
    let guard = contender.join().unwrap().expect("the contender acquires");
    let taken_at = to_mono(guard.acquired_at()) as i64;
    let interval = ns(ttl) / 3;
    eprintln!(
        "black hole: last renewal {:.3}s before the cut; loss declared {:.3}s after the cut, {:.3}s after the deadline; the contender acquired {:.3}s after the deadline",
        secs((holed_at - lost.last_renewal).into()),
        secs((lost.lost_at - holed_at).into()),
        secs((lost.lost_at - lost.deadline).into()),
        secs((taken_at - lost.deadline).into()),
    );
    assert!(
        lost.deadline_passed,
        "only the deadline can tell a silent network"
    );
    // Renewals flowed until the cut, and none got through after it.
    assert!(lost.last_renewal < holed_at);
    assert!(holed_at - lost.last_renewal <= interval + SCHEDULING);
    // The deadline is the last successful renewal's send time plus the TTL.
    assert!((lost.deadline - (lost.last_renewal + ns(ttl))).abs() < 1_000_000);
    // Declared at the deadline: never before (etcd could not have expired the
    // lease yet), and not later than the scheduling slack.
    assert!(lost.lost_at >= lost.deadline);
    assert!(lost.lost_at - lost.deadline <= SCHEDULING);
    assert!(lost.lost_at <= holed_at + ns(ttl) + SCHEDULING);
    // The stop policy a command wrapper uses: SIGTERM a third of a TTL before
    // the deadline, SIGKILL just before it, both before the loss.
    let step = |kind: &str| {
        holder
            .seen
            .iter()
            .find_map(|e| match e {
                Ev::Step {
                    kind: k,
                    at,
                    deadline,
                } if k == kind => Some((*at, *deadline)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no {kind} step: {:#?}", holder.seen))
    };
    let (terminate_at, deadline_then) = step("terminate");
    let (kill_at, _) = step("kill");
    // (Instants cross processes as nanoseconds, give or take a microsecond.)
    assert!(
        (deadline_then - lost.deadline).abs() < 1_000_000,
        "the deadline moved after the cut"
    );
    eprintln!(
        "black hole: the stop policy said terminate {:.3}s and kill {:.3}s before the deadline",
        secs((lost.deadline - terminate_at).into()),
        secs((lost.deadline - kill_at).into()),
    );
    assert!(terminate_at >= lost.deadline - interval);
    assert!(terminate_at <= lost.deadline - interval + SCHEDULING);
    assert!(kill_at >= lost.deadline - 100_000_000);
    assert!(kill_at < lost.deadline, "killed before the deadline");
    assert!(terminate_at > holed_at);
    // Nobody else held the lease while the holder could still believe it did.
    assert!(taken_at > lost.deadline);
    assert!(guard.fencing_token() > old_token);
    assert!(!guard.release().unwrap().was_lost());
}

/// Behind a black hole, the end of a run as a command wrapper does it: stop
/// the work at the stop policy's kill, just before the deadline, record the
/// outcome, release. Nothing waits on the silent server past a moment after
/// the deadline: the history write gives up 200 ms past it, and the release
/// asks nothing of etcd once the deadline has passed (the key goes with the
/// lease).
#[test]
fn behind_a_black_hole_recording_and_releasing_end_soon_after_the_deadline() {
    let etcd = Etcd::start();
    let ttl = Duration::from_secs(3);
    let proxy = Proxy::start(&etcd.client_addr());
    let guard = LeaseOptions::new()
        .endpoints([proxy.endpoint()])
        .ttl(ttl)
        .try_acquire("holed")
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let cut = Instant::now();
    proxy.blackhole();
    let signal = guard.signal();
    let policy = signal.default_policy();
    while signal.wait_step(policy, Instant::now() + Duration::from_secs(30)) != Step::Kill {
        assert!(cut.elapsed() < ttl * 3, "no kill step");
    }
    let stopped = Instant::now();
    let deadline = guard.deadline();
    let recorded = guard.record_outcome(RunEnd {
        outcome: Outcome::LeaseLost,
        exit_code: None,
        signal: Some(9),
        started_at: std::time::SystemTime::now(),
    });
    let recorded_at = Instant::now();
    let released = guard.release();
    let done = Instant::now();
    let from_deadline = |at: Instant| {
        if at >= deadline {
            secs(ns(at - deadline).into())
        } else {
            -secs(ns(deadline - at).into())
        }
    };
    let figures = format!(
        "black hole, TTL 3s: the deadline came {:.3}s after the cut; stopped at {:+.3}s from it, the history write gave up at {:+.3}s, the release returned at {:+.3}s",
        secs(ns(deadline - cut).into()),
        from_deadline(stopped),
        from_deadline(recorded_at),
        from_deadline(done),
    );
    eprintln!("{figures}");
    match &recorded {
        Err(e @ Error::Unanswered { .. }) => {
            assert_eq!(e.key(), Some("lockfile/history/holed"), "{e}");
        }
        other => panic!("{other:?}; {figures}"),
    }
    assert!(
        released.as_ref().is_ok_and(Released::was_lost),
        "{released:?}; {figures}"
    );
    assert!(done <= deadline + Duration::from_millis(500), "{figures}");
}

/// etcd pauses briefly (SIGSTOP for a third of the TTL), then dies and comes
/// back at once on the same data directory: both times, the holder's
/// renewals resume before its deadline and it keeps the lease.
#[test]
fn etcd_hiccups_shorter_than_the_deadline_keep_the_lease() {
    let mut etcd = Etcd::start();
    let ttl = Duration::from_secs(6);
    let mut role = Role::new(&etcd.endpoint(), "hiccup", ttl);
    role.write_every_ms = 100;
    let mut holder = Holder::spawn(ENTRY, &role);
    let (token, _) = holder.acquired(Duration::from_secs(10));
    std::thread::sleep(Duration::from_secs(1));

    etcd.pause();
    std::thread::sleep(ttl / 3);
    etcd.resume();
    let resumed_at = mono_ns() as i64;
    holder.expect(ttl, "a renewal after the pause", |e| {
        matches!(e, Ev::Held { last_renewal, failed_renewals: 0, .. } if *last_renewal > resumed_at)
    });

    etcd.restart();
    let restarted_at = mono_ns() as i64;
    holder.expect(ttl, "a renewal after the restart", |e| {
        matches!(e, Ev::Held { last_renewal, failed_renewals: 0, .. } if *last_renewal > restarted_at)
    });
    assert!(
        !holder.seen.iter().any(|e| matches!(e, Ev::Lost { .. })),
        "{:#?}",
        holder.seen
    );
    // etcd agrees: the lease and the key survived.
    let err = etcd.options(ttl).try_acquire("hiccup").unwrap_err();
    assert!(
        matches!(err, Error::Contended { fencing_token, .. } if fencing_token == token),
        "{err}"
    );
    let min_margin = holder
        .seen
        .iter()
        .filter_map(|e| match e {
            Ev::Held { at, deadline, .. } => Some(deadline - at),
            _ => None,
        })
        .min()
        .unwrap();
    eprintln!(
        "etcd hiccups: the holder kept the lease; its deadline was never closer than {:.3}s",
        secs(min_margin.into())
    );
}

/// etcd stops (SIGSTOP) for longer than the TTL: the holder declares the loss
/// by its deadline while etcd is stopped; after SIGCONT etcd expires the lease
/// (it does not renew an expired one), and a contender acquires only then.
#[test]
fn etcd_paused_past_the_ttl_makes_the_holder_declare_loss_first() {
    let etcd = Etcd::start();
    let ttl = Duration::from_secs(2);
    let mut role = Role::new(&etcd.endpoint(), "paused", ttl);
    role.write_every_ms = 100;
    role.linger_after_lost_ms = 10_000;
    let mut holder = Holder::spawn(ENTRY, &role);
    let (old_token, _) = holder.acquired(Duration::from_secs(10));
    std::thread::sleep(Duration::from_secs(1));

    let paused_at = mono_ns() as i64;
    etcd.pause();
    let lost = expect_lost(&mut holder, ttl * 2);
    std::thread::sleep(Duration::from_secs(1));
    let resumed_at = mono_ns() as i64;
    etcd.resume();
    let guard = etcd
        .options(ttl)
        .timeout(Duration::from_secs(15))
        .acquire("paused")
        .expect("the contender acquires after etcd resumes");
    let taken_at = to_mono(guard.acquired_at()) as i64;
    eprintln!(
        "etcd paused: the holder declared the loss {:.3}s into the pause ({:.3}s after its deadline); the contender acquired {:.3}s after SIGCONT",
        secs((lost.lost_at - paused_at).into()),
        secs((lost.lost_at - lost.deadline).into()),
        secs((taken_at - resumed_at).into()),
    );
    assert!(lost.deadline_passed);
    assert!(lost.lost_at >= lost.deadline);
    assert!(lost.lost_at - lost.deadline <= SCHEDULING);
    assert!(lost.lost_at <= paused_at + ns(ttl) + SCHEDULING);
    assert!(lost.lost_at < resumed_at);
    // The holder's declared loss precedes the contender's acquisition.
    assert!(taken_at > lost.lost_at);
    assert!(guard.fencing_token() > old_token);
    assert!(!guard.release().unwrap().was_lost());
}

/// etcd dies and stays down longer than the TTL, then restarts on the same
/// data directory, where the lease is restored with a fresh TTL. The holder
/// declared the loss by its deadline while etcd was down; once etcd is back,
/// the lost guard deletes its key and revokes its lease, so the contender
/// acquires without waiting for the restored lease to expire.
#[test]
fn etcd_down_past_the_ttl_makes_the_holder_declare_loss_first() {
    let mut etcd = Etcd::start();
    let ttl = Duration::from_secs(2);
    let mut role = Role::new(&etcd.endpoint(), "restarted", ttl);
    role.write_every_ms = 100;
    role.linger_after_lost_ms = 15_000;
    let mut holder = Holder::spawn(ENTRY, &role);
    let (old_token, _) = holder.acquired(Duration::from_secs(10));
    std::thread::sleep(Duration::from_secs(1));

    let killed_at = mono_ns() as i64;
    etcd.kill();
    let lost = expect_lost(&mut holder, ttl * 2);
    std::thread::sleep(Duration::from_secs(1));
    etcd.restart();
    let ready_at = mono_ns() as i64;
    let guard = etcd
        .options(ttl)
        .timeout(Duration::from_secs(15))
        .acquire("restarted")
        .expect("the contender acquires after etcd restarts");
    let taken_at = to_mono(guard.acquired_at()) as i64;
    eprintln!(
        "etcd restarted: the holder declared the loss {:.3}s after the kill ({:.3}s after its deadline); the contender acquired {:.3}s after etcd was ready again",
        secs((lost.lost_at - killed_at).into()),
        secs((lost.lost_at - lost.deadline).into()),
        secs((taken_at - ready_at).into()),
    );
    assert!(lost.deadline_passed);
    assert!(lost.lost_at >= lost.deadline);
    assert!(lost.lost_at - lost.deadline <= SCHEDULING);
    assert!(lost.lost_at <= killed_at + ns(ttl) + SCHEDULING);
    assert!(taken_at > lost.lost_at);
    assert!(guard.fencing_token() > old_token);
    // The restored lease would have blocked the contender for a full TTL
    // after the restart; the lost guard's cleanup let it in sooner.
    assert!(
        taken_at - ready_at < ns(ttl),
        "{:.3}s",
        secs((taken_at - ready_at).into())
    );
    assert!(!guard.release().unwrap().was_lost());
}

/// A blocking acquire that is waiting when etcd restarts waits on, and takes
/// the lease when the holder releases it.
#[test]
fn a_waiting_acquire_survives_an_etcd_restart() {
    let mut etcd = Etcd::start();
    let ttl = Duration::from_secs(6);
    let holder = etcd.options(ttl).try_acquire("patient").unwrap();
    let opts = etcd.options(ttl);
    let waiter = std::thread::spawn(move || {
        let mut opts = opts;
        opts.timeout(Duration::from_secs(30)).acquire("patient")
    });
    std::thread::sleep(Duration::from_millis(500));
    etcd.restart();
    // The holder rides out the restart (see the hiccup test), then releases.
    std::thread::sleep(Duration::from_secs(2));
    holder.check().unwrap();
    let token = holder.fencing_token();
    assert!(!holder.release().unwrap().was_lost());
    let guard = waiter.join().unwrap().expect("the waiter acquires");
    assert!(guard.fencing_token() > token);
    assert!(!guard.release().unwrap().was_lost());
}

/// Several processes take turns on one lease, writing to one fenced store:
/// every write is accepted, and the accepted tokens strictly increase from
/// one holder to the next.
#[test]
fn under_contention_accepted_tokens_strictly_increase() {
    let etcd = Etcd::start();
    let ttl = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store.json");
    let mut role = Role::new(&etcd.endpoint(), "contended", ttl);
    role.store = Some(store_path.clone());
    role.write_every_ms = 20;
    role.hold_ms = Some(150);
    role.rounds = 3;
    let processes = 4;
    let mut holders: Vec<Holder> = (0..processes)
        .map(|_| Holder::spawn(ENTRY, &role))
        .collect();
    for holder in &mut holders {
        assert!(
            holder.wait(Duration::from_secs(60)),
            "a holder did not finish"
        );
        holder.drain(Duration::from_millis(200));
    }

    let mut acquisitions = 0;
    for holder in &holders {
        for ev in &holder.seen {
            match ev {
                Ev::Acquired { .. } => acquisitions += 1,
                Ev::Write { accepted, .. } => assert!(accepted, "{:#?}", holder.seen),
                Ev::Released { error, .. } => assert!(error.is_none(), "{error:?}"),
                Ev::Lost { .. } | Ev::Failed { .. } => panic!("{:#?}", holder.seen),
                _ => {}
            }
        }
    }
    assert_eq!(acquisitions, processes * 3);

    let history = FencedStore::new(&store_path).history().unwrap();
    // Collapse each holder's run of writes into one (token, pid) turn.
    let mut turns: Vec<(u64, String)> = Vec::new();
    for write in &history {
        let pid = write.value.split(':').next().unwrap().to_owned();
        if turns.last().is_none_or(|(token, _)| *token != write.token) {
            turns.push((write.token, pid));
        } else {
            assert_eq!(
                turns.last().unwrap().1,
                pid,
                "two processes wrote with one token"
            );
        }
    }
    let tokens: Vec<u64> = turns.iter().map(|(t, _)| *t).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert_eq!(turns.len(), processes * 3, "{turns:?}");
    let mut per_process: HashMap<&str, usize> = HashMap::new();
    for (_, pid) in &turns {
        *per_process.entry(pid).or_default() += 1;
    }
    assert!(per_process.values().all(|&n| n == 3), "{per_process:?}");
    eprintln!(
        "contention: {} turns by {processes} processes, {} accepted writes, tokens {tokens:?}",
        turns.len(),
        history.len()
    );
}
