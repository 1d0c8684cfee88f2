//! A real PostgreSQL (and, on demand, a real PgBouncer in transaction
//! pooling mode) of the test's own: a private data directory, loopback
//! ports, password authentication. Both refuse to run as root, so as root
//! they run as the unprivileged uid 65534. Stopped when dropped.
//!
//! On demand the server's clock can be stepped: the server then runs under
//! libfaketime (Debian: `faketime`), which adds the offset in a file of the
//! test's own to every wall-clock read, and reads that file again on every
//! read. Its monotonic clock is left alone, as a real step leaves it.
//!
//! The TLS server is `tls.rs`'s, PgBouncer `bouncer.rs`'s.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::port::free_port;

mod bouncer;
mod programs;
mod tls;

use bouncer::Bouncer;
use programs::{as_server_user, as_server_user_with, run};

/// The superuser the tests connect as, and its password.
pub const USER: &str = "lease";
pub const PASSWORD: &str = "s3cret-pw";

pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
    bouncer: Option<Bouncer>,
    /// The file of the wall-clock offset libfaketime gives the server, when
    /// it runs under libfaketime.
    clock: Option<PathBuf>,
}

/// Where PostgreSQL's server programs are: the newest
/// /usr/lib/postgresql/*/bin (Debian), or the directory of `pg_ctl` on PATH.
fn bin_dir() -> PathBuf {
    let mut debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").is_file())
        .collect();
    debian.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    if let Some(dir) = debian.pop() {
        return dir;
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
        .expect(
            "these tests run a real PostgreSQL, and no initdb was found: install it \
             (Debian and Ubuntu: `apt-get install postgresql pgbouncer`) and run the tests again",
        )
}

/// libfaketime's preload library, where Debian and a source install put it.
fn libfaketime() -> PathBuf {
    let multiarch = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("faketime"));
    ["/usr/lib/faketime", "/usr/local/lib/faketime"]
        .into_iter()
        .map(PathBuf::from)
        .chain(multiarch)
        .map(|dir| dir.join("libfaketime.so.1"))
        .find(|p| p.is_file())
        .expect("this test steps the server's clock with libfaketime: install it (Debian: apt-get install faketime)")
}

impl Postgres {
    /// Starts a server with these extra settings (`name=value`).
    pub fn start_with(settings: &[&str]) -> Postgres {
        Postgres::initialized(settings).started()
    }

    /// Starts a server whose wall clock [`step_clock`](Self::step_clock)
    /// can step, with these extra settings.
    pub fn start_with_steppable_clock(settings: &[&str]) -> Postgres {
        let mut pg = Postgres::initialized(settings);
        pg.clock = Some(pg.dir.path().join("clock-offset"));
        pg.step_clock_to("+0");
        pg.started()
    }

    /// A server initialised with these extra settings, not started.
    fn initialized(settings: &[&str]) -> Postgres {
        let bin = bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("lockfile-pg")
            .tempdir()
            .expect("a temporary directory");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
            .expect("open the directory to the server's user");
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        std::fs::set_permissions(&pwfile, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut initdb = as_server_user(&bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(dir.path().join("data"))
            .args([
                "-U",
                USER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .args(["-E", "UTF8", "--no-sync", "--no-instructions"]);
        run(initdb, "initdb");
        let mut conf = String::from(
            "listen_addresses = '127.0.0.1'\nfsync = off\nmax_connections = 300\nshared_buffers = 16MB\nlog_min_messages = warning\n",
        );
        conf.push_str(&format!(
            "unix_socket_directories = '{}'\n",
            dir.path().display()
        ));
        for s in settings {
            let (name, value) = s.split_once('=').expect("name=value");
            conf.push_str(&format!("{name} = '{value}'\n"));
        }
        let auto = dir.path().join("data/postgresql.auto.conf");
        let mut existing = std::fs::read_to_string(&auto).unwrap_or_default();
        existing.push_str(&conf);
        std::fs::write(&auto, existing).unwrap();
        Postgres {
            dir,
            bin,
            port: 0,
            bouncer: None,
            clock: None,
        }
    }

    /// Starts an initialised server on a free port.
    fn started(mut self) -> Postgres {
        for _ in 0..5 {
            self.port = free_port();
            if self.try_start() {
                return self;
            }
        }
        panic!("PostgreSQL did not start: {}", self.log());
    }

    /// Starts a server with the default settings.
    pub fn start() -> Postgres {
        Postgres::start_with(&[])
    }

    fn pg_ctl(&self) -> Command {
        let mut cmd = as_server_user(&self.bin.join("pg_ctl"));
        cmd.arg("-D").arg(self.dir.path().join("data"));
        cmd
    }

    /// Steps the server's wall clock to `ahead` of the real time, at once,
    /// as `date -s` or an NTP step would: every backend reads it at its
    /// next clock read. Its monotonic clock goes on undisturbed.
    pub fn step_clock(&self, ahead: Duration) {
        self.step_clock_to(&format!("+{}", ahead.as_secs()));
    }

    fn step_clock_to(&self, offset: &str) {
        let Some(file) = &self.clock else {
            assert_eq!(offset, "+0", "start the server with a steppable clock");
            return;
        };
        // Replaced, never rewritten in place: a read sees the old offset or
        // the new one, never an empty file.
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, format!("{offset}\n")).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::rename(&tmp, file).unwrap();
    }

    fn try_start(&self) -> bool {
        let mut cmd = match &self.clock {
            Some(file) => {
                let env = [
                    ("LD_PRELOAD", libfaketime().display().to_string()),
                    ("FAKETIME_TIMESTAMP_FILE", file.display().to_string()),
                    ("FAKETIME_NO_CACHE", "1".to_owned()),
                    ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()),
                ]
                .map(|(k, v)| (k.to_owned(), v));
                let mut cmd = as_server_user_with(&self.bin.join("pg_ctl"), &env);
                cmd.arg("-D").arg(self.dir.path().join("data"));
                cmd
            }
            None => self.pg_ctl(),
        };
        cmd.arg("-l")
            .arg(self.dir.path().join("pg.log"))
            .args(["-w", "-t", "60", "-o"])
            .arg(format!("-p {}", self.port))
            .arg("start");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pg.log")).unwrap_or_default()
    }

    /// The URL of the server itself, as the superuser.
    pub fn url(&self) -> String {
        self.url_at("127.0.0.1")
    }

    /// The URL of the server by the name `host` (which must lead to
    /// 127.0.0.1), as the superuser.
    pub fn url_at(&self, host: &str) -> String {
        format!("postgres://{USER}:{PASSWORD}@{host}:{}/postgres", self.port)
    }

    /// The URL through PgBouncer in transaction pooling mode (started on
    /// first use).
    pub fn bouncer_url(&mut self) -> String {
        let port = self
            .bouncer
            .get_or_insert_with(|| Bouncer::start(self.dir.path(), self.port, USER, PASSWORD))
            .port;
        format!("postgres://{USER}:{PASSWORD}@127.0.0.1:{port}/leases")
    }

    /// psql, for a session the test drives itself.
    pub fn psql_program(&self) -> PathBuf {
        self.bin.join("psql")
    }

    /// Runs SQL as the superuser with psql; returns its unaligned output.
    pub fn psql(&self, sql: &str) -> String {
        let mut cmd = Command::new(self.bin.join("psql"));
        cmd.args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d"])
            .arg(self.url())
            .arg("-c")
            .arg(sql);
        let out = run(cmd, &format!("psql -c {sql:?}"));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Stops the server (fast shutdown: every connection is closed).
    pub fn stop(&self) {
        let mut cmd = self.pg_ctl();
        cmd.args(["-m", "fast", "-w", "stop"]);
        run(cmd, "pg_ctl stop");
    }

    /// Starts the stopped server again on the same port.
    pub fn start_again(&self) {
        assert!(
            self.try_start(),
            "PostgreSQL did not restart: {}",
            self.log()
        );
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // PgBouncer first, as a server's clients go before it.
        drop(self.bouncer.take());
        let mut cmd = self.pg_ctl();
        cmd.args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = cmd.status();
    }
}
