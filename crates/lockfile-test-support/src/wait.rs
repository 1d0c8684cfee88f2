//! Waiting for a condition that another process or thread makes true: one
//! way, one patience, for every test.

use std::time::{Duration, Instant};

/// The longest a test waits for something that should happen by itself: far
/// above what any of it takes on a loaded machine, so that only a bug gets
/// there.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `cond` holds, failing the test, saying what for, after
/// [`PATIENCE`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `done` or `limit`, for a test whose verdict is how long it
/// took: true when done (asked once more at the limit).
pub fn within(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}
