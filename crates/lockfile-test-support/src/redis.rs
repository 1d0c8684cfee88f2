//! A real Redis server per test (Debian's `redis-server`), on a loopback
//! port, with a temporary directory; and `redis-cli` to act on it as
//! another client would. No Redis client library here: readiness is a
//! `PING` over a plain socket.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

use crate::port::free_port;

/// A Redis server of this test's own. Killed when dropped.
pub struct Redis {
    dir: tempfile::TempDir,
    port: u16,
    /// Extra `redis-server` arguments, kept for a restart.
    settings: Vec<String>,
    /// Whether it listens with TLS (with the certificates of
    /// [`ca::make`](crate::ca::make) in its directory).
    tls: bool,
    process: Option<Child>,
}

/// Where a Redis program (`redis-server`, `redis-cli`) is, or a failed
/// test saying how to get it.
pub fn redis_program(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file());
    match found {
        Some(path) => path,
        None => panic!(
            "these tests run a real Redis server, and no `{name}` was found on PATH: install it \
             (Debian and Ubuntu: `apt-get install redis-server`) and run the tests again"
        ),
    }
}

impl Redis {
    /// Starts a server without persistence (`save ""`, `appendonly no`),
    /// with `DEBUG` allowed from loopback, and `settings` (more
    /// `redis-server` arguments, such as `--maxmemory 1mb`).
    pub fn start_with(settings: &[&str]) -> Redis {
        Redis::started(settings, false)
    }

    /// [`start_with`](Self::start_with) and nothing more.
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// A server that takes TLS only, its certificate signed by a test CA
    /// ([`root_cert`](Self::root_cert)) and naming only `san` (as
    /// [`ca::make`](crate::ca::make) takes it).
    pub fn start_with_tls(san: &str) -> Redis {
        Redis::started(&[], true).with_certificates(san)
    }

    fn started(settings: &[&str], tls: bool) -> Redis {
        for _ in 0..5 {
            let mut redis = Redis {
                dir: tempfile::tempdir().expect("create a directory for redis"),
                port: free_port(),
                settings: settings.iter().map(|s| (*s).to_owned()).collect(),
                tls,
                process: None,
            };
            if tls {
                // Started once the certificates are made.
                return redis;
            }
            redis.spawn();
            if redis.wait_ready(Duration::from_secs(20)) {
                return redis;
            }
        }
        panic!("redis-server did not start; see its log above");
    }

    fn with_certificates(mut self, san: &str) -> Redis {
        crate::ca::make(self.dir.path(), san);
        self.spawn();
        assert!(
            self.wait_ready(Duration::from_secs(20)),
            "redis-server with TLS did not start"
        );
        self
    }

    fn spawn(&mut self) {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open the redis log");
        let dir = self.dir.path();
        let mut cmd = Command::new(redis_program("redis-server"));
        cmd.arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(dir)
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--enable-debug-command", "local", "--protected-mode", "no"]);
        if self.tls {
            cmd.args(["--port", "0", "--tls-port", &self.port.to_string()])
                .arg("--tls-cert-file")
                .arg(dir.join("server.crt"))
                .arg("--tls-key-file")
                .arg(dir.join("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(dir.join("ca.crt"))
                .args(["--tls-auth-clients", "no"]);
        } else {
            cmd.args(["--port", &self.port.to_string()]);
        }
        let child = cmd
            .args(&self.settings)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log)
            .spawn()
            .expect("start redis-server");
        self.process = Some(child);
    }

    fn wait_ready(&mut self, limit: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Some(Ok(Some(_))) = self.process.as_mut().map(Child::try_wait) {
                eprintln!("redis-server exited early:\n{}", self.log());
                return false;
            }
            if self.answers() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "redis-server was not ready after {limit:?}:\n{}",
            self.log()
        );
        false
    }

    /// Whether the server answers `PING` (over TLS: whether its port
    /// takes connections).
    fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        if self.tls {
            return true;
        }
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut reply = [0; 7];
        s.write_all(b"PING\r\n").is_ok()
            && s.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }

    /// `redis://127.0.0.1:PORT` (or `rediss://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `host:port`, for a proxy in front of the server.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The test CA that signed a TLS server's certificate.
    pub fn root_cert(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// A CA that signed nothing here.
    pub fn other_root_cert(&self) -> PathBuf {
        self.dir.path().join("other-ca.crt")
    }

    /// Runs `redis-cli` with `args` as the default user, and returns what it
    /// printed (its replies, raw). Fails the test if it cannot run.
    pub fn cli(&self, args: &[&str]) -> String {
        self.cli_stdin(args, None)
    }

    /// [`cli`](Self::cli) with `-x`: the last argument is `input`, read
    /// from redis-cli's stdin (a value too large for a command line).
    pub fn cli_with_last_arg(&self, args: &[&str], input: &[u8]) -> String {
        let mut with_x = vec!["-x"];
        with_x.extend_from_slice(args);
        self.cli_stdin(&with_x, Some(input))
    }

    fn cli_stdin(&self, args: &[&str], input: Option<&[u8]>) -> String {
        let mut cmd = Command::new(redis_program("redis-cli"));
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string()]);
        if self.tls {
            cmd.arg("--tls").arg("--cacert").arg(self.root_cert());
        }
        let mut child = cmd
            .args(args)
            .env_remove("REDISCLI_AUTH")
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run redis-cli");
        if let Some(input) = input {
            let mut stdin = child.stdin.take().expect("redis-cli's stdin");
            stdin.write_all(input).expect("write to redis-cli");
        }
        let out = child.wait_with_output().expect("run redis-cli");
        assert!(
            out.status.success(),
            "redis-cli {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The server's directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The server's process id.
    pub fn pid(&self) -> Pid {
        Pid::from_child(self.process.as_ref().expect("redis-server is running"))
    }

    /// SIGSTOP: the server keeps its sockets but answers nothing.
    pub fn pause(&self) {
        kill_process(self.pid(), Signal::STOP).expect("stop redis-server");
    }

    /// SIGCONT.
    pub fn resume(&self) {
        kill_process(self.pid(), Signal::CONT).expect("continue redis-server");
    }

    /// SIGKILL, and reap: without persistence, every key is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = kill_process(Pid::from_child(&child), Signal::CONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and directory, with
    /// `settings` added to its own.
    pub fn restart_with(&mut self, settings: &[&str]) {
        self.kill();
        self.settings
            .extend(settings.iter().map(|s| (*s).to_owned()));
        self.spawn();
        assert!(
            self.wait_ready(Duration::from_secs(20)),
            "redis-server did not restart"
        );
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}
