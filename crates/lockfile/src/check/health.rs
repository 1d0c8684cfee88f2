//! `Health`: a check's answer, its status with the reasons for it.

use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{Subject, Verdict};
use crate::inspect::Status;
use crate::rfc3339;

/// A check's answer: the status, every verdict behind it (the worst first)
/// and the report they were drawn from.
///
/// Its `Display` is the monitoring plugin's line, as `lockfile check`
/// prints it: `OK: `/run/lock/job.lock`: last success 2h 3m ago`, or
/// `CRITICAL: `…`: silent: …; failing: …`. [`Status`] converts into
/// [`ExitCode`](std::process::ExitCode) for the plugin's exit code.
///
/// Its JSON is `lockfile check --json`'s: see `docs/json.md`.
#[derive(Clone, Debug, Deserialize)]
#[non_exhaustive]
pub struct Health<R> {
    /// The worst verdict's status; `OK` with none.
    pub status: Status,
    /// Every reason for the status, the worst first.
    pub verdicts: Vec<Verdict>,
    /// What was judged.
    pub report: R,
    /// When it was judged.
    #[serde(deserialize_with = "rfc3339::deserialize")]
    pub checked_at: SystemTime,
}

impl<R: Serialize> Serialize for Health<R> {
    /// With the contract's `version` and the plugin's exit `code` beside
    /// the fields.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a, R> {
            version: u32,
            status: Status,
            code: u8,
            #[serde(serialize_with = "rfc3339::serialize")]
            checked_at: SystemTime,
            verdicts: &'a [Verdict],
            report: &'a R,
        }
        Written {
            version: crate::json::VERSION,
            status: self.status,
            code: self.status.code(),
            checked_at: self.checked_at,
            verdicts: &self.verdicts,
            report: &self.report,
        }
        .serialize(s)
    }
}

impl<R> Health<R> {
    pub(super) fn new(verdicts: Vec<Verdict>, report: R, now: SystemTime) -> Health<R> {
        let status = verdicts
            .iter()
            .map(|v| v.severity.status())
            .max()
            .unwrap_or(Status::Ok);
        Health {
            status,
            verdicts,
            report,
            checked_at: now,
        }
    }

    /// Whether the status is `OK` or `WARNING`: what a health endpoint
    /// answers 200 for.
    pub fn is_healthy(&self) -> bool {
        matches!(self.status, Status::Ok | Status::Warning)
    }
}

impl<R: Subject> fmt::Display for Health<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = self.report.describe();
        if self.verdicts.is_empty() {
            let ago = self
                .report
                .last_success()
                .and_then(|t| self.checked_at.duration_since(t).ok())
                .unwrap_or_default();
            return write!(
                f,
                "{}: {what}: last success {} ago",
                self.status,
                humantime::format_duration(Duration::from_secs(ago.as_secs()))
            );
        }
        write!(f, "{}: {what}: ", self.status)?;
        for (i, verdict) in self.verdicts.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{verdict}")?;
        }
        Ok(())
    }
}
