//! How a run that did not succeed ended, in words: for the final ping's
//! body and for `--output-on-failure`'s line.

use lockfile::history::Outcome;

/// How a run that did not succeed ended, for a person: "the run …".
pub(crate) fn what_happened(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::TimedOut => "ran past its maximum runtime and was stopped",
        Outcome::Hung => "stopped proving progress and was stopped",
        Outcome::Evicted => "was stopped by a later run that judged it hung",
        Outcome::LeaseLost => "lost its lease and was stopped",
        _ => "failed",
    }
}
