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
//! Shared by the engine's tests and the command's (through `#[path]`): std,
//! tempfile and rustix only.

use std::ffi::OsString;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The superuser the tests connect as, and its password.
pub const USER: &str = "lease";
pub const PASSWORD: &str = "s3cret-pw";

/// The uid and gid the servers run as when the tests run as root.
const UNPRIVILEGED: &str = "65534";

pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
    bouncer: Option<Bouncer>,
    /// The file of the wall-clock offset libfaketime gives the server, when
    /// it runs under libfaketime.
    clock: Option<PathBuf>,
}

struct Bouncer {
    port: u16,
    pid_file: PathBuf,
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
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

/// `program` as the servers' user: itself, or uid 65534 under root.
fn as_server_user(program: &Path) -> Command {
    as_server_user_with(program, &[])
}

/// `program` as the servers' user, with `env` set for it alone: through
/// env(1), so that setpriv, which runs as root, does not get it. (libfaketime
/// preloaded into a root process shares its state through shared memory
/// that the server's user then cannot open.)
fn as_server_user_with(program: &Path, env: &[(String, String)]) -> Command {
    let mut line: Vec<OsString> = Vec::new();
    if !env.is_empty() {
        line.push("env".into());
        line.extend(env.iter().map(|(k, v)| OsString::from(format!("{k}={v}"))));
    }
    line.push(program.into());
    let mut cmd = if is_root() {
        let mut cmd = Command::new("setpriv");
        cmd.args([
            &format!("--reuid={UNPRIVILEGED}"),
            &format!("--regid={UNPRIVILEGED}"),
            "--clear-groups",
        ]);
        cmd
    } else {
        Command::new(line.remove(0))
    };
    cmd.args(&line);
    cmd
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

fn run(mut cmd: Command, what: &str) -> Output {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

impl Postgres {
    /// Starts a server with these extra settings (`name=value`).
    pub fn start_with(settings: &[&str]) -> Postgres {
        Postgres::initialized(settings).started()
    }

    /// Starts a server with `ssl = on` that takes TCP connections over TLS
    /// only (`hostssl`), its certificate signed by a test CA of its own and
    /// naming only `san` (subjectAltName entries: `DNS:localhost`,
    /// `IP:127.0.0.1`). Made at start with the `openssl` command: the CA
    /// ([`root_cert`](Self::root_cert)), a second CA that signed nothing
    /// here ([`other_root_cert`](Self::other_root_cert)), and a client
    /// certificate for the role `certuser`, which logs in by certificate
    /// alone ([`client_cert`](Self::client_cert)); the role `trusting`
    /// logs in with no password asked.
    pub fn start_with_tls(san: &str) -> Postgres {
        let pg = Postgres::initialized(&[]);
        let dir = pg.dir.path();
        let openssl = |args: &[&str]| {
            let mut cmd = Command::new("openssl");
            cmd.current_dir(dir).args(args);
            run(cmd, &format!("openssl {}", args.join(" ")));
        };
        let key = |name: &str| {
            openssl(&[
                "ecparam",
                "-name",
                "prime256v1",
                "-genkey",
                "-noout",
                "-out",
                name,
            ]);
        };
        for ca in ["ca", "other-ca"] {
            key(&format!("{ca}.key"));
            openssl(&[
                "req",
                "-x509",
                "-new",
                "-key",
                &format!("{ca}.key"),
                "-out",
                &format!("{ca}.crt"),
                "-days",
                "2",
                "-subj",
                &format!("/CN=lockfile test {ca}"),
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ]);
        }
        let sign = |name: &str, subject: &str, extensions: &str| {
            key(&format!("{name}.key"));
            openssl(&[
                "req",
                "-new",
                "-key",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                subject,
            ]);
            std::fs::write(dir.join(format!("{name}.ext")), extensions).unwrap();
            openssl(&[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-out",
                &format!("{name}.crt"),
                "-extfile",
                &format!("{name}.ext"),
            ]);
        };
        sign(
            "server",
            "/CN=lockfile test server",
            &format!(
                "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n\
                 extendedKeyUsage=serverAuth\nsubjectAltName={san}\n"
            ),
        );
        sign(
            "client",
            "/CN=certuser",
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n",
        );
        for name in ["ca.crt", "other-ca.crt", "server.crt", "client.crt"] {
            std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o644))
                .unwrap();
        }
        // PostgreSQL refuses a key that is not its user's alone; so does a
        // TLS client.
        for name in ["server.key", "client.key"] {
            std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o600))
                .unwrap();
        }
        if is_root() {
            let unprivileged = UNPRIVILEGED.parse().ok();
            for name in ["server.crt", "server.key"] {
                std::os::unix::fs::chown(dir.join(name), unprivileged, unprivileged)
                    .expect("give the server's key to its user");
            }
        }
        let data = dir.join("data");
        let mut conf = std::fs::read_to_string(data.join("postgresql.auto.conf")).unwrap();
        conf.push_str(&format!(
            "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\nssl_ca_file = '{}'\n",
            dir.join("server.crt").display(),
            dir.join("server.key").display(),
            dir.join("ca.crt").display(),
        ));
        std::fs::write(data.join("postgresql.auto.conf"), conf).unwrap();
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\n\
             hostssl all certuser 127.0.0.1/32 cert\n\
             hostssl all trusting 127.0.0.1/32 trust\n\
             hostssl all all 127.0.0.1/32 scram-sha-256\n\
             hostssl all all ::1/128 scram-sha-256\n",
        )
        .unwrap();
        let pg = pg.started();
        pg.psql("CREATE ROLE certuser LOGIN SUPERUSER");
        // A role the server lets in without a password, as a man in the
        // middle that answers AuthenticationOk does.
        pg.psql("CREATE ROLE trusting LOGIN SUPERUSER");
        pg
    }

    /// The test CA's certificate (servers started by
    /// [`start_with_tls`](Self::start_with_tls)).
    pub fn root_cert(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// A CA that signed none of this server's certificates.
    pub fn other_root_cert(&self) -> PathBuf {
        self.dir.path().join("other-ca.crt")
    }

    /// The certificate and key of the role `certuser`, signed by the test
    /// CA.
    pub fn client_cert(&self) -> (PathBuf, PathBuf) {
        let dir = self.dir.path();
        (dir.join("client.crt"), dir.join("client.key"))
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
        if self.bouncer.is_none() {
            self.bouncer = Some(self.start_bouncer());
        }
        let port = self.bouncer.as_ref().expect("a bouncer").port;
        format!("postgres://{USER}:{PASSWORD}@127.0.0.1:{port}/leases")
    }

    fn start_bouncer(&self) -> Bouncer {
        let dir = self.dir.path();
        let program = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .expect(
                "these tests run a real PgBouncer: install it (Debian: apt-get install pgbouncer)",
            );
        std::fs::write(
            dir.join("userlist.txt"),
            format!("\"{USER}\" \"{PASSWORD}\"\n"),
        )
        .unwrap();
        for _ in 0..5 {
            let port = free_port();
            let pid_file = dir.join("pgbouncer.pid");
            let ini = dir.join("pgbouncer.ini");
            std::fs::write(
                &ini,
                format!(
                    "[databases]\nleases = host=127.0.0.1 port={pg} dbname=postgres\n\n\
                     [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
                     auth_type = scram-sha-256\nauth_file = {users}\npool_mode = transaction\n\
                     default_pool_size = 20\nmax_client_conn = 2000\nlogfile = {log}\npidfile = {pid}\n\
                     server_reset_query =\n",
                    pg = self.port,
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
        if let Some(bouncer) = &self.bouncer
            && let Ok(pid) = std::fs::read_to_string(&bouncer.pid_file)
        {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
        let mut cmd = self.pg_ctl();
        cmd.args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = cmd.status();
    }
}
