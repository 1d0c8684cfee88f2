//! N slots: at most N holders, each with its own record; a dead holder's
//! slot freed at once; a waiter woken by any slot; the bound under chaos,
//! judged by a detector that knows nothing of locks.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::{Duration, Instant};

use lockfile::slot::{SlotCount, slot_path};
use lockfile::{Error, LockOptions};

use crate::support::{ChildHolder, tempdir};

fn count(n: u64) -> SlotCount {
    SlotCount::new(n).unwrap()
}

#[test]
fn n_holders_take_n_slots_each_with_its_record_and_the_next_is_told_who() {
    let dir = tempdir();
    let path = dir.path().join("gpu.lock");
    let guards: Vec<_> = (0..3)
        .map(|_| {
            LockOptions::new()
                .job("train")
                .try_acquire_slot(&path, count(3))
                .unwrap()
        })
        .collect();
    for (i, guard) in guards.iter().enumerate() {
        let slot = guard.slot().unwrap();
        assert_eq!((usize::from(slot.index), slot.of), (i, 3));
        assert_eq!(guard.path(), slot_path(&path, slot.index));
        assert_eq!(guard.record().slot, Some(slot));
        let on_disk = lockfile::inspect(guard.path()).unwrap();
        assert_eq!(on_disk.owner.unwrap().slot, Some(slot));
    }
    assert_eq!(
        dir.path().join("gpu@2.lock"),
        guards[2].path(),
        "the layout the docs promise"
    );
    let err = LockOptions::new()
        .try_acquire_slot(&path, count(3))
        .unwrap_err();
    assert!(err.is_contended(), "{err}");
    let Error::SlotsHeld {
        holders,
        count: n,
        waited,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!((*n, *waited, holders.len()), (3, None, 3));
    let text = err.to_string();
    assert!(text.starts_with("all 3 slots of `"), "{text}");
    for slot in 0..3 {
        assert!(
            text.contains(&format!("slot {slot} by pid {}", std::process::id())),
            "{text}"
        );
    }
    // A release frees its slot for the next.
    let mut guards = guards;
    guards.remove(1).release().unwrap();
    let next = LockOptions::new()
        .try_acquire_slot(&path, count(3))
        .unwrap();
    assert_eq!(next.slot().unwrap().index, 1);
}

#[test]
fn a_message_names_the_first_holders_and_counts_the_rest() {
    let dir = tempdir();
    let path = dir.path().join("many.lock");
    let _held: Vec<_> = (0..5)
        .map(|_| {
            LockOptions::new()
                .try_acquire_slot(&path, count(5))
                .unwrap()
        })
        .collect();
    let text = LockOptions::new()
        .try_acquire_slot(&path, count(5))
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("slot 2 by") && !text.contains("slot 3 by"),
        "{text}"
    );
    assert!(text.ends_with("; and 2 more"), "{text}");
}

#[test]
fn one_slot_is_the_plain_lock() {
    let dir = tempdir();
    let path = dir.path().join("job.lock");
    let plain = LockOptions::new().try_acquire(&path).unwrap();
    assert!(
        LockOptions::new()
            .try_acquire_slot(&path, count(1))
            .unwrap_err()
            .is_contended()
    );
    // A slotted run beside a plain one takes another slot: together they
    // are never more than the larger N.
    let slotted = LockOptions::new()
        .try_acquire_slot(&path, count(2))
        .unwrap();
    assert_eq!(slotted.slot().unwrap().index, 1);
    assert!(
        LockOptions::new()
            .try_acquire_slot(&path, count(2))
            .unwrap_err()
            .is_contended()
    );
    drop(plain);
    let one = LockOptions::new()
        .try_acquire_slot(&path, count(1))
        .unwrap();
    assert!(
        LockOptions::new()
            .try_acquire(&path)
            .unwrap_err()
            .is_contended()
    );
    drop((one, slotted));
}

#[test]
fn contenders_that_disagree_on_n_never_exceed_the_largest() {
    let dir = tempdir();
    let path = dir.path().join("backup.lock");
    // Three run under N = 3; the crontab says 2 now on this host.
    let old: Vec<_> = (0..3)
        .map(|_| {
            LockOptions::new()
                .try_acquire_slot(&path, count(3))
                .unwrap()
        })
        .collect();
    let err = LockOptions::new()
        .try_acquire_slot(&path, count(2))
        .unwrap_err();
    let Error::SlotsHeld { holders, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(holders.len(), 2, "only its own two slots are its business");
    // Slot 2 ending frees nothing for N = 2: it still waits for 0 or 1.
    let mut old = old;
    old.pop().unwrap().release().unwrap();
    assert!(
        LockOptions::new()
            .try_acquire_slot(&path, count(2))
            .unwrap_err()
            .is_contended()
    );
    old.remove(0).release().unwrap();
    let new = LockOptions::new()
        .try_acquire_slot(&path, count(2))
        .unwrap();
    assert_eq!(
        new.slot().unwrap(),
        lockfile::record::Slot { index: 0, of: 2 }
    );
}

#[test]
fn a_killed_holder_frees_its_slot_and_a_waiter_takes_it() {
    let dir = tempdir();
    let path = dir.path().join("w.lock");
    let mut holders: Vec<ChildHolder> = (0..2)
        .map(|_| {
            let mut child = ChildHolder::spawn(&format!("hold-slot\t{}\t2", path.display()));
            child.expect_line("ready ");
            child
        })
        .collect();
    // Both slots held by live processes: a waiter waits.
    let mut waiter = ChildHolder::spawn(&format!("hold-slot\t{}\t2", path.display()));
    std::thread::sleep(Duration::from_millis(200));
    assert!(waiter.child.try_wait().unwrap().is_none());
    let victim = holders.remove(1);
    let held = lockfile::inspect(slot_path(&path, 1)).unwrap();
    assert_eq!(held.owner.unwrap().pid, victim.child.id());
    drop(victim); // SIGKILLed and reaped
    assert_eq!(waiter.expect_line("ready "), "ready 1");
    drop((holders, waiter));
}

#[test]
fn a_bounded_wait_ends_naming_every_holder_and_how_long_it_waited() {
    let dir = tempdir();
    let path = dir.path().join("t.lock");
    let _a = LockOptions::new()
        .try_acquire_slot(&path, count(2))
        .unwrap();
    let _b = LockOptions::new()
        .try_acquire_slot(&path, count(2))
        .unwrap();
    let err = LockOptions::new()
        .timeout(Duration::from_millis(300))
        .acquire_slot(&path, count(2))
        .unwrap_err();
    let Error::SlotsHeld {
        waited: Some(waited),
        holders,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(*waited >= Duration::from_millis(300));
    assert_eq!(holders.len(), 2);
    assert!(
        err.to_string()
            .starts_with("gave up waiting for any of the 2 slots of `"),
        "{err}"
    );
    assert_eq!(
        std::io::Error::from(err).kind(),
        std::io::ErrorKind::TimedOut
    );
}

#[test]
fn a_waiter_wakes_for_the_slot_that_frees_whichever_it_is() {
    let dir = tempdir();
    let path = dir.path().join("any.lock");
    let mut held: Vec<_> = (0..4)
        .map(|_| {
            LockOptions::new()
                .try_acquire_slot(&path, count(4))
                .unwrap()
        })
        .collect();
    let waiter = {
        let path = path.clone();
        std::thread::spawn(move || LockOptions::new().acquire_slot(&path, count(4)).unwrap())
    };
    std::thread::sleep(Duration::from_millis(100));
    held.remove(2).release().unwrap();
    let got = waiter.join().unwrap();
    assert_eq!(got.slot().unwrap().index, 2);
}

#[test]
fn what_slots_cannot_be_is_refused_naming_the_path() {
    let dir = tempdir();
    let path = dir.path().join("r.lock");
    for err in [
        LockOptions::new()
            .evict_after(Duration::from_secs(60))
            .try_acquire_slot(&path, count(2))
            .unwrap_err(),
        LockOptions::new()
            .shared(true)
            .try_acquire_slot(&path, count(2))
            .unwrap_err(),
        LockOptions::new()
            .claim_tick(lockfile::tick::TickClaim::new(
                lockfile::tick::Schedule::new(Duration::from_secs(60), Duration::ZERO).unwrap(),
                Instant::now(),
            ))
            .try_acquire_slot(&path, count(2))
            .unwrap_err(),
    ] {
        assert!(!err.is_contended());
        assert_eq!(err.path(), path);
        let text = err.to_string();
        assert!(text.contains("slots"), "{text}");
    }
    assert!(!path.exists(), "nothing created");
}

#[test]
fn a_planted_link_at_a_slot_is_refused_and_never_followed() {
    let dir = tempdir();
    let path = dir.path().join("p.lock");
    let target = dir.path().join("precious");
    fs::write(&target, b"keep me").unwrap();
    symlink(&target, slot_path(&path, 1)).unwrap();
    let _zero = LockOptions::new()
        .try_acquire_slot(&path, count(2))
        .unwrap();
    let err = LockOptions::new()
        .try_acquire_slot(&path, count(2))
        .unwrap_err();
    assert!(matches!(err, Error::Symlink { .. }), "{err:?}");
    assert_eq!(err.path(), slot_path(&path, 1));
    assert_eq!(fs::read(&target).unwrap(), b"keep me");
}

#[test]
fn a_slot_that_cannot_be_taken_never_keeps_another_from_being_taken() {
    let dir = tempdir();
    let path = dir.path().join("q.lock");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        slot_path(&path, 1),
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    let _zero = LockOptions::new()
        .try_acquire_slot(&path, count(3))
        .unwrap();
    let two = LockOptions::new()
        .try_acquire_slot(&path, count(3))
        .unwrap();
    assert_eq!(two.slot().unwrap().index, 2, "past the FIFO");
    // With no slot left, the error names the slot that is in the way.
    let err = LockOptions::new()
        .try_acquire_slot(&path, count(3))
        .unwrap_err();
    crate::support::assert_not_regular(&err, "FIFO");
    assert_eq!(err.path(), slot_path(&path, 1));
}

#[test]
fn a_fifo_at_a_slot_is_never_waited_on_and_a_bounded_wait_names_it() {
    let dir = tempdir();
    let path = dir.path().join("f.lock");
    let fifo = slot_path(&path, 1);
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    let _zero = LockOptions::new()
        .try_acquire_slot(&path, count(2))
        .unwrap();
    let err = LockOptions::new()
        .timeout(Duration::from_millis(300))
        .acquire_slot(&path, count(2))
        .unwrap_err();
    crate::support::assert_not_regular(&err, "FIFO");
}

#[test]
fn in_force_believes_only_held_slots_records() {
    use lockfile::record::Slot;
    let record = |index, of| {
        let mut owner = lockfile::OwnerRecord::current(None, None);
        owner.slot = Some(Slot { index, of });
        owner
    };
    let (three, two, forged) = (record(0, 3), record(1, 2), record(1, 60_000));
    // A released record of N = 3; the holders now run N = 2.
    assert_eq!(
        lockfile::slot::in_force([(false, Some(&three)), (true, Some(&two))]),
        (1, 2)
    );
    assert_eq!(
        lockfile::slot::in_force([(true, Some(&forged)), (false, None)]),
        (1, 2),
        "a claim past 1,024 is not believed"
    );
}

/// The chaos test's holders: take a slot, and inside the section leave a
/// marker the detector counts (see [`live_markers`]), count, hold a moment,
/// count again, remove the marker, release. Until killed.
pub(crate) fn sections(path: &Path, n: u64, detect: &Path, counts: &Path) -> i32 {
    let slots = count(n);
    let me = std::process::id();
    let marker = detect.join(me.to_string());
    let mut log = fs::OpenOptions::new().append(true).open(counts).unwrap();
    loop {
        let guard = LockOptions::new().acquire_slot(path, slots).unwrap();
        fs::write(&marker, b"").unwrap();
        for _ in 0..2 {
            // One write per line: O_APPEND keeps the lines whole.
            log.write_all(format!("{}\n", live_markers(detect)).as_bytes())
                .unwrap();
            std::thread::sleep(Duration::from_millis(3));
        }
        fs::remove_file(&marker).unwrap();
        drop(guard);
    }
}

/// The detector: the markers whose process is not exiting. A SIGKILLed
/// holder leaves its marker, which stops counting the moment the process
/// begins to exit (`PF_EXITING`, set before the kernel closes its files and
/// so frees its slot), not when it is reaped: that would count a dead
/// holder's section beside its successor's.
fn live_markers(detect: &Path) -> usize {
    const PF_EXITING: u64 = 0x4;
    fs::read_dir(detect)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // After the command's name: state, ppid, pgrp, session,
                    // tty, tpgid, flags.
                    let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split(' ').collect();
                    let flags: u64 = fields.get(6)?.parse().ok()?;
                    Some(!matches!(fields[0], "Z" | "X") && flags & PF_EXITING == 0)
                })
                .unwrap_or(false)
        })
        .count()
}

#[test]
fn the_bound_holds_under_chaos() {
    const N: u64 = 3;
    const WORKERS: usize = 7;
    let dir = tempdir();
    let path = dir.path().join("chaos.lock");
    let detect = dir.path().join("inside");
    fs::create_dir(&detect).unwrap();
    let counts = dir.path().join("counts");
    fs::write(&counts, b"").unwrap();
    let spawn = || {
        ChildHolder::spawn(&format!(
            "slot-sections\t{}\t{N}\t{}\t{}",
            path.display(),
            detect.display(),
            counts.display()
        ))
    };
    let mut workers: Vec<ChildHolder> = (0..WORKERS).map(|_| spawn()).collect();
    let mut kills = 0;
    let end = Instant::now() + Duration::from_secs(4);
    let mut pick = 0usize;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(40));
        // SIGKILL a worker (often one inside its section) and start another.
        pick = (pick * 7 + 3) % WORKERS;
        workers[pick] = spawn(); // the old one is killed and reaped on drop
        kills += 1;
    }
    drop(workers);
    let seen: Vec<usize> = fs::read_to_string(&counts)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let max = seen.iter().copied().max().unwrap_or(0);
    eprintln!(
        "slots chaos: {} sections, {kills} kills, at most {max} at once (N = {N})",
        seen.len() / 2
    );
    assert!(seen.len() > 20, "too few sections to judge: {}", seen.len());
    assert!(max <= N as usize, "{max} sections at once with {N} slots");
    assert!(max >= 1);
}
