//! Records of format 1 as earlier versions of this crate wrote them, byte for
//! byte: whatever encodes the record now must write what they wrote, and
//! read what they wrote, since lock files outlive upgrades and readers in
//! other languages rely on the field order and the number formats.
//!
//! Each fixture under `tests/fixtures/format1/` is the whole content of a
//! lock file (padding included), captured from the encoder of the time, and
//! the document below is what it holds. Never regenerate them: a fixture
//! that no longer matches is a change of format.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use uuid::Uuid;

use super::document::LockDocument;
use super::*;
use crate::history::{LastRun, Outcome};
use crate::tick::Claim;

/// The latest time RFC 3339 spells, to the microsecond a record keeps.
fn latest() -> SystemTime {
    UNIX_EPOCH + Duration::new(253_402_300_799, 999_999_000)
}

fn at(micros: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(micros)
}

/// An owner with nothing optional.
fn bare_owner() -> OwnerRecord {
    OwnerRecord {
        pid: 1,
        hostname: "h".into(),
        boot_id: None,
        pid_namespace: None,
        start_time: None,
        token: Uuid::from_u128(1),
        job: None,
        acquired_at: UNIX_EPOCH,
        heartbeat_interval_ms: None,
        heartbeat_source: None,
        max_runtime_ms: None,
        kill_after_ms: None,
        evicted: None,
        release: Release::Recorded,
        slot: None,
    }
}

/// An owner with every optional field set.
fn full_owner() -> OwnerRecord {
    OwnerRecord {
        pid: 4242,
        hostname: "build-01.example.org".into(),
        boot_id: Some("6b1d53ba-1163-46c1-b3d2-e33dfce01e56".into()),
        pid_namespace: Some(4_026_531_836),
        start_time: Some(123_456),
        token: Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef),
        job: Some("nightly-backup".to_owned()),
        acquired_at: at(1_764_511_652_123_456),
        heartbeat_interval_ms: Some(30_000),
        heartbeat_source: Some(HeartbeatSource::Command),
        max_runtime_ms: Some(3_600_500),
        kill_after_ms: Some(10_001),
        evicted: Some(Box::new(Evicted {
            token: Uuid::from_u128(0x99),
            pid: 17,
            job: Some("nightly-backup".to_owned()),
            silent_ms: 61_500,
        })),
        release: Release::Unrecorded,
        slot: None,
    }
}

fn full_run() -> LastRun {
    LastRun {
        started_at: at(1_764_500_000_000_001),
        finished_at: at(1_764_500_123_456_789),
        duration_seconds: 123.456788,
        exit_code: Some(3),
        signal: Some(15),
        outcome: Outcome::Failed,
        consecutive_failures: 2,
        last_failure_at: Some(at(1_764_500_123_456_789)),
        tick: Some(at(1_764_496_800_000_000)),
        token: Some(Uuid::from_u128(0x77).to_string()),
    }
}

fn every_field_set() -> LockDocument {
    let owner = full_owner();
    let mut doc = LockDocument::new(
        owner.clone(),
        Some(at(1_764_400_000_654_321)),
        Some(Box::new(full_run())),
    );
    doc.last_claimed_tick = Some(Box::new(Claim::by(
        &owner,
        at(1_764_511_200_000_000),
        at(1_764_511_652_000_001),
    )));
    doc
}

fn none_set() -> LockDocument {
    LockDocument::new(bare_owner(), None, None)
}

fn awkward_job() -> LockDocument {
    let mut owner = bare_owner();
    owner.hostname = "hôte-ünïcode".into();
    owner.job = Some(
        "say \"hi\" \\ C:\\dir\u{0}\u{1}\u{8}\t\n\r\u{1f}\u{7f} é 日本 🦀 \u{2028}/".to_owned(),
    );
    LockDocument::new(owner, None, None)
}

fn released() -> LockDocument {
    let mut doc = LockDocument::new(full_owner(), Some(at(1_764_400_000_000_000)), None);
    doc.owner.release = Release::Recorded;
    doc.owner.evicted = None;
    doc.released = true;
    doc
}

fn evicted() -> LockDocument {
    let mut owner = bare_owner();
    owner.job = Some("hourly".to_owned());
    owner.heartbeat_interval_ms = Some(5_000);
    owner.heartbeat_source = Some(HeartbeatSource::Wrapper);
    owner.evicted = Some(Box::new(Evicted {
        token: Uuid::from_u128(u128::MAX),
        pid: 31_337,
        job: None,
        silent_ms: 1,
    }));
    LockDocument::new(owner, None, None)
}

fn tick_claim() -> LockDocument {
    let owner = full_owner();
    let mut run = full_run();
    run.outcome = Outcome::Succeeded;
    run.exit_code = Some(0);
    run.signal = None;
    run.consecutive_failures = 0;
    run.last_failure_at = None;
    let mut doc = LockDocument::new(bare_owner(), None, Some(Box::new(run)));
    doc.last_claimed_tick = Some(Box::new(Claim::by(
        &owner,
        at(1_764_511_200_000_000),
        at(1_764_511_200_000_500),
    )));
    doc
}

fn large_numbers() -> LockDocument {
    let mut owner = full_owner();
    owner.pid = u32::MAX;
    owner.pid_namespace = Some(u64::MAX);
    owner.start_time = Some(u64::MAX);
    owner.token = Uuid::max();
    owner.acquired_at = latest();
    owner.heartbeat_interval_ms = Some(u64::MAX);
    owner.max_runtime_ms = Some(u64::MAX);
    owner.kill_after_ms = Some(1 << 53);
    owner.evicted = Some(Box::new(Evicted {
        token: Uuid::max(),
        pid: u32::MAX,
        job: None,
        silent_ms: u64::MAX,
    }));
    let run = LastRun {
        started_at: UNIX_EPOCH,
        finished_at: latest(),
        duration_seconds: f64::MAX,
        exit_code: Some(i32::MIN),
        signal: Some(i32::MAX),
        outcome: Outcome::LeaseLost,
        consecutive_failures: u32::MAX,
        last_failure_at: Some(latest()),
        tick: Some(latest()),
        token: None,
    };
    let mut doc = LockDocument::new(owner.clone(), Some(latest()), Some(Box::new(run)));
    doc.last_claimed_tick = Some(Box::new(Claim::by(&owner, latest(), latest())));
    doc
}

/// How a fixture's bytes came to be.
#[derive(Clone, Copy)]
enum Written {
    /// The encoder's output, as `acquire` and the guard's updates write it.
    Encoded,
    /// The encoder's output with its flag then overwritten by `release`.
    ThenReleased,
}

struct Fixture {
    name: &'static str,
    bytes: &'static [u8],
    doc: fn() -> LockDocument,
    written: Written,
}

macro_rules! fixture {
    ($name:literal, $doc:expr, $written:expr) => {
        Fixture {
            name: $name,
            bytes: include_bytes!(concat!("../../tests/fixtures/format1/", $name, ".lock")),
            doc: $doc,
            written: $written,
        }
    };
}

fn fixtures() -> [Fixture; 9] {
    [
        fixture!("every_field_set", every_field_set, Written::Encoded),
        fixture!("none_set", none_set, Written::Encoded),
        fixture!("awkward_job", awkward_job, Written::Encoded),
        fixture!("released_encoded", released, Written::Encoded),
        fixture!("released_by_release", released, Written::ThenReleased),
        fixture!(
            "none_set_released",
            none_set_released,
            Written::ThenReleased
        ),
        fixture!("evicted", evicted, Written::Encoded),
        fixture!("tick_claim", tick_claim, Written::Encoded),
        fixture!("large_numbers", large_numbers, Written::Encoded),
    ]
}

fn none_set_released() -> LockDocument {
    let mut doc = none_set();
    doc.released = true;
    doc
}

/// What the current code writes for a fixture's document, the way it came
/// to be.
fn written_now(fixture: &Fixture) -> Vec<u8> {
    let mut doc = (fixture.doc)();
    if let Written::ThenReleased = fixture.written {
        doc.released = false;
    }
    let mut buf = Vec::new();
    doc.encode_into(&mut buf);
    if let Written::ThenReleased = fixture.written {
        buf[RELEASED_FLAG_OFFSET..][..RELEASED_TRUE.len()].copy_from_slice(RELEASED_TRUE);
    }
    buf
}

#[test]
fn records_written_before_decode_to_what_they_held() {
    for fixture in fixtures() {
        assert_eq!(
            LockDocument::decode(fixture.bytes),
            Ok((fixture.doc)()),
            "{}",
            fixture.name
        );
        assert_eq!(
            decode_record(fixture.bytes),
            Ok((fixture.doc)().owner),
            "{}",
            fixture.name
        );
    }
}

#[test]
fn records_written_now_decode_to_the_same_documents() {
    for fixture in fixtures() {
        let now = written_now(&fixture);
        assert_eq!(
            LockDocument::decode(&now),
            LockDocument::decode(fixture.bytes),
            "{}",
            fixture.name
        );
    }
}

#[test]
fn records_written_now_are_the_bytes_written_before() {
    for fixture in fixtures() {
        let now = written_now(&fixture);
        assert!(
            now == fixture.bytes,
            "{}: the encoder's bytes changed:\n  before: {}\n  now:    {}",
            fixture.name,
            String::from_utf8_lossy(fixture.bytes).trim_end(),
            String::from_utf8_lossy(&now).trim_end(),
        );
    }
}

/// The bytes on the thread's reused buffer, which `acquire` writes, are the
/// same as those of a fresh one.
#[test]
fn the_hot_path_writes_the_fixtures_bytes() {
    for fixture in fixtures() {
        if let Written::Encoded = fixture.written {
            let now = (fixture.doc)().encode_then(<[u8]>::to_vec);
            assert!(now == fixture.bytes, "{}", fixture.name);
        }
    }
}
