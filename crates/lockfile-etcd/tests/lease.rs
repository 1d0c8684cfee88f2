//! The lease API against a real etcd: acquire, contend, wait, renew, lose,
//! release, inspect.

mod common;

use std::time::{Duration, Instant};

use common::{Etcd, EtcdExt, raw};
use etcd_client::PutOptions;
use lockfile::history::{Outcome, RunEnd};
use lockfile_etcd::{Error, LeaseOptions, LeaseState, LostReason, Operation, Step, StopPolicy};

const TTL: Duration = Duration::from_secs(2);

#[test]
fn try_acquire_contends_with_the_holders_record_and_token() {
    let etcd = Etcd::start();
    let mut opts = etcd.options(TTL);
    opts.job("first");
    let guard = opts.try_acquire("job").unwrap();
    assert_eq!(guard.key(), "lockfile/locks/job");
    assert_eq!(guard.name(), "job");
    assert_eq!(guard.ttl(), TTL);
    assert_eq!(guard.record().job.as_deref(), Some("first"));
    assert_eq!(guard.record().pid, std::process::id());
    assert!(guard.fencing_token() > 0);
    guard.check().unwrap();

    let err = etcd.options(TTL).try_acquire("job").unwrap_err();
    assert!(err.is_contended(), "{err}");
    assert_eq!(err.owner(), Some(guard.record()));
    match &err {
        Error::Contended { fencing_token, .. } => {
            assert_eq!(*fencing_token, guard.fencing_token());
        }
        other => panic!("{other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.starts_with("`lockfile/locks/job` is held by pid "),
        "{message}"
    );
    assert!(message.contains("job \"first\""), "{message}");

    // Another name is another lease.
    let other = etcd.options(TTL).try_acquire("other-job").unwrap();
    assert!(other.fencing_token() > guard.fencing_token());

    let first_token = guard.fencing_token();
    assert!(!guard.release().unwrap().was_lost());
    let again = etcd.options(TTL).try_acquire("job").unwrap();
    assert!(again.fencing_token() > first_token);
    assert!(!again.release().unwrap().was_lost());
    assert!(!other.release().unwrap().was_lost());
}

#[test]
fn a_bounded_acquire_times_out_naming_the_holder() {
    let etcd = Etcd::start();
    let guard = etcd.options(TTL).job("holder").try_acquire("busy").unwrap();
    let started = Instant::now();
    let err = etcd
        .options(TTL)
        .timeout(Duration::from_millis(700))
        .acquire("busy")
        .unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(err.is_contended());
    assert_eq!(err.owner().unwrap().job.as_deref(), Some("holder"));
    assert!(waited >= Duration::from_millis(700), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    assert!(
        err.to_string()
            .starts_with("gave up waiting for `lockfile/locks/busy` after ")
    );
    // The wait did not disturb the holder.
    guard.check().unwrap();
    assert!(!guard.release().unwrap().was_lost());
}

#[test]
fn a_blocking_acquire_wakes_on_release() {
    let etcd = Etcd::start();
    let guard = etcd.options(TTL).try_acquire("handoff").unwrap();
    let first = guard.fencing_token();
    let opts = etcd.options(TTL);
    let waiter = std::thread::spawn(move || {
        let guard = opts.acquire("handoff").unwrap();
        (Instant::now(), guard.fencing_token())
    });
    // Long enough for the waiter to be watching; a polling waiter would
    // also need luck to be fast below.
    std::thread::sleep(Duration::from_millis(700));
    let released = Instant::now();
    assert!(!guard.release().unwrap().was_lost());
    let (acquired, token) = waiter.join().unwrap();
    assert!(token > first);
    let handoff = acquired.duration_since(released);
    assert!(
        handoff < Duration::from_millis(500),
        "handoff took {handoff:?}"
    );
}

#[test]
fn renewal_keeps_the_lease_past_its_ttl() {
    let etcd = Etcd::start();
    let guard = etcd.options(TTL).try_acquire("long").unwrap();
    let first_deadline = guard.deadline();
    std::thread::sleep(TTL * 2 + TTL / 2);
    guard.check().unwrap();
    assert!(
        guard.deadline() > first_deadline + TTL,
        "renewals moved the deadline"
    );
    assert!(guard.last_renewal() > guard.acquired_at());
    // The deadline is at most a TTL after the last renewal's send time.
    assert_eq!(guard.deadline(), guard.last_renewal() + guard.ttl());
    assert!(guard.deadline() > Instant::now());
    assert_eq!(guard.signal().failed_renewals(), 0);
    let report = etcd.options(TTL).inspect("long").unwrap();
    assert_eq!(report.state, LeaseState::Held);
    assert!(report.ttl_remaining.unwrap() >= Duration::from_secs(1));
    assert!(!guard.release().unwrap().was_lost());
}

#[test]
fn a_deleted_key_is_reported_lost_at_once() {
    let etcd = Etcd::start();
    let guard = etcd
        .options(Duration::from_secs(30))
        .try_acquire("deleted")
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    guard
        .signal()
        .on_lost(move |reason| tx.send(reason.clone()).unwrap());
    let endpoint = etcd.endpoint();
    raw(&endpoint, async |c| {
        c.delete("lockfile/locks/deleted", None).await
    });
    let reason = guard.wait_lost(Duration::from_secs(5)).expect("lost");
    assert!(
        matches!(reason, LostReason::KeyDeleted { .. }),
        "{reason:?}"
    );
    assert_eq!(rx.recv_timeout(Duration::from_secs(1)).unwrap(), reason);
    let err = guard.check().unwrap_err();
    assert!(err.is_lost());
    assert!(
        err.to_string().starts_with(
            "the lease on `lockfile/locks/deleted` is lost: the key was deleted at revision "
        ),
        "{err}"
    );
    assert_eq!(
        guard.signal().step(StopPolicy::new(Duration::from_secs(1))),
        Step::Kill
    );
    // Releasing a lost lease says so.
    let released = guard.release().unwrap();
    assert!(released.was_lost(), "{released:?}");
}

#[test]
fn a_key_taken_over_by_another_lease_is_reported_lost() {
    let etcd = Etcd::start();
    let guard = etcd
        .options(Duration::from_secs(30))
        .try_acquire("replaced")
        .unwrap();
    let endpoint = etcd.endpoint();
    raw(&endpoint, async |c| {
        let lease = c.lease_grant(60, None).await?;
        c.put(
            "lockfile/locks/replaced",
            "{}",
            Some(PutOptions::new().with_lease(lease.id())),
        )
        .await
    });
    let reason = guard.wait_lost(Duration::from_secs(5)).expect("lost");
    assert!(
        matches!(reason, LostReason::KeyReplaced { .. }),
        "{reason:?}"
    );
    // Release must not delete a key that is no longer ours.
    let _ = guard.release();
    let report = etcd.options(TTL).inspect("replaced").unwrap();
    assert_eq!(report.state, LeaseState::Held);
    assert!(report.owner.is_none());
    assert!(report.content_error.is_some());
}

#[test]
fn a_revoked_lease_is_reported_lost() {
    let etcd = Etcd::start();
    let guard = etcd
        .options(Duration::from_secs(30))
        .try_acquire("revoked")
        .unwrap();
    let id = guard.lease_id().expect("an etcd lease id");
    let endpoint = etcd.endpoint();
    raw(&endpoint, async |c| c.lease_revoke(id).await);
    let reason = guard.wait_lost(Duration::from_secs(5)).expect("lost");
    // The watch sees the key go; a renewal in between would see TTL 0.
    assert!(
        matches!(reason, LostReason::KeyDeleted { .. } | LostReason::Expired),
        "{reason:?}"
    );
    // What etcd answers a revoke of a lease it no longer has: the release
    // takes exactly this status (code and message) for "already revoked".
    match raw(&endpoint, async |c| Ok(c.lease_revoke(id).await)) {
        Err(etcd_client::Error::GRpcStatus(status)) => {
            assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
            assert_eq!(status.message(), "etcdserver: requested lease not found");
        }
        other => panic!("revoking a revoked lease: {other:?}"),
    }
    let released = guard.release().unwrap();
    assert!(released.was_lost(), "{released:?}");
}

#[test]
fn release_deletes_the_key_and_revokes_the_lease() {
    let etcd = Etcd::start();
    let guard = etcd.options(TTL).try_acquire("tidy").unwrap();
    let id = guard.lease_id().expect("an etcd lease id");
    let signal = guard.signal();
    assert!(!guard.release().unwrap().was_lost());
    assert_eq!(signal.lost_reason(), Some(LostReason::Released));
    let report = etcd.options(TTL).inspect("tidy").unwrap();
    assert_eq!(report.state, LeaseState::Free);
    let endpoint = etcd.endpoint();
    let ttl = raw(&endpoint, async |c| c.lease_time_to_live(id, None).await).ttl();
    assert_eq!(ttl, -1, "the lease is revoked, not left to expire");
}

#[test]
fn dropping_the_guard_releases() {
    let etcd = Etcd::start();
    drop(etcd.options(TTL).try_acquire("dropped").unwrap());
    let again = etcd.options(TTL).try_acquire("dropped").unwrap();
    assert!(!again.release().unwrap().was_lost());
}

#[test]
fn inspect_reports_the_owner_token_and_ttl_as_json() {
    let etcd = Etcd::start();
    let free = etcd.options(TTL).inspect("report").unwrap();
    assert_eq!(free.state, LeaseState::Free);
    let json = serde_json::to_value(&free).unwrap();
    assert_eq!(json["state"], "free");
    assert!(json["owner"].is_null());

    let guard = etcd
        .options(Duration::from_secs(30))
        .job("reporter")
        .try_acquire("report")
        .unwrap();
    let report = etcd.options(TTL).inspect("report").unwrap();
    assert_eq!(report.state, LeaseState::Held);
    assert_eq!(report.owner.as_ref(), Some(guard.record()));
    assert_eq!(report.fencing_token, Some(guard.fencing_token()));
    assert_eq!(report.lease_id, guard.lease_id());
    assert_eq!(report.ttl, Some(Duration::from_secs(30)));
    let left = report.ttl_remaining.unwrap();
    assert!(
        left > Duration::from_secs(20) && left <= Duration::from_secs(30),
        "{left:?}"
    );

    let json = serde_json::to_value(&report).unwrap();
    // The same owner object as a lock file's report.
    assert_eq!(
        json["owner"],
        serde_json::to_value(lockfile::json::OwnerJson(guard.record())).unwrap()
    );
    assert_eq!(json["owner"]["heartbeat_interval_seconds"], 10.0);
    assert_eq!(json["fencing_token"], guard.fencing_token());
    assert_eq!(json["key"], "lockfile/locks/report");
    assert_eq!(json["name"], "report");
    assert!(json["ttl_remaining_seconds"].as_f64().unwrap() > 20.0);
    assert!(report.to_string().contains("fencing token"), "{report}");

    let second = etcd.options(TTL).try_acquire("another").unwrap();
    let all = etcd.options(TTL).inspect_all().unwrap();
    let names: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["another", "report"]);
    assert!(!second.release().unwrap().was_lost());
    assert!(!guard.release().unwrap().was_lost());
}

#[test]
fn bad_names_and_options_are_refused_before_any_request() {
    let err = LeaseOptions::new().try_acquire("../escape").unwrap_err();
    assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
    let err = LeaseOptions::new().inspect("").unwrap_err();
    assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
    let err = LeaseOptions::new()
        .endpoints(Vec::<String>::new())
        .try_acquire("x")
        .unwrap_err();
    assert!(err.to_string().contains("no etcd endpoints"), "{err}");
    let err = LeaseOptions::new()
        .ttl(Duration::ZERO)
        .endpoints(["http://127.0.0.1:1"])
        .try_acquire("x")
        .unwrap_err();
    assert!(err.to_string().contains("the TTL is zero"), "{err}");
}

#[test]
fn an_unreachable_etcd_fails_promptly_naming_the_endpoint() {
    // Nothing listens on a port we bound and closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let err = LeaseOptions::new()
        .endpoints([endpoint.clone()])
        .request_timeout(Duration::from_millis(500))
        .try_acquire("nowhere")
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            err,
            Error::Server {
                op: Operation::Grant,
                ..
            } | Error::Unanswered {
                op: Operation::Grant,
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with("cannot grant a lease for `lockfile/locks/nowhere` on etcd at "),
        "{message}"
    );
    assert!(message.contains(&endpoint), "{message}");
}

#[test]
fn the_lease_thread_works_from_inside_an_async_runtime() {
    let etcd = Etcd::start();
    let opts = etcd.options(TTL);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let guard = opts.try_acquire("from-async").unwrap();
        let report = opts.inspect("from-async").unwrap();
        assert_eq!(report.fencing_token, Some(guard.fencing_token()));
        assert!(!guard.release().unwrap().was_lost());
    });
}

fn ended(outcome: Outcome, exit_code: Option<i32>, signal: Option<i32>) -> RunEnd {
    RunEnd {
        outcome,
        exit_code,
        signal,
        started_at: std::time::SystemTime::now() - Duration::from_secs(2),
    }
}

/// The history key's value and its lease, read directly.
fn history_kv(endpoint: &str, name: &str) -> Option<(serde_json::Value, i64)> {
    let key = lockfile_etcd::history_key_for(name).unwrap();
    let get = raw(endpoint, async |c| c.get(key.as_str(), None).await);
    get.kvs()
        .first()
        .map(|kv| (serde_json::from_slice(kv.value()).unwrap(), kv.lease()))
}

#[test]
fn the_run_history_outlives_the_lease_and_later_holders() {
    let etcd = Etcd::start();
    let first = etcd.options(TTL).try_acquire("nightly").unwrap();
    assert_eq!(first.history_key(), "lockfile/history/nightly");
    let run = first
        .record_outcome(ended(Outcome::Failed, Some(3), None))
        .unwrap();
    assert_eq!(run.outcome, Outcome::Failed);
    assert_eq!(run.exit_code, Some(3));
    assert_eq!(run.consecutive_failures, 1);
    assert_eq!(run.last_failure_at, Some(run.finished_at));
    assert!(run.duration_seconds >= 2.0, "{run:?}");
    assert!(!first.release().unwrap().was_lost());

    // The lease and its key are gone; the history is not, and no lease
    // carries it off.
    let (value, lease) = history_kv(&etcd.endpoint(), "nightly").expect("the history");
    assert_eq!(lease, 0, "the history key has no lease");
    assert_eq!(value["last_run"], serde_json::to_value(&run).unwrap());
    let report = etcd.options(TTL).inspect("nightly").unwrap();
    assert_eq!(report.state, LeaseState::Free);
    assert_eq!(report.last_run.as_ref(), Some(&run));
    let json = serde_json::to_value(&report).unwrap();
    // The same keys as a lock file's `last_run`.
    for key in [
        "started_at",
        "finished_at",
        "duration_seconds",
        "exit_code",
        "signal",
        "outcome",
        "consecutive_failures",
        "last_failure_at",
    ] {
        assert!(json["last_run"].get(key).is_some(), "{key}: {json}");
    }
    assert_eq!(json["last_run"]["outcome"], "failed");
    assert!(report.to_string().ends_with("last run failed"), "{report}");

    // A later holder counts on from it, and a success resets the count but
    // keeps the time of the last failure.
    let second = etcd.options(TTL).try_acquire("nightly").unwrap();
    let held = etcd.options(TTL).inspect("nightly").unwrap();
    assert_eq!(held.state, LeaseState::Held);
    assert_eq!(held.last_run.as_ref(), Some(&run));
    let again = second
        .record_outcome(ended(Outcome::Failed, None, Some(9)))
        .unwrap();
    assert_eq!(again.consecutive_failures, 2);
    assert_eq!((again.exit_code, again.signal), (None, Some(9)));
    let ok = second
        .record_outcome(ended(Outcome::Succeeded, Some(0), None))
        .unwrap();
    assert_eq!(ok.consecutive_failures, 0);
    assert_eq!(ok.last_failure_at, again.last_failure_at);
    assert!(!second.release().unwrap().was_lost());
    // A free lease is listed for its history: its last success is what the
    // silence alarm needs between runs.
    let all = etcd.options(TTL).inspect_all().unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].state, LeaseState::Free);
    assert_eq!(all[0].last_run, Some(ok.clone()));
    assert_eq!(all[0].last_success, Some(ok.finished_at));
    assert_eq!(
        etcd.options(TTL).inspect("nightly").unwrap().last_run,
        Some(ok)
    );
}

#[test]
fn failures_in_a_row_count_from_what_etcd_holds_at_the_write() {
    let etcd = Etcd::start();
    let guard = etcd.options(TTL).try_acquire("counted").unwrap();
    guard
        .record_outcome(ended(Outcome::Failed, Some(1), None))
        .unwrap();
    // Another writer (a holder whose lease lapsed, finishing late) gets
    // there meanwhile: the next write counts on from its history.
    let (mut value, _) = history_kv(&etcd.endpoint(), "counted").unwrap();
    value["last_run"]["consecutive_failures"] = 41.into();
    let bytes = serde_json::to_vec(&value).unwrap();
    raw(&etcd.endpoint(), async |c| {
        c.put("lockfile/history/counted", bytes, None).await
    });
    let run = guard
        .record_outcome(ended(Outcome::Failed, Some(1), None))
        .unwrap();
    assert_eq!(run.consecutive_failures, 42);

    // A value that is not a history is a note in the report, and the next
    // write replaces it, counting from nothing.
    raw(&etcd.endpoint(), async |c| {
        c.put("lockfile/history/counted", "not json", None).await
    });
    let report = etcd.options(TTL).inspect("counted").unwrap();
    assert_eq!(report.state, LeaseState::Held);
    assert_eq!(report.last_run, None);
    let note = report.history_error.clone().expect("a note");
    assert!(note.contains("not one of ours"), "{note}");
    let run = guard
        .record_outcome(ended(Outcome::Failed, Some(1), None))
        .unwrap();
    assert_eq!(run.consecutive_failures, 1);
    assert!(!guard.release().unwrap().was_lost());
}

#[test]
fn a_lost_lease_is_recorded_in_the_history() {
    let etcd = Etcd::start();
    let guard = etcd
        .options(Duration::from_secs(30))
        .try_acquire("lapsed")
        .unwrap();
    raw(&etcd.endpoint(), async |c| {
        c.delete("lockfile/locks/lapsed", None).await
    });
    assert!(guard.wait_lost(Duration::from_secs(5)).is_some());
    let run = guard
        .record_outcome(ended(Outcome::LeaseLost, None, Some(9)))
        .unwrap();
    assert_eq!(run.outcome, Outcome::LeaseLost);
    assert_eq!(run.consecutive_failures, 1);
    assert!(guard.release().unwrap().was_lost());
    let report = etcd.options(TTL).inspect("lapsed").unwrap();
    assert_eq!(report.state, LeaseState::Free);
    assert_eq!(report.last_run, Some(run));
}
