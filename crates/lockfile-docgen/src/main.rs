//! Makes the `lockfile` command's man page and its bash, zsh and fish
//! completions from the command's own clap definition, at packaging time:
//!
//! ```text
//! lockfile-docgen OUT_DIR
//! ```
//!
//! writes `OUT_DIR/lockfile.1`, `OUT_DIR/lockfile.bash`, `OUT_DIR/_lockfile`
//! and `OUT_DIR/lockfile.fish` (`scripts/package.sh` runs it).
//!
//! The definition is not copied: this tool builds on the command's own
//! (`lockfile-cli`'s library: `cli/`, `exit.rs` and the `flock`
//! personality's `cli/flock.rs`), so the page and the completions cannot
//! drift from `--help`, and the `lockfile` binary itself carries no
//! generator (its size and start-up are budgets its users feel).

use lockfile_cli::cli::{self, flock};
use lockfile_cli::exit;

mod completions;
mod man;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(out), None) = (args.next(), args.next()) else {
        eprintln!("usage: lockfile-docgen OUT_DIR");
        return ExitCode::from(64);
    };
    match write_all(Path::new(&out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lockfile-docgen: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes the page and the completions into `out` (created if missing).
fn write_all(out: &Path) -> Result<(), String> {
    std::fs::create_dir_all(out)
        .map_err(|e| format!("failed to create `{}`: {e}", out.display()))?;
    let mut files: Vec<(PathBuf, Vec<u8>)> = vec![(out.join("lockfile.1"), man::page())];
    for (name, script) in completions::all() {
        files.push((out.join(name), script));
    }
    for (path, content) in files {
        std::fs::write(&path, content)
            .map_err(|e| format!("failed to write `{}`: {e}", path.display()))?;
    }
    Ok(())
}
