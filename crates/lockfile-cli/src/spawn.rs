//! Starting COMMAND the way posix_spawn(3) does, with a child that shares
//! our memory until it execs (`clone(CLONE_VM | CLONE_VFORK)`), rather than
//! std's fork + exec.
//!
//! A fork copies the page tables of the whole process, and every page either
//! side then writes is copied again: for a run of a short job, that was a
//! tenth of `lockfile run`'s time (see BENCHMARKS.md). glibc's own
//! posix_spawn is no answer, for two reasons: it starts COMMAND with libc's
//! internal signals 32 and 33 ignored, whatever they were here, and it can
//! neither restore an ignored SIGCHLD nor set a parent-death signal. So the
//! child is ours, and does only what a child of posix_spawn does: set the
//! signal mask and dispositions, optionally the parent-death signal, then
//! `execvpe`. It runs on a stack of its own and writes nothing of ours but
//! the errno of a failed exec; while it runs, this thread is suspended.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::process::Pid;

/// The child's stack, beyond the argument vector that execvpe copies onto
/// it for a script without `#!`: the path it builds (at most PATH_MAX plus
/// NAME_MAX) and the calls themselves. glibc's posix_spawn allows as much.
/// Pages never touched cost nothing.
const STACK: usize = 64 * 1024;

/// The page below the stack, mapped without access, so that an overflow
/// faults rather than writes into memory the child shares with us.
const GUARD: usize = 4096;

/// What the child does between the clone and the exec.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChildSetup {
    /// COMMAND's signal mask: the one we had before blocking ours.
    pub(crate) mask: libc::sigset_t,
    /// Give SIGCHLD back to COMMAND ignored, as our parent passed it to us.
    pub(crate) sigchld_ignored: bool,
    /// SIGKILL COMMAND when this process dies (`PR_SET_PDEATHSIG`): the
    /// caller's PID, to check that it did not die before the setting took.
    pub(crate) die_with: Option<Pid>,
}

/// COMMAND's program, arguments and environment, as C strings.
struct Exec {
    /// The program's arguments, the program itself first (what execvpe
    /// looks up), then a null pointer; they point into `_strings`.
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    _strings: Vec<CString>,
}

impl Exec {
    /// `program` (searched on PATH unless it holds a `/`) with `args`, in
    /// our environment with `env` set over it.
    fn new(program: &OsStr, args: &[OsString], env: &[(&str, OsString)]) -> io::Result<Exec> {
        let c = |bytes: Vec<u8>| {
            CString::new(bytes).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in an argument")
            })
        };
        let mut strings = Vec::with_capacity(args.len() + 1);
        strings.push(c(program.as_bytes().to_vec())?);
        for arg in args {
            strings.push(c(arg.as_bytes().to_vec())?);
        }
        let argc = strings.len();
        for (key, value) in std::env::vars_os() {
            if env.iter().any(|(ours, _)| key == *ours) {
                continue;
            }
            strings.push(c(entry(&key, &value))?);
        }
        for (key, value) in env {
            strings.push(c(entry(OsStr::new(key), value))?);
        }
        let pointers = |s: &[CString]| {
            let mut p: Vec<*const libc::c_char> = s.iter().map(|s| s.as_ptr()).collect();
            p.push(std::ptr::null());
            p
        };
        Ok(Exec {
            argv: pointers(&strings[..argc]),
            envp: pointers(&strings[argc..]),
            _strings: strings,
        })
    }
}

/// `KEY=VALUE`.
fn entry(key: &OsStr, value: &OsStr) -> Vec<u8> {
    let mut entry = OsString::with_capacity(key.len() + value.len() + 1);
    entry.push(key);
    entry.push("=");
    entry.push(value);
    entry.into_vec()
}

/// What the child reads, and the one thing it writes.
struct Shared<'a> {
    exec: &'a Exec,
    setup: ChildSetup,
    /// The errno of what failed in the child, 0 while nothing did.
    errno: AtomicI32,
}

/// Starts `program` with `args` and `env` over our environment, set up as
/// `setup` says; returns its PID once it runs COMMAND.
///
/// # Errors
///
/// What stopped COMMAND from starting: the error of its exec (NotFound,
/// PermissionDenied, ...), of the setup, or of the clone.
pub(crate) fn spawn(
    program: &OsStr,
    args: &[OsString],
    env: &[(&str, OsString)],
    setup: ChildSetup,
) -> io::Result<Pid> {
    let exec = Exec::new(program, args, env)?;
    let shared = Shared {
        exec: &exec,
        setup,
        errno: AtomicI32::new(0),
    };
    let size = (GUARD + STACK + exec.argv.len() * size_of::<*const libc::c_char>())
        .next_multiple_of(GUARD);
    // SAFETY: a private anonymous mapping, unmapped below; its lowest page
    // is made inaccessible before anything runs on it.
    let stack = unsafe {
        let stack = libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        );
        if stack == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        if libc::mprotect(stack, GUARD, libc::PROT_NONE) != 0 {
            let error = io::Error::last_os_error();
            libc::munmap(stack, size);
            return Err(error);
        }
        stack
    };
    // SAFETY: `child` runs on the new stack (its top: stacks grow down on
    // every Linux target), reads `shared` and writes only its atomic;
    // CLONE_VFORK suspends this thread until the child has exec'ed or
    // exited, so `shared`, `exec` and the stack outlive every use. The child
    // calls only functions that a child of posix_spawn calls.
    let pid = unsafe {
        libc::clone(
            child,
            stack.cast::<u8>().add(size).cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::from_ref(&shared).cast_mut().cast(),
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: the mapping made above; the child no longer runs on it.
    unsafe {
        libc::munmap(stack, size);
    }
    if pid == -1 {
        return Err(clone_error);
    }
    let pid = Pid::from_raw(pid).expect("a child has a positive pid");
    match shared.errno.load(Ordering::SeqCst) {
        0 => Ok(pid),
        errno => {
            // It exited at once: reap it, so that nobody mistakes it for
            // COMMAND.
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
            Err(io::Error::from_raw_os_error(errno))
        }
    }
}

/// The child, between the clone and the exec. It shares our memory: it
/// touches nothing but its own stack and `shared.errno`.
extern "C" fn child(shared: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `spawn` passes a `Shared` that outlives the child (the parent
    // is suspended until it execs or exits).
    let shared = unsafe { &*shared.cast::<Shared<'_>>() };
    let fail = |errno: i32| fail(shared, errno);
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    let setup = &shared.setup;
    // SAFETY: signal, pthread_sigmask, prctl, getppid and execvpe are what
    // glibc's own posix_spawn child calls (execvpe's script fallback
    // included); every pointer is live and NUL-terminated or null-ended.
    unsafe {
        // std's children start with SIGPIPE at its default; we ignore it.
        if libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR {
            fail(errno());
        }
        if setup.sigchld_ignored && libc::signal(libc::SIGCHLD, libc::SIG_IGN) == libc::SIG_ERR {
            fail(errno());
        }
        if let Some(parent) = setup.die_with {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                fail(errno());
            }
            // The parent may have died before the setting took.
            if libc::getppid() != parent.as_raw_nonzero().get() {
                fail(libc::ESRCH);
            }
        }
        let rc = libc::pthread_sigmask(libc::SIG_SETMASK, &setup.mask, std::ptr::null_mut());
        if rc != 0 {
            fail(rc);
        }
        // (No indexing, which could panic here: `argv` always holds the
        // program, then the null pointer.)
        libc::execvpe(
            shared.exec.argv.as_ptr().read(),
            shared.exec.argv.as_ptr(),
            shared.exec.envp.as_ptr(),
        );
    }
    fail(errno())
}

/// Ends the child, leaving `errno` for the parent.
fn fail(shared: &Shared<'_>, errno: i32) -> ! {
    shared.errno.store(errno.max(1), Ordering::SeqCst);
    // SAFETY: _exit ends the child without running anything of ours.
    unsafe { libc::_exit(127) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `script` through `sh -c` as `spawn` starts it, and returns what
    /// it wrote to the file `$OUT` and its exit status.
    fn run(script: &str, setup: ChildSetup, env: &[(&str, OsString)]) -> (String, i32) {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let mut env = env.to_vec();
        env.push(("OUT", out.clone().into()));
        let args = ["-c".into(), script.into()];
        let pid = spawn(OsStr::new("sh"), &args, &env, setup).unwrap();
        let (_, status) =
            rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
                .unwrap()
                .unwrap();
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        (text, status.exit_status().unwrap_or(-1))
    }

    fn plain_setup() -> ChildSetup {
        // SAFETY: sigemptyset initialises the set it is given.
        let mask = unsafe {
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut mask);
            mask
        };
        ChildSetup {
            mask,
            sigchld_ignored: false,
            die_with: None,
        }
    }

    /// A signal's bit in /proc/PID/status's hexadecimal masks.
    fn bit(sig: i32) -> u64 {
        1 << (sig - 1)
    }

    /// The blocked and ignored signals of a `sleep` started with `setup`,
    /// read once it runs: `spawn` returns after the exec. (Not through a
    /// shell: dash clears its signal mask when it starts.)
    fn masks_of(setup: ChildSetup) -> (u64, u64) {
        let pid = spawn(OsStr::new("sleep"), &["30".into()], &[], setup).unwrap();
        let status = std::fs::read_to_string(format!("/proc/{}/status", pid.as_raw_nonzero()));
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()).unwrap();
        signal_masks(&status.unwrap())
    }

    /// The SigBlk and SigIgn masks of a /proc/PID/status.
    fn signal_masks(status: &str) -> (u64, u64) {
        let mask = |field: &str| {
            let line = status.lines().find(|l| l.starts_with(field)).unwrap();
            u64::from_str_radix(line[field.len()..].trim(), 16).unwrap()
        };
        (mask("SigBlk:"), mask("SigIgn:"))
    }

    #[test]
    fn the_child_gets_exactly_the_mask_and_dispositions_it_is_given() {
        let mut setup = plain_setup();
        // SAFETY: the set was initialised by `plain_setup`.
        unsafe { libc::sigaddset(&mut setup.mask, libc::SIGUSR1) };
        setup.sigchld_ignored = true;
        // What this process ignores stays ignored (the test runner may have
        // been started with libc's internal signal 32 ignored, by glibc's
        // posix_spawn), but SIGPIPE is at its default, as std's children
        // have it, and SIGCHLD is given back ignored when asked.
        let (_, ours) = signal_masks(&std::fs::read_to_string("/proc/self/status").unwrap());
        let ignored = ours & !bit(libc::SIGPIPE);
        assert_eq!(
            masks_of(setup),
            (bit(libc::SIGUSR1), ignored | bit(libc::SIGCHLD))
        );
        assert_eq!(masks_of(plain_setup()), (0, ignored));
    }

    #[test]
    fn the_child_gets_our_environment_with_the_given_variables_over_it() {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let (text, code) = run(
            "printf '%s\\n%s\\n' \"$LOCKFILE_TOKEN\" \"$PATH\" > \"$OUT\"",
            plain_setup(),
            &[("LOCKFILE_TOKEN", "t-1".into()), ("PATH", path.clone())],
        );
        assert_eq!(code, 0);
        assert_eq!(text, format!("t-1\n{}\n", path.to_string_lossy()));
    }

    #[test]
    fn a_failed_exec_is_its_error() {
        let missing = spawn(
            OsStr::new("lockfile-no-such-program"),
            &[],
            &[],
            plain_setup(),
        );
        assert_eq!(missing.unwrap_err().kind(), io::ErrorKind::NotFound);
        let dir = tempfile::tempdir().unwrap();
        let not_executable = dir.path().join("script");
        std::fs::write(&not_executable, "true\n").unwrap();
        let denied = spawn(not_executable.as_os_str(), &[], &[], plain_setup());
        assert_eq!(denied.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
        let nul = spawn(OsStr::new("a\0b"), &[], &[], plain_setup());
        assert_eq!(nul.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_child_set_to_die_with_us_starts_when_we_live() {
        let mut setup = plain_setup();
        setup.die_with = Some(rustix::process::getpid());
        let (_, code) = run("echo ran > \"$OUT\"", setup, &[]);
        assert_eq!(code, 0);
        // A parent that is not ours (as after our death): the child refuses.
        setup.die_with = Pid::from_raw(1);
        let args = ["-c".into(), "true".into()];
        let err = spawn(OsStr::new("sh"), &args, &[], setup).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
    }

    #[test]
    fn a_script_without_an_interpreter_line_runs_through_the_shell() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script");
        std::fs::write(&script, "echo through the shell $# > \"$OUT\"\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let out = dir.path().join("out");
        // execvpe copies the arguments onto the child's stack for the shell:
        // 20,000 of them take 160 KB more than the stack's fixed part.
        let args: Vec<OsString> = (0..20_000).map(|i| i.to_string().into()).collect();
        let env = [("OUT", out.clone().into())];
        let pid = spawn(script.as_os_str(), &args, &env, plain_setup()).unwrap();
        let (_, status) =
            rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
                .unwrap()
                .unwrap();
        assert_eq!(status.exit_status(), Some(0), "{status:?}");
        assert_eq!(
            std::fs::read_to_string(out).unwrap(),
            "through the shell 20000\n"
        );
    }
}
