//! Torture of the Redis lease engine: a short lease run against a real
//! Redis the test starts itself (Debian: `redis-server`).

mod common;

use lockfile_test_support::Redis;

#[test]
fn leases_on_redis_never_overlap_and_their_tokens_rise_under_sigkill() {
    let redis = Redis::start();
    common::lease_torture_passes(&["--redis", &redis.url()]);
}

#[test]
fn the_detector_and_the_fencing_judgment_fire_on_redis_leases() {
    let redis = Redis::start();
    common::lease_sabotage_is_caught(&["--redis", &redis.url()]);
}
