//! A test CA of a test's own, made with the `openssl` command: for the
//! servers that take TLS (PostgreSQL, Redis).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

/// Makes, in `dir`: the CA (`ca.crt`, `ca.key`), a second CA that signs
/// nothing (`other-ca.crt`), a server certificate signed by the first and
/// naming only `san` (subjectAltName entries: `DNS:localhost`,
/// `IP:127.0.0.1`; `server.crt`, `server.key`), and a client certificate
/// for `certuser` (`client.crt`, `client.key`). Keys are their owner's
/// alone (0600), as servers and TLS clients require.
pub fn make(dir: &Path, san: &str) {
    let openssl = |args: &[&str]| {
        let mut cmd = Command::new("openssl");
        cmd.current_dir(dir).args(args);
        let out = cmd.output().expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
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
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    // PostgreSQL refuses a key that is not its user's alone; so does a
    // TLS client.
    for name in ["server.key", "client.key"] {
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}
