//! Arbitrary bytes as an owner record: `lockfile::record::decode_record`.
#![no_main]

#[path = "../../crates/lockfile/tests/fuzz_bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::decode_record(data));
