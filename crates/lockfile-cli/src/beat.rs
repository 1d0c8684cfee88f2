//! `lockfile beat`: a `--watchdog` COMMAND proves its progress, whatever
//! the hold: on the lock file (`LOCKFILE_PATH`), or on the run's beat file
//! under a lease (`LOCKFILE_BEAT`).

use crate::exit;
use crate::run::beat_file::{self, BeatError};

/// The statuses of a beat: refused because the lock is another run's.
const REFUSED: i32 = 1;

pub(crate) fn beat() -> i32 {
    let Some(token) = std::env::var_os("LOCKFILE_TOKEN") else {
        errln!(
            "lockfile beat: LOCKFILE_TOKEN is not set: run it from a command that `lockfile run` started"
        );
        return exit::USAGE;
    };
    let Some(token) = token.to_str().and_then(|t| t.parse::<uuid::Uuid>().ok()) else {
        errln!(
            "lockfile beat: LOCKFILE_TOKEN is not a run's token: {}",
            lockfile::text::quoted_bytes(std::os::unix::ffi::OsStrExt::as_bytes(token.as_os_str()))
        );
        return exit::USAGE;
    };
    if let Some(path) = std::env::var_os("LOCKFILE_PATH") {
        return match lockfile::beat(&path, token) {
            Ok(()) => exit::OK,
            Err(e @ lockfile::Error::NotOurRun { .. }) => {
                errln!("lockfile beat: {e}");
                REFUSED
            }
            Err(e) => {
                errln!("lockfile beat: {e}");
                exit::CANNOT_LOCK
            }
        };
    }
    if let Some(path) = std::env::var_os("LOCKFILE_BEAT") {
        return match beat_file::beat(path.as_ref(), token) {
            Ok(()) => exit::OK,
            Err(e @ BeatError::NotOurRun { .. }) => {
                errln!("lockfile beat: {e}");
                REFUSED
            }
            Err(e) => {
                errln!("lockfile beat: {e}");
                exit::CANNOT_LOCK
            }
        };
    }
    if std::env::var_os("LOCKFILE_LEASE").is_some() {
        // A lease run without --watchdog: its wrapper's renewals are the
        // heartbeat, and nothing watches COMMAND's. A beat is a promise
        // kept to nobody, not a mistake.
        return exit::OK;
    }
    errln!(
        "lockfile beat: neither LOCKFILE_PATH nor LOCKFILE_BEAT is set: run it from a command that `lockfile run` started"
    );
    exit::USAGE
}
