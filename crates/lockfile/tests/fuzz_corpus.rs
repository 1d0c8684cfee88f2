//! The fuzz targets (`fuzz/`, cargo-fuzz on nightly) run here as ordinary
//! tests over their seed corpus, on stable Rust: CI covers every target
//! without a nightly toolchain. Inputs the fuzzer found interesting can be
//! added to `fuzz/corpus/<target>/` and are then checked on every run.

use std::path::{Path, PathBuf};

use crate::fuzz_bodies;
use crate::support::tempdir;

/// The seed files of one target, sorted; fails loudly when there are none, so
/// a moved corpus cannot make these tests pass by checking nothing.
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the seed corpus {} is missing: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            (path, data)
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 20,
        "the seed corpus {} holds only {} files",
        dir.display(),
        files.len()
    );
    files
}

/// Runs `body` on every seed, naming the seed that fails.
fn each_seed(target: &str, mut body: impl FnMut(&[u8])) {
    for (path, data) in corpus(target) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&data)));
        if let Err(panic) = outcome {
            eprintln!("seed {} failed", path.display());
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn fuzz_target_decode_record_over_its_corpus() {
    each_seed("decode_record", fuzz_bodies::decode_record);
}

#[test]
fn fuzz_target_inspect_content_over_its_corpus() {
    let dir = tempdir();
    each_seed("inspect_content", |data| {
        fuzz_bodies::inspect_content(dir.path(), data)
    });
}

/// The bodies hold for files longer than any record, which the seed
/// corpus (kept small) does not hold: blank, zero, and beginning as ours.
#[test]
fn fuzz_target_inspect_content_over_files_longer_than_a_record() {
    let dir = tempdir();
    for (name, data) in crate::big_files::big_files() {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            fuzz_bodies::decode_record(&data);
            fuzz_bodies::inspect_content(dir.path(), &data);
        }));
        if let Err(panic) = outcome {
            eprintln!("{name} failed");
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn the_corpus_holds_valid_records_and_debris() {
    // The seeds exercise both sides of the decoder, or the targets above
    // would prove little.
    let seeds = corpus("decode_record");
    let valid = seeds
        .iter()
        .filter(|(_, d)| lockfile::record::decode_record(d).is_ok())
        .count();
    assert!(valid >= 5, "only {valid} seeds decode");
    assert!(
        seeds.len() - valid >= 5,
        "only {} seeds fail to decode",
        seeds.len() - valid
    );
}
