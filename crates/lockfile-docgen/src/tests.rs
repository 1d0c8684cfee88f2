//! The page and the completions hold everything `--help` says: every option
//! that a subcommand's `--help` prints, in the man page and the completions.
//! (`scripts/package.sh` checks the packaged binary's `--help` against the
//! installed page too.)

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

/// What `lockfile ARGS --help` prints, as the binary prints it.
fn help(args: &[&str]) -> String {
    let mut argv = vec!["lockfile"];
    argv.extend_from_slice(args);
    argv.push("--help");
    let err = Cli::command()
        .try_get_matches_from(argv)
        .expect_err("--help ends the parse");
    assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp);
    err.to_string()
}

/// The long options (`--name`) that `text` mentions.
fn long_options(text: &str) -> Vec<String> {
    let mut options: Vec<String> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter_map(|word| word.strip_prefix("--"))
        .filter(|name| name.starts_with(|c: char| c.is_ascii_alphabetic()))
        .map(|name| format!("--{}", name.trim_end_matches('-')))
        .collect();
    options.sort();
    options.dedup();
    options
}

/// The man page as words: roff's escaped hyphens (`\-`) read as hyphens,
/// and without its font changes (`\fB`).
fn man_text() -> String {
    let page = String::from_utf8(crate::man::page()).unwrap();
    ["\\fB", "\\fI", "\\fR"]
        .into_iter()
        .fold(page.replace("\\-", "-"), |page, font| {
            page.replace(font, "")
        })
}

/// Every subcommand but clap's `help`.
fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .filter(|name| name != "help")
        .collect()
}

#[test]
fn every_long_option_of_every_help_is_in_the_man_page() {
    let man = man_text();
    let mut seen = 0;
    let mut pages = vec![help(&[])];
    for sub in subcommands() {
        // `lockfile flock --help` is flock(1)'s help, from the description.
        if sub != "flock" {
            pages.push(help(&[&sub]));
        }
    }
    pages.push(crate::flock::command().render_help().to_string());
    for page in pages {
        let options = long_options(&page);
        assert!(!options.is_empty(), "{page}");
        for option in options {
            assert!(man.contains(&option), "{option} is not in the man page");
            seen += 1;
        }
    }
    // `run` alone has about 30; a parse that finds none proves nothing.
    assert!(seen > 60, "only {seen} options seen");
    for must in [
        "--nonblock",
        "--nb",
        "--timeout",
        "--once-per",
        "--etcd",
        "--fix",
    ] {
        assert!(man.contains(must), "{must}");
    }
}

#[test]
fn the_man_page_has_every_subcommand_and_the_flock_personality() {
    let man = man_text();
    for sub in subcommands() {
        assert!(man.contains(&format!(".SS \"lockfile {sub}")), "{sub}");
    }
    // flock(1)'s short options and its synopsis.
    for option in [
        "-s, --shared",
        "-u, --unlock",
        "-w, --timeout",
        "-E, --conflict-exit-code",
    ] {
        assert!(man.contains(option), "{option}");
    }
    assert!(man.contains("flock [OPTIONS] FILE|DIRECTORY -c COMMAND"));
    // Subsections, not pages: no subcommand's OPTIONS heading ends COMMANDS.
    let headings: Vec<&str> = man.lines().filter(|l| l.starts_with(".SH")).collect();
    assert_eq!(
        headings,
        [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH DESCRIPTION",
            ".SH OPTIONS",
            ".SH COMMANDS",
            ".SH \"EXIT STATUS\"",
            ".SH \"SEE ALSO\"",
            ".SH VERSION",
        ]
    );
}

#[test]
fn every_completion_knows_every_subcommand_and_option() {
    let run = long_options(&help(&["run"]));
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let script = String::from_utf8(crate::completions::script(shell)).unwrap();
        for sub in subcommands() {
            assert!(script.contains(&sub), "{shell}: {sub}");
        }
        for option in &run {
            // fish spells a long option `-l name`.
            let fish = format!("-l {}", option.trim_start_matches("--"));
            assert!(
                script.contains(option.as_str()) || script.contains(&fish),
                "{shell}: {option}"
            );
        }
    }
}

/// bash loads the script and binds it to `lockfile`.
#[test]
fn the_bash_completion_loads() {
    let dir = std::env::temp_dir().join(format!("lockfile-docgen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("lockfile.bash");
    std::fs::write(&script, crate::completions::script(Shell::Bash)).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg("source \"$1\" && complete -p lockfile")
        .arg("bash")
        .arg(&script)
        .output();
    std::fs::remove_dir_all(&dir).unwrap();
    let out = out.expect("bash runs");
    assert!(out.status.success(), "{out:?}");
    let bound = String::from_utf8_lossy(&out.stdout);
    assert!(bound.contains("lockfile"), "{bound}");
}
