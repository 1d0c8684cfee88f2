//! Handing a command line from `lockfile` to `lockfile-full`: an exec of
//! the same arguments, `argv[0]` included, with the same environment, signal
//! mask and dispositions, descriptors and process. So nothing that the full
//! command does can tell the difference, nor can whoever started us: the
//! PID, the exit status and every output are the full command's.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::exit;

/// The full command's file name.
pub(crate) const FULL: &str = "lockfile-full";

/// Execs `lockfile-full` with `argv`: the one beside this binary's file
/// (`/proc/self/exe`, so that a symlink named `flock` finds it too), or else
/// the first one on PATH (for a hard link or a copy of `lockfile` alone).
/// Returns only when neither could be executed, with EX_UNAVAILABLE after
/// saying why.
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
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(FULL)));
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
