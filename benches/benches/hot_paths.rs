//! Criterion benchmarks of the library's hot paths.
//!
//! These give absolute times with confidence intervals, for tracking one
//! machine over time. For comparisons (against raw syscalls, std, fs2, fs4,
//! fd-lock, Python's filelock and flock(1)) run the `compare` program, which
//! measures ratios against floors in the same run; see BENCHMARKS.md.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use lockfile::{LockGuard, OwnerRecord};

fn lock_cycle(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cycle.lock");
    // Steady state: the file exists and holds our released record.
    LockGuard::try_acquire(&path).unwrap().release().unwrap();
    c.bench_function("try_acquire + release, uncontended", |b| {
        b.iter(|| {
            LockGuard::try_acquire(black_box(&path))
                .unwrap()
                .release()
                .unwrap()
        })
    });

    // Another open file description holds the lock: to flock(2) that is the
    // same as another process holding it.
    let held = dir.path().join("held.lock");
    let _holder = LockGuard::try_acquire(&held).unwrap();
    c.bench_function("try_acquire against a held lock", |b| {
        b.iter(|| {
            let err = LockGuard::try_acquire(black_box(&held)).unwrap_err();
            assert!(err.is_contended());
            err
        })
    });
}

fn heartbeat(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let guard = LockGuard::try_acquire(dir.path().join("hb.lock")).unwrap();
    c.bench_function("heartbeat", |b| b.iter(|| guard.heartbeat().unwrap()));
}

fn inspect(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let free = dir.path().join("free.lock");
    LockGuard::try_acquire(&free).unwrap().release().unwrap();
    let held = dir.path().join("held.lock");
    let _guard = LockGuard::try_acquire(&held).unwrap();
    c.bench_function("inspect, one free file", |b| {
        b.iter(|| lockfile::inspect(black_box(&free)).unwrap())
    });
    c.bench_function("inspect, one held file", |b| {
        b.iter(|| lockfile::inspect(black_box(&held)).unwrap())
    });
}

/// A directory of `files` lock files with released records, every 100th
/// held (by this process: criterion needs no second process, and the
/// `compare` program measures the cross-process case).
fn lock_dir(dir: &Path, files: usize) -> Vec<LockGuard> {
    let mut held = Vec::new();
    for i in 0..files {
        let path = dir.join(format!("job-{i:05}.lock"));
        let guard = LockGuard::try_acquire(&path).unwrap();
        if i % 100 == 0 {
            held.push(guard);
        } else {
            guard.release().unwrap();
        }
    }
    held
}

fn inspect_dir(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let _held = lock_dir(dir.path(), 10_000);
    let mut group = c.benchmark_group("inspect_dir");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("10,000 files, 100 held", |b| {
        b.iter(|| {
            let reports = lockfile::inspect_dir(black_box(dir.path())).unwrap();
            assert_eq!(reports.len(), 10_000);
            reports
        })
    });
    group.finish();
}

fn record(c: &mut Criterion) {
    // A real record, as the lock file holds it (512 bytes, space-padded).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("record.lock");
    let mut options = lockfile::LockOptions::new();
    options
        .job("nightly-backup")
        .heartbeat_interval(Duration::from_secs(30));
    options.try_acquire(&path).unwrap().release().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let owner: OwnerRecord = lockfile::record::decode_record(&bytes).unwrap();

    // The crate's own encoder is private; this measures the same serde
    // serialisation of the owner record, without the document's envelope
    // and padding.
    c.bench_function("record encode (serde_json::to_vec(&OwnerRecord))", |b| {
        b.iter(|| serde_json::to_vec(black_box(&owner)).unwrap())
    });
    c.bench_function("record decode (decode_record, 512 B)", |b| {
        b.iter(|| lockfile::record::decode_record(black_box(&bytes)).unwrap())
    });
}

criterion_group!(benches, lock_cycle, heartbeat, inspect, inspect_dir, record);
criterion_main!(benches);
