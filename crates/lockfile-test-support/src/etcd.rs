//! A real etcd server per test, on loopback ports, with a temporary data
//! directory. No etcd client here: the command's and the torture harness's
//! tests build none, so each user says when the server answers, with a
//! client of its own.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

use crate::port::free_port;

/// A single-member etcd of this test's own. Killed when dropped.
pub struct Etcd {
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    process: Option<Child>,
    /// Whether the server at this endpoint serves requests yet.
    ready: Rc<dyn Fn(&str) -> bool>,
}

/// Where the etcd server binary is, or a failed test saying how to get it.
pub fn etcd_binary() -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|dir| dir.join("etcd"))
        .find(|p| p.is_file());
    match found {
        Some(path) => path,
        None => panic!(
            "these tests run a real etcd server, and no `etcd` binary was found on PATH: \
             install it (Debian and Ubuntu: `apt-get install etcd-server`) and run the tests again"
        ),
    }
}

impl Etcd {
    /// Starts a single-member etcd and waits until `ready(endpoint)` says
    /// it serves requests.
    pub fn start_until(ready: impl Fn(&str) -> bool + 'static) -> Etcd {
        let binary = etcd_binary();
        let ready: Rc<dyn Fn(&str) -> bool> = Rc::new(ready);
        // Another test may grab a port between our probe and etcd's bind:
        // try again with fresh ports.
        for _ in 0..5 {
            let mut etcd = Etcd {
                dir: tempfile::tempdir().expect("create a data directory"),
                client_port: free_port(),
                peer_port: free_port(),
                process: None,
                ready: Rc::clone(&ready),
            };
            if etcd.client_port == etcd.peer_port {
                continue;
            }
            etcd.spawn(&binary);
            if etcd.wait_ready(Duration::from_secs(20)) {
                return etcd;
            }
        }
        panic!("etcd did not start; see its log above");
    }

    fn spawn(&mut self, binary: &Path) {
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open the etcd log");
        let child = Command::new(binary)
            .arg("--name=t")
            .arg(format!("--data-dir={}", self.data_dir().display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=t={peer}"))
            .arg("--logger=zap")
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.process = Some(child);
    }

    fn wait_ready(&mut self, limit: Duration) -> bool {
        let started = Instant::now();
        let endpoint = self.endpoint();
        while started.elapsed() < limit {
            if let Some(Ok(Some(_))) = self.process.as_mut().map(Child::try_wait) {
                eprintln!("etcd exited early:\n{}", self.log());
                return false;
            }
            if (self.ready)(&endpoint) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("etcd was not ready after {limit:?}:\n{}", self.log());
        false
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    pub fn client_addr(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The server's process id.
    pub fn pid(&self) -> Pid {
        Pid::from_child(self.process.as_ref().expect("etcd is running"))
    }

    /// SIGSTOP: the server keeps its sockets but answers nothing.
    pub fn pause(&self) {
        kill_process(self.pid(), Signal::STOP).expect("stop etcd");
    }

    /// SIGCONT.
    pub fn resume(&self) {
        kill_process(self.pid(), Signal::CONT).expect("continue etcd");
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same ports and data directory.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn(&etcd_binary());
        assert!(
            self.wait_ready(Duration::from_secs(20)),
            "etcd did not restart"
        );
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if let Some(child) = &self.process {
            // A stopped process must be continued to die promptly.
            let _ = kill_process(Pid::from_child(child), Signal::CONT);
        }
        self.kill();
    }
}
