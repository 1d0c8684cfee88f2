//! A server that takes TCP connections over TLS only, with certificates of
//! a test CA of its own, made with the `openssl` command.

use std::path::PathBuf;

use super::Postgres;
use super::programs::{UNPRIVILEGED, is_root};

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
        crate::ca::make(dir, san);
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
