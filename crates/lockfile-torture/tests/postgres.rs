//! Torture of the PostgreSQL lease engine: a short lease run against a real
//! PostgreSQL the test starts itself, directly and through a real PgBouncer
//! in transaction pooling mode (Debian: `postgresql`, `pgbouncer`).

mod common;

use lockfile_test_support::Postgres;

#[test]
fn leases_on_postgres_never_overlap_and_their_tokens_rise_under_sigkill() {
    let pg = Postgres::start();
    common::lease_torture_passes(&["--postgres", &pg.url()]);
}

#[test]
fn leases_through_pgbouncer_never_overlap_and_their_tokens_rise_under_sigkill() {
    let mut pg = Postgres::start();
    let url = pg.bouncer_url();
    common::lease_torture_passes(&["--postgres", &url]);
}

#[test]
fn the_detector_and_the_fencing_judgment_fire_on_postgres_leases() {
    let pg = Postgres::start();
    common::lease_sabotage_is_caught(&["--postgres", &pg.url()]);
}
