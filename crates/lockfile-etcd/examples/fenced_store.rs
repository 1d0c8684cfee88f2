//! A paused holder's late write, refused by its fencing token.
//!
//! ```text
//! etcd &   # a local etcd on 127.0.0.1:2379
//! cargo run -p lockfile-etcd --example fenced_store [-- ENDPOINT]
//! ```
//!
//! The example runs itself a second time as holder A, which takes the lease
//! (TTL 2 s) and writes batches to a fenced store, checking the lease before
//! each batch. This process then stops A with SIGSTOP just after one of those
//! checks, standing in for a long GC pause or a frozen VM. A's lease expires;
//! this process (holder B) takes it with a larger token and writes. When A is
//! continued, it finishes the write it had already checked: the lease cannot
//! stop that write, but the store can, because it has seen B's token.
//!
//! The store is the examples package's `FencedStore` (`examples/fenced_store.rs`
//! in the workspace): a file-backed register that refuses a token lower than
//! the highest it has accepted, and knows no engine.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use lockfile_etcd::LeaseOptions;
use lockfile_examples::FencedStore;
use rustix::process::{Pid, Signal, kill_process};

const NAME: &str = "fenced-store-demo";
const TTL: Duration = Duration::from_secs(2);

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--holder") {
        return holder(&args[2], Path::new(&args[3]));
    }
    let endpoint = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| lockfile_etcd::DEFAULT_ENDPOINT.to_owned());
    let dir = tempfile::tempdir()?;
    let store_path = dir.path().join("store.json");

    let mut a = Command::new(std::env::current_exe()?)
        .args(["--holder", &endpoint])
        .arg(&store_path)
        .stdout(Stdio::piped())
        .spawn()
        .context("start holder A")?;
    let pid = Pid::from_child(&a);
    let mut lines = BufReader::new(a.stdout.take().context("A's output")?).lines();
    let mut checks = 0;
    for line in lines.by_ref() {
        let line = line?;
        println!("{line}");
        if line.starts_with("A: lease checked") {
            checks += 1;
            if checks == 3 {
                break;
            }
        } else if line.starts_with("A: cannot") {
            bail!("holder A failed");
        }
    }
    kill_process(pid, Signal::STOP)?;
    println!("-- A is paused (SIGSTOP) right after checking its lease");

    let b = LeaseOptions::new()
        .endpoints([endpoint])
        .ttl(TTL)
        .job("holder B")
        .timeout(TTL * 5)
        .acquire(NAME)
        .context("holder B takes the lease once A's has expired")?;
    let store = FencedStore::new(&store_path);
    println!(
        "B: acquired with fencing token {} after A's lease expired",
        b.fencing_token()
    );
    store.write(b.fencing_token(), "B's batch")?;
    println!("B: wrote its batch with token {}", b.fencing_token());

    println!("-- A continues (SIGCONT)");
    kill_process(pid, Signal::CONT)?;
    for line in lines {
        println!("{}", line?);
    }
    a.wait()?;

    println!("-- the store accepted, in order:");
    for write in store.history()? {
        println!("   token {:>4}: {}", write.token, write.value);
    }
    if let Some(loss) = b.release()?.loss() {
        println!("-- holder B's lease was lost before its release: {loss}");
    }
    Ok(())
}

/// Holder A: takes the lease and writes a batch every 300 ms, checking the
/// lease before each one.
fn holder(endpoint: &str, store_path: &Path) -> anyhow::Result<()> {
    let store = FencedStore::new(PathBuf::from(store_path));
    let guard = match LeaseOptions::new()
        .endpoints([endpoint])
        .ttl(TTL)
        .job("holder A")
        .try_acquire(NAME)
    {
        Ok(guard) => guard,
        Err(e) => {
            println!("A: cannot take the lease: {e}");
            return Err(e.into());
        }
    };
    let token = guard.fencing_token();
    println!("A: acquired with fencing token {token}");
    for batch in 1.. {
        if let Err(e) = guard.check() {
            println!("A: stops: {e}");
            break;
        }
        println!("A: lease checked, writing batch {batch}");
        // The work between the check and the write: where a pause hurts.
        std::thread::sleep(Duration::from_millis(300));
        match store.write(token, &format!("A's batch {batch}")) {
            Ok(()) => println!("A: wrote batch {batch} with token {token}"),
            Err(e) => println!("A: the store refused batch {batch}: {e}"),
        }
    }
    let _ = guard.release();
    Ok(())
}
