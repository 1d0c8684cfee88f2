//! Files that are not ours: planted with an old modification time, and
//! fingerprinted, so that a test sees any byte, size or time a lock changed.

use std::path::Path;
use std::time::{Duration, SystemTime};

/// Writes `content` and sets the modification time well in the past, so
/// that any write or heartbeat would show.
pub fn write_aged(path: &Path, content: &[u8]) {
    std::fs::write(path, content).unwrap();
    let past = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_times(
            std::fs::FileTimes::new()
                .set_modified(past)
                .set_accessed(past),
        )
        .unwrap();
}

/// A file's bytes, size and modification time: everything a lock must leave
/// alone in a file that is not ours.
pub fn fingerprint(path: &Path) -> (Vec<u8>, u64, SystemTime) {
    let meta = std::fs::metadata(path).unwrap();
    (
        std::fs::read(path).unwrap(),
        meta.len(),
        meta.modified().unwrap(),
    )
}
