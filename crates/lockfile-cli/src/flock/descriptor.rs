//! The descriptor form that both faces share: `lockfile run N` and `flock N`
//! lock (or with `-u` unlock) descriptor N of the calling shell.

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use lockfile::LockOptions;

use crate::cli::RunArgs;
use crate::exit;

/// Locking (or unlocking) descriptor N of the calling shell, which keeps the
/// lock after we exit.
pub(crate) struct Descriptor {
    pub(crate) fd: i32,
    pub(crate) shared: bool,
    pub(crate) unlock: bool,
    /// `Some(ZERO)` for `-n`.
    pub(crate) wait: Option<Duration>,
    pub(crate) conflict: Option<u8>,
    pub(crate) verbose: bool,
}

impl Descriptor {
    /// `name` prefixes the messages: `flock` or `lockfile`.
    pub(crate) fn run(&self, name: &str) -> i32 {
        if self.fd < 0 {
            errln!("{name}: bad file descriptor: '{}'", self.fd);
            return exit::USAGE;
        }
        // SAFETY: the calling shell opened this descriptor for us (or it is
        // not open, which the kernel reports as EBADF); nothing here closes
        // it, and it outlives every use below.
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        let conflict = i32::from(self.conflict.unwrap_or(1));
        if self.unlock {
            return match lockfile::descriptor::unlock_descriptor(fd) {
                Ok(_) => exit::OK,
                Err(e) => {
                    errln!("{name}: {e}");
                    exit::DATA_ERROR
                }
            };
        }
        let mut opts = LockOptions::new();
        opts.shared(self.shared);
        let started = Instant::now();
        let locked = match self.wait {
            Some(Duration::ZERO) => opts.try_acquire_descriptor(fd),
            Some(wait) => opts.timeout(wait).acquire_descriptor(fd),
            None => opts.acquire_descriptor(fd),
        };
        match locked {
            Ok(_) => {
                if self.verbose {
                    outln!(
                        "{name}: getting lock took {:.6} seconds",
                        started.elapsed().as_secs_f64()
                    );
                }
                exit::OK
            }
            Err(e) if e.is_contended() => {
                if self.verbose {
                    let why = match e {
                        lockfile::Error::Timeout { .. } => "timeout while waiting to get lock",
                        _ => "failed to get lock",
                    };
                    errln!("{name}: {why}");
                }
                conflict
            }
            Err(e) => {
                errln!("{name}: {e}");
                exit::DATA_ERROR
            }
        }
    }
}

/// `lockfile run` without COMMAND: the descriptor form (`lockfile run N`,
/// as flock(1) N), or a usage error. `claimed`: `--once-per` was given.
pub(crate) fn without_command(args: &RunArgs, claimed: bool, name: &str) -> i32 {
    if args.engine.chosen() {
        errln!("lockfile: a lease needs a COMMAND to run under it (or -c STRING)");
        return exit::USAGE;
    }
    if claimed {
        errln!(
            "{name}: --once-per needs a lock file and a COMMAND: a descriptor's lock keeps no record to claim a tick in"
        );
        return exit::USAGE;
    }
    match args.lockfile.to_str().and_then(|s| s.parse::<i32>().ok()) {
        Some(fd) => Descriptor {
            fd,
            shared: args.shared && !args.exclusive,
            unlock: args.unlock,
            wait: if args.nonblock {
                Some(Duration::ZERO)
            } else {
                args.wait
            },
            conflict: Some(args.conflict_exit_code),
            verbose: args.verbose,
        }
        .run(name),
        None => {
            errln!(
                "{name}: COMMAND is missing: `lockfile run LOCKFILE COMMAND...`, `-c STRING`, or a descriptor number alone"
            );
            exit::USAGE
        }
    }
}
