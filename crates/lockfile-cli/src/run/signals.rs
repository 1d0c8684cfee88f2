//! The signals of a wrapper: blocked and taken synchronously with
//! sigtimedwait(2), so that none is lost between spawning the child and
//! waiting, and no async handler runs; and forwarded to COMMAND.

use std::io;
use std::time::Instant;

use rustix::process::{Pid, Signal};

/// The signals forwarded to COMMAND.
pub(crate) const FORWARDED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Blocks `FORWARDED` and SIGCHLD in the calling (main) thread for the
/// rest of its life: the mask is never restored, so that a signal arriving
/// while the lock is released after COMMAND ended cannot kill us halfway (it
/// stays pending until we exit). A spawned child inherits the mask unless
/// it is prepared with [`BlockedSignals::prepare_child`].
///
/// A forwarded signal that was ignored when we started (`nohup`, or a
/// background job of a non-interactive shell, which ignores SIGINT) is left
/// ignored and is not forwarded: COMMAND inherits that disposition, as it
/// would without us, and a shell refuses to trap a signal ignored on entry,
/// so forwarding it would only look like it did something.
///
/// SIGCHLD ignored at start (a parent that set SIG_IGN passes it through
/// exec) is set back to its default for us, or the kernel would reap COMMAND
/// itself and we would wait for it forever; COMMAND gets it back ignored.
pub(crate) struct BlockedSignals {
    set: libc::sigset_t,
    old: libc::sigset_t,
    sigchld_ignored: bool,
}

impl BlockedSignals {
    pub(crate) fn block() -> io::Result<BlockedSignals> {
        let sigchld_ignored = ignored(libc::SIGCHLD);
        // SAFETY: signal(2) takes plain integers; the sets are plain data
        // initialised by sigemptyset before use; pthread_sigmask reads `set`
        // and writes `old`, both live.
        unsafe {
            if sigchld_ignored && libc::signal(libc::SIGCHLD, libc::SIG_DFL) == libc::SIG_ERR {
                return Err(io::Error::last_os_error());
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for sig in FORWARDED.into_iter().filter(|&sig| !ignored(sig)) {
                libc::sigaddset(&mut set, sig);
            }
            libc::sigaddset(&mut set, libc::SIGCHLD);
            let mut old: libc::sigset_t = std::mem::zeroed();
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Ok(BlockedSignals {
                set,
                old,
                sigchld_ignored,
            })
        }
    }

    /// Makes `cmd`'s child start COMMAND with the signal mask (and SIGCHLD
    /// disposition) we had before blocking, or COMMAND would ignore SIGTERM
    /// and friends; with a `death` signal, sent that signal by the kernel
    /// when this process dies, for any reason (SIGKILL: under a lease,
    /// nobody renews it any more, so the work must stop).
    ///
    /// std's child inherits our mask (std resets only SIGPIPE), and std has
    /// no setting for a mask or a parent-death signal: a `pre_exec` step
    /// sets them. So std forks rather than using posix_spawn. The forked
    /// child has its own copy of our memory, shares nothing with our other
    /// threads, and calls only async-signal-safe functions; every
    /// disposition it could meet before the exec is a default or SIG_IGN,
    /// never a handler of ours.
    pub(crate) fn prepare_child(&self, cmd: &mut std::process::Command, death: Option<Signal>) {
        use std::os::unix::process::CommandExt;
        let (old, sigchld_ignored) = (self.old, self.sigchld_ignored);
        let parent = rustix::process::getpid();
        // SAFETY: the closure runs in the forked child before exec, and
        // calls only signal, pthread_sigmask, prctl and getppid, which are
        // async-signal-safe; `old` is a copy.
        unsafe {
            cmd.pre_exec(move || {
                if sigchld_ignored && libc::signal(libc::SIGCHLD, libc::SIG_IGN) == libc::SIG_ERR {
                    return Err(io::Error::last_os_error());
                }
                if death.is_some() {
                    rustix::process::set_parent_process_death_signal(death)?;
                    // The parent may have died before the setting took.
                    if rustix::process::getppid() != Some(parent) {
                        return Err(io::Error::other("the parent died while spawning"));
                    }
                }
                match libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) {
                    0 => Ok(()),
                    rc => Err(io::Error::from_raw_os_error(rc)),
                }
            });
        }
    }

    /// Also blocks `extra` (a wake-up signal of the caller's).
    pub(crate) fn also_block(&mut self, extra: i32) -> io::Result<()> {
        // SAFETY: `self.set` is initialised; pthread_sigmask reads it only.
        unsafe {
            libc::sigaddset(&mut self.set, extra);
            match libc::pthread_sigmask(libc::SIG_BLOCK, &self.set, std::ptr::null_mut()) {
                0 => Ok(()),
                rc => Err(io::Error::from_raw_os_error(rc)),
            }
        }
    }

    /// Also blocks every other signal that can be blocked, so that only
    /// SIGKILL and SIGSTOP act on this process: the keeper, which must
    /// outlive whatever reaches its process group (a terminal's SIGQUIT or
    /// SIGTSTP) to stop the tree when the wrapper dies.
    pub(crate) fn block_everything(&mut self) -> io::Result<()> {
        // SAFETY: `self.set` is initialised; sigfillset and sigdelset write
        // it only, pthread_sigmask reads it only.
        unsafe {
            libc::sigfillset(&mut self.set);
            libc::sigdelset(&mut self.set, libc::SIGKILL);
            libc::sigdelset(&mut self.set, libc::SIGSTOP);
            match libc::pthread_sigmask(libc::SIG_BLOCK, &self.set, std::ptr::null_mut()) {
                0 => Ok(()),
                rc => Err(io::Error::from_raw_os_error(rc)),
            }
        }
    }

    /// Waits until a blocked signal arrives or `deadline` passes (`None`).
    pub(crate) fn wait_until(&self, deadline: Instant) -> Option<Received> {
        loop {
            let timeout = deadline.saturating_duration_since(Instant::now());
            let ts = libc::timespec {
                tv_sec: timeout.as_secs().try_into().unwrap_or(libc::time_t::MAX),
                tv_nsec: timeout.subsec_nanos().into(),
            };
            // SAFETY: `info` is written by the kernel before we read it, and
            // only when the call succeeds; `self.set` is a valid initialised
            // set.
            let (sig, from_kernel) = unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                let sig = libc::sigtimedwait(&self.set, &mut info, &ts);
                (sig, info.si_code == libc::SI_KERNEL)
            };
            if sig > 0 {
                return Some(match sig {
                    libc::SIGCHLD => Received::ChildExited,
                    sig if FORWARDED.contains(&sig) => {
                        Received::Forwarded(ToForward { sig, from_kernel })
                    }
                    _ => Received::Other,
                });
            }
            // Interrupted (a SIGSTOP and SIGCONT, for one) is not the
            // deadline: look again, for a signal that came meanwhile.
            if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return None;
            }
        }
    }
}

/// Whether `sig`'s disposition is SIG_IGN.
fn ignored(sig: i32) -> bool {
    // SAFETY: a null new action only reads the disposition into `current`,
    // which is plain data.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

/// What woke a wait for signals.
pub(crate) enum Received {
    /// SIGCHLD: a child (COMMAND, or an orphan we inherited) changed state.
    ChildExited,
    /// One of [`FORWARDED`], for COMMAND.
    Forwarded(ToForward),
    /// Another blocked signal (the caller's wake-up signal).
    Other,
}

/// A signal to pass on to COMMAND.
pub(crate) struct ToForward {
    sig: i32,
    /// Sent by the kernel (a terminal's Ctrl-C or hangup, which already
    /// reached the whole foreground process group).
    from_kernel: bool,
}

impl ToForward {
    /// Forwards the signal, unless the terminal already delivered it to its
    /// targets, which share our process group: a Ctrl-C goes to the whole
    /// foreground group, and so does the SIGHUP that follows a session
    /// leader's exit. A hangup that reaches us as the session leader reached
    /// only us.
    pub(crate) fn forward_to(&self, targets: &[Pid]) {
        if let Some(sig) = self.to_send().and_then(Signal::from_named_raw) {
            for &pid in targets {
                // The target may have exited a moment ago; ESRCH is fine.
                let _ = rustix::process::kill_process(pid, sig);
            }
        }
    }

    /// The signal number to pass on, or `None` when the terminal already
    /// delivered it (see [`ToForward::forward_to`]).
    pub(crate) fn to_send(&self) -> Option<i32> {
        let sig = self.sig;
        let from_terminal = self.from_kernel
            && (sig == libc::SIGINT || (sig == libc::SIGHUP && !is_session_leader()));
        (!from_terminal).then_some(sig)
    }
}

/// Whether this process leads its session. Not through rustix: getsid(2)
/// returns 0 in session 0 (that of a process started by init without
/// setsid) and in a PID namespace whose session leader lives outside it (a
/// container), and rustix's `Pid` cannot hold 0 (it asserts in debug builds).
fn is_session_leader() -> bool {
    // SAFETY: getsid(0) and getpid() take and return plain integers.
    unsafe { libc::getsid(0) == libc::getpid() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    /// A signal's bit in /proc/PID/status's hexadecimal masks.
    fn bit(sig: i32) -> u64 {
        1 << (sig - 1)
    }

    /// The SigBlk and SigIgn masks of a /proc/PID/status.
    fn signal_masks(status: &str) -> (u64, u64) {
        let mask = |field: &str| {
            let line = status.lines().find(|l| l.starts_with(field)).unwrap();
            u64::from_str_radix(line[field.len()..].trim(), 16).unwrap()
        };
        (mask("SigBlk:"), mask("SigIgn:"))
    }

    /// On a thread of its own (masks are per thread): blocks `before`, then
    /// blocks as a wrapper does, starts `sleep` as COMMAND, and returns its
    /// blocked and ignored signals, read once it runs (not through a shell:
    /// dash clears its signal mask when it starts).
    fn masks_of_command(before: Option<i32>, die_with_parent: bool) -> (u64, u64) {
        std::thread::spawn(move || {
            if let Some(sig) = before {
                // SAFETY: the set is initialised by sigemptyset before use.
                unsafe {
                    let mut set: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut set);
                    libc::sigaddset(&mut set, sig);
                    libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                }
            }
            let signals = BlockedSignals::block().unwrap();
            let args: [OsString; 1] = ["30".into()];
            let pid =
                crate::run::command::spawn(&signals, &"sleep".into(), &args, &[], die_with_parent)
                    .unwrap();
            // std's spawn returns once the exec succeeded.
            let status = std::fs::read_to_string(format!("/proc/{}/status", pid.as_raw_nonzero()));
            let _ = rustix::process::kill_process(pid, Signal::KILL);
            rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()).unwrap();
            signal_masks(&status.unwrap())
        })
        .join()
        .unwrap()
    }

    #[test]
    fn command_gets_exactly_the_mask_we_had_and_sigpipe_at_its_default() {
        // What this process ignores stays ignored, but SIGPIPE (which std's
        // main ignores) is at its default, as std's children have it.
        let (_, ours) = signal_masks(&std::fs::read_to_string("/proc/self/status").unwrap());
        let ignored = ours & !bit(libc::SIGPIPE);
        assert_eq!(masks_of_command(None, false), (0, ignored));
        assert_eq!(
            masks_of_command(Some(libc::SIGUSR1), false),
            (bit(libc::SIGUSR1), ignored)
        );
        assert_eq!(masks_of_command(None, true), (0, ignored));
    }
}
