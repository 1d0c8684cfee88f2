//! The shell completions, by clap_complete.

use clap::CommandFactory;
use clap_complete::Shell;

/// Each completion script, with the file name its shell looks for:
/// `lockfile.bash` (installed as `bash-completion/completions/lockfile`),
/// `_lockfile` for zsh, `lockfile.fish` for fish.
pub(crate) fn all() -> Vec<(&'static str, Vec<u8>)> {
    [
        (Shell::Bash, "lockfile.bash"),
        (Shell::Zsh, "_lockfile"),
        (Shell::Fish, "lockfile.fish"),
    ]
    .into_iter()
    .map(|(shell, name)| (name, script(shell)))
    .collect()
}

/// The completion script of the `lockfile` command for `shell`.
pub(crate) fn script(shell: Shell) -> Vec<u8> {
    let mut cmd = crate::cli::Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "lockfile", &mut out);
    out
}
