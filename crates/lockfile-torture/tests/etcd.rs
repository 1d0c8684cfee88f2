//! Torture of the etcd lease engine: a short lease run against a real etcd
//! the test starts itself on loopback ports (Debian: `etcd-server`).

mod common;

use std::process::{Command, Stdio};

use lockfile_test_support::Etcd;

/// Starts a single-member etcd of this test's own, ready when the command's
/// own inspect gets an answer.
fn start_etcd() -> Etcd {
    let lockfile = common::lockfile_bin();
    Etcd::start_until(move |endpoint| {
        Command::new(&lockfile)
            .args(["inspect", "--etcd", endpoint, "probe"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

#[test]
fn leases_on_etcd_never_overlap_and_their_tokens_rise_under_sigkill() {
    let etcd = start_etcd();
    common::lease_torture_passes(&["--etcd", &etcd.endpoint()]);
}

#[test]
fn the_detector_and_the_fencing_judgment_fire_on_etcd_leases() {
    let etcd = start_etcd();
    common::lease_sabotage_is_caught(&["--etcd", &etcd.endpoint()]);
}
