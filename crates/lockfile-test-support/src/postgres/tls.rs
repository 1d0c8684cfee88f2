//! A server that takes TCP connections over TLS only, with certificates of
//! a test CA of its own, made with the `openssl` command.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::Command;

use super::Postgres;
use super::programs::{UNPRIVILEGED, is_root, run};

impl Postgres {
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
}
