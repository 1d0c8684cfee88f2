//! `lockfile beat`: a `--watchdog` COMMAND proves its progress.

use crate::exit;

/// The statuses of a beat: refused because the lock is another run's.
const REFUSED: i32 = 1;

pub(crate) fn beat() -> i32 {
    let (Some(path), Some(token)) = (
        std::env::var_os("LOCKFILE_PATH"),
        std::env::var_os("LOCKFILE_TOKEN"),
    ) else {
        errln!(
            "lockfile beat: LOCKFILE_PATH and LOCKFILE_TOKEN are not set: run it from a command that `lockfile run` started"
        );
        return exit::USAGE;
    };
    let Some(token) = token.to_str().and_then(|t| t.parse::<uuid::Uuid>().ok()) else {
        errln!("lockfile beat: LOCKFILE_TOKEN is not a run's token: {token:?}");
        return exit::USAGE;
    };
    match lockfile::beat(&path, token) {
        Ok(()) => exit::OK,
        Err(e @ lockfile::Error::NotOurRun { .. }) => {
            errln!("lockfile beat: {e}");
            REFUSED
        }
        Err(e) => {
            errln!("lockfile beat: {e}");
            exit::CANNOT_LOCK
        }
    }
}
