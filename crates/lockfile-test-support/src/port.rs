//! A free loopback port for a server a test starts.

use std::net::TcpListener;

/// A loopback port that was free a moment ago (the kernel picks it). A
/// server started on it may still lose a race for it: callers retry.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}
