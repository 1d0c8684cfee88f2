//! Timestamps as RFC 3339 strings in UTC, readable with `jq` and by humans.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

/// The latest time RFC 3339 (four-digit years) can spell.
const MAX_SECS: u64 = 253_402_300_799;

/// Clamps into the range RFC 3339 can represent, so formatting never
/// panics on a clock set before 1970 or a forged far-future value.
fn clamp(t: SystemTime) -> SystemTime {
    match t.duration_since(UNIX_EPOCH) {
        Err(_) => UNIX_EPOCH,
        Ok(d) if d.as_secs() > MAX_SECS => UNIX_EPOCH + Duration::from_secs(MAX_SECS),
        Ok(_) => t,
    }
}

pub(crate) fn display(t: SystemTime) -> humantime::Rfc3339Timestamp {
    humantime::format_rfc3339_micros(clamp(t))
}

pub(crate) fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&display(*t))
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
    let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    humantime::parse_rfc3339(&s).map_err(D::Error::custom)
}

pub(crate) mod option {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        t: &Option<SystemTime>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => super::serialize(t, s),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<SystemTime>, D::Error> {
        match Option::<std::borrow::Cow<'de, str>>::deserialize(d)? {
            Some(s) => humantime::parse_rfc3339(&s)
                .map(Some)
                .map_err(D::Error::custom),
            None => Ok(None),
        }
    }
}
