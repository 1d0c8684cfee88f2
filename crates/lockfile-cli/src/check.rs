//! `lockfile check`: the alarm on silence and on failure. A job that never
//! starts produces no error of its own; this notices that its last success is
//! too old, that its runs keep failing, or that its holder hangs or overruns.
//! For a lock file, or a lease (`--etcd`): the same verdicts, exit statuses
//! and JSON, except `hung`, which a lease cannot tell (its renewals prove
//! that the wrapper lives, not that the command makes progress).

use std::time::{Duration, SystemTime};

use lockfile::LockReport;
use lockfile::history::LastRun;
use lockfile::inspect::{Finding, InspectOptions, Severity, Status};
use lockfile::tick::Schedule;
use lockfile_lease::LeaseReport;
use serde::Serialize;

use crate::cli::CheckArgs;

/// One thing `check` tells apart, with the numbers that prove it.
#[derive(Debug, Serialize)]
struct Verdict {
    kind: &'static str,
    severity: Severity,
    message: String,
}

pub(crate) fn check(args: CheckArgs) -> i32 {
    let schedule = match args.ticks.schedule() {
        Ok(schedule) => schedule,
        Err(e) => {
            errln!("lockfile: {e}");
            return crate::exit::USAGE;
        }
    };
    let mut opts = InspectOptions::new();
    if let Some(d) = args.expect_every {
        opts.expect_every(d);
    }
    if let Some(d) = args.max_age {
        opts.max_age(d);
    }
    if let Some(d) = args.stale_after {
        opts.stale_after(d);
    }
    let subject = if args.engine.chosen() {
        let engine = match crate::lease::engine(&args.engine, None) {
            Ok(engine) => engine,
            Err(code) => return code,
        };
        let name = args.lockfile.to_string_lossy();
        engine
            .inspect(&name)
            .map(|r| Subject::Lease(r.judged(&opts, SystemTime::now())))
            .map_err(|e| e.to_string())
    } else {
        opts.inspect(&args.lockfile)
            .map(Subject::Lock)
            .map_err(|e| e.to_string())
    };
    let report = match subject {
        Ok(report) => report,
        Err(e) => {
            if args.json {
                print_json(Status::Unknown, &[], None, Some(&e));
            } else {
                textln!("UNKNOWN: {e}");
            }
            return Status::Unknown.code().into();
        }
    };
    let mut verdicts = report.verdicts(args.max_failures);
    if let Some(schedule) = schedule {
        verdicts.extend(missed_ticks(
            &schedule,
            report.last_tick(),
            SystemTime::now(),
        ));
        verdicts.sort_by_key(|v| std::cmp::Reverse(v.severity));
    }
    let status = verdicts
        .iter()
        .map(|v| v.severity.status())
        .max()
        .unwrap_or(Status::Ok);
    let what = report.what(&args);
    if args.json {
        print_json(status, &verdicts, Some(&report), None);
    } else if verdicts.is_empty() {
        let ago = report
            .last_success()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .unwrap_or_default();
        textln!(
            "OK: {what}: last success {} ago",
            humantime::format_duration(Duration::from_secs(ago.as_secs()))
        );
    } else {
        let said: Vec<String> = verdicts
            .iter()
            .map(|v| format!("{}: {}", v.kind, v.message))
            .collect();
        textln!("{status}: {what}: {}", said.join("; "));
    }
    status.code().into()
}

/// What is checked: a lock file, or a lease.
#[derive(Serialize)]
#[serde(untagged)]
enum Subject {
    Lock(LockReport),
    Lease(LeaseReport),
}

impl Subject {
    /// How messages name it: `` `PATH` ``, or `` etcd lease `NAME` ``.
    fn what(&self, args: &CheckArgs) -> String {
        match self {
            Subject::Lock(_) => format!("`{}`", crate::term::path(&args.lockfile)),
            Subject::Lease(r) => format!("{} lease `{}`", r.engine, crate::term::escape(&r.name)),
        }
    }

    /// The tick of the last finished run, when it claimed one.
    fn last_tick(&self) -> Option<SystemTime> {
        match self {
            Subject::Lock(r) => r.last_run.as_ref().and_then(|r| r.tick),
            Subject::Lease(r) => r.last_run.as_ref().and_then(|r| r.tick),
        }
    }

    fn last_success(&self) -> Option<SystemTime> {
        match self {
            Subject::Lock(r) => r.last_success,
            Subject::Lease(r) => r.last_success,
        }
    }

    /// Every verdict on the report, the worst first.
    fn verdicts(&self, max_failures: u32) -> Vec<Verdict> {
        match self {
            Subject::Lock(r) => verdicts(&r.findings, r.last_run.as_ref(), max_failures),
            Subject::Lease(r) => verdicts(&r.findings, r.last_run.as_ref(), max_failures),
        }
    }
}

/// Every verdict on a report's findings and last run, the worst first.
fn verdicts(findings: &[Finding], last_run: Option<&LastRun>, max_failures: u32) -> Vec<Verdict> {
    let mut verdicts: Vec<Verdict> = findings
        .iter()
        .filter_map(|f| {
            let kind = match f {
                Finding::NeverSucceeded { .. } => "never_succeeded",
                Finding::Silent { .. } => "silent",
                Finding::HeartbeatSilent { .. } => "hung",
                Finding::Overrunning { .. } | Finding::Aged { .. } => "overrunning",
                // Why a success or heartbeat in the file was not believed.
                Finding::PlantedFile { .. } => "planted_file",
                Finding::FutureTime { .. } => "future_time",
                _ => return None,
            };
            // A hung holder is critical; one past its time is worth a look.
            let severity = match f {
                Finding::Overrunning { .. }
                | Finding::Aged { .. }
                | Finding::PlantedFile { .. }
                | Finding::FutureTime { .. } => Severity::Warning,
                _ => Severity::Critical,
            };
            Some(Verdict {
                kind,
                severity,
                message: f.to_string(),
            })
        })
        .collect();
    if let Some(run) = last_run
        && run.consecutive_failures >= max_failures
    {
        let how = match (run.exit_code, run.signal) {
            (Some(code), _) => format!(", exit status {code}"),
            (None, Some(sig)) => format!(", signal {sig}"),
            (None, None) => String::new(),
        };
        verdicts.push(Verdict {
            kind: "failing",
            severity: Severity::Critical,
            message: format!(
                "{} run(s) in a row failed (at most {max_failures} allowed); the last one {}{how}, {} ago",
                run.consecutive_failures,
                run.outcome,
                humantime::format_duration(Duration::from_secs(
                    SystemTime::now()
                        .duration_since(run.finished_at)
                        .unwrap_or_default()
                        .as_secs()
                ))
            ),
        });
    }
    verdicts.sort_by_key(|v| std::cmp::Reverse(v.severity));
    verdicts
}

/// How many missed ticks a message lists before it only counts.
const LISTED_TICKS: usize = 3;

/// `missed_ticks`, CRITICAL, when the last finished tick is older than the
/// current tick (the one nearest `now`) minus one period: every tick after
/// it, up to the one before the current (which may still be running), was
/// missed. Counted, not walked: a last tick decades old costs nothing.
///
/// A last tick later than the current one was claimed by a clock ahead of
/// this one by more than half a period (or forged): it is not believed, so
/// that a tick dated in 9999 never mutes the alarm; `future_time` says so.
fn missed_ticks(schedule: &Schedule, last: Option<SystemTime>, now: SystemTime) -> Vec<Verdict> {
    let period = schedule.period();
    let current = schedule.tick_at(now);
    let show = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
    let mut verdicts = Vec::new();
    let last = match last {
        Some(last) if last > current => {
            verdicts.push(Verdict {
                kind: "future_time",
                severity: Severity::Warning,
                message: format!(
                    "the last finished tick {} lies after the current tick {}: it is not believed",
                    show(last),
                    show(current)
                ),
            });
            None
        }
        last => last,
    };
    // A valid schedule's current tick is well after the epoch.
    let Some(due) = current.checked_sub(period) else {
        return verdicts;
    };
    let message = match last {
        None => format!(
            "no tick has finished yet (once per {}; the last one due was {})",
            humantime::format_duration(period),
            show(due)
        ),
        Some(last) if last >= due => return verdicts,
        Some(last) => {
            let period_ms = period.as_millis().max(1);
            let behind = due.duration_since(last).unwrap_or_default().as_millis();
            // Ticks `last + period`, …, the last one at or before `due`.
            let count = behind / period_ms;
            let missed: Vec<String> = (1..=count.min(LISTED_TICKS as u128))
                .filter_map(|n| {
                    let n = u32::try_from(n).ok()?;
                    last.checked_add(period.checked_mul(n)?)
                })
                .map(show)
                .collect();
            let more = count.saturating_sub(missed.len() as u128);
            let and_more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!(
                "{count} tick(s) missed since the last finished one ({}): {}{and_more}",
                show(last),
                missed.join(", ")
            )
        }
    };
    verdicts.push(Verdict {
        kind: "missed_ticks",
        severity: Severity::Critical,
        message,
    });
    verdicts
}

fn print_json(status: Status, verdicts: &[Verdict], report: Option<&Subject>, error: Option<&str>) {
    #[derive(Serialize)]
    struct CheckJson<'a> {
        status: Status,
        code: u8,
        verdicts: &'a [Verdict],
        report: Option<&'a Subject>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<&'a str>,
    }
    let json = CheckJson {
        status,
        code: status.code(),
        verdicts,
        report,
        error,
    };
    outln!(
        "{}",
        serde_json::to_string_pretty(&json).expect("a check serialises")
    );
}
