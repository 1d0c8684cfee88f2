//! Platform calls. Everything `unsafe` in this crate lives under this module.
//!
//! `linux/` is the tested platform: it reads `/proc` to learn who holds a
//! kernel lock and uses a per-thread POSIX timer for bounded waits.
//! `other.rs` keeps other Unix systems compiling with documented fallbacks.
//! Both offer the same functions; the types they share, and what needs no
//! platform of its own, are defined once in the files beside them, so the
//! two cannot drift apart. This file only gathers them: what the platforms
//! share sits below them (`flock`, `holds`, `file_identity`, `process`,
//! `signal_mask`), and what is built on them above (`files`,
//! `process_identity`).

// `--cfg lockfile_fallback` builds the fallback on Linux too, so that CI
// compiles it: a fallback nobody builds stops compiling unnoticed.
#[cfg(all(target_os = "linux", not(lockfile_fallback)))]
mod linux;
#[cfg(all(target_os = "linux", not(lockfile_fallback)))]
pub(crate) use linux::*;

#[cfg(any(not(target_os = "linux"), lockfile_fallback))]
mod other;
#[cfg(any(not(target_os = "linux"), lockfile_fallback))]
pub(crate) use other::*;

mod process_identity;
pub(crate) use process_identity::{ProcessIdentity, process_identity};

mod file_identity;
mod files;
mod flock;
mod holds;
mod process;
#[cfg(feature = "tokio")]
mod signal_mask;

pub(crate) use file_identity::{Identity, file_kind};
pub(crate) use files::{
    network_filesystem, open_noatime, read_prefix, read_prefix_uninit, touch, unlink_if_same,
    without_trailing_slash,
};
pub(crate) use flock::{LockMode, lock, poll_until, try_lock, unlock};
pub(crate) use holds::{HoldAccess, KernelHold, ProcessHold};
pub(crate) use process::{ProcStat, parent_pid, pid_exists};
#[cfg(feature = "tokio")]
pub(crate) use signal_mask::block_all_signals;
