//! `inspect_dir` over records planted to name live processes that do not
//! hold the locks: the verdicts stay right, and what the scan cannot afford
//! to settle is `undecided`, never `stale` or `free`.

use std::path::Path;

use lockfile::LockState;
use lockfile::inspect::{Finding, Undecided};

use crate::support::{ChildHolder, tempdir};

/// Starts a child that plants its record into `count` files of `dir` named
/// `PREFIX-NNNNN.lock`, keeps `descriptors` descriptors open and holds
/// `crowd` other locks.
fn planter(
    dir: &Path,
    prefix: &str,
    count: usize,
    descriptors: usize,
    crowd: usize,
) -> ChildHolder {
    let mut child = ChildHolder::spawn(&format!(
        "plant\t{}\t{prefix}\t{count}\t{descriptors}\t{crowd}",
        dir.display()
    ));
    child.expect_line("ready");
    child
}

fn owner_dead(report: &lockfile::LockReport) -> bool {
    report
        .findings
        .iter()
        .any(|f| matches!(f, Finding::OwnerDead { .. }))
}

/// Records naming a live process that holds none of their locks are
/// `stale`, whether the kernel's table comes in one read or, crowded, in
/// several (when settling them takes walking that process's descriptors).
#[test]
fn records_naming_a_live_process_that_holds_nothing_are_stale() {
    for crowd in [0, 400] {
        let dir = tempdir();
        let child = planter(dir.path(), "plant", 200, 2_000, crowd);
        let reports = lockfile::inspect_dir(dir.path()).unwrap();
        assert_eq!(reports.len(), 200, "crowd {crowd}");
        for report in reports {
            let report = report.unwrap();
            assert_eq!(report.state, LockState::Stale, "crowd {crowd}: {report:?}");
            assert_eq!(report.owner.as_ref().map(|o| o.pid), Some(child.pid()));
            assert!(!owner_dead(&report), "{report:?}");
        }
        // One file alone takes the same path.
        let one = lockfile::inspect(dir.path().join("plant-00007.lock")).unwrap();
        assert_eq!(one.state, LockState::Stale, "crowd {crowd}: {one:?}");
    }
}

/// Past the scan's budget of descriptors, the files whose owner would have
/// to be walked are `undecided`, with a finding that says why; none is
/// called `stale` or `free` on a guess. Two processes with 17,000
/// descriptors each are more than one scan walks; the crowd of held locks
/// makes the kernel's table come in several reads (even with 64 KiB pages),
/// so that the table alone cannot settle the files.
#[test]
fn what_the_walking_budget_cannot_settle_is_undecided() {
    let dir = tempdir();
    let a = planter(dir.path(), "a", 50, 17_000, 1_500);
    let b = planter(dir.path(), "b", 50, 17_000, 0);
    let reports = lockfile::inspect_dir(dir.path()).unwrap();
    assert_eq!(reports.len(), 100);
    let (mut stale, mut undecided) = (0, 0);
    for report in reports {
        let report = report.unwrap();
        let owner = report.owner.as_ref().map(|o| o.pid);
        assert!(
            owner == Some(a.pid()) || owner == Some(b.pid()),
            "{report:?}"
        );
        match report.state {
            LockState::Stale => stale += 1,
            LockState::Undecided => {
                undecided += 1;
                assert!(
                    report.findings.iter().any(|f| matches!(
                        f,
                        Finding::Undecided {
                            reason: Undecided::WalkBudget { .. }
                        }
                    )),
                    "{report:?}"
                );
            }
            other => panic!("{} is {other}: {report:?}", report.path.display()),
        }
    }
    // The first owner walked fits the budget; the second does not.
    assert_eq!((stale, undecided), (50, 50));
}
