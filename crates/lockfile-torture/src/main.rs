//! `lockfile-torture`: many processes fight over a few locks while a chaos
//! loop SIGKILLs holders, a reaper removes litter and an inspector inspects
//! without pause. Every critical section checks, with a detector that does
//! not use this project's code, that it is alone. One summary at the end;
//! the exit status is non-zero when exclusion broke, when inspecting made an
//! acquisition fail, when an inspection misreported a lock, or when anything
//! failed unexpectedly.
//!
//! With `--postgres URL`, `--etcd ENDPOINTS` or `--redis URL`, the workers take leases on
//! that server instead of lock files (see `lease`), and the run also judges
//! the fencing tokens and times the takeovers after a holder's death.
//!
//! The same binary plays every part: without a subcommand it coordinates a
//! run; the hidden subcommands are the processes it starts.

mod args;
mod board;
mod coordinator;
mod detector;
mod lease;
mod watchers;
mod worker;
mod wrapper;

use anyhow::Context as _;
use clap::Parser as _;

use args::{Cli, EngineArgs, LeaseArgs, Role};

/// The leases a lease role works on, which its coordinator always names.
fn leases(args: &EngineArgs) -> anyhow::Result<lease::Leases> {
    lease::Leases::from_args(args)?.context("no --postgres, --etcd or --redis")
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.role {
        None => coordinator::main(cli.run),
        Some(role) => {
            let outcome = match role {
                Role::Worker(a) => worker::library_worker(&a.dir, a.slot),
                Role::Driver(a) => worker::run_driver(&a.dir, a.slot, &a.lockfile_bin),
                Role::Section(a) => worker::section(&a.dir, a.slot, a.lock, a.round),
                Role::Reaper(a) => watchers::reaper(&a.dir, &a.lockfile_bin),
                Role::Inspector(a) => watchers::inspector(&a.dir, &a.lockfile_bin),
                Role::Probe(a) => watchers::probe(&a.dir),
                Role::LeaseWorker(LeaseArgs { role: a, engine }) => {
                    leases(&engine).and_then(|l| lease::worker::lease_worker(&a.dir, a.slot, &l))
                }
                Role::LeaseDriver(LeaseArgs { role: a, engine }) => leases(&engine)
                    .and_then(|l| lease::driver::lease_driver(&a.dir, a.slot, &a.lockfile_bin, &l)),
                Role::LeaseSection(a) => {
                    lease::driver::lease_section(&a.dir, a.slot, a.lock, a.round)
                }
            };
            match outcome {
                Ok(code) => code,
                Err(e) => {
                    eprintln!(
                        "lockfile-torture: ERROR [pid {}]: {e:#}",
                        std::process::id()
                    );
                    3
                }
            }
        }
    };
    std::process::exit(code);
}
