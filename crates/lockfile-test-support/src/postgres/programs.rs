//! How the servers' programs run: as the unprivileged uid 65534 under root
//! (PostgreSQL and PgBouncer refuse root), and checked.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The uid and gid the servers run as when the tests run as root.
pub(super) const UNPRIVILEGED: &str = "65534";

pub(super) fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `program` as the servers' user: itself, or uid 65534 under root.
pub(super) fn as_server_user(program: &Path) -> Command {
    as_server_user_with(program, &[])
}

/// `program` as the servers' user, with `env` set for it alone: through
/// env(1), so that setpriv, which runs as root, does not get it. (libfaketime
/// preloaded into a root process shares its state through shared memory
/// that the server's user then cannot open.)
pub(super) fn as_server_user_with(program: &Path, env: &[(String, String)]) -> Command {
    let mut line: Vec<OsString> = Vec::new();
    if !env.is_empty() {
        line.push("env".into());
        line.extend(env.iter().map(|(k, v)| OsString::from(format!("{k}={v}"))));
    }
    line.push(program.into());
    let mut cmd = if is_root() {
        let mut cmd = Command::new("setpriv");
        cmd.args([
            &format!("--reuid={UNPRIVILEGED}"),
            &format!("--regid={UNPRIVILEGED}"),
            "--clear-groups",
        ]);
        cmd
    } else {
        Command::new(line.remove(0))
    };
    cmd.args(&line);
    cmd
}

/// Runs a setup command, failing the test with its output when it fails.
pub(super) fn run(mut cmd: Command, what: &str) -> Output {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
