//! Reading the findings a later minor version wrote: those of a kind this
//! version does not know are left out, the rest read as ever.

use serde::Deserialize as _;

use super::finding::Finding;

/// A report's findings, leaving out those of a kind this version does not
/// know (a later minor version's), so that the rest still reads: for
/// `#[serde(deserialize_with = "lockfile::inspect::known_findings")]`. A
/// finding of a known kind that does not read is an error, never left out:
/// a `heartbeat_silent` dropped would read a hung holder as healthy.
///
/// # Errors
///
/// The deserializer's, when the findings are not a list, or one of a known
/// kind is malformed.
pub fn known_findings<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Finding>, D::Error> {
    use serde::de::Error as _;
    let read = Vec::<serde_json::Value>::deserialize(d)?;
    let mut findings = Vec::with_capacity(read.len());
    for value in read {
        let known = value
            .get("kind")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|kind| Finding::KINDS.contains(&kind));
        if known {
            findings.push(Finding::deserialize(value).map_err(D::Error::custom)?);
        }
    }
    Ok(findings)
}
