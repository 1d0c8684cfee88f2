//! The JSON contract: what the reports, the health checks and the
//! `lockfile` command's `--json` output promise their readers.
//!
//! Every JSON object a report writes (a lock file's or a lease's report, a
//! check's answer, a reap's entry, an error in their place) carries
//! `"version": 1` ([`VERSION`]), and `docs/json.md` lists every key with
//! its type and unit; a test holds that list to what is really written.
//!
//! Within one version:
//!
//! - a minor release may **add** keys to an object, finding kinds (with
//!   their keys), verdict kinds and reap reasons: a reader ignores what it
//!   does not know, as this crate's `Deserialize` impls do (a finding of an
//!   unknown kind is left out, a verdict of one reads as `other`);
//! - no key is removed, renamed or changes its type or unit, no value
//!   changes its meaning, and the values of `state`, `content`,
//!   `no_record` and a run's `outcome` are the ones `docs/json.md` lists;
//! - durations are seconds (a float where a fraction matters), times are
//!   RFC 3339 strings in UTC, paths are strings (see
//!   [`JsonPath`](crate::inspect::JsonPath) for bytes that are not UTF-8).
//!
//! Anything else is a new version, in a major release. The owner record in
//! a lock file is another document with its own `format` (1) and rules
//! ([`OwnerRecord`]).

/// The version of the JSON contract written in every object's `version`.
pub const VERSION: u32 = 1;

use serde::Serialize;

use crate::OwnerRecord;

/// An owner record as a report shows it: the record's own keys, and its
/// heartbeat interval in seconds beside the record's milliseconds
/// (`heartbeat_interval_seconds`), since a report's durations are seconds.
///
/// For the lease crates, whose reports show records too.
// Exhaustive on purpose: a wrapper around a record, with nothing else it
// could ever hold.
#[allow(clippy::exhaustive_structs)]
#[derive(Clone, Copy, Debug, Serialize)]
pub struct OwnerJson<'a>(#[serde(serialize_with = "owner")] pub &'a OwnerRecord);

fn owner<S: serde::Serializer>(record: &&OwnerRecord, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Shown<'a> {
        #[serde(flatten)]
        record: &'a OwnerRecord,
        #[serde(skip_serializing_if = "Option::is_none")]
        heartbeat_interval_seconds: Option<f64>,
    }
    Shown {
        record,
        heartbeat_interval_seconds: record.heartbeat_interval().map(|d| d.as_secs_f64()),
    }
    .serialize(s)
}
