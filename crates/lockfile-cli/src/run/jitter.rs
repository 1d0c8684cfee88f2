//! `--jitter`: a delay before taking the lock that is stable for a host and
//! a job, so that a fleet started by the same crontab line spreads out the
//! same way on every run (systemd's `FixedRandomDelay=`), unlike a
//! `sleep $((RANDOM % 60))`, which moves every host differently each time
//! and can carry a `--once-per` run across the half-period edge.

use std::io::Read as _;
use std::time::Duration;

/// The variable that stands for the machine id, so that tests can play
/// several hosts on one.
pub(crate) const SEED_ENV: &str = "LOCKFILE_JITTER_SEED";

/// The most of `/etc/machine-id` that is read: 32 hex digits and a newline.
const MACHINE_ID_BYTES: u64 = 64;

/// Why a jitter cannot be used with a schedule.
pub(crate) fn refused(jitter: Duration, period: Option<Duration>) -> Option<String> {
    let period = period?;
    (jitter >= period / 2).then(|| {
        format!(
            "--jitter {} is half of --once-per {} or more: a run could be carried into the next tick; use less than {}",
            humantime::format_duration(jitter),
            humantime::format_duration(period),
            humantime::format_duration(period / 2)
        )
    })
}

/// The delay in `[0, jitter)` for `job` on this host.
pub(crate) fn delay(jitter: Duration, job: &str) -> Duration {
    delay_for(&seed(), jitter, job)
}

/// What tells this host apart: the variable, `/etc/machine-id`, or the
/// hostname, in that order.
fn seed() -> String {
    std::env::var(SEED_ENV)
        .ok()
        .or_else(machine_id)
        .unwrap_or_else(|| {
            lockfile::OwnerRecord::current(None, None)
                .hostname
                .to_string()
        })
}

/// The delay in `[0, jitter)` for `job` on the host `seed`: the two hashed
/// with FNV-1a (stable across builds and platforms, unlike std's hasher),
/// mapped onto the range.
fn delay_for(seed: &str, jitter: Duration, job: &str) -> Duration {
    let hash = mix(fnv1a(
        seed.as_bytes().iter().chain(&[0]).chain(job.as_bytes()),
    ));
    let nanos = jitter.as_nanos().min(u128::from(u64::MAX));
    // `hash / 2^64` of the range: uniform, and below it.
    let offset = (u128::from(hash) * nanos) >> 64;
    Duration::from_nanos(u64::try_from(offset).unwrap_or(u64::MAX))
}

/// The machine id, when `/etc/machine-id` holds one (many containers have
/// none, or an empty file).
fn machine_id() -> Option<String> {
    let mut text = String::new();
    std::fs::File::open("/etc/machine-id")
        .ok()?
        .take(MACHINE_ID_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    let id = text.trim();
    (!id.is_empty()).then(|| id.to_owned())
}

/// splitmix64's finalizer: FNV-1a moves the high bits little for a change
/// in the last byte (`backup-1` … `backup-4` would wait within a
/// millisecond of each other in an hour), and the range is mapped from the
/// high bits.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// 64-bit FNV-1a.
fn fnv1a<'a>(bytes: impl IntoIterator<Item = &'a u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_is_the_published_function() {
        // The test vectors of the FNV reference.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn the_delay_is_the_same_for_a_host_and_a_job_and_spreads_across_hosts() {
        let hour = Duration::from_secs(3600);
        let a = delay_for("4c4c4544-host-a", hour, "backup");
        assert_eq!(a, delay_for("4c4c4544-host-a", hour, "backup"));
        assert_ne!(a, delay_for("4c4c4544-host-a", hour, "report"));
        let delays: Vec<Duration> = (0..100)
            .map(|host| delay_for(&format!("machine-{host}"), hour, "backup"))
            .collect();
        assert!(delays.iter().all(|d| *d < hour));
        // Spread over the range: every quarter of it gets some hosts.
        for quarter in 0..4 {
            let (from, to) = (hour * quarter / 4, hour * (quarter + 1) / 4);
            assert!(
                delays.iter().any(|d| (from..to).contains(d)),
                "{quarter}: {delays:?}"
            );
        }
        assert_eq!(delay_for("any", Duration::ZERO, "backup"), Duration::ZERO);
        // Names that differ in their last byte spread too.
        let similar: Vec<Duration> = (1..=4)
            .map(|n| delay_for("host-a", hour, &format!("backup-{n}")))
            .collect();
        for (i, a) in similar.iter().enumerate() {
            for b in &similar[i + 1..] {
                assert!(a.abs_diff(*b) > hour / 100, "{similar:?}");
            }
        }
    }

    #[test]
    fn a_jitter_of_half_the_period_is_refused_and_less_is_not() {
        let minute = Some(Duration::from_secs(60));
        assert!(refused(Duration::from_secs(30), minute).is_some());
        assert!(refused(Duration::from_secs(29), minute).is_none());
        assert!(refused(Duration::from_secs(3600), None).is_none());
    }
}
