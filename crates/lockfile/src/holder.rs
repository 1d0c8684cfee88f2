//! `Holder`: a process that holds a kernel lock, as `inspect` and
//! `LockGuard::inheritors` name it.

use std::fmt;

use serde::Serialize;

use crate::sys;

/// A process that holds a kernel lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Holder {
    /// Its PID in our PID namespace.
    pub pid: u32,
    /// Its command name, when readable.
    pub command: Option<String>,
}

impl Holder {
    pub(crate) fn from_pid(pid: u32) -> Holder {
        Holder {
            pid,
            command: sys::command_name(pid),
        }
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {}", self.pid)?;
        if let Some(c) = &self.command {
            write!(f, " ({})", crate::text::escape(c))?;
        }
        Ok(())
    }
}
