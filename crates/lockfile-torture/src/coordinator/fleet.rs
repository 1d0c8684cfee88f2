//! The worker processes as the coordinator tracks them: its run loop starts
//! and reaps them, the chaos loop kills and restarts them, and both need the
//! same view of which slot each one works and whether it is done.

use std::process::Child;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Library,
    Run,
}

#[derive(Debug)]
pub(super) struct Worker {
    pub(super) slot: usize,
    pub(super) kind: Kind,
    pub(super) child: Option<Child>,
    pub(super) finished: bool,
}
