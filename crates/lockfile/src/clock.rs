//! The times a record keeps: milliseconds for promises, microseconds for
//! instants, so that a record read back equals the one written.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The current time, truncated to the microseconds a record keeps, so that a
/// record read back equals the one written.
pub(crate) fn now() -> SystemTime {
    to_micros(SystemTime::now())
}

/// `t` truncated to the microseconds a record keeps.
pub(crate) fn to_micros(t: SystemTime) -> SystemTime {
    let since_epoch = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    UNIX_EPOCH + Duration::from_micros(u64::try_from(since_epoch.as_micros()).unwrap_or(u64::MAX))
}
