//! `lockfile inspect`: a human table, JSON or Prometheus samples, and a
//! monitoring-plugin status.

use std::time::{Duration, SystemTime};

use lockfile::LockReport;
use lockfile::inspect::{InspectOptions, Severity, Status};

pub(crate) mod table;

use crate::cli::InspectArgs;
use crate::cli::format::Format;
use crate::inspect::table::aligned;

/// One lock file's outcome: a report, or why it could not be inspected.
pub(crate) type Outcome = (std::path::PathBuf, lockfile::Result<LockReport>);

pub(crate) fn inspect(args: InspectArgs) -> i32 {
    let opts = args.thresholds.options();
    let outcomes = collect(&args.paths, &opts);
    let text = match args.format() {
        Format::Table => table(&outcomes),
        Format::Json => json(&outcomes),
        Format::Prometheus => crate::monitor::lock_metrics::render(&outcomes),
    };
    emit(&args, &text, status(&outcomes))
}

/// Prints `text`, or writes it to `--output`; returns the exit status,
/// `status` unless the file could not be written.
pub(crate) fn emit(args: &InspectArgs, text: &str, status: i32) -> i32 {
    let Some(file) = &args.print.output else {
        use std::io::Write as _;
        let _ = std::io::stdout().write_all(text.as_bytes());
        return status;
    };
    // Findings make the status non-zero; they are what the file must carry.
    match crate::atomic::write_atomically(file, &crate::atomic::private_tmp(file), text.as_bytes())
    {
        Ok(()) => status,
        Err(e) => {
            errln!("lockfile: --output: {e}");
            // As for a path that could not be inspected: only a critical
            // finding ranks above it.
            if status == i32::from(Status::Critical.code()) {
                status
            } else {
                i32::from(Status::Unknown.code())
            }
        }
    }
}

/// Inspects each path: a directory means its `*.lock` files.
pub(crate) fn collect(paths: &[std::path::PathBuf], opts: &InspectOptions) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for path in paths {
        if path.is_dir() {
            match opts.inspect_dir(path) {
                Ok(reports) => outcomes.extend(reports.into_iter().map(|r| match r {
                    Ok(report) => (report.path.clone(), Ok(report)),
                    Err(e) => (e.path().to_path_buf(), Err(e)),
                })),
                Err(e) => outcomes.push((path.clone(), Err(e))),
            }
        } else {
            outcomes.push((path.clone(), opts.inspect_slots(path)));
        }
    }
    outcomes
}

/// The monitoring-plugin status: the most severe outcome wins, in the order
/// critical (2), could not inspect (3), warning (1), ok (0). A critical
/// finding is never hidden behind an unreadable file.
pub(crate) fn status(outcomes: &[Outcome]) -> i32 {
    worst(
        outcomes
            .iter()
            .map(|(_, r)| r.as_ref().ok().map(LockReport::severity)),
    )
}

/// The status of many reports, lock files or leases: each the severity of
/// its worst finding, or `None` when it could not be inspected.
pub(crate) fn worst(severities: impl Iterator<Item = Option<Option<Severity>>>) -> i32 {
    severities
        .map(|s| match s {
            Some(severity) => severity.map_or(Status::Ok, Severity::status),
            None => Status::Unknown,
        })
        .max()
        .unwrap_or(Status::Ok)
        .code()
        .into()
}

fn json(outcomes: &[Outcome]) -> String {
    let values: Vec<serde_json::Value> = outcomes
        .iter()
        .map(|(path, r)| match r {
            Ok(report) => serde_json::to_value(report).expect("a report serialises"),
            Err(e) => {
                let mut value = serde_json::json!({ "version": lockfile::json::VERSION });
                let path = serde_json::to_value(lockfile::inspect::JsonPath(path))
                    .expect("a path serialises");
                if let (Some(value), serde_json::Value::Object(path)) =
                    (value.as_object_mut(), path)
                {
                    value.extend(path);
                }
                value["state"] = serde_json::Value::Null;
                value["error"] = e.to_string().into();
                value
            }
        })
        .collect();
    json_array(&values)
}

/// `values` as one pretty JSON array and a newline: what `--json` prints,
/// for lock files and leases alike.
pub(crate) fn json_array(values: &[serde_json::Value]) -> String {
    let mut text = serde_json::to_string_pretty(values).expect("JSON values serialise");
    text.push('\n');
    text
}

fn table(outcomes: &[Outcome]) -> String {
    let now = SystemTime::now();
    let mut rows = vec![
        [
            "PATH",
            "STATE",
            "PID",
            "HOST",
            "JOB",
            "HELD",
            "HEARTBEAT",
            "LAST SUCCESS",
            "LAST RUN",
        ]
        .map(String::from),
    ];
    let mut notes: Vec<Vec<String>> = vec![Vec::new()];
    for (path, outcome) in outcomes {
        match outcome {
            Ok(r) => {
                let (row, mut note) = report_row(crate::term::path(path), r, now);
                if !r.slots.is_empty() {
                    note.push(format!(
                        "  note: {}",
                        slots_note(r.with_slots().map(|s| (s.state, s.owner.as_ref())))
                    ));
                }
                rows.push(row);
                notes.push(note);
                for slot in &r.slots {
                    let (row, note) =
                        report_row(format!("  {}", crate::term::path(&slot.path)), slot, now);
                    rows.push(row);
                    notes.push(note);
                }
            }
            Err(e) => {
                rows.push([
                    crate::term::path(path),
                    "error".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                    "-".to_owned(),
                ]);
                notes.push(vec![format!("  error: {e}")]);
            }
        }
    }
    aligned(&rows, &notes)
}

/// A report's row and its notes, the path cell given.
fn report_row(path: String, r: &LockReport, now: SystemTime) -> ([String; 9], Vec<String>) {
    let owner = r.owner.as_ref().filter(|_| !r.released);
    let pid = r
        .holders
        .first()
        .map(|h| h.pid)
        .or(owner.map(|o| o.pid))
        .map_or("-".to_owned(), |p| p.to_string());
    let row = [
        path,
        r.state.to_string(),
        pid,
        owner.map_or("-".to_owned(), |o| {
            crate::term::escape(&o.hostname).into_owned()
        }),
        r.owner
            .as_ref()
            .and_then(|o| o.job.as_deref())
            .map_or("-".to_owned(), |job| crate::term::escape(job).into_owned()),
        short(r.age),
        heartbeat_cell(r),
        r.last_success.map_or("never".to_owned(), |t| {
            format!("{} ago", short(now.duration_since(t).ok()))
        }),
        r.last_run
            .as_ref()
            .map_or("-".to_owned(), |run| run.outcome.to_string()),
    ];
    let notes = r
        .findings
        .iter()
        .map(|f| format!("  {} {}: {f}", f.severity(), f.kind()))
        .chain(
            r.no_record
                .iter()
                .map(|why| format!("  note: no owner record: {why}")),
        )
        .chain(
            r.content_error
                .iter()
                .filter(|_| r.no_record.is_none())
                .map(|e| format!("  note: {e}")),
        )
        .collect();
    (row, notes)
}

/// `slots: 2 of 3 held`: how many of a set's slots (each its state and
/// record) are held, of its N ([`lockfile::slot::in_force`]).
pub(crate) fn slots_note<'a>(
    slots: impl Iterator<Item = (lockfile::LockState, Option<&'a lockfile::OwnerRecord>)>,
) -> String {
    let (held, n) = lockfile::slot::in_force(
        slots.map(|(state, owner)| (state == lockfile::LockState::Held, owner)),
    );
    format!("slots: {held} of {n} held")
}

/// The heartbeat's age, then who keeps it and how often they promised:
/// `12s (command, every 30s)`.
fn heartbeat_cell(r: &LockReport) -> String {
    let age = short(r.heartbeat_age);
    let Some(owner) = r.owner.as_ref().filter(|_| r.heartbeat_age.is_some()) else {
        return age;
    };
    let promise = owner
        .heartbeat_interval()
        .map(|i| format!("every {}", humantime::format_duration(i)));
    let parts: Vec<String> = owner
        .heartbeat_source
        .map(|s| s.as_str().to_owned())
        .into_iter()
        .chain(promise)
        .collect();
    if parts.is_empty() {
        age
    } else {
        format!("{age} ({})", parts.join(", "))
    }
}

/// A duration for a table cell: whole seconds, humanised.
pub(crate) fn short(d: Option<Duration>) -> String {
    d.map_or("-".to_owned(), |d| {
        humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
    })
}
