//! `inspect` while the kernel's lock table changes under it.
//!
//! Regression tests for two races that `inspect` once lost (see each test).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lockfile::LockState;
use lockfile::inspect::Finding;

use crate::support::{ChildHolder, lock_path, tempdir};

/// Takes and releases locks on a few other files without pause, so that the
/// kernel's lock table changes constantly, until dropped.
struct Churn {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Churn {
    fn start(dir: &std::path::Path) -> Churn {
        let files: Vec<std::fs::File> = (0..4)
            .map(|i| std::fs::File::create(dir.join(format!("churn-{i}"))).unwrap())
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut n = 0;
            while !flag.load(Ordering::Relaxed) {
                for f in &files {
                    f.lock().unwrap();
                    f.unlock().unwrap();
                    n += 1;
                }
            }
            n
        });
        Churn {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops and returns how many locks were taken meanwhile.
    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// Regression: a lock held steadily by a live process is reported `stale` (or
/// `free`) when other flock locks anywhere on the host are taken or released
/// while `inspect` reads `/proc/locks`.
///
/// `/proc/locks` is a seq_file: every read(2) restarts the walk of the lock
/// list at the index where the previous read stopped. `inspect` reads it with
/// `read_to_string`, which starts with a 32-byte probe read and then doubles
/// its buffer, so even a table of a few lines takes several reads. When a
/// lock listed before ours is released between two reads, every later entry
/// moves up one index and ours is skipped; the file then looks unlocked and
/// its unreleased record makes it `stale`. (Tables larger than one page need
/// several reads whatever the buffer, so the same can happen on a busy host.)
#[test]
fn inspect_sees_a_held_lock_while_other_locks_come_and_go() {
    let dir = tempdir();
    let path = lock_path(&dir, "steady.lock");
    let (_holder, _) = ChildHolder::hold(&path, "steady");
    let churn = Churn::start(dir.path());
    let mut wrong = Vec::new();
    let inspections = 2000;
    for _ in 0..inspections {
        let report = lockfile::inspect(&path).unwrap();
        if report.state != LockState::Held {
            wrong.push(report.state);
        }
    }
    let churned = churn.stop();
    assert!(churned > 0, "the churn thread never ran");
    assert!(
        wrong.is_empty(),
        "{} of {inspections} inspections of a steadily held lock said otherwise, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

/// Regression: `inspect` called a lock `stale` ("nobody holds it, the owner never
/// released it") while its owner is alive and holding it.
///
/// Besides the skipped `/proc/locks` entry above, `inspect` snapshots the
/// lock table before it reads the file: a holder that takes the lock and
/// writes its record between the two is seen as an unreleased record on an
/// unlocked file. Reap is not fooled (it re-checks under the lock), but the
/// report and `lockfile inspect` are wrong.
#[test]
fn inspect_never_calls_a_live_holders_lock_stale() {
    let dir = tempdir();
    let path = lock_path(&dir, "busy.lock");
    let marker = dir.path().join("inside.marker");
    // A child that takes and releases the lock in a loop.
    let busy = ChildHolder::spawn(&format!(
        "contend\t{}\t{}\t1000000",
        path.display(),
        marker.display()
    ));
    let (mut stale_alive, mut held) = (0, 0);
    let inspections = 3000;
    for _ in 0..inspections {
        let report = lockfile::inspect(&path).unwrap();
        match report.state {
            LockState::Held => held += 1,
            LockState::Stale
                if !report
                    .findings
                    .iter()
                    .any(|f| matches!(f, Finding::OwnerDead { .. }))
                    && report.owner.as_ref().map(|o| o.pid) == Some(busy.pid()) =>
            {
                stale_alive += 1
            }
            _ => {}
        }
    }
    assert!(held > 0, "the child never held the lock while inspected");
    assert_eq!(
        stale_alive,
        0,
        "{stale_alive} of {inspections} inspections called the lock stale while its owner pid {} was alive and taking it",
        busy.pid()
    );
}
