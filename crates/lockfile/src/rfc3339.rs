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

/// `t` as RFC 3339 in UTC, to the microsecond (`2026-12-01T14:27:27.123456Z`),
/// as records spell their times. Clamped first: humantime panics on a time
/// before 1970, and cannot spell one after 9999.
pub(crate) fn display(t: SystemTime) -> humantime::Rfc3339Timestamp {
    humantime::format_rfc3339_micros(clamp(t))
}

/// `t` as RFC 3339 in UTC, to the second (`2026-12-01T14:27:27Z`), as
/// messages spell ticks. Clamped first, as [`display`] is.
pub(crate) fn seconds(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(clamp(t)).to_string()
}

/// Written through `Display`, which serde_json escapes as it goes: no
/// string is allocated for it.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What a record spells at the edges of the range, and outside it:
    /// clamped, never a panic.
    #[test]
    fn times_at_and_past_the_edges() {
        let before_epoch = UNIX_EPOCH - Duration::from_secs(1);
        for (t, spelled) in [
            (UNIX_EPOCH, "1970-01-01T00:00:00.000000Z"),
            (before_epoch, "1970-01-01T00:00:00.000000Z"),
            (
                UNIX_EPOCH + Duration::from_secs(951_782_400),
                "2000-02-29T00:00:00.000000Z",
            ),
            (
                UNIX_EPOCH + Duration::from_secs(4_107_542_400),
                "2100-03-01T00:00:00.000000Z",
            ),
            (
                UNIX_EPOCH + Duration::new(MAX_SECS, 999_999_999),
                "9999-12-31T23:59:59.999999Z",
            ),
            (
                UNIX_EPOCH + Duration::from_secs(MAX_SECS + 1),
                "9999-12-31T23:59:59.000000Z",
            ),
            (
                UNIX_EPOCH + Duration::from_secs(u64::MAX / 2),
                "9999-12-31T23:59:59.000000Z",
            ),
        ] {
            assert_eq!(display(t).to_string(), spelled, "{t:?}");
            let mut json = serde_json::Serializer::new(Vec::new());
            serialize(&t, &mut json).unwrap();
            assert_eq!(json.into_inner(), format!("\"{spelled}\"").into_bytes());
        }
    }
}
