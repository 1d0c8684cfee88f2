//! Leader election over any engine's lease, for services (the `tokio`
//! feature).
//!
//! A service [`campaign`](Election::campaign)s for a name and gets a
//! [`Leadership`]: the lease, its fencing token, and a [`Term`] that says
//! when to stop. Or it hands its leader's work to
//! [`lead`](Election::lead), which campaigns, runs the work while it leads,
//! steps down, and campaigns again, for ever.
//!
//! The promise is the one `lockfile run` keeps for a command: the work is
//! asked to stop `grace` before the lease's deadline (when renewals have
//! been failing), and is stopped for good (its future dropped) just before
//! the deadline, so that it no longer acts as leader by the time another
//! service can be granted the lease. A future cannot be dropped while it
//! runs blocking code, and a paused process cannot be stopped at all: pass
//! the [`fencing_token`](Term::fencing_token) with every write, to a store
//! that refuses older tokens (PostgreSQL's `lockfile.fence`), so that a
//! leader that overstayed is refused by the data itself.
//!
//! Election is written once, here, over [`Engine::start`](crate::Engine::start):
//! every engine has it.

mod election;
mod leadership;

pub use election::Election;
pub use leadership::{Leadership, Term};
