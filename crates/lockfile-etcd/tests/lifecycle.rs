//! The renewal thread never outlives its guard: not after release, not after
//! drop, not after a loss, and not when etcd stops answering.
//!
//! One test in its own binary, because it counts this process's threads.

mod common;

use std::time::{Duration, Instant};

use common::{Etcd, EtcdExt};

/// This process's threads named like the lease thread. A joined thread may
/// linger in `/proc/self/task` for a moment (the kernel wakes the joiner
/// before it tears the task down), so a count above what the caller expects
/// is read again for up to a second before it is believed.
fn lease_threads_settled(expected: usize) -> usize {
    let count = || {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.trim_end() == "lockfile-etcd")
            .count()
    };
    let started = Instant::now();
    let mut n = count();
    while n > expected && started.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(5));
        n = count();
    }
    n
}

#[test]
fn the_renewal_thread_never_outlives_the_guard() {
    let etcd = Etcd::start();
    let ttl = Duration::from_secs(2);
    assert_eq!(lease_threads_settled(0), 0);

    let guard = etcd.options(ttl).try_acquire("life").unwrap();
    assert_eq!(lease_threads_settled(1), 1);
    assert!(!guard.release().unwrap().was_lost());
    assert_eq!(lease_threads_settled(0), 0, "release joins the thread");

    drop(etcd.options(ttl).try_acquire("life").unwrap());
    assert_eq!(lease_threads_settled(0), 0, "drop joins the thread");

    // A failed acquisition leaves no thread behind either.
    let held = etcd.options(ttl).try_acquire("life").unwrap();
    assert!(
        etcd.options(ttl)
            .try_acquire("life")
            .unwrap_err()
            .is_contended()
    );
    assert_eq!(lease_threads_settled(1), 1);
    drop(held);

    // etcd stops answering: the guard loses the lease by its deadline, and
    // dropping it still returns promptly (each release request is bounded).
    let request_timeout = Duration::from_millis(500);
    let guard = etcd
        .options(ttl)
        .request_timeout(request_timeout)
        .try_acquire("life")
        .unwrap();
    etcd.pause();
    assert!(guard.wait_lost(ttl * 2).is_some());
    let dropping = Instant::now();
    drop(guard);
    let took = dropping.elapsed();
    etcd.resume();
    assert_eq!(
        lease_threads_settled(0),
        0,
        "a lost guard's thread is joined too"
    );
    assert!(
        took < request_timeout * 2 + Duration::from_millis(500),
        "drop took {took:?} with etcd paused"
    );
}
