//! TLS against a real PostgreSQL with `ssl = on`, a certificate from a test
//! CA made at test time, and `hostssl` rules: what each `sslmode` accepts
//! and refuses, client certificates, channel binding, and errors that name
//! the cause without the password.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::engine;
use lockfile_postgres::{Engine, Error, LeaseOptions, LeaseRequest, LeaseState};
use lockfile_test_support::postgres::{PASSWORD, Postgres};

fn try_now() -> LeaseRequest {
    let mut request = LeaseRequest::new();
    request.job("tls");
    request
}

/// `url` with these query parameters.
fn with(url: &str, params: &[(&str, &str)]) -> String {
    let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{url}?{}", query.join("&"))
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// The error of acquiring `name` at `url`: a server error in one line that
/// never shows the password.
fn refused(url: &str, name: &str) -> String {
    let mut opts = LeaseOptions::new(url);
    opts.request_timeout(Duration::from_secs(5));
    let err = Engine::acquire(&opts, name, &try_now()).unwrap_err();
    let text = err.to_string();
    eprintln!("{name}: {text}");
    assert!(matches!(err, Error::Server { .. }), "{err:?}");
    assert!(!text.contains(PASSWORD), "{text}");
    assert!(!text.contains('\n'), "{text}");
    text
}

/// Whether every connection named `app` is encrypted, and how many there
/// are.
fn encrypted(pg: &Postgres, app: &str) -> String {
    pg.psql(&format!(
        "SELECT bool_and(s.ssl) || ' ' || count(*) FROM pg_stat_ssl s \
         JOIN pg_stat_activity a USING (pid) WHERE a.application_name = '{app}'"
    ))
}

#[test]
fn verify_full_with_the_test_ca_holds_renews_and_releases_a_lease_over_tls() {
    let pg = Postgres::start_with_tls("DNS:localhost");
    let ca = pg.root_cert();
    // channel_binding=require: SCRAM-SHA-256-PLUS, bound to this
    // certificate, or no connection.
    let url = with(
        &pg.url_at("localhost"),
        &[
            ("sslmode", "verify-full"),
            ("sslrootcert", path(&ca)),
            ("application_name", "tls-full"),
            ("channel_binding", "require"),
        ],
    );
    let ttl = Duration::from_secs(1);
    let engine = engine(&url, ttl);
    let acquired_at = Instant::now();
    let lease = Engine::acquire(&engine, "over-tls", &try_now()).unwrap();
    let signal = lease.signal();
    let until = acquired_at + ttl * 5;
    while signal.last_renewal() <= acquired_at + ttl && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        signal.last_renewal() > acquired_at + ttl && signal.failed_renewals() == 0,
        "renewed past the first TTL: {signal:?}"
    );
    assert!(lease.check().is_ok());
    assert_eq!(
        encrypted(&pg, "tls-full"),
        "true 1",
        "the holder's one connection"
    );
    let version = pg.psql(
        "SELECT s.version FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.application_name = 'tls-full'",
    );
    assert!(version.starts_with("TLSv1."), "{version}");
    let report = engine.inspect("over-tls").unwrap();
    assert_eq!(report.state, LeaseState::Held);
    assert!(!lease.release().unwrap().was_lost());
    assert_eq!(engine.inspect("over-tls").unwrap().state, LeaseState::Free);

    // libpq's key=value form says the same.
    let keywords = format!(
        "host=localhost port={} user=lease password='{PASSWORD}' dbname=postgres \
         sslmode=verify-full sslrootcert='{}'",
        pg.port,
        path(&ca)
    );
    let lease = Engine::acquire(&LeaseOptions::new(keywords), "keywords", &try_now()).unwrap();
    assert!(!lease.release().unwrap().was_lost());
}

#[test]
fn verify_full_refuses_a_host_the_certificate_does_not_name_and_verify_ca_accepts_it() {
    let pg = Postgres::start_with_tls("DNS:localhost");
    let ca = pg.root_cert();
    let by_address = pg.url_at("127.0.0.1");
    let err = refused(
        &with(
            &by_address,
            &[("sslmode", "verify-full"), ("sslrootcert", path(&ca))],
        ),
        "mismatch",
    );
    for says in [
        "certificate verify failed",
        "not valid for name",
        "127.0.0.1",
        "localhost",
        "postgres://lease:***@127.0.0.1:",
    ] {
        assert!(err.contains(says), "{says:?} in {err}");
    }

    let url = with(
        &by_address,
        &[
            ("sslmode", "verify-ca"),
            ("sslrootcert", path(&ca)),
            ("application_name", "tls-ca"),
        ],
    );
    let engine = engine(&url, Duration::from_secs(3));
    let lease = Engine::acquire(&engine, "mismatch", &try_now()).unwrap();
    assert_eq!(encrypted(&pg, "tls-ca"), "true 1");
    assert!(!lease.release().unwrap().was_lost());
}

#[test]
fn a_certificate_signed_by_another_ca_is_refused_by_every_verifying_mode() {
    let pg = Postgres::start_with_tls("DNS:localhost,IP:127.0.0.1");
    let other = pg.other_root_cert();
    // `require` verifies the chain too when given a root file, as libpq.
    for mode in ["verify-full", "verify-ca", "require"] {
        let err = refused(
            &with(
                &pg.url_at("localhost"),
                &[("sslmode", mode), ("sslrootcert", path(&other))],
            ),
            "other-ca",
        );
        assert!(
            err.contains(&format!(
                "certificate verify failed: the server's certificate is not signed by a CA in `{}`",
                other.display()
            )),
            "{mode}: {err}"
        );
    }
    // The certificate names the address too: verify-full by address.
    let url = with(
        &pg.url(),
        &[
            ("sslmode", "verify-full"),
            ("sslrootcert", path(&pg.root_cert())),
        ],
    );
    let lease = Engine::acquire(
        &engine(&url, Duration::from_secs(3)),
        "by-address",
        &try_now(),
    )
    .unwrap();
    assert!(!lease.release().unwrap().was_lost());
}

#[test]
fn require_without_a_root_file_encrypts_without_verifying_and_verify_full_names_the_missing_file() {
    let pg = Postgres::start_with_tls("DNS:elsewhere.invalid");
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("root.crt");
    // libpq's `require`: no root file, no verification (the name matches
    // nothing and no CA is known), but encrypted.
    let url = with(
        &pg.url(),
        &[
            ("sslmode", "require"),
            ("sslrootcert", path(&absent)),
            ("application_name", "tls-require"),
        ],
    );
    let engine = engine(&url, Duration::from_secs(3));
    let lease = Engine::acquire(&engine, "require", &try_now()).unwrap();
    assert_eq!(encrypted(&pg, "tls-require"), "true 1");
    assert!(!lease.release().unwrap().was_lost());

    for mode in ["verify-full", "verify-ca"] {
        let err = refused(
            &with(
                &pg.url(),
                &[("sslmode", mode), ("sslrootcert", path(&absent))],
            ),
            "no-root",
        );
        assert!(
            err.contains(&format!(
                "root certificate file `{}` does not exist",
                absent.display()
            )),
            "{err}"
        );
        assert!(err.contains(&format!("sslmode={mode}")), "{err}");
    }
    // The server takes TCP connections over TLS only: plain TCP is refused
    // by its `hostssl` rules, so the connections above were encrypted.
    let err = refused(&with(&pg.url(), &[("sslmode", "disable")]), "plain");
    assert!(err.contains("SQLSTATE 28000"), "{err}");
    assert!(err.contains("no encryption"), "{err}");
}

#[test]
fn require_against_a_server_without_tls_is_refused_and_prefer_falls_back() {
    let pg = Postgres::start();
    let err = refused(&with(&pg.url(), &[("sslmode", "require")]), "plain");
    assert!(err.contains("server does not support TLS"), "{err}");
    let err = refused(
        &with(
            &pg.url(),
            &[("sslmode", "verify-full"), ("sslrootcert", "/dev/null")],
        ),
        "plain",
    );
    assert!(err.contains("holds no usable certificate"), "{err}");
    for mode in ["prefer", "allow"] {
        let url = with(
            &pg.url(),
            &[("sslmode", mode), ("application_name", "tls-prefer")],
        );
        let lease =
            Engine::acquire(&engine(&url, Duration::from_secs(3)), "plain", &try_now()).unwrap();
        assert_eq!(encrypted(&pg, "tls-prefer"), "false 1");
        assert!(!lease.release().unwrap().was_lost());
    }
}

#[test]
fn a_client_certificate_logs_in_and_a_key_others_may_read_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;

    let pg = Postgres::start_with_tls("DNS:localhost");
    let (cert, key) = pg.client_cert();
    let ca = pg.root_cert();
    // `certuser` has no password: its certificate is its login.
    let base = format!("postgres://certuser@localhost:{}/postgres", pg.port);
    let url = with(
        &base,
        &[
            ("sslmode", "verify-full"),
            ("sslrootcert", path(&ca)),
            ("sslcert", path(&cert)),
            ("sslkey", path(&key)),
        ],
    );
    let lease =
        Engine::acquire(&engine(&url, Duration::from_secs(3)), "by-cert", &try_now()).unwrap();
    assert!(!lease.release().unwrap().was_lost());

    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("none.crt");
    let err = refused(
        &with(
            &base,
            &[
                ("sslmode", "verify-full"),
                ("sslrootcert", path(&ca)),
                ("sslcert", path(&absent)),
            ],
        ),
        "no-cert",
    );
    assert!(err.contains("SQLSTATE 28000"), "{err}");

    let loose = dir.path().join("loose.key");
    std::fs::copy(&key, &loose).unwrap();
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = refused(
        &with(
            &base,
            &[
                ("sslmode", "verify-full"),
                ("sslrootcert", path(&ca)),
                ("sslcert", path(&cert)),
                ("sslkey", path(&loose)),
            ],
        ),
        "loose-key",
    );
    assert!(
        err.contains(&format!(
            "the private key file `{}` has group or world access",
            loose.display()
        )),
        "{err}"
    );
}

/// A server that asks for no password (AuthenticationOk at once) is what a
/// man in the middle answers under `require`, where no certificate is
/// checked: the password in the URL does not stop it, and its rows would
/// be believed. `channel_binding=require` refuses it, naming the cause;
/// the docs say so (and the trusting server stands for the man in the
/// middle: both skip the password exchange).
#[test]
fn channel_binding_require_refuses_a_server_that_asks_for_no_password() {
    let pg = Postgres::start_with_tls("DNS:localhost");
    let url = format!(
        "postgres://trusting:{PASSWORD}@127.0.0.1:{}/postgres",
        pg.port
    );
    // Without channel binding required, a connection that exchanged no
    // password goes on.
    let lease = Engine::acquire(
        &engine(
            &with(&url, &[("sslmode", "require")]),
            Duration::from_secs(5),
        ),
        "unbound",
        &try_now(),
    )
    .unwrap();
    assert!(!lease.release().unwrap().was_lost());
    let err = refused(
        &with(
            &url,
            &[("sslmode", "require"), ("channel_binding", "require")],
        ),
        "bound",
    );
    assert!(err.contains("channel binding"), "{err}");
}
