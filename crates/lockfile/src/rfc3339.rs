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

/// The length of a timestamp as [`micros`] spells it:
/// `2026-12-01T14:27:27.123456Z`.
pub(crate) const MICROS_LEN: usize = 27;

/// `t` as humantime's `format_rfc3339_micros` spells it, written into a
/// buffer without the formatting machinery: every record written carries one
/// or more of these, on the lock's hot path. A property test holds the two
/// to the same bytes.
pub(crate) fn micros(t: SystemTime, buf: &mut [u8; MICROS_LEN]) -> &str {
    let since_epoch = clamp(t).duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since_epoch.as_secs();
    let (year, month, day) = civil_from_days(secs / 86_400);
    let of_day = secs % 86_400;
    let mut put = |at: usize, digits: usize, mut value: u64| {
        for slot in buf[at..at + digits].iter_mut().rev() {
            *slot = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, month);
    put(8, 2, day);
    put(11, 2, of_day / 3600);
    put(14, 2, of_day / 60 % 60);
    put(17, 2, of_day % 60);
    put(20, 6, u64::from(since_epoch.subsec_micros()));
    for (at, sep) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (26, b'Z'),
    ] {
        buf[at] = sep;
    }
    std::str::from_utf8(buf).expect("digits and separators are ASCII")
}

/// The proleptic Gregorian date of a day counted from 1970-01-01, for the
/// years 1970 to 9999 that [`clamp`] allows (Howard Hinnant's
/// `civil_from_days`, unsigned since no day precedes the epoch here).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shifted to 0000-03-01, so that a leap day ends its 400-year era.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

pub(crate) fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(micros(*t, &mut [0; MICROS_LEN]))
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
    use proptest::prelude::*;

    use super::*;

    fn humantime_micros(t: SystemTime) -> String {
        display(t).to_string()
    }

    proptest! {
        #[test]
        fn micros_spells_what_humantime_spells(secs in 0..=MAX_SECS + 1000, nanos in 0..1_000_000_000u32) {
            let t = UNIX_EPOCH + Duration::new(secs, nanos);
            let mut buf = [0; MICROS_LEN];
            prop_assert_eq!(micros(t, &mut buf), humantime_micros(t));
        }
    }

    #[test]
    fn micros_at_the_edges() {
        let before_epoch = UNIX_EPOCH - Duration::from_secs(1);
        for t in [
            UNIX_EPOCH,
            before_epoch,
            UNIX_EPOCH + Duration::from_secs(951_782_400), // 2000-02-29
            UNIX_EPOCH + Duration::from_secs(4_107_542_400), // 2100-03-01
            UNIX_EPOCH + Duration::new(MAX_SECS, 999_999_999),
            UNIX_EPOCH + Duration::from_secs(u64::MAX / 2),
        ] {
            assert_eq!(
                micros(t, &mut [0; MICROS_LEN]),
                humantime_micros(t),
                "{t:?}"
            );
        }
    }
}
