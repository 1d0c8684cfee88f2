//! Linux: `/proc` for identities and lock holders, a POSIX timer for bounded
//! waits. One file per concern, so that each reads on its own; this module
//! only gathers what the rest of the crate calls.

mod descriptor;
mod dir_watch;
mod identity;
mod lock_line;
mod lock_table;
mod pidfd;
mod process_tree;
mod process_walk;
mod procfs;
mod wait_timer;

pub(crate) use descriptor::{descriptor_lock, descriptor_path, reopen, shares_locked_file};
pub(crate) use dir_watch::DirWatch;
#[cfg(feature = "tokio")]
pub(crate) use dir_watch::WatchId;
pub(super) use identity::{filesystem_type, noatime_flag};
pub(crate) use identity::{identity_at, identity_in, identity_of, open_dir_pinned};
pub(crate) use lock_table::{KernelLocks, held_shared};
pub(crate) use pidfd::{Pidfd, wait_exited};
pub(crate) use process_tree::{descriptors_readable, process_table, process_uids};
pub(crate) use process_walk::{DescriptorWalk, process_hold, processes_holding, walk_descriptors};
pub(super) use procfs::{boot_id, own_start_time};
pub(crate) use procfs::{command_name, innermost_pid, pid_namespace, process_stat};
pub(crate) use wait_timer::lock_until;

/// Eviction needs pidfds; Linux has them (from 5.3: an older kernel says so
/// when one is opened).
pub(crate) const EVICTION_UNSUPPORTED: Option<&str> = None;
