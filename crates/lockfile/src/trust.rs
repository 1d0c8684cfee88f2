//! What in a lock file may be believed: whether the file was planted by
//! someone who can rewrite it at will, and whether a time it carries is one
//! that could have happened. See the crate docs' threat model.

use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How far in the future a recorded time may lie and still be believed:
/// clocks of hosts that share a directory drift, by seconds, not minutes.
pub(crate) const FUTURE_SLACK: Duration = Duration::from_secs(60);

/// How far `time` lies beyond `now` plus the slack: `Some` when it is a time
/// no run can have recorded yet.
pub(crate) fn ahead(time: SystemTime, now: SystemTime) -> Option<Duration> {
    time.duration_since(now)
        .ok()
        .filter(|ahead| *ahead > FUTURE_SLACK)
}

/// Whether `time` is possible: not more than the slack in the future.
pub(crate) fn possible(time: SystemTime, now: SystemTime) -> bool {
    ahead(time, now).is_none()
}

/// The facts about a lock file's directory that the planted rule reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DirFacts {
    /// Its mode bits (the sticky bit and the write bits).
    pub(crate) mode: u32,
    /// Its owner.
    pub(crate) uid: u32,
}

impl DirFacts {
    pub(crate) fn of(meta: &Metadata) -> DirFacts {
        DirFacts {
            mode: meta.mode(),
            uid: meta.uid(),
        }
    }

    /// The directory that holds `path`, as the kernel resolved it to open
    /// the file: symlinks in it followed.
    pub(crate) fn containing(path: &Path) -> io::Result<DirFacts> {
        std::fs::metadata(crate::paths::parent_dir(path)).map(|m| DirFacts::of(&m))
    }

    /// Sticky, and writable by its group or by everyone: a directory where
    /// anyone of them may create a file, but only its owner may remove it.
    fn shared_sticky(self) -> bool {
        const STICKY: u32 = 0o1000;
        const GROUP_OR_OTHER_WRITE: u32 = 0o022;
        self.mode & STICKY != 0 && self.mode & GROUP_OR_OTHER_WRITE != 0
    }
}

/// A planted file: who owns it, and who owns its directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Planted {
    pub(crate) owner_uid: u32,
    pub(crate) dir_owner_uid: u32,
}

/// The kernel's `fs.protected_regular` rule: a file in a shared sticky
/// directory that neither `euid` nor the directory's owner owns was put
/// there by someone else, who may unlink it, rewrite it and set its times
/// whenever they like. Nothing it says can be trusted, and a lock on it
/// excludes nobody (its owner can unlink it while it is held).
///
/// A file of another user in a directory that is not shared this way (a
/// service's file in root's `/var/lock/jobs`) is not planted: only the
/// directory's owner could have put it there.
pub(crate) fn planted(file_uid: u32, dir: DirFacts, euid: u32) -> Option<Planted> {
    (dir.shared_sticky() && file_uid != euid && file_uid != dir.uid).then_some(Planted {
        owner_uid: file_uid,
        dir_owner_uid: dir.uid,
    })
}

/// This process's effective uid: the caller of the planted rule.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: u32 = 0;
    const ALICE: u32 = 1000;
    const MALLORY: u32 = 1001;

    fn dir(mode: u32, uid: u32) -> DirFacts {
        DirFacts {
            mode: 0o040000 | mode,
            uid,
        }
    }

    #[test]
    fn another_users_file_in_a_shared_sticky_dir_is_planted() {
        // /tmp: root's, sticky, everyone may write.
        let tmp = dir(0o1777, ROOT);
        assert_eq!(
            planted(MALLORY, tmp, ROOT),
            Some(Planted {
                owner_uid: MALLORY,
                dir_owner_uid: ROOT
            })
        );
        assert!(planted(MALLORY, tmp, ALICE).is_some());
        // A team's directory: sticky, its group may write.
        assert!(planted(MALLORY, dir(0o1770, ROOT), ALICE).is_some());
    }

    #[test]
    fn a_file_of_the_caller_or_of_the_directorys_owner_is_not_planted() {
        let tmp = dir(0o1777, ROOT);
        assert_eq!(planted(ALICE, tmp, ALICE), None, "the caller's own");
        assert_eq!(planted(ROOT, tmp, ALICE), None, "the directory owner's");
        // Mallory's own shared directory: her files there are hers to keep.
        assert_eq!(planted(MALLORY, dir(0o1777, MALLORY), ROOT), None);
    }

    #[test]
    fn another_users_file_in_a_directory_not_shared_this_way_is_normal() {
        // root's /var/lock/jobs, with its jobs' files owned by service users.
        assert_eq!(planted(ALICE, dir(0o755, ROOT), ROOT), None);
        // Shared, but not sticky: anyone may delete anything, planted or not,
        // and the kernel's rule does not cover it either.
        assert_eq!(planted(ALICE, dir(0o777, ROOT), ROOT), None);
        // Sticky, but only its owner may write.
        assert_eq!(planted(ALICE, dir(0o1755, ROOT), ROOT), None);
    }

    #[test]
    fn a_time_is_impossible_only_beyond_a_minute_ahead() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert!(possible(now, now));
        assert!(possible(now - Duration::from_secs(3600), now));
        assert!(possible(now + FUTURE_SLACK, now));
        let later = now + FUTURE_SLACK + Duration::from_secs(1);
        assert_eq!(
            ahead(later, now),
            Some(FUTURE_SLACK + Duration::from_secs(1))
        );
        assert!(!possible(later, now));
    }
}
