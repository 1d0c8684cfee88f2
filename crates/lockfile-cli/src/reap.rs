//! `lockfile reap`: one line (or JSON object) per file, nothing skipped.

use lockfile::ReapOptions;
use lockfile::reap::ReapEntry;

use crate::cli::ReapArgs;

/// Exits 0 when every directory was reaped (files kept for a reason are not
/// failures), 1 when a directory could not be listed.
pub(crate) fn reap(args: ReapArgs) -> i32 {
    let mut opts = ReapOptions::new();
    opts.remove(args.fix)
        .older_than(args.older_than)
        .include_foreign(args.include_foreign);
    let mut entries: Vec<ReapEntry> = Vec::new();
    let mut failed = false;
    for dir in &args.dirs {
        match lockfile::reap(dir, &opts) {
            Ok(report) => entries.extend(report.entries),
            Err(e) => {
                errln!("lockfile: {e}");
                failed = true;
            }
        }
    }
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&entries).expect("entries serialise")
        );
    } else {
        for e in &entries {
            // The path's bytes as they are, escaped: a name can hold
            // anything but `/` and NUL. The reason is the library's message,
            // which quotes others' words escaped already.
            textln!(
                "{:<12}  {}  {}",
                e.action.to_string(),
                crate::term::path(&e.path),
                e.reason
            );
        }
        if !args.fix
            && entries
                .iter()
                .any(|e| e.action == lockfile::reap::ReapAction::WouldRemove)
        {
            outln!("(dry run: pass --fix to remove)");
        }
    }
    i32::from(failed)
}
