//! Milliseconds kept as an integer (so that records compare exactly),
//! written as fractional seconds.

use serde::{Deserialize, Deserializer, Serializer};

pub(crate) fn serialize<S: Serializer>(ms: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match ms {
        Some(ms) => s.serialize_f64(*ms as f64 / 1000.0),
        None => s.serialize_none(),
    }
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(Option::<f64>::deserialize(d)?
        .filter(|secs| secs.is_finite() && *secs >= 0.0)
        .map(|secs| (secs * 1000.0).round().min(u64::MAX as f64) as u64))
}

/// The same for a value that is always there. A value that is not a
/// number of seconds reads as zero: a diagnostic number must not make a
/// whole record unreadable.
pub(crate) mod required {
    use serde::{Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(ms: &u64, s: S) -> Result<S::Ok, S::Error> {
        super::serialize(&Some(*ms), s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        Ok(super::deserialize(d)?.unwrap_or(0))
    }
}
