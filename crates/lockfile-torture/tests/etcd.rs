//! Torture of the etcd lease engine: a short lease run against a real etcd
//! the test starts itself on loopback ports (Debian: `etcd-server`).

mod common;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A single-member etcd of this test's own, killed when dropped. (The etcd
/// crate's test helpers need its gRPC client, which this harness does not
/// build; this one is the same server, started the same way.)
struct Etcd {
    _dir: tempfile::TempDir,
    process: Child,
    endpoint: String,
}

impl Etcd {
    fn start() -> Etcd {
        let binary = std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
            .map(|d| d.join("etcd"))
            .find(|p| p.is_file())
            .expect(
                "these tests run a real etcd server, and no `etcd` binary was found: \
                 install it (Debian and Ubuntu: `apt-get install etcd-server`)",
            );
        let port = || {
            TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("bind a loopback port")
                .port()
        };
        let dir = tempfile::tempdir().expect("a data directory");
        let (client, peer) = (
            format!("http://127.0.0.1:{}", port()),
            format!("http://127.0.0.1:{}", port()),
        );
        let log = std::fs::File::create(dir.path().join("etcd.log")).expect("the etcd log");
        let process = Command::new(binary)
            .arg("--name=t")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=t={peer}"))
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log)
            .spawn()
            .expect("start etcd");
        let etcd = Etcd {
            _dir: dir,
            process,
            endpoint: client,
        };
        // Ready when the command's own inspect gets an answer.
        let lockfile = common::lockfile_bin();
        let started = Instant::now();
        loop {
            let answered = Command::new(&lockfile)
                .args(["inspect", "--etcd", &etcd.endpoint, "probe"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if answered {
                return etcd;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "etcd did not start: {}",
                std::fs::read_to_string(etcd._dir.path().join("etcd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

#[test]
fn leases_on_etcd_never_overlap_and_their_tokens_rise_under_sigkill() {
    let etcd = Etcd::start();
    common::lease_torture_passes(&["--etcd", &etcd.endpoint]);
}

#[test]
fn the_detector_and_the_fencing_judgment_fire_on_etcd_leases() {
    let etcd = Etcd::start();
    common::lease_sabotage_is_caught(&["--etcd", &etcd.endpoint]);
}
