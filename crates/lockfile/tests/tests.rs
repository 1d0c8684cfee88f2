//! Integration tests: one binary, one module per concern, real processes.

mod support;

mod big_files;
mod check;
mod content;
mod contention;
mod descriptor;
mod directory;
mod evict;
mod faults;
mod fuzz_bodies;
mod fuzz_corpus;
mod history;
mod inspect;
mod interop;
mod json;
mod model;
mod planted;
mod races;
mod reap;
mod scan_budget;
mod shared;
mod silence;
mod slots;
mod unlink;
#[cfg(feature = "tokio")]
mod waiter;

/// Not a test: the entry point of child processes spawned by the tests
/// (see `support::ChildHolder`). Returns at once in a normal run.
#[test]
fn child_process_entry() {
    support::child_entry();
}
