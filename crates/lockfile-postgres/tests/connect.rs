//! The engine's own sockets against a real PostgreSQL: each host of a URL
//! in turn, and `target_session_attrs` (on connections the engine makes
//! itself, under the bound on the server's messages).

mod common;

use std::time::Duration;

use common::engine;
use common::pg::{PASSWORD, Postgres};
use lockfile_postgres::{Engine, Error, LeaseOptions, LeaseRequest};

fn try_now() -> LeaseRequest {
    LeaseRequest::new().job("connect")
}

#[test]
fn each_host_is_tried_in_turn_and_target_session_attrs_is_checked() {
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
    let lease = LeaseOptions::new(&both)
        .acquire("second-host", &try_now())
        .unwrap();
    lease.release().unwrap();
    pg.psql("ALTER DATABASE postgres SET default_transaction_read_only = on");
    let err = LeaseOptions::new(format!("{both}?target_session_attrs=read-write"))
        .acquire("read-only", &try_now())
        .unwrap_err();
    assert!(matches!(err, Error::Server { .. }), "{err}");
    assert!(err.to_string().contains("does not allow writes"), "{err}");
    assert!(!err.to_string().contains(PASSWORD), "{err}");
}
