//! `lockfile`: runs a plain `lockfile run` itself, and hands every other
//! command line to `lockfile-full`, installed beside it.
// std's start-up is replaced by the command's own: see `start` why.
#![no_main]

/// The process's entry point, called by the C runtime in place of std's.
#[unsafe(no_mangle)]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    // SAFETY: the C runtime passes main its own argc and argv.
    unsafe { lockfile_cli::start(argc, argv, lockfile_cli::front) }
}
