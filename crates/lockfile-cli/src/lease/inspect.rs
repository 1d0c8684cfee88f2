//! `lockfile inspect --etcd [NAME…]`: who holds each lease, as a table,
//! JSON or Prometheus samples, whatever the engine. Without a NAME, every
//! lease the engine knows.

use std::time::SystemTime;

use lockfile_lease::{Engine, LeaseReport};

use crate::cli::InspectArgs;
use crate::cli::format::Format;
use crate::exit;
use crate::inspect::short;
use crate::inspect::table::aligned;
use crate::monitor::lease_metrics::{self, Outcome};

/// The name of the outcome that stands for a listing of every lease that
/// failed.
const EVERY: &str = "*";

pub(crate) fn inspect(args: &InspectArgs) -> i32 {
    if args.thresholds.stale_after.is_some() {
        errln!(
            "lockfile: --stale-after is for lock files: a lease's renewals prove that its wrapper lives, not that its command makes progress (use --max-age)"
        );
        return exit::USAGE;
    }
    let engine = match super::engine(&args.engine, None) {
        Ok(engine) => engine,
        Err(code) => return code,
    };
    let opts = args.thresholds.options();
    let now = SystemTime::now();
    let outcomes: Vec<(String, lockfile_lease::Result<LeaseReport>)> =
        collect(engine.as_ref(), args)
            .into_iter()
            .map(|(name, r)| (name, r.map(|report| report.judged(&opts, now))))
            .collect();
    let text = match args.format() {
        Format::Table => table(&outcomes),
        Format::Json => json(engine.kind(), &outcomes),
        Format::Prometheus => lease_metrics::render(
            &outcomes
                .iter()
                .map(|(name, r)| Outcome {
                    engine: engine.kind(),
                    name,
                    report: r.as_ref().ok(),
                })
                .collect::<Vec<_>>(),
        ),
    };
    let status = crate::inspect::worst(
        outcomes
            .iter()
            .map(|(_, r)| r.as_ref().ok().map(LeaseReport::severity)),
    );
    crate::inspect::emit(args, &text, status)
}

/// The named leases, or every lease when no name is given.
fn collect(
    engine: &dyn Engine,
    args: &InspectArgs,
) -> Vec<(String, lockfile_lease::Result<LeaseReport>)> {
    if args.paths.is_empty() {
        return match engine.inspect_all() {
            Ok(reports) => lockfile_lease::slots::gather(reports)
                .into_iter()
                .map(|r| (r.name.clone(), Ok(r)))
                .collect(),
            Err(e) => vec![(EVERY.to_owned(), Err(e))],
        };
    }
    args.paths
        .iter()
        .map(|name| {
            let name = name.to_string_lossy().into_owned();
            let report = lockfile_lease::slots::inspect_slots(engine, &name);
            (name, report)
        })
        .collect()
}

fn json(engine: &str, outcomes: &[(String, lockfile_lease::Result<LeaseReport>)]) -> String {
    let values: Vec<serde_json::Value> = outcomes
        .iter()
        .map(|(name, r)| match r {
            Ok(report) => serde_json::to_value(report).expect("a report serialises"),
            Err(e) => serde_json::json!({
                "version": lockfile::json::VERSION,
                "engine": engine,
                "name": name,
                "key": e.key(),
                "state": null,
                "error": e.to_string(),
            }),
        })
        .collect();
    crate::inspect::json_array(&values)
}

fn table(outcomes: &[(String, lockfile_lease::Result<LeaseReport>)]) -> String {
    let now = SystemTime::now();
    let mut rows = vec![
        [
            "NAME",
            "STATE",
            "PID",
            "HOST",
            "JOB",
            "TOKEN",
            "TTL LEFT",
            "LAST SUCCESS",
            "LAST RUN",
        ]
        .map(String::from),
    ];
    let mut notes = vec![Vec::new()];
    let dash = || "-".to_owned();
    for (name, r) in outcomes {
        match r {
            Ok(r) => {
                let (row, mut note) = lease_row(crate::term::escape(name).into_owned(), r, now);
                if !r.slots.is_empty() {
                    let slots = r.with_slots().map(|s| (s.state, s.owner.as_ref()));
                    note.push(format!("  note: {}", crate::inspect::slots_note(slots)));
                }
                rows.push(row);
                notes.push(note);
                for slot in &r.slots {
                    let (row, note) =
                        lease_row(format!("  {}", crate::term::escape(&slot.name)), slot, now);
                    rows.push(row);
                    notes.push(note);
                }
            }
            Err(e) => {
                let mut row: [String; 9] = std::array::from_fn(|_| dash());
                row[0] = crate::term::escape(name).into_owned();
                row[1] = "error".to_owned();
                rows.push(row);
                notes.push(vec![format!("  error: {e}")]);
            }
        }
    }
    aligned(&rows, &notes)
}

/// A lease's row and its notes, the name cell given.
fn lease_row(name: String, r: &LeaseReport, now: SystemTime) -> ([String; 9], Vec<String>) {
    let dash = || "-".to_owned();
    let owner = r.owner.as_ref();
    let row = [
        name,
        r.state.to_string(),
        owner.map_or_else(dash, |o| o.pid.to_string()),
        owner.map_or_else(dash, |o| crate::term::escape(&o.hostname).into_owned()),
        owner
            .and_then(|o| o.job.as_deref())
            .map_or_else(dash, |job| crate::term::escape(job).into_owned()),
        r.fencing_token.map_or_else(dash, |t| t.to_string()),
        r.ttl_remaining
            .map_or_else(dash, |t| format!("{}s", t.as_secs())),
        r.last_success.map_or("never".to_owned(), |t| {
            format!("{} ago", short(now.duration_since(t).ok()))
        }),
        r.last_run
            .as_ref()
            .map_or_else(dash, |run| run.outcome.to_string()),
    ];
    let notes = r
        .findings
        .iter()
        .map(|f| format!("  {} {}: {f}", f.severity(), f.kind()))
        .chain(
            r.content_error
                .iter()
                .chain(&r.history_error)
                .map(|e| format!("  note: {e}")),
        )
        .collect();
    (row, notes)
}
