//! The clock that every benchmark process reads alike.

/// CLOCK_MONOTONIC in nanoseconds. Unlike `Instant`, the raw value is
/// comparable between processes: a holder stamps its release (or the
/// program its kill) and a waiter its wake-up.
pub fn mono_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
