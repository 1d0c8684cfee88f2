//! A service that leads through an election, writes through a fence, and
//! steps down before its lease can lapse: run two of them and stop one.
//!
//! ```text
//! cargo run -p lockfile-examples --features redis --example leader_service -- \
//!     redis://127.0.0.1:6379 billing /tmp/billing.json
//! ```
//!
//! Arguments: the engine's URL (`http://` etcd, `redis://` Redis,
//! `postgres://` PostgreSQL, each with its feature), the election's name,
//! and the store: a file path for the examples' file-backed store, or
//! `postgres` to write through `lockfile.fence` in the PostgreSQL of the
//! URL. Each line on stdout is what it did (`elected 7`, `wrote 7 1`,
//! `ending 7 near 2980`, `stepped-down 7`). Stop it with Ctrl-C: it
//! steps down, and lets the release reach the server before it exits.

use std::sync::Arc;
use std::time::Duration;

use lockfile_examples::FencedStore;
use lockfile_examples::service::{Service, Store, engine_for, serve};
use lockfile_lease::leader::Election;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, name, store] = args.as_slice() else {
        return Err("usage: leader_service URL NAME (STORE-FILE | postgres)".into());
    };
    let engine = engine_for(url, Duration::from_secs(6))?;
    let store = match store.as_str() {
        #[cfg(feature = "postgres")]
        "postgres" => Store::Postgres {
            url: url.clone(),
            fence: name.clone(),
        },
        path => Store::File(FencedStore::new(path)),
    };
    let service = Service {
        id: format!("pid-{}", std::process::id()),
        every: Duration::from_millis(500),
        obey: true,
    };
    let election = Election::new(engine, name.as_str());
    tokio::select! {
        served = serve(
            &election,
            Arc::new(store),
            &service,
            Arc::new(|event| println!("{event}")),
            Arc::new(|_, _| {}),
        ) => served?,
        _ = tokio::signal::ctrl_c() => println!("stopping"),
    }
    // The leadership was dropped with `serve`: let its release reach the
    // server before the process ends, so that the other service is
    // elected now rather than a TTL from now.
    lockfile_lease::shutdown::releases().await;
    Ok(())
}
