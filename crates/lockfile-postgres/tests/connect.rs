//! The engine's own sockets: each host of a URL in turn and
//! `target_session_attrs` against a real PostgreSQL, and the bound on the
//! server's messages inside TLS against a hostile server (the plain
//! socket's, and the memory it keeps, are the command's tests:
//! `lockfile-cli/tests/postgres.rs`).

mod common;

use std::time::Duration;

use common::engine;
use lockfile_postgres::{Engine, Error, LeaseOptions, LeaseRequest};
use lockfile_test_support::postgres::{PASSWORD, Postgres, USER};

fn try_now() -> LeaseRequest {
    let mut request = LeaseRequest::new();
    request.job("connect");
    request
}

#[test]
fn each_host_is_tried_in_turn_a_unix_socket_is_reached_and_target_session_attrs_is_checked() {
    let pg = Postgres::start();
    engine(&pg.url(), Duration::from_secs(3));
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let both = pg.url().replace(
        &format!("@127.0.0.1:{}", pg.port),
        &format!("@127.0.0.1:{closed},127.0.0.1:{}", pg.port),
    );
    let lease = Engine::acquire(&LeaseOptions::new(&both), "second-host", &try_now()).unwrap();
    assert!(!lease.release().unwrap().was_lost());
    // A Unix socket: the directory PostgreSQL listens in.
    let socket_dir = pg.root_cert().parent().unwrap().display().to_string();
    let lease = Engine::acquire(
        &LeaseOptions::new(format!(
            "host={socket_dir} port={} user={USER} dbname=postgres",
            pg.port
        )),
        "unix-socket",
        &try_now(),
    )
    .unwrap();
    assert!(!lease.release().unwrap().was_lost());
    pg.psql("ALTER DATABASE postgres SET default_transaction_read_only = on");
    let err = Engine::acquire(
        &LeaseOptions::new(format!("{both}?target_session_attrs=read-write")),
        "read-only",
        &try_now(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Server { .. }), "{err}");
    assert!(err.to_string().contains("does not allow writes"), "{err}");
    assert!(!err.to_string().contains(PASSWORD), "{err}");
}

/// A hostile server behind TLS (the test server's certificate): it lets
/// the client in, then answers its first statement with a data row
/// declaring 1 GiB, and zeros. Returns its port.
fn hostile_tls_server(pg: &Postgres) -> u16 {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::io::{Read, Write};
    let dir = pg.root_cert().parent().unwrap().to_owned();
    let chain = CertificateDer::pem_file_iter(dir.join("server.crt"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config = std::sync::Arc::new(
        rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let message = |tag: u8, body: &[u8]| {
        let mut m = vec![tag];
        m.extend_from_slice(&(u32::try_from(body.len()).unwrap() + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    };
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(mut tcp) = tcp else { return };
            let config = config.clone();
            // Ends with an error when the client hangs up.
            std::thread::spawn(move || -> std::io::Result<()> {
                let mut ssl_request = [0; 8];
                tcp.read_exact(&mut ssl_request)?;
                tcp.write_all(b"S")?;
                let conn = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
                let mut s = rustls::StreamOwned::new(conn, tcp);
                let mut len = [0; 4];
                s.read_exact(&mut len)?;
                let mut startup = vec![0; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
                s.read_exact(&mut startup)?;
                let mut hello = message(b'R', &0_u32.to_be_bytes());
                hello.extend(message(b'K', &[0; 8]));
                hello.extend(message(b'Z', b"I"));
                s.write_all(&hello)?;
                let mut statement = [0; 4096];
                let _ = s.read(&mut statement)?;
                let mut reply = message(b'1', b"");
                reply.extend(message(b'2', b""));
                let mut description = 1_u16.to_be_bytes().to_vec();
                description
                    .extend_from_slice(b"n\0\0\0\0\0\0\0\0\0\0\x14\0\x08\xff\xff\xff\xff\0\x01");
                reply.extend(message(b'T', &description));
                reply.push(b'D');
                reply.extend_from_slice(&(1_u32 << 30).to_be_bytes());
                s.write_all(&reply)?;
                let zeros = vec![0; 1 << 16];
                for _ in 0..(1 << 14) {
                    s.write_all(&zeros)?;
                }
                Ok(())
            });
        }
    });
    port
}

#[test]
fn a_message_declaring_a_gibibyte_inside_tls_is_refused_at_its_header() {
    let pg = Postgres::start_with_tls("DNS:localhost");
    let port = hostile_tls_server(&pg);
    let url = format!(
        "postgres://lease:{PASSWORD}@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={}",
        pg.root_cert().display()
    );
    let err = Engine::acquire(&LeaseOptions::new(url), "hostile-tls", &try_now()).unwrap_err();
    assert!(matches!(err, Error::Server { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("bytes, more than the limit of 1048576 bytes"),
        "the limit is named: {err}"
    );
    assert!(!err.to_string().contains(PASSWORD), "{err}");
}
