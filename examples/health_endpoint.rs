//! A health endpoint for a service that runs the cron job's work: `GET` on
//! it answers 200 while the job is healthy (OK or WARNING), 503 otherwise,
//! with the check's JSON as the body. Standard library only.
//!
//! ```sh
//! cargo run --example health_endpoint &      # listens on 127.0.0.1:8080
//! curl -i http://127.0.0.1:8080/
//! ```

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use lockfile::check::CheckOptions;

fn main() -> std::io::Result<()> {
    let addr = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:8080".into());
    let lock = lockfile::default_lock_dir()?.join("cron-job.lock");
    let mut opts = CheckOptions::new();
    opts.expect_every(Duration::from_secs(86_400));
    for stream in TcpListener::bind(addr)?.incoming() {
        let mut stream = stream?;
        let _ = stream.read(&mut [0; 1024]); // the request: any path will do
        let (code, body) = match opts.check(&lock) {
            Ok(h) if h.is_healthy() => ("200 OK", serde_json::to_string(&h)?),
            Ok(h) => ("503 Service Unavailable", serde_json::to_string(&h)?),
            Err(e) => (
                "503 Service Unavailable",
                serde_json::json!({"error": e.to_string()}).to_string(),
            ),
        };
        let head = format!("HTTP/1.1 {code}\r\ncontent-length: {}\r\n", body.len());
        write!(stream, "{head}content-type: application/json\r\n\r\n{body}")?;
    }
    Ok(())
}
