//! Arbitrary bytes as the content of a lock file: `inspect`, `reap`,
//! `try_acquire` and `release` on it.
#![no_main]

use std::sync::OnceLock;

#[path = "../../crates/lockfile/tests/fuzz_bodies.rs"]
mod bodies;

/// One directory per fuzzing process, removed when it exits normally.
static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let dir = DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"));
    bodies::inspect_content(dir.path(), data);
});
