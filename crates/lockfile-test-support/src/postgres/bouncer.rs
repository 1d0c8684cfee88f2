//! A real PgBouncer in transaction pooling mode in front of a test server,
//! killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::programs::as_server_user;
use crate::port::free_port;

/// A running PgBouncer: where it listens, and the file of its pid.
pub(super) struct Bouncer {
    pub(super) port: u16,
    pid_file: PathBuf,
}

impl Bouncer {
    /// Starts PgBouncer with its files in `dir`, in front of the server on
    /// `pg_port`, as database `leases`, letting `user` in with `password`.
    pub(super) fn start(dir: &Path, pg_port: u16, user: &str, password: &str) -> Bouncer {
        let program = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .expect(
                "these tests run a real PgBouncer: install it (Debian: apt-get install pgbouncer)",
            );
        std::fs::write(
            dir.join("userlist.txt"),
            format!("\"{user}\" \"{password}\"\n"),
        )
        .unwrap();
        for _ in 0..5 {
            let port = free_port();
            let pid_file = dir.join("pgbouncer.pid");
            let ini = dir.join("pgbouncer.ini");
            std::fs::write(
                &ini,
                format!(
                    "[databases]\nleases = host=127.0.0.1 port={pg_port} dbname=postgres\n\n\
                     [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
                     auth_type = scram-sha-256\nauth_file = {users}\npool_mode = transaction\n\
                     default_pool_size = 20\nmax_client_conn = 2000\nlogfile = {log}\npidfile = {pid}\n\
                     server_reset_query =\n",
                    users = dir.join("userlist.txt").display(),
                    log = dir.join("pgbouncer.log").display(),
                    pid = pid_file.display(),
                ),
            )
            .unwrap();
            let mut cmd = as_server_user(&program);
            cmd.arg("-d").arg(&ini);
            let started = cmd.stdin(Stdio::null()).status().is_ok_and(|s| s.success());
            let until = Instant::now() + Duration::from_secs(10);
            while started && Instant::now() < until {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Bouncer { port, pid_file };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!(
            "PgBouncer did not start: {}",
            std::fs::read_to_string(dir.join("pgbouncer.log")).unwrap_or_default()
        );
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.pid_file) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
    }
}
