//! `lockfile check`: the alarm on silence and on failure, a face over the
//! library's [`lockfile::check`]: it builds the options from the command
//! line, asks the library, and prints its answer as the monitoring plugin's
//! line or as JSON. For a lock file or a lease: the same verdicts, exit
//! statuses and JSON, except `hung`, which a lease cannot tell.

use std::fmt::Display;

use lockfile::check::{CheckOptions, Health, Status};
use serde::Serialize;

use crate::cli::CheckArgs;

pub(crate) fn check(args: CheckArgs) -> i32 {
    let mut opts = CheckOptions::new();
    match args.ticks.schedule() {
        Ok(Some(schedule)) => {
            opts.once_per(schedule);
        }
        Ok(None) => {}
        Err(e) => {
            errln!("lockfile: {e}");
            return crate::exit::USAGE;
        }
    }
    if let Some(d) = args.expect_every {
        opts.expect_every(d);
    }
    if let Some(d) = args.max_age {
        opts.max_age(d);
    }
    if let Some(d) = args.stale_after {
        opts.stale_after(d);
    }
    if let Some(d) = args.saturated_after {
        opts.saturated_after(d);
    }
    opts.max_failures(args.max_failures);
    let status = if args.engine.chosen() {
        let engine = match crate::lease::engine(&args.engine, None) {
            Ok(engine) => engine,
            Err(code) => return code,
        };
        let name = args.lockfile.to_string_lossy();
        answer(
            lockfile_lease::slots::check(engine.as_ref(), &name, &opts),
            args.json,
        )
    } else {
        answer(opts.check(&args.lockfile), args.json)
    };
    status.code().into()
}

/// Prints the library's answer (or `UNKNOWN` for what it could not
/// judge), and returns its status.
fn answer<R, E>(health: Result<Health<R>, E>, json: bool) -> Status
where
    R: lockfile::check::Subject + Serialize,
    E: Display,
{
    match health {
        Ok(health) if json => {
            outln!("{}", pretty(&health));
            health.status
        }
        Ok(health) => {
            textln!("{health}");
            health.status
        }
        Err(e) if json => {
            outln!("{}", pretty(&Unknown::new(e.to_string())));
            Status::Unknown
        }
        Err(e) => {
            textln!("UNKNOWN: {e}");
            Status::Unknown
        }
    }
}

/// The JSON of a check that could not judge: a [`Health`]'s keys, with no
/// verdicts, no report, and the error.
#[derive(Serialize)]
struct Unknown {
    version: u32,
    status: Status,
    code: u8,
    verdicts: [(); 0],
    report: Option<()>,
    error: String,
}

impl Unknown {
    fn new(error: String) -> Unknown {
        Unknown {
            version: lockfile::json::VERSION,
            status: Status::Unknown,
            code: Status::Unknown.code(),
            verdicts: [],
            report: None,
            error,
        }
    }
}

fn pretty(json: &impl Serialize) -> String {
    serde_json::to_string_pretty(json).expect("a check serialises")
}
