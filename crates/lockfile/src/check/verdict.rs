//! `Verdict`: one reason a check gives, with the numbers that prove it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::inspect::{Finding, Severity};

/// One reason a check gives for its status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Verdict {
    /// What it is about.
    pub kind: VerdictKind,
    /// How serious it is: the check's status is its worst verdict's.
    pub severity: Severity,
    /// The verdict in a sentence, for a person: the plugin line lists these.
    pub message: String,
}

impl Verdict {
    /// A verdict of `kind` and `severity`, in the words of `message`.
    pub fn new(kind: VerdictKind, severity: Severity, message: impl Into<String>) -> Verdict {
        Verdict {
            kind,
            severity,
            message: message.into(),
        }
    }

    /// The verdict on one finding, when it is one a check reports. Findings
    /// about the file (a foreign host, a network filesystem, a dead owner
    /// whose lock is free) are `inspect`'s business, not a job's health.
    pub(super) fn on(finding: &Finding) -> Option<Verdict> {
        let (kind, severity) = match finding {
            Finding::NeverSucceeded { .. } => (VerdictKind::NeverSucceeded, Severity::Critical),
            Finding::Silent { .. } => (VerdictKind::Silent, Severity::Critical),
            // A hung holder blocks every later run.
            Finding::HeartbeatSilent { .. } => (VerdictKind::Hung, Severity::Critical),
            // One past its time is worth a look: it may just be slow.
            Finding::Overrunning { .. } | Finding::Aged { .. } => {
                (VerdictKind::Overrunning, Severity::Warning)
            }
            // Why a success or a heartbeat in the file was not believed.
            Finding::PlantedFile { .. } => (VerdictKind::PlantedFile, Severity::Warning),
            Finding::FutureTime { .. } => (VerdictKind::FutureTime, Severity::Warning),
            _ => return None,
        };
        Some(Verdict::new(kind, severity, finding.to_string()))
    }
}

impl fmt::Display for Verdict {
    /// `kind: message`, as the plugin line lists it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// What a verdict is about. Its JSON form is the snake-case name.
///
/// Not exhaustive: a minor release may add kinds, and a reader of an older
/// version reads a kind it does not know as [`VerdictKind::Other`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum VerdictKind {
    /// `never_succeeded`: `expect_every` was given, and no success was
    /// ever recorded.
    NeverSucceeded,
    /// `silent`: the last success is older than `expect_every`.
    Silent,
    /// `hung`: the holder's heartbeat is silent past its threshold.
    Hung,
    /// `overrunning`: the holder has held longer than its own maximum
    /// runtime, or than `max_age`.
    Overrunning,
    /// `failing`: `max_failures` runs in a row have failed.
    Failing,
    /// `missed_ticks`: ticks of `once_per` passed with no run finishing.
    MissedTicks,
    /// `planted_file`: the file was planted by another user, so nothing in
    /// it was believed.
    PlantedFile,
    /// `future_time`: a time in the history lies in the future, so it was
    /// not believed.
    FutureTime,
    /// `saturated`: every slot of a set has been held for longer than
    /// `saturated_after`.
    Saturated,
    /// A kind this version does not know, read from a later one's JSON.
    #[serde(other)]
    Other,
}

impl VerdictKind {
    /// The kind's stable name, as JSON and the plugin line write it.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::NeverSucceeded => "never_succeeded",
            VerdictKind::Silent => "silent",
            VerdictKind::Hung => "hung",
            VerdictKind::Overrunning => "overrunning",
            VerdictKind::Failing => "failing",
            VerdictKind::MissedTicks => "missed_ticks",
            VerdictKind::PlantedFile => "planted_file",
            VerdictKind::FutureTime => "future_time",
            VerdictKind::Saturated => "saturated",
            VerdictKind::Other => "other",
        }
    }
}

impl fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
