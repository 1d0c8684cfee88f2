//! What a run holds while COMMAND runs: a lock file ([`file`]) or a lease
//! of any engine ([`lease`]). The run pipeline (`run::run`) drives a hold
//! through [`Hold`] alone, and never knows which one it drives; a new kind of
//! hold is a file here and an arm in `run::run`. A slot of N (`--slots`) is
//! no kind of its own: the library takes one lock file of the set, the
//! lease layer one lease, and each is held as any other.

pub(crate) mod file;
pub(crate) mod lease;

use std::ffi::OsString;
use std::time::{Duration, Instant, SystemTime};

use lockfile::OwnerRecord;
use lockfile::history::RunEnd;
use lockfile::tick::Claim;

use crate::run::signals::BlockedSignals;
use crate::run::supervise::{Child, StopSequence, Wake};

/// What a run needs of what it holds, from the moment it is taken to its
/// release.
pub(crate) trait Hold {
    /// The run's owner record: its token (`LOCKFILE_TOKEN`) and its job.
    fn record(&self) -> &OwnerRecord;

    /// The tick claimed together with the hold (`--once-per`).
    fn claim(&self) -> Option<&Claim>;

    /// The hold's name in lines and events: a lock file's path, a lease's
    /// name.
    fn label(&self) -> String;

    /// What COMMAND learns of the hold, beyond the variables every hold
    /// gives (`LOCKFILE_TOKEN`, `LOCKFILE_TICK`): `LOCKFILE_PATH`,
    /// `LOCKFILE_LEASE` and `LOCKFILE_FENCING_TOKEN`, `LOCKFILE_BEAT`.
    fn env(&self) -> Vec<(&'static str, OsString)>;

    /// Starts COMMAND, with `env`, under the hold.
    fn spawn(
        &mut self,
        signals: &mut BlockedSignals,
        program: &OsString,
        args: &[OsString],
        env: &[(&str, OsString)],
    ) -> Result<Child, (i32, String)>;

    /// The wrapper's own heartbeat interval, when the hold keeps one.
    fn heartbeat_every(&self) -> Option<Duration>;

    /// The wrapper's heartbeat, now due.
    fn heartbeat(&self);

    /// The modification time of the file COMMAND beats on under
    /// `--watchdog` (`LOCKFILE_BEAT`).
    fn beaten(&self) -> Option<SystemTime>;

    /// What the hold itself asks of the supervision when woken at `now` (a
    /// lease about to lapse asks for a stop), whoever began the stop
    /// sequence.
    fn watch(&mut self, stop: &StopSequence, now: Instant) -> Wake;

    /// Whether the processes COMMAND left behind keep the hold, and are
    /// supervised until they exit; `limited` says that a limit applies to
    /// them or the run is being stopped. Returns the line that says so.
    fn keeps_leftovers(&self, limited: bool, count: usize) -> Option<String>;

    /// Whether the run lost its protection while COMMAND ran: the lease
    /// lapsed, or was about to and COMMAND was stopped for it.
    fn lost(&self) -> bool;

    /// Records how the run ended, then releases the hold, unless processes
    /// that survived the stop sequence (`survivors`) or that COMMAND left
    /// behind still hold it.
    fn finish(self: Box<Self>, end: RunEnd, survivors: bool) -> Released;
}

/// How a hold ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// Released, or left held by processes that still run under it.
    Done,
    /// The lease turned out lost before its release: the run was not
    /// protected to its end.
    Lost,
}

/// Why no hold was taken: the run's exit status, the reason said already
/// (a skip line, an error).
pub(crate) type NotHeld = i32;
