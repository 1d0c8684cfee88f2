//! `lockfile check`: the alarm on silence. A job that never starts produces no
//! error of its own; this notices that its last success is too old.

use lockfile::{Finding, InspectOptions};

use crate::args::CheckArgs;
use crate::exit;

pub(crate) fn check(args: CheckArgs) -> i32 {
    let report = match InspectOptions::new()
        .expect_every(args.expect_every)
        .inspect(&args.lockfile)
    {
        Ok(report) => report,
        Err(e) => {
            outln!("UNKNOWN: {e}");
            return exit::UNKNOWN;
        }
    };
    let silence = report
        .findings
        .iter()
        .find(|f| matches!(f, Finding::NeverSucceeded { .. } | Finding::Silent { .. }));
    if let Some(finding) = silence {
        outln!("CRITICAL: `{}`: {finding}", args.lockfile.display());
        return exit::CRITICAL;
    }
    // Without a silence finding there is a recent enough success.
    let ago = report
        .last_success
        .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
        .unwrap_or_default();
    outln!(
        "OK: `{}`: last success {} ago",
        args.lockfile.display(),
        humantime::format_duration(std::time::Duration::from_secs(ago.as_secs()))
    );
    exit::OK
}
