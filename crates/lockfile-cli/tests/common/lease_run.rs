//! `lockfile run`, and `inspect --json`, under a lease, whatever the
//! engine: `engine` is its options (`--redis URL`, `--postgres URL`).

use std::process::Output;

use super::{Background, BoundedOutput, lockfile};

/// `lockfile inspect --json ENGINE ARGS`.
pub(crate) fn inspect(engine: &[&str], args: &[&str]) -> Output {
    lockfile()
        .args(["inspect", "--json"])
        .args(engine)
        .args(args)
        .bounded_output()
}

/// `lockfile run ENGINE EXTRA NAME sh -c SCRIPT`, to its end.
pub(crate) fn run(engine: &[&str], extra: &[&str], name: &str, script: &str) -> Output {
    lockfile()
        .arg("run")
        .args(engine)
        .args(extra)
        .args([name, "sh", "-c", script])
        .bounded_output()
}

/// Starts `lockfile run ENGINE EXTRA NAME sh -c SCRIPT`; returns the first
/// line SCRIPT prints.
pub(crate) fn start(
    engine: &[&str],
    extra: &[&str],
    name: &str,
    script: &str,
) -> (Background, String) {
    let mut args = engine.to_vec();
    args.extend(extra);
    args.extend([name, "sh", "-c", script]);
    Background::spawn(&args)
}
