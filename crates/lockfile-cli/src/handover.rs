//! Handing a command line from `lockfile` to `lockfile-full`: an exec of
//! the same arguments, `argv[0]` included, with the same environment, signal
//! mask and dispositions, descriptors and process. So nothing that the full
//! command does can tell the difference, nor can whoever started us: the
//! PID, the exit status and every output are the full command's.
//!
//! One variable is added to the environment for the exec, and the full
//! command takes it out again first thing ([`forget_handover`]): it names
//! who handed over, so that a `lockfile-full` that is not the full command
//! (a copy of `lockfile` under its name) is an error rather than an exec
//! loop.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::exit;

/// The full command's file name.
pub(crate) const FULL: &str = "lockfile-full";

/// The variable that names the binary that handed a command line over.
const HANDED_OVER_BY: &str = "LOCKFILE_HANDED_OVER_BY";

/// Takes [`HANDED_OVER_BY`] out of the environment, so that neither COMMAND
/// nor a `lockfile` that COMMAND runs sees it. The full command calls it
/// before anything else, while it has one thread.
pub(crate) fn forget_handover() {
    if std::env::var_os(HANDED_OVER_BY).is_some() {
        // SAFETY: called first thing in the process, before any thread is
        // started, so nothing reads the environment meanwhile.
        unsafe { std::env::remove_var(HANDED_OVER_BY) };
    }
}

/// Execs `lockfile-full` with `argv`: the one beside this binary's file
/// (`/proc/self/exe`, so that a symlink named `flock` finds it too), or else
/// the first one on PATH (for a hard link or a copy of `lockfile` alone).
/// Returns only when neither could be executed, or when this binary was
/// itself handed the command line as `lockfile-full`, with EX_UNAVAILABLE
/// after saying why.
pub(crate) fn hand_over(argv: &[OsString]) -> i32 {
    let Some(args) = argv
        .iter()
        .map(|arg| CString::new(arg.as_bytes()).ok())
        .collect::<Option<Vec<CString>>>()
    else {
        // The C runtime's arguments cannot hold a NUL: unreachable in practice.
        errln!("lockfile: an argument holds a NUL byte");
        return exit::USAGE;
    };
    let this = std::env::current_exe().ok();
    if let Some(by) = std::env::var_os(HANDED_OVER_BY) {
        errln!(
            "lockfile: `{}` handed this command line to `{}` as {FULL}, but that is not the full command (a copy of `lockfile`?): install {FULL} from the same build as `lockfile`",
            Path::new(&by).display(),
            this.as_deref().unwrap_or(Path::new(FULL)).display()
        );
        return exit::UNAVAILABLE;
    }
    // SAFETY: the process has one thread (the front starts none before it
    // hands over), so nothing reads the environment meanwhile.
    unsafe {
        std::env::set_var(
            HANDED_OVER_BY,
            this.as_deref().unwrap_or(Path::new("lockfile")),
        );
    }
    let beside = this.and_then(|exe| Some(exe.parent()?.join(FULL)));
    let beside_error = match &beside {
        Some(path) => exec(path, &args, false),
        None => io::Error::other("this binary's own path is unknown"),
    };
    let path_error = exec(Path::new(FULL), &args, true);
    let beside = beside.unwrap_or_else(|| PathBuf::from(FULL));
    errln!(
        "lockfile: this command line is run by {FULL}, the full command, which is not installed with this binary: `{}`: {beside_error}; on PATH: {path_error}. Install both binaries of the package (cargo install installs them together).",
        beside.display()
    );
    exit::UNAVAILABLE
}

/// Execs `program` (searched on PATH when `search`), returning the error
/// when it could not be.
fn exec(program: &Path, args: &[CString], search: bool) -> io::Error {
    let Ok(program) = CString::new(program.as_os_str().as_bytes()) else {
        return io::Error::from(io::ErrorKind::InvalidInput);
    };
    let mut pointers: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    pointers.push(std::ptr::null());
    // SAFETY: `program` and every pointer of `pointers` but the last are
    // live NUL-terminated strings, and the array ends with a null pointer;
    // on success the call does not return, and on failure it changed
    // nothing.
    unsafe {
        if search {
            libc::execvp(program.as_ptr(), pointers.as_ptr());
        } else {
            libc::execv(program.as_ptr(), pointers.as_ptr());
        }
    }
    io::Error::last_os_error()
}
